"""Greedy decoding: one loop for every backend (see chatlens.backend for the seam it uses).

The loop feeds the new prompt ids, then takes the id the backend chose each step until the
end-of-turn id, the limit, or a stop request. The last chosen id is never fed back: afterwards
the stepper holds the fed ids plus every generated id but the last.
"""

import time
from dataclasses import dataclass, field

from .backend import ranked


@dataclass
class Generation:
    ids: list = field(default_factory=list)  # new ids, the end-of-turn id included if written
    stop_reason: str = "max_tokens"  # "end_turn", "max_tokens" or "stopped"
    top_k: list = field(default_factory=list)  # per reply id, its step's [[id, logit, probability], ...] when asked
    prefill_tokens: int = 0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0


def greedy(stepper, ids, *, eos_id, max_new_tokens, on_token=None, should_stop=None, top_k=0) -> Generation:
    """Feed `ids` after what `stepper` (a Backend, or a chatlens.cache.PromptCache) holds, then
    choose up to max_new_tokens ids greedily.

    on_token(id) is called as each id is chosen. should_stop() is asked before each chosen id
    is fed back: when it says yes, the reply ends there with stop_reason "stopped" (the ids
    chosen so far are kept). top_k > 0 records each step's best ids, logits and probabilities
    (chatlens.backend.ranked), best first; the chosen id is always the first.
    """
    out = Generation(prefill_tokens=len(ids))
    t0 = time.perf_counter()
    step = stepper.prefill(ids, top_k)
    t1 = time.perf_counter()
    out.prefill_ms = (t1 - t0) * 1000
    while max_new_tokens > 0:
        out.ids.append(step.id)
        if top_k:
            out.top_k.append(ranked(step))
        if on_token is not None:
            on_token(step.id)
        if step.id == eos_id:
            out.stop_reason = "end_turn"
            break
        if len(out.ids) >= max_new_tokens:
            break
        if should_stop is not None and should_stop():
            out.stop_reason = "stopped"
            break
        step = stepper.decode(step.id, top_k)
    out.decode_ms = (time.perf_counter() - t1) * 1000
    return out
