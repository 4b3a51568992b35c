"""Why this token, in Chromium on SwiftShader's WebGPU: each reply token's candidates computed on
the device, shown on hover or click in the chat and the panel, near-ties marked; the preview's
prediction of the first token; nothing asked for when the checkbox is off.

Replies come from the tiny random Llama with SmolLM2's real tokenizer and template
(tests/tiny_model.py): the point is the machinery, and its numbers are compared with the command
line's on the same files (NumPy): candidate ids exactly, logits and probabilities within 1e-3, as
the other page tests hold the f32 path (measured here: 1.4e-5 on logits, 7e-7 on probabilities).
"""

import json

import pytest

from conftest import run_cli
from tiny_model import write_tiny_model
from webapp import SHOTS, App  # the `server` and `browser` fixtures: tests/conftest.py

pytestmark = pytest.mark.browser

K = 10  # the site's top_k (chatlens.defaults.TOP_K)
GAP = 0.01  # the site's near_tie_gap
TOL = 1e-3
MESSAGES = [{"role": "user", "content": "Tell me why the sky is blue."}]
REPLY_LIMIT = 10  # the page's reply limit here: the tiny model never ends a reply, and SwiftShader is slow


@pytest.fixture(scope="module")
def tiny(server):
    folder = write_tiny_model(server.root / "tiny-why" / "model", server.mirror.files["config.json"].parent, seed=1)
    return folder, f"{server.url}tiny-why/model/"


@pytest.fixture(scope="module")
def page(browser, server, tiny):
    a = App(browser, server)
    p = a.open(f"?model={tiny[1]}")
    assert p.evaluate("chatlens.downloadModel()")["complete"]
    assert p.evaluate("chatlens.modelReady")["kind"] == "webgpu"
    p.wait_for_function("() => chatlens.status.state === 'ready'")
    p.select_option("#window", "256")
    p.evaluate(f"chatlens.settings.reply_limit = {REPLY_LIMIT}")  # what the chat sends as maxTokens
    yield p
    errors = a.errors
    a.close()
    assert not errors, errors


def cli_record(folder, messages, max_tokens, top_k=K):
    done = run_cli("run", "--window", "256", "--max-tokens", str(max_tokens), "--top-k", str(top_k),
                   stdin=json.dumps({"messages": messages}), model=folder)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def same_rows(rows, want):
    """One step's candidates in the page, [(id, probability), ...], are the CLI's `want` ([id, logit,
    probability] rows): the same ids in the same order, probabilities within TOL. The GPU program
    keeps NumPy's f32 KV cache (chatlens.gpu.program.KV_CACHE), so only float rounding separates
    the two: candidates may trade places only where NumPy's logits are within TOL of each other."""
    assert len(rows) == len(want) == K
    theirs = {c[0]: c for c in want}
    for rank, ((i, p), c) in enumerate(zip(rows, want)):
        if i != c[0]:  # a swap only between candidates NumPy's logits call equal
            assert abs(theirs.get(i, want[-1])[1] - c[1]) < TOL, (rank, i, c)
        if i in theirs:
            assert abs(p - theirs[i][2]) < TOL, (rank, i, p, theirs[i])


def same_top_k(got, want):
    """same_rows for every step of a reply, and the logits within TOL."""
    for g, w in zip(got, want, strict=True):
        same_rows([(c[0], c[2]) for c in g], w)
        theirs = {c[0]: c[1] for c in w}
        assert all(abs(c[1] - theirs[c[0]]) < TOL for c in g if c[0] in theirs), (g, w)


def test_top_k_in_the_page_equals_the_cli(page, settings_of, tiny):
    assert settings_of["top_k"] == K and settings_of["near_tie_gap"] == GAP
    rec = page.evaluate("m => chatlens.run({messages: m, window: 256, maxTokens: 6, topK: 10})", MESSAGES)
    want = cli_record(tiny[0], MESSAGES, 6)
    assert rec["reply_ids"] == want["reply_ids"] and rec["backend"].startswith("webgpu: ")
    same_top_k(rec["top_k"], want["top_k"])
    tokens = {i: t for s, ts in zip(want["top_k"], want["top_k_tokens"]) for (i, _, _), t in zip(s, ts)}
    assert all(tokens.get(i, t) == t for s, ts in zip(rec["top_k"], rec["top_k_tokens"]) for (i, _, _), t in zip(s, ts))
    assert all(len(s) == K and s[0][0] == i for s, i in zip(rec["top_k"], rec["reply_ids"]))
    plain = page.evaluate("m => chatlens.run({messages: m, window: 256, maxTokens: 2})", MESSAGES)
    assert plain["top_k"] is None and plain["reply_ids"] == rec["reply_ids"][:2]


@pytest.fixture(scope="module")
def settings_of(page):
    return page.evaluate("chatlens.settings")


def near_ties(top_k):
    return [i for i, s in enumerate(top_k) if s[0][1] - s[1][1] < GAP]


