"""Which turn each reply needed (chatlens.needs, start kind "needs", `python -m chatlens needs`), and
every reply token under each measure (a cause's `tokens`).

A matrix row is the cause on that turn's whole reply: the same figures `cause` gives at the
reply's last step (held here on the tiny model through the page's worker); the groups and pairs
render what apply_chat_template renders without them; every reply token's probability under a
knockout, a removal and a group equals transformers' on the real model (NumPy here, the GPU in
tests/test_cause.py); bad input is a sentence.
"""

import json

import pytest

from chatlens import contract, protocol, worker
from chatlens.errors import ChatlensError, WindowError
from chatlens.source import load_model
from test_cause import PIRATE, assert_measure, every_piece, hf_chat, hf_ids, hf_logprobs, hf_measure  # noqa: F401
from tiny_model import write_tiny_model

CONVERSATION = [{"role": "user", "content": "Hi! My name is Priya."},
                {"role": "assistant", "content": "Hello, Priya! How can I help you today?"},
                {"role": "user", "content": "Give me one tip for sleeping better."},
                {"role": "assistant", "content": "Go to bed at the same time every day."},
                {"role": "user", "content": "What is my name?"}]
WINDOW = 256


@pytest.fixture(scope="module")
def tiny(hf_dir, tmp_path_factory):
    return load_model(write_tiny_model(tmp_path_factory.mktemp("tiny-needs") / "model", hf_dir))


def call(name, args):
    return worker.HANDLERS[name](protocol.parse(protocol.REQUESTS[name][0], args))


def finished(kind, args, answers=None):
    """A job pulled to its end as the page's worker pulls it (NumPy: each step computed in `step`)."""
    out = call("start", {"kind": kind, "args": args})
    while out.done is None:
        if answers is not None:
            answers.append(out)
        out = call("step", {})
    return out.done


@pytest.fixture()
def conversation(tiny):
    """Three turns on the tiny model, each reply the model's own: (messages, each turn's record)."""
    call("load", {"path": str(tiny.path)})
    call("use_numpy", {})
    messages, records = [], []
    for text in ("Hi! My name is Priya.", "Give me one tip.", "What is my name?"):
        messages.append({"role": "user", "content": text})
        record = call("run", {"messages": messages, "window": WINDOW, "max_tokens": 6})
        records.append(record)
        messages.append({"role": "assistant", "content": record.reply_text})
    return messages, records


def test_a_row_is_the_cause_on_that_turn_s_whole_reply(conversation):
    messages, records = conversation
    replies = [r.reply_ids for r in records]
    answers = []
    got = finished("needs", {"messages": messages, "window": WINDOW, "max_tokens": 6, "replies": replies,
                             "knocked": True, "tokens": True}, answers)
    assert isinstance(got, contract.Needed) and got.knocked and got.backend == "numpy"
    assert [t.turn for t in got.turns] == [0, 1, 2] and [t.message_index for t in got.turns] == [1, 3, 5]
    for t, record in zip(got.turns, records):
        assert t.prompt_ids == record.prompt_ids and t.reply_ids == record.reply_ids
        assert [p.messages for p in t.pieces if p.kind == "new"] == [[t.message_index - 1]]
        assert all(set(row) == {"p", "top_id", "top_token", "top_p"} for row in t.tokens)
        asked = messages[:t.message_index]
        want = finished("cause", {"messages": asked, "window": WINDOW, "max_tokens": 6, "reply_ids": record.reply_ids,
                                  "step": len(record.reply_ids) - 1, "tokens": True})
        # equal up to float32 rounding: NumPy batches each job's passes, so products run over other rows
        assert t.reply_logprob == pytest.approx(want.reply_logprob, rel=1e-5, abs=1e-5)
        assert [p["p"] for p in t.tokens] == pytest.approx([p["p"] for p in want.tokens], abs=1e-5)
        assert [p.name for p in t.pieces] == [p.name for p in want.pieces]
        for ours, theirs in zip(t.pieces, want.pieces):
            for what in ("knocked", "removed"):
                a, b = getattr(ours, what), getattr(theirs, what)
                assert (a is None) == (b is None), (ours.name, what)
                if a is not None:
                    assert a.reply_logprob == pytest.approx(b.reply_logprob, rel=1e-5, abs=1e-5), (ours.name, what)
                    assert len(a.tokens) == len(record.reply_ids)
    # the last turn reads two kept turns: the groups are pieces too
    names = [p.name for p in got.turns[2].pieces]
    assert names[-2:] == ["replies:0", "history:0"]
    # progress turn by turn, pass by pass, in words
    stages = [(a.stage.turn, a.stage.turns) for a in answers if a.stage is not None]
    assert stages[0] == (0, 3) and stages[-1][0] == 2
    assert any(a.doing and a.doing.startswith("reply 3 of 3: the assistant's earlier replies") for a in answers)


