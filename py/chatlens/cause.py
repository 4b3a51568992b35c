"""Which piece a reply needed: each piece of what the model read taken away, and the reply watched.

Attention says where a step read from, not what it needed. Two counterfactuals say that, for
a step S of a reply (its query at P = len(prompt) + S - 1, its chosen id the reply's id S, or at
S = len(reply) the id the model makes most likely) and a piece of the turn's record
(chatlens.pieces: its spans, and what its removal renders):

  knocked out  the reply's positions (from the last prompt token, q0 = len(prompt) - 1, to P) may
               not read the piece's positions, in any layer; everything before q0 is the cache's,
               computed as the model read it. Whether reading the piece *directly* mattered. The
               first token stays readable (Piece.hidden): most heads park their weight there, and
               hiding it disturbs every head, not the piece's reading (the Pirate's second
               " Captain", the GGUF: 0.62 with it readable, 0.12 with it hidden too).
  removed      the conversation rendered again without the piece (chatlens.pieces' masks), the
               reply so far forced after it. Whether its presence mattered at all, directly or
               through the tokens after it. For a dropped turn the counterfactual is the turn
               *put back*, as a larger window would read it.

Each is one pass over the reply's positions with every position scored (`plan`, a list of
chatlens.passes.Pass values, run by chatlens.passes.Running): at each reply token, its
probability, the best id and its probability (`tokens`); at the step, p, top_id and top_p; and
reply_logprob, the log-probability of the reply so far (reply_ids[:S], then the chosen id). The
same figures with every piece read are the answer's own: a pass too, or, where the caller gives
the reply's own steps' candidates from the same weights and they hold every reply id
(`reply_top_k`: the worker keeps those of the replies its backend wrote), read from those, a pass
fewer (the Pirate's token strip: 606 tokens run through, not 702).
Each piece's attention share is the step's mean weight on it, every layer and head, the first
token left out as the inspection's shares leave it (`share`).

Cost, and the cache. One inspection of the step (its attention, chatlens.inspection), then one
pass a measure a piece: a knockout reads the S + 1 reply positions again; a removal reads its
prompt from where it first differs from what the cache holds (a system prompt's: nearly all of
it), then the S + 1. `plan` orders the passes so that each starts no later than the one before,
and NumPy runs them as one batch (the weights read once, not once a pass: the Pirate's token
strip in 17% less time than with only the knockouts batched): scripts/bench_cause.py measures
it. Afterwards the cache holds what it held after the inspection (what the turn reuses next
stays reused): the plan's last pass restores it (chatlens.passes: NumPy copies its keys and
values back, the GPU reads the positions again).

API (chatlens.jobs.CauseJob builds the pieces from a turn and pulls this):
    plan(held, prompt_ids, reply_ids, step, chosen_id, pieces, measures=MEASURES, *, with_=True) -> [Pass]
    cache_needed(prompt_len, pieces, step) -> int: the KV cache a cause needs
    Causing(cache, prompt_ids, reply_ids, pieces, *, step, chunk=0, measures=MEASURES, reply_top_k=None):
        the job (chatlens.pulled's protocol; result: a Cause)
    own_rows(reply_top_k, reply_ids, step, chosen_id) -> the "with" rows from the reply's candidates
    share(attention, spans) -> float: a piece's attention share
Bad input (a step out of range, a cache too small) is a ChatlensError, raised before the cache is
touched.
"""

import math
from dataclasses import dataclass

from .cache import common_prefix
from .errors import ChatlensError
from .inspection import Inspecting, mean_weights, step_position
from .passes import Pass, Running
from .pulled import Chain

MEASURES = ("knocked", "removed")  # both counterfactuals, by default


