"""The seam between the decoding loop and whatever computes the model (NumPy, WebGPU).

A backend owns the model's KV cache and chooses the next token itself: `prefill` and `decode`
return a `Step` (the chosen id, and the best logits only when asked), so a backend on another
device sends back 4 bytes a token instead of the whole vocabulary's logits, and the greedy
loop (chatlens.generate) stays one loop for every backend.

Tie rule, the same for every backend: the chosen id is the argmax of the step's logits, and
among equal maxima the lowest id (NumPy's `argmax`). `top_k` lists are best first, equal
logits ordered by lower id.

Probabilities need the softmax's normalizer over the whole vocabulary, which no top-k list
holds: a step that was asked for top_k also carries `log_z`, the logsumexp of its logits, so
p(id) = exp(logit - log_z) (`ranked`). A step without top_k computes neither.
"""

import math

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class Step:
    """What one forward step hands back to the loop."""
    id: int  # the chosen next token: argmax of the logits, lowest id among equal maxima
    top_k: tuple = ()  # ((id, logit), ...) best first, when the call asked for top_k > 0
    log_z: float | None = None  # log(sum(exp(logits))) over the whole vocabulary, with top_k


@runtime_checkable
class Backend(Protocol):
    """What computes the model. Optionally also: `chunk`, the most prompt ids one step takes (the
    loop feeds longer prompts in chunks a stop can fall between), and `planned` with plan / read /
    submit / collect: a GPU whose steps its host runs, several in flight (chatlens.pull)."""
    name: str  # what computes, for the turn record: "numpy", "webgpu: <adapter>"
    capacity: int  # most tokens the cache can hold
    length: int  # tokens whose keys and values are in the cache now

    def prefill(self, ids: Sequence[int], top_k: int = 0) -> Step:
        """Append ids (at least one) to the cache; the step after the last of them."""

    def decode(self, token_id: int, top_k: int = 0) -> Step:
        """Append one id to the cache; the step after it."""

    def truncate(self, n: int) -> None:
        """Keep the first n cached tokens (n beyond `length` keeps them all), so a later prompt
        reuses a common prefix."""

    def reset(self) -> None:
        """Forget everything in the cache."""


class Regrows:
    """regrow, for a backend whose cache slots past `length` keep what they held: hold n tokens again
    after a truncate. Only an inspection ran meanwhile, rewriting its own position with the same
    token (chatlens.inspection: the reply after an inspected step stays cached)."""

    def regrow(self, n: int) -> None:
        from .errors import ChatlensError

        if not self.length <= n <= self.capacity:
            raise ChatlensError(f"cannot hold {n} tokens again: the cache holds {self.length} of {self.capacity}")
        self.length = int(n)


def top_k_of(logits, k: int) -> tuple:
    """The k best (id, logit) pairs of a NumPy logits vector, by the seam's tie rule."""
    import numpy as np

    if k <= 0:
        return ()
    k = min(int(k), logits.shape[-1])
    # A stable sort of -logits keeps equal logits in id order.
    best = np.argsort(-logits, kind="stable")[:k]
    return tuple((int(i), float(logits[i])) for i in best)


def log_z_of(logits) -> float:
    """The logsumexp of a NumPy logits vector, in float64 (shifted by the maximum, so nothing
    overflows)."""
    import numpy as np

    x = np.asarray(logits, dtype=np.float64)
    m = float(x.max())
    return m + math.log(float(np.exp(x - m).sum()))


def step_of(logits, k: int) -> Step:
    """The Step a backend that holds its logits in NumPy returns: the argmax, and with k > 0
    the k best and the normalizer."""
    import numpy as np

    chosen = int(np.argmax(logits))
    if k <= 0:
        return Step(chosen)
    return Step(chosen, top_k_of(logits, k), log_z_of(logits))


def ranked(step: Step) -> list:
    """The step's candidates as [[id, logit, probability], ...], best first (the record's
    top_k for one reply token)."""
    if not step.top_k:
        return []
    if step.log_z is None:
        raise ValueError("a step with top_k must carry log_z to give probabilities")
    return [[int(i), float(logit), math.exp(float(logit) - step.log_z)] for i, logit in step.top_k]
