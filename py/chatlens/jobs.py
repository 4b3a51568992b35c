"""The jobs a host pulls: one class for each kind of request that computes, one interface for all.

A job holds, from its start, everything it needs (the tokenizer, the cache over the model's
backend, the prompt), and is pulled:

    pull(raw=None, ms=STEP_MS)  the next step: computed here (NumPy; natively on a GPU, a run
                                submitted and waited for), or, given `raw`, the bytes the oldest
                                GPU run in flight read back (the browser's worker submitted it:
                                Python never waits for the GPU). Returns the Tokens it chose.
    answer(tokens, depth)       where the job is, as the page's worker is answered
                                (contract.PullAnswer): those tokens, the GPU runs to submit now,
                                the prompt read so far, and `result` once done
    stop()                      end it between two pulls ("stopped": a reply keeps what it wrote)
    done, result                whether it has ended, and its answer (the class's `answers`; a
                                job with no reply of its own stopped: Stopped)

and declares, as a class (Job), what the page needs of it: the request that starts it, its
arguments and answer, whether it writes a reply, runs in the background, reads a turn's window,
or puts both models on the device. KINDS names each kind's class, once: chatlens.protocol
derives the page's requests from it, and site/js/worker/ reads the flags (protocol.gen.mjs's
JOBS). A new kind is a class and a row of KINDS.

Who pulls: the page's worker (chatlens.worker) starts one from its request's kind (each class's
`start` takes what it needs from the worker, the `host`) and answers each pull; the command line
and the tests construct one and pull it to its end with chatlens.pull.greedy, the one synchronous
driver. A reply is chatlens.pull.Pull over the cache (what the cache holds of
the prompt is reused), its text decoded as it streams, and built once when it ends
(chatlens.reply.reply_of).
"""

import time
from dataclasses import asdict, dataclass, replace

from . import contract, defaults
from .compare import LAYOUTS, plan
from .complete import continuation, prepared, tokenized
from .contract import (AttentionFigures, Branched, CellEnd, CellToken, Compared, Continuation, Counted, GpuRun, Inspected,
                       Prediction, PullAnswer, Stopped, Token)
from .errors import ChatlensError
from .generate import Generation
from .cause import Causing, cache_needed, share
from .inspection import (RECENT, TOP_K, Inspecting, by_piece, figures, reaches, settles, step_position, wordless,
                         strongest_heads)
from .needs import Needing, replies_of
from .pieces import turn_pieces
from .pull import Pull
from .record import TurnRecord, candidate_bytes, candidate_tokens, token_lists
from .reply import reply_of

STEP_MS = contract.Step().ms  # a count's step counts this long before it answers


def checked_top_k(k, default) -> int:
    """A request's top_k (None: `default`), or ChatlensError: 0 (none) or more candidates."""
    k = default if k is None else int(k)
    if k < 0:
        raise ChatlensError(f"top_k must be 0 (none) or more candidates, not {k}")
    return k


