"""Greedy decoding: one loop for every backend, a generator its caller pulls.

`decoding(ids, ...)` never calls out. It yields what it needs next and is sent each step's
result:

    Feed(ids, top_k, wants_step)   feed these ids after what the cache holds; send back the Step
                                   after the last of them (None when wants_step is False: a
                                   prefill chunk that is not the last chooses nothing)
    Chosen(id)                     a reply id, as it is chosen; send None

and ends (StopIteration.value) with the Generation. The prompt is fed in chunks, so a caller can
stop between any two pulls: throwing `Stop` into the loop ends it there, with stop_reason
"stopped" and only the ids chosen so far. The last chosen id is never fed back: afterwards the
cache holds the fed ids plus every generated id but the last.

Who computes the steps is the caller's business: chatlens.pull.Pull, which keeps GPU steps in
flight and lets the page's JavaScript run them, and its synchronous driver chatlens.pull.greedy
(the command line, NumPy, native wgpu).
"""

import time
from dataclasses import dataclass, field

from .backend import ranked


@dataclass
class Generation:
    ids: list = field(default_factory=list)  # new ids, the end-of-turn id included if written
    stop_reason: str = "max_tokens"  # "end_turn", "max_tokens" or "stopped"
    top_k: list = field(default_factory=list)  # per reply id, its step's [[id, logit, probability], ...] when asked
    prefill_tokens: int = 0  # prompt ids fed (fewer than the prompt's when stopped while reading it)
    prefill_ms: float = 0.0
    decode_ms: float = 0.0


@dataclass(frozen=True)
class Feed:
    """What the loop needs: `ids` fed after what the cache holds."""
    ids: tuple
    top_k: int = 0  # > 0: the step carries the K best and the normalizer (chatlens.backend.Step)
    wants_step: bool = True  # False: a prefill chunk before the last; nothing is chosen after it


@dataclass(frozen=True)
class Chosen:
    """A reply id, the moment the loop chose it."""
    id: int
    top_k: tuple = ()  # its step's [id, logit, probability] rows when asked (ranked)


class Stop(Exception):
    """Thrown into `decoding` by a caller whose user asked to stop."""


def decoding(ids, *, eos_id, max_new_tokens, top_k=0, chunk=0):
    """The greedy loop over prompt `ids` (fed in chunks of `chunk`, 0 for one), choosing up to
    max_new_tokens ids: the argmax of each step (the backend chooses it), until eos_id."""
    ids = [int(i) for i in ids]
    out = Generation()
    chunk = int(chunk) or len(ids) or 1
    clock = time.perf_counter
    t0 = t1 = clock()
    read = False  # the whole prompt fed: the time after it is the decode's
    try:
        for at in range(0, len(ids), chunk):
            last = at + chunk >= len(ids)
            step = yield Feed(tuple(ids[at:at + chunk]), top_k if last else 0, wants_step=last)
            out.prefill_tokens += len(ids[at:at + chunk])
        t1, read = clock(), True
        while max_new_tokens > 0:
            out.ids.append(step.id)
            candidates = ranked(step) if top_k else []
            if top_k:
                out.top_k.append(candidates)
            yield Chosen(step.id, tuple(candidates))
            if step.id == eos_id:
                out.stop_reason = "end_turn"
                break
            if len(out.ids) >= max_new_tokens:
                break
            step = yield Feed((step.id,), top_k)
    except Stop:
        out.stop_reason = "stopped"
    now = clock()
    out.prefill_ms = ((t1 if read else now) - t0) * 1000  # stopped while the prompt was read: all of it
    out.decode_ms = (now - t1) * 1000 if read else 0.0
    return out