def test_replies_this_worker_wrote_with_their_candidates_spare_each_row_a_pass(tiny):
    """The page asks each reply's candidates (top_k): the worker keeps them, and a row whose turn it
    wrote after the same prompt reads its figures with every piece read from them."""
    def matrix(top_k):
        call("use_numpy", {})  # a new backend: nothing it wrote yet, an empty cache
        messages, records = [], []
        for text in ("Hi! My name is Priya.", "Give me one tip.", "What is my name?"):
            messages.append({"role": "user", "content": text})
            records.append(call("run", {"messages": messages, "window": WINDOW, "max_tokens": 6, "top_k": top_k}))
            messages.append({"role": "assistant", "content": records[-1].reply_text})
        return records, finished("needs", {"messages": messages, "window": WINDOW, "max_tokens": 6,
                                           "replies": [r.reply_ids for r in records]})

    call("load", {"path": str(tiny.path)})
    records, computed = matrix(0)
    _, read = matrix(10)
    assert read.computed_tokens == computed.computed_tokens - sum(len(r.reply_ids) for r in records)
    for ours, theirs in zip(read.turns, computed.turns):  # up to float32 rounding: batched apart
        assert ours.reply_logprob == pytest.approx(theirs.reply_logprob, rel=1e-5, abs=1e-5)
        assert [p.removed and p.removed.reply_logprob for p in ours.pieces] == pytest.approx(
            [p.removed and p.removed.reply_logprob for p in theirs.pieces], rel=1e-5, abs=1e-5)


def test_without_replies_each_message_is_read_as_the_template_writes_it(conversation, tiny):
    messages, records = conversation
    got = finished("needs", {"messages": messages, "window": WINDOW, "max_tokens": 6})
    assert not got.knocked
    for t in got.turns:
        assert t.reply_ids[-1] == tiny.eos_id
        assert tiny.tokenizer.decode(t.reply_ids[:-1]) == messages[t.message_index]["content"]
        assert all(p.knocked is None and p.knocked_why for p in t.pieces)  # not asked
    # some replies' ids given, the others (null) read as the template writes them
    mixed = finished("needs", {"messages": messages, "window": WINDOW, "max_tokens": 6,
                               "replies": [None, records[1].reply_ids, None]})
    assert [t.reply_ids for t in mixed.turns] == [got.turns[0].reply_ids, records[1].reply_ids, got.turns[2].reply_ids]


def test_groups_and_pairs_render_the_conversation_without_them(conversation, tiny, hf_chat):  # noqa: F811
    messages, records = conversation
    from chatlens.chat import preview
    from chatlens.pieces import turn_pieces

    asked = messages[:5]
    record = preview(tiny.tokenizer, tiny.template, system=None, messages=asked, window=WINDOW, reserve=6)
    got = {p.name: p for p in turn_pieces(tiny.tokenizer, tiny.template, record, asked,
                                          ["replies:0", "history:0", "user:0+assistant:1"])}
    # a pair's removal reads neither: each of these two takes its whole turn, as trimming drops it
    without = {"replies:0": [asked[0], asked[2], asked[4]], "history:0": [asked[4]],
               "user:0+assistant:1": [asked[4]]}
    for name, rest in without.items():
        assert list(got[name].removed_ids) == hf_ids(hf_chat, rest), name
    spans = {p["kind"] + str(p["message_index"]): (p["start"], p["end"]) for p in record.pieces}
    assert got["replies:0"].spans == (spans["assistant1"], spans["assistant3"])
    assert got["history:0"].spans == ((spans["user0"][0], spans["assistant3"][1]),)  # contiguous: joined
    assert got["user:0+assistant:1"].spans == (spans["user0"], spans["assistant3"])
    assert "earlier replies" in got["replies:0"].label and got["history:0"].removed_what.startswith("Every earlier")
    # which of the conversation's messages each holds: what a matrix's columns are keyed by
    assert (got["replies:0"].messages, got["history:0"].messages, got["user:0+assistant:1"].messages) == \
        ((1, 3), (0, 1, 2, 3), (0, 3))


