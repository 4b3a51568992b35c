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

`plan(...)` checks the models and the settings and lays out the four; chatlens.jobs.CompareJob
computes them in order, each from an empty cache (the page's worker pulls it a step at a time,
the command line with chatlens.pull.greedy), and `Plan.answer` says what they wrote. No numpy
here: the backends compute.
"""

from dataclasses import dataclass

from . import defaults
from .complete import tokenized
from .contract import MODELS, ComparePrompt, Compared
from .errors import ChatlensError, TokenizerMismatchError
from .generate import Generation
from .reply import reply_of
from .turn import preview

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


def prompts(tokenizer, template, text) -> ComparePrompt:
    """What both models read, computed once from the instruct model's tokenizer and template."""
    if not isinstance(text, str):
        raise ChatlensError(f"the message must be a string, not {type(text).__name__}")
    if not text.strip():
        raise ChatlensError("the message is empty: there is nothing for the models to read")
    plain = tokenized(tokenizer, text)
    # The same rendering and tokenizing `run` does for one message with no preset (chatlens.turn):
    # one message drops nothing, so the window is no bound here (plan checks the context).
    rec = preview(tokenizer, template, system=None, messages=[{"role": "user", "content": text}],
                  window=1 << 30, reserve=0)
    return ComparePrompt(text=text, plain_ids=plain.prompt_ids, plain_tokens=plain.prompt_tokens,
                         template_text=rec.prompt_text, template_ids=list(rec.prompt_ids),
                         template_tokens=list(rec.prompt_tokens),
                         special_ids=sorted(set(plain.special_ids) | set(rec.special_ids)))


def check_limits(max_tokens, top_k) -> tuple:
    """(max_tokens, top_k) as ints, or ChatlensError: at least one new token, top-k 0 or more."""
    max_tokens, top_k = int(max_tokens), int(top_k)
    if max_tokens < 1:
        raise ChatlensError("the comparison needs at least 1 new token a reply")
    if top_k < 0:
        raise ChatlensError("top-k must be 0 (off) or more candidates")
    return max_tokens, top_k


@dataclass(frozen=True)
class Plan:
    """A comparison checked and ready to run, for a host that drives each reply itself (the
    page's worker pulls them, chatlens.pull): the prompt both models read, the four replies to
    compute in order, and how to answer once they are done."""
    prompt: ComparePrompt
    replies: tuple  # ((model key, layout, prompt ids), ...) in MODELS x LAYOUTS order
    capacity: int  # the cache each model's backend needs: the longer prompt and the cap
    max_tokens: int
    top_k: int
    eos_id: int  # the instruct model's end of turn: every reply stops there
    tokenizer: object  # the instruct model's (the base model's reads the same ids)

    def answer(self, cells: dict) -> Compared:
        """The four: cells is {(model key, layout): Reply}; a reply missing from it never started
        (a stop came before its turn)."""
        never = reply_of(self.tokenizer, self.eos_id, Generation(stop_reason="stopped"), reused=0, backend=None,
                         top_k=self.top_k)
        four = {key: {layout: cells.get((key, layout)) or never for layout in LAYOUTS} for key in MODELS}
        return Compared(prompt=self.prompt, **four, max_tokens=self.max_tokens, top_k=self.top_k, eos_id=self.eos_id)


def plan(instruct, base, text, *, max_tokens=defaults.COMPARE_LIMIT, top_k=defaults.COMPARE_TOP_K) -> Plan:
    """Check the models (each a text side or a loaded model: tokenizer, template, eos_id, config)
    and the settings (ChatlensError in a sentence) and lay out the four."""
    check_same_tokenizer(instruct.tokenizer, base.tokenizer)
    max_tokens, top_k = check_limits(max_tokens, top_k)
    context = min(instruct.config.n_ctx, base.config.n_ctx)
    prompt = prompts(instruct.tokenizer, instruct.template, text)
    longest = max(len(prompt.plain_ids), len(prompt.template_ids))
    if longest + max_tokens > context:
        raise ChatlensError(f"{longest} tokens of prompt + {max_tokens} new tokens exceed the models' context of "
                            f"{context}")
    ids = {"plain": prompt.plain_ids, "template": prompt.template_ids}
    replies = tuple((key, layout, tuple(ids[layout])) for key in MODELS for layout in LAYOUTS)
    return Plan(prompt, replies, longest + max_tokens, max_tokens, top_k, instruct.eos_id, instruct.tokenizer)
