"""The base model beside the instruct model on the same ids (chatlens.compare, `python -m chatlens
compare`).

The Hub, where SmolLM2-135M (the base model) is, cannot be reached here: the base model in these
tests is tests/standin_base.py's stand-in (the instruct model's export with seeded noise on every
matrix, a base model's tokenizer_config) or, for the quick tests, two tiny random models with the
real tokenizer. What is checked: both models read exactly `complete`'s and `run`'s ids; each cell
is the reply `complete` or `run` gives on the same weights; each reply is transformers' greedy
reply on the same weights (up to near-ties) and its first step's candidates are transformers'
probabilities within 1e-3; a base model with another tokenizer is refused in a sentence.
"""

import json
import types

import numpy as np
import pytest

from chatlens import defaults
from chatlens.cache import PromptCache
from chatlens.chat import ChatSession
from chatlens.compare import MODELS, LAYOUTS, TokenizerMismatchError, prompts
from chatlens.errors import ChatlensError, TemplateError
from chatlens.host.compare import compared as compare
from chatlens.jobs import TextJob
from chatlens.protocol import to_json
from chatlens.pull import greedy
from chatlens.source import load_model, load_text_side
from conftest import cli_in_process, load_once, run_cli
from standin_base import instruct_folder, mismatched_tokenizer, standin_base
from tiny_model import write_tiny_model

FRANCE = "What is the capital of France?"
GAP = defaults.NEAR_TIE_GAP  # greedy ids are compared up to the first step whose top-2 logits are closer
TOL = 1e-3
# Steps a reply must equal transformers' before its first near-tie, at least (a shorter reply:
# all of it): on these prompts (the stand-in base and the real instruct model, 8 steps each) none
# ties sooner.
MIN_STEPS = 4


# -- two tiny models with the real tokenizer: the instruct's files, and the stand-in base's ------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-compare")
    instruct = load_model(write_tiny_model(root / "instruct", instruct_folder(), seed=0))
    base = load_model(write_tiny_model(root / "base", standin_base(), seed=1))
    return instruct, base


def as_chat_model(model, instruct):
    """`model`'s weights read with the instruct model's template and end of turn: what `run`
    does on the base model in the comparison (the base model has no template of its own)."""
    return types.SimpleNamespace(tokenizer=instruct.tokenizer, template=instruct.template, eos_id=instruct.eos_id,
                                 config=model.config, backend=model.backend)


def test_both_models_read_the_ids_complete_and_run_read(tiny):
    instruct, base = tiny
    assert load_text_side(base.path).template.source is None  # a base model: no template of its own
    out = compare(instruct, base, FRANCE, max_tokens=2, top_k=3)
    p = out.prompt
    assert p.plain_ids == instruct.tokenizer.encode(FRANCE) == base.tokenizer.encode(FRANCE)
    session = ChatSession(instruct)
    assert p.template_ids == session.preview(FRANCE).prompt_ids  # what `run` reads, no preset
    assert p.template_text == instruct.template.render([{"role": "user", "content": FRANCE}],
                                                       add_generation_prompt=True)
    assert p.template_text.endswith("<|im_start|>assistant\n") and "You are a helpful AI assistant" in p.template_text
    assert p.plain_tokens == [instruct.tokenizer.token_text(i) for i in p.plain_ids]
    assert p.template_tokens == [instruct.tokenizer.token_text(i) for i in p.template_ids]
    assert set(p.special_ids) == {1, 2}  # <|im_start|> and <|im_end|>, drawn as chips
    assert p == prompts(instruct.tokenizer, instruct.template, FRANCE)


def test_each_cell_is_the_reply_complete_and_run_give(tiny):
    instruct, base = tiny
    out = compare(instruct, base, FRANCE, max_tokens=6, top_k=4)
    assert out.eos_id == instruct.eos_id == 2
    for key, model in zip(MODELS, tiny):
        plain = greedy(TextJob(instruct, PromptCache(model.backend(64)), FRANCE, max_tokens=6, top_k=4))
        cell = getattr(out, key)["plain"]
        assert cell.reply_ids == plain.reply_ids and cell.reply_text == plain.reply_text, key
        assert cell.stop_reason == plain.stop_reason and cell.top_k == plain.top_k, key
        assert cell.top_k_tokens == plain.top_k_tokens
        rec = ChatSession(as_chat_model(model, instruct), max_tokens=6).send(FRANCE, top_k=4)
        cell = getattr(out, key)["template"]
        assert cell.reply_ids == rec.reply_ids and cell.reply_text == rec.reply_text, key
        assert cell.stop_reason == rec.stop_reason and cell.top_k == rec.top_k, key
        for layout in LAYOUTS:
            c = getattr(out, key)[layout]
            assert len(c.top_k) == len(c.reply_ids)  # each step's candidates
            for step, chosen in zip(c.top_k, c.reply_ids):
                assert len(step) == 4 and step[0][0] == chosen
                assert abs(sum(row[2] for row in step)) <= 1 + 1e-6
                assert [r[2] for r in step] == sorted((r[2] for r in step), reverse=True)
    # the two tiny models differ, so their replies do
    assert out.instruct["template"].reply_ids != out.base["template"].reply_ids


