"""The pieces of what a turn's model read, each one value from the record to the page, and a
removal as a mask over them rendered by one function.

A turn record's pieces (chatlens.window: the system prompt, each message of a kept turn, the new
message, the generation header; dicts in TurnRecord.pieces) become `Piece`s here, in one place
(`turn_pieces`), with the turn's dropped turns and two groups beside them:

  replies:0   the assistant's own earlier replies, every one at once
  history:0   every earlier turn (offered from two kept turns on: with one it is that turn)
  "a+b"       two pieces together, on request (a single knockout can understate a piece when
              another carries the same thing)

A Piece says where it lies (`spans`: its token positions, several for a group) and what its
removal renders (`removed_ids`, and `removed_what` in a sentence), or why a measure cannot be
taken. A removal is a `Mask` over the turn's `Read` (the messages rendered, the dropped ones, the
generation header): which are rendered. `render` is the one function that renders a mask, as
ContextCite's get_context(mask) does; what a mask leaves out is ContextCite's ablation:

  system      the template's own default in its place (what it writes when there is none)
  a kept turn the whole turn (its user message and the reply to it), as trimming drops it
  new         your message; the rest as it was
  header      the assistant header after your message
  dropped     put back: the dropped turn read again in its place, as a larger window would read it
  replies     every earlier reply; your earlier messages stay
  history     every earlier turn: the system prompt and your message alone

Pure Python (the browser's worker builds pieces before any weights arrive).
"""

from dataclasses import dataclass

from .errors import ChatlensError
from .window import Slot, pieces_of as render_slots, turn_groups

# Why a piece cannot be removed, in a learner's words
NOT_REMOVABLE = {
    "default_system": "The template writes this system prompt itself whenever the conversation has none, so it "
                      "cannot be left out; choose another system prompt to replace it.",
    "prompt": "The template's pieces could not be told apart, so no one of them can be left out.",
    "text": "Plain text is one piece: without it there is nothing left to read.",
}
NO_MESSAGES = "Without it no message is left: the template would render nothing to read."
NEVER_READ = "The window dropped it, so the model never read it: there is nothing to knock out."
FIRST_TOKEN = "It is the first token, which a knockout leaves readable: there is nothing to knock out."
# What stands in a piece's place once it is removed, by kind (a system prompt's quotes the default)
REMOVED_WHAT = {
    "header": "The reply follows the new message's end with no assistant header.",
    "new": "The conversation ends before your message; the reply still follows the assistant header.",
    "dropped": "Put back: the dropped turn read again in its place, as a larger window would read it.",
    "turn": "The whole turn left out (your message and the reply to it), as trimming drops a turn.",
    "replies": "Every earlier reply of the assistant left out; your earlier messages stay, one after another.",
    "history": "Every earlier turn left out: the model reads the system prompt and your message alone.",
}


@dataclass(frozen=True)
class Read:
    """What a turn's prompt was rendered from, to render it again under a mask: the messages in
    the order the template read them ((message dict, its index in the conversation or None), a
    system message first when the record has one), the dropped messages (dicts: message_index,
    role, content, count), whether special tokens in text are tokens."""
    messages: tuple
    dropped: tuple = ()
    special_in_text: bool = True


@dataclass(frozen=True)
class Mask:
    """Which sources of a Read a render reads: `keep`, positions in Read.messages; `add`, the
    message_index of dropped messages put back; `header`, the generation header."""
    keep: frozenset
    add: frozenset = frozenset()
    header: bool = True


@dataclass(frozen=True)
class Piece:
    """One piece of what the model read, as a cause takes it away and the page shows it.

      name          "kind:index": the index-th piece of that kind in the record, from 0
                    ("system:0", "user:1", "new:0", "header:0"; a dropped turn's kind is "dropped",
                    the groups' "replies:0" and "history:0"); two together "a+b"
      kind          the record's piece kind, or "dropped", "replies", "history", "together"
      label         the piece as the page names it
      spans         ((start, end), ...): its token positions in the prompt, in order; () for a
                    dropped turn, never read
      removed_ids   the prompt its removal renders (a dropped turn: put back); None: removed_why
      removed_what  what stands in its place, in a sentence
      knocked_why   why it cannot be knocked out (None: it can)
      removed_why   why it cannot be removed (None: it can)
      messages      the conversation's messages it holds (their indexes; () for the template's own:
                    its default system prompt, the header; a system prompt given apart)
      put_back      a dropped turn's tokens, its messages together as the window counted them when
                    it dropped them (what its label says); 0 for a piece that was read
    """
    name: str
    kind: str
    label: str
    spans: tuple = ()
    removed_ids: tuple | None = None
    removed_what: str | None = None
    knocked_why: str | None = None
    removed_why: str | None = None
    messages: tuple = ()
    put_back: int = 0

    @property
    def start(self) -> int | None:
        return self.spans[0][0] if self.spans else None

    @property
    def end(self) -> int | None:
        return self.spans[-1][1] if self.spans else None

    @property
    def tokens(self) -> int:
        """Its tokens: those it holds in the prompt; a dropped turn's, the whole turn's put back."""
        return sum(b - a for a, b in self.spans) or self.put_back

    @property
    def hidden(self) -> tuple:
        """The key ranges a knockout hides: the piece's, but the first token's, which stays
        readable (heads park weight there: hiding it would disturb them all, not test the piece;
        the Pirate's second " Captain" on the GGUF: 0.62 with it readable, 0.12 with it hidden)."""
        return tuple((max(a, 1), b) for a, b in self.spans if b > max(a, 1))


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
    return Read(tuple(read), tuple(record.dropped_messages or ()), bool(record.special_in_text))


