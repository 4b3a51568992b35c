"""The KV cache as one object: a backend and the ids whose keys and values it holds.

A chat turn's prompt usually starts with what the model read and wrote last turn, so only
the rest needs computing. The cache says how much of a prompt it can reuse, truncates to
that, and runs the prefill and the greedy loop, keeping its ids equal to what the backend
holds; when a backend call fails part-way, what the backend holds is unknown, so it empties.
Under a `pace` (chatlens.pace: the page's NumPy), it times each step it computes, and the jobs
over it size their steps by that time.
"""

from contextlib import nullcontext

from .backend import Backend, Step
from .generate import Generation
from .pull import Pull, greedy


def common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PromptCache:
    def __init__(self, backend: Backend, pace=None):
        self.backend = backend
        self.ids: list = []  # exactly the ids whose keys and values the backend holds, in order
        self.pace = pace  # a chatlens.pace.Pace that times the steps computed here, or None

    def _timed(self, rows: int, kind: str = "read"):
        return self.pace.timing(rows, kind) if self.pace is not None else nullcontext()

    @property
    def capacity(self) -> int:
        return self.backend.capacity

    @property
    def length(self) -> int:
        return len(self.ids)

    @property
    def chunk(self) -> int:
        """The most prompt ids the backend takes in one step (0: any number)."""
        return getattr(self.backend, "chunk", 0)

    @property
    def planned(self) -> bool:
        """Whether the backend plans GPU runs that its host submits (chatlens.pull)."""
        return bool(getattr(self.backend, "planned", False))

    def reusable(self, prompt_ids) -> int:
        """How many leading ids of `prompt_ids` are cached already. At most all but the last:
        the step after the last prompt id gives the first reply id, so it is always computed."""
        return min(common_prefix(prompt_ids, self.ids), max(len(prompt_ids) - 1, 0))

    def truncate(self, n: int) -> None:
        self.backend.truncate(n)
        del self.ids[n:]

    def reset(self) -> None:
        self.backend.reset()
        self.ids = []

    def prefill(self, ids, top_k: int = 0) -> Step:
        ids = list(ids)
        with self._timed(len(ids)):
            step = self._guarded(self.backend.prefill, ids, top_k)
        self.ids += ids
        return step

    # A planned backend's steps (chatlens.pull): the ids count as cached once their run's bytes
    # are read; runs planned past that are undone with truncate.
    def plan(self, ids, top_k: int = 0, *, chooses: bool = True, hidden=None):
        if hidden:  # a knockout's chunk that scores no row (chatlens.passes)
            return self._guarded(self.backend.plan, ids, top_k, chooses=chooses, hidden=hidden)
        return self._guarded(self.backend.plan, ids, top_k, chooses=chooses)

    def read(self, run, raw: bytes, ids) -> Step | None:
        step = self._guarded(self.backend.read, run, raw, ids)
        self.ids += list(ids)
        return step

    # An inspection's step (chatlens.inspection): the token is cached as any step's is.
    def inspect(self, token_id: int):
        with self._timed(1, "scored"):
            out = self._guarded(self.backend.inspect, token_id)
        self.ids.append(int(token_id))
        return out

    def plan_inspect(self, token_id: int, top_k: int):
        return self._guarded(self.backend.plan_inspect, token_id, top_k)

    def read_inspect(self, run, raw: bytes, token_id: int):
        out = self._guarded(self.backend.read_inspect, run, raw)
        self.ids.append(int(token_id))
        return out

    # A counterfactual's scored step (chatlens.cause): ids fed after the cache, and each scored
    # row's target logit, normalizer and best id. Hidden keys' runs cache ids whose keys and
    # values saw a mask: the job truncates them away as soon as their pass ends.
    def score(self, ids, *, score_from: int, next_id: int, hidden=None) -> list:
        ids = [int(i) for i in ids]
        with self._timed(len(ids), "scored"):
            rows = self._guarded(self.backend.score, ids, score_from=score_from, next_id=next_id, hidden=hidden)
        self.ids += ids
        return rows

    def score_many(self, runs) -> list:
        """Several passes at once, runs ((start, ids, score_from, next_id, hidden), ...), starts not
        increasing, as if each were score()d in turn after truncate(start) (the backend's
        score_many): their scored rows, a list a pass. The cache then holds the last pass's."""
        runs = [(int(s), [int(i) for i in ids], int(f), int(n), h) for s, ids, f, n, h in runs]
        with self._timed(sum(len(ids) for _, ids, *_ in runs), "scored"):
            rows = self._guarded(self.backend.score_many, runs)
        start, ids, *_ = runs[-1]
        self.ids = self.ids[:start] + ids
        return rows

    def plan_score(self, ids, *, score_from: int, next_id: int, hidden=None):
        return self._guarded(self.backend.plan_score, ids, score_from=score_from, next_id=next_id, hidden=hidden)

    def read_score(self, run, raw: bytes, ids) -> list:
        rows = self._guarded(self.backend.read_score, run, raw)
        self.ids += [int(i) for i in ids]
        return rows

    def kept(self, start: int):
        """What the backend holds from `start` on, for put_back (None: a backend that cannot keep it,
        whose positions are computed again instead)."""
        keep = getattr(self.backend, "kept", None)
        return None if keep is None else (list(self.ids), self._guarded(keep, start))

    def put_back(self, kept) -> None:
        """The cache as kept() saw it: its positions from there written back, its ids those ids."""
        ids, held = kept
        self._guarded(self.backend.put_back, held)
        self.ids = list(ids)

    def regrow(self, ids) -> None:
        """After an inspection in place (chatlens.inspection), the ids it held past the inspected
        one, cached again (the backend's regrow)."""
        ids = [int(i) for i in ids]
        self._guarded(self.backend.regrow, len(self.ids) + len(ids))
        self.ids += ids

    def submit(self, run):
        return self._guarded(self.backend.submit, run)

    def collect(self, ticket) -> bytes:
        return self._guarded(self.backend.collect, ticket)

    def _guarded(self, call, *args, **kwargs):
        try:
            return call(*args, **kwargs)
        except BaseException:
            self.reset()
            raise

    def generate(self, prompt_ids, *, eos_id, max_new_tokens, on_token=None, should_stop=None,
                 top_k=0) -> tuple[int, Generation]:
        """Reuse the cached prefix of `prompt_ids`, compute the rest, then reply greedily
        (chatlens.pull.greedy). Returns (reused token count, the Generation)."""
        reuse = self.reusable(prompt_ids)
        self.truncate(reuse)
        pull = Pull(self, prompt_ids[reuse:], eos_id=eos_id, max_new_tokens=max_new_tokens, top_k=top_k)
        gen = greedy(pull, on_token=on_token and (lambda chosen: on_token(chosen.id)), should_stop=should_stop)
        return reuse, gen
