"""A reply the caller pulls: chatlens.generate's loop driven over a stepper, GPU steps in flight;
and `greedy`, the synchronous driver that pulls one to its end.

`Pull(stepper, ids, ...)` holds one `decoding` loop and what the stepper (a Backend or a
chatlens.cache.PromptCache) has been asked to compute for it. Two kinds of stepper:

- one that computes where it is called (NumPy): `pull()` computes the step the loop needs and
  returns the ids chosen by it;
- one that plans GPU runs (`planned`: chatlens.gpu.WebGPUBackend): `runs()` gives the runs to
  submit now, `give(raw)` takes the bytes the oldest of them read back. The host runs them,
  natively through `pull()` (stepper.submit / collect), or in the browser, where the worker's
  JavaScript submits each run and hands Python its bytes: one call into Python a token.

Steps in flight: a decode step's input is the id the previous step chose, which the GPU's argmax
has already written where the embedding reads it (step.use_argmax). So the next `depth - 1`
steps are planned before that id is read back, and the GPU never waits for the host. When the
loop ends (end of turn, the limit, a stop), the steps computed past it are discarded and the
stepper truncated back to what was accepted: its length is always the fed ids whose results
were given.

Stopping: `stop()` between any two pulls; the reply keeps what was chosen until then.

Progress: the prompt is read a chunk a pull (`chunk`: at most the stepper's own), and
`prompt_read` says how much of it was read so far, so a host can show the read moving and a stop
can fall between two chunks. Chunks change no greedy id: each chunk attends to the cache the
chunks before it filled, as one long prefill does (tests/test_worker_pull.py).
"""

from collections import deque

from .defaults import IN_FLIGHT
from .errors import ChatlensError
from .generate import Chosen, Generation, Stop, decoding


