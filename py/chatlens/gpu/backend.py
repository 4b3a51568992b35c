"""WebGPUBackend: chatlens.backend's seam over a GPU program, its steps planned as data.

A step is a `Run`: the named sequences of dispatches, the step buffer's bytes and what to read
back. `plan` makes one (and counts its tokens as cached), `read` turns the bytes it read back
into a Step. Whoever holds the GPU runs it in between:

- natively, an executor (chatlens.host.native_gpu.NativeExecutor) with submit(run) -> ticket and collect(ticket)
  -> bytes, so steps can be in flight (chatlens.pull), and prefill/decode, which run one step
  and wait for it;
- in the browser, the worker's JavaScript (site/js/gpu/executor.mjs), which submits each run
  and hands Python its bytes (chatlens.worker's reply requests): Python never waits for the GPU.

An inspection (chatlens.inspection) is one more kind of run: `plan_inspect` feeds one token as
decode does and keeps what the inspection shows, `read_inspect` reads its one readback. Runs
are submitted the same way (the executor needs no change: a run names its readback).

A scored pass (chatlens.cause's counterfactuals) is another: `plan_score` feeds ids as a prefill
chunk does (keys hidden from them with `hidden`) and scores its rows from `score_from` on,
`read_score` reads each scored row's (target_logit, log_z, top_id, top_logit); `score` runs a
whole pass here, as NumpyBackend.score does.

Pure Python; NumPy only for last_logits().
"""

import math
import struct
from dataclasses import dataclass

from ..backend import Regrows, Step
from ..errors import ChatlensError
from ..passes import chunks
from .program import MAX_HIDDEN, step_params


@dataclass(frozen=True)
class Run:
    """One step of the GPU program, as its host submits it."""
    sequences: tuple  # names of the program's sequences, run in one compute pass
    params: bytes  # the step buffer's words (program.step_params)
    readback: str | None  # the readback whose bytes the step returns, None for none
    n: int  # tokens it feeds (and caches)
    chooses: bool  # whether it ends with the head: an id chosen (and top-k when asked)
    top_k: int = 0

    def to_json(self) -> dict:
        words = len(self.params) // 4
        return {"sequences": list(self.sequences), "params": list(struct.unpack(f"<{words}I", self.params)),
                "readback": self.readback, "tokens": self.n, "chooses": self.chooses}


