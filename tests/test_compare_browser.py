"""chatlens.compare in Chromium (WebGPU forced, as the other browser tests do): the base model
beside the instruct model, on the same ids, in the page's worker, equal to CPython's
chatlens.host.compare.compared on the same weights.

The Hub cannot be reached here: the base model is a stand-in, a tiny random model with SmolLM2's
tokenizer (tests/tiny_model.py), served by the mirror as `serve --base-model FOLDER` serves one
(host/mirror.py's base_mirror), beside a tiny instruct model served by URL. Small shapes and few
tokens: the suite runs on a slow CPU.
"""

import pytest

pytestmark = pytest.mark.browser

TEXT = "What is the capital of France?"
TURN_MS = 900_000  # a few short replies on SwiftShader, on a busy machine


@pytest.fixture(scope="module")
def tiny_two(server):
    """(instruct folder, base folder, the base's mirror): two tiny models with SmolLM2's tokenizer."""
    from chatlens.host.mirror import base_mirror
    from tiny_model import write_tiny_model

    tokenizers = server.mirror.files["config.json"].parent
    instruct = write_tiny_model(server.root / "tiny-compare" / "instruct", tokenizers, seed=17)
    folder = write_tiny_model(server.root / "tiny-compare" / "base", tokenizers, seed=18)
    (folder / "README.md").write_text("# A stand-in for SmolLM2-135M: a tiny random model (test_compare_browser)\n")
    return instruct, folder, base_mirror(folder)


def both_stored(a, server, base, query=""):
    """The page on the tiny instruct, both models stored, the instruct's weights loaded."""
    server.mirror.base_model = base
    page = a.open(f"?model={server.url}tiny-compare/instruct/{query}")
    page.evaluate("chatlens.downloadModel()")
    assert page.evaluate("chatlens.modelReady")["kind"] == "webgpu"
    stored = page.evaluate("chatlens.downloadModel({model: 'base'})")
    assert stored["complete"]
    return page


LOST = "the GPU device was lost"  # the worker's status when it puts the weights on a new device (worker/placement.mjs)
BASE_BESIDE = "loading the base model's weights beside the instruct model's"  # its status as the base goes back on


COMPARE = """([text, maxTokens, topK]) => {
    const streamed = [], prompts = [];
    return chatlens.compare({text, maxTokens, topK}, {
        onPrompt: (p) => prompts.push({p, tokensBefore: streamed.length}),
        onToken: (t) => streamed.push(t)}).then((out) => ({out, streamed, prompts}));
}"""


def test_compare_in_the_page_equals_cpython_streams_each_cell_and_stops_all_four(browser, server, tiny_two):
    import numpy as np

    from chatlens.cache import PromptCache
    from chatlens.compare import LAYOUTS, MODELS
    from chatlens.host.compare import compared as compare
    from chatlens.inspection import Inspecting
    from chatlens.protocol import to_json
    from chatlens.pull import greedy
    from conftest import load_once
    from webapp import App, assert_same_comparison

    instruct, folder, base = tiny_two
    weights = {"instruct": load_once(instruct), "base": load_once(folder)}  # the cells' own, as CPython reads them
    a = App(browser, server)
    try:
        page = both_stored(a, server, base)
        got = page.evaluate(COMPARE, [TEXT, 3, 3])
        # the base attached on the first compare, beside the instruct: chatlens.model stays the instruct's
        assert page.evaluate("chatlens.baseModel")["model"] == "base"
        assert page.evaluate("chatlens.model")["model"] == "instruct"
        want = compare(weights["instruct"], weights["base"], TEXT, max_tokens=3, top_k=3)
        out = got["out"]
        assert_same_comparison(out, want)
        assert len(got["prompts"]) == 1 and got["prompts"][0]["tokensBefore"] == 0  # before any token
        assert got["prompts"][0]["p"] == out["prompt"]
        for key in MODELS:  # each token streamed as it came, tagged with its model and layout
            for layout in LAYOUTS:
                ids = [t["token"]["id"] for t in got["streamed"] if (t["model"], t["layout"]) == (key, layout)]
                assert [i for i in ids if i >= 0] == out[key][layout]["reply_ids"], (key, layout)

        # a step of the base's template cell and of the instruct's plain cell, inspected: CPython's
        # figures on the cell's own weights and the ids the cell read
        for key, layout in [("base", "template"), ("instruct", "plain")]:
            cell = out[key][layout]
            args = {"messages": [{"role": "user", "content": TEXT}], "model": key, "layout": layout,
                    "replyIds": cell["reply_ids"], "step": 1}
            seen = page.evaluate("(a) => chatlens.inspect(a)", args)
            ids = out["prompt"][f"{layout}_ids"]
            want_step = greedy(Inspecting(PromptCache(weights[key].backend(64)), ids + cell["reply_ids"][:1], len(ids)))
            assert seen["prompt_ids"] == ids and seen["chosen_id"] == cell["reply_ids"][1] == want_step.chosen_id
            np.testing.assert_allclose(seen["attention"], want_step.attention, rtol=0, atol=1e-4)
            assert [[i for i, _ in row] for row in seen["lens"]] == [[i for i, _ in row] for row in want_step.lens]

        # Stop: the reply under way and every one after it end "stopped"
        stopped = page.evaluate("""(text) => {
            const stop = new AbortController();
            let n = 0;
            return chatlens.compare({text, maxTokens: 40, topK: 0},
                                    {onToken: () => { if (++n === 2) stop.abort(); }, signal: stop.signal});
        }""", TEXT)
        cells = [stopped[k][layout] for k in MODELS for layout in LAYOUTS]
        assert [c["stop_reason"] for c in cells] == ["stopped"] * 4, [c["stop_reason"] for c in cells]
        assert len(cells[0]["reply_ids"]) >= 2 and all(c["reply_ids"] == [] for c in cells[1:])
        # what the first wrote before the stop (a token or two may be in flight): CPython's greedy ids
        first = cells[0]["reply_ids"]
        greedy = to_json(compare(weights["instruct"], weights["base"], TEXT, max_tokens=len(first), top_k=0))
        assert first == greedy[MODELS[0]][LAYOUTS[0]]["reply_ids"]
        assert page.evaluate("chatlens.writing") is False

        # a lost GPU (as a driver reset: both models' devices): the next comparison puts both back.
        # The statuses prove the loss happened (as test_robust_browser's do): a comparison equal to
        # CPython's would hold as well if loseGpu() had lost nothing.
        page.evaluate("""() => {
            window.__statuses = [];
            chatlens.onStatus((s) => window.__statuses.push({...s}));
        }""")
        page.evaluate("chatlens.loseGpu()")
        page.wait_for_function(f"() => window.__statuses.some(s => s.detail.startsWith('{LOST}')) && "
                               "chatlens.status.state === 'ready'", timeout=120_000)
        assert_same_comparison(page.evaluate(COMPARE, [TEXT, 3, 3])["out"], want)
        states = page.evaluate("window.__statuses")
        lost = next(i for i, s in enumerate(states) if s["detail"].startswith(LOST))
        assert any("uploading the weights" in s["detail"] for s in states[lost:]), states  # the instruct's, on a new device
        assert any(s["detail"] == BASE_BESIDE for s in states[lost:]), states  # and the base's again beside them

        # the base deleted: the comparison asks for it, the instruct's chat still works
        base_id = page.evaluate("chatlens.downloads.base()")["status"]["id"]
        page.evaluate("(id) => chatlens.deleteModel(id)", base_id)
        error = page.evaluate("(text) => chatlens.compare({text}).then(() => null, (e) => e.message)", TEXT)
        assert "needs the base model" in error and "download it first" in error
        rec = page.evaluate("chatlens.run({messages: [{role: 'user', content: 'Hi'}], window: 256, maxTokens: 2})")
        assert len(rec["reply_ids"]) == 2 and rec["backend"].startswith("webgpu: ")
        assert not a.errors, a.errors
    finally:
        server.mirror.base_model = None
        a.close()


