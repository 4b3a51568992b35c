"""Which piece a reply needed: each piece of what the model read taken away, and the reply watched.

Attention says where a step read from, not what it needed. Two counterfactuals say that, for
a step S of a reply (its query at P = len(prompt) + S - 1, its chosen id the reply's id S, or at
S = len(reply) the id the model makes most likely) and a piece of the turn's record:

  knocked out  the reply's positions (from the last prompt token, q0 = len(prompt) - 1, to P) may
               not read the piece's positions, in any layer; everything before q0 is the cache's,
               computed as the model read it. Whether reading the piece *directly* mattered. The
               first token stays readable (Piece.hidden): most heads park their weight there, and
               hiding it disturbs every head, not the piece's reading (the Pirate's second
               " Captain", the GGUF: 0.62 with it readable, 0.12 with it hidden too).
  removed      the conversation rendered again through the template without the piece (a system
               prompt: what the template writes when there is none; a kept turn: the whole turn,
               as trimming drops it; the new message; the generation header), the reply so far
               forced after it. Whether its presence mattered at all, directly or through the
               tokens after it. For a dropped turn the counterfactual is the turn *put back*, as a
               larger window would read it.

For each: p, the chosen id's probability at the step; the new top-1 and its probability; and
reply_logprob, the log-probability of the reply so far (reply_ids[:S], then the chosen id) under
it: one pass over the reply's positions a measure, every position scored (chatlens.backend's
score). The same figures with every piece read are the answer's own (p, top_id, top_p,
reply_logprob), and each piece's attention share is the step's mean weight on it (the
inspection's by_piece, every layer and head).

Cost, and the cache. One inspection of the step (its attention, chatlens.inspection), then one
pass a measure a piece: a knockout reads the S + 1 reply positions again; a removal reads its
prompt from where it first differs from what the cache holds (a system prompt's: nearly all of
it), then the S + 1. NumPy runs the knockouts and the step with every piece read as one batch
(score_many: the weights read once, not once a pass): scripts/bench_cause.py measured a Pirate
turn's card at its second step in 11 decode steps' time (a 34-token prompt), 21 after a kept
turn (145 tokens, most of it the system prompt's removal reading the prompt again).
Afterwards the cache holds what it held after the inspection (what the turn reuses next stays
reused): NumPy puts its keys and values back as they were (PromptCache.kept);
the GPU reads the positions the counterfactuals overwrote again (equal ids; values equal up to
the float rounding of a prefill chunk against the steps that first wrote them).

API (chatlens.jobs.CauseJob builds the pieces from a turn and pulls this):
    pieces_of(record, messages, names=None) -> [Piece]: the record's pieces and its dropped
        turns, each with its knockout span and how to render it removed (or why not)
    removed_prompt(tokenizer, template, read, piece) -> (ids, what): a removal's prompt ids
    turn_pieces(tokenizer, template, record, messages, names=None, *, plain=False) -> [Piece]: both
    Causing(cache, prompt_ids, reply_ids, pieces, *, step, chunk=0): the job, pulled as
        chatlens.inspection.Inspecting is (pull; or runs/give where the host submits GPU runs;
        stop; done, result: a Cause; prompt_read/prompt_tokens: tokens computed of all)
Bad input (a step out of range, a piece that does not exist, a removal named that leaves no
message) is a ChatlensError, raised before the cache is touched.
"""

import math
from contextlib import contextmanager
from dataclasses import dataclass, field

from .cache import common_prefix
from .errors import ChatlensError
from .inspection import Inspecting, by_piece, step_position
from .window import Slot, pieces_of as render_pieces, turn_groups

# What a removal cannot do, in a learner's words (Piece.removed_why)
NOT_REMOVABLE = {
    "default_system": "The template writes this system prompt itself whenever the conversation has none, so it "
                      "cannot be left out; choose another system prompt to replace it.",
    "prompt": "The template's pieces could not be told apart, so no one of them can be left out.",
    "text": "Plain text is one piece: without it there is nothing left to read.",
}


NO_MESSAGES = "Without it no message is left: the template would render nothing to read."


