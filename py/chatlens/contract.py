"""The contract's types, written once: each request's arguments and each answer, a dataclass.

Each field carries its type, its default (from chatlens.defaults) and a line of doc (`doc`, which
chatlens.protocol.describe() carries to the page). chatlens.protocol holds the tables that say
which request takes and answers which type, reads a request's arguments into its type (`parse`),
serialises an answer (`to_json`) and writes what the page reads of them. The turn record is the
one answer defined elsewhere: its fields are documented once, in chatlens.record.TurnRecord.

The engine's modules build their answers from these types (chatlens.reply, chatlens.complete,
chatlens.compare, chatlens.jobs), so this module sits below them: it imports no module that
computes.
"""

from dataclasses import MISSING, dataclass, field

from . import defaults, usercode
from .record import TurnRecord


def doc(text, default=MISSING, factory=MISSING):
    """A field with its line of doc (describe() carries it)."""
    if factory is not MISSING:
        return field(default_factory=factory, metadata={"doc": text})
    return field(default=default, metadata={"doc": text})


@dataclass(frozen=True)
class Empty:
    """No arguments."""


@dataclass(frozen=True)
class Load:
    """Read a model source's text side: tokenizer, chat template, config."""
    path: str = doc("the model's files in the worker's file system: a .gguf file or a Hugging Face folder")


# "model", in the package: a field named `model` (here, in chatlens.protocol's ModelInfo and the
# answers) is always the model key, one of MODELS; a ModelEvent's `computes` is what computes that
# model's replies (a ModelInfo); a loaded model (chatlens.source.Model: its text side and weights)
# is what `open_model`, `load_model` and ChatSession hold (host/ names the variable `model` where no
# key is in scope); `?model=` and `--model` name a model's source (a file, a folder, a URL).
MODELS = ("instruct", "base")  # the two models the worker holds, in the order a comparison computes them


@dataclass(frozen=True)
class LoadBase:
    """Read the base model's text side beside the instruct model's: refused when its tokenizer differs."""
    path: str = doc("the base model's files in the worker's file system: a .gguf file or a Hugging Face folder")


@dataclass(frozen=True)
class UseNumpy:
    """Compute one model's replies with NumPy."""
    model: str = doc("instruct or base", "instruct")


@dataclass(frozen=True)
class Conversation:
    """A conversation as a turn reads it: the messages, the window it must fit, the system prompt."""
    messages: list = doc("[{role, content}, ...]: the history, then the new user message last")
    window: int = doc("the context window, in tokens", defaults.DEFAULT_WINDOW)
    reserve: int = doc("tokens kept free in the window for the reply", defaults.REPLY_LIMIT)
    max_tokens: int | None = doc("the reply limit (default: the reserve)", None)
    preset: str | None = doc("a system prompt preset (chatlens.presets), or none", None)
    custom: str | None = doc("the custom preset's text", None)
    system: str | None = doc("the system prompt as text (null: the template's default)", None)
    special_in_text: bool = doc("special tokens written in a message are read as tokens (false: as characters)", True)


@dataclass(frozen=True)
class Turn(Conversation):
    """A chat turn: the conversation, the window it must fit, the system prompt, and the candidates
    each reply token records."""
    top_k: int | None = doc("candidates a reply token records (chat: default 0, none; predict: default the site's)",
                            None)


@dataclass(frozen=True, kw_only=True)
class Branch(Turn):
    """Another choice at one step of a turn's reply: the reply up to that step, then `id`, then
    greedy again; max_tokens caps the whole branch (the reply's ids it keeps included)."""
    reply_ids: list | None = doc("the reply to branch, as the turn's record has it (null, on the command line only: "
                                 "the turn's reply is computed first)", None)
    step: int = doc("the step whose choice is replaced: the branch keeps reply_ids[:step], then takes id")
    id: int = doc("the token id taken at that step")
    reply_top_k: list | None = doc("the reply's candidates up to the step (its record's top_k): kept in the branch's "
                                   "rows, so the branch can be branched again from any step (null: none)", None)