class Writing:
    """One greedy reply being written over `cache` (a chatlens.cache.PromptCache): what the cache
    holds of `prompt_ids` is reused, the rest is read `chunk` ids a pull (0: the backend's own),
    then ids are chosen until `reading`'s end of turn (reading: its tokenizer and eos_id) or
    max_tokens. Each pull's ids come back as Tokens, their text decoded so no character is ever
    split; `reply` is built once it has ended."""

    def __init__(self, reading, cache, prompt_ids, *, max_tokens, top_k=0, depth=defaults.IN_FLIGHT, chunk=0):
        self.tokenizer, self.eos_id, self.top_k = reading.tokenizer, reading.eos_id, top_k
        self.cache = cache
        self.reused = cache.reusable(prompt_ids)
        cache.truncate(self.reused)
        # A GPU step reads the program's own chunk: a smaller one only adds steps.
        self.loop = Pull(cache, prompt_ids[self.reused:], eos_id=self.eos_id, max_new_tokens=max_tokens,
                         top_k=top_k, depth=depth, chunk=0 if cache.planned else chunk)
        self.decoder = self.tokenizer.incremental_decoder()
        self._reply = None

    @property
    def done(self) -> bool:
        return self.loop.done

    @property
    def started(self) -> bool:
        """Whether the model has read any of the prompt yet (a step's result given)."""
        return self.loop.prompt_read > 0 or self.loop.chosen > 0

    def pull(self, raw=None) -> list:
        """The next step (on the GPU in the browser: the oldest run's bytes); the Tokens it chose,
        and once the reply has ended the text its last ids left unfinished (id -1)."""
        p = self.loop
        if p.planned and raw is None and p.in_flight:
            raise ChatlensError("a GPU reply's step needs the bytes its oldest run read back")
        chosen = p.give(bytes(raw)) if raw is not None else p.pull()
        tok = self.tokenizer
        out = [Token(id=c.id, text="" if c.id == self.eos_id else self.decoder.add(c.id), token=tok.token_text(c.id),
                     bytes=tok.token_bytes(c.id).hex()) for c in chosen]
        if p.done:
            tail = self.decoder.flush()
            if tail:  # the end of a character the last ids left incomplete
                out.append(Token(id=-1, text=tail, token="", bytes=""))
        return out

    def stop(self):
        self.loop.stop()

    def runs(self, depth=None) -> list:
        """The GPU runs to submit now (none once done, or on a backend that computes itself)."""
        p = self.loop
        return [GpuRun(**r.to_json()) for r in p.runs(depth)] if p.planned and not p.done else []

    def progress(self) -> dict:
        p = self.loop
        return {"read": p.prompt_read, "of": p.prompt_tokens, "in_flight": p.in_flight}

    @property
    def reply(self):
        """The reply (contract.Reply), once it has ended."""
        if self._reply is None and self.done:
            self._reply = reply_of(self.tokenizer, self.eos_id, self.loop.generation, reused=self.reused,
                                   backend=self.cache.backend.name, top_k=self.top_k)
        return self._reply


class Job:
    """What a job declares for the page, read from its class:
      request     the page's request that starts it (window.chatlens's: "run", "count", ...)
      takes       its arguments (a chatlens.contract type): `start` receives them parsed
      answers     its answer once done (`result`)
      writes      it writes a reply the page streams (chatlens.writing while it runs): a stop
                  keeps what it wrote (stop_reason "stopped"); else it has no answer until it
                  ends, and a stop rejects its request with an AbortError
      background  it runs beside the page's other requests and needs no weights (a count): it
                  waits only for a reply being pulled, and a newer one, a preview or a reply
                  ends it
      window      it reads a turn in the turn's window: the weights are fitted to it first
      both_models its replies are both models', each put on the device as its turn comes (a
                  comparison); else the instruct model's weights are put back first
    """
    request: str
    takes: type
    answers: type
    writes = False
    background = False
    window = False
    both_models = False


class _OneReply(Job):
    """A job that is one reply (chat, text, predict, branch): pulled, answered and stopped as its reply;
    its result built once, when the reply has ended (`_result_of`)."""

    writing: Writing
    _result = None

    @property
    def done(self) -> bool:
        return self.writing.done

    @property
    def result(self):
        if self._result is None and self.done:
            self._result = self._result_of(self.writing)
        return self._result

    def pull(self, raw=None, ms=STEP_MS) -> list:
        return self.writing.pull(raw)

    def stop(self):
        self.writing.stop()

    def answer(self, tokens, depth=None) -> PullAnswer:
        w = self.writing
        return PullAnswer(tokens=tokens, runs=w.runs(depth), **w.progress(), record=self._first(),
                          done=self.result if w.done else None)

    def _first(self):
        return None


class ChatJob(_OneReply):
    """A chat turn's reply: `record` (chatlens.turn.preview's, what the model reads) completed with
    it. The first answer carries the record as it stands before the reply, so a page draws what
    the model reads before the first token."""
    request, takes, answers = "run", contract.Turn, TurnRecord
    writes = window = True

    def __init__(self, reading, cache, record, *, top_k=0, depth=defaults.IN_FLIGHT, chunk=0):
        self.record, self.shown = record, False
        self.writing = Writing(reading, cache, record.prompt_ids, max_tokens=record.max_tokens, top_k=top_k,
                               depth=depth, chunk=chunk)

    @classmethod
    def start(cls, host, turn, *, depth, chunk):
        record = host.record_of(turn)
        cache = host.cache_for(record.window, f"a window of {record.window} tokens")
        return cls(host.text, cache, record, top_k=checked_top_k(turn.top_k, 0), depth=depth, chunk=chunk)

    def _result_of(self, w):
        return self.record.with_reply(w.reply)

    def _first(self):
        if self.shown:
            return None
        self.shown = True
        return self.record


