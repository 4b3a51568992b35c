"""`python -m chatlens compare --base-model PATH --text TEXT`: the base model beside the instruct
model on the same ids, plain text and the chat template (chatlens.compare), as one JSON object.

Both models' text sides are read first, so a base model with another tokenizer is refused
before any weights load.
"""

import json
import sys
from pathlib import Path

from .. import defaults
from ..cache import PromptCache
from ..compare import MODELS, check_limits, check_same_tokenizer, plan
from ..errors import ChatlensError
from ..jobs import CompareJob
from ..protocol import to_json
from ..pull import greedy
from ..source import load_text_side, resolve_path
from .fetch import resolve_model
from .models import open_model


def compared(instruct, base, text, *, max_tokens=defaults.COMPARE_LIMIT, top_k=defaults.COMPARE_TOP_K, on_token=None,
             should_stop=None):
    """The four replies of two loaded models (chatlens.source.Model), computed here one after
    another (chatlens.jobs.CompareJob pulled by chatlens.pull.greedy): chatlens.protocol.Compared.
    on_token(CellToken) as each id is chosen; should_stop() between steps ends them all."""
    p = plan(instruct, base, text, max_tokens=max_tokens, top_k=top_k)
    caches = {key: PromptCache(model.backend(p.capacity)) for key, model in zip(MODELS, (instruct, base))}
    return greedy(CompareJob(p, caches), on_token=on_token, should_stop=should_stop)


def compare(args) -> int:
    max_tokens, top_k = check_limits(args.max_new_tokens, args.top_k)
    instruct_path, base_path = resolve_model(args.model), resolve_path(args.base_model)
    if Path(instruct_path).resolve() == Path(base_path).resolve():
        raise ChatlensError(f"the base model given is the instruct model itself ({base_path}): the comparison would set "
                            "the model beside itself; give the base model's file or folder")
    check_same_tokenizer(load_text_side(instruct_path).tokenizer, load_text_side(base_path).tokenizer)
    instruct = open_model(instruct_path, args.backend)
    base = open_model(base_path, args.backend)
    out = to_json(compared(instruct, base, args.text, max_tokens=max_tokens, top_k=top_k))
    out["models"] = {"instruct": str(instruct.path), "base": str(base.path)}
    sys.stdout.write(json.dumps(out) + "\n")
    return 0
