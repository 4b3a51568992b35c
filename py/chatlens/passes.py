"""A plan of scored passes over the cache, and the one runner that feeds it, for either backend.

A `Pass` is a value: truncate the cache to `at`, feed `ids` after it (the key ranges `hidden`
hidden from every one of them), and score its rows from `score_from` on (row r's target is
ids[r + 1], the last row's `next_id`). A counterfactual is one pass (chatlens.cause's `plan`
says which: a knockout, a removal); what a pass measures (`measure`, `pieces`) is only carried,
for its result and its words. The last pass of a plan may be a "restore": the positions the
passes overwrote, read again as the cache held them.

`Running` pulls a plan (chatlens.pulled's protocol), chunked as the backend takes its ids
(`chunks`, the one rule, which WebGPUBackend.score shares). NumPy runs a run of one-chunk passes
over the same ids at once (score_many: the weights read once for all, not once a pass), and
restores by putting its kept keys and values back (PromptCache.kept, put_back: bit for bit)
rather than reading again; the GPU reads the restore's ids again (equal ids; values equal up to a
prefill chunk's rounding against the steps that first wrote them). After a pass that hid keys,
the cache is truncated to its `at`: what it computed is not the model's own reading. Its result
is each pass's scored rows, (target_logit, log_z, top_id, top_logit) a row.
"""

from collections import deque
from dataclasses import dataclass

from .pulled import Stepper


@dataclass(frozen=True)
class Pass:
    """One pass of a plan (see the module's docstring). measure: "with" (every piece read),
    "knocked", "removed" (a dropped turn: put back), "restore"; pieces: the names it measures."""
    measure: str
    pieces: tuple
    at: int
    ids: tuple
    score_from: int | None = 0
    next_id: int | None = None
    hidden: tuple = ()


def chunks(ids, size: int, score_from: int | None, next_id):
    """How a pass's ids are fed, `size` a step (0: all at once): (offset, part, the part's first
    scored row or None where it scores none, the target of its last row)."""
    size = size or max(len(ids), 1)
    for at in range(0, len(ids), size):
        part = list(ids[at:at + size])
        end = at + len(part)
        scored = max(score_from - at, 0) if score_from is not None and score_from < end else None
        yield at, part, scored, ids[end] if end < len(ids) else next_id


@dataclass(frozen=True)
class _Unit:
    """One step of a pass: its index in the plan, its chunk, and whether it opens or closes it."""
    index: int
    ids: list
    score_from: int | None
    next_id: int | None
    first: bool
    last: bool


class Running(Stepper):
    """A plan's passes pulled one step at a time (see the module's docstring). result: each pass's
    scored rows, in the plan's order. `at`: the pass under way (len(passes) once done)."""

    def __init__(self, cache, passes, *, chunk: int = 0):
        super().__init__(cache)
        self.passes = list(passes)
        own = int(getattr(cache, "chunk", 0) or 0)
        self.chunk = min((c for c in (own, int(chunk)) if c > 0), default=0)
        self.rows = [[] for _ in self.passes]
        self._hiding = None  # the pass whose hidden keys' ids the cache holds now
        # NumPy keeps what the passes overwrite and puts it back (the restore, done so)
        restore = [p for p in self.passes if p.measure == "restore"]
        self._kept = cache.kept(min(p.at for p in self.passes)) if restore else None
        self._copies = self._kept is not None  # the restore is a copy: it computes nothing, one step
        self._units = deque(_Unit(i, part, scored, nxt, k == 0, k + len(part) >= len(p.ids))
                            for i, p in enumerate(self.passes)
                            for k, part, scored, nxt in chunks(p.ids, 0 if p.measure == "restore" and self._copies
                                                               else self.chunk, p.score_from, p.next_id))
        self.prompt_tokens = sum(len(p.ids) for p in self.passes if not (p.measure == "restore" and self._copies))
        self._batch = not self.planned and hasattr(cache.backend, "score_many")
        if not self.passes:
            self.result = self.rows

    @property
    def at(self) -> int:
        return self._units[0].index if self._units else len(self.passes)

    @property
    def current(self) -> list:
        """The passes the next step runs (several when NumPy runs them at once)."""
        return [self.passes[u.index] for u in self._next_units()] if self._units else []

    # -- the steps ---------------------------------------------------------------------------------
    def _next_units(self) -> list:
        """The next step's units: one, or NumPy's batch of one-chunk passes over the same ids."""
        first = self._units[0]
        if not (self._batch and first.first and first.last and first.score_from is not None):
            return [first]
        head = self.passes[first.index]
        batch = [first]
        for u in list(self._units)[1:]:
            p = self.passes[u.index]
            if not (u.first and u.last and (p.at, p.ids, p.score_from, p.next_id) ==
                    (head.at, head.ids, head.score_from, head.next_id)):
                break
            batch.append(u)
        return batch

    def _next(self):
        units = self._next_units()
        head = self.passes[units[0].index]
        if units[0].first:
            self.cache.truncate(head.at)
        return units

    def _plan(self, units):
        [u] = units
        p = self.passes[u.index]
        if u.score_from is None:
            return self.cache.plan(u.ids, 0, chooses=False, hidden=p.hidden or None)
        return self.cache.plan_score(u.ids, score_from=u.score_from, next_id=u.next_id, hidden=p.hidden or None)

    def _read(self, units, run, raw):
        [u] = units
        if u.score_from is None:
            self.cache.read(run, raw, u.ids)
        else:
            self.rows[u.index] += self.cache.read_score(run, raw, u.ids)
        self._done(units)

    def _compute(self, units):
        u = units[0]
        p = self.passes[u.index]
        if len(units) > 1:
            every = self.cache.score_many(u.ids, score_from=u.score_from, next_id=u.next_id,
                                          hiddens=[self.passes[v.index].hidden or None for v in units])
            for v, rows in zip(units, every):
                self.rows[v.index] = rows
        elif p.measure == "restore" and self._kept is not None:
            self._put_back()
        elif u.score_from is None:
            self.cache.prefill(u.ids)
        else:
            self.rows[u.index] += self.cache.score(u.ids, score_from=u.score_from, next_id=u.next_id,
                                                   hidden=p.hidden or None)
        self._done(units)

    def _done(self, units):
        for u in units:
            self._units.popleft()
            p = self.passes[u.index]
            if not (p.measure == "restore" and self._copies):
                self.prompt_read += len(u.ids)
            self._hiding = p if p.hidden and not u.last and len(units) == 1 else None
            if u.last and p.hidden and len(units) == 1:
                self.cache.truncate(p.at)  # what the knockout computed is not the model's reading
        if not self._units:
            self.result = self.rows

    def _put_back(self):
        kept, self._kept = self._kept, None
        self.cache.truncate(min(len(self.cache.ids), kept[1][0]))
        self.cache.put_back(kept)

    def _stopped(self):
        """The cache keeps only ids whose keys and values are the model's own for them (what a
        knockout hid is cut away), or, where it can, what it held before the passes."""
        if self._hiding is not None:
            self.cache.truncate(self._hiding.at)
        if self._kept is not None:
            self._put_back()
