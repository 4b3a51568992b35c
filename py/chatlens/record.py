"""The turn record: what the model reads on one turn, and what it wrote back.

One type, one serialiser (`to_json`). The command line (`run`, `/show`), the worker and the
page's panel, the challenges, site/recorded.json and the tests all read this record.

Words, with one meaning each here, in the other answers that carry tokens (a plain-text
continuation, a prediction, tokenize, render) and on the page:
  id      a token's number in the vocabulary (an int)
  token   one entry of the vocabulary: what the model reads and writes, one id at a time. A
          list of tokens comes as parallel lists, one entry per id: *_ids the ids, *_tokens
          each token's text, *_vocab each as the vocabulary writes it, *_bytes each one's bytes
  bytes   a token's exact bytes as lower-case hex, two digits a byte with no separator
          ("20746865" is " the", "e69d" the first two bytes of 東): what byte-level BPE
          splits, so a character split across tokens is known byte for byte. The tokens of a
          text spell its UTF-8 bytes exactly, in order. Special tokens: their text's UTF-8.
  piece   a stretch of the prompt that one message put there with the template's tokens around
          it (or the template's default system prompt, or the generation header): `pieces`
"""

from dataclasses import asdict, dataclass, fields, replace


@dataclass
class TurnRecord:
    """One turn.

    The prompt, exactly as the model reads it:
      prompt_text      the whole conversation rendered by the chat template, special tokens
                       written out as text ("<|im_start|>user\\n...")
      prompt_ids       its token ids, in order
      prompt_tokens    each id's token as text (its bytes decoded on their own: a token that holds
                       part of a character shows U+FFFD)
      prompt_vocab     each id's token as the vocabulary writes it (GPT-2's byte alphabet, "Ġthe")
      prompt_bytes     each id's token's bytes (hex, see "bytes" above): the page lays the tokens
                       on the text and shows a split character's bytes from these
      special_ids      the distinct ids of prompt_ids that are special tokens (the template's
                       markers such as <|im_start|>), sorted: the panel marks these, not text
                       that merely looks like one
      special_in_text  True (the default): a special token written inside a message, such as
                       <|im_end|>, is read as that token, a real message boundary; False: it is
                       read as its characters (the template's own tokens stay tokens)
      pieces           the prompt cut at message boundaries, in order: dicts of kind ("system",
                       "default_system", "user", "assistant", "new", "header", ...), label,
                       message_index (into the messages sent, or None), start and end (token
                       positions), count (end - start: the message with the template's tokens
                       around it), text, role (the message's role: "user" for the new message,
                       "system" for the template's default; None for the header or a whole
                       prompt) and content_start, content_end (token positions: the tokens that
                       hold the message's own text, found in the render; the rest of the piece
                       is the template's. A token that holds both is counted as the message's.
                       Equal for an empty message; None where the piece holds no message's text
                       or the template changed it)
      dropped_messages the earliest messages of the history that were left out so the rest
                       fits the window, oldest first: dicts of message_index, role, content and
                       count (tokens the message took with the template's tokens around it)
    The window, in tokens:
      window           the context window the conversation must fit
      context          the model's whole context (its trained length, from the model's config;
                       None where the caller did not say): the largest window there is
      reserve          tokens kept free in it for the reply (the reply limit)
      used             len(prompt_ids)
      free             window - used - reserve
    The cache:
      reused_tokens    prompt tokens whose keys and values were already in the KV cache (the
                       common prefix with what the model read and wrote last turn); a preview
                       states what sending now would reuse
      computed_tokens  used - reused_tokens: the tokens the model runs through now (once it has
                       replied, those it read: fewer when it was stopped while reading)
    The system prompt:
      system           the system text rendered, or None when the template's default applies
      preset           the preset it came from ("none", "pirate", ...; "custom"; None if given
                       as a leading system message)
    The reply (None until the model has answered):
      max_tokens       the reply limit
      reply_text       the reply as text, without the end-of-turn token
      reply_ids        the ids chosen, the end-of-turn id included when the model wrote it
      reply_tokens     each reply id's token as text, reply_vocab as the vocabulary writes it and
                       reply_bytes its bytes (as prompt_tokens, prompt_vocab and prompt_bytes)
      stop_reason      "end_turn" (the model wrote its end-of-turn token), "max_tokens" (the
                       limit) or "stopped" (the user stopped it)
      timings          prefill_ms and decode_ms (wall time), prefill_tok_s (computed tokens a
                       second), decode_tok_s (tokens fed back a second)
      backend          what computed the reply: "numpy", or "webgpu: <adapter>"
    Why each reply token (only when the turn was asked for top-k: `run --top-k K`, the page's
    "why this token", chatlens.run({topK}); None otherwise):
      top_k            one list per reply id, in order: the step's K best candidates as
                       [id, logit, probability], best first (the chosen id is the first; equal
                       logits by lower id). probability = exp(logit - logsumexp of all the
                       step's logits), computed where the logits are (the GPU or NumPy)
      top_k_tokens     the same candidates' tokens as text (as prompt_tokens writes them), and
                       top_k_bytes their bytes
    A reply chosen by hand (a branch kept: chatlens.jobs.BranchJob; None otherwise):
      branched         {step, id, reply_ids}: at `step` the learner took `id` where the model had
                       written reply_ids (the reply it branched from); the reply fields hold the
                       branch (chatlens.contract.Branched's, its candidates included when known)
    """
    prompt_text: str
    prompt_ids: list
    prompt_tokens: list
    prompt_vocab: list
    prompt_bytes: list
    special_ids: list
    special_in_text: bool
    pieces: list
    dropped_messages: list
    window: int
    context: int | None
    reserve: int
    used: int
    free: int
    reused_tokens: int
    computed_tokens: int
    system: str | None
    preset: str | None
    max_tokens: int
    reply_text: str | None = None
    reply_ids: list | None = None
    reply_tokens: list | None = None
    reply_vocab: list | None = None
    reply_bytes: list | None = None
    stop_reason: str | None = None
    timings: dict | None = None
    backend: str | None = None
    top_k: list | None = None
    top_k_tokens: list | None = None
    top_k_bytes: list | None = None
    branched: dict | None = None

    def to_json(self) -> dict:
        """The record as JSON-able data (what the page, `run` and recorded.json hold)."""
        return asdict(self)

    def with_branch(self, b) -> "TurnRecord":
        """This record with the branch `b` (a chatlens.contract.Branched of its reply, itself a reply)
        as what its reply wrote, marked as chosen by hand (`branched`); the turn's own figures (what
        was reused and computed, the timings) stay. The page keeps a branch so too (site/js/page/
        step.mjs keptRecord)."""
        written = {name: getattr(b, name) for name in WRITTEN}
        if b.top_k is not None and None in b.top_k:  # a record's candidates are every step's, or none
            written.update(top_k=None, top_k_tokens=None, top_k_bytes=None)
        return replace(self, **written, branched={"step": b.step, "id": b.id, "reply_ids": b.branched_from})

    def with_reply(self, reply) -> "TurnRecord":
        """This record with the reply (a chatlens.contract.Reply, chatlens.reply.reply_of's) in its
        reply fields, which are Reply's own."""
        return replace(self, **{f.name: getattr(reply, f.name) for f in fields(reply)})

    @classmethod
    def from_json(cls, data: dict) -> "TurnRecord":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


