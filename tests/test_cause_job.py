"""A cause as the page and the command line ask for it (chatlens.jobs.CauseJob, start kind "cause",
`python -m chatlens cause`): which piece of the turn one step of its reply needed. The figures
are held to transformers in tests/test_cause.py; here, on the tiny model: the pieces named and
placed, what a removal renders, the cache the reply left still reused afterwards, progress piece
by piece, a stop, and bad input in a sentence.
"""

import pytest

from chatlens import contract, protocol, worker
from chatlens.errors import ChatlensError
from chatlens.source import load_model
from tiny_model import write_tiny_model

HISTORY = [{"role": "user", "content": "Hi! My name is Priya."},
           {"role": "assistant", "content": "Hello, Priya! How can I help you today?"}]
MESSAGES = HISTORY + [{"role": "user", "content": "What is my name?"}]
TURN = {"messages": MESSAGES, "window": 256, "max_tokens": 5, "preset": "pirate"}


@pytest.fixture(scope="module")
def tiny(hf_dir, tmp_path_factory):
    return load_model(write_tiny_model(tmp_path_factory.mktemp("tiny-cause") / "model", hf_dir))


def call(name, args):
    return worker.HANDLERS[name](protocol.parse(protocol.REQUESTS[name][0], args))


def caused(args, answers=None):
    """A cause job pulled to its end as the page's worker pulls it (NumPy: each step computed in `step`)."""
    out = call("start", {"kind": "cause", "args": args})
    while out.done is None:
        if answers is not None:
            answers.append(out)
        out = call("step", {})
    return out.done


@pytest.fixture()
def replied(tiny, monkeypatch):
    # unpaced, as if every pass fitted one pull (the pace, chatlens.pace, is tests/test_pace.py's): NumPy's batch
    monkeypatch.setattr(worker, "PULL_MS", 0)
    call("load", {"path": str(tiny.path)})
    call("use_numpy", {})
    return call("run", TURN)


def test_every_piece_of_the_turn_is_knocked_out_and_removed(replied):
    record = replied
    answers = []
    got = caused({**TURN, "reply_ids": record.reply_ids, "step": 2}, answers)
    assert isinstance(got, contract.Caused)
    assert [p.name for p in got.pieces] == ["system:0", "user:0", "assistant:0", "new:0", "header:0"]
    assert [(p.start, p.end) for p in got.pieces] == [(q["start"], q["end"]) for q in record.pieces]
    assert got.chosen_id == record.reply_ids[2] and got.position == len(record.prompt_ids) + 1
    assert 0 < got.p <= 1 and got.reply_logprob < 0 and got.backend == "numpy"
    for p in got.pieces:
        assert p.knocked is not None and p.removed is not None and p.knocked_why is p.removed_why is None
        assert 0 < p.attention_share < 1
        assert p.knocked.prompt_ids is None and p.removed.prompt_ids != record.prompt_ids
    system, user, assistant = got.pieces[:3]
    assert "default system prompt" in system.removed.what
    assert user.removed == assistant.removed  # a kept turn goes whole: one removal, computed once
    # progress: tokens run through of all, and in words what is computed
    assert answers[-1].of == got.computed_tokens and [a.read for a in answers] == sorted(a.read for a in answers)
    doing = [a.doing for a in answers]
    # NumPy's batch: every whole pass that fits a pull's chunk; the default system prompt's removal,
    # longer, is read a chunk a pull
    assert "the step with every piece read, each piece knocked out, and each piece removed (9 passes at once)" in doing
    assert "system: removed" in doing


def test_the_next_turn_reuses_what_it_did_before(replied):
    record = replied
    follow = {**TURN, "messages": MESSAGES + [{"role": "assistant", "content": record.reply_text},
                                              {"role": "user", "content": "And then?"}]}
    before = call("preview", follow).reused_tokens
    caused({**TURN, "reply_ids": record.reply_ids, "step": 3, "pieces": ["system:0", "new:0"]})
    assert call("preview", follow).reused_tokens == before > len(record.prompt_ids)


