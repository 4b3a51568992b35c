"""The lesson's experiment: the base model beside the instruct model, on exactly the same ids.

SmolLM2-135M (pretrained only) and SmolLM2-135M-Instruct share their tokenizer file, so both can
read byte-identical ids, and what each writes shows what instruction tuning changed. One message
is read two ways:

  plain     the text as it is, tokenized with nothing added (as `complete` reads it)
  template  the instruct model's chat template around it as the one user message, with the
            generation prompt and the template's default system prompt (as `run` reads it with
            no preset)

and each model continues each greedily, the four replies stopping at the instruct model's end
of turn (<|im_end|>) or at the cap (defaults.COMPARE_LIMIT, the lab's 48). The base model has no
chat template and its own end token is <|endoftext|>: the experiment holds it to the instruct
model's layout and end of turn, which is the point (it was never trained to write one).

`compare` computes the four one after another (the command line, `python -m chatlens compare`).
A host that drives each reply itself (the page's worker, pulling steps: chatlens.pull) takes
`plan(...)`, computes plan.replies in order, each from an empty cache, formats each with `cell`
and answers with plan.answer: the same checks, prompt and shape. No numpy here: the backends
compute.
"""

from dataclasses import dataclass

from . import defaults
from .cache import PromptCache
from .chat import preview
from .complete import continuation, tokenized
from .errors import ChatlensError, TokenizerMismatchError

MODELS = ("instruct", "base")  # the answer's keys, in the order the replies are computed
LAYOUTS = ("plain", "template")


def check_same_tokenizer(instruct_tokenizer, base_tokenizer) -> None:
    """Refuse (TokenizerMismatchError) a base model whose tokenizer differs from the instruct
    model's in what turns text into ids: the vocabulary, the merges and their ranks, the added
    tokens (special or not) or the pre-tokenizer. The end-of-text token each names may differ:
    the experiment stops both at the instruct model's end of turn."""
    base = base_tokenizer.identity()
    for what, mine in instruct_tokenizer.identity().items():
        if mine != base[what]:
            raise TokenizerMismatchError(
                f"the base model's tokenizer differs from the instruct model's (its {what}): the comparison needs "
                "both models to read exactly the same ids, so it takes a base model with the instruct model's "
                "tokenizer")


def prompts(tokenizer, template, text) -> dict:
    """What both models read, computed once from the instruct model's tokenizer and template:
    {"text", "plain_ids", "plain_tokens", "template_text", "template_ids", "template_tokens",
    "special_ids"} (special_ids: the distinct special ids in either, drawn as chips)."""
    if not isinstance(text, str):
        raise ChatlensError(f"the message must be a string, not {type(text).__name__}")
    if not text.strip():
        raise ChatlensError("the message is empty: there is nothing for the models to read")
    plain = tokenized(tokenizer, text)
    # The same rendering and tokenizing `run` does for one message with no preset (chatlens.chat):
    # one message drops nothing, so the window is no bound here (compare checks the context).
    rec = preview(tokenizer, template, system=None, messages=[{"role": "user", "content": text}],
                  window=1 << 30, reserve=0)
    return {"text": text, "plain_ids": plain["prompt_ids"], "plain_tokens": plain["prompt_tokens"],
            "template_text": rec.prompt_text, "template_ids": list(rec.prompt_ids),
            "template_tokens": list(rec.prompt_tokens),
            "special_ids": sorted(set(plain["special_ids"]) | set(rec.special_ids))}


def check_limits(max_tokens, top_k) -> tuple:
    """(max_tokens, top_k) as ints, or ChatlensError: at least one new token, top-k 0 or more."""
    max_tokens, top_k = int(max_tokens), int(top_k)
    if max_tokens < 1:
        raise ChatlensError("the comparison needs at least 1 new token a reply")
    if top_k < 0:
        raise ChatlensError("top-k must be 0 (off) or more candidates")
    return max_tokens, top_k


def cell(tokenizer, eos_id, reused, gen, backend_name, top_k) -> dict:
    """One of the four: {reply_ids, reply_tokens, reply_text, stop_reason, top_k, top_k_tokens,
    backend, timings}; top_k the FIRST step's [[id, logit, probability], ...], best first (why
    the reply starts as it does), None when top_k is 0 or nothing was chosen. The reply's text
    and tokens as `complete` states them (chatlens.complete.continuation)."""
    out = continuation(tokenizer, eos_id, {}, reused, gen, backend_name, top_k)
    first = bool(top_k and out["top_k"])
    return {"reply_ids": out["ids"], "reply_tokens": out["tokens"], "reply_text": out["text"],
            "stop_reason": out["stop_reason"], "top_k": out["top_k"][0] if first else None,
            "top_k_tokens": out["top_k_tokens"][0] if first else None,
            "backend": out["backend"], "timings": out["timings"]}