def render(tokenizer, template, read: Read, mask: Mask):
    """The prompt a mask reads, rendered as the turn was: (ids, the record's pieces of it)."""
    msgs = [read.messages[k] for k in sorted(mask.keep)]
    added = [({"role": d["role"], "content": d["content"]}, d["message_index"]) for d in read.dropped
             if d["message_index"] in mask.add]
    # a dropped turn goes back where it was: after a system message, before the kept turns
    msgs = sorted(msgs + added, key=lambda m: (m[0]["role"] != "system" or m[1] not in (None, 0),
                                               m[1] if m[1] is not None else -1))
    slots = [Slot(dict(m), m["role"], m["role"], i) for m, i in msgs]
    _, ids, pieces = render_slots(tokenizer, template, slots, add_generation_prompt=mask.header,
                                  special_in_text=read.special_in_text)
    return ids, pieces


@dataclass(frozen=True)
class _Found:
    """A piece before its removal is rendered: where it lies, and the mask its removal reads."""
    name: str
    kind: str
    label: str
    spans: tuple
    mask: Mask | None
    what: str | None  # REMOVED_WHAT's key, or "system"
    knocked_why: str | None = None
    removed_why: str | None = None
    messages: tuple = ()
    put_back: int = 0  # a dropped turn's tokens (Piece.put_back)


def _merged(spans) -> tuple:
    """Spans in order, touching ones joined."""
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


def _found(read: Read | None, record_pieces) -> list:
    """Every piece of a turn, its groups and its dropped turns, before any removal is rendered.
    read None: plain text (one piece, nothing to render it from)."""
    out, seen = [], {}
    whole = frozenset(range(len(read.messages))) if read else frozenset()
    at = {index: k for k, (_, index) in enumerate(read.messages) if index is not None} if read else {}
    history = [p for p in record_pieces if p.get("message_index") is not None and p["kind"] not in ("system", "new")]
    groups = turn_groups([p["message_index"] for p in history], {i: m for m, i in read.messages if i is not None}) \
        if read and history else []
    for p in record_pieces:
        kind = p["kind"]
        n = seen.get(kind, 0)
        seen[kind] = n + 1
        spans = ((int(p["start"]), int(p["end"])),)
        mask, what, why = None, None, None
        if read is None or kind in NOT_REMOVABLE:
            why = NOT_REMOVABLE.get(kind, NOT_REMOVABLE["text"])
        elif kind == "header":
            mask, what = Mask(whole, header=False), "header"
        else:
            index = p.get("message_index")
            if kind == "system":
                gone, what = {k for k, (m, _) in enumerate(read.messages) if m["role"] == "system" and k == 0}, "system"
            elif kind == "new":
                gone, what = {at[index]}, "new"
            else:  # a kept turn goes whole, as trimming drops it
                group = next((g for g in groups if index in g), [index])
                gone, what = {at[i] for i in group if i in at}, "turn"
            mask = Mask(whole - gone)
        index = p.get("message_index")
        out.append(_Found(f"{kind}:{n}", kind, p["label"], spans, mask, what, removed_why=why,
                          messages=() if index is None else (int(index),)))
    if len(groups) >= 2:  # the groups: with one kept turn, each would be a piece already offered
        replies = [p for p in history if p["kind"] == "assistant"]
        if replies:
            spans = _merged((int(p["start"]), int(p["end"])) for p in replies)
            out.append(_Found("replies:0", "replies", f"the assistant's earlier replies ({_count(spans)} tokens)",
                              spans, Mask(whole - {at[p["message_index"]] for p in replies}), "replies",
                              messages=tuple(p["message_index"] for p in replies)))
        spans = _merged((int(p["start"]), int(p["end"])) for p in history)
        out.append(_Found("history:0", "history", f"every earlier turn ({_count(spans)} tokens)", spans,
                          Mask(whole - {at[p["message_index"]] for p in history}), "history",
                          messages=tuple(p["message_index"] for p in history)))
    if read is not None and read.dropped:
        by_index = {d["message_index"]: d for d in read.dropped}
        for n, group in enumerate(turn_groups(sorted(by_index), by_index)):
            count = sum(by_index[i]["count"] for i in group)
            out.append(_Found(f"dropped:{n}", "dropped", f"dropped turn {n + 1} ({count} tokens)", (),
                              Mask(whole, frozenset(group)), "dropped", knocked_why=NEVER_READ, messages=tuple(group), put_back=count))
    return [f if f.mask is None or f.mask.keep or f.mask.add else _no_messages(f) for f in out]


