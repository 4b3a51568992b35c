"""One step of a reply in Chromium (WebGPU forced, as the other browser tests do): chatlens.branch
(another token taken at a step, continued greedily) and chatlens.inspect (where the step's query
looked, and the logit lens), in the page's worker, equal to CPython's jobs on the same weights.

A tiny random model with SmolLM2's tokenizer (tests/tiny_model.py), served by URL and stored in
the page, so the GPU's steps are quick on SwiftShader. One page for the module: every test reads
the same turn.
"""

import numpy as np
import pytest

from chatlens import defaults

pytestmark = pytest.mark.browser

TURN = {"messages": [{"role": "user", "content": "Tell me about lighthouses."}], "window": 256, "maxTokens": 6,
        "topK": 3}
STEP_MS = 600_000  # a few steps on SwiftShader, on a busy machine


@pytest.fixture(scope="module")
def tiny(server):
    from chatlens.source import load_model
    from tiny_model import write_tiny_model

    tokenizers = server.mirror.files["config.json"].parent
    return load_model(write_tiny_model(server.root / "tiny-step" / "model", tokenizers, seed=23))


@pytest.fixture(scope="module")
def page(browser, server, tiny):
    """The page on the tiny model, stored and on the GPU, and the turn's record (its reply)."""
    from webapp import App

    a = App(browser, server)
    page = a.open(f"?model={server.url}tiny-step/model/")
    page.evaluate("chatlens.downloadModel()")
    assert page.evaluate("chatlens.modelReady")["kind"] == "webgpu"
    page.set_default_timeout(STEP_MS)
    yield page
    a.close()
    assert not a.errors, a.errors


@pytest.fixture(scope="module")
def record(page):
    return page.evaluate("t => chatlens.run(t)", TURN)


def cpython(tiny, record, job, **kwargs):
    """The same job on the same weights in CPython (NumPy), from an empty cache."""
    from chatlens import jobs
    from chatlens.cache import PromptCache
    from chatlens.pull import greedy

    cache = PromptCache(tiny.backend(256))
    if job is jobs.BranchJob:
        return greedy(job(tiny, cache, record["prompt_ids"], record["reply_ids"], max_tokens=6, **kwargs))
    from chatlens.record import TurnRecord

    return greedy(job(cache, TurnRecord.from_json(record), record["reply_ids"], tiny.tokenizer, **kwargs))


def test_a_branch_in_the_page_is_cpythons_and_reuses_the_cache_the_reply_left(page, record, tiny):
    from chatlens.jobs import BranchJob

    other = record["top_k"][1][1][0]  # the second candidate at step 1: what the model nearly chose
    got = page.evaluate("""([turn, replyIds, id]) => {
        const streamed = [];
        return chatlens.branch({...turn, replyIds, step: 1, id}, {onToken: (t) => streamed.push(t.id)})
            .then((out) => ({out, streamed}));
    }""", [TURN, record["reply_ids"], other])
    out = got["out"]
    want = cpython(tiny, record, BranchJob, step=1, id=other, top_k=3)
    assert out["reply_ids"][:2] == [record["reply_ids"][0], other] and out["backend"].startswith("webgpu: ")
    assert out["branched_from"] == record["reply_ids"] and out["top_k"][:2] == [None, None]  # no replyTopK given
    assert [i for i in got["streamed"] if i >= 0] == out["reply_ids"][2:]
    assert (out["reused_tokens"], out["computed_tokens"]) == (len(record["prompt_ids"]) + 1, 1)
    for n, (ours, theirs) in enumerate(zip(out["top_k"][2:], want.top_k[2:])):  # up to the first near-tie
        assert ours[0][0] == out["reply_ids"][2 + n] == want.reply_ids[2 + n]
        assert [r[0] for r in ours] == [r[0] for r in theirs]
        np.testing.assert_allclose([r[2] for r in ours], [r[2] for r in theirs], rtol=0, atol=1e-3)
        if theirs[0][1] - theirs[1][1] < defaults.NEAR_TIE_GAP:
            break  # the GPU's rounding may take the other at the next step


def test_an_inspection_in_the_page_is_cpythons(page, record, tiny):
    from chatlens.jobs import InspectJob

    out = page.evaluate("([turn, replyIds]) => chatlens.inspect({...turn, replyIds, step: 2})", [TURN, record["reply_ids"]])
    want = cpython(tiny, record, InspectJob, step=2, top_k=TURN["topK"])  # the lens lists K a layer
    assert out["chosen_id"] == record["reply_ids"][2] == want.chosen_id and out["position"] == want.position
    assert out["backend"].startswith("webgpu: ")
    np.testing.assert_allclose(out["attention"], want.attention, rtol=0, atol=1e-4)
    for ours, theirs in zip(out["lens"], want.lens):
        assert [i for i, _ in ours] == [i for i, _ in theirs]
        np.testing.assert_allclose([p for _, p in ours], [p for _, p in theirs], rtol=0, atol=1e-3)
    assert [p["kind"] for p in out["by_piece"]] == [p["kind"] for p in want.by_piece]
    assert out["lens_tokens"] == want.lens_tokens  # the lens spelled as CPython spells it


def test_bad_steps_and_ids_are_refused_in_a_sentence(page, record):
    # one after another: a branch asked while another is written is refused for that (test_inspect_browser.py)
    said = page.evaluate("""async ([turn, replyIds]) => {
        const said = (e) => `${e.name}: ${e.message}`;
        return [await chatlens.inspect({...turn, replyIds, step: 9}).then(() => 'answered', said),
                await chatlens.branch({...turn, replyIds, step: 1, id: 49152}).then(() => 'answered', said),
                await chatlens.branch({...turn, replyIds, step: 6, id: 3}).then(() => 'answered', said)];
    }""", [TURN, record["reply_ids"]])
    n = len(record["reply_ids"])
    assert said[0] == f"ChatlensError: step 9 is out of range: the reply has {n} tokens, so steps 0 to {n}"
    assert said[1] == "ChatlensError: id 49152 is not a token: the vocabulary's ids are 0 to 49151"
    assert said[2].startswith(f"ChatlensError: step 6 is not a step of this reply, which chose {n} tokens")
