"""`python -m chatlens complete`: plain text on stdin, no chat template, continued greedily.

Prints one JSON object: {"prompt_ids", "ids" (the continuation), "text", "stop_reason", "top_k"
(with --top-k K: one list per new id of [id, logit, probability], best first; else null), ...}
(chatlens.complete.complete lists every field). Special tokens written in the text are matched
as tokens: `<|im_start|>user\\nHi<|im_end|>\\n` reads as the template would write it.
"""

import json
import sys

from ..cache import PromptCache
from ..complete import complete as continue_text, tokenized
from ..errors import ChatlensError
from .models import open_model


def complete(args) -> int:
    text = sys.stdin.read()
    if args.max_new_tokens < 1:
        raise ChatlensError("--max-new-tokens must be at least 1")
    if args.top_k < 0:
        raise ChatlensError("--top-k must be 0 or more")
    model = open_model(args.model, args.backend)
    n = len(tokenized(model.tokenizer, text)["prompt_ids"]) + args.max_new_tokens
    if n > model.config.n_ctx:
        raise ChatlensError(f"the text and {args.max_new_tokens} new tokens need {n} tokens, more than the "
                            f"model's context of {model.config.n_ctx}")
    cache = PromptCache(model.backend(n))
    out = continue_text(model.tokenizer, model.eos_id, cache, text, max_new_tokens=args.max_new_tokens,
                        top_k=args.top_k)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0