# What a reply wrote, of the record's reply fields: what a kept branch replaces (the rest, what was
# reused and computed and how long it took, is the turn's own).
WRITTEN = ("reply_ids", "reply_text", "reply_tokens", "reply_vocab", "reply_bytes", "stop_reason", "top_k",
           "top_k_tokens", "top_k_bytes")


def token_lists(tokenizer, ids, prefix="") -> dict:
    """The parallel lists of a list of tokens, named as the record names them: {prefix}ids,
    {prefix}tokens, {prefix}vocab and {prefix}bytes ("prompt_" gives the prompt's). Every answer
    that carries tokens builds them here, so each list has one definition."""
    ids = list(ids)
    return {f"{prefix}ids": ids,
            f"{prefix}tokens": [tokenizer.token_text(i) for i in ids],
            f"{prefix}vocab": [tokenizer.id_to_token(i) for i in ids],
            f"{prefix}bytes": token_bytes(tokenizer, ids)}


def token_bytes(tokenizer, ids) -> list:
    """Each id's token's bytes as hex (the records' *_bytes lists)."""
    return [tokenizer.token_bytes(i).hex() for i in ids]


def candidate_tokens(tokenizer, steps) -> list:
    """Each candidate's token as text, for steps of [[id, logit, probability], ...]."""
    return [[tokenizer.token_text(c[0]) for c in step] for step in steps]


def candidate_bytes(tokenizer, steps) -> list:
    """Each candidate's bytes as hex, for steps of [[id, logit, probability], ...]."""
    return [token_bytes(tokenizer, [c[0] for c in step]) for step in steps]