def test_a_gpu_with_room_for_one_model_puts_one_on_it_at_a_time(browser, server, tiny_two):
    """?gpu=one-model (tests only): the base's weights fail to go beside the instruct's, as on a GPU
    too small for both; the worker then swaps the two onto the GPU, the instruct's put back for
    the first two replies, the base's for the last two, and the instruct's again for a chat."""
    import json

    from chatlens.host.compare import compared as compare
    from conftest import load_once, run_cli
    from webapp import App, assert_same_comparison

    instruct, folder, base = tiny_two
    a = App(browser, server)
    try:
        page = both_stored(a, server, base, "&gpu=one-model")
        want = compare(load_once(instruct), load_once(folder), TEXT, max_tokens=3, top_k=3)
        assert_same_comparison(page.evaluate(COMPARE, [TEXT, 3, 3])["out"], want)
        note = page.evaluate("chatlens.baseModel")["note"]
        assert note and "no room for both models at once" in note and "one on it at a time" in note, note
        assert "the test asked for room for one model only" in note

        # a chat on the instruct, whose weights the base's replaced: put back, from an empty cache
        # (the comparison's prompt begins as the chat's does: nothing of it is on the GPU now)
        system = "You are a helpful assistant."
        messages = [{"role": "user", "content": TEXT}]
        run = "([system, messages]) => chatlens.run({system, messages, window: 256, maxTokens: 3})"
        rec = page.evaluate(run, [system, messages])
        done = run_cli("run", "--window", "256", "--max-tokens", "3", "--system", system,
                       stdin=json.dumps({"messages": messages}), model=instruct)
        assert done.returncode == 0, done.stderr
        ref = json.loads(done.stdout)
        assert rec["prompt_ids"] == ref["prompt_ids"] and rec["reply_ids"] == ref["reply_ids"]
        assert rec["backend"].startswith("webgpu: ")

        # again: the instruct on the GPU now, the base swapped in and out once more
        assert_same_comparison(page.evaluate(COMPARE, [TEXT, 3, 3])["out"], want)
        again = page.evaluate(run, [system, messages])
        assert again["reply_ids"] == ref["reply_ids"]
        assert page.evaluate("chatlens.model")["model"] == "instruct"
        assert not a.errors, a.errors
    finally:
        server.mirror.base_model = None
        a.close()


def test_a_base_with_another_tokenizer_is_refused_with_a_sentence(browser, server, tiny_two, tmp_path):
    from chatlens.host.mirror import base_mirror
    from standin_base import mismatched_tokenizer
    from webapp import App

    _, folder, _ = tiny_two
    other = mismatched_tokenizer(server.root / "tiny-compare" / "other", folder)
    a = App(browser, server)
    try:
        page = both_stored(a, server, base_mirror(other))
        error = page.evaluate("(text) => chatlens.compare({text}).then(() => null, (e) => [e.name, e.message])", TEXT)
        assert error[0] == "TokenizerMismatchError"
        assert "needs both models to read exactly the same ids" in error[1]
        assert not a.errors, a.errors
    finally:
        server.mirror.base_model = None
        a.close()
