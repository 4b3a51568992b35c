"""The seam between the decoding loop and whatever computes the model (NumPy, WebGPU).

A backend owns the model's KV cache and chooses the next token itself: `prefill` and `decode`
return a `Step` (the chosen id, and the best logits only when asked), so a backend on another
device sends back 4 bytes a token instead of the whole vocabulary's logits, and the greedy
loop (chatlens.generate) stays one loop for every backend.

Tie rule, the same for every backend: the chosen id is the argmax of the step's logits, and
among equal maxima the lowest id (NumPy's `argmax`). `top_k` lists are best first, equal
logits ordered by lower id.
"""

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable


@dataclass(frozen=True)
class Step:
    """What one forward step hands back to the loop."""
    id: int  # the chosen next token: argmax of the logits, lowest id among equal maxima
    top_k: tuple = ()  # ((id, logit), ...) best first, when the call asked for top_k > 0


@runtime_checkable
class Backend(Protocol):
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


def top_k_of(logits, k: int) -> tuple:
    """The k best (id, logit) pairs of a NumPy logits vector, by the seam's tie rule."""
    import numpy as np

    if k <= 0:
        return ()
    k = min(int(k), logits.shape[-1])
    # A stable sort of -logits keeps equal logits in id order.
    best = np.argsort(-logits, kind="stable")[:k]
    return tuple((int(i), float(logits[i])) for i in best)
