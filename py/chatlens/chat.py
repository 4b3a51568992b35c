"""The chat layer: what the model reads each turn, and a session that reuses the KV cache.

Every turn renders the whole conversation with the chat template, drops the oldest turns that
no longer fit the window (chatlens.window), reuses the longest common prefix of token ids with
what the model's cache already holds, and computes only the rest. Each turn yields a
JSON-serialisable record of exactly what the model read (see `record_for`).

This module imports without numpy: `preview` runs in the browser before any weights arrive.
The engine (chatlens.generate) is imported only when a session generates.
"""

from . import presets
from .errors import ChatlensError, WindowError
from .window import fit as fit_window

DEFAULT_WINDOW = 1024
DEFAULT_MAX_TOKENS = 96


def record_for(tokenizer, fitted, *, window, reserve, preset=None, max_tokens=None):
    """The turn record of a fitted prompt, before any reply."""
    used = len(fitted.ids)
    return {
        "prompt_text": fitted.text,
        "prompt_ids": list(fitted.ids),
        "prompt_tokens": [tokenizer.token_text(i) for i in fitted.ids],
        "pieces": fitted.pieces,
        "dropped_turns": fitted.dropped,
        "window": window,
        "reserve": reserve,
        "used": used,
        "free": window - used - reserve,
        "reused_tokens": 0,
        "computed_tokens": used,
        "reply_text": None,
        "reply_ids": None,
        "reply_tokens": None,
        "stop_reason": None,
        "timings": None,
        "system": fitted.system,
        "preset": preset,
        "max_tokens": reserve if max_tokens is None else max_tokens,
    }


def preview(tokenizer, template, *, system, messages, window, reserve=DEFAULT_MAX_TOKENS, preset=None,
            max_tokens=None):
    """The turn record for `messages` (history, then the new user message last) without a reply:
    what the model would read. system None means the template's default (or a leading system
    message in `messages`). Raises WindowError when the system prompt and the new message alone
    do not fit; ChatlensError for malformed messages."""
    fitted = fit_window(tokenizer, template, system=system, messages=messages, window=window, reserve=reserve)
    return record_for(tokenizer, fitted, window=window, reserve=reserve, preset=preset, max_tokens=max_tokens)