@dataclass
class Piece:
    """One piece a counterfactual takes away: `name` "kind:index" (the index-th piece of that kind
    in the record, counted from 0; a dropped turn's kind is "dropped"), its label and token span
    [start, end) in the prompt (a dropped turn: None, it was not read), what a removal renders
    (`keep`: the read messages' positions kept, `add`: dropped messages put back, `header`: the
    generation header), and why a measure cannot be taken (None: it can)."""
    name: str
    kind: str
    label: str
    start: int | None
    end: int | None
    keep: list = field(default_factory=list)
    add: list = field(default_factory=list)
    header: bool = True
    knocked_why: str | None = None
    removed_why: str | None = None
    removed_ids: list | None = None  # the removal's prompt ids, once rendered
    removed_what: str | None = None  # what stands in its place, in a sentence

    @property
    def hidden(self) -> tuple:
        """The key ranges a knockout hides: the piece's, but the first token's, which stays readable
        (heads park weight there: hiding it would disturb them all, not test the piece)."""
        return ((max(self.start, 1), self.end),)


@dataclass(frozen=True)
class Read:
    """What a turn's prompt was rendered from, to render it again without a piece: the messages
    in the order the template read them (a system message first when the record has one), the
    record's pieces, the dropped messages, whether special tokens in text are tokens."""
    messages: list  # [(message dict, message_index or None), ...] as rendered
    pieces: list
    dropped: list
    special_in_text: bool = True


def read_of(record, messages) -> Read:
    """The Read of a turn record (chatlens.record.TurnRecord) and the messages it was made from."""
    read = []
    for p in record.pieces:
        index = p.get("message_index")
        if p["kind"] == "system":
            read.append(({"role": "system", "content": record.system if record.system is not None else
                          messages[index]["content"]}, index))
        elif index is not None:
            read.append(({"role": messages[index]["role"], "content": messages[index]["content"]}, index))
    return Read(read, list(record.pieces), list(record.dropped_messages or []), bool(record.special_in_text))


def pieces_of(read: Read | None, record_pieces, names=None) -> list:
    """The pieces a cause takes away: the record's (system, each message, the generation header)
    and, when the window dropped turns, each dropped turn (kind "dropped", oldest first). names:
    "kind:index" strings choosing some, in the order given (None: all). read None: plain text
    (one piece, nothing to render it from). Raises ChatlensError naming a piece that does not exist,
    or one named whose removal would leave no message (unnamed, it says so in removed_why)."""
    out, seen = [], {}
    at = {}  # message_index -> position in read.messages
    if read is not None:
        at = {index: k for k, (_, index) in enumerate(read.messages) if index is not None}
    history = [p["message_index"] for p in record_pieces
               if p.get("message_index") is not None and p["kind"] not in ("system", "new")]
    groups = turn_groups(history, {i: m for (m, i) in read.messages if i is not None}) if read and history else []
    for p in record_pieces:
        kind = p["kind"]
        n = seen.get(kind, 0)
        seen[kind] = n + 1
        piece = Piece(f"{kind}:{n}", kind, p["label"], int(p["start"]), int(p["end"]))
        if read is None or kind in NOT_REMOVABLE:
            piece.removed_why = NOT_REMOVABLE.get(kind, NOT_REMOVABLE["text"])
        elif kind == "header":
            piece.keep, piece.header = list(range(len(read.messages))), False
        else:
            index = p.get("message_index")
            if kind == "system":
                gone = {k for k, (m, _) in enumerate(read.messages) if m["role"] == "system" and k == 0}
            elif kind == "new":
                gone = {at[index]}
            else:  # a kept turn goes whole, as trimming drops it
                group = next((g for g in groups if index in g), [index])
                gone = {at[i] for i in group if i in at}
            piece.keep = [k for k in range(len(read.messages)) if k not in gone]
            if not piece.keep:
                piece.removed_why = NO_MESSAGES
        out.append(piece)
    if read is not None and read.dropped:
        by_index = {d["message_index"]: d for d in read.dropped}
        dropped_groups = turn_groups(sorted(by_index), by_index)
        for n, group in enumerate(dropped_groups):
            count = sum(by_index[i]["count"] for i in group)
            piece = Piece(f"dropped:{n}", "dropped", f"dropped turn {n + 1} ({count} tokens)", None, None,
                          keep=list(range(len(read.messages))), add=[by_index[i] for i in group])
            piece.knocked_why = "The window dropped it, so the model never read it: there is nothing to knock out."
            out.append(piece)
    for piece in out:
        if piece.start is not None and piece.end <= 1:  # the first token alone: it stays readable
            piece.knocked_why = "It is the first token, which a knockout leaves readable: there is nothing to knock out."
    if names is None:
        return out
    named = {p.name: p for p in out}
    chosen = []
    for name in names:
        if name not in named:
            raise ChatlensError(f"there is no piece {name!r}: this turn's pieces are {', '.join(named)}")
        if named[name].removed_why == NO_MESSAGES:  # asked for by name: a request that cannot be met
            raise ChatlensError(f"{name}: {NO_MESSAGES}")
        chosen.append(named[name])
    return chosen