@dataclass(frozen=True, kw_only=True)
class AtStep(Conversation):
    """One step of a turn's reply: the conversation it was written from, the reply so far, the step."""
    reply_ids: list | None = doc("the reply so far, as the turn's record has it ([]: the draft's first token; "
                                 "null, on the command line only: the turn's reply is computed first)", None)
    step: int = doc("the step that chose reply id `step` (its query: the token before it); len(reply_ids) for the "
                    "step after the reply so far", 0)
    model: str = doc("the model that computes it: \"instruct\", or \"base\" (the comparison's, once its weights are "
                     "loaded); both read the instruct model's tokenizer and template", "instruct")
    layout: str = doc("\"template\": the turn rendered with the chat template; \"plain\": the last message's text "
                      "read as it is, no template (plain text's continuation, the comparison's plain cells), and "
                      "the system prompt and window not read", "template")


@dataclass(frozen=True, kw_only=True)
class Inspect(AtStep):
    """One step of a turn's reply inspected (chatlens.inspection): where its query token looked,
    and how the choice formed through the layers."""
    top_k: int | None = doc("the logit lens's candidates a layer (null: 5)", None)


@dataclass(frozen=True, kw_only=True)
class Cause(AtStep):
    """Which piece one step of a turn's reply needed (chatlens.cause): each piece of what the model
    read knocked out (the reply's positions may not read it) and removed (the turn rendered again
    without it, the reply so far forced); a dropped turn is put back instead."""
    pieces: list | None = doc("the pieces to take away, each \"kind:index\" (the index-th piece of that kind in the "
                              "record, from 0: \"system:0\", \"user:1\", \"new:0\", \"header:0\"; a dropped turn's "
                              "kind is \"dropped\"; the groups \"replies:0\", the assistant's earlier replies, and "
                              "\"history:0\", every earlier turn), or two together \"a+b\"; null: every piece", None)
    tokens: bool = doc("every reply token's figures too: the answer's and each measure's `tokens`", False)


@dataclass(frozen=True, kw_only=True)
class Needs(Conversation):
    """Which turn each reply of a conversation needed (chatlens.needs): every assistant message is a
    reply to measure, each piece it read removed (and, asked, knocked out), the whole reply watched.
    The messages may end with the last reply (a user message after it, a draft, is not read)."""
    replies: list | None = doc("each assistant message's reply ids, in order, as its turn's record has them (null, "
                               "or a null entry: the message as the template writes it, up to its end of turn)", None)
    knocked: bool = doc("knock each piece out too (twice the passes)", False)
    pieces: list | None = doc("more pieces for every turn that has them: two together \"a+b\" (null: the turn's "
                              "own pieces and groups)", None)
    tokens: bool = doc("every reply token's figures too: each turn's and each measure's `tokens`", False)


@dataclass(frozen=True)
class Text:
    """Plain text to continue, with no template."""
    text: str = doc("the text, tokenized as it is (special tokens written in it matched)")
    max_tokens: int = doc("new tokens at most", defaults.REPLY_LIMIT)
    top_k: int = doc("candidates each new token records (0: none)", 0)


@dataclass(frozen=True)
class Compare:
    """The comparison: one message read as plain text and in the chat template, by the base and the instruct model."""
    text: str = doc("the message")
    max_tokens: int = doc("new tokens at most, each reply", defaults.COMPARE_LIMIT)
    top_k: int = doc("candidates the first step of each reply records (0: none)", defaults.COMPARE_TOP_K)


# The most prompt ids a NumPy step of the page reads: a reply's prompt is read 16 ids a pull, so its
# progress moves and a stop falls between two. And the time a step of the lab's jobs aims at (an
# inspection's read, a cause's or a matrix's passes): chatlens.pace sizes each by the time the last
# took, so a stop waits at most about one (within 200 ms where one id takes less). A reply's prompt
# is not paced: on the NumPy without BLAS that stands in for Pyodide's, 167 tokens take 3.3 s in
# steps of 16 and 4.2 to 4.5 s paced (docs/speed.md), and its first token counts more than a stop's
# wait.
READ_CHUNK = 16
PULL_MS = 150


