"""`python -m chatlens compare --base-model PATH --text TEXT`: the base model beside the instruct
model on the same ids, plain text and the chat template (chatlens.compare), as one JSON object.

Both models' text sides are read first, so a base model with another tokenizer is refused
before any weights load.
"""

import json
import sys

from ..compare import check_limits, check_same_tokenizer, compare as compare_models
from ..source import load_text_side, resolve_path
from .fetch import resolve_model
from .models import open_model


def compare(args) -> int:
    max_tokens, top_k = check_limits(args.max_new_tokens, args.top_k)
    instruct_path, base_path = resolve_model(args.model), resolve_path(args.base_model)
    check_same_tokenizer(load_text_side(instruct_path).tokenizer, load_text_side(base_path).tokenizer)
    instruct = open_model(instruct_path, args.backend)
    base = open_model(base_path, args.backend)
    out = compare_models(instruct, base, args.text, max_tokens=max_tokens, top_k=top_k)
    out["models"] = {"instruct": str(instruct.path), "base": str(base.path)}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0
