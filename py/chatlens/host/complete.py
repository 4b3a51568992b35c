"""`python -m chatlens complete`: plain text on stdin, no chat template, continued greedily.

Prints one JSON object, a chatlens.protocol.Continuation: {"prompt_ids", ... (the text's tokens),
"reply_ids" (the continuation), "reply_text", "stop_reason", "top_k" (with --top-k K: one list
per new id of [id, logit, probability], best first; else null), ...}. Special tokens written in
the text are matched as tokens: `<|im_start|>user\\nHi<|im_end|>\\n` reads as the template would
write it.
"""

import json
import sys

from ..cache import PromptCache
from ..complete import tokenized
from ..errors import ChatlensError
from ..jobs import TextJob
from ..protocol import to_json
from ..pull import greedy
from .models import open_model


def complete(args) -> int:
    text = sys.stdin.read()
    if args.max_new_tokens < 1:
        raise ChatlensError("--max-new-tokens must be at least 1")
    if args.top_k < 0:
        raise ChatlensError("--top-k must be 0 or more")
    model = open_model(args.model, args.backend)
    n = len(tokenized(model.tokenizer, text).prompt_ids) + args.max_new_tokens
    if n > model.config.n_ctx:
        raise ChatlensError(f"the text and {args.max_new_tokens} new tokens need {n} tokens, more than the "
                            f"model's context of {model.config.n_ctx}")
    job = TextJob(model, PromptCache(model.backend(n)), text, max_tokens=args.max_new_tokens, top_k=args.top_k)
    sys.stdout.write(json.dumps(to_json(greedy(job))) + "\n")
    return 0
