"""The WebGPU backend: the forward pass as one GPU program (program.py, WGSL in wgsl/) that an
executor replays, natively through wgpu-py (native.py) or in a browser (site/js/gpu/executor.mjs).

    open_native(path, n_ctx) -> WebGPUBackend    a .gguf file or a Hugging Face folder, on wgpu
    adapter_info() -> dict | None                for `--backend auto` (chatlens.device's rule)
"""

from .backend import WebGPUBackend
from .program import build_program
from .weights import checked_plan, weight_plan

__all__ = ["WebGPUBackend", "adapter_available", "adapter_info", "build_program", "open_native", "weight_plan"]


def adapter_info():
    """What wgpu's best adapter says of itself (wgpu-py's adapter.info: vendor, device,
    adapter_type, ...), or None when wgpu is missing or finds no adapter."""
    try:
        from . import native

        adapter = native.request_adapter()
    except Exception:
        return None
    return dict(adapter.info) if adapter is not None else None


def adapter_available() -> bool:
    """Whether wgpu is installed and finds a GPU adapter (a CPU one such as lavapipe counts)."""
    return adapter_info() is not None


def open_native(path, n_ctx: int | None = None, chunk: int | None = None) -> WebGPUBackend:
    """A WebGPU backend over wgpu-py for a model source; its weights are read from the file's
    byte ranges and uploaded as they are stored."""
    from pathlib import Path

    path = Path(path)
    plan = weight_plan(path)
    root = path if path.is_dir() else path.parent
    return _open(plan, n_ctx or plan["config"]["n_ctx"], _file_reader(root), chunk)


def open_arrays(cfg, weights: dict, n_ctx: int, dtype: str = "F32", chunk: int | None = None) -> WebGPUBackend:
    """A WebGPU backend over float32 NumPy arrays under Hugging Face names (tests, tiny models):
    uploaded as F32, or rounded to F16/BF16 first."""
    import numpy as np

    def to_bf16(a):  # round to nearest even, as torch does
        bits = a.view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")

    blobs, tensors = {}, {}
    for name, a in weights.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        raw = {"F32": a.astype("<f4"), "F16": a.astype("<f2"), "BF16": to_bf16(a)}[dtype].tobytes()
        blobs[name] = raw
        tensors[name] = {"file": name, "offset": 0, "nbytes": len(raw), "dtype": dtype, "shape": list(a.shape)}
    plan = checked_plan({"source": "arrays", "rope": "hf", "config": cfg.to_dict(), "tensors": tensors})
    return _open(plan, n_ctx, lambda file, offset, nbytes: blobs[file][offset:offset + nbytes], chunk)


def _file_reader(root):
    def read(file, offset, nbytes):
        with open(root / file, "rb") as f:
            f.seek(offset)
            data = f.read(nbytes)
        if len(data) != nbytes:
            from ..errors import ModelFormatError

            raise ModelFormatError(f"{root / file}: {nbytes} bytes at {offset} lie past the end")
        return data
    return read


def _open(plan, n_ctx, read, chunk):
    from ..errors import ChatlensError
    from . import native
    from .program import CHUNK

    opened = native.shared_device()
    if opened is None:
        raise ChatlensError("no WebGPU adapter: wgpu found no GPU (install a Vulkan, Metal or D3D12 driver)")
    device, info = opened
    program = build_program(plan, n_ctx, info["features"], info["limits"], chunk or CHUNK)
    native.check_device(info, program)
    executor = native.NativeExecutor(device, program, read, info["name"])
    return WebGPUBackend(program, executor, name=f"webgpu: {info['name']}")