@dataclass(frozen=True)
class Start:
    """Start the job the page pulls (`step` until its answer is done): a reply, a count, an inspection, ..."""
    kind: str = doc("the job's kind, one of chatlens.jobs.KINDS, named by the page's request that starts it (run, a "
                    "Turn's reply; count, its overflow counted exactly; ...): a class each, which declares its "
                    "arguments and its answer")
    args: dict = doc("the arguments of that kind (its class's `takes`: a Turn, a Text, ...)")
    depth: int = doc("GPU steps to keep in flight", defaults.IN_FLIGHT)
    chunk: int = doc("the most prompt ids one NumPy step reads, so the page's progress moves and a stop falls "
                     "between chunks (0: the backend's own; a GPU step reads the program's chunk)", READ_CHUNK)


@dataclass(frozen=True)
class Step:
    """The next step of the job being pulled; a GPU reply's, with the oldest run's bytes as an extra argument."""
    depth: int | None = doc("GPU steps to keep in flight (default: as started)", None)
    ms: int | float = doc("a count's step: how long it may count, in milliseconds, before it answers", 20)


@dataclass(frozen=True)
class GpuProgram:
    """Build the GPU program of the forward pass for one model's source and this adapter."""
    n_ctx: int = doc("the context the program's KV cache holds")
    features: list = doc("the adapter's features", factory=list)
    limits: dict = doc("the adapter's limits, by WebGPU's names", factory=dict)
    model: str = doc("instruct or base", "instruct")
    info: dict | None = doc("what the adapter says of itself (vendor, architecture, device, description, fallback): "
                            "on a CPU emulation (chatlens.device.emulated) the prefill GEMM is the one whose tiles "
                            "compile fastest (chatlens.gpu.kernels.EMULATED_GEMM)", None)
    fault: bool = doc("a faulty test build's program (chatlens.gpu.fault: build --gpu-fault)", False)


@dataclass(frozen=True)
class UseGpu:
    """Compute replies with the program gpu_program built; the page's executor runs its steps."""
    name: str = doc("the adapter's name, for the record's backend", "adapter")
    model: str = doc("instruct or base: the model whose program gpu_program built last", "instruct")


@dataclass(frozen=True)
class Tokenize:
    """The text's tokens, with no template."""
    text: str = doc("the text")


@dataclass(frozen=True)
class Render:
    """A chat template rendered as transformers' apply_chat_template renders it."""
    # messages, tools and documents are checked by the template, with transformers' own words
    messages: object = doc("[{role, content, ...}, ...]")
    template: str | None = doc("Jinja source (default: the model's template)", None)
    tools: object = doc("tool definitions passed to the template", None)
    documents: object = doc("documents passed to the template", None)
    add_generation_prompt: bool | None = doc("end with the assistant's header (default: true, false when continuing)",
                                             None)
    continue_final_message: bool | str = doc("continue the last message (or the named field of it)", False)
    variables: dict | None = doc("extra template variables", None)
    assistant_mask: bool = doc("also mark the tokens inside {% generation %} blocks", False)


@dataclass(frozen=True)
class RunPython:
    """A learner's Python, run with count_tokens(text) among its globals."""
    code: str = doc("the program")
    seconds: int | float = doc("its time limit", usercode.DEFAULT_SECONDS)
    results: list = doc("names whose values to return", factory=list)


# -- what the requests answer -------------------------------------------------------------------
# Each answer is an instance of one of these classes (the turn record: chatlens.record.TurnRecord),
# built where it is computed (chatlens.reply, chatlens.complete, chatlens.compare, chatlens.jobs,
# chatlens.worker) and serialised once, by `to_json`, where chatlens.worker answers the page and
# where the command line prints. Names with two meanings elsewhere are spelt out here: an `id` is a
# token id except in a message's envelope (the request's id); a `tokens` field is a list (of
# texts, or of Token objects), never a count; `top_k` is the rows of candidates in an answer and
# their number K only in a request's arguments.