def stopped_cell() -> dict:
    """A reply that never started: a stop came before its turn."""
    return {"reply_ids": [], "reply_tokens": [], "reply_text": "", "stop_reason": "stopped", "top_k": None,
            "top_k_tokens": None, "backend": None, "timings": None}


@dataclass(frozen=True)
class Plan:
    """A comparison checked and ready to run, for a host that drives each reply itself (the
    page's worker pulls them, chatlens.pull): the prompt both models read, the four replies to
    compute in order, and how to answer once they are done."""
    prompt: dict  # prompts(...)
    replies: tuple  # ((model key, layout, prompt ids), ...) in MODELS x LAYOUTS order
    capacity: int  # the cache each model's backend needs: the longer prompt and the cap
    max_tokens: int
    top_k: int
    eos_id: int  # the instruct model's end of turn: every reply stops there
    tokenizer: object  # the instruct model's (the base model's reads the same ids)

    def answer(self, cells: dict) -> dict:
        """{"prompt", "instruct": {"plain", "template"}, "base": {...}, "max_tokens", "top_k",
        "eos_id"}; cells: {(model key, layout): cell}; a reply missing from it never started
        (stopped_cell)."""
        out = {"prompt": self.prompt, "max_tokens": self.max_tokens, "top_k": self.top_k, "eos_id": self.eos_id}
        for key in MODELS:
            out[key] = {layout: cells.get((key, layout)) or stopped_cell() for layout in LAYOUTS}
        return out


def plan(instruct, base, text, *, max_tokens=defaults.COMPARE_LIMIT, top_k=defaults.COMPARE_TOP_K) -> Plan:
    """Check the models and the settings (ChatlensError in a sentence) and lay out the four."""
    check_same_tokenizer(instruct.tokenizer, base.tokenizer)
    max_tokens, top_k = check_limits(max_tokens, top_k)
    context = min(instruct.config.n_ctx, base.config.n_ctx)
    prompt = prompts(instruct.tokenizer, instruct.template, text)
    longest = max(len(prompt["plain_ids"]), len(prompt["template_ids"]))
    if longest + max_tokens > context:
        raise ChatlensError(f"{longest} tokens of prompt + {max_tokens} new tokens exceed the models' context of "
                            f"{context}")
    replies = tuple((key, layout, tuple(prompt[f"{layout}_ids"])) for key in MODELS for layout in LAYOUTS)
    return Plan(prompt, replies, longest + max_tokens, max_tokens, top_k, instruct.eos_id, instruct.tokenizer)


def compare(instruct, base, text, *, max_tokens=defaults.COMPARE_LIMIT, top_k=defaults.COMPARE_TOP_K,
            on_token=None, should_stop=None) -> dict:
    """The four replies, computed here one after another: Plan.answer's dict.

    instruct, base: loaded models (chatlens.source.Model: tokenizer, template, eos_id, config,
    backend(n)). on_token(model_key, layout, id) is called as each id is chosen; should_stop() is
    asked between steps, and a stop ends the reply under way and every one after it ("stopped").
    Each reply starts from an empty cache, as `complete` and `run` do."""
    p = plan(instruct, base, text, max_tokens=max_tokens, top_k=top_k)
    models = dict(zip(MODELS, (instruct, base)))
    caches, cells = {}, {}
    for key, layout, ids in p.replies:
        if should_stop is not None and should_stop():
            break
        if key not in caches:
            caches[key] = PromptCache(models[key].backend(p.capacity))
        cache = caches[key]
        cache.reset()  # from nothing, as `complete` and `run` read each prompt

        def each(i, key=key, layout=layout):
            if on_token is not None:
                on_token(key, layout, i)

        reused, gen = cache.generate(list(ids), eos_id=p.eos_id, max_new_tokens=p.max_tokens, on_token=each,
                                     should_stop=should_stop, top_k=p.top_k)
        cells[key, layout] = cell(p.tokenizer, p.eos_id, reused, gen, cache.backend.name, p.top_k)
        if gen.stop_reason == "stopped":
            break
    return p.answer(cells)
