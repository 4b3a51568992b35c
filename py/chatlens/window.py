"""Fit a conversation into the context window, and map the prompt's tokens to its pieces.

The lesson's rule: keep the system prompt (or the one the template inserts), keep the new
message, keep `reserve` tokens free for the reply, and drop the oldest whole turns until
the rendered prompt fits. Every count comes from rendering the conversation with the chat
template and tokenizing the text (special tokens matched, nothing added), never from adding
up per-message guesses, so this works for any template.

Pieces are found for any template by rendering prefixes of the message list: the text a
message adds is render(messages[:k+1]) minus render(messages[:k]); the generation header is
the text add_generation_prompt appends. A default system prompt that the template inserts
before the first message is split off as its own piece. Tokens are mapped to pieces through
the tokenizer's character offsets. When a template's renders of prefixes are not prefixes of
each other, the prompt is one piece. Rendering every prefix is quadratic in the number of
messages, so each message's text is first taken from a render of it and the message before
it, and accepted when those texts put together give the whole render exactly.

No numpy: this runs in the browser before any weights arrive.
"""

from bisect import bisect_right
from dataclasses import dataclass, field

from .defaults import REPLY_LIMIT
from .errors import ChatlensError, WindowError

EMPTY_SYSTEM = {"role": "system", "content": ""}


@dataclass
class Slot:
    """One message of the rendered list, with what the turn record says about it."""
    message: dict
    kind: str            # "system", "user", "assistant", another role, or "new"
    label: str
    message_index: object  # int index into the caller's messages list, or None


@dataclass
class Fit:
    text: str                      # the rendered prompt
    ids: list                      # its token ids
    pieces: list                   # dicts: kind, label, message_index, start, end, count, text
    kept: list                     # indexes (into the caller's messages) of the messages rendered
    dropped: list = field(default_factory=list)  # the dropped messages: dicts of message_index, role, content, count
    system: object = None          # the system text rendered, None for the template's default


def _render(template, messages, add_generation_prompt=False):
    return template.render(messages, add_generation_prompt=add_generation_prompt)


def _render_prefix(template, messages):
    """render(messages) for a prefix probe; a template that cannot render it (an empty list,
    say) counts as rendering nothing."""
    if not messages:
        try:
            return _render(template, messages)
        except Exception:
            return ""
    return _render(template, messages)


def _bounds_exact(template, messages, text, add_generation_prompt):
    """Where each message's text ends in `text`: render(messages[:k]) for every k (quadratic).
    Returns (bounds, lead) with bounds[k] = len(render(messages[:k])), lead = render([]); or None."""
    try:
        prefixes = [_render_prefix(template, messages[:k]) for k in range(len(messages) + 1)]
    except Exception:
        return None
    for a, b in zip(prefixes, prefixes[1:]):
        if not b.startswith(a):
            return None
    if not text.startswith(prefixes[-1]):
        return None
    if not add_generation_prompt and text != prefixes[-1]:
        return None
    return [len(p) for p in prefixes], prefixes[0]


def _bounds_local(template, messages, text, add_generation_prompt):
    """The same in linear time for templates that render each message on its own: message k's
    text taken as render(messages[k-1:k+1]) minus render(messages[k-1:k]), accepted only if
    the texts found so put together give the render of all the messages exactly (else None,
    and the caller renders every prefix)."""
    if len(messages) < 3:
        return None  # the exact way costs no more
    try:
        lead = _render_prefix(template, [])
        parts = [_render(template, messages[:1])]
        for k in range(1, len(messages)):
            a = _render(template, messages[k - 1:k])
            b = _render(template, messages[k - 1:k + 1])
            if not b.startswith(a):
                return None
            parts.append(b[len(a):])
        whole = text if not add_generation_prompt else _render(template, messages)
    except Exception:
        return None
    if "".join(parts) != whole or not parts[0].startswith(lead) or not text.startswith(whole):
        return None
    bounds = [len(lead)]
    pos = 0
    for part in parts:
        pos += len(part)
        bounds.append(pos)
    return bounds, lead


