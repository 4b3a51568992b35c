"""chatlens: see exactly what a language model reads.

The package imports without numpy so the tokenizer, the chat template and the window
logic run in a browser before any weights arrive; numpy is imported only by the modules
that compute with weights.
"""

from .errors import ChatlensError, ModelFormatError, TemplateError, WindowError

__version__ = "0.1.0"
__all__ = ["ChatlensError", "ModelFormatError", "TemplateError", "WindowError", "__version__"]
