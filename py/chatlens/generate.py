"""Greedy decoding over any Backend: the argmax each step, until end of turn or the limit."""

import time
from dataclasses import dataclass, field


@dataclass
class Generation:
    ids: list = field(default_factory=list)  # new ids, including the end-of-turn id if written
    stop_reason: str = "max_tokens"  # "end_turn" or "max_tokens"
    first_logits: object = None  # logits of the first step (for top-k views)
    prefill_tokens: int = 0
    prefill_ms: float = 0.0
    decode_ms: float = 0.0


def argmax(logits) -> int:
    # Plain max/index so a backend may hand back a list (WebGPU) as well as a NumPy array.
    if hasattr(logits, "argmax"):
        return int(logits.argmax())
    return max(range(len(logits)), key=logits.__getitem__)


def generate(backend, ids, *, eos_id, max_new_tokens=96, on_token=None) -> Generation:
    """Feed `ids` after what the cache holds, then choose up to max_new_tokens greedily.

    The last chosen token is never fed back, so afterwards the cache holds the fed ids plus
    every generated id but the last: callers that reuse the cache rely on exactly that.
    """
    out = Generation(prefill_tokens=len(ids))
    t0 = time.perf_counter()
    logits = backend.prefill(ids)
    t1 = time.perf_counter()
    out.prefill_ms = (t1 - t0) * 1000
    out.first_logits = logits
    while max_new_tokens > 0:
        token = argmax(logits)
        out.ids.append(token)
        if on_token is not None:
            on_token(token)
        if token == eos_id:
            out.stop_reason = "end_turn"
            break
        if len(out.ids) >= max_new_tokens:
            break
        logits = backend.decode(token)
    out.decode_ms = (time.perf_counter() - t1) * 1000
    return out