def _segments(template, messages, text, add_generation_prompt):
    """Character segments of `text` (= the render of `messages`): a list of (start, end, tag),
    contiguous from 0 to len(text), where tag is a message position, "default_system" or
    "header". None when the template's prefix renders are not prefixes of each other."""
    found = _bounds_local(template, messages, text, add_generation_prompt)
    if found is None:
        found = _bounds_exact(template, messages, text, add_generation_prompt)
    if found is None:
        return None
    bounds, lead = found
    segs = []
    for k in range(len(messages)):
        # Text before the first message (a BOS the template always writes) goes with it.
        start = 0 if k == 0 else bounds[k]
        segs.append([start, bounds[k + 1], k])
    if len(text) > bounds[-1]:
        segs.append([bounds[-1], len(text), "header"])
    if not segs:
        return [(0, len(text), "header")] if text else []

    # A default system prompt the template inserts before a first non-system message.
    if messages and messages[0].get("role") != "system":
        try:
            a = _render(template, [EMPTY_SYSTEM])
            b = _render(template, [EMPTY_SYSTEM, messages[0]])
        except Exception:
            a = b = None
        if a is not None and b.startswith(a):
            own = b[len(a):]
            start, end, _ = segs[0]
            first = text[start:end]
            if own and first.endswith(own) and len(first) > len(own):
                default = first[: len(first) - len(own)]
                if default.startswith(lead) and default[len(lead):].strip():
                    cut = start + len(default)
                    segs[0] = [cut, end, 0]
                    segs.insert(0, [start, cut, "default_system"])
    return [tuple(s) for s in segs]


def content_spans(text, messages) -> list:
    """Where each message's content lies in `text`, their render: (start, end) character spans,
    found in order (a content the template changed, or that is empty, has none)."""
    spans, pos = [], 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str) and content:
            at = text.find(content, pos)
            if at >= 0:
                spans.append((at, at + len(content)))
                pos = at + len(content)
    return spans


def tokenize(tokenizer, text, messages, special_in_text=True, offsets=False):
    """The prompt's ids (and offsets). special_in_text False: a special token written inside a
    message's content is read as its characters, not as the token; the template's own stay."""
    extra = () if special_in_text else (content_spans(text, messages),)  # any tokenizer takes (text)
    return tokenizer.encode_with_offsets(text, *extra) if offsets else tokenizer.encode(text, *extra)


WHOLE_PROMPT = "whole prompt (the template's pieces could not be told apart)"  # the label where _segments is None


def _named(tag, slots):
    """(kind, label, message_index) of a segment's tag (see _segments): a slot's, or the
    template's own default system prompt or generation header."""
    if tag == "default_system":
        return "default_system", "system (template default)", None
    if tag == "header":
        return "header", "generation header", None
    slot = slots[tag]
    return slot.kind, slot.label, slot.message_index


def pieces_of(tokenizer, template, slots, *, add_generation_prompt=True, text=None, special_in_text=True):
    """Render `slots` (a list of Slot) and return (text, ids, pieces)."""
    messages = [s.message for s in slots]
    if text is None:
        text = _render(template, messages, add_generation_prompt)
    ids, offsets = tokenize(tokenizer, text, messages, special_in_text, offsets=True)
    segs = _segments(template, messages, text, add_generation_prompt)
    if segs is None:
        return text, ids, [{"kind": "prompt", "label": WHOLE_PROMPT, "message_index": None, "start": 0, "end": len(ids), "count": len(ids), "text": text}]
    starts = [s[0] for s in segs]
    # Each token belongs to the segment holding its first character.
    owner = [max(0, bisect_right(starts, off[0]) - 1) for off in offsets]
    pieces = []
    pos = 0
    for n, (cstart, cend, tag) in enumerate(segs):
        end = pos
        while end < len(ids) and owner[end] == n:
            end += 1
        kind, label, index = _named(tag, slots)
        pieces.append({"kind": kind, "label": label, "message_index": index,
                       "start": pos, "end": end, "count": end - pos, "text": text[cstart:cend]})
        pos = end
    if pos != len(ids):  # offsets out of order: should not happen; keep the record consistent
        pieces[-1]["end"] = len(ids)
        pieces[-1]["count"] = len(ids) - pieces[-1]["start"]
    return text, ids, pieces


def split_system(system, messages):
    """(system text or None, system message index or None, first index of the rest).

    A leading system message in `messages` is the system prompt; an explicit `system`
    (not None) replaces it."""
    if messages and messages[0].get("role") == "system":
        if system is None:
            return messages[0].get("content", ""), 0, 1
        return system, None, 1
    return system, None, 0