class TextJob(_OneReply):
    """Plain text continued with no template (chatlens.complete): a Continuation."""
    request, takes, answers = "complete", contract.Text, Continuation
    writes = True

    def __init__(self, reading, cache, text, *, max_tokens, top_k=0, depth=defaults.IN_FLIGHT, chunk=0):
        self.text = prepared(reading.tokenizer, text, max_tokens, cache.capacity)
        self.writing = Writing(reading, cache, self.text.prompt_ids, max_tokens=max_tokens, top_k=top_k, depth=depth,
                               chunk=chunk)

    @classmethod
    def start(cls, host, request, *, depth, chunk):
        n = len(host.text.tokenizer.encode(request.text)) + request.max_tokens
        cache = host.cache_for(n, f"the text and {request.max_tokens} new tokens ({n} tokens)")
        return cls(host.text, cache, request.text, max_tokens=request.max_tokens,
                   top_k=checked_top_k(request.top_k, 0), depth=depth, chunk=chunk)

    def _result_of(self, w):
        return continuation(self.text, w.reply, w.eos_id)


class PredictJob(_OneReply):
    """A draft's likely first tokens: one step of its reply, with the first step's candidates. A
    look-ahead: once done the cache is truncated back to what it reused, so the reuse a preview
    and a send report stays."""
    request, takes, answers = "predict", contract.Turn, Prediction

    def __init__(self, reading, cache, record, *, top_k=defaults.TOP_K, depth=defaults.IN_FLIGHT, chunk=0):
        self.record = record
        self.writing = Writing(reading, cache, record.prompt_ids, max_tokens=1, top_k=top_k, depth=depth,
                               chunk=chunk)

    @classmethod
    def start(cls, host, turn, *, depth, chunk):
        record = host.record_of(turn)
        cache = host.cache_for(record.window, f"a window of {record.window} tokens")
        k = checked_top_k(turn.top_k, defaults.TOP_K) or defaults.TOP_K
        return cls(host.text, cache, record, top_k=k, depth=depth, chunk=chunk)

    def _result_of(self, w):
        w.cache.truncate(w.reused)
        best = w.loop.generation.top_k[0] if w.loop.generation.top_k else []
        tok = w.tokenizer
        return Prediction(top_k=best, top_k_tokens=candidate_tokens(tok, [best])[0] if best else [],
                          top_k_bytes=candidate_bytes(tok, [best])[0] if best else [], used=self.record.used,
                          reused_tokens=w.reused, backend=w.cache.backend.name)


