"""The engine's command-line jobs: tokenize and generate."""

import json
import sys

from ..errors import ChatlensError
from ..source import load_text_side
from .fetch import resolve_model
from .models import open_model


def tokenize(args) -> int:
    tok = load_text_side(resolve_model(args.model)).tokenizer
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
    from ..pull import Pull, greedy

    try:
        ids = json.loads(sys.stdin.read())
    except ValueError as e:
        raise ChatlensError(f"stdin must be a JSON array of token ids: {e}") from None
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ChatlensError("stdin must be a non-empty JSON array of token ids")
    if args.max_new_tokens < 1:
        raise ChatlensError("--max-new-tokens must be at least 1")
    model = open_model(args.model, args.backend)
    if len(ids) + args.max_new_tokens > model.config.n_ctx:
        raise ChatlensError(f"{len(ids)} prompt tokens + {args.max_new_tokens} new tokens exceed the model's "
                            f"context of {model.config.n_ctx}")
    backend = model.backend(len(ids) + args.max_new_tokens)
    out = greedy(Pull(backend, ids, eos_id=model.eos_id, max_new_tokens=args.max_new_tokens, top_k=5))
    print(json.dumps({"ids": out.ids, "stop_reason": out.stop_reason, "backend": backend.name,
                      "top5": [[i, logit] for i, logit, _ in out.top_k[0]]}))
    return 0
