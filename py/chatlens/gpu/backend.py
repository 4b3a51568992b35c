"""WebGPUBackend: chatlens.backend's seam over a GPU program and an executor.

The executor is the host's (native.NativeExecutor in CPython, a bridge to
site/js/gpu/executor.mjs in Pyodide); both offer
    run(sequences: list[str], params: bytes, readback: str | None) -> bytes
so this class runs unchanged in both. Pure Python; NumPy only for last_logits().
"""

import math
import struct

from ..backend import Step
from ..errors import ChatlensError
from .program import step_params


class WebGPUBackend:
    def __init__(self, program: dict, executor, name: str = "webgpu"):
        self.meta = program["meta"]
        self.executor = executor
        self.name = name
        self.capacity = self.meta["n_ctx"]
        self.length = 0
        self.vocab = self.meta["vocab"]
        self._chosen = None  # the id the GPU's argmax last wrote (the `chosen` buffer holds it)

    def prefill(self, ids, top_k: int = 0) -> Step:
        ids = [int(i) for i in ids]
        if not ids:
            raise ChatlensError("prefill needs at least one token")
        self._check(ids)
        chunk = self.meta["chunk"]
        for at in range(0, len(ids), chunk):
            part = ids[at:at + chunk]
            last = at + chunk >= len(ids)
            # A lone token takes the decode path: matvecs instead of a mostly empty matmul tile.
            body = "decode" if len(part) == 1 else "prefill"
            if last:
                return self._run(body, part, top_k)
            self.executor.run([body], step_params(self.meta, self.length, part), None)
            self.length += len(part)

    def decode(self, token_id: int, top_k: int = 0) -> Step:
        token_id = int(token_id)
        self._check([token_id])
        return self._run("decode", [token_id], top_k)

    def truncate(self, n: int) -> None:
        self.length = max(0, min(int(n), self.length))  # the cache past `length` is simply overwritten

    def reset(self) -> None:
        self.length = 0

    def last_logits(self):
        """The last step's logits (vocab,), read back whole: for parity tests, not the seam."""
        import numpy as np

        return np.frombuffer(self.executor.run([], b"", "logits"), dtype="<f4")[:self.vocab].copy()

    def _check(self, ids):
        if self.length + len(ids) > self.capacity:
            raise ChatlensError(f"the KV cache holds {self.capacity} tokens; {self.length} + {len(ids)} do not fit")
        if max(ids) >= self.vocab or min(ids) < 0:
            raise ChatlensError(f"token id out of range 0..{self.vocab - 1}")

    def _run(self, body: str, ids, top_k: int) -> Step:
        # The next decode's embed reads the id where the argmax left it, when it is that id.
        use_argmax = body == "decode" and ids[0] == self._chosen
        k = min(max(int(top_k), 0), self.vocab)
        on_gpu = 0 < k <= self.meta["top_k_max"]
        params = step_params(self.meta, self.length, ids, use_argmax=use_argmax, top_k=k if on_gpu else 0)
        sequences = [body, "head"] + (["top_k"] if on_gpu else [])
        raw = self.executor.run(sequences, params, "top_k" if on_gpu else "id")
        self.length += len(ids)
        if on_gpu:
            pairs = struct.unpack(f"<{2 * k}I", raw[:8 * k])
            best = tuple((pairs[2 * i], struct.unpack("<f", struct.pack("<I", pairs[2 * i + 1]))[0]) for i in range(k))
            # after the K_MAX pairs: the vocabulary's max and sum of exp(logit - max), in float32
            at = 8 * self.meta["top_k_max"]
            big, total = struct.unpack("<ff", raw[at:at + 8])
            self._chosen = best[0][0]  # the argmax and top-k share the tie rule: the same id
            return Step(self._chosen, best, big + math.log(total))
        self._chosen = struct.unpack("<I", raw[:4])[0]
        if k:  # more than the GPU's top-k holds: sort the whole vocabulary here
            logits = struct.unpack(f"<{self.vocab}f", self.executor.run([], b"", "logits")[:4 * self.vocab])
            best = sorted(range(self.vocab), key=lambda i: (-logits[i], i))[:k]
            big = max(logits)
            log_z = big + math.log(math.fsum(math.exp(x - big) for x in logits))
            return Step(self._chosen, tuple((i, logits[i]) for i in best), log_z)
        return Step(self._chosen)