class BranchJob(_OneReply):
    """Another choice at one step of a reply (contract.Branch): the reply's first `step` ids, then
    `id`, then greedy again, until the end of turn or max_tokens ids in all (the ids kept
    included). The cache reuses what it holds of the prompt and the reply up to the step: after
    the reply it holds them, so only `id` is read before the branch chooses. An `id` that ends
    the turn, or a cap the kept ids already reach, ends the branch with nothing to compute. Its
    answer is the branch as a reply, a row of candidates a reply id when they are asked for (top_k):
    the reply's own up to the step replaced (reply_top_k; null rows where not given), then the
    branch's."""
    request, takes, answers = "branch", contract.Branch, Branched
    writes = window = True

    def __init__(self, reading, cache, prompt_ids, reply_ids, *, step, id, max_tokens, top_k=0, reply_top_k=None,
                 depth=defaults.IN_FLIGHT, chunk=0):
        vocab = reading.tokenizer.vocab_size
        if not 0 <= step < len(reply_ids):
            raise ChatlensError(f"step {step} is not a step of this reply, which chose {len(reply_ids)} "
                                f"token{'s' if len(reply_ids) != 1 else ''} (steps 0 to {len(reply_ids) - 1})")
        if not 0 <= id < vocab:
            raise ChatlensError(f"id {id} is not a token: the vocabulary's ids are 0 to {vocab - 1}")
        if max_tokens < step + 1:
            raise ChatlensError(f"max_tokens {max_tokens} leaves no room for the id taken at step {step}")
        self.prompt_ids, self.reply_ids, self.step, self.id = list(prompt_ids), list(reply_ids), step, id
        self.tokenizer, self.eos_id, self.top_k = reading.tokenizer, reading.eos_id, top_k
        # the reply's candidates up to the step replaced (that step's included: the same ids were read
        # there), a row null where they were not given
        given = list(reply_top_k or [])[:step + 1]
        self.kept_rows = given + [None] * (step + 1 - len(given))
        self.kept = self.reply_ids[:step] + [id]
        self.cache = cache
        ids = self.prompt_ids + self.kept
        if id == self.eos_id or max_tokens == len(self.kept):  # nothing left to choose
            self.writing = None
            self.reused = cache.reusable(ids)
            return
        self.writing = Writing(reading, cache, ids, max_tokens=max_tokens - len(self.kept), top_k=top_k, depth=depth,
                               chunk=chunk)

    @classmethod
    def start(cls, host, request, *, depth, chunk):
        if request.reply_ids is None:
            raise ChatlensError("a branch needs the reply it branches from (reply_ids)")
        record = host.record_of(request)
        cache = host.cache_for(record.window, f"a window of {record.window} tokens")
        return cls(host.text, cache, record.prompt_ids, request.reply_ids, step=request.step, id=request.id,
                   max_tokens=record.max_tokens, top_k=checked_top_k(request.top_k, 0), reply_top_k=request.reply_top_k,
                   depth=depth, chunk=chunk)

    @property
    def done(self) -> bool:
        return self.writing is None or self.writing.done

    def pull(self, raw=None, ms=STEP_MS) -> list:
        return self.writing.pull(raw) if self.writing is not None else []

    def stop(self):
        if self.writing is not None:
            self.writing.stop()

    def answer(self, tokens, depth=None) -> PullAnswer:
        if self.writing is None:
            n = len(self.prompt_ids) + len(self.kept)
            return PullAnswer(tokens=tokens, runs=[], read=n, of=n, in_flight=0, done=self.result)
        return super().answer(tokens, depth)

    def _result_of(self, w):
        if w is None:  # the id ended it, or the cap: nothing was computed
            gen = Generation(stop_reason="end_turn" if self.id == self.eos_id else "max_tokens")
            reply = reply_of(self.tokenizer, self.eos_id, gen, reused=self.reused, backend=None, top_k=self.top_k)
        else:
            reply = w.reply
        ids = self.kept + reply.reply_ids
        words = ids[:-1] if ids[-1] == self.eos_id else ids
        rows = None if reply.top_k is None else self.kept_rows + reply.top_k
        tok = self.tokenizer

        def spelled(candidates):  # each row's tokens (or bytes), a null row left null
            return None if rows is None else [None if row is None else candidates(tok, [row])[0] for row in rows]

        return Branched(**token_lists(tok, ids, "reply_"), reply_text=tok.decode(words), stop_reason=reply.stop_reason,
                        top_k=rows, top_k_tokens=spelled(candidate_tokens), top_k_bytes=spelled(candidate_bytes),
                        reused_tokens=reply.reused_tokens, computed_tokens=reply.computed_tokens,
                        backend=reply.backend, timings=reply.timings, prompt_ids=self.prompt_ids, step=self.step,
                        id=self.id, branched_from=self.reply_ids)


@dataclass(frozen=True)
class PlainRead:
    """What a model reads of plain text (an inspection's layout "plain"), in a turn record's
    names: the ids, one piece (kind "text") over them all, and no window but their own."""
    prompt_ids: list
    pieces: list
    window: int


def plain_read(tokenizer, messages) -> PlainRead:
    """The last message's text as plain text reads it: tokenized as it is (chatlens.complete)."""
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        raise ChatlensError("plain text's inspection reads the last message's text: send it as the one message")
    ids = tokenized(tokenizer, messages[-1].get("content")).prompt_ids
    if not ids:
        raise ChatlensError("the text is empty: there is nothing to inspect")
    return PlainRead(ids, [{"kind": "text", "label": "the text", "start": 0, "end": len(ids)}], len(ids))


