"""Plain text against the template: the model continues any text, with no chat template around it.

The lesson's experiment: "What is the capital of France?" as plain text makes `<|im_end|>` the
most likely next token (the model has learnt that such a line is a whole message), while the
same words inside the template get an answer. The text is tokenized as it is (special tokens
written in it are matched as the tokens they name, nothing is added), then the greedy loop
continues it until the end-of-turn token, the limit or a stop request, exactly as a reply.

One function for the command line (`python -m chatlens complete`) and the page's worker.
No numpy here: the backend computes.
"""

from .cache import PromptCache
from .chat import timings
from .errors import ChatlensError
from .record import candidate_bytes, candidate_tokens, token_lists


def tokenized(tokenizer, text) -> dict:
    """The text's tokens without a template, named as in the turn record (chatlens.record):
    prompt_ids, prompt_tokens, prompt_vocab, prompt_bytes, and the distinct special ids among
    them (the page draws those as chips)."""
    if not isinstance(text, str):
        raise ChatlensError(f"the text must be a string, not {type(text).__name__}")
    ids = tokenizer.encode(text)
    return {**token_lists(tokenizer, ids, "prompt_"), "special_ids": tokenizer.specials_in(ids)}


def complete(tokenizer, eos_id, cache: PromptCache, text, *, max_new_tokens, top_k=0, on_token=None,
             should_stop=None) -> dict:
    """Continue `text` greedily with the model behind `cache` (reusing what it holds of the
    prompt). Returns `continuation`'s JSON-able data. on_token(id) is called as each id is chosen;
    should_stop() is asked between steps, as chatlens.pull.greedy asks it."""
    out = prepared(tokenizer, cache, text, max_new_tokens)
    reused, gen = cache.generate(out["prompt_ids"], eos_id=eos_id, max_new_tokens=max_new_tokens, on_token=on_token,
                                 should_stop=should_stop, top_k=top_k)
    return continuation(tokenizer, eos_id, out, reused, gen, cache.backend.name, top_k)


def prepared(tokenizer, cache, text, max_new_tokens) -> dict:
    """The text's tokens (`tokenized`), checked: something to continue, room for the new tokens."""
    out = tokenized(tokenizer, text)
    ids = out["prompt_ids"]
    if not ids:
        raise ChatlensError("the text is empty: there is nothing to continue")
    max_new_tokens = int(max_new_tokens)
    if max_new_tokens < 1:
        raise ChatlensError("the continuation needs at least 1 new token")
    if len(ids) + max_new_tokens > cache.capacity:
        raise ChatlensError(f"{len(ids)} tokens of text + {max_new_tokens} new tokens exceed the {cache.capacity} "
                            "the model's cache holds")
    return out


def continuation(tokenizer, eos_id, out: dict, reused: int, gen, backend_name: str, top_k=0) -> dict:
    """`prepared`'s data completed with the continuation `gen` (a chatlens.generate.Generation):
      prompt_ids, prompt_tokens, prompt_vocab, prompt_bytes, special_ids   the text's tokens (`tokenized`)
      ids            the continuation's ids, the end-of-turn id included when written
      tokens, vocab, bytes   each continuation id's text, vocabulary form and bytes (hex), as
                     the turn record's reply_tokens, reply_vocab and reply_bytes
      text           the continuation as text, without the end-of-turn token
      stop_reason    "end_turn", "max_tokens" or "stopped"; eos_id the end-of-turn id
      top_k          one list per continuation id of [id, logit, probability], best first, when
                     top_k > 0 (else None); top_k_tokens their tokens as text, top_k_bytes
                     their bytes
      reused_tokens, backend, timings   as in the turn record"""
    words = gen.ids[:-1] if gen.ids and gen.ids[-1] == eos_id else gen.ids
    out = {**out, **token_lists(tokenizer, gen.ids)}
    out.update({
        "text": tokenizer.decode(words),
        "stop_reason": gen.stop_reason,
        "eos_id": eos_id,
        "top_k": [list(step) for step in gen.top_k] if top_k else None,
        "top_k_tokens": candidate_tokens(tokenizer, gen.top_k) if top_k else None,
        "top_k_bytes": candidate_bytes(tokenizer, gen.top_k) if top_k else None,
        "reused_tokens": reused,
        "backend": backend_name,
        "timings": timings(gen),
    })
    return out