def plan(held, prompt_ids, reply_ids, step, chosen_id, pieces, measures=MEASURES, *, with_=True) -> list:
    """The passes of a cause at `step` over a cache that holds `held`. Each scores the reply's
    positions, from the last prompt token q0 to the step's query (their targets: the reply's ids,
    then `chosen_id`):
      with     the reply as the model read it: the cache's prompt, then the reply so far
      knocked  the same ids at the same positions, the piece's keys hidden from them
      removed  the prompt its removal renders, read from where it first differs from what the
               cache holds, then the reply so far (pieces whose removals render the same prompt,
               a kept turn's two messages, share one pass)
      restore  what the passes overwrote of `held`, read again (or put back)
    Ordered so that each reads the least: knockouts reuse the cache before q0, removals go from
    the latest point of difference to the earliest, each after the one it shares most with.
    with_ False: no "with" pass (its figures are the reply's own steps': `own_rows`)."""
    q0 = len(prompt_ids) - 1
    reply = tuple(prompt_ids[q0:]) + tuple(reply_ids[:step])  # the reply's positions' ids
    passes = [Pass("with", (), q0, reply, 0, chosen_id)] if with_ else []
    cached = list(held[:q0]) + list(reply) if with_ else list(held)  # what the cache holds as the passes run
    if "knocked" in measures:
        for p in pieces:
            if p.knocked_why is None:
                passes.append(Pass("knocked", (p.name,), q0, reply, 0, chosen_id, p.hidden))
                cached = cached[:q0]  # a knockout's keys are cut away once it ends
    if "removed" in measures:
        removals = {}  # the prompt a removal renders -> the pieces whose removal renders it
        for p in pieces:
            if p.removed_ids is not None:
                removals.setdefault(tuple(p.removed_ids), []).append(p.name)
        for prompt in sorted(removals, key=lambda ids: -common_prefix(ids, prompt_ids)):
            ids = list(prompt) + list(reply_ids[:step])
            at = min(common_prefix(ids, cached), len(prompt) - 1)
            passes.append(Pass("removed", tuple(removals[prompt]), at, tuple(ids[at:]), len(prompt) - 1 - at,
                               chosen_id))
            cached = ids
    back = common_prefix(cached, held)
    if back < len(held):
        passes.append(Pass("restore", (), back, tuple(held[back:]), None))
    return passes


def own_rows(reply_top_k, reply_ids, step: int, chosen_id: int) -> list | None:
    """The "with" pass's rows (target_logit, log_z, top_id, top_logit) taken from the reply's own
    steps' candidates (`reply_top_k`: [[id, logit, probability], ...] a step, best first, the
    record's top_k), or None where they cannot give them all: a step not written (the step after
    the reply) or a reply id not among its step's candidates (a reply typed, or kept without them).
    A candidate's logit and probability give its step's normalizer: log_z = logit - log(p)."""
    if reply_top_k is None or len(reply_top_k) <= step:
        return None
    rows = []
    for i in range(step + 1):
        target = reply_ids[i] if i < step else chosen_id
        candidates = reply_top_k[i] or []  # a row may be null: a branch's step given without them
        found = [c for c in candidates if int(c[0]) == int(target)]
        if not found or not found[0][2] > 0:
            return None
        _, logit, prob = found[0]
        top_id, top_logit, _ = candidates[0]
        rows.append((float(logit), float(logit) - math.log(prob), int(top_id), float(top_logit)))
    return rows


def cache_needed(prompt_len: int, pieces, step: int) -> int:
    """The KV cache a cause at `step` needs: its longest prompt (the turn's, or a removal's), then
    the reply's first `step` ids."""
    return max([int(prompt_len)] + [len(p.removed_ids) for p in pieces if p.removed_ids is not None]) + int(step)


def share(attention, spans) -> float:
    """A piece's attention share at a step: the mean weight (every layer and head) on its spans,
    the first token left out and the shares taken of the rest, as the inspection's
    shares_skip_first are (the first token holds most heads' parked weight)."""
    weights = mean_weights(attention)
    total = math.fsum(weights[1:]) or 1.0
    return math.fsum(w for a, b in spans for w in weights[max(a, 1):b]) / total


def words(p: Pass, labels: dict) -> str:
    """What a pass computes, in a learner's words (a page's progress)."""
    if p.measure == "with":
        return "the step with every piece read"
    if p.measure == "restore":
        return "the cache put back as it was"
    names = " and ".join(labels[n] for n in p.pieces)
    if p.measure == "knocked":
        return f"{names}: knocked out"
    return names + (": put back" if p.pieces[0].startswith("dropped:") else ": removed")


def batch_words(passes) -> str:
    """What NumPy's batch of passes computes (chatlens.passes), in a learner's words."""
    measures = [p.measure for p in passes]
    back = [p.pieces[0].startswith("dropped:") for p in passes if p.measure == "removed"]
    said = ["the step with every piece read"] if "with" in measures else []
    said += ["each piece knocked out"] if "knocked" in measures else []
    if back:
        said.append("each dropped turn put back" if all(back) else
                    "each piece removed or put back" if any(back) else "each piece removed")
    listed = " and ".join(said) if len(said) < 3 else ", ".join(said[:-1]) + ", and " + said[-1]
    return f"{listed} ({len(passes)} passes at once)"


