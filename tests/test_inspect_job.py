"""An inspection as the page and the command line ask for it (chatlens.jobs.InspectJob, start kind
"inspect", `python -m chatlens inspect`): one step of a turn's reply, placed on the turn's
prompt. The computation itself is held to transformers in tests/test_inspection.py; here: the
step's position and chosen id, the reuse of the cache the reply left (and what it leaves for the
next reply), the shares by piece, bad input in a sentence, and the command line on the real
model with the lesson's pirate head.
"""

import json

import pytest

from chatlens import protocol, worker
from chatlens.errors import ChatlensError, WindowError
from chatlens.contract import AttentionFigures
from chatlens.inspection import by_piece, figures, settles, strongest_heads
from chatlens.source import load_model, load_text_side
from conftest import run_cli
from tiny_model import write_tiny_model

MESSAGES = [{"role": "user", "content": "Tell me about lighthouses."}]
TURN = {"messages": MESSAGES, "window": 256, "max_tokens": 6, "top_k": 3}


@pytest.fixture(scope="module")
def tiny(hf_dir, tmp_path_factory):
    return load_model(write_tiny_model(tmp_path_factory.mktemp("tiny-inspect") / "model", hf_dir))


def call(name, args):
    """A request to the page's worker module, read through the contract as `call` reads it."""
    return worker.HANDLERS[name](protocol.parse(protocol.REQUESTS[name][0], args))


def inspected(args):
    """An inspect job pulled to its end as the page's worker pulls it (NumPy: each step computed in `step`)."""
    out = call("start", {"kind": "inspect", "args": args})
    while out.done is None:
        assert out.tokens == []
        out = call("step", {})
    return out.done


@pytest.fixture()
def replied(tiny):
    call("load", {"path": str(tiny.path)})
    call("use_numpy", {})
    return call("run", TURN)


def test_a_step_of_the_reply_is_inspected_against_the_cache_the_reply_left(replied):
    record = replied
    got = inspected({**TURN, "reply_ids": record.reply_ids, "step": 2})
    assert got.position == len(record.prompt_ids) + 1 and got.query_id == record.reply_ids[1]
    assert got.chosen_id == record.reply_ids[2] == got.lens[-1][0][0]  # the step chose it
    assert (got.reused_tokens, got.computed_tokens, got.note) == (got.position, 1, None)  # one token read
    assert got.backend == "numpy" and got.prompt_ids == record.prompt_ids
    layers = len(got.attention)
    assert all(len(row) == got.position + 1 for heads in got.attention for row in heads) and len(got.lens) == layers
    assert got.by_piece == by_piece(got.attention, record.pieces)
    assert [p["kind"] for p in got.by_piece][-1] == "reply" and abs(sum(p["share"] for p in got.by_piece) - 1) < 1e-9
    # what the page draws comes computed, for every layer and each one (the page selects and draws)
    assert got.every_layer == AttentionFigures(**figures(got.attention, record.pieces))
    assert got.each_layer == [AttentionFigures(**figures(got.attention, record.pieces, layer=l)) for l in range(layers)]
    assert got.every_layer.shares == got.by_piece and got.settles == settles(got.lens, got.chosen_id)
    assert got.strongest_heads == strongest_heads(got.attention, record.pieces)
    # the reply after the step stays cached: the next turn reuses as much as it did before
    follow = {**TURN, "messages": MESSAGES + [{"role": "assistant", "content": record.reply_text},
                                              {"role": "user", "content": "And then?"}]}
    before = call("preview", follow).reused_tokens
    inspected({**TURN, "reply_ids": record.reply_ids, "step": 0})  # the first step too: the prompt's last token
    assert call("preview", follow).reused_tokens == before > len(record.prompt_ids)


def test_the_drafts_first_token_is_step_0_of_an_empty_reply(replied, tiny):
    draft = {**TURN, "messages": MESSAGES + [{"role": "assistant", "content": replied.reply_text},
                                             {"role": "user", "content": "Why?"}]}
    got = inspected({**draft, "reply_ids": [], "step": 0})
    record = call("preview", draft)
    assert got.position == len(record.prompt_ids) - 1 and got.reply_ids == []
    assert got.chosen_id == call("predict", draft).top_k[0][0]  # what the prediction says it writes first
    assert got.computed_tokens == got.position + 1 - got.reused_tokens > 1  # the new message was never read before
    assert got.note == (f"The model's cache held {got.reused_tokens} of the {got.position} tokens before this step, "
                        f"so the inspection read {got.computed_tokens} tokens, not one.")