@dataclass(frozen=True)
class Loaded:
    """load's answer: the text side is ready."""
    eos_token: str = doc("the end-of-turn token, as text")
    n_ctx: int = doc("the model's whole context, in tokens")
    vocab_size: int = doc("the vocabulary's size")
    source: str = doc("the path that was read")


@dataclass(frozen=True)
class BackendInfo:
    """use_numpy's and use_gpu's answer: what computes replies now."""
    backend: str = doc('"numpy", or "webgpu: <adapter>" (as a record\'s backend)')
    n_ctx: int = doc("the most tokens its cache holds")


@dataclass(frozen=True)
class Reply:
    """A reply, as every answer that carries one carries it: built once (chatlens.reply.reply_of)
    for the turn record (chatlens.record.TurnRecord has these fields), a plain-text continuation
    and each of the comparison's four."""
    reply_ids: list = doc("the ids chosen, the end-of-turn id included when the model wrote it")
    reply_text: str = doc("the reply as text, without the end-of-turn token")
    reply_tokens: list = doc("each reply id's token as text (its bytes decoded on their own)")
    reply_vocab: list = doc("each reply id's token as the vocabulary writes it")
    reply_bytes: list = doc("each reply id's token's bytes, as hex")
    stop_reason: str = doc('"end_turn", "max_tokens" or "stopped"')
    top_k: list | None = doc("rows, one per reply id: the step's K best [id, logit, probability], best first "
                             "(null unless asked)")
    top_k_tokens: list | None = doc("those candidates' tokens as text")
    top_k_bytes: list | None = doc("those candidates' bytes, as hex")
    reused_tokens: int = doc("prompt tokens the cache held already")
    computed_tokens: int = doc("prompt tokens read now, after the reused ones (fewer than the rest when stopped "
                               "while the prompt was read)")
    backend: str | None = doc("what computed the reply (null: nothing did, it never started)")
    timings: dict | None = doc("prefill_ms, decode_ms, prefill_tok_s, decode_tok_s (null: it never started)")


@dataclass(frozen=True)
class Tokenized:
    """tokenize's answer (and the prompt's half of a continuation): a text's tokens, no template."""
    prompt_ids: list = doc("the token ids, in order")
    prompt_tokens: list = doc("each id's token as text")
    prompt_vocab: list = doc("each id's token as the vocabulary writes it")
    prompt_bytes: list = doc("each id's token's bytes, as hex")
    special_ids: list = doc("the distinct special ids among them, sorted")


@dataclass(frozen=True)
class Continuation(Reply, Tokenized):
    """A plain-text continuation (complete, and a text job's done): the text's tokens (Tokenized's
    fields), what the model wrote after them (Reply's fields), and eos_id."""
    eos_id: int = doc("the end-of-turn id")


@dataclass(frozen=True)
class Branched(Reply):
    """A branch's answer (a branch job's done, and `python -m chatlens branch`'s output): the branch
    as a reply, with a Reply's fields as the turn's record would hold it (reply_ids is the reply's
    first `step` ids, then `id`, then the ids the model chose after it, the end-of-turn id included
    when written), and where it parted from the reply it branched from. Kept, it is the turn's
    reply (chatlens.record.TurnRecord.with_branch)."""
    top_k: list | None = doc("one row per reply id: the step's K best [id, logit, probability], best first; the "
                             "reply's own up to the step replaced (that step included: the same ids were read "
                             "there), from the request's reply_top_k (a row null where it was not given), then the "
                             "branch's own. Null unless candidates were asked for (top_k)")
    reused_tokens: int = doc("tokens the cache held already: the prompt and branched_from[:step] when the reply is the "
                             "cache's")
    computed_tokens: int = doc("tokens read before the branch's first own choice (1, the id taken, when the reply "
                               "was the cache's)")
    backend: str | None = doc("what computed it (null: nothing needed computing, the id ended the branch)")
    prompt_ids: list = doc("the prompt's ids, as the turn's record has them")
    step: int = doc("the step whose choice was replaced")
    id: int = doc("the id taken there")
    branched_from: list = doc("the reply it branched from (the turn's reply_ids)")