def _inspected_read(host, request, what):
    """(what the model read, the messages) of an Inspect request (a Cause's too), checked: its
    reply so far, its model, its layout. Raises ChatlensError with a sentence."""
    if request.reply_ids is None:
        raise ChatlensError(f"{what} needs the reply so far (reply_ids; [] for the first token)")
    if request.model not in contract.MODELS:
        raise ChatlensError(f"the model must be one of {', '.join(contract.MODELS)}, not {request.model!r}")
    if request.layout not in LAYOUTS:
        raise ChatlensError(f"the layout must be one of {', '.join(LAYOUTS)}, not {request.layout!r}")
    if request.layout == "template":
        return host.record_of(request), request.messages
    return plain_read(host.text.tokenizer, request.messages), request.messages


class _Pulled(Job):
    """A job that writes no reply, pulled as its chatlens.pulled job (`pulled`) is: an inspection,
    a cause, a conversation's needs. Its answer once done is `_answer(pulled.result)`, or Stopped
    when it was stopped; its progress the pulled job's, and `doing` and `stage` where it says them."""
    pulled = None
    model = "instruct"
    _result = None

    @property
    def done(self) -> bool:
        return self.pulled.done

    def pull(self, raw=None, ms=STEP_MS) -> list:
        return self.pulled.give(bytes(raw)) if raw is not None else self.pulled.pull()

    def stop(self):
        self.pulled.stop()

    @property
    def result(self):
        j = self.pulled
        if self._result is None and j.done:
            self._result = Stopped() if j.result is None else self._answer(j.result)
        return self._result

    def answer(self, tokens, depth=None) -> PullAnswer:
        j = self.pulled
        runs = [GpuRun(**r.to_json()) for r in j.runs(depth)] if j.planned and not j.done else []
        stage = getattr(j, "stage", None)
        return PullAnswer(tokens=[], runs=runs, read=j.prompt_read, of=j.prompt_tokens, in_flight=j.in_flight,
                          done=self.result, model=self.model, doing=getattr(j, "doing", None),
                          stage=None if stage is None or j.done else contract.Stage(*stage))


class InspectJob(_Pulled):
    """One step of a reply inspected (chatlens.inspection.Inspecting over the cache): the query's
    attention over what it read and the logit lens, placed on the turn's pieces. The cache
    reuses what it holds before the query's position (after the reply, all of it: one token is
    read); what it lacks is read first, a chunk a pull, and the answer says so in a note."""
    request, takes, answers = "inspect", contract.Inspect, Inspected
    window = True

    def __init__(self, cache, record, reply_ids, tokenizer, *, step, top_k=None, model="instruct"):
        """record: what the model read, a TurnRecord or a PlainRead (its prompt_ids and pieces);
        model: the key of the model whose backend `cache` is over (its GPU runs go to it)."""
        self.record, self.reply_ids, self.step, self.tokenizer = record, list(reply_ids), step, tokenizer
        self.model, self.cache = model, cache
        position = step_position(len(record.prompt_ids), len(self.reply_ids), step)
        ids = list(record.prompt_ids) + self.reply_ids[:step]
        self.pulled = Inspecting(cache, ids, position, TOP_K if top_k is None else top_k)

    @classmethod
    def start(cls, host, request, *, depth, chunk):
        read, _ = _inspected_read(host, request, "an inspection")
        n = len(read.prompt_ids) + request.step
        cache = host.cache_for(max(n, read.window), f"the prompt and the reply so far ({n} tokens)", request.model)
        return cls(cache, read, request.reply_ids, host.text.tokenizer, step=request.step, top_k=request.top_k,
                   model=request.model)

    def _answer(self, r):
        i = self.pulled
        read = i.prompt_tokens + 1
        note = None
        if i.prompt_tokens:  # what the cache lacked: the figures, not a guess at why
            note = (f"The model's cache held {i.reused} of the {r.position} tokens before this step, so the "
                    f"inspection read {read} tokens, not one.")
        ids = list(self.record.prompt_ids) + self.reply_ids[:self.step]
        blank = wordless([self.tokenizer.token_text(i) for i in ids])
        pieces, heads = self.record.pieces, reaches(r.attention, wordless=blank)
        each = [AttentionFigures(**figures(r.attention, pieces, layer=layer, heads=heads))
                for layer in [None, *range(len(r.attention))]]
        return Inspected(prompt_ids=list(self.record.prompt_ids), reply_ids=self.reply_ids, step=self.step,
                         position=r.position, query_id=r.query_id, chosen_id=r.chosen_id, attention=r.attention,
                         by_piece=by_piece(r.attention, pieces), lens=r.lens,
                         lens_tokens=candidate_tokens(self.tokenizer, r.lens), every_layer=each[0],
                         each_layer=each[1:], settles=settles(r.lens, r.chosen_id), recent=RECENT,
                         strongest_heads=strongest_heads(r.attention, pieces, blank), reused_tokens=i.reused,
                         computed_tokens=read, backend=self.cache.backend.name, note=note)