def test_a_reply_runs_to_the_cap_unless_it_writes_the_end_of_turn(tiny):
    out = compare(*tiny, "Once upon a time", max_tokens=3, top_k=0)
    for key in MODELS:
        for layout in LAYOUTS:
            c = getattr(out, key)[layout]
            assert c.top_k is None
            if c.stop_reason == "max_tokens":
                assert len(c.reply_ids) == 3 and 2 not in c.reply_ids
            else:
                assert c.stop_reason == "end_turn" and c.reply_ids[-1] == 2
    assert defaults.COMPARE_LIMIT == 48  # the lesson: the lab stops the base model at 48 tokens


def test_tokens_stream_and_a_stop_ends_every_reply_after_it(tiny):
    seen = []
    out = compare(*tiny, FRANCE, max_tokens=5, top_k=2, on_token=seen.append, should_stop=lambda: len(seen) >= 7)
    done = [(k, layout) for k in MODELS for layout in LAYOUTS]
    streamed = {}
    for t in seen:
        streamed.setdefault((t.model, t.layout), []).append(t.id)
    assert list(streamed) == done[:len(streamed)]  # instruct plain, instruct template, base plain, base template
    for key, layout in done:
        assert getattr(out, key)[layout].reply_ids == streamed.get((key, layout), [])
    reasons = [getattr(out, k)[layout].stop_reason for k, layout in done]
    first_stop = reasons.index("stopped")
    assert all(r == "stopped" for r in reasons[first_stop:]) and len(seen) == 7
    never = to_json(getattr(out, done[-1][0])[done[-1][1]])  # a reply a stop kept from starting
    assert never == {"reply_ids": [], "reply_tokens": [], "reply_vocab": [], "reply_bytes": [], "reply_text": "",
                     "stop_reason": "stopped", "top_k": [], "top_k_tokens": [], "top_k_bytes": [],
                     "reused_tokens": 0, "computed_tokens": 0, "backend": None, "timings": None}


def test_a_base_model_with_another_tokenizer_is_refused(tiny, tmp_path):
    instruct, base = tiny
    bad = load_model(mismatched_tokenizer(tmp_path / "bad", folder=base.path))
    with pytest.raises(TokenizerMismatchError, match=r"\(its merges\).*exactly the same ids"):
        compare(instruct, bad, FRANCE, max_tokens=2)
    added = json.loads((base.path / "tokenizer.json").read_text())
    added["added_tokens"][3]["special"] = False  # one added token no longer special
    other = tmp_path / "added"
    mismatched_tokenizer(other, folder=base.path)
    (other / "tokenizer.json").write_text(json.dumps(added))
    with pytest.raises(TokenizerMismatchError, match="its added tokens"):
        compare(instruct, load_model(other), FRANCE, max_tokens=2)
    # the same command line refuses it before any weights load
    done = cli_in_process("compare", "--base-model", str(tmp_path / "bad"), "--text", FRANCE, model=instruct.path)
    assert done.returncode == 1 and "chatlens: the base model's tokenizer differs" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_input_is_a_sentence(tiny):
    for text, said in [("", "empty"), ("  \n", "empty"), (3, "must be a string")]:
        with pytest.raises(ChatlensError, match=said):
            compare(*tiny, text)
    with pytest.raises(ChatlensError, match="at least 1 new token"):
        compare(*tiny, FRANCE, max_tokens=0)
    with pytest.raises(ChatlensError, match="top-k must be 0"):
        compare(*tiny, FRANCE, top_k=-1)
    with pytest.raises(ChatlensError, match="exceed the models' context of 2048"):
        compare(*tiny, "word " * 2100, max_tokens=1)
    instruct, _ = tiny
    for args, said in [(["--max-new-tokens", "0"], "at least 1 new token"), (["--top-k", "-2"], "top-k must be 0"),
                       (["--base-model", "/nonexistent"], "no such model file or folder")]:
        base = [] if "--base-model" in args else ["--base-model", str(instruct.path)]
        done = cli_in_process("compare", "--text", FRANCE, *base, *args, model=instruct.path)
        assert done.returncode == 1 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    # the instruct model given as its own base: said, not compared with itself
    done = cli_in_process("compare", "--text", FRANCE, "--base-model", str(instruct.path), model=instruct.path)
    assert done.returncode == 1 and "is the instruct model itself" in done.stderr and "Traceback" not in done.stderr


