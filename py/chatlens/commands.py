"""The engine's command-line jobs: export-hf, tokenize, generate."""

import json
import sys
from pathlib import Path

from .errors import ChatlensError
from .source import load_model, load_text_side, resolve_path


def export_hf(args) -> int:
    """Write a Hugging Face model folder from a GGUF: the stand-in for the Hub's original files."""
    from .safetensors import save
    from .tokenizer import tokenizer_json_from_gguf

    src = resolve_path(args.model)
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
    save(weights, out / "model.safetensors", dtype="BF16", metadata={"format": "pt"})
    print(out)
    return 0


def _write_json(path: Path, data):
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def tokenize(args) -> int:
    tok = load_text_side(args.model).tokenizer
    if args.jsonl:
        for n, line in enumerate(sys.stdin, 1):
            if not line.strip():
                continue
            try:
                text = json.loads(line)
            except ValueError as e:
                raise ChatlensError(f"line {n} is not JSON: {e}") from None
            if not isinstance(text, str):
                raise ChatlensError(f"line {n} must be a JSON string, not {type(text).__name__}")
            print(json.dumps(tok.encode(text)), flush=True)
    else:
        print(json.dumps(tok.encode(sys.stdin.read())))
    return 0


def generate(args) -> int:
    from .generate import generate as run

    try:
        ids = json.loads(sys.stdin.read())
    except ValueError as e:
        raise ChatlensError(f"stdin must be a JSON array of token ids: {e}") from None
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ChatlensError("stdin must be a non-empty JSON array of token ids")
    if args.max_new_tokens < 1:
        raise ChatlensError("--max-new-tokens must be at least 1")
    model = load_model(args.model)
    if len(ids) + args.max_new_tokens > model.config.n_ctx:
        raise ChatlensError(f"{len(ids)} prompt tokens + {args.max_new_tokens} new tokens exceed the model's "
                            f"context of {model.config.n_ctx}")
    backend = model.backend(len(ids) + args.max_new_tokens)
    out = run(backend, ids, eos_id=model.eos_id, max_new_tokens=args.max_new_tokens)
    top = out.first_logits.argsort()[::-1][:5]
    print(json.dumps({"ids": out.ids, "stop_reason": out.stop_reason,
                      "top5": [[int(i), float(out.first_logits[i])] for i in top]}))
    return 0
