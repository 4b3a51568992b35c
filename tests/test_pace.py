"""The page's NumPy steps of the lab's jobs sized by their time (chatlens.pace), so a stop waits at
most about one pull.

A NumPy pull is one call into Python that a stop cannot interrupt. Here the tiny model computes
on a clock that moves as the NumPy without BLAS standing in for Pyodide's would (a step: a fixed
part and a part a row, measured on the real model: docs/speed.md), so the sizes are the ones such a
machine gets; the figures are the ones an unpaced run gives.
"""

import pytest

from chatlens.cache import PromptCache
from chatlens.cause import Causing
from chatlens.contract import PULL_MS, READ_CHUNK
from chatlens.inspection import Inspecting
from chatlens.pace import Pace, sized
from chatlens.passes import Pass, Running
from chatlens.pull import Pull
from test_backend import BACKENDS
from test_cause import PROMPT, REPLY, pulled, tiny_pieces

STOP_MS = 200  # the longest a stop may wait on the page (issue 48)
# A step of the real model on the NumPy without BLAS (docs/speed.md), in ms: a fixed part and a part
# a row, for a prefill (read) and for scored rows; and a machine 1.6 times slower.
STAND_IN = {"read": (45, 17), "scored": (35, 29)}
SLOWER = {kind: (1.6 * a, 1.6 * b) for kind, (a, b) in STAND_IN.items()}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Slow:
    """A backend whose computing steps move `clock` as the NumPy without BLAS takes them (`costs`)."""

    def __init__(self, backend, clock, costs=STAND_IN):
        self.backend, self.clock, self.costs = backend, clock, costs

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def _costs(self, kind, rows):
        fixed, row = self.costs[kind]
        self.clock.now += (fixed + row * rows) / 1000

    def prefill(self, ids, top_k=0):
        self._costs("read", len(ids))
        return self.backend.prefill(ids, top_k)

    def score(self, ids, **kw):
        self._costs("scored", len(ids))
        return self.backend.score(ids, **kw)

    def score_many(self, runs):
        self._costs("scored", sum(len(ids) for _, ids, *_ in runs))
        return self.backend.score_many(runs)

    def inspect(self, token_id):
        self._costs("scored", 1)
        return self.backend.inspect(token_id)


def slow_cache(n_ctx=64, costs=STAND_IN):
    clock = Clock()
    return PromptCache(Slow(BACKENDS["numpy"](n_ctx), clock, costs), pace=Pace(PULL_MS, clock=clock)), clock


def pull_times(job, clock) -> list:
    """Each pull of `job` to its end, in simulated milliseconds."""
    ms = []
    while not job.done:
        before = clock.now
        job.pull()
        ms.append(1000 * (clock.now - before))
    return ms


def test_a_pace_sizes_the_next_step_by_the_last_one_s_time():
    clock = Clock()
    pace = Pace(120, clock=clock)
    assert pace.size(left=80, most=16) == 1  # nothing timed yet: one id
    with pace.timing(1):
        clock.now += 0.089  # 89 ms for one id: a second fits, and is tried
    assert pace.size(80, 16) == 2
    with pace.timing(2):
        clock.now += 0.118
    assert pace.size(80, 16) == 3  # still under 120 ms: one more
    with pace.timing(3):
        clock.now += 0.147  # over: back to what fits at that rate
    assert pace.size(80, 16) == 2
    with pace.timing(2):
        clock.now += 0.002  # a fast machine: as many as the job's chunk allows, or as are left
    assert pace.size(80, 16) == 16 and pace.size(5, 16) == 5 and pace.size(80) == 80
    assert sized(None, 80) == 80 and sized(None, 80, 0, 16) == 16  # no pace: the limits alone