def turn_groups(indexes, messages):
    """Group history messages into turns: a user message with what follows it up to the next
    user message. Leading non-user messages join the first turn."""
    groups = []
    for i in indexes:
        role = messages[i].get("role")
        if not groups or (role == "user" and any(messages[j].get("role") == "user" for j in groups[-1])):
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def check_messages(messages):
    """The one rule for a conversation sent to the model: objects with a role and text content,
    the last of them the new user message (the bad role named). Raises ChatlensError."""
    if not messages:
        raise ChatlensError("no messages: the last message must be the new user message")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ChatlensError(f"message {i} is not an object with a role and content: {m!r}")
        if not isinstance(m["content"], str):
            raise ChatlensError(f"message {i}: content must be text")
    if messages[-1]["role"] != "user":
        raise ChatlensError(f"the last message must be the new user message, not {messages[-1]['role']!r}")


def does_not_fit(pieces, total, window, reserve) -> str:
    """What WindowError says when the system prompt and the new message alone overflow the window: each count
    for a learner first, then the whole sum (the page draws it from the error's data, not from this text)."""
    counts = {}
    for p in pieces:
        counts[p["kind"]] = counts.get(p["kind"], 0) + p["count"]
    parts = ", ".join(f"{p['label']} {p['count']}" for p in pieces)
    header = counts.get("header", 0)
    with_header = f"with the {header}-token reply header, " if header else ""
    if "new" not in counts:  # the template's pieces could not be told apart
        lead = f"{with_header}the system prompt and the new message alone need"
    elif "system" in counts or "default_system" in counts:
        which = "the system prompt" if "system" in counts else "the template's default system prompt"
        system = counts.get("system", 0) + counts.get("default_system", 0)
        lead = (f"the new message needs {counts['new']} tokens and {which} {system}: {with_header}"
                "the system prompt and the new message alone need")
    else:
        lead = f"the new message needs {counts['new']} tokens: {with_header}the prompt would alone need"
    return (f"{lead} {total} tokens ({parts}), but a window of {window} tokens with {reserve} kept free for the "
            f"reply leaves {window - reserve}. Every earlier turn is dropped already: shorten the message or "
            "choose a larger window")


# -- a bound before counting ---------------------------------------------------------------------------


def _lead_byte_ranges(b):
    """The code points whose UTF-8 encoding starts with byte `b` (a lead byte), as (lo, hi)."""
    if 0xC2 <= b <= 0xDF:
        lo = (b & 0x1F) << 6
        return lo, lo + 0x3F
    if 0xE0 <= b <= 0xEF:
        lo = (b & 0x0F) << 12
        return lo, lo + 0xFFF
    if 0xF0 <= b <= 0xF4:
        lo = (b & 0x07) << 18
        return lo, min(lo + 0x3FFFF, 0x10FFFF)
    return None


_BOUNDS = {}  # id(tokenizer) -> (tokenizer, longest, unspellable pattern) or (tokenizer, None, None)


def _bound_rule(tokenizer):
    """What min_tokens needs to know of a tokenizer, read from it once: the longest token's byte
    length, and a pattern of the characters it cannot spell (which it drops, making no token);
    longest None when no sound bound exists for it (an unknown-token or byte-fallback model, added
    tokens that swallow the spaces beside them, a vocabulary missing a UTF-8 continuation byte)."""
    got = _BOUNDS.get(id(tokenizer))
    if got is not None and got[0] is tokenizer:
        return got[1], got[2]
    import re

    longest, pattern = None, None
    lengths = getattr(tokenizer, "_tok_len", None)
    byte_ids = getattr(tokenizer, "_byte_ids", None)
    simple = all(getattr(m, "simple", False) for m in getattr(tokenizer, "_matchers", ()))
    if lengths and byte_ids and simple and getattr(tokenizer, "_unk_id", None) is None \
            and not getattr(tokenizer, "_byte_fallback", False):
        missing = [b for b, i in enumerate(byte_ids) if i is None]
        ranges = []
        for b in missing:
            if b < 0x80:
                ranges.append((b, b))
            elif _lead_byte_ranges(b):
                ranges.append(_lead_byte_ranges(b))
            elif 0x80 <= b <= 0xBF:
                ranges = None  # a continuation byte: too many characters to name; no bound
                break
            # 0xC0, 0xC1 and 0xF5..0xFF never occur in UTF-8
        if ranges is not None:
            longest = max(lengths)
            if ranges:
                pattern = re.compile("[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges) + "]")
    _BOUNDS[id(tokenizer)] = (tokenizer, longest, pattern)
    return longest, pattern


