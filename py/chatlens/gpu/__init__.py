"""The WebGPU backend: the forward pass as one GPU program (program.py, WGSL in wgsl/) that an
executor replays: in a browser, site/js/gpu/executor.mjs; natively, chatlens.host.native_gpu
(wgpu-py), which the browser never loads:

    chatlens.host.native_gpu.open_native(path, n_ctx) -> WebGPUBackend   a .gguf file or a Hugging Face folder
"""

from .backend import WebGPUBackend
from .program import build_program
from .weights import checked_plan, weight_plan

__all__ = ["WebGPUBackend", "build_program", "checked_plan", "weight_plan"]
