"""The project's own errors: one base class so callers (CLI, worker) can show a clear message."""


class ChatlensError(Exception):
    """Anything chatlens reports to a user as a plain message."""


class ModelFormatError(ChatlensError):
    """A model file (GGUF, safetensors, config, tokenizer) is malformed or unsupported."""


class TemplateError(ChatlensError):
    """A chat template failed to compile or raised while rendering."""


class WindowError(ChatlensError):
    """The conversation cannot fit the context window."""


class FetchError(ChatlensError):
    """The default model could not be downloaded or failed its checksum."""
