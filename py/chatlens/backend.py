"""The seam between the decoding loop and whatever computes the model (NumPy now, WebGPU later).

A backend owns the KV cache. The loop only feeds token ids and reads logits back, so a
backend on another device replaces NumPy without touching tokenizer, template or window.
"""

from typing import Protocol, Sequence


class Backend(Protocol):
    capacity: int  # most tokens the cache can hold
    length: int  # tokens whose keys and values are in the cache now

    def prefill(self, ids: Sequence[int]):
        """Append ids to the cache; return the logits after the last one (1-D, vocab size)."""

    def decode(self, token_id: int):
        """Append one id; return the logits after it."""

    def truncate(self, n: int) -> None:
        """Keep the first n cached tokens, so a later prompt can reuse a common prefix."""

    def reset(self) -> None:
        """Forget everything in the cache."""
