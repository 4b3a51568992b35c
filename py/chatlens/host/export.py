"""`python -m chatlens export-hf OUT`: a Hugging Face model folder written from a GGUF, the local
stand-in for the Hub's original files. Its writers (safetensors, tokenizer.json) live here
because nothing else writes model files.
"""

import json
import struct
from pathlib import Path

from ..tokenizer import CONTROL, USER_DEFINED, gguf_parts
from ..errors import ChatlensError
from ..source import load_model
from .fetch import resolve_model


def export_hf(args) -> int:
    """Write a Hugging Face model folder from a GGUF: the stand-in for the Hub's original files."""
    src = resolve_model(args.model)
    if src.is_dir():
        raise ChatlensError(f"export-hf reads a .gguf file, not the folder {src}")
    model = load_model(src)
    meta = model.text.metadata
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok, cfg = model.tokenizer, model.config
    bos = meta.get("tokenizer.ggml.bos_token_id")
    pad = meta.get("tokenizer.ggml.padding_token_id")
    unk = meta.get("tokenizer.ggml.unknown_token_id")

    def token(i):
        return None if i is None else tok.token_text(i)

    config = {**cfg.to_hf(), "bos_token_id": bos, "eos_token_id": model.eos_id, "pad_token_id": pad}
    _write_json(out / "config.json", config)
    _write_json(out / "generation_config.json", {"bos_token_id": bos, "eos_token_id": model.eos_id, "pad_token_id": pad})
    _write_json(out / "tokenizer.json", tokenizer_json_from_gguf(meta))
    _write_json(out / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": token(bos), "eos_token": token(model.eos_id), "pad_token": token(pad), "unk_token": token(unk),
        "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "add_prefix_space": False, "clean_up_tokenization_spaces": False,
        "model_max_length": cfg.n_ctx,
        "chat_template": model.template.source,
    })
    weights = {k: v for k, v in model.weights.items() if not (cfg.tied_output and k == "lm_head.weight")}
    save_safetensors(weights, out / "model.safetensors", dtype="BF16", metadata={"format": "pt"})
    print(out)
    return 0


def _write_json(path: Path, data):
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def tokenizer_json_from_gguf(metadata: dict) -> dict:
    """A complete Hugging Face tokenizer.json (as a dict) for GGUF tokenizer metadata, loadable
    with `tokenizers.Tokenizer.from_str(json.dumps(d))` and with `Tokenizer.from_json`."""
    tokens, types, merges, digits = gguf_parts(metadata)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if digits:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": digits == "individual"}, byte_level]}
    else:
        pre = byte_level
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": types[i] == CONTROL}
             for i in range(len(tokens)) if types[i] in (CONTROL, USER_DEFINED)]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre,
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tokens)},
            "merges": [[a, b] for a, b in merges],
        },
    }


def to_bf16(a):
    """float32 -> bfloat16 bits, rounding to nearest even as torch does."""
    import numpy as np

    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def save_safetensors(tensors: dict, path, dtype: str = "BF16", metadata: dict | None = None):
    import numpy as np

    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.asarray(tensors[name], dtype=np.float32)
        raw = (to_bf16(a) if dtype == "BF16" else a.astype("<f2" if dtype == "F16" else "<f4")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # keep the data 8-byte aligned, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in blobs:
            f.write(raw)
