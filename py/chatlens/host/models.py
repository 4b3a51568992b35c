"""The model a command names (`--model`, else the default GGUF) with the backend it asks for
(`--backend numpy|webgpu|auto`)."""

from ..errors import ChatlensError
from ..source import Model, load_model, load_text_side
from .fetch import resolve_model


def choose_backend(kind: str) -> str:
    """"numpy" or "webgpu" for a --backend value; "auto" is the GPU when wgpu finds an adapter."""
    if kind == "auto":
        from ..gpu import adapter_available

        return "webgpu" if adapter_available() else "numpy"
    if kind not in ("numpy", "webgpu"):
        raise ChatlensError(f"unknown backend {kind!r}: numpy, webgpu or auto")
    return kind


def open_model(path=None, backend: str = "numpy", clock=None) -> Model:
    """The model at `path` (default: the default GGUF). numpy loads the weights as float32
    arrays; webgpu leaves them in the file and uploads them to the GPU as the file stores them."""
    path = resolve_model(path)
    kind = choose_backend(backend)
    if kind == "numpy":
        return load_model(path, clock=clock)
    from ..gpu import open_native

    text = load_text_side(path, clock=clock)
    return Model(path, text, backend_factory=lambda n_ctx: open_native(path, n_ctx))
