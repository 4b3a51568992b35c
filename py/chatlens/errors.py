"""The project's own errors: one base class so callers (CLI, worker) can show a clear message."""


class ChatlensError(Exception):
    """Anything chatlens reports to a user as a plain message."""


class ModelFormatError(ChatlensError):
    """A model file (GGUF, safetensors, config, tokenizer) is malformed or unsupported."""


class TemplateError(ChatlensError):
    """A chat template failed to compile or raised while rendering."""


class WindowError(ChatlensError):
    """The conversation cannot fit the context window. `data`, where the counts are known (the
    system prompt and the new message alone overflow): {"needed": tokens they need, "window",
    "reserve": kept free for the reply, "pieces": [{"kind", "label", "count"}, ...] (kind as the
    turn record's pieces name it: "system", "default_system", "new", "header" or "prompt"),
    "at_least": true when `needed` is a bound counted before tokenizing, and from the worker
    "context": the model's whole context}; the page draws the overflow from it."""

    def __init__(self, message, data=None):
        super().__init__(message)
        self.data = data


class TokenizerMismatchError(ChatlensError):
    """A base model whose tokenizer is not the instruct model's: the two would not read the same
    ids, which the comparison (chatlens.compare) needs."""


class FetchError(ChatlensError):
    """The default model could not be downloaded or failed its checksum."""