def _count(spans) -> int:
    return sum(b - a for a, b in spans)


def _no_messages(f: _Found) -> _Found:
    return _Found(f.name, f.kind, f.label, f.spans, None, None, f.knocked_why, NO_MESSAGES, f.messages, f.put_back)


def _together(a: _Found, b: _Found) -> _Found:
    """Two pieces taken away at once: both knocked out (their spans hidden together), both removed
    (the mask that reads neither)."""
    if "dropped" in (a.kind, b.kind):
        raise ChatlensError(f"{a.name}+{b.name}: a dropped turn is put back, not taken away, so it cannot be paired")
    if a.name == b.name:
        raise ChatlensError(f"{a.name}+{b.name}: a piece cannot be paired with itself")
    mask = None
    if a.mask is not None and b.mask is not None:
        mask = Mask(a.mask.keep & b.mask.keep, a.mask.add | b.mask.add, a.mask.header and b.mask.header)
    found = _Found(f"{a.name}+{b.name}", "together", f"{a.label} and {b.label}", _merged(a.spans + b.spans), mask,
                   "together", a.knocked_why or b.knocked_why,
                   a.removed_why or b.removed_why if mask is None else None, tuple(sorted({*a.messages, *b.messages})))
    return found if mask is None or mask.keep else _no_messages(found)


def _chosen(found: list, names) -> list:
    """The pieces `names` asks for, in its order ("a+b": two together); None: every one."""
    if names is None:
        return found
    named = {f.name: f for f in found}
    out = []
    for name in names:
        parts = str(name).split("+")
        missing = [p for p in parts if p not in named]
        if missing:
            raise ChatlensError(f"there is no piece {missing[0]!r}: this turn's pieces are {', '.join(named)}")
        if len(parts) > 2:
            raise ChatlensError(f"{name}: at most two pieces are taken away together")
        f = named[parts[0]] if len(parts) == 1 else _together(named[parts[0]], named[parts[1]])
        if f.removed_why == NO_MESSAGES:  # asked for by name: a request that cannot be met
            raise ChatlensError(f"{name}: {NO_MESSAGES}")
        out.append(f)
    return out


def _what(key, pieces_rendered) -> str:
    if key == "system":
        default = next((p["text"] for p in pieces_rendered if p["kind"] == "default_system"), None)
        return (f"The template's default system prompt in its place: “{default.replace(chr(10), '↵')}”." if default
                else "No system prompt in its place: the template writes none of its own.")
    if key == "together":
        return "Both left out at once."
    return REMOVED_WHAT[key]


def turn_pieces(tokenizer, template, record, messages, names=None, *, plain=False) -> list:
    """The Pieces of a turn (its record, chatlens.record.TurnRecord or a plain read, and the
    messages it was made from; plain: read as plain text), each removal rendered: what a cause
    takes away. names: "kind:index" strings choosing some, in the order given ("a+b": two
    together); None: every piece. Raises ChatlensError naming a piece that does not exist, or one
    named whose removal would leave no message."""
    read = None if plain else read_of(record, messages)
    out = []
    for f in _chosen(_found(read, record.pieces), names):
        ids, what = None, None
        if f.mask is not None:
            ids, rendered = render(tokenizer, template, read, f.mask)
            ids, what = tuple(ids), _what(f.what, rendered)
        knocked_why = f.knocked_why
        if knocked_why is None and f.spans and not Piece("", "", "", f.spans).hidden:
            knocked_why = FIRST_TOKEN  # the first token alone: it stays readable
        out.append(Piece(f.name, f.kind, f.label, f.spans, ids, what, knocked_why, f.removed_why, f.messages, f.put_back))
    return out