def common_prefix(a, b) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class ChatSession:
    """A conversation with a model that keeps the model's KV cache between turns.

    model: a chatlens.source Model (tokenizer, template, backend(n_ctx)).
    preset / system: the system prompt, taken at each send (presets.system_for), so the date
    preset states the date of the turn, read from `clock`.
    history: earlier messages as given (user/assistant, optionally a leading system message).
    The reply reserve is max_tokens. `cached_ids` are exactly the ids whose keys and values
    the backend's cache holds.
    """

    def __init__(self, model, *, window=DEFAULT_WINDOW, max_tokens=DEFAULT_MAX_TOKENS, preset=None, system=None,
                 clock=None, history=None):
        self.model = model
        self.tokenizer = model.tokenizer
        self.template = model.template
        eos = getattr(model, "eos_id", None)
        self.eos_id = model.tokenizer.eos_token_id if eos is None else eos
        self.max_tokens = int(max_tokens)
        if self.max_tokens < 1:
            raise ChatlensError("max tokens must be at least 1")
        self.window = self._checked_window(window)
        self.clock = clock
        self.preset, self.custom = None, None
        self.set_system(preset=preset, system=system)
        self.history = [dict(m) for m in (history or [])]
        self.records = []
        self.backend = None
        self.cached_ids = []

    # -- settings ----------------------------------------------------------------------------
    def set_system(self, *, preset=None, system=None):
        """Choose the system prompt for the following turns (the history stays)."""
        presets.check(preset, system)
        self.preset, self.custom = preset, system

    def system_now(self):
        return presets.system_for(self.preset, custom=self.custom, clock=self.clock)

    def preset_name(self):
        if self.preset is not None:
            return str(self.preset).strip().lower()
        return "custom" if self.custom is not None else None

    def set_window(self, window):
        """Change the window. The cache is kept when the current backend can hold the new window
        (the window is enforced by fitting, the cache's capacity only bounds it); otherwise the
        next turn starts a new backend with an empty cache."""
        window = self._checked_window(window)
        if self.backend is not None and window > self.backend.capacity:
            self.backend = None
            self.cached_ids = []
        self.window = window

    def _checked_window(self, window) -> int:
        window = int(window)
        if window <= self.max_tokens:
            raise WindowError(f"a window of {window} tokens leaves nothing after the {self.max_tokens}-token reply reserve")
        limit = self.model.config.n_ctx
        if window > limit:
            raise WindowError(f"a window of {window} tokens is longer than the model's context of {limit}")
        return window

    def clear(self):
        """A new conversation: history forgotten, cache emptied."""
        self.history = []
        self.records = []
        self.reset_cache()

    def reset_cache(self):
        if self.backend is not None:
            self.backend.reset()
        self.cached_ids = []

    # -- a turn --------------------------------------------------------------------------------
    def preview(self, text):
        """What the model would read if `text` were sent now (no generation, cache untouched):
        the counts of reused and computed tokens are what sending would reuse and compute."""
        record = preview(self.tokenizer, self.template, system=self.system_now(),
                         messages=self.history + [{"role": "user", "content": text}], window=self.window,
                         reserve=self.max_tokens, preset=self.preset_name(), max_tokens=self.max_tokens)
        ids = record["prompt_ids"]
        reuse = min(common_prefix(ids, self.cached_ids), len(ids) - 1)
        record.update(reused_tokens=reuse, computed_tokens=len(ids) - reuse)
        return record

    def send(self, text, on_token=None):
        """Send a user message; generate the reply (greedy), calling on_token(id) for each token
        as it is chosen. Returns the turn record and appends the turn to the history.
        Raises WindowError (history and cache untouched) when the message cannot fit."""
        from .generate import generate  # the engine: numpy

        if self.backend is None:
            self.backend = self.model.backend(n_ctx=self.window)
            self.cached_ids = []
        if self.backend.length != len(self.cached_ids):  # someone else used the backend
            self.reset_cache()
        record = self.preview(text)
        prompt_ids, reuse = record["prompt_ids"], record["reused_tokens"]
        tok = self.tokenizer
        try:
            self.backend.truncate(reuse)
            self.cached_ids = self.cached_ids[:reuse]
            gen = generate(self.backend, prompt_ids[reuse:], eos_id=self.eos_id,
                           max_new_tokens=self.max_tokens, on_token=on_token)
        except BaseException:
            # Interrupted or failed part-way: the cache's contents are unknown.
            self.reset_cache()
            raise
        ids = list(gen.ids)
        self.cached_ids = prompt_ids + ids[:-1]
        words = ids[:-1] if ids and ids[-1] == self.eos_id else ids
        reply = tok.decode(words)

        decoded = max(len(ids) - 1, 0)  # tokens fed after the prefill (the last is never fed)
        record.update({
            "reused_tokens": reuse,
            "computed_tokens": len(prompt_ids) - reuse,
            "reply_text": reply,
            "reply_ids": ids,
            "reply_tokens": [tok.token_text(i) for i in ids],
            "stop_reason": gen.stop_reason,
            "timings": {
                "prefill_ms": round(gen.prefill_ms, 3),
                "decode_ms": round(gen.decode_ms, 3),
                "prefill_tok_s": round(1000.0 * (len(prompt_ids) - reuse) / gen.prefill_ms, 2) if gen.prefill_ms > 0 else None,
                "decode_tok_s": round(1000.0 * decoded / gen.decode_ms, 2) if gen.decode_ms > 0 else None,
            },
        })
        self.history += [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]
        self.records.append(record)
        return record

    @property
    def last_record(self):
        return self.records[-1] if self.records else None