@dataclass(frozen=True)
class AttentionFigures:
    """What the page draws of an inspection's attention for one choice of layers (every layer's
    heads, or one layer's), computed once in Python (chatlens.inspection.figures): the page
    selects among them and draws. Positions count from 0, layers and heads too."""
    layer: int | None = doc("the layer whose heads are averaged (null: every layer's)")
    mean: list = doc("each position's weight averaged over those heads (0..position): the tint; mean[0] is what "
                     "the first token holds")
    shares: list = doc("[{kind, label, start, end, share}]: that mean weight summed over each piece of the prompt, "
                       "then the reply so far (as by_piece)")
    shares_skip_first: list = doc("the same with the first token left out, the shares taken of the rest")
    top: list = doc("[[position, weight], ...]: the 10 positions with the most of that mean weight, most first")
    top_skip_first: list = doc("the same with the first token left out")
    look_back: list = doc("[{layer, head, weight, reach, distance, reads, rests}]: the 6 heads (of those layers) "
                          "whose weight lies furthest back, of those that do not rest it on a wordless token "
                          "(chatlens.inspection.reaches)")
    parked: list = doc("the same for the heads that rest at least half that weight on one token holding no word "
                       "(a space, punctuation, a special token), ranked apart")


@dataclass(frozen=True)
class Inspected:
    """An inspection's answer (an inspect job's done, and `python -m chatlens inspect`'s output):
    chatlens.inspection.Inspection's figures for the step, placed on the turn's prompt. Layers and
    heads are counted from 0."""
    prompt_ids: list = doc("the prompt's ids, as the turn's record has them")
    reply_ids: list = doc("the reply so far")
    step: int = doc("the step inspected: the one that chose reply id `step`")
    position: int = doc("where its query sits: len(prompt_ids) + step - 1")
    query_id: int = doc("the token at that position, whose step this is")
    chosen_id: int = doc("the id the last layer makes most likely: the one greedy decoding writes there")
    attention: list = doc("attention[layer][head]: the query's weights over positions 0..position, each row "
                          "summing to 1")
    by_piece: list = doc("[{kind, label, start, end, share}]: the mean weight (all layers and heads) on each piece "
                         "of the prompt, then on the reply so far (kind \"reply\")")
    lens: list = doc("lens[layer]: the residual stream after that block through the final norm and the output "
                     "layer, its top K [id, probability], best first; the last layer's is the step's own")
    lens_tokens: list = doc("lens_tokens[layer]: the same candidates' tokens as text (as top_k_tokens writes them)")
    every_layer: AttentionFigures = doc("the figures the page draws of the attention, every layer's heads averaged")
    each_layer: list = doc("each_layer[layer]: the same figures for one layer's heads (AttentionFigures)")
    settles: int | None = doc("the first layer from which chosen_id is every later layer's first choice in the lens "
                              "(null: the last layer's first choice is another id)")
    recent: int = doc("the last positions left out of a head's reach (look_back): the query's own and the ones just "
                      "before it (chatlens.inspection.RECENT)")
    strongest_heads: list = doc("[{kind, label, layer, head, position, weight}]: for each piece of by_piece, the "
                                "single head that put the most weight on one of its positions that holds a word (the "
                                "first token, spaces, punctuation and special tokens left out)")
    reused_tokens: int = doc("tokens the cache held already before the position")
    computed_tokens: int = doc("tokens read now: those the cache lacked before the position, and the query")
    backend: str = doc("what computed it")
    note: str | None = doc("a sentence when the inspection read more than one token (the cache lacked part of "
                           "what comes before the step), null otherwise", None)


@dataclass(frozen=True)
class Measure:
    """The step under one counterfactual (chatlens.cause): the chosen id's probability, the best id."""
    p: float = doc("the chosen id's probability at the step")
    top_id: int = doc("the id it would choose instead (the chosen one, when it still leads)")
    top_token: str = doc("that id's token as text")
    top_p: float = doc("its probability")
    reply_logprob: float = doc("the log-probability of the reply so far: reply_ids[:step], then the chosen id, each "
                               "token's in one pass")
    prompt_ids: list | None = doc("a removal's: the prompt rendered without the piece (a dropped turn: with it put "
                                  "back); null for a knockout", None)
    what: str | None = doc("a removal's: what stands in the piece's place, in a sentence; null for a knockout", None)
    tokens: list | None = doc("when asked (a Cause's tokens): each reply position's {p, top_id, top_token, top_p} "
                              "under it, from the reply's first token to the step's (its last)", None)


