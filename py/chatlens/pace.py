"""How many ids a NumPy step reads: as many as it computes in about a pull's time.

A page's stop is answered between two pulls, and a NumPy pull is one call into Python that nothing
interrupts (interrupting Python needs a SharedArrayBuffer, so cross-origin isolation, which a static
host may not give). So a pull's time bounds how long a stop waits. A fixed number of ids does not
bound it: 16 scored ids took about 0.13 s with OpenBLAS on one thread and 0.5 s in a NumPy without
BLAS, as Pyodide's is, on the same machine (docs/speed.md), and the page runs on any machine. A
`Pace` times the steps its cache computes and sizes the next from the last: each pull then takes
about `ms`, whatever computes it.

    pace = Pace(150)
    n = pace.size(left=80, most=16)   # the ids the next step reads: 1 before any step was timed
    with pace.timing(n):              # the step that computes those n rows (a batch: every pass's)
        ...

The rule: a step that took t for n rows sizes the next n * ms / t, rounded up while t is under
`ms` (a step's time is a fixed part plus a part per row, so the rate of a small step understates
how many more rows fit) and down once it is over. So sizes climb to the largest that fits and
settle there, a step's time staying under `ms` plus one row's. Two kinds of step are timed apart,
since a row costs more when it is scored (the model's head over the vocabulary, on every row): a
"read" (a prefill: the last row alone goes through the head) and a "scored" step (chatlens.passes).
A kind not timed yet starts again from one id.
"""

import math
import time
from contextlib import contextmanager


def capped(left: int, most: int = 0) -> int:
    """`left`, at most `most` (0: no limit), and at least one."""
    return max(min(int(left), int(most)) if most > 0 else int(left), 1)


class Pace:
    """The size of the next step of a kind, from the time the last step of that kind took."""

    def __init__(self, ms: float, clock=time.perf_counter):
        self.ms = float(ms)  # the time one step aims at
        self.clock = clock
        self.last = {}  # kind -> (rows, seconds) of the last step of that kind timed

    def size(self, left: int, most: int = 0, kind: str = "read") -> int:
        """The ids the next step reads of the `left` still to read, at most `most` (0: no limit)."""
        n = capped(left, most)
        if kind not in self.last:
            return 1
        rows, seconds = self.last[kind]
        ratio = rows * self.ms / 1000 / max(seconds, 1e-9)
        return min(n, max(math.ceil(ratio) if seconds * 1000 < self.ms else math.floor(ratio), 1))

    @contextmanager
    def timing(self, rows: int, kind: str = "read"):
        """Times the step of `kind` computing `rows` rows (its ids; a batch's: every pass's)."""
        start = self.clock()
        yield
        if rows > 0:
            self.last[kind] = (int(rows), self.clock() - start)


def sized(pace, left: int, *limits, kind: str = "read") -> int:
    """The ids a step of `kind` reads now of the `left` still to read: at most each positive limit (a
    job's chunk, the backend's own), and under a pace what its time allows. No pace, no limit: all."""
    most = min((int(c) for c in limits if c and int(c) > 0), default=0)
    return pace.size(left, most, kind) if pace is not None else capped(left, most)
