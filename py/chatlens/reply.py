"""What the model wrote, built once for every answer that carries a reply.

The turn record (chatlens.record.TurnRecord), a plain-text continuation (chatlens.complete) and
each of the comparison's four (chatlens.compare) carry a reply under the same names
(chatlens.contract.Reply). `reply_of` builds it from the greedy loop's Generation; nothing else
does.
"""

from .contract import Reply
from .record import candidate_bytes, candidate_tokens, token_lists


def timings(gen) -> dict:
    """A reply's timings, from a chatlens.generate.Generation."""
    decoded = max(len(gen.ids) - 1, 0)  # ids fed back after the prefill (the last is never fed)
    return {
        "prefill_ms": round(gen.prefill_ms, 3),
        "decode_ms": round(gen.decode_ms, 3),
        "prefill_tok_s": round(1000.0 * gen.prefill_tokens / gen.prefill_ms, 2) if gen.prefill_ms > 0 else None,
        "decode_tok_s": round(1000.0 * decoded / gen.decode_ms, 2) if gen.decode_ms > 0 else None,
    }


def reply_of(tokenizer, eos_id, gen, *, reused: int, backend: str | None, top_k: int = 0) -> Reply:
    """The reply `gen` (a chatlens.generate.Generation) holds, read with `tokenizer`: its text stops
    before eos_id; its candidates are there when the reply was asked for top_k. `reused`: the
    prompt tokens the cache held; the model read the rest of the prompt (gen.prefill_tokens:
    fewer when it was stopped while reading). `backend` None: nothing computed it (a reply a stop
    kept from starting)."""
    lists = token_lists(tokenizer, gen.ids, "reply_")
    ids = lists["reply_ids"]
    words = ids[:-1] if ids and ids[-1] == eos_id else ids
    asked = bool(top_k)
    return Reply(**lists,
                 reply_text=tokenizer.decode(words),
                 stop_reason=gen.stop_reason,
                 top_k=[list(step) for step in gen.top_k] if asked else None,
                 top_k_tokens=candidate_tokens(tokenizer, gen.top_k) if asked else None,
                 top_k_bytes=candidate_bytes(tokenizer, gen.top_k) if asked else None,
                 reused_tokens=reused,
                 computed_tokens=gen.prefill_tokens,
                 backend=backend,
                 timings=timings(gen) if backend is not None else None)