@dataclass(frozen=True)
class CausePiece:
    """One piece of the turn, taken away both ways."""
    name: str = doc("\"kind:index\", as a request names it")
    kind: str = doc("the record's piece kind (system, default_system, user, assistant, new, header, text), or "
                    "\"dropped\" for a turn the window dropped")
    label: str = doc("the piece as the record labels it")
    start: int | None = doc("its first token's position in the prompt (null: a dropped turn, never read)")
    end: int | None = doc("the position after its last token")
    attention_share: float | None = doc("the step's mean attention weight on it, every layer and head, the first "
                                        "token left out (the inspection's shares_skip_first); null for a dropped "
                                        "turn")
    knocked: Measure | None = doc("the reply's positions may not read it, in any layer (null: see knocked_why)")
    removed: Measure | None = doc("the turn rendered without it (a dropped turn: with it put back); null: see "
                                  "removed_why")
    knocked_why: str | None = doc("why it cannot be knocked out, in a sentence; null when it was")
    removed_why: str | None = doc("why it cannot be removed, in a sentence; null when it was")
    spans: list = doc("[[start, end], ...]: every run of its tokens in the prompt (a group's are several); [] for a "
                      "dropped turn", factory=list)
    count: int = doc("its tokens in the prompt; a dropped turn's, the whole turn's (its messages together, as "
                     "its label says) put back", 0)
    messages: list = doc("the conversation's messages it holds, their indexes in `messages` ([] for the template's "
                         "own pieces: its default system prompt, the header; and a system prompt given apart)",
                         factory=list)


@dataclass(frozen=True)
class Caused:
    """A cause's answer (a cause job's done, and `python -m chatlens cause`'s output): the step with
    every piece read, then each piece knocked out and removed (chatlens.cause)."""
    prompt_ids: list = doc("the prompt's ids, as the turn's record has them")
    reply_ids: list = doc("the reply so far")
    step: int = doc("the step measured: the one that chose reply id `step`")
    position: int = doc("where its query sits: len(prompt_ids) + step - 1")
    chosen_id: int = doc("the id whose probability is measured: reply id `step` (at step len(reply_ids): the id the "
                         "model makes most likely)")
    chosen_token: str = doc("its token as text")
    p: float = doc("its probability with every piece read")
    top_id: int = doc("the best id with every piece read")
    top_p: float = doc("its probability")
    reply_logprob: float = doc("the log-probability of reply_ids[:step] then the chosen id, every piece read")
    pieces: list = doc("CausePiece objects, in the record's order, then the groups, then dropped turns")
    reused_tokens: int = doc("tokens the cache held before the position when it began")
    computed_tokens: int = doc("every token run through: the step's own, then each counterfactual's")
    backend: str = doc("what computed it")
    tokens: list | None = doc("when asked: each reply position's {p, top_id, top_token, top_p} with every piece "
                              "read, from 0 to the step", None)


@dataclass(frozen=True)
class NeededTurn:
    """One reply of the conversation, each piece it read taken away (a Caused at its last step)."""
    turn: int = doc("its place among the conversation's replies, from 0")
    message_index: int = doc("its assistant message's index in the messages")
    prompt_ids: list = doc("what the model read before it: its turn's prompt, trimmed to the window")
    reply_ids: list = doc("the reply's ids")
    reply_tokens: list = doc("each id's token as text")
    reply_logprob: float = doc("the log-probability of the whole reply, every piece read")
    tokens: list | None = doc("when asked: each reply token's {p, top_id, top_token, top_p}, every piece read", None)
    pieces: list = doc("CausePiece objects: removed, and knocked out when asked (null with knocked_why when not); "
                       "the record's order, then the groups, then dropped turns; attention_share is the step's that "
                       "wrote the reply's last token", factory=list)


