"""The model a command names (`--model`, else the default GGUF) with the backend it asks for
(`--backend numpy|webgpu|auto`)."""

import sys

from ..errors import ChatlensError
from ..source import Model, load_model, load_text_side
from .fetch import resolve_model


def choose_backend_why(kind: str) -> tuple[str, str]:
    """("numpy" or "webgpu", why) for a --backend value; "auto" is the GPU only when wgpu finds a
    real one (chatlens.device: never a CPU emulation such as lavapipe)."""
    from .. import device

    if kind not in ("numpy", "webgpu", "auto"):
        raise ChatlensError(f"unknown backend {kind!r}: numpy, webgpu or auto")
    if kind == "numpy":
        return device.choose(kind, None)
    from .native_gpu import best_adapter_info

    return device.choose(kind, best_adapter_info())


def open_model(path=None, backend: str = "numpy", clock=None) -> Model:
    """The model at `path` (default: the default GGUF). numpy loads the weights as float32
    arrays; webgpu leaves them in the file and uploads them to the GPU as the file stores them."""
    path = resolve_model(path)
    kind, why = choose_backend_why(backend)
    if backend == "auto":  # say which device computes, and why: auto may have passed a GPU over
        print(f"chatlens: computing with {kind} ({why})", file=sys.stderr)
    if kind == "numpy":
        return load_model(path, clock=clock)
    from .native_gpu import open_native

    text = load_text_side(path, clock=clock)
    return Model(path, text, backend_factory=lambda n_ctx: open_native(path, n_ctx))