def test_a_cache_that_lost_the_turn_reads_it_again_and_says_so(replied, tiny):
    fresh = worker._Worker()  # a new worker: nothing cached (a reload, a crashed worker)
    fresh.load(protocol.Load(path=str(tiny.path)))
    fresh.use_numpy(protocol.UseNumpy())
    out = fresh.start(protocol.Start(kind="inspect", args={**TURN, "reply_ids": replied.reply_ids, "step": 3}))
    while out.done is None:
        out = fresh.step(protocol.Step())
    got = out.done
    assert got.reused_tokens == 0 and got.computed_tokens == got.position + 1
    assert got.note.endswith(f"held 0 of the {got.position} tokens before this step, so the inspection read "
                             f"{got.position + 1} tokens, not one.")
    assert got.chosen_id == replied.reply_ids[3]


def test_the_comparisons_other_cells_and_plain_text_are_inspected_as_they_were_read(replied, tiny, hf_dir, tmp_path):
    """model "base" computes with the base (load_base), layout "plain" reads the last message's
    text with no template: each the same figures as chatlens.inspection.inspect on the ids the
    comparison's cell read, on that cell's model."""
    import numpy as np

    from chatlens.cache import PromptCache
    from chatlens.inspection import Inspecting
    from chatlens.pull import greedy

    text = "Once upon a time"
    base = load_model(write_tiny_model(tmp_path / "base", hf_dir, seed=1))
    call("load_base", {"path": str(base.path)})
    call("use_numpy", {"model": "base"})
    out = call("start", {"kind": "compare", "args": {"text": text, "max_tokens": 4, "top_k": 0}})
    while out.done is None:
        out = call("step", {})
    compared = out.done
    prompt = compared.prompt
    for model, layout, ids in [("base", "plain", prompt.plain_ids), ("base", "template", prompt.template_ids),
                               ("instruct", "plain", prompt.plain_ids)]:
        cell = getattr(compared, model)[layout]
        args = {"messages": [{"role": "user", "content": text}], "window": 256, "model": model, "layout": layout}
        got = inspected({**args, "reply_ids": cell.reply_ids, "step": 2})
        want = greedy(Inspecting(PromptCache((base if model == "base" else tiny).backend(64)), ids + cell.reply_ids[:2],
                                 len(ids) + 1))
        assert got.prompt_ids == ids and got.chosen_id == cell.reply_ids[2] == want.chosen_id, (model, layout)
        np.testing.assert_allclose(got.attention, want.attention, rtol=0, atol=1e-6)
        assert got.lens == want.lens
        assert call("start", {"kind": "inspect", "args": {**args, "reply_ids": [], "step": 0}}).model == model  # runs go to it
        kinds = [p["kind"] for p in got.by_piece]
        assert kinds == (["text", "reply"] if layout == "plain" else kinds) and kinds[0] != "reply"
    with pytest.raises(ChatlensError, match="the model must be one of instruct, base, not 'other'"):
        call("start", {"kind": "inspect", "args": {**args, "reply_ids": [], "model": "other"}})
    with pytest.raises(ChatlensError, match="the layout must be one of plain, template, not 'chat'"):
        call("start", {"kind": "inspect", "args": {**args, "reply_ids": [], "layout": "chat"}})