@dataclass(frozen=True)
class Needed:
    """A needs answer (a needs job's done, and `python -m chatlens needs`'s output)."""
    turns: list = doc("NeededTurn objects, one a reply, in the conversation's order")
    knocked: bool = doc("whether the pieces were knocked out too")
    reused_tokens: int = doc("tokens the cache held of the first turn's prompt when it began")
    computed_tokens: int = doc("every token run through, every turn's")
    backend: str = doc("what computed it")


@dataclass(frozen=True)
class Prediction:
    """predict's answer (and a predict job's done): the reply's likely first tokens; the cache is left as it was."""
    top_k: list = doc("rows: the first step's K best [id, logit, probability], best first")
    top_k_tokens: list = doc("their tokens as text")
    top_k_bytes: list = doc("their bytes, as hex")
    used: int = doc("the prompt's tokens")
    reused_tokens: int = doc("of them, tokens the cache held already")
    backend: str = doc("what computed it")


@dataclass(frozen=True)
class Counted:
    """A count job's done: WindowError's data for the system prompt and the new message, counted exactly."""
    needed: int = doc("tokens they need")
    window: int = doc("the window")
    reserve: int = doc("tokens kept free for the reply")
    at_least: bool = doc("false: exact (a preview's bound says true)")
    pieces: list = doc("[{label, count, ...}]: what needs the tokens")
    message: str = doc("the sentence a WindowError would say")
    context: int = doc("the model's whole context")


@dataclass(frozen=True)
class Stopped:
    """A job's done when it was stopped before it had an answer of its own (a count)."""
    stopped: bool = doc("true", True)


@dataclass(frozen=True)
class ComparePrompt:
    """What both models of a comparison read (chatlens.compare.prompts)."""
    text: str = doc("the message")
    plain_ids: list = doc("the message's ids as plain text, nothing added")
    plain_tokens: list = doc("their tokens as text")
    template_text: str = doc("the message inside the instruct model's chat template, as text")
    template_ids: list = doc("its ids")
    template_tokens: list = doc("their tokens as text")
    special_ids: list = doc("the distinct special ids in either, sorted")


@dataclass(frozen=True)
class Compared:
    """A compare job's done (chatlens.compare.Plan.answer): the prompt, and the four replies, each a
    Reply (top_k: each step's candidates; a reply a stop kept from starting has no ids, stop_reason
    "stopped" and no backend)."""
    prompt: ComparePrompt = doc("what both models read")
    instruct: dict = doc("{plain, template}: the instruct model's replies")
    base: dict = doc("{plain, template}: the base model's replies")
    max_tokens: int = doc("the cap each reply had")
    top_k: int = doc("K")
    eos_id: int = doc("the instruct model's end of turn, where every reply stops")


@dataclass(frozen=True)
class Token:
    """A reply id as a step chose it (a PullAnswer's tokens, the page's token event)."""
    id: int = doc("the token id (-1: no id, only text ending a character the last ids left split)")
    text: str = doc("what it adds to the reply, decoded incrementally so no character is ever split")
    token: str = doc("the id's token as text, as the record's reply_tokens writes it")
    bytes: str = doc("its bytes, as hex, as reply_bytes writes them")


@dataclass(frozen=True)
class CellToken(Token):
    """A compare job's token: a Token's fields, and the reply it belongs to."""
    model: str = doc("instruct or base")
    layout: str = doc("plain or template")


@dataclass(frozen=True)
class CellEnd:
    """One of the comparison's replies ended (a compare job's PullAnswer, the page's cell_end event)."""
    model: str = doc("instruct or base")
    layout: str = doc("plain or template")
    stop_reason: str = doc('"end_turn" (it wrote the instruct model\'s end of turn) or "max_tokens" (the cap)')


@dataclass(frozen=True)
class GpuRun:
    """A GPU run the page submits (chatlens.gpu.backend.Run's to_json)."""
    sequences: list = doc("the program's sequences to dispatch, in order")
    params: list = doc("the step buffer's u32 words")
    readback: str | None = doc("what the run reads back, or null")
    tokens: int = doc("the number of ids it feeds")
    chooses: bool = doc("whether it ends with an id chosen")