class WebGPUBackend(Regrows):
    planned = True  # its steps are Runs a host submits (chatlens.pull)

    def __init__(self, program: dict, executor=None, name: str = "webgpu"):
        """executor: the native host's (None where the host runs the Runs itself: the browser)."""
        self.meta = program["meta"]
        self.executor = executor
        self.name = name
        self.capacity = self.meta["n_ctx"]
        self.chunk = self.meta["chunk"]
        self.length = 0  # tokens planned into the cache (runs in flight included)
        self.vocab = self.meta["vocab"]

    # -- planned steps ---------------------------------------------------------------------------
    def plan(self, ids, top_k: int = 0, *, chooses: bool = True, hidden=None) -> Run:
        """The run that feeds `ids` (at most `chunk` of them) after the cache, or with ids None
        the id the GPU's last argmax wrote; with `chooses`, the head and argmax after it (and the
        top-k when top_k > 0). hidden = ((a, b), ...): key ranges hidden from every fed token (the
        prefill_hidden bodies, NumpyBackend.score's `hidden`); its ids' keys and values are cached
        as they were computed, under the mask."""
        if ids is None:
            if hidden is not None:
                raise ChatlensError("keys are hidden only from ids the step is given")
            tokens, use_argmax = [0], True  # the embedding reads the `chosen` buffer, not the step
        else:
            tokens, use_argmax = self._tokens(ids), False
        self._fits(len(tokens))
        hidden = self._hidden(hidden)
        # A lone token takes the decode path: matvecs instead of a mostly empty matmul tile (there
        # is no hidden decode: a lone hidden token takes the prefill body). While the keys fit one
        # attention workgroup, the short sequences write attention's output in one dispatch (no
        # merge: 5 a layer, program.py).
        body = self._body("decode" if len(tokens) == 1 and hidden is None else "prefill", len(tokens), hidden)
        k = min(max(int(top_k), 0), self.vocab) if chooses else 0
        on_gpu = 0 < k <= self.meta["top_k_max"]
        params = step_params(self.meta, self.length, tokens, use_argmax=use_argmax, top_k=k if on_gpu else 0,
                             hidden=hidden)
        if not chooses:
            run = Run((body,), params, None, len(tokens), False)
        elif on_gpu:
            run = Run((body, "head", "top_k"), params, "top_k", len(tokens), True, k)
        else:  # more candidates than the GPU's top-k holds: the whole vocabulary is read back
            run = Run((body, "head"), params, "logits" if k else "id", len(tokens), True, k)
        self.length += len(tokens)
        return run

    def read(self, run: Run, raw: bytes, ids=None) -> Step | None:
        """The Step of a run from the bytes it read back (None for a run that chooses nothing)."""
        if not run.chooses:
            return None
        if run.readback == "top_k":
            k = run.top_k
            pairs = struct.unpack(f"<{2 * k}I", raw[:8 * k])
            best = tuple((pairs[2 * i], struct.unpack("<f", struct.pack("<I", pairs[2 * i + 1]))[0]) for i in range(k))
            # after the K_MAX pairs: the vocabulary's max and sum of exp(logit - max), in float32
            at = 8 * self.meta["top_k_max"]
            big, total = struct.unpack("<ff", raw[at:at + 8])
            return Step(best[0][0], best, big + math.log(total))  # argmax and top-k share the tie rule
        if run.readback == "logits":
            logits = struct.unpack(f"<{self.vocab}f", raw[:4 * self.vocab])
            best = sorted(range(self.vocab), key=lambda i: (-logits[i], i))
            big = logits[best[0]]
            log_z = big + math.log(math.fsum(math.exp(x - big) for x in logits))
            return Step(best[0], tuple((i, logits[i]) for i in best[:run.top_k]), log_z)
        return Step(struct.unpack("<I", raw[:4])[0])

    def _tokens(self, ids) -> list:
        tokens = [int(i) for i in ids]
        if not tokens:
            raise ChatlensError("prefill needs at least one token")
        if len(tokens) > self.chunk:
            raise ChatlensError(f"a GPU step takes at most {self.chunk} tokens, not {len(tokens)}")
        if max(tokens) >= self.vocab or min(tokens) < 0:
            raise ChatlensError(f"token id out of range 0..{self.vocab - 1}")
        return tokens

    def _fits(self, n: int):
        if self.length + n > self.capacity:
            raise ChatlensError(f"the KV cache holds {self.capacity} tokens; {self.length} + {n} do not fit")

    @staticmethod
    def _hidden(hidden):
        """hidden as ((a, b), ...) of ints, 0 <= a <= b, at most MAX_HIDDEN ranges, or None (none)."""
        if not hidden:
            return None
        ranges = tuple((int(a), int(b)) for a, b in hidden)
        for a, b in ranges:
            if not 0 <= a <= b < 2 ** 32:
                raise ChatlensError(f"hidden keys run from a first to an end at or past it, not {a}..{b}")
        if len(ranges) > MAX_HIDDEN:
            raise ChatlensError(f"a knockout hides at most {MAX_HIDDEN} ranges of keys on the GPU, not {len(ranges)}")
        return ranges

    def _body(self, body: str, n_tokens: int, hidden) -> str:
        """The sequence that feeds n_tokens after the cache: `body` ("decode" or "prefill"), its
        hidden variant when keys are hidden, its short variant while the keys fit one attention
        workgroup."""
        if hidden is not None:
            if not self.meta.get("hidden"):
                raise ChatlensError("this GPU program was built without hidden-keys sequences; rebuild it")
            body = self.meta["hidden"]
        short = self.meta.get("short")
        if short and self.length + n_tokens <= short["keys"]:
            body = short[body]
        return body

    # -- a scored pass (chatlens.cause) ----------------------------------------------------------
    def plan_score(self, ids, *, score_from: int, next_id: int, hidden=None) -> Run:
        """The run that feeds `ids` (at most `chunk`) after the cache as a prefill chunk does (the key
        ranges hidden = ((a, b), ...) hidden from every one of them) and scores rows score_from..:
        row r's target is ids[r + 1], the last row's next_id. Its ids are counted into `length`
        (cached, hidden or not); read_score reads its one readback."""
        score = self.meta.get("score")
        if not score:
            raise ChatlensError("this GPU program was built without a score sequence; rebuild it")
        tokens = self._tokens(ids)
        self._fits(len(tokens))
        score_from, next_id = int(score_from), int(next_id)
        if not 0 <= score_from < len(tokens):
            raise ChatlensError(f"a score needs a first scored row among its ids, not {score_from} of {len(tokens)}")
        if not 0 <= next_id < self.vocab:
            raise ChatlensError(f"token id {next_id} is outside the vocabulary (0..{self.vocab - 1})")
        hidden = self._hidden(hidden)
        body = self._body(score["body"], len(tokens), hidden)
        params = step_params(self.meta, self.length, tokens, hidden=hidden, score_from=score_from, next_id=next_id)
        run = Run((body, score["sequence"]), params, score["readback"], len(tokens), False)
        self.length += len(tokens)
        return run

    def read_score(self, run: Run, raw: bytes) -> list:
        """(target_logit, log_z, top_id, top_logit) of each row a plan_score run scored, first
        scored row first: log_z = max + log(sum of exp(logit - max)), in double precision as
        read() takes top_k's, and top_logit the max."""
        score = self.meta.get("score")
        if not score or run.readback != score["readback"]:
            raise ChatlensError("read_score reads the bytes of a run plan_score made")
        fields = self.meta["step_fields"]
        n_tokens, score_from = (struct.unpack_from("<I", run.params, 4 * fields.index(f))[0]
                                for f in ("n_tokens", "score_from"))
        row = score["row_bytes"]
        out = []
        for r in range(score_from, n_tokens):
            target, big, total = struct.unpack_from("<fff", raw, r * row)
            top = struct.unpack_from("<I", raw, r * row + 12)[0]
            out.append((target, big + math.log(total), top, big))
        return out

    # -- an inspection (chatlens.inspection) -----------------------------------------------------
    def plan_inspect(self, token_id: int, top_k: int) -> Run:
        """The run that feeds `token_id` after the cache as decode does (its keys and values are
        cached) and keeps each layer's attention weights and each block's output, then the logit
        lens: each layer's top_k (id, logit) pairs and normalizer. One readback (read_inspect)."""
        inspect = self.meta.get("inspect")
        if not inspect:
            raise ChatlensError("this GPU program was built without inspect sequences; rebuild it")
        token, k = int(token_id), int(top_k)
        if not 0 <= token < self.vocab:
            raise ChatlensError(f"token id {token} is outside the vocabulary (0..{self.vocab - 1})")
        if not 0 < k <= inspect["top_k_max"]:
            raise ChatlensError(f"the logit lens lists 1 to {inspect['top_k_max']} candidates a layer, not {k}")
        if self.length + 1 > self.capacity:
            raise ChatlensError(f"the KV cache holds {self.capacity} tokens; {self.length} + 1 do not fit")
        body = inspect["body"]
        short = self.meta.get("short")
        if short and self.length + 1 <= short["keys"]:
            body = short[body]
        params = step_params(self.meta, self.length, [token], top_k=k)
        run = Run((body, inspect["lens"]), params, inspect["readback"], 1, True, k)
        self.length += 1
        return run

    def read_inspect(self, run: Run, raw: bytes) -> tuple:
        """(attention, lens) from an inspect run's bytes: attention[layer][head] the weights over
        the run's position + 1 keys (lists of floats); lens[layer] = (((id, logit), ...) best
        first, log_z), as read() reads a step's top-k."""
        inspect = self.meta.get("inspect")
        if not inspect or run.readback != inspect["readback"]:
            raise ChatlensError("read_inspect reads the bytes of a run plan_inspect made")
        layers, heads, k = inspect["layers"], inspect["heads"], run.top_k
        start = struct.unpack_from("<I", run.params, 4 * self.meta["step_fields"].index("start"))[0]
        n_keys = start + 1
        row = 8 * (self.meta["top_k_max"] + 1)  # one layer's top-k: K_MAX (id, logit), then (max, sum exp)
        lens = []
        for layer in range(layers):
            at = layer * row
            words = struct.unpack_from(f"<{2 * k}I", raw, at)
            logits = struct.unpack_from(f"<{2 * k}f", raw, at)
            big, total = struct.unpack_from("<ff", raw, at + row - 8)
            lens.append((tuple((words[2 * i], logits[2 * i + 1]) for i in range(k)), big + math.log(total)))
        flat = struct.unpack_from(f"<{layers * heads * n_keys}f", raw, inspect["attention_at"])
        attention = [[list(flat[(layer * heads + h) * n_keys:(layer * heads + h + 1) * n_keys]) for h in range(heads)]
                     for layer in range(layers)]
        return attention, lens

    # -- the native host: submit and collect, or one step at a time ------------------------------
    def submit(self, run: Run):
        return self._executor().submit(list(run.sequences), run.params, run.readback)

    def collect(self, ticket) -> bytes:
        return self._executor().collect(ticket)

    def prefill(self, ids, top_k: int = 0) -> Step:
        ids = [int(i) for i in ids]
        if not ids:
            raise ChatlensError("prefill needs at least one token")
        if self.length + len(ids) > self.capacity:
            raise ChatlensError(f"the KV cache holds {self.capacity} tokens; {self.length} + {len(ids)} do not fit")
        for at in range(0, len(ids), self.chunk):
            part = ids[at:at + self.chunk]
            run = self.plan(part, top_k, chooses=at + self.chunk >= len(ids))
            step = self.read(run, self.collect(self.submit(run)))
        return step

    def score(self, ids, *, score_from: int, next_id: int, hidden=None) -> list:
        """NumpyBackend.score on the GPU, run here: ids fed after the cache in chunks (the key ranges
        `hidden` hidden from every one), one (target_logit, log_z, top_id, top_logit)
        for each row from score_from on. A chunk that holds no scored row runs as a prefill chunk
        that chooses nothing (hidden ones with the hidden body); the rest as plan_score runs."""
        ids = [int(i) for i in ids]
        if not ids or not 0 <= int(score_from) < len(ids):
            raise ChatlensError(f"a score needs ids and a first scored row among them, not {score_from} of {len(ids)}")
        self._fits(len(ids))
        rows = []
        for _, part, scored, nxt in chunks(ids, self.chunk, int(score_from), next_id):
            if scored is None:
                self.collect(self.submit(self.plan(part, chooses=False, hidden=hidden)))
                continue
            run = self.plan_score(part, score_from=scored, next_id=nxt, hidden=hidden)
            rows += self.read_score(run, self.collect(self.submit(run)))
        return rows

    def decode(self, token_id: int, top_k: int = 0) -> Step:
        return self.prefill([int(token_id)], top_k)

    def truncate(self, n: int) -> None:
        self.length = max(0, min(int(n), self.length))  # the cache past `length` is simply overwritten

    def reset(self) -> None:
        self.length = 0

    def last_logits(self):
        """The last step's logits (vocab,), read back whole: for parity tests, not the seam."""
        import numpy as np

        ex = self._executor()
        return np.frombuffer(ex.collect(ex.submit([], b"", "logits")), dtype="<f4")[:self.vocab].copy()

    def _executor(self):
        if self.executor is None:
            raise ChatlensError("this backend's runs are submitted by its host (the browser's worker), not here")
        return self.executor