def test_bad_input_is_a_sentence_and_computes_nothing(tiny):
    call("load", {"path": str(tiny.path)})
    call("use_numpy", {})
    base = {"window": WINDOW, "max_tokens": 6}
    for args, said in [({"messages": CONVERSATION[:1]}, "no reply to measure yet"),
                       ({"messages": CONVERSATION[1:2]}, "follows no user message"),
                       ({"messages": CONVERSATION[:4], "replies": [[5]]}, "replies holds 1 replies' ids"),
                       ({"messages": CONVERSATION[:4], "pieces": ["user:0+new:0"]}, "no message is left"),
                       ({"messages": CONVERSATION[:4], "pieces": ["system:7"]}, "no turn has a piece 'system:7'")]:
        with pytest.raises(ChatlensError, match=said):
            call("start", {"kind": "needs", "args": {**base, **args}})
    long = [{"role": "user", "content": "word " * 400}, {"role": "assistant", "content": "Yes."}]
    with pytest.raises(WindowError, match="the new message needs 406 tokens"):
        call("start", {"kind": "needs", "args": {"messages": long, "window": 128, "max_tokens": 6}})


def test_the_command_line_answers_what_the_page_does(conversation, tiny):
    from conftest import cli_in_process

    messages, records = conversation
    args = {"messages": messages, "window": WINDOW, "max_tokens": 6, "replies": [r.reply_ids for r in records]}
    want = finished("needs", args)
    done = cli_in_process("needs", "--piece", "user:0+assistant:0", stdin=json.dumps(args), model=tiny.path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    # the page reads a chunk a pull, the command line all at once: float32 rounding apart
    assert [t["reply_logprob"] for t in got["turns"]] == pytest.approx([t.reply_logprob for t in want.turns], rel=1e-5, abs=1e-5)
    assert "user:0+assistant:0" in [p["name"] for p in got["turns"][2]["pieces"]]
    assert "user:0+assistant:0" not in [p["name"] for p in got["turns"][0]["pieces"]]  # turn 1 has no such pieces


# -- the real model: every reply token under each measure, against transformers -------------------------
def hf_tokens(ref, prompt, reply, step, chosen, hidden=None):
    """transformers' probability of each reply position's target (the reply's ids, then `chosen`)."""
    import math

    ids = list(prompt) + list(reply[:step]) + [chosen]
    lp = hf_logprobs(ref, ids, hidden, len(prompt) - 1)
    return [math.exp(lp[r][ids[r + 1]]) for r in range(len(prompt) - 1, len(ids) - 1)]


@pytest.mark.slow
def test_every_reply_token_equals_transformers_on_the_real_model(model, reference, hf_chat):  # noqa: F811
    """Two turns on the real model, the second's whole reply: every token's probability with the
    assistant's earlier reply knocked out, the earlier turn removed, and every earlier turn removed
    (the matrix's cells), against transformers; the row's log-probabilities within 1e-2."""
    from chatlens.cache import PromptCache
    from chatlens.cause import Causing
    from test_cause import pulled, turn

    messages = [{"role": "user", "content": "Hi! My name is Priya."},
                {"role": "assistant", "content": "Hello, Priya! How can I help you today?"},
                {"role": "user", "content": "What is my name?"}]
    record, reply, cache = turn(model, messages, system=None, window=256, reserve=12, max_tokens=12)
    pieces = every_piece(model, record, messages, ["assistant:0", "user:0", "user:0+assistant:0"])
    step = len(reply) - 1
    got = pulled(Causing(cache, record.prompt_ids, reply, pieces, step=step))
    assert [t["p"] for t in got.tokens] == pytest.approx(hf_tokens(reference, record.prompt_ids, reply, step,
                                                                   reply[step]), abs=1e-3)
    for p in pieces:
        m = got.measures[p.name]
        knocked = hf_tokens(reference, record.prompt_ids, reply, step, reply[step], p.hidden)
        assert [t["p"] for t in m["knocked"]["tokens"]] == pytest.approx(knocked, abs=1e-3), p.name
        removed = hf_tokens(reference, p.removed_ids, reply, step, reply[step])
        assert [t["p"] for t in m["removed"]["tokens"]] == pytest.approx(removed, abs=1e-3), p.name
        assert_measure(m["removed"], hf_measure(reference, p.removed_ids, reply, step, reply[step]))
    assert list(pieces[0].removed_ids) == hf_ids(hf_chat, messages[2:])  # a kept turn goes whole
