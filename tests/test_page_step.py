"""The page's requests for one step of a reply (site/js/page/step.mjs), made in Node exactly as the
page makes them and put on the wire by protocol.mjs's toWire, then read by chatlens.worker: they
must read the prompt the reply was written from, and a kept branch must be the record
TurnRecord.with_branch makes.

The recorded turns and the comparison's prompt need only the real model's text side; the steps
themselves run on the tiny random model (tests/tiny_model.py), whose weights do not matter here.
"""

import json
import subprocess
from dataclasses import fields

import pytest

from chatlens import compare, defaults, protocol, worker
from chatlens.chat import ChatSession
from chatlens.source import load_model, load_text_side
from conftest import ROOT
from tiny_model import write_tiny_model

SETTINGS = defaults.for_page()
RECORDED = json.loads((ROOT / "site" / "recorded.json").read_text())


def page(expression: str, **values):
    """What `expression` evaluates to in Node, with step.mjs's exports and protocol.mjs's toWire in
    scope and `values` bound by name (passed as JSON on stdin)."""
    script = ("const [step, {toWire}] = await Promise.all([import('./site/js/page/step.mjs'), import('./site/js/page/protocol.mjs')]);"
              "const chunks = []; for await (const c of process.stdin) chunks.push(c);"
              "const values = JSON.parse(Buffer.concat(chunks).toString());"
              f"const run = new Function('step', 'toWire', ...Object.keys(values), {json.dumps(f'return ({expression});')});"
              "process.stdout.write(JSON.stringify(run(step, toWire, ...Object.values(values))));")
    done = subprocess.run(["node", "--input-type=module", "-e", script], cwd=ROOT, input=json.dumps(values),
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def call(name, args):
    return worker.HANDLERS[name](protocol.parse(protocol.REQUESTS[name][0], args))


# The worker holds one model at a time: each test loads the one it reads (loading twice is cheap).
@pytest.fixture
def real_text(gguf_path):
    call("load", {"path": str(gguf_path)})
    return load_text_side(gguf_path)


def test_each_recorded_turn_s_request_reads_the_recorded_prompt(real_text):
    wires = page("recorded.conversations.map((c) => c.turns.map((_, k) => toWire('inspect', "
                 "step.inspectRequest(step.recordedRequest(recorded, c, k), c.turns[k].reply_ids, 0), settings)))",
                 recorded=RECORDED, settings=SETTINGS)
    assert len(wires) == len(RECORDED["conversations"]) == 12
    for conversation, turns in zip(RECORDED["conversations"], wires):
        for k, wire in enumerate(turns):
            want = conversation["turns"][k]
            turn = {f.name: wire[f.name] for f in fields(protocol.Turn) if f.name in wire}
            got = call("preview", turn)
            where = f"{conversation['preset']}, window {conversation['window']}, turn {k + 1}"
            assert got.prompt_ids == want["prompt_ids"], where
            assert got.max_tokens == want["max_tokens"] and wire["reply_ids"] == want["reply_ids"], where


def test_the_comparison_s_template_cell_reads_the_comparison_s_ids(real_text):
    text = "What is the capital of France?"
    prompt = protocol.to_json(compare.prompts(real_text.tokenizer, real_text.template, text))
    out = page("toWire('preview', step.compareCellRequest(prompt, {model: 'instruct', layout: 'template'}, settings, 8192).args, settings)",
               prompt=prompt, settings=SETTINGS)
    record = call("preview", out)
    assert record.prompt_ids == prompt["template_ids"]
    assert record.max_tokens == defaults.COMPARE_LIMIT and out["window"] in defaults.WINDOWS


@pytest.fixture(scope="module")
def tiny_model(hf_dir, tmp_path_factory):
    return load_model(write_tiny_model(tmp_path_factory.mktemp("tiny-page-step") / "model", hf_dir, seed=5))


@pytest.fixture
def tiny(tiny_model):
    call("load", {"path": str(tiny_model.path)})
    call("use_numpy", {})
    return tiny_model


TURN = {"messages": [{"role": "user", "content": "Tell me about lighthouses."}], "window": 256, "maxTokens": 6, "topK": 3}


def pulled(kind, args):
    out = call("start", {"kind": kind, "args": args})
    while out.done is None:
        out = call("step", {})
    return out.done


def test_an_inspection_asked_for_a_step_inspects_that_step(tiny):
    record = call("run", page("toWire('run', turn, settings)", turn=TURN, settings=SETTINGS))
    for step in (0, 3):
        wire = page("toWire('inspect', step.inspectRequest(turn, ids, n), settings)", turn=TURN, ids=record.reply_ids, n=step,
                    settings=SETTINGS)
        got = pulled("inspect", wire)
        assert got.position == len(record.prompt_ids) + step - 1
        assert got.chosen_id == record.reply_ids[step]
        assert len(got.lens[0]) == 5  # the lens's K, not the run's 3
    draft = page("toWire('inspect', step.draftRequest(turn), settings)", turn=TURN, settings=SETTINGS)
    got = pulled("inspect", draft)
    assert (got.position, got.chosen_id) == (len(record.prompt_ids) - 1, record.reply_ids[0])


def test_a_kept_branch_is_the_record_python_keeps(tiny):
    session = ChatSession(tiny, window=256, max_tokens=6)
    record = session.send(TURN["messages"][0]["content"], top_k=3)
    other = record.top_k[1][1][0]  # the second candidate at step 1
    branched = session.branch(1, other, top_k=3)
    want = session.keep().to_json()
    got = page("step.keptRecord(record, branched)", record=record.to_json(), branched=protocol.to_json(branched))
    assert got == want  # the branch's reply is built once, in Python: the page only keeps it
    assert got["top_k"][:2] == record.top_k[:2] and len(got["top_k"]) == len(got["reply_ids"])
