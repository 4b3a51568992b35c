"""A plan of scored passes over the cache, and the one runner that feeds it, for either backend.

A `Pass` is a value: truncate the cache to `at`, feed `ids` after it (the key ranges `hidden`
hidden from every one of them), and score its rows from `score_from` on (row r's target is
ids[r + 1], the last row's `next_id`). A counterfactual is one pass (chatlens.cause's `plan`
says which: a knockout, a removal); what a pass measures (`measure`, `pieces`) is only carried,
for its result and its words. The last pass of a plan may be a "restore": the positions the
passes overwrote, read again as the cache held them.

`Running` pulls a plan (chatlens.pulled's protocol), chunked as the backend takes its ids
(`part`, the one rule, which WebGPUBackend.score shares through `chunks`), and under the cache's
pace (chatlens.pace) as many as it computes in the pace's time, sized step by step. NumPy runs a
run of whole passes, each starting no later than the one before, at once (score_many: each reads
only what the cache held, so the run equals its passes run in turn; the weights are read once for
all, not once a pass), as many as the pace allows, and
restores by putting its kept keys and values back (PromptCache.kept, put_back: bit for bit)
rather than reading again; the GPU reads the restore's ids again (equal ids; values equal up to a
prefill chunk's rounding against the steps that first wrote them). After a pass that hid keys,
the cache is truncated to its `at`: what it computed is not the model's own reading. Its result
is each pass's scored rows, (target_logit, log_z, top_id, top_logit) a row.
"""

from dataclasses import dataclass

from .pace import sized
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


def part(ids, at: int, size: int, score_from: int | None, next_id):
    """The chunk of a pass's ids from `at`, `size` long: (its ids, its first scored row or None
    where it scores none, the target of its last row)."""
    ids_ = list(ids[at:at + size])
    end = at + len(ids_)
    scored = max(score_from - at, 0) if score_from is not None and score_from < end else None
    return ids_, scored, ids[end] if end < len(ids) else next_id


def chunks(ids, size: int, score_from: int | None, next_id):
    """How a pass's ids are fed, `size` a step (0: all at once): (offset, part, the part's first
    scored row or None where it scores none, the target of its last row)."""
    size = size or max(len(ids), 1)
    for at in range(0, len(ids), size):
        yield (at, *part(ids, at, size, score_from, next_id))


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
        self.pace = getattr(cache, "pace", None)  # the page's NumPy: a step as long as its time allows
        self.rows = [[] for _ in self.passes]
        self._hiding = None  # the pass whose hidden keys' ids the cache holds now
        # NumPy keeps what the passes overwrite and puts it back (the restore, done so)
        restore = [p for p in self.passes if p.measure == "restore"]
        self._kept = cache.kept(min(p.at for p in self.passes)) if restore else None
        self._copies = self._kept is not None  # the restore is a copy: it computes nothing, one step
        self._pass, self._fed = 0, 0  # the pass under way, and its ids fed so far
        self._skip()
        self._units = None  # the next step's, once sized (sized when asked, so by the pace's latest time)
        self.prompt_tokens = sum(len(p.ids) for p in self.passes if not self._copied(p))
        self._batch = not self.planned and hasattr(cache.backend, "score_many")
        if not self.passes:
            self.result = self.rows

    def _copied(self, p) -> bool:
        return p.measure == "restore" and self._copies

    def _skip(self):
        """Past passes with no ids to feed."""
        while self._pass < len(self.passes) and not self.passes[self._pass].ids:
            self._pass += 1

    @property
    def at(self) -> int:
        return self._pass

    @property
    def current(self) -> list:
        """The passes the next step runs (several when NumPy runs them at once)."""
        return [self.passes[u.index] for u in self._next_units()] if self._pass < len(self.passes) else []

    # -- the steps ---------------------------------------------------------------------------------
    def _next_units(self) -> list:
        """The next step's units: a chunk of the pass under way, or NumPy's batch of whole passes,
        as many as the pace's time allows."""
        if self._units is None:
            self._units = self._sized()
        return self._units

    def _sized(self) -> list:
        i, fed = self._pass, self._fed
        p = self.passes[i]
        left = len(p.ids) - fed
        if self._copied(p):
            n = left
        elif self.pace is not None and p.score_from is not None and fed < p.score_from:
            # under a pace, the rows read before the scored ones are a step of their own kind
            n = sized(self.pace, p.score_from - fed, self.chunk)
        else:
            n = sized(self.pace, left, self.chunk, kind="read" if p.score_from is None else "scored")
        ids, scored, nxt = part(p.ids, fed, n, p.score_from, p.next_id)
        head = _Unit(i, ids, scored, nxt, fed == 0, fed + len(ids) >= len(p.ids))
        if not (self._batch and head.first and head.last and scored is not None):
            return [head]
        # the whole scored passes from here that each start no later than the one before: each then
        # reads only what the cache holds now (NumPy's score_many), so they run as one batch, their
        # rows as many as the pace allows (with no pace, all of them)
        run = [p]
        while i + len(run) < len(self.passes):
            q = self.passes[i + len(run)]
            if q.score_from is None or not q.ids or q.at > run[-1].at or (self.chunk and len(q.ids) > self.chunk):
                break
            run.append(q)
        fits = sized(self.pace, sum(len(q.ids) for q in run), kind="scored")
        units, rows = [head], len(ids)
        for b, q in enumerate(run[1:], i + 1):
            rows += len(q.ids)
            if rows > fits:
                break
            units.append(_Unit(b, list(q.ids), q.score_from, q.next_id, True, True))
        return units

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
            every = self.cache.score_many([(q.at, q.ids, q.score_from, q.next_id, q.hidden or None)
                                           for q in (self.passes[v.index] for v in units)])
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
            if not self._copied(self.passes[u.index]):
                self.prompt_read += len(u.ids)
        # the cache holds the last unit's pass (a batch's earlier passes' keys are written over)
        u = units[-1]
        p = self.passes[u.index]
        self._hiding = p if p.hidden and not u.last else None
        if u.last and p.hidden:
            self.cache.truncate(p.at)  # what the knockout computed is not the model's reading
        self._pass, self._fed = (u.index + 1, 0) if u.last else (u.index, self._fed + len(u.ids))
        self._units = None
        self._skip()
        if self._pass >= len(self.passes):
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
