"""A job a host pulls one step at a time over a cache: the protocol, written once.

An inspection (chatlens.inspection.Inspecting), a plan of scored passes (chatlens.passes.Running)
and the jobs made of them (chatlens.cause.Causing, chatlens.needs.Needing) are pulled as a reply is
(chatlens.pull.Pull), one step in flight at a time:

    pull()        the next step computed here: NumPy's own call, or on a GPU a run submitted and
                  waited for (natively: chatlens.pull.greedy drives it to its end)
    runs(depth)   on a planned GPU whose host submits runs itself (the browser's worker): the run
                  to submit now ([] while one is in flight); give(raw) takes the bytes it read back
    stop()        end it between two pulls, with no result
    done, result  whether it has ended, and its answer (None once stopped or failed)
    in_flight, prompt_read, prompt_tokens   runs submitted and not given; tokens computed of all

A step that raises ends the job and empties the cache: what the backend then holds is unknown
(PromptCache's own rule for its calls).

`Stepper` runs its own steps: a subclass says what the next one is (`_next`), how a GPU plans and
reads it (`_plan`, `_read`) and how NumPy computes it (`_compute`). `Chain` pulls parts one after
another, each made from the one before once it has ended (a cause: its step's inspection, then its
passes; a conversation's needs: each turn's cause).
"""

from collections import deque
from contextlib import contextmanager

from .errors import ChatlensError


class Pulled:
    """What every pulled job holds: its cache, where it stands, and the rule for a step that fails."""

    def __init__(self, cache):
        self.cache = cache
        self.planned = bool(getattr(cache, "planned", False))
        self.result = None
        self.stopped = self.failed = False
        self.prompt_read = 0  # tokens computed so far
        self.prompt_tokens = 0  # of all it will compute

    @property
    def done(self) -> bool:
        return self.result is not None or self.stopped or self.failed

    @contextmanager
    def _failing(self):
        """A step that fails ends the job (done, no result), and since what the backend then holds
        is unknown, the cache empties."""
        try:
            yield
        except BaseException:
            self.failed = True
            self._failed()
            self.cache.reset()
            raise

    def _failed(self):
        """What a subclass drops when a step fails (its runs in flight)."""


class Stepper(Pulled):
    """A job whose steps are its own (see the module's docstring); one run in flight at a time."""

    def __init__(self, cache):
        super().__init__(cache)
        self._flight = deque()  # (run, work) submitted, not given

    @property
    def in_flight(self) -> int:
        return len(self._flight)

    # what a subclass defines
    def _next(self):
        """The next step's work (any value the methods below read)."""
        raise NotImplementedError

    def _plan(self, work):
        """The GPU run that does `work`."""
        raise NotImplementedError

    def _read(self, work, run, raw: bytes):
        """Its bytes read back: the step done."""
        raise NotImplementedError

    def _compute(self, work):
        """The step done here (NumPy)."""
        raise NotImplementedError

    def _stopped(self):
        """What a stop leaves behind, beyond the runs in flight undone (the cache put back, say)."""

    # the protocol
    def runs(self, depth: int | None = None) -> list:
        if self.done or self._flight or not self.planned:
            return []
        with self._failing():
            work = self._next()
            self._flight.append((self._plan(work), work))
        return [self._flight[-1][0]]

    def give(self, raw) -> list:
        """The bytes the oldest run in flight read back. Returns [] (these jobs choose no reply ids)."""
        if self.done:
            return []
        if not self._flight:
            raise ChatlensError("no run is in flight: submit runs() first")
        run, work = self._flight.popleft()
        with self._failing():
            self._read(work, run, bytes(raw))
        return []

    def pull(self) -> list:
        if self.done:
            return []
        if self.planned:
            runs = self.runs()
            if not runs:
                raise ChatlensError("a run of this job is in flight: give its bytes first")
            with self._failing():
                raw = self.cache.collect(self.cache.submit(runs[0]))
            return self.give(raw)
        with self._failing():
            self._compute(self._next())
        return []

    def stop(self):
        """End it between two pulls, with no result: what was planned and not given is undone."""
        if self.done:
            return
        self.stopped = True
        if self._flight:
            self._flight.clear()
            self.cache.truncate(len(self.cache.ids))
        self._stopped()

    def _failed(self):
        self._flight.clear()


class Chain(Pulled):
    """Parts pulled one after another: `first`, then each `_after(part)` makes from the part that
    has just ended (None: the chain has ended; `_after` sets `result`). A part that stops or fails
    ends the chain the same way. prompt_read and prompt_tokens count every part's."""

    def __init__(self, cache, first):
        super().__init__(cache)
        self.part = first
        self._before = 0  # tokens the parts before this one computed
        self.prompt_tokens = first.prompt_tokens

    @property
    def in_flight(self) -> int:
        return 0 if self.done else self.part.in_flight

    def _after(self, part):
        raise NotImplementedError

    def runs(self, depth: int | None = None) -> list:
        return [] if self.done else self.part.runs(depth)

    def give(self, raw) -> list:
        if not self.done:
            self.part.give(raw)
            self._advance()
        return []

    def pull(self) -> list:
        if not self.done:
            self.part.pull()
            self._advance()
        return []

    def stop(self):
        if not self.done:
            self.part.stop()
            self.stopped = True

    def _advance(self):
        part = self.part
        self.prompt_read = self._before + part.prompt_read
        if not part.done:
            return
        if part.failed or part.stopped:
            self.failed, self.stopped = part.failed, part.stopped
            return
        with self._failing():
            nxt = self._after(part)
        if nxt is not None:
            self._before += part.prompt_read
            self.prompt_tokens += nxt.prompt_tokens
            self.part = nxt
            self._advance()  # a part with nothing to compute ends at once