def removed_prompt(tokenizer, template, read: Read, piece: Piece):
    """The prompt without `piece` (or with a dropped turn put back), rendered as the turn was:
    (ids, what) with `what` a sentence saying what stands in its place."""
    msgs = [read.messages[k] for k in piece.keep]
    if piece.add:
        msgs = sorted(msgs + [({"role": d["role"], "content": d["content"]}, d["message_index"]) for d in piece.add],
                      key=lambda m: (m[0]["role"] != "system" or m[1] not in (None, 0), m[1] if m[1] is not None else -1))
    slots = [Slot(dict(m), m["role"], m["role"], i) for m, i in msgs]
    _, ids, pieces = render_pieces(tokenizer, template, slots, add_generation_prompt=piece.header,
                                   special_in_text=read.special_in_text)
    if piece.kind == "system":
        default = next((p["text"] for p in pieces if p["kind"] == "default_system"), None)
        what = (f"The template's default system prompt in its place: “{default.replace(chr(10), '↵')}”." if default
                else "No system prompt in its place: the template writes none of its own.")
    elif piece.kind == "header":
        what = "The reply follows the new message's end with no assistant header."
    elif piece.kind == "new":
        what = "The conversation ends before your message; the reply still follows the assistant header."
    elif piece.kind == "dropped":
        what = "Put back: the dropped turn read again in its place, as a larger window would read it."
    else:
        what = "The whole turn left out (your message and the reply to it), as trimming drops a turn."
    return ids, what


def turn_pieces(tokenizer, template, record, messages, names=None, *, plain=False) -> list:
    """The pieces of a turn (its record and the messages it was made from; plain: read as plain
    text) that a cause takes away, each removal rendered: what chatlens.jobs.CauseJob and the
    command line build the job from. names as pieces_of takes them."""
    read = None if plain else read_of(record, messages)
    pieces = pieces_of(read, record.pieces, names)
    for p in pieces:
        if p.removed_why is None:
            p.removed_ids, p.removed_what = removed_prompt(tokenizer, template, read, p)
    return pieces


def cache_needed(record, pieces, step) -> int:
    """The KV cache a cause needs: the turn's window, or more where a counterfactual is longer."""
    return max([len(record.prompt_ids) + step + 1, record.window] +
               [len(p.removed_ids) + step + 1 for p in pieces if p.removed_ids is not None])


@dataclass
class Cause:
    """A cause's figures (chatlens.jobs.CauseJob places them on the turn: protocol.Caused).

      position, chosen_id  the step's query position and the id whose probability is measured
      p, top_id, top_p     with every piece read: the chosen id's probability, the best id and its
      reply_logprob        the log-probability of reply_ids[:step] then chosen_id
      attention            the inspection's attention[layer][head] at the position
      measures             {piece name: {"knocked": {p, top_id, top_p, reply_logprob} or None,
                            "removed": {...same, prompt_ids, what} or None}}
      reused_tokens        tokens the cache held before the position when the job began
      computed_tokens      every token run through: the inspection's and each counterfactual's
    """
    position: int
    chosen_id: int
    p: float
    top_id: int
    top_p: float
    reply_logprob: float
    attention: list
    measures: dict
    reused_tokens: int
    computed_tokens: int