def test_a_base_model_has_no_chat_template_and_says_so(tiny):
    _, base = tiny
    with pytest.raises(TemplateError, match="has no chat template"):
        base.template.render([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    with pytest.raises(TemplateError, match="has no chat template"):
        ChatSession(base).send("Hi")


def test_the_cli_answers_as_the_function_does(tiny):
    instruct, base = tiny
    done = run_cli("compare", "--base-model", str(base.path), "--text", FRANCE, "--max-new-tokens", "4", "--top-k", "3",
                   model=instruct.path)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    want = to_json(compare(instruct, base, FRANCE, max_tokens=4, top_k=3))
    assert got["prompt"] == want["prompt"] and (got["max_tokens"], got["top_k"]) == (4, 3)
    for key in MODELS:
        for layout in LAYOUTS:
            g, w = got[key][layout], want[key][layout]
            assert {k: g[k] for k in ("reply_ids", "reply_text", "stop_reason", "top_k")} == \
                   {k: w[k] for k in ("reply_ids", "reply_text", "stop_reason", "top_k")}
    assert got["models"] == {"instruct": str(instruct.path), "base": str(base.path)}
    done = cli_in_process("compare", "--base-model", str(base.path), "--text", FRANCE, "--max-new-tokens", "2",
                          model=instruct.path)
    assert len(json.loads(done.stdout)["base"]["plain"]["top_k"][0]) == defaults.COMPARE_TOP_K


def test_recordings_come_from_the_real_base_model_only(tiny, tmp_path):
    """`record --base-model` refuses anything but the Hub's pinned weights (here the stand-in, whose
    README says what it is), before it records anything; the recording's shape on the tiny models."""
    out = tmp_path / "recorded.json"
    done = run_cli("record", "--base-model", str(standin_base()), "--out", str(out))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "A stand-in for HuggingFaceTB/SmolLM2-135M (NOT the base model)" in done.stderr
    assert "recorded only from the real base model" in done.stderr and list(tmp_path.iterdir()) == []
    import datetime

    from chatlens.host.chatcli import COMPARE_PROMPTS, recorded_comparisons

    instruct, base = tiny
    assert COMPARE_PROMPTS[:2] == [FRANCE, "Who are you?"]  # the lesson's examples
    labels = {"file": "instruct"}, {"file": "base", "stand_in": True}
    doc = recorded_comparisons(instruct, base, *labels, datetime.date(2026, 1, 2), prompts=COMPARE_PROMPTS[:1])
    assert doc["models"] == {"instruct": labels[0], "base": labels[1]} and doc["date"] == "2026-01-02"
    assert (doc["max_tokens"], doc["top_k"]) == (defaults.COMPARE_LIMIT, defaults.COMPARE_TOP_K)
    assert doc["prompts"] == [FRANCE] and len(doc["comparisons"]) == 1
    got, want = doc["comparisons"][0], to_json(compare(instruct, base, FRANCE))
    assert got["prompt"] == want["prompt"]
    assert all(got[k][layout]["reply_ids"] == want[k][layout]["reply_ids"] for k in MODELS for layout in LAYOUTS)


# -- the real instruct model and the stand-in base (slow: they decode with the real model) ----------------------
@pytest.fixture(scope="module")
def standin():
    return load_once(standin_base())  # the in-process command line below reads the same loaded weights


@pytest.fixture(scope="module")
def france(model, standin):
    return to_json(compare(model, standin, FRANCE, max_tokens=8, top_k=10))


def prefix_equal(a, b, ends):
    """Equal up to the shorter; the shorter stopped at an end token (one side's end of turn is
    not the other's: `complete` on the base model stops at its own <|endoftext|>)."""
    n = min(len(a), len(b))
    assert a[:n] == b[:n]
    if len(a) != len(b):
        assert (a if len(a) < len(b) else b)[-1] in ends


def test_real_cells_equal_the_complete_and_run_commands(model, gguf_path, standin, france):
    out = france
    base_path = standin.path
    done = cli_in_process("compare", "--base-model", str(base_path), "--text", FRANCE, "--max-new-tokens", "8",
                          "--top-k", "10", model=gguf_path)
    assert done.returncode == 0, done.stderr
    cli = json.loads(done.stdout)
    for key in MODELS:
        for layout in LAYOUTS:
            assert cli[key][layout]["reply_ids"] == out[key][layout]["reply_ids"], (key, layout)
            assert np.allclose([r[2] for r in cli[key][layout]["top_k"]], [r[2] for r in out[key][layout]["top_k"]],
                               atol=1e-6)
    plain = json.loads(cli_in_process("complete", "--max-new-tokens", "8", "--top-k", "10", stdin=FRANCE,
                                      model=gguf_path).stdout)
    c = cli["instruct"]["plain"]
    assert (c["reply_ids"], c["reply_text"], c["stop_reason"], c["top_k"]) == \
           (plain["reply_ids"], plain["reply_text"], plain["stop_reason"], plain["top_k"])
    assert cli["prompt"]["plain_ids"] == plain["prompt_ids"]
    run = cli_in_process("run", "--max-tokens", "8", "--top-k", "10", stdin=json.dumps({"messages": [
        {"role": "user", "content": FRANCE}]}), model=gguf_path)
    rec = json.loads(run.stdout)
    c = cli["instruct"]["template"]
    assert (c["reply_ids"], c["reply_text"], c["stop_reason"], c["top_k"]) == \
           (rec["reply_ids"], rec["reply_text"], rec["stop_reason"], rec["top_k"])
    assert cli["prompt"]["template_ids"] == rec["prompt_ids"]
    # the base model through `complete` (it stops at its own <|endoftext|>, the comparison at <|im_end|>)
    base_plain = json.loads(cli_in_process("complete", "--max-new-tokens", "8", "--top-k", "10", stdin=FRANCE,
                                           model=base_path).stdout)
    prefix_equal(cli["base"]["plain"]["reply_ids"], base_plain["reply_ids"], {standin.eos_id, model.eos_id})
    assert cli["base"]["plain"]["top_k"][0] == base_plain["top_k"][0]
    # `run` cannot read the base model (no template): its reply with the instruct's template, as run computes it
    rec = ChatSession(as_chat_model(standin, model), max_tokens=8).send(FRANCE, top_k=10)
    assert cli["base"]["template"]["reply_ids"] == rec.reply_ids
    # the stand-in is other weights: its reply inside the template is not the instruct model's
    assert out["base"]["template"]["reply_ids"] != out["instruct"]["template"]["reply_ids"]


def reference_first_step_and_greedy(ref, ids, n, eos_id):
    import torch

    with torch.inference_mode():
        first = ref(torch.tensor([ids])).logits[0, -1].numpy().astype(np.float64)
        out = ref.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=eos_id,
                           pad_token_id=eos_id, output_logits=True, return_dict_in_generate=True)
    new = out.sequences[0, len(ids):].tolist()
    gaps = [float(torch.topk(step[0], 2).values.diff().abs()) for step in out.logits]
    return first, new, gaps


@pytest.mark.parametrize("key", MODELS)
def test_each_reply_is_transformers_greedy_reply_on_the_same_weights(key, model, reference, standin, france):
    from chatlens.host.reference import reference_model

    ref = reference if key == "instruct" else reference_model(standin.config, standin.weights.items())
    for layout in LAYOUTS:
        cell = france[key][layout]
        ids = france["prompt"][f"{layout}_ids"]
        logits, theirs, gaps = reference_first_step_and_greedy(ref, ids, 8, model.eos_id)
        ours = cell["reply_ids"]
        compared = 0
        for a, b, gap in zip(ours, theirs, gaps):
            if gap < GAP:
                break
            assert a == b, f"{key} {layout} step {compared}: chatlens chose {a}, transformers {b} (gap {gap:.4f})"
            compared += 1
        else:
            assert len(ours) == len(theirs)
        # the whole reply, or at least MIN_STEPS steps before a near-tie
        assert compared >= min(MIN_STEPS, len(theirs)), f"{key} {layout}: a near-tie after {compared} steps"
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        first = cell["top_k"][0]
        for i, logit, p in first:
            assert abs(p - probs[i]) < TOL and abs(logit - logits[i]) < TOL, (key, layout, i)
        kth = sorted(probs)[-len(first)]
        assert all(probs[i] >= kth - 2 * TOL for i, _, _ in first)  # the reference's best, up to the tolerance


def test_a_host_that_pulls_each_reply_answers_as_compare_does(tiny):
    """The worker's way (the same CompareJob, its steps pulled one at a time and stopped before
    the last reply starts) gives compare's answer for the replies it ran."""
    from chatlens.compare import plan
    from chatlens.jobs import CompareJob

    instruct, base = tiny
    p = plan(instruct, base, FRANCE, max_tokens=5, top_k=3)
    assert [(k, layout) for k, layout, _ in p.replies] == [(k, layout) for k in MODELS for layout in LAYOUTS]
    job = CompareJob(p, {key: PromptCache(model.backend(p.capacity)) for key, model in zip(MODELS, tiny)})
    while job.key != ("base", "template"):  # the last one never starts: a stop comes first
        job.pull()
    job.stop()
    got, want = job.result, compare(instruct, base, FRANCE, max_tokens=5, top_k=3)
    for key, layout, _ in p.replies[:3]:
        assert getattr(got, key)[layout].reply_ids == getattr(want, key)[layout].reply_ids
        assert getattr(got, key)[layout].top_k == getattr(want, key)[layout].top_k
    assert got.base["template"].stop_reason == "stopped" and got.base["template"].reply_ids == []
    assert got.prompt == want.prompt
