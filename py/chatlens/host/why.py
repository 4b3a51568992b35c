"""Why each reply token, for a terminal: the candidates a record's top_k holds, one line a step."""

from .. import defaults


def is_near_tie(step, gap=defaults.NEAR_TIE_GAP) -> bool:
    """Whether a step's two best candidates ([id, logit, probability], best first) are nearly tied."""
    return len(step) > 1 and step[0][1] - step[1][1] < gap


def show_top_k(reply_tokens, top_k, top_k_tokens, shown=5) -> list:
    """Lines for `/show`: each reply token, then its `shown` best candidates as
    'token' probability% (logit); near-ties marked."""
    out = [f"--- why each token: the {len(top_k[0]) if top_k else 0} best candidates a step "
           f"(* near-tie: the two best within {defaults.NEAR_TIE_GAP} logits) ---"]
    for n, (token, step, texts) in enumerate(zip(reply_tokens, top_k, top_k_tokens)):
        mark = "*" if is_near_tie(step) else " "
        cands = "  ".join(f"{t!r} {100 * p:.1f}% ({logit:.2f})" for (_, logit, p), t in zip(step[:shown], texts))
        out.append(f"{mark}{n:3d} {token!r:>14}  {cands}")
    return out