def measure(rows, tokens: bool = False) -> dict:
    """A pass's scored rows (target_logit, log_z, top_id, top_logit), the last the step's:
    {p, top_id, top_p, reply_logprob} (and `tokens`, each row's {p, top_id, top_p}, when asked)."""
    target, log_z, top, top_logit = rows[-1]
    out = {"p": math.exp(target - log_z), "top_id": int(top), "top_p": math.exp(top_logit - log_z),
           "reply_logprob": math.fsum(t - z for t, z, _, _ in rows)}
    if tokens:
        out["tokens"] = [{"p": math.exp(t - z), "top_id": int(i), "top_p": math.exp(l - z)} for t, z, i, l in rows]
    return out


@dataclass
class Cause:
    """A cause's figures (chatlens.jobs.CauseJob places them on the turn: contract.Caused).

      position, chosen_id  the step's query position and the id whose probability is measured
      p, top_id, top_p     with every piece read: the chosen id's probability, the best id and its
      reply_logprob        the log-probability of reply_ids[:step] then chosen_id
      tokens               each reply position's {p, top_id, top_p}, from 0 to the step
      attention            the inspection's attention[layer][head] at the position
      measures             {piece name: {"knocked": measure() or None, "removed": measure() or None}}
      reused_tokens        tokens the cache held before the position when the job began
      computed_tokens      every token run through: the inspection's and each counterfactual's
    """
    position: int
    chosen_id: int
    p: float
    top_id: int
    top_p: float
    reply_logprob: float
    tokens: list
    attention: list
    measures: dict
    reused_tokens: int
    computed_tokens: int


class Causing(Chain):
    """The counterfactuals of one step as a job: the step's inspection, then its plan of passes
    (see the module's docstring). `doing`: what the next step computes, in words."""

    def __init__(self, cache, prompt_ids, reply_ids, pieces, *, step: int, chunk: int = 0, measures=MEASURES,
                 reply_top_k=None):
        """reply_top_k: the reply's own steps' candidates (own_rows), for the figures with every
        piece read, where they hold them; else a pass computes them."""
        prompt_ids, reply_ids = [int(i) for i in prompt_ids], [int(i) for i in reply_ids]
        self.position = step_position(len(prompt_ids), len(reply_ids), step)
        need = cache_needed(len(prompt_ids), pieces, step)
        if need > cache.capacity:
            raise ChatlensError(f"the counterfactuals need {need} tokens of KV cache; it holds {cache.capacity}")
        self.step, self.pieces, self.chunk, self.measures = int(step), list(pieces), chunk, tuple(measures)
        self.prompt_ids, self.reply_ids, self.reply_top_k = prompt_ids, reply_ids, reply_top_k
        self.own = None  # the "with" rows read from reply_top_k, once the step's chosen id is known
        inspecting = Inspecting(cache, prompt_ids + reply_ids[:step], self.position, 1, lens=False)
        self.reused = inspecting.reused
        super().__init__(cache, inspecting)
        self.prompt_tokens += 1  # the inspected token itself
        self.passes = None  # the plan, once the inspection has said what the step chose

    @property
    def stage(self) -> tuple:
        """(passes done, of all): 0 of 0 while the step itself is read."""
        return (0, 0) if self.passes is None else (self.part.at, len(self.passes))

    @property
    def doing(self) -> str | None:
        if self.done:
            return None
        if self.passes is None:
            return "the step itself, read as it was"
        now = self.part.current
        if len(now) > 1:
            return batch_words(now)
        return words(now[0], {p.name: p.label for p in self.pieces})

    def _after(self, part):
        if self.passes is None:  # the inspection has ended: the passes
            self.inspection = part.result
            self._before += 1  # the inspected token itself
            step = self.step
            self.chosen_id = self.reply_ids[step] if step < len(self.reply_ids) else part.result.chosen_id
            self.own = own_rows(self.reply_top_k, self.reply_ids, step, self.chosen_id)
            self.passes = plan(list(self.cache.ids), self.prompt_ids, self.reply_ids, step, self.chosen_id,
                               self.pieces, self.measures, with_=self.own is None)
            return Running(self.cache, self.passes, chunk=self.chunk)
        measures = {p.name: {"knocked": None, "removed": None} for p in self.pieces}
        with_ = None if self.own is None else measure(self.own, tokens=True)
        for p, rows in zip(self.passes, part.result):
            if p.measure == "with":
                with_ = measure(rows, tokens=True)
            elif p.measure in ("knocked", "removed"):
                for name in p.pieces:
                    measures[name][p.measure] = measure(rows, tokens=True)
        self.result = Cause(self.position, self.chosen_id, **with_, attention=self.inspection.attention,
                            measures=measures, reused_tokens=self.reused, computed_tokens=self.prompt_read)
        return None
