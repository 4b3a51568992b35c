"""Plain text against the template: the model continues any text, with no chat template around it.

The lesson's experiment: "What is the capital of France?" as plain text makes `<|im_end|>` the
most likely next token (the model has learnt that such a line is a whole message), while the
same words inside the template get an answer. The text is tokenized as it is (special tokens
written in it are matched as the tokens they name, nothing is added), then the greedy loop
continues it until the end-of-turn token, the limit or a stop request, exactly as a reply
(chatlens.jobs.TextJob: the command line's `complete` and the page's worker).

No numpy here: the backend computes.
"""

from dataclasses import fields

from .errors import ChatlensError
from .contract import Continuation, Reply, Tokenized
from .record import token_lists


def tokenized(tokenizer, text) -> Tokenized:
    """The text's tokens without a template, named as in the turn record (chatlens.record), and
    the distinct special ids among them (the page draws those as chips)."""
    if not isinstance(text, str):
        raise ChatlensError(f"the text must be a string, not {type(text).__name__}")
    ids = tokenizer.encode(text)
    return Tokenized(**token_lists(tokenizer, ids, "prompt_"), special_ids=tokenizer.specials_in(ids))


def prepared(tokenizer, text, max_new_tokens, capacity) -> Tokenized:
    """The text's tokens (`tokenized`), checked: something to continue, at least one new token,
    and room for the new tokens in a cache of `capacity`."""
    out = tokenized(tokenizer, text)
    n = len(out.prompt_ids)
    if not n:
        raise ChatlensError("the text is empty: there is nothing to continue")
    max_new_tokens = int(max_new_tokens)
    if max_new_tokens < 1:
        raise ChatlensError("the continuation needs at least 1 new token")
    if n + max_new_tokens > capacity:
        raise ChatlensError(f"{n} tokens of text + {max_new_tokens} new tokens exceed the {capacity} the model's "
                            "cache holds")
    return out


def continuation(text: Tokenized, reply: Reply, eos_id: int) -> Continuation:
    """The text's tokens and the reply the model wrote after them (chatlens.reply.reply_of)."""
    parts = {f.name: getattr(part, f.name) for part in (text, reply) for f in fields(part)}
    return Continuation(**parts, eos_id=eos_id)