def min_tokens(tokenizer, text: str) -> int:
    """A number of tokens the text's tokens can never be fewer than, wherever it stands in a
    prompt, found in time linear in its length without tokenizing it: every byte the vocabulary
    can spell lies in some token, and no token holds more bytes than the longest one, so the
    tokens that hold the text's bytes number at least ceil(bytes / longest). Characters the
    vocabulary cannot spell (which the tokenizer drops) are not counted. 0 when the tokenizer
    allows no such bound (see _bound_rule)."""
    longest, unspellable = _bound_rule(tokenizer)
    if not longest or not text:
        return 0
    if unspellable is not None:
        text = unspellable.sub("", text)
    n = len(text.encode("utf-8", "surrogatepass"))
    return -(-n // longest)


def too_long(tokenizer, content, window, reserve) -> str | None:
    """The WindowError message for a new message that cannot fit however the window is filled,
    known from min_tokens alone (a pasted book is answered at once, not after tokenizing it), or
    None when the bound cannot tell and the exact count decides."""
    need = min_tokens(tokenizer, content)
    if need <= window - reserve:
        return None
    return (f"the new message is too long for the window: its {len(content):,} characters make at least {need:,} "
            f"tokens, but a window of {window} tokens with {reserve} kept free for the reply leaves {window - reserve}. "
            "Shorten the message or choose a larger window")


def _ends(system, messages):
    """What no fit drops: (the system text or None, the head slots (the system prompt, if any),
    the new message's slot, the first history index)."""
    system, sys_index, first = split_system(system, messages)
    head = []
    if system is not None:
        head.append(Slot({"role": "system", "content": system}, "system", "system", sys_index))
    new_index = len(messages) - 1
    new = Slot({"role": "user", "content": messages[new_index]["content"]}, "new", "new message", new_index)
    return system, head, new, first


def _overflow(pieces, window, reserve, at_least=False):
    """WindowError's data for the count of the system prompt and the new message: each piece's kind
    (as the turn record's pieces name them, so the page need not read the label), label and count."""
    return {"needed": sum(p["count"] for p in pieces), "window": window, "reserve": reserve, "at_least": at_least,
            "pieces": [{"kind": p["kind"], "label": p["label"], "count": p["count"]} for p in pieces]}


def counting(tokenizer, template, *, system, messages, window, reserve=REPLY_LIMIT, special_in_text=True, every=4096):
    """The exact figures of what fit raises when the system prompt and the new message alone
    overflow the window, counted a slice at a time: a generator that yields (characters read,
    of all) between slices (see Tokenizer.counting) and returns WindowError's data, exact
    (at_least False, the pieces pieces_of finds), with its sentence as "message". It is what a
    message too long for the bound (too_long) leaves to count, in the background: fit would
    take the whole count in one call. The figures are returned whether or not they fit."""
    check_messages(messages)
    window, reserve = int(window), int(reserve)
    if reserve < 0 or window <= 0:
        raise WindowError(f"window {window} and reserve {reserve} must be positive")
    _, head, new, _ = _ends(system, messages)
    slots = head + [new]
    kept = [s.message for s in slots]
    text = _render(template, kept, True)
    yield 0, len(text)
    segs = _segments(template, kept, text, True)
    yield 0, len(text)
    plain = () if special_in_text else content_spans(text, kept)
    if segs is None:
        segs = [(0, len(text), None)]
    counts = []
    steps = tokenizer.counting(text, plain, [s[0] for s in segs], every) if hasattr(tokenizer, "counting") else None
    if steps is None:  # a tokenizer without slices (a reference's): counted in one
        _, _, pieces = pieces_of(tokenizer, template, slots, text=text, special_in_text=special_in_text)
    else:
        while True:
            try:
                yield next(steps), len(text)
            except StopIteration as done:
                counts = done.value
                break
        pieces = []
        for (_, _, tag), n in zip(segs, counts):
            kind, label, _ = ("prompt", WHOLE_PROMPT, None) if tag is None else _named(tag, slots)
            pieces.append({"kind": kind, "label": label, "count": n})
    data = _overflow(pieces, window, reserve)
    data["message"] = does_not_fit(pieces, data["needed"], window, reserve)
    return data


def fit(tokenizer, template, *, system, messages, window, reserve=REPLY_LIMIT, special_in_text=True):
    """Fit the conversation into `window` tokens, keeping `reserve` free for the reply.

    messages: history then the new user message (last). A leading system message is the
    system prompt unless `system` is given; system None (and no system message) means the
    template's default. Drops the oldest whole turns until the prompt, rendered with the
    generation header and tokenized, has at most window - reserve tokens.
    special_in_text False reads special tokens written inside the messages as their characters
    (see tokenize). Raises WindowError, naming the counts, if the system prompt and the new
    message alone do not fit. Returns a Fit.
    """
    check_messages(messages)
    window, reserve = int(window), int(reserve)
    if reserve < 0 or window <= 0:
        raise WindowError(f"window {window} and reserve {reserve} must be positive")
    budget = window - reserve
    system, head, new, first = _ends(system, messages)
    early = too_long(tokenizer, new.message["content"], window, reserve)
    if early:
        need = min_tokens(tokenizer, new.message["content"])
        raise WindowError(early, _overflow([{"kind": new.kind, "label": new.label, "count": need}], window, reserve,
                                           at_least=True))
    new_index = len(messages) - 1
    groups = turn_groups(range(first, new_index), messages)
    turn_no = {i: g for g, group in enumerate(groups) for i in group}

    def slot(i):
        role = messages[i]["role"]
        return Slot({"role": role, "content": messages[i]["content"]}, role,
                    f"turn {turn_no[i] + 1} · {role}", i)

    def slots_keeping(m):  # the system, the newest m turns, the new message
        return head + [slot(i) for group in groups[len(groups) - m:] for i in group] + [new]

    counts = {}

    def count(m):
        if m not in counts:
            kept = [s.message for s in slots_keeping(m)]
            text = _render(template, kept, True)
            counts[m] = (len(tokenize(tokenizer, text, kept, special_in_text)), text)
        return counts[m][0]

    if count(0) > budget:
        text, ids, pieces = pieces_of(tokenizer, template, slots_keeping(0), text=counts[0][1],
                                      special_in_text=special_in_text)
        raise WindowError(does_not_fit(pieces, len(ids), window, reserve), _overflow(pieces, window, reserve))

    # Fit is monotone in the number of turns kept: gallop up from the newest turns, then
    # bisect. Each probe renders about a window's worth, however long the history.
    lo, hi, m = 0, None, 1
    while m <= len(groups):
        if count(m) <= budget:
            lo, m = m, m * 2
        else:
            hi = m
            break
    if hi is None:
        if lo < len(groups) and count(len(groups)) <= budget:
            lo = len(groups)
        else:
            hi = len(groups)
    if hi is not None:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if count(mid) <= budget:
                lo = mid
            else:
                hi = mid
    keep = lo

    slots = slots_keeping(keep)
    text, ids, pieces = pieces_of(tokenizer, template, slots, text=counts[keep][1], special_in_text=special_in_text)
    dropped_groups = groups[: len(groups) - keep]
    dropped = dropped_messages(tokenizer, template, head, [slot(i) for g in dropped_groups for i in g], special_in_text)
    return Fit(text=text, ids=ids, pieces=pieces, kept=[s.message_index for s in slots if s.message_index is not None],
               dropped=dropped, system=system)


def dropped_messages(tokenizer, template, head, slots, special_in_text=True):
    """The dropped messages with their token counts, as pieces of the conversation that
    ends with them (so a first message's count excludes a default system prompt)."""
    if not slots:
        return []
    _, _, pieces = pieces_of(tokenizer, template, head + slots, add_generation_prompt=False,
                             special_in_text=special_in_text)
    by_index = {p["message_index"]: p["count"] for p in pieces if p["kind"] not in ("system", "default_system")}
    out = []
    for s in slots:
        n = by_index.get(s.message_index)
        if n is None:  # the template's pieces could not be told apart
            n = len(tokenizer.encode(s.message["content"]))
        out.append({"message_index": s.message_index, "role": s.message["role"],
                    "content": s.message["content"], "count": n})
    return out