def test_a_reply_this_worker_wrote_lends_its_candidates_to_a_cause_a_pass_fewer(replied):
    """The page asks each reply's candidates (top_k): the worker keeps them with the reply, and a
    cause of that reply by the same backend reads its figures with every piece read from them."""
    wrote = call("run", {**TURN, "top_k": 10})
    args = {**TURN, "reply_ids": wrote.reply_ids, "step": len(wrote.reply_ids) - 1, "tokens": True}
    read = caused(args)
    call("use_numpy", {})  # another backend: what the last one wrote is not its own
    again = call("run", TURN)  # the same reply, its candidates not asked
    assert again.reply_ids == wrote.reply_ids
    computed = caused(args)
    assert read.computed_tokens == computed.computed_tokens - len(wrote.reply_ids)  # the reply's positions, once
    for key in ("p", "top_p", "reply_logprob"):
        assert getattr(read, key) == pytest.approx(getattr(computed, key), rel=1e-5, abs=1e-5)
    assert [t["p"] for t in read.tokens] == pytest.approx([t["p"] for t in computed.tokens], abs=1e-5)
    for mine, theirs in zip(read.pieces, computed.pieces):  # the same passes, batched apart
        assert (mine.knocked.reply_logprob, mine.removed.reply_logprob) == pytest.approx(
            (theirs.knocked.reply_logprob, theirs.removed.reply_logprob), rel=1e-5, abs=1e-5)


def test_a_dropped_turn_is_put_back_and_the_default_system_prompt_kept(tiny):
    call("load", {"path": str(tiny.path)})
    call("use_numpy", {})
    turn = {"messages": MESSAGES, "window": 60, "max_tokens": 3, "reserve": 8}
    record = call("run", turn)
    assert [d["message_index"] for d in record.dropped_messages] == [0, 1]
    got = caused({**turn, "reply_ids": record.reply_ids, "step": 0})
    names = [p.name for p in got.pieces]
    assert names == ["default_system:0", "new:0", "header:0", "dropped:0"]
    default, dropped = got.pieces[0], got.pieces[-1]
    assert default.removed is None and "cannot be left out" in default.removed_why and default.knocked is not None
    assert dropped.knocked is None and "never read it" in dropped.knocked_why and dropped.attention_share is None
    assert dropped.removed.what.startswith("Put back") and len(dropped.removed.prompt_ids) > len(record.prompt_ids)
    # its count is the whole turn's, both messages, the figure its label gives (Look inside's line quotes it): the
    # tokens it adds put back, and the window's counts of its messages
    assert dropped.count == len(dropped.removed.prompt_ids) - len(record.prompt_ids)
    assert dropped.count == sum(d["count"] for d in record.dropped_messages) > record.dropped_messages[0]["count"]
    assert dropped.label == f"dropped turn 1 ({dropped.count} tokens)"


def test_plain_text_is_one_piece_that_cannot_be_taken_away(replied):
    got = caused({"messages": [{"role": "user", "content": "Lighthouses are"}], "layout": "plain",
                  "reply_ids": [], "step": 0})
    [text] = got.pieces
    assert text.name == "text:0" and text.removed is None and "nothing left to read" in text.removed_why
    assert text.knocked is not None  # its first token stays readable: the reply's positions read it alone


def test_a_stopped_cause_answers_stopped(replied):
    out = call("start", {"kind": "cause", "args": {**TURN, "reply_ids": replied.reply_ids, "step": 1}})
    out = call("step", {})
    assert call("stop", {}).done == contract.Stopped()


def test_bad_input_is_a_sentence(replied):
    args = {**TURN, "reply_ids": replied.reply_ids}
    for bad, said in [({"step": 9}, "step 9 is out of range: the reply has 5 tokens"),
                      ({"pieces": ["system:3"]}, r"there is no piece 'system:3': this turn's pieces are system:0, "
                                                 "user:0, assistant:0, new:0, header:0"),
                      ({"reply_ids": None}, "a cause needs the reply so far"),
                      ({"top_k": 3}, "unknown argument 'top_k'")]:
        with pytest.raises(ChatlensError, match=said):
            call("start", {"kind": "cause", "args": {**args, "step": 1, **bad}})
    alone = {"messages": MESSAGES[-1:], "reply_ids": [], "step": 0, "pieces": ["new:0"]}
    with pytest.raises(ChatlensError, match="no message is left"):
        call("start", {"kind": "cause", "args": alone})