def spelled(tok, rows) -> list:
    """Each reply position's figures ({p, top_id, top_p}) with the best id's token as text."""
    return [{**r, "top_token": tok.token_text(r["top_id"])} for r in rows]


def cause_piece(tok, piece, cause, tokens=False) -> contract.CausePiece:
    """A chatlens.pieces.Piece with a Cause's figures for it: the one place a piece meets the page."""
    def measured(m):
        if m is None:
            return None
        m = {**m, "tokens": spelled(tok, m["tokens"])} if tokens else _no_tokens(m)
        return contract.Measure(top_token=tok.token_text(m["top_id"]), **m)

    got = cause.measures[piece.name]
    removed = measured(got["removed"])
    if removed is not None:
        removed = replace(removed, prompt_ids=list(piece.removed_ids), what=piece.removed_what)
    return contract.CausePiece(name=piece.name, kind=piece.kind, label=piece.label, start=piece.start, end=piece.end,
                               spans=[list(s) for s in piece.spans], count=piece.tokens, messages=list(piece.messages),
                               attention_share=share(cause.attention, piece.spans) if piece.spans else None,
                               knocked=measured(got["knocked"]), removed=removed, knocked_why=piece.knocked_why,
                               removed_why=piece.removed_why)


def _no_tokens(m):
    return {k: v for k, v in m.items() if k != "tokens"}


class CauseJob(_Pulled):
    """Which piece one step of a reply needed (chatlens.cause.Causing over the cache): each piece of
    the turn knocked out and removed, every counterfactual a pass over the reply so far, placed on
    the turn's pieces. Afterwards the cache holds what it held (what the next turn reuses).
    tokens: each measure carries every reply position's figures too."""
    request, takes, answers = "cause", contract.Cause, contract.Caused
    window = True

    def __init__(self, cache, record, reply_ids, pieces, tokenizer, *, step, chunk=0, model="instruct",
                 tokens=False, reply_top_k=None):
        """record: what the model read (a TurnRecord or a PlainRead); pieces: chatlens.pieces.Piece
        values (pieces.turn_pieces); reply_top_k: the reply's own steps' candidates, where its host
        wrote it (chatlens.cause.own_rows)."""
        self.record, self.reply_ids, self.step, self.tokenizer = record, list(reply_ids), step, tokenizer
        self.pieces, self.model, self.cache, self.tokens = pieces, model, cache, tokens
        self.pulled = Causing(cache, record.prompt_ids, self.reply_ids, pieces, step=step, chunk=chunk,
                              reply_top_k=reply_top_k)

    @classmethod
    def start(cls, host, request, *, depth, chunk):
        record, messages = _inspected_read(host, request, "a cause")
        tok = host.text.tokenizer
        pieces = turn_pieces(tok, host.text.template, record, messages, request.pieces, plain=request.layout == "plain")
        n = max(cache_needed(len(record.prompt_ids), pieces, request.step), record.window)
        cache = host.cache_for(n, f"the prompt, its counterfactuals and the reply so far ({n} tokens)", request.model)
        return cls(cache, record, request.reply_ids, pieces, tok, step=request.step, chunk=chunk, model=request.model,
                   tokens=request.tokens, reply_top_k=host.written(request.model, record.prompt_ids, request.reply_ids))

    def _answer(self, r):
        tok = self.tokenizer
        return contract.Caused(prompt_ids=list(self.record.prompt_ids), reply_ids=self.reply_ids, step=self.step,
                               position=r.position, chosen_id=r.chosen_id, chosen_token=tok.token_text(r.chosen_id),
                               p=r.p, top_id=r.top_id, top_p=r.top_p, reply_logprob=r.reply_logprob,
                               tokens=spelled(tok, r.tokens) if self.tokens else None,
                               pieces=[cause_piece(tok, p, r, self.tokens) for p in self.pieces],
                               reused_tokens=r.reused_tokens, computed_tokens=r.computed_tokens,
                               backend=self.cache.backend.name)