def _measure(rows) -> dict:
    """A pass's scored rows (target_logit, log_z, top_id, top_logit), the last the step's."""
    target, log_z, top, top_logit = rows[-1]
    return {"p": math.exp(target - log_z), "top_id": int(top), "top_p": math.exp(top_logit - log_z),
            "reply_logprob": math.fsum(t - z for t, z, _, _ in rows)}


@dataclass
class _Unit:
    """One step of a pass: truncate the cache to `at` (None: as it is), feed `ids`, and score
    rows from `score_from` (None: score none) toward the pass `sink`; `hidden` keys a knockout
    hides; `closes` the pass's last unit."""
    at: int | None
    ids: list
    score_from: int | None
    next_id: int
    hidden: tuple | None
    sink: tuple | None  # (piece name or None for the baseline, "knocked" | "removed")
    closes: bool = False
    batch: list | None = None  # [(hidden, sink), ...]: several one-unit passes over the same ids at once

    @property
    def tokens(self) -> int:
        """The tokens it runs through: its ids, once a pass."""
        return len(self.ids) * len(self.batch or [None])


class Causing:
    """The counterfactuals of one step as a job (see the module's docstring)."""

    def __init__(self, cache, prompt_ids, reply_ids, pieces, *, step: int, chunk: int = 0):
        prompt_ids, reply_ids = [int(i) for i in prompt_ids], [int(i) for i in reply_ids]
        self.position = step_position(len(prompt_ids), len(reply_ids), step)
        self.cache, self.step, self.pieces = cache, int(step), list(pieces)
        self.prompt_ids, self.reply_ids = prompt_ids, reply_ids
        self.q0 = len(prompt_ids) - 1
        need = max([self.position + 1] + [len(p.removed_ids) + step for p in pieces if p.removed_ids is not None])
        if need > cache.capacity:
            raise ChatlensError(f"the counterfactuals need {need} tokens of KV cache; it holds {cache.capacity}")
        self.planned = bool(getattr(cache, "planned", False))
        own = int(getattr(cache, "chunk", 0) or 0)
        self.chunk = min((c for c in (own, int(chunk)) if c > 0), default=0)
        ids = prompt_ids + reply_ids[:step]
        self.inspecting = Inspecting(cache, ids, self.position, 1, lens=False)  # its attention, and the chosen id
        self.reused = self.inspecting.reused
        self.prompt_tokens = self.inspecting.prompt_tokens + 1  # grows once the passes are planned
        self.prompt_read = 0
        self._units = None  # the passes' units, once the inspection has ended
        self._rows = {}  # sink -> scored rows so far
        self._flight = []  # (run, unit) submitted, not given (one at a time)
        self._held = self._kept = None
        self._hiding = False  # a knockout's hidden keys are in the cache (truncated at its pass's end)
        self.result = None
        self.stopped = self.failed = False

    @property
    def done(self) -> bool:
        return self.result is not None or self.stopped or self.failed

    @property
    def doing(self) -> str | None:
        """What the next step computes, in words (a page's progress): None once done."""
        if self.done:
            return None
        if self._units is None:
            return "the step itself, read as it was"
        if self._units[0].batch:
            return f"the step with every piece read, and each piece knocked out ({len(self._units[0].batch)} passes at once)"
        names, what = self._units[0].sink or (None, "back")
        if names is None:
            return "the step with every piece read" if what == "with" else "the cache put back as it was"
        labels = {p.name: p.label for p in self.pieces}
        if what == "knocked":
            return f"{labels[names]}: knocked out"
        return " and ".join(labels[n] for n in names) + (": put back" if names[0].startswith("dropped:") else ": removed")

    @property
    def in_flight(self) -> int:
        return self.inspecting.in_flight if self._units is None else len(self._flight)

    # -- planning ---------------------------------------------------------------------------------
    def _plan(self):
        """The passes, once the inspection has said what the step chose."""
        i = self.inspecting.result
        self.chosen_id = self.reply_ids[self.step] if self.step < len(self.reply_ids) else i.chosen_id
        self.attention = i.attention
        self._held = list(self.cache.ids)  # what to leave the cache holding
        targets = self.prompt_ids[self.q0:] + self.reply_ids[:self.step]  # the reply's positions' ids
        units = []
        cached = list(self._held)  # what the cache will hold as the units run

        def feed(at, ids, score_from, hidden, sink):
            """One pass: ids fed after the cache's first `at`, in chunks, rows from score_from scored."""
            nonlocal cached
            step = self.chunk or len(ids)
            for k in range(0, len(ids), step):
                part = ids[k:k + step]
                scored = score_from - k if score_from is not None and score_from < k + len(part) else None
                nxt = ids[k + len(part)] if k + len(part) < len(ids) else self.chosen_id
                units.append(_Unit(at if k == 0 else None, part, max(scored, 0) if scored is not None else None,
                                   nxt, hidden, sink))
            units[-1].closes = True
            cached = cached[:at] + ids if hidden is None else cached[:self.q0]

        feed(self.q0, targets, 0, None, (None, "with"))
        for p in self.pieces:
            if p.knocked_why is None and p.start is not None:
                feed(self.q0, targets, 0, p.hidden, (p.name, "knocked"))
        removals = {}  # removed prompt -> the pieces whose removal renders it (a kept turn's two messages)
        for p in self.pieces:
            if p.removed_why is None and p.removed_ids is not None:
                removals.setdefault(tuple(p.removed_ids), []).append(p.name)
        # from the latest point of difference to the earliest: each reuses what the one before left
        for prompt in sorted(removals, key=lambda ids: -common_prefix(ids, self.prompt_ids)):
            ids = list(prompt) + self.reply_ids[:self.step]
            at = min(common_prefix(ids, cached), len(prompt) - 1)
            feed(at, ids[at:], len(prompt) - 1 - at, None, (tuple(removals[prompt]), "removed"))
        if not self.planned and hasattr(self.cache.backend, "score_many"):
            units = _batched(units, self.q0)
        start = min(u.at for u in units if u.at is not None)
        self._kept = self.cache.kept(start)
        if self._kept is None:  # the positions the passes overwrote, read again
            back = common_prefix(cached, self._held)
            if back < len(self._held):
                feed(back, self._held[back:], None, None, None)
        self._units = units
        self.prompt_tokens += sum(u.tokens for u in units)

    # -- a host that runs planned steps (the browser's worker) -------------------------------------
    def runs(self, depth: int | None = None) -> list:
        """The GPU runs to submit now: one at a time (the inspection's, then each unit's)."""
        if self.done or not self.planned:
            return []
        if self._units is None:
            return self.inspecting.runs(depth)
        if self._flight or not self._units:
            return []
        with self._failing():
            unit = self._units[0]
            self._truncate(unit)
            if unit.score_from is None:
                run = self.cache.plan(unit.ids, 0, chooses=False)
            else:
                run = self.cache.plan_score(unit.ids, score_from=unit.score_from, next_id=unit.next_id,
                                            hidden=unit.hidden)
            self._flight.append((run, unit))
        return [run]

    def give(self, raw) -> list:
        """The bytes the oldest run in flight read back. Returns [] (no reply ids are chosen)."""
        if self.done:
            return []
        if self._units is None:
            before = self.inspecting.prompt_read
            self.inspecting.give(raw)
            self._after_inspecting(before)
            return []
        if not self._flight:
            raise ChatlensError("no run is in flight: submit runs() first")
        run, unit = self._flight.pop(0)
        with self._failing():
            if unit.score_from is None:
                self.cache.read(run, bytes(raw), unit.ids)
                rows = None
            else:
                rows = self.cache.read_score(run, bytes(raw), unit.ids)
            self._done_unit(unit, rows)
        return []

    # -- the synchronous driver's step -------------------------------------------------------------
    def pull(self) -> list:
        """Compute (or, planned, submit and collect) the next step here. Returns []."""
        if self.done:
            return []
        if self.planned:
            runs = self.runs()
            if not runs:
                raise ChatlensError("a run of this job is in flight: give its bytes first")
            with self._failing():
                raw = self.cache.collect(self.cache.submit(runs[0]))
            return self.give(raw)
        if self._units is None:
            before = self.inspecting.prompt_read
            self.inspecting.pull()
            self._after_inspecting(before)
            return []
        with self._failing():
            unit = self._units[0]
            self._truncate(unit)
            if unit.batch:
                every = self.cache.score_many(unit.ids, score_from=unit.score_from, next_id=unit.next_id,
                                              hiddens=[hidden for hidden, _ in unit.batch])
                for (_, sink), rows in zip(unit.batch, every):
                    self._rows[sink] = rows
                rows = None
            elif unit.score_from is None:
                self.cache.prefill(unit.ids)
                rows = None
            else:
                rows = self.cache.score(unit.ids, score_from=unit.score_from, next_id=unit.next_id, hidden=unit.hidden)
            self._done_unit(unit, rows)
        return []

    def stop(self):
        """End it between two pulls, with no result: the cache keeps only ids whose keys and
        values are the model's own for them (what a knockout hid is cut away), or, where it can,
        what it held before the counterfactuals."""
        if self.done:
            return
        if self._units is None:
            self.inspecting.stop()
            self.stopped = True
            return
        self.stopped = True
        self._flight.clear()
        self.cache.truncate(len(self.cache.ids))
        if self._hiding:
            self.cache.truncate(self.q0)
        if self._kept is not None:
            self._put_back()

    # -- the steps' bookkeeping --------------------------------------------------------------------
    def _after_inspecting(self, before):
        i = self.inspecting
        self.prompt_read += i.prompt_read - before
        if i.failed:
            self.failed = True
        elif i.stopped:
            self.stopped = True
        elif i.result is not None:
            self.prompt_read += 1
            with self._failing():
                self._plan()
            self._finish_if_done()

    def _truncate(self, unit):
        if unit.at is not None:
            self.cache.truncate(unit.at)
        self._hiding = unit.hidden is not None

    def _done_unit(self, unit, rows):
        self._units.pop(0)
        self.prompt_read += unit.tokens
        if rows is not None:
            self._rows.setdefault(unit.sink, []).extend(rows)
        if unit.closes and unit.hidden is not None:
            self.cache.truncate(self.q0)  # what the knockout computed is not the model's reading
            self._hiding = False
        self._finish_if_done()

    def _finish_if_done(self):
        if self._units:
            return
        if self._kept is not None:
            self._put_back()
        measures = {p.name: {"knocked": None, "removed": None} for p in self.pieces}
        by_name = {p.name: p for p in self.pieces}
        for (names, what), rows in self._rows.items():
            if names is None:
                continue
            for name in (names,) if what == "knocked" else names:
                m = _measure(rows)
                if what == "removed":
                    m.update(prompt_ids=list(by_name[name].removed_ids), what=by_name[name].removed_what)
                measures[name][what] = m
        base = _measure(self._rows[(None, "with")])
        self.result = Cause(self.position, self.chosen_id, base["p"], base["top_id"], base["top_p"],
                            base["reply_logprob"], self.attention, measures, self.reused, self.prompt_read)

    def _put_back(self):
        self.cache.truncate(min(len(self.cache.ids), self._kept[1][0]))
        self.cache.put_back(self._kept)
        self._kept = None

    @contextmanager
    def _failing(self):
        """A step that fails ends the job, and since what the backend then holds is unknown, the
        cache empties (PromptCache's own rule for its calls)."""
        try:
            yield
        except BaseException:
            self._flight.clear()
            self.failed = True
            self.cache.reset()
            raise


def _batched(units, q0) -> list:
    """The one-unit passes from q0 over the reply's positions (the step with every piece read, and
    each knockout) as one batch unit, for a backend that runs them at once (NumPy's score_many:
    the weights read once for all, not once a pass); the rest as they are."""
    alike = [u for u in units if u.at == q0 and u.closes and u.score_from == 0 and u.sink and u.sink[1] in ("with", "knocked")]
    if len(alike) < 2 or len({tuple(u.ids) for u in alike}) > 1:
        return units
    first = alike[0]
    batch = _Unit(q0, first.ids, 0, first.next_id, None, None, True, [(u.hidden, u.sink) for u in alike])
    return [batch] + [u for u in units if u not in alike]


def shares(attention, record_pieces, pieces) -> dict:
    """Each piece's attention share at the step (inspection.by_piece, every layer and head): piece
    name -> share (None for a dropped turn)."""
    by = by_piece(attention, record_pieces)
    out = {}
    for p in pieces:
        out[p.name] = next((s["share"] for s in by if p.start is not None and s["start"] == p.start
                            and s["kind"] == p.kind), None)
    return out