def test_the_command_line_answers_what_the_page_does(replied, tiny):
    """`python -m chatlens cause` (in-process) on the page's request: the same Caused, pieces named by
    --piece or by stdin, the reply computed first when stdin gives none."""
    import json

    from conftest import cli_in_process

    args = {**TURN, "reply_ids": replied.reply_ids, "step": 2, "pieces": ["system:0", "header:0"]}
    want = contract.Caused(**{**protocol.to_json(caused(args)), "pieces": []})
    done = cli_in_process("cause", "--piece", "system:0", "--piece", "header:0", stdin=json.dumps({**TURN, "step": 2}),
                          model=tiny.path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["reply_ids"] == replied.reply_ids  # the turn's reply, computed first
    assert [p["name"] for p in got["pieces"]] == ["system:0", "header:0"]
    for key in ("chosen_id", "position", "top_id"):
        assert got[key] == getattr(want, key)
    assert got["p"] == pytest.approx(want.p, abs=1e-6)
    fixed = cli_in_process("cause", "--piece", "new:0", stdin=json.dumps({**args}), model=tiny.path)
    assert fixed.returncode == 1 and "--piece" in fixed.stderr and "disagree" in fixed.stderr


@pytest.mark.slow  # the GPU runs on wgpu-py's device (lavapipe here)
def test_a_cause_pulled_through_gpu_runs_equals_the_numpy_path(tiny, replied):
    """The page's way on the GPU (tests/test_worker_pull.py plays the worker's JavaScript): the
    cause job's runs submitted one at a time, their bytes given back; NumPy's figures, and the
    GPU's cache holding the turn again afterwards (its overwritten positions read again)."""
    from test_worker_pull import on_the_gpu, pulled

    args = {**TURN, "reply_ids": replied.reply_ids, "step": 2}
    want = caused(args)
    executor = on_the_gpu(tiny.path)
    pulled(executor, TURN)  # the reply first: the GPU's cache then holds it
    got, tokens, _ = pulled(executor, args, kind="cause")
    assert tokens == [] and got["chosen_id"] == want.chosen_id and got["backend"].startswith("webgpu")
    assert got["p"] == pytest.approx(want.p, abs=1e-4)
    for ours, theirs in zip(got["pieces"], want.pieces):
        for what in ("knocked", "removed"):
            assert ours[what]["p"] == pytest.approx(getattr(theirs, what).p, abs=1e-4)
            assert ours[what]["top_id"] == getattr(theirs, what).top_id
    assert got["computed_tokens"] > want.computed_tokens  # NumPy puts its cache back; the GPU reads it again
    follow = {**TURN, "messages": MESSAGES + [{"role": "assistant", "content": replied.reply_text},
                                              {"role": "user", "content": "And then?"}]}
    again, _, _ = pulled(executor, follow)
    assert again["reused_tokens"] > len(replied.prompt_ids)


def test_a_turn_put_back_longer_than_the_window_keeps_the_turn_cached(tiny):
    """The dropped turn put back needs more than the window's cache: NumPy's grows, and keeps the
    turn the next message reuses (a window's cache replaced would read it all again)."""
    call("load", {"path": str(tiny.path)})
    call("use_numpy", {})
    turn = {"messages": MESSAGES, "window": 60, "max_tokens": 3, "reserve": 8}
    record = call("run", turn)
    follow = {**turn, "messages": MESSAGES + [{"role": "assistant", "content": record.reply_text},
                                              {"role": "user", "content": "Sure?"}]}
    before = call("preview", follow).reused_tokens
    got = caused({**turn, "reply_ids": record.reply_ids, "step": 0, "pieces": ["dropped:0"]})
    assert len(got.pieces[0].removed.prompt_ids) + 1 > 60  # longer than the window's cache
    assert call("preview", follow).reused_tokens == before > 0
