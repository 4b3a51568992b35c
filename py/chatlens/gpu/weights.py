"""The weight plan: where each tensor's bytes lie in a model source, so a host can upload them
to the GPU exactly as the file holds them (quantized blocks stay quantized).

Pure Python, no NumPy: the browser runs this in Pyodide to tell its JS which byte ranges to
upload, so weight bytes never pass through Python there.

A plan is plain data:
    {"source": "gguf" | "hf" (| "arrays": chatlens.host.native_gpu.open_arrays), "rope": "gguf" | "hf",
     "config": ModelConfig.to_dict(),
     "tensors": {hf_name: {"file": name inside the source, "offset": absolute byte offset,
                           "nbytes": n, "dtype": "F32" | "F16" | "BF16" | "Q8_0" | "Q4_0" | "Q4_1",
                           "shape": [out, in] (Hugging Face order)}}}
"rope" says how the Q/K rows are ordered: llama.cpp's converter permutes them for its
adjacent-pair RoPE, and the GPU rotates them in that order rather than repacking them.
"""

import json
from pathlib import Path

from ..config import ModelConfig
from ..errors import ModelFormatError

# What the GPU kernels can decode (chatlens/gpu/wgsl/dequantize_<dtype>.wgsl).
DTYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1")


def weight_plan(path) -> dict:
    """The plan for a .gguf file or a Hugging Face folder of .safetensors files."""
    path = Path(path)
    if path.is_dir():
        return _hf_plan(path)
    from ..gguf import GGUFFile

    return plan_from_gguf(GGUFFile(path), path.name)


def plan_from_gguf(gguf, file_name: str) -> dict:
    """From a parsed GGUF header (chatlens.gguf.GGUFFile); offsets are absolute in the file."""
    from ..gguf import hf_name

    cfg = ModelConfig.from_gguf(gguf.metadata, gguf.tensors)
    tensors = {}
    for info in gguf.tensors.values():
        name = hf_name(info.name)
        if name is None:
            raise ModelFormatError(f"{file_name}: tensor {info.name} has no place in a Llama model")
        tensors[name] = _entry(file_name, info.offset, info.nbytes, info.type.name, list(info.shape))
    return checked_plan({"source": "gguf", "rope": "gguf", "config": cfg.to_dict(), "tensors": tensors})


def plan_from_safetensors(config_json: dict, headers: dict) -> dict:
    """From config.json and {file name: (header, data start)} as chatlens.safetensors.read_header gives."""
    cfg = ModelConfig.from_hf(config_json)
    tensors = {}
    for file_name, (header, data_start) in headers.items():
        for name, t in header.items():
            if name == "__metadata__":
                continue
            begin, end = t["data_offsets"]
            tensors[name] = _entry(file_name, data_start + begin, end - begin, t["dtype"], list(t["shape"]))
    return checked_plan({"source": "hf", "rope": "hf", "config": cfg.to_dict(), "tensors": tensors})


def _hf_plan(folder: Path) -> dict:
    from ..safetensors import read_header

    try:
        config_json = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelFormatError(f"{folder}: a Hugging Face model folder needs config.json") from None
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelFormatError(f"{folder}: no .safetensors weights in the folder")
    return plan_from_safetensors(config_json, {f.name: read_header(f) for f in files})


def _entry(file_name, offset, nbytes, dtype, shape):
    return {"file": file_name, "offset": offset, "nbytes": nbytes, "dtype": dtype, "shape": shape}


def checked_plan(plan: dict) -> dict:
    """The plan, its dtypes checked and a tied model's spare lm_head dropped."""
    cfg = ModelConfig(**plan["config"])
    for name, t in plan["tensors"].items():
        if t["dtype"] not in DTYPES:
            raise ModelFormatError(f"{name}: {t['dtype']} weights have no GPU kernel (these do: {', '.join(DTYPES)})")
    if cfg.tied_output:
        plan["tensors"].pop("lm_head.weight", None)  # tied: the embedding is the output projection
    return plan