def test_hover_a_reply_token_to_see_its_candidates(page, tiny):
    page.click("#new-conversation")
    page.check("#why")
    page.fill("#draft", MESSAGES[0]["content"])
    page.press("#draft", "Enter")
    page.wait_for_selector("#chat .msg.assistant .content .rt", timeout=300_000)
    want = cli_record(tiny[0], MESSAGES, REPLY_LIMIT)
    # the bubble's text is still exactly the reply, now one span a token
    assert page.text_content("#chat .msg.assistant .content") == want["reply_text"]
    words = page.locator("#chat .msg.assistant .content .rt")
    assert words.count() == len(want["reply_ids"]) - (want["stop_reason"] == "end_turn")
    words.nth(1).hover()
    rows = page.locator("#chat .msg.assistant .why-table tbody tr")
    assert rows.count() == K
    shown = page.eval_on_selector_all("#chat .msg.assistant .why-table tbody tr",
                                      "rs => rs.map(r => [Number(r.dataset.id), Number(r.dataset.p)])")
    same_rows(shown, want["top_k"][1])
    assert "%" in page.text_content("#chat .msg.assistant .why-table tbody tr.chosen")
    # the panel's reply tokens: click one
    chips = page.locator(".reply-tokens .tok[data-step]")
    assert chips.count() == len(want["reply_ids"])
    chips.nth(0).click()
    assert page.locator(".reply .why-table tbody tr").count() == K
    first = page.eval_on_selector(".reply .why-table tbody tr", "r => Number(r.dataset.id)")
    assert first == want["reply_ids"][0]
    # near-ties: marked exactly where the two best logits are closer than the site's gap
    marked = page.eval_on_selector_all(".reply-tokens .tok.near-tie", "cs => cs.map(c => Number(c.dataset.step))")
    assert marked == near_ties(want["top_k"])
    bubble = page.eval_on_selector_all("#chat .msg.assistant .content .rt.near-tie", "cs => cs.map(c => Number(c.dataset.step))")
    assert bubble == [i for i in near_ties(want["top_k"]) if i < words.count()]
    page.locator(".reply-tokens .tok").first.focus()  # the tokens are one stop, a chip at a time
    page.keyboard.press("End")
    assert page.eval_on_selector(".reply-tokens .tok.picked", "c => Number(c.dataset.step)") == len(want["reply_ids"]) - 1
    if marked:
        page.locator(f".reply-tokens .tok[data-step='{marked[0]}']").click()
        assert "another device" in page.text_content(".reply .near-tie-note")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "why-this-token.png"), full_page=True)


def test_a_crafted_near_tie_is_marked_with_the_lessons_note(page):
    """A record whose first step's two best are 0.004 apart, drawn by the panel as any record."""
    rec = page.evaluate("m => chatlens.run({messages: m, window: 256, maxTokens: 2, topK: 10})", MESSAGES)
    step = rec["top_k"][0]
    step[1][1] = step[0][1] - 0.004
    page.evaluate("""async (rec) => {
        const r = await import('./js/views/reads.mjs');
        r.renderRecord(document.getElementById('reads'), rec, {caption: 'crafted: a near-tie', why: {gap: chatlens.settings.near_tie_gap}});
    }""", rec)
    assert page.eval_on_selector_all(".reply-tokens .tok.near-tie", "cs => cs.map(c => Number(c.dataset.step))")[:1] == [0]
    page.locator(".reply-tokens .tok[data-step='0']").click()
    note = page.text_content(".reply .near-tie-note")
    assert "0.0040 logits apart" in note and "another device" in note


def test_the_preview_predicts_the_first_token_and_leaves_the_cache_as_it_was(page, tiny):
    page.click("#new-conversation")
    page.check("#why")
    page.evaluate("""() => {
        window.__predicted = [];
        const predict = chatlens.predict;
        chatlens.predict = (args) => (window.__predicted.push(args.messages.at(-1).content), predict(args));
    }""")
    text = "What is a rainbow?"
    page.locator("#draft").press_sequentially(text, delay=40)
    page.wait_for_function("t => document.querySelector('#prediction .why-table') && "
                           "document.getElementById('prompt-text')?.textContent.includes(t)", arg=text, timeout=120_000)
    page.wait_for_timeout(1000)  # no prediction is still on its way
    asked = page.evaluate("window.__predicted")
    assert asked[-1] == text and len(asked) < len(text) / 2, asked  # one a pause, not one a keystroke
    rows = page.eval_on_selector_all("#prediction .why-table tbody tr", "rs => rs.map(r => [Number(r.dataset.id), Number(r.dataset.p)])")
    want = cli_record(tiny[0], [{"role": "user", "content": text}], 1)
    same_rows(rows, want["top_k"][0])
    assert "A prediction" in page.text_content("#prediction")
    # sending reuses exactly what it would have reused without the prediction
    messages = [{"role": "user", "content": text}]
    preview = page.evaluate("m => chatlens.preview({messages: m, window: 256})", messages)
    page.evaluate("m => chatlens.predict({messages: m, window: 256})", messages)
    again = page.evaluate("m => chatlens.preview({messages: m, window: 256})", messages)
    assert again["reused_tokens"] == preview["reused_tokens"]
    page.fill("#draft", "")


def test_off_nothing_is_asked_for(page):
    page.click("#new-conversation")
    page.uncheck("#why")
    page.evaluate("""() => {
        window.__asked = [];
        for (const name of ['predict', 'run']) {
            const call = chatlens[name];
            chatlens[name] = (args, ...rest) => (window.__asked.push([name, args.topK ?? null]), call(args, ...rest));
        }
    }""")
    page.fill("#draft", "Hello?")
    page.press("#draft", "Enter")
    page.wait_for_selector("#chat .msg.assistant:not(.is-streaming)", timeout=300_000)
    assert page.evaluate("window.__asked") == [["run", None]]
    assert page.locator("#chat .msg.assistant .rt").count() == 0 and page.locator(".reply-tokens .tok[data-step]").count() == 0
    assert page.locator("#prediction").count() == 0