NOT_ASKED = "Not asked: a conversation's needs knock pieces out only on request (knocked)."


class NeedsJob(_Pulled):
    """Which turn each reply of a conversation needed (chatlens.needs.Needing over the cache): each
    reply's cause at its last step, turn after turn, each piece removed (knocked out when asked).
    Afterwards the cache holds the last turn's prompt and reply (what a next turn reuses)."""
    request, takes, answers = "needs", contract.Needs, contract.Needed
    window = True

    def __init__(self, cache, replies, tokenizer, *, chunk=0, knocked=False, tokens=False):
        self.replies, self.tokenizer, self.cache, self.tokens, self.knocked = replies, tokenizer, cache, tokens, knocked
        measures = ("knocked", "removed") if knocked else ("removed",)
        self.reused = cache.reusable(replies[0].record.prompt_ids)
        self.pulled = Needing(cache, replies, chunk=chunk, measures=measures)

    @classmethod
    def start(cls, host, request, *, depth, chunk):
        replies = [replace(r, top_k=host.written("instruct", r.record.prompt_ids, r.reply_ids))
                   for r in replies_of(host.record_of, host.text.tokenizer, host.text.template, host.text.eos_id, request)]
        n = max(r.cache for r in replies)
        cache = host.cache_for(n, f"the conversation's longest turn and its counterfactuals ({n} tokens)")
        return cls(cache, replies, host.text.tokenizer, chunk=chunk, knocked=request.knocked, tokens=request.tokens)

    def _answer(self, causes):
        tok = self.tokenizer
        turns = []
        for r, c in zip(self.replies, causes):
            pieces = [cause_piece(tok, p, c, self.tokens) for p in r.pieces]
            if not self.knocked:
                pieces = [replace(p, knocked_why=p.knocked_why or NOT_ASKED) for p in pieces]
            turns.append(contract.NeededTurn(turn=r.turn, message_index=r.message_index,
                                             prompt_ids=list(r.record.prompt_ids), reply_ids=list(r.reply_ids),
                                             reply_tokens=[tok.token_text(i) for i in r.reply_ids],
                                             reply_logprob=c.reply_logprob,
                                             tokens=spelled(tok, c.tokens) if self.tokens else None,
                                             pieces=pieces))
        return contract.Needed(turns=turns, knocked=self.knocked, reused_tokens=self.reused,
                               computed_tokens=self.pulled.prompt_read, backend=self.cache.backend.name)