@pytest.mark.parametrize("costs", [STAND_IN, SLOWER], ids=["stand-in", "slower"])
def test_on_a_numpy_as_slow_as_the_page_s_a_cause_s_pulls_each_end_within_a_stop_s_wait(costs):
    want = pulled(Causing(PromptCache(BACKENDS["numpy"](64)), PROMPT, REPLY, tiny_pieces(), step=len(REPLY)))
    cache, clock = slow_cache(costs=costs)
    cache.prefill(PROMPT + REPLY)
    job = Causing(cache, PROMPT, REPLY, tiny_pieces(), step=len(REPLY), chunk=READ_CHUNK)
    ms = pull_times(job, clock)
    assert max(ms) < STOP_MS and len(ms) > 2 * len(tiny_pieces())  # every pass read a few ids a pull
    assert cache.ids == PROMPT + REPLY
    for name, m in want.measures.items():
        for what in ("knocked", "removed"):
            for key in ("p", "top_p", "reply_logprob"):
                assert job.result.measures[name][what][key] == pytest.approx(m[what][key], rel=1e-5, abs=1e-5)


def test_on_a_faster_numpy_a_batch_of_passes_holds_as_many_rows_as_the_pace_allows():
    """A scored row at 12 ms: a pull fits 12 rows, two whole passes over the reply's 6 positions, so
    NumPy runs the step with every piece read and the knockouts two at a time."""
    want = pulled(Causing(PromptCache(BACKENDS["numpy"](64)), PROMPT, REPLY, tiny_pieces(), step=len(REPLY)))
    cache, clock = slow_cache(costs={"read": (1, 1), "scored": (1, 12)})
    cache.prefill(PROMPT + REPLY)
    job, doing, ms = Causing(cache, PROMPT, REPLY, tiny_pieces(), step=len(REPLY), chunk=READ_CHUNK), [], []
    while not job.done:
        doing.append(job.doing)
        before = clock.now
        job.pull()
        ms.append(1000 * (clock.now - before))
    assert max(ms) < STOP_MS
    assert doing.count("the step with every piece read and each piece knocked out (2 passes at once)") == 1
    assert doing.count("each piece knocked out (2 passes at once)") == 1
    for name, m in want.measures.items():
        for what in ("knocked", "removed"):
            assert job.result.measures[name][what]["reply_logprob"] == pytest.approx(m[what]["reply_logprob"],
                                                                                   rel=1e-5, abs=1e-5)


def test_on_a_fast_numpy_the_pace_reads_the_job_s_whole_chunk():
    cache, clock = slow_cache(costs={"read": (1, 0.1), "scored": (1, 0.2)})
    ids = tuple((PROMPT + REPLY) * 2)
    job = Running(cache, [Pass("with", (), 0, ids, 0, 7)], chunk=READ_CHUNK)
    sizes = []
    while not job.done:
        before = cache.length
        job.pull()
        sizes.append(cache.length - before)
    assert sizes == [1, 16, 15]  # the first step alone is sized before any was timed


@pytest.mark.parametrize("costs", [STAND_IN, SLOWER], ids=["stand-in", "slower"])
def test_an_inspection_reads_what_the_cache_lacks_within_a_stop_s_wait_too(costs):
    ids = (PROMPT + REPLY) * 3
    cache, clock = slow_cache(costs=costs)
    inspection = Inspecting(cache, ids, position=len(ids) - 1)
    assert max(pull_times(inspection, clock)) < STOP_MS and inspection.prompt_read == len(ids) - 1
    assert inspection.result.query_id == ids[-1]


def test_a_reply_s_prompt_is_read_in_the_page_s_chunks_not_paced():
    """Its first token counts more than a stop's wait (contract.READ_CHUNK): the pace only times it."""
    cache, clock = slow_cache()
    reply = Pull(cache, (PROMPT + REPLY) * 3, eos_id=-1, max_new_tokens=1, chunk=READ_CHUNK)
    sizes = []
    while not reply.done:
        before = cache.length
        reply.pull()
        sizes.append(cache.length - before)
    rows, seconds = cache.pace.last["read"]
    assert sizes == [16, 16, 16] and rows == 16 and seconds == pytest.approx((45 + 17 * 16) / 1000)