@dataclass(frozen=True)
class Stage:
    """How far a cause (or a conversation's needs) is, in the units a learner can follow."""
    done: int = doc("passes done (one a measure a piece; 0 of 0 while the step itself is read)")
    of: int = doc("of all the passes of the turn under way")
    turn: int | None = doc("a needs job: the turn under way, from 0 (null for a cause)", None)
    turns: int | None = doc("a needs job: the turns measured (null for a cause)", None)


@dataclass(frozen=True)
class PullAnswer:
    """start's, step's and stop's answer: where the job is."""
    tokens: list = doc("Token objects (a compare job's: CellToken objects): the ids this step chose (a reply), in "
                       "order; [] for a count")
    runs: list = doc("GpuRun objects to submit now, in order; the page gives each one's bytes to a step, oldest "
                     "first (Python's Pull books the runs in flight)")
    read: int = doc("the prompt read so far: tokens (a reply), characters (a count)")
    of: int = doc("all of it, in the same unit")
    in_flight: int = doc("runs submitted whose bytes are not given yet")
    record: TurnRecord | None = doc("a chat job's start only: the TurnRecord the reply will fill, as a preview "
                                    "answers it, before any step; null otherwise", None)
    done: object = doc("null, or the job's answer once it has ended: the type its class declares "
                       "(chatlens.jobs.KINDS: a TurnRecord for run, Counted for count, ...); Stopped when a job "
                       "that writes no reply was stopped", None)
    prompt: ComparePrompt | None = doc("a compare job's start only: what both models read, before any step; "
                                       "null otherwise", None)
    model: str = doc("the model whose backend computes the runs (a compare job: the current reply's; its tokens "
                     "also carry their model and layout)", "instruct")
    cell: int | None = doc("a compare job: the reply under way (0 to 3, in Compared's order); runs of an earlier "
                           "one still in flight are not needed; null otherwise", None)
    ended: list = doc("a compare job: a CellEnd for each reply that ended in this step, in order (its candidates come "
                      "with the answer); [] otherwise", factory=list)
    doing: str | None = doc("a cause job: what it computes now, in words (\"system knocked out\"); null otherwise",
                            None)
    stage: Stage | None = doc("a cause or needs job: how far it is, in passes (and turns); null otherwise", None)


@dataclass(frozen=True)
class Rendered:
    """render's answer: a chat template rendered as transformers' apply_chat_template renders it."""
    text: str = doc("the rendered text")
    ids: list = doc("its token ids")
    tokens: list = doc("each id's token as text")
    vocab: list = doc("each id's token as the vocabulary writes it")
    bytes: list = doc("each id's token's bytes, as hex")
    special_ids: list = doc("the distinct special ids among them, sorted")
    assistant_mask: list | None = doc("only when asked: 1 for each token inside {% generation %}, else 0", None)


@dataclass(frozen=True)
class TemplateInfo:
    """chat_template's answer: the model's chat template."""
    source: str = doc("its Jinja source")
    names: list | None = doc("its named templates, or null")
    special_tokens: dict = doc("the special tokens it reads (bos_token, eos_token, ...)")


@dataclass(frozen=True)
class LabSource:
    """lab_source's answer: the lab's hand-written Python (chatlens/by_hand.py)."""
    name: str = doc("the file's name")
    source: str = doc("its text")


@dataclass(frozen=True)
class PythonRun:
    """run_python's answer (chatlens.usercode.run_code)."""
    stdout: str = doc("what it printed")
    stderr: str = doc("what it wrote to stderr")
    error: dict | None = doc("{name, message, line?}, or null")
    timed_out: bool = doc("whether it ran past its limit")
    seconds: float = doc("how long it ran")
    results: dict = doc("the names asked for that hold plain data")


@dataclass(frozen=True)
class GpuProgramAnswer:
    """The GPU program: chatlens.gpu.program's plain data (a dict, the one answer that is not an
    instance of its class: the program is data the browser's executor reads as it is)."""
