"""Which turn each reply needed: every assistant reply of a conversation, each piece it read taken away.

For a conversation, each assistant message is a reply to measure (a `Reply`): what the model read
before it (its turn's record, rendered and trimmed to the window as that turn was) and its ids
(the ids the turn's record holds when the page has them, else the message as the template writes
it, up to its end-of-turn token). Each reply is a cause at its last step (chatlens.cause: the
whole reply scored, every reply position), its pieces removed and, when asked, knocked out: the
system prompt, each earlier user and assistant message, its own message, the header, the groups
(the assistant's earlier replies, every earlier turn) and any dropped turn put back. A row of the
matrix is the cause on that turn's whole reply, the same figures `chatlens cause` gives.

The replies are measured in the conversation's order over one cache (`Needing`, a chain of
chatlens.cause.Causing): each cause leaves the cache holding its turn's prompt and reply, which
begin the next turn's prompt, so each turn's prompt is read once where the window kept it.

API (chatlens.jobs.NeedsJob; `python -m chatlens needs`):
    replies_of(record_of, tokenizer, template, request) -> [Reply]
    Needing(cache, replies, *, chunk=0, measures=("removed",)): the job (chatlens.pulled's
        protocol; result: a Cause a reply, in order)
Bad input (no reply yet, a reply that answers no user message, replies that do not match the
conversation's assistant messages) is a ChatlensError before anything is computed.
"""

from dataclasses import dataclass, replace

from .cause import Causing, cache_needed
from .errors import ChatlensError
from .pieces import turn_pieces
from .pulled import Chain
from .window import tokenize


@dataclass(frozen=True)
class Reply:
    """One assistant reply of the conversation, to measure: `turn` (its place among the replies,
    from 0), `message_index` (its message's), the record of what the model read before it, the
    messages that record was made from, its ids, the pieces its cause takes away, and its steps'
    candidates where the backend that measures it wrote it after that record's prompt (top_k,
    chatlens.cause.own_rows: its figures with every piece read, a pass fewer)."""
    turn: int
    message_index: int
    record: object
    messages: list
    reply_ids: list
    pieces: list
    top_k: list | None = None

    @property
    def cache(self) -> int:
        """The KV cache its cause needs."""
        return max(cache_needed(len(self.record.prompt_ids), self.pieces, len(self.reply_ids) - 1), self.record.window)


def written_ids(tokenizer, template, messages, index, eos_id, special_in_text=True) -> list:
    """The ids of assistant message `index` as the template writes it after its prompt, up to and
    including its end-of-turn token: what a later turn reads of it."""
    prompt = template.render(messages[:index], add_generation_prompt=True)
    whole = template.render(messages[:index + 1], add_generation_prompt=False)
    tail = whole[len(prompt):] if whole.startswith(prompt) else messages[index]["content"]
    ids = tokenize(tokenizer, tail, [messages[index]], special_in_text)
    if eos_id in ids:
        return ids[:ids.index(eos_id) + 1]
    return ids + [eos_id]


def replies_of(record_of, tokenizer, template, eos_id, request) -> list:
    """The replies of a Needs request (chatlens.contract.Needs): each assistant message, its turn's
    record (`record_of(request)`, as a turn reads the conversation up to it) and pieces. Raises
    ChatlensError with a sentence."""
    messages = list(request.messages)
    at = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]
    if not at:
        raise ChatlensError("there is no reply to measure yet: the conversation has no assistant message")
    given = request.replies
    if given is not None and len(given) != len(at):
        raise ChatlensError(f"replies holds {len(given)} replies' ids, but the conversation has {len(at)} assistant "
                            "messages: give one list of ids for each, in order")
    out = []
    names = request.pieces
    for turn, i in enumerate(at):
        if i == 0 or messages[i - 1].get("role") != "user":
            raise ChatlensError(f"message {i} (the assistant's) follows no user message: each reply measured answers "
                                "one")
        asked = messages[:i]
        record = record_of(replace(request, messages=asked))
        ids = [int(x) for x in given[turn]] if given is not None and given[turn] is not None else \
            written_ids(tokenizer, template, messages, i, eos_id, request.special_in_text)
        if not ids:
            raise ChatlensError(f"reply {turn + 1} has no ids to measure")
        pieces = turn_pieces(tokenizer, template, record, asked)
        if names is not None:
            pieces = _named(tokenizer, template, record, asked, names, pieces)
        out.append(Reply(turn, i, record, asked, ids, pieces))
    if names is not None:
        missing = [n for n in names if not any(n in {p.name for p in r.pieces} for r in out)]
        if missing:
            raise ChatlensError(f"no turn has a piece {missing[0]!r}")
    return out


def _named(tokenizer, template, record, messages, names, pieces):
    """Every piece of a turn and, of `names`, those of this turn not among them (two together,
    "a+b"); names the turn lacks are left out (another turn may have them)."""
    have = {p.name for p in pieces}
    extra = [n for n in names if n not in have and all(q in have for q in str(n).split("+"))]
    return pieces + (turn_pieces(tokenizer, template, record, messages, extra) if extra else [])


class Needing(Chain):
    """Each reply's cause, in order (see the module's docstring). result: a chatlens.cause.Cause a
    reply. `stage`: (passes done, of the turn's; the turn; of all turns)."""

    def __init__(self, cache, replies, *, chunk: int = 0, measures=("removed",)):
        self.replies, self.chunk, self.measures = list(replies), chunk, tuple(measures)
        self.causes = []
        need = max(r.cache for r in self.replies)
        if need > cache.capacity:
            raise ChatlensError(f"the conversation's counterfactuals need {need} tokens of KV cache; it holds "
                                f"{cache.capacity}")
        super().__init__(cache, self._cause(self.replies[0], cache))

    def _cause(self, r, cache=None):
        return Causing(cache or self.cache, r.record.prompt_ids, r.reply_ids, r.pieces, step=len(r.reply_ids) - 1,
                       chunk=self.chunk, measures=self.measures, reply_top_k=r.top_k)

    @property
    def stage(self) -> tuple:
        done, of = self.part.stage
        return done, of, len(self.causes), len(self.replies)

    @property
    def doing(self) -> str | None:
        if self.done:
            return None
        return f"reply {len(self.causes) + 1} of {len(self.replies)}: {self.part.doing}"

    def _after(self, part):
        self.causes.append(part.result)
        if len(self.causes) < len(self.replies):
            return self._cause(self.replies[len(self.causes)])
        self.result = self.causes
        return None
