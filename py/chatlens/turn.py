"""What the model reads each turn: the turn record before its reply, computed from scratch.

Every turn renders the whole conversation with the chat template, drops the oldest turns that
no longer fit the window (chatlens.window) and tokenizes: `preview` gives the
chatlens.record.TurnRecord of exactly what the model would read, the pieces of its prompt each
with the tokens of its message's own text. A session (chatlens.chat.ChatSession), the page's
worker (chatlens.worker) and the comparison (chatlens.compare) read each turn through it.

This module imports without numpy: `preview` runs in the browser before any weights arrive.
"""

from bisect import bisect_left, bisect_right

from . import defaults
from .record import TurnRecord, token_lists
from .window import fit


def preview(tokenizer, template, *, system, messages, window, reserve=defaults.REPLY_LIMIT, preset=None,
            max_tokens=None, special_in_text=True, context=None) -> TurnRecord:
    """The turn record for `messages` (history, then the new user message last) without a reply:
    what the model would read, computed from scratch (reused_tokens 0). system None means the
    template's default (or a leading system message in `messages`); context the model's whole
    context (ModelConfig.n_ctx), for the record. Raises WindowError when the system prompt and
    the new message alone do not fit; ChatlensError for malformed messages."""
    fitted = fit(tokenizer, template, system=system, messages=messages, window=window, reserve=reserve,
                        special_in_text=special_in_text)
    used = len(fitted.ids)
    ids = list(fitted.ids)
    return TurnRecord(
        prompt_text=fitted.text,
        **token_lists(tokenizer, ids, "prompt_"),
        special_ids=tokenizer.specials_in(ids),
        special_in_text=special_in_text,
        pieces=with_content_spans(tokenizer, template, fitted, messages),
        dropped_messages=fitted.dropped,
        window=window,
        context=context,
        reserve=reserve,
        used=used,
        free=window - used - reserve,
        reused_tokens=0,
        computed_tokens=used,
        system=fitted.system,
        preset=preset,
        max_tokens=reserve if max_tokens is None else max_tokens,
    )


def with_content_spans(tokenizer, template, fitted, messages) -> list:
    """fitted.pieces, each with its role and the tokens of its message's own text (content_start,
    content_end; TurnRecord documents them). The text is found in the render, after the
    template's wrapping of a message of that role is measured by rendering one around a marker,
    so the page need not know where a template puts its tokens."""
    ends, at = [], 0  # each token's end, in the prompt's UTF-8 bytes
    for i in fitted.ids:
        at += len(tokenizer.token_bytes(i))
        ends.append(at)
    wraps = {}

    def wrap(role):  # (before, after): the template's text around a lone message's content
        if role not in wraps:
            try:
                before, mark, after = template.render([{"role": role, "content": _MARK}]).partition(_MARK)
            except Exception:  # a template that refuses a lone message of this role
                before, mark, after = "", "", ""
            wraps[role] = (before, after) if mark else None
        return wraps[role]

    out, pos = [], 0
    for p in fitted.pieces:
        p = dict(p)
        start = pos
        pos += len(p["text"])
        kind, index = p["kind"], p["message_index"]
        p["role"] = {"new": "user", "default_system": "system", "header": None, "prompt": None}.get(kind, kind)
        span = None
        if p["role"] is not None and fitted.text[start:pos] == p["text"]:
            content = (fitted.system if kind == "system" else None if kind == "default_system"
                       else messages[index].get("content") if index is not None else None)
            span = _content_in(p["text"], content, wrap(p["role"]))
        if span is None:
            p["content_start"] = p["content_end"] = None
        else:
            a = len(fitted.text[:start + span[0]].encode("utf-8"))
            b = len(fitted.text[:start + span[1]].encode("utf-8"))
            first = bisect_right(ends, a, p["start"], p["end"])  # the first token that ends past a
            p["content_start"] = first
            p["content_end"] = first if a == b else min(bisect_left(ends, b, first, p["end"]) + 1, p["end"])
        out.append(p)
    return out


_MARK = "\ue000"  # a private-use character, which no template writes itself


def _content_in(text, content, wrap):
    """(start, end) of a message's content in its piece's text, or None. content None: the
    template's default system prompt, all that its wrapping leaves."""
    before, after = wrap or ("", "")
    if content is None:
        if wrap and text.startswith(before) and text.endswith(after) and len(before) + len(after) <= len(text):
            return len(before), len(text) - len(after)
        return None
    if not isinstance(content, str):
        return None
    if wrap and text.endswith(content + after):  # from the end: the role's name may be the content too
        end = len(text) - len(after)
        return end - len(content), end
    at = text.find(content)
    return (at, at + len(content)) if at >= 0 else None
