"""A chat: the rules for its window and reply limit, and a session that reuses the KV cache.

Each turn is read as chatlens.turn.preview reads it (what the model reads, the oldest turns that
no longer fit dropped); a session reuses the longest common prefix of token ids with what the
model's cache already holds (chatlens.cache), computes only the rest, and keeps the history.
Each turn gives a chatlens.record.TurnRecord of exactly what the model read.

The session pulls its replies as the page's worker does (chatlens.jobs), so it sits above the
jobs; the rules need only a model's config (a command checks them before it loads weights).
"""

from . import defaults, presets
from .cache import PromptCache
from .errors import ChatlensError, WindowError
from .jobs import BranchJob, ChatJob
from .pull import greedy
from .record import TurnRecord
from .turn import preview


def check_reply_limit(max_tokens) -> int:
    """The one rule for the reply limit (also the window's reserve): at least one token."""
    max_tokens = int(max_tokens)
    if max_tokens < 1:
        raise ChatlensError("max tokens must be at least 1")
    return max_tokens


def check_window(window, reserve, context) -> int:
    """The one rule for a chat's window: more tokens than the reply's reserve, and no more than
    the model's whole context. Needs only the model's config, so a command checks it before it
    loads the weights. Returns the window as an int; raises WindowError."""
    window = int(window)
    if window <= reserve:
        raise WindowError(f"a window of {window} tokens leaves nothing after the {reserve}-token reply reserve")
    if window > context:
        raise WindowError(f"a window of {window} tokens is longer than the model's context of {context}")
    return window


class ChatSession:
    """A conversation with a model that keeps the model's KV cache between turns.

    model: a chatlens.source Model (tokenizer, template, eos_id, config, backend(n_ctx)).
    preset / system: the system prompt, taken at each send (presets.system_for), so the date
    preset states the date of the turn, read from `clock`.
    history: earlier messages as given (user/assistant, optionally a leading system message).
    The reply reserve is max_tokens. `cache` (a PromptCache, made on the first send) holds the
    backend and the ids it caches.
    """

    def __init__(self, model, *, window=defaults.DEFAULT_WINDOW, max_tokens=defaults.REPLY_LIMIT, preset=None,
                 system=None, clock=None, history=None):
        self.model = model
        self.tokenizer = model.tokenizer
        self.template = model.template
        self.eos_id = model.eos_id
        self.max_tokens = check_reply_limit(max_tokens)
        self.window = self._checked_window(window)
        self.clock = clock
        self.preset, self.custom = None, None
        self.set_system(preset=preset, system=system)
        self.history = [dict(m) for m in (history or [])]
        self.records = []
        self.cache = None
        self.branched = None  # the branch made last (chatlens.contract.Branched), until kept or the next turn

    # -- settings ----------------------------------------------------------------------------
    def set_system(self, *, preset=None, system=None):
        """Choose the system prompt for the following turns (the history stays). Blank custom
        text is the template's default (presets.normalize)."""
        self.preset, self.custom = presets.normalize(preset, system)

    def system_now(self):
        return presets.system_for(self.preset, custom=self.custom, clock=self.clock)

    def describe_system(self) -> str:
        return presets.describe(self.preset, self.custom, self.clock)

    def set_window(self, window):
        """Change the window. The cache is kept when its backend can hold the new window (the
        window is enforced by fitting, the cache's capacity only bounds it); otherwise the next
        turn starts a new backend with an empty cache."""
        window = self._checked_window(window)
        if self.cache is not None and window > self.cache.capacity:
            self.cache = None
        self.window = window

    def _checked_window(self, window) -> int:
        return check_window(window, self.max_tokens, self.model.config.n_ctx)

    def clear(self):
        """A new conversation: history forgotten, cache emptied."""
        self.history = []
        self.records = []
        if self.cache is not None:
            self.cache.reset()

    # -- a turn --------------------------------------------------------------------------------
    def preview(self, text) -> TurnRecord:
        """What the model would read if `text` were sent now (no generation, cache untouched):
        the counts of reused and computed tokens are what sending would reuse and compute."""
        record = preview(self.tokenizer, self.template, system=self.system_now(),
                         messages=self.history + [{"role": "user", "content": text}], window=self.window,
                         reserve=self.max_tokens, preset=self.preset, max_tokens=self.max_tokens,
                         context=self.model.config.n_ctx)
        if self.cache is not None:
            record.reused_tokens = self.cache.reusable(record.prompt_ids)
            record.computed_tokens = record.used - record.reused_tokens
        return record

    def send(self, text, on_token=None, should_stop=None, top_k=0) -> TurnRecord:
        """Send a user message; generate the reply (greedy: chatlens.jobs.ChatJob, pulled here),
        calling on_token(token) with each chatlens.contract.Token as it is chosen (its text decoded
        so no character is split) and stopping early when should_stop() says so; top_k > 0
        records each reply token's candidates (TurnRecord.top_k). Returns the turn record and
        appends the turn to the history. Raises WindowError (history and cache untouched) when
        the message cannot fit."""
        record = self.preview(text)
        if self.cache is None:
            self.cache = PromptCache(self.model.backend(n_ctx=self.window))
        record = greedy(ChatJob(self.model, self.cache, record, top_k=top_k), on_token=on_token, should_stop=should_stop)
        self.history += [{"role": "user", "content": text}, {"role": "assistant", "content": record.reply_text}]
        self.records.append(record)
        self.branched = None
        return record

    def branch(self, step, id, *, top_k=0, on_token=None, should_stop=None):
        """The last reply with token `id` taken at `step`, continued greedily (chatlens.jobs.BranchJob;
        the reply limit caps the whole branch): a chatlens.contract.Branched, the branch as a reply,
        the last reply's candidates kept in it. The cache holds the last turn, so only `id` is read
        before the branch chooses. The history is unchanged until `keep`."""
        record = self.last_record
        if record is None:
            raise ChatlensError("there is no reply to branch yet: send a message first")
        job = BranchJob(self.model, self.cache, record.prompt_ids, record.reply_ids, step=step, id=id,
                        max_tokens=self.max_tokens, top_k=top_k, reply_top_k=record.top_k)
        self.branched = greedy(job, on_token=on_token, should_stop=should_stop)
        return self.branched

    def keep(self) -> TurnRecord:
        """The branch made last becomes the last turn's reply, marked as chosen by hand
        (TurnRecord.branched): later turns read it, and it can be branched in its turn."""
        b = self.branched
        if b is None:
            raise ChatlensError("there is no branch to keep: branch the last reply first")
        record = self.records[-1].with_branch(b)
        self.records[-1] = record
        self.history[-1] = {"role": "assistant", "content": record.reply_text}
        self.branched = None
        return record

    @property
    def last_record(self) -> TurnRecord | None:
        return self.records[-1] if self.records else None