class Pull:
    def __init__(self, stepper, ids, *, eos_id, max_new_tokens, top_k=0, depth=IN_FLIGHT, chunk=0):
        ids = [int(i) for i in ids]
        if not ids:
            raise ChatlensError("prefill needs at least one token")
        self.stepper = stepper
        self.planned = bool(getattr(stepper, "planned", False))
        self.depth = max(int(depth), 1)
        self.max_new_tokens = int(max_new_tokens)
        self.top_k = int(top_k)
        self.generation = None  # chatlens.generate.Generation, once the loop has ended
        own = int(getattr(stepper, "chunk", 0) or 0)  # the most ids one step of the stepper takes (0: any)
        chunk = min((c for c in (own, int(chunk)) if c > 0), default=0)
        self.chunk = chunk  # the prompt ids one pull reads (0: all of them)
        self._loop = decoding(ids, eos_id=eos_id, max_new_tokens=max_new_tokens, top_k=top_k, chunk=chunk)
        self._need = next(self._loop)  # the Feed the loop waits for
        self._accepted = stepper.length  # what the stepper holds whose results were given
        self._flight = deque()  # planned runs submitted, oldest first, their bytes not given yet
        self._tickets = deque()  # the native host's submissions of them (pull())
        self._choosing = 0  # runs planned so far that choose an id
        self.prompt_tokens = len(ids)  # the ids the prompt feeds (after what the stepper held)
        self.prompt_read = 0  # of them, fed with their results given
        self.chosen = 0  # ids chosen so far

    @property
    def done(self) -> bool:
        return self.generation is not None

    @property
    def result(self) -> Generation | None:
        """What a driver returns (chatlens.pull.greedy): the Generation, once the loop has ended."""
        return self.generation

    @property
    def in_flight(self) -> int:
        return len(self._flight)

    @property
    def prefilling(self) -> bool:
        """Whether the loop still reads the prompt (no id chosen yet)."""
        return not self.done and self.chosen == 0

    # -- a host that runs planned steps -----------------------------------------------------------
    def runs(self, depth: int | None = None) -> list:
        """The runs to submit now, in order: the step the loop needs (when not submitted yet), then
        decode steps ahead of it, up to `depth` in flight."""
        if self.done:
            return []
        depth = self.depth if depth is None else max(int(depth), 1)
        out = []
        try:
            if not self._flight:
                need = self._need
                out.append(self._plan(list(need.ids), need.top_k, need.wants_step))
            # Ahead: the id the last run will choose is on the GPU already; never past the limit
            # or the cache. A prefill chunk that chooses nothing is not followed: a stop can fall
            # between chunks.
            while (len(self._flight) < depth and self._flight[-1].chooses
                   and self._choosing < self.max_new_tokens
                   and self._accepted + sum(r.n for r in self._flight) < self.stepper.capacity):
                out.append(self._plan(None, self.top_k, True))
        except BaseException:
            self._fail()
            raise
        return out

    def give(self, raw) -> list:
        """The bytes the oldest run in flight read back (b"" for a run with no readback). Returns
        the ids chosen (Chosen, none or one)."""
        if self.done:
            return []
        if not self._flight:
            raise ChatlensError("no run is in flight: submit runs() first")
        run = self._flight.popleft()
        ids = list(self._need.ids)
        try:
            step = self.stepper.read(run, bytes(raw), ids)
        except BaseException:
            self._fail()
            raise
        return self._advance(step, len(ids))

    # -- the synchronous driver's step ----------------------------------------------------------
    def pull(self) -> list:
        """Compute (or, for a planned stepper, submit and collect) the next step; the ids it chose."""
        if self.done:
            return []
        if self.planned:
            try:
                for run in self.runs():
                    self._tickets.append(self.stepper.submit(run))
                raw = self.stepper.collect(self._tickets.popleft())
            except BaseException:
                self._fail()
                raise
            return self.give(raw)
        need = self._need
        try:
            step = self.stepper.prefill(list(need.ids), need.top_k)
        except BaseException:
            self._fail()
            raise
        return self._advance(step if need.wants_step else None, len(need.ids))

    def stop(self):
        """End the reply now ("stopped"): what is in flight is discarded."""
        if self.done:
            return
        try:
            self._loop.throw(Stop())
        except StopIteration as e:
            self._finish(e.value)

    # -- inside --------------------------------------------------------------------------------
    def _plan(self, ids, top_k, chooses):
        run = self.stepper.plan(ids, top_k, chooses=chooses)
        self._flight.append(run)
        self._choosing += bool(chooses)
        return run

    def _advance(self, step, fed: int) -> list:
        self._accepted += fed
        if self.chosen == 0:
            self.prompt_read += fed
        chosen = []
        try:
            need = self._loop.send(step)
            while isinstance(need, Chosen):
                chosen.append(need)
                self.chosen += 1
                need = next(self._loop)
            self._need = need
        except StopIteration as e:
            self._finish(e.value)
        return chosen

    def _finish(self, generation):
        self.generation = generation
        self._discard()

    def _discard(self):
        """Forget the steps computed past what was accepted; the stepper holds exactly that."""
        for ticket in self._tickets:
            self.stepper.collect(ticket)  # a native staging buffer is free again once read
        self._tickets.clear()
        if self._flight:
            self._flight.clear()
            self.stepper.truncate(self._accepted)

    def _fail(self):
        self._flight.clear()
        self._tickets.clear()
        self._loop.close()
        self.generation = self.generation or Generation(stop_reason="error")  # done: nothing more to pull


def greedy(pulled, *, on_token=None, should_stop=None):
    """Pull `pulled` to its end here: a Pull (`greedy(Pull(backend, ids, eos_id=..., max_new_tokens=...))`
    gives the Generation), or a chatlens.jobs job (its result: a TurnRecord, a Continuation,
    Compared, ...). The one loop that drives a reply synchronously: every caller that computes
    where it is called (the command line, the cache, NumPy, native wgpu, the tests) uses it.

    on_token(x) is called with each thing a pull returns (a Pull's: Chosen; a job's: Token).
    should_stop() is asked between any two pulls (prompt chunks included, so a long prompt can
    be stopped while it is read): when it says yes, the reply ends there with stop_reason
    "stopped" (the ids chosen so far are kept).
    """
    first = True
    while not pulled.done:
        if not first and should_stop is not None and should_stop():
            pulled.stop()
            break
        first = False
        for chosen in pulled.pull():
            if on_token is not None:
                on_token(chosen)
    return pulled.result