class CompareJob(Job):
    """The comparison's four replies (chatlens.compare.plan), in the plan's order, each from an
    empty cache over its model's backend (`caches`: model key -> PromptCache), every one read with
    the instruct model's tokenizer and stopped at its end of turn. Tokens are CellTokens; each
    answer names the model whose runs it plans, the reply under way (`cell`) and the replies that
    ended in its step (`ended`: each one's model, layout and stop_reason, as it ends, so the page
    shows a reply's end the moment it comes). A stop ends the reply under way and every one after
    it."""
    request, takes, answers = "compare", contract.Compare, Compared
    writes = both_models = True

    def __init__(self, plan, caches, *, depth=defaults.IN_FLIGHT, chunk=0):
        self.plan, self.caches, self.depth, self.chunk = plan, caches, depth, chunk
        self.replies = {}  # (model key, layout) -> Reply, as each ends
        self.ended = []  # CellEnd of each reply that ended since the last answer
        self.stopped = False
        self.at = -1  # the reply under way, in the plan's order
        self.writing = None
        self.prompt_shown = False
        self._next()

    @classmethod
    def start(cls, host, request, *, depth, chunk):
        if host.base_text is None:
            raise ChatlensError("the comparison needs the base model, which is not loaded: download it first")
        missing = [m for m in contract.MODELS if not host.has_weights(m)]
        if missing:
            raise ChatlensError(f"the comparison needs the {' and the '.join(missing)} model's weights, which are not "
                                "loaded yet")
        p = plan(host.text, host.base_text, request.text, max_tokens=request.max_tokens, top_k=request.top_k)
        caches = {m: host.cache_for(p.capacity, f"the comparison's {p.capacity} tokens", m) for m in contract.MODELS}
        return cls(p, caches, depth=depth, chunk=chunk)

    def _next(self):
        self.at += 1
        if self.stopped or self.at >= len(self.plan.replies):
            self.writing = None
            return
        key, _, ids = self.plan.replies[self.at]
        cache = self.caches[key]
        cache.reset()  # from nothing, as `complete` and `run` read each prompt
        p = self.plan
        self.writing = Writing(p, cache, list(ids), max_tokens=p.max_tokens, top_k=p.top_k, depth=self.depth,
                               chunk=self.chunk)

    @property
    def done(self) -> bool:
        return self.writing is None

    @property
    def key(self):
        """(model key, layout) of the reply under way (the last one's once done)."""
        return self.plan.replies[min(self.at, len(self.plan.replies) - 1)][:2]

    def pull(self, raw=None, ms=STEP_MS) -> list:
        key, layout = self.key
        tokens = [CellToken(**asdict(t), model=key, layout=layout) for t in self.writing.pull(raw)]
        if self.writing.done:  # this reply has ended: the next starts in the same answer
            reply = self.replies[key, layout] = self.writing.reply
            self.ended.append(CellEnd(model=key, layout=layout, stop_reason=reply.stop_reason))
            self._next()
        return tokens

    def stop(self):
        self.stopped = True
        if self.writing is not None:
            self.writing.stop()
            if self.writing.started:  # else it never started: Plan.answer says so
                self.replies[self.key] = self.writing.reply
            self.writing = None

    @property
    def result(self):
        return self.plan.answer(self.replies) if self.done else None

    def answer(self, tokens, depth=None) -> PullAnswer:
        w = self.writing
        prompt = None if self.prompt_shown else self.plan.prompt
        self.prompt_shown = True
        progress = w.progress() if w else {"read": 0, "of": 0, "in_flight": 0}
        ended, self.ended = self.ended, []
        return PullAnswer(tokens=tokens, runs=w.runs(depth) if w else [], **progress, done=self.result,
                          prompt=prompt, model=self.key[0], cell=min(self.at, len(self.plan.replies) - 1), ended=ended)


class CountJob(Job):
    """The exact count of what a turn's system prompt and new message need (chatlens.window.counting:
    the figures a preview's bound could only put a floor under), a time-sliced step at a time: each
    pull counts for at most `ms`, so the page's other requests wait about that long at most."""
    request, takes, answers = "count", contract.Turn, Counted
    background = True

    def __init__(self, steps, context):
        self.steps, self.context = steps, context
        self.at = next(steps)  # (characters read, of all): nothing is counted yet
        self.result = None

    @classmethod
    def start(cls, host, turn, *, depth, chunk):
        job = cls(host.counting(turn), host.text.config.n_ctx)
        job.pull()  # a short count is done in its start's answer
        return job

    @property
    def done(self) -> bool:
        return self.result is not None

    def pull(self, raw=None, ms=STEP_MS) -> list:
        deadline = time.perf_counter() + ms / 1000
        try:
            while True:
                self.at = next(self.steps)
                if time.perf_counter() >= deadline:
                    break
        except StopIteration as end:
            self.at = (self.at[1], self.at[1])
            self.result = Counted(**end.value, context=self.context)
        return []

    def stop(self):
        self.steps.close()
        self.result = Stopped()

    def answer(self, tokens, depth=None) -> PullAnswer:
        read, of = self.at
        return PullAnswer(tokens=[], runs=[], read=read, of=of, in_flight=0, done=self.result)


# start's kinds: the job each starts, named by the page's request that starts it (its class declares the rest, Job).
KINDS = {job.request: job for job in (ChatJob, TextJob, PredictJob, CountJob, CompareJob, BranchJob, InspectJob, CauseJob,
                                      NeedsJob)}