def test_the_command_line_inspects_a_comparison_cell_as_the_comparison_wrote_it(tiny, hf_dir, tmp_path):
    """`inspect --layout plain --base-model PATH` with no reply_ids: the cell's reply computed first
    (the comparison's, to the instruct model's end of turn), then its step, on the base's weights."""
    import numpy as np

    from chatlens.cache import PromptCache
    from chatlens.host.compare import compared
    from chatlens.inspection import Inspecting
    from chatlens.pull import greedy
    from conftest import cli_in_process

    text = "Once upon a time"
    folder = write_tiny_model(tmp_path / "base", hf_dir, seed=1)
    want = compared(tiny, load_model(folder), text, max_tokens=4, top_k=0)
    cell, ids = want.base["plain"], want.prompt.plain_ids
    done = cli_in_process("inspect", "--layout", "plain", "--base-model", str(folder), "--max-tokens", "4", "--step", "2",
                          stdin=json.dumps({"messages": [{"role": "user", "content": text}]}), model=tiny.path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["prompt_ids"] == ids and got["reply_ids"] == cell.reply_ids and got["chosen_id"] == cell.reply_ids[2]
    step = greedy(Inspecting(PromptCache(load_model(folder).backend(64)), ids + cell.reply_ids[:2], len(ids) + 1))
    np.testing.assert_allclose(got["attention"], step.attention, rtol=0, atol=1e-6)
    assert [p["kind"] for p in got["by_piece"]] == ["text", "reply"]


def test_bad_input_is_a_sentence(replied):
    args = {**TURN, "reply_ids": replied.reply_ids}
    for bad, error, said in [({"step": 7}, ChatlensError, "step 7 is out of range: the reply has 6 tokens, so steps 0 to 6"),
                             ({"step": -1}, ChatlensError, "step -1 is out of range"),
                             ({"reply_ids": None}, ChatlensError, "needs the reply so far"),
                             ({"reply_ids": [1, 2, 49152], "step": 3}, ChatlensError, "outside the vocabulary"),
                             ({"top_k": 0}, ChatlensError, "the logit lens lists 1 to 64 candidates"),
                             ({"messages": [{"role": "user", "content": "sleep " * 400}]}, WindowError, "alone need")]:
        with pytest.raises(error, match=said):
            call("start", {"kind": "inspect", "args": {**args, "step": 1, **bad}})


@pytest.mark.slow  # the real model, through the command line
def test_the_command_line_inspects_the_pirates_first_word_and_its_head_reads_pirate(gguf_path):
    """`inspect` on the lesson's Pirate turn: the first reply step, with the turn run first. Its
    query (the generation header's last token) equals the reply's first id in the last layer,
    and layer 23's head 4 (0-based; transformers measured 0.80 on the 4-bit copy) reads the system
    prompt's " pirate" more than anything else."""
    done = run_cli("inspect", "--preset", "pirate", "--max-tokens", "4", "--step", "0",
                   stdin=json.dumps({"messages": [{"role": "user", "content": "Who are you?"}]}), model=gguf_path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert set(got) >= {"prompt_ids", "reply_ids", "step", "position", "chosen_id", "attention", "by_piece", "lens"}
    assert got["position"] == len(got["prompt_ids"]) - 1 and got["chosen_id"] == got["reply_ids"][0]
    assert (got["reused_tokens"], got["computed_tokens"]) == (got["position"], 1)
    assert len(got["attention"]) == 30 and len(got["attention"][0]) == 9 and len(got["lens"]) == 30
    head = got["attention"][23][4]
    pirate = max(range(len(head)), key=head.__getitem__)
    tok = load_text_side(gguf_path).tokenizer
    assert tok.token_text(got["prompt_ids"][pirate]) == " pirate" and head[pirate] > 0.5
    assert got["by_piece"][0]["kind"] == "system"
    assert got["lens_tokens"] == [[tok.token_text(i) for i, _ in row] for row in got["lens"]]  # the lens spelled


@pytest.mark.slow  # the GPU runs on wgpu-py's device (lavapipe here)
def test_an_inspection_pulled_through_gpu_runs_equals_the_numpy_path(tiny, replied):
    """The page's way on the GPU (tests/test_worker_pull.py plays the worker's JavaScript): the
    inspect job's runs submitted, their bytes given back; the same figures as NumPy's."""
    import numpy as np

    from test_worker_pull import on_the_gpu, pulled

    args = {**TURN, "reply_ids": replied.reply_ids, "step": 2}
    want = inspected(args)
    executor = on_the_gpu(tiny.path)
    pulled(executor, TURN)  # the reply first: the GPU's cache then holds it
    got, tokens, _ = pulled(executor, args, kind="inspect")
    assert tokens == [] and got["chosen_id"] == want.chosen_id and got["position"] == want.position
    assert (got["reused_tokens"], got["computed_tokens"]) == (want.position, 1) and got["backend"].startswith("webgpu")
    np.testing.assert_allclose(got["attention"], want.attention, rtol=0, atol=1e-4)
    for ours, theirs in zip(got["lens"], want.lens):
        assert [i for i, _ in ours] == [i for i, _ in theirs]
        np.testing.assert_allclose([p for _, p in ours], [p for _, p in theirs], rtol=0, atol=1e-3)
