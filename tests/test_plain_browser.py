"""Plain-text mode with the real model, in Chromium on SwiftShader's WebGPU: the lesson's experiment.

"What is the capital of France?" as plain text: <|im_end|> is the most likely next token; the
same words sent as a chat message, through the template: a word of an answer leads. The page's
probabilities (computed on the GPU) are compared with transformers' (float32 on the same
dequantized GGUF weights) within 1e-3, and its candidates with `python -m chatlens complete`'s.
SwiftShader takes seconds a step for the real model: one step each way. The page is served
without cross-origin isolation, as most static hosts serve it, and its GGUF (Q4_1, its own
kernels) also replies to a chat message as the command line does: one download of the real
model in the page for both.
"""

import json

import numpy as np
import pytest

from conftest import cli_in_process, run_cli
from webapp import App, open_with_the_model  # the `server` and `browser` fixtures: tests/conftest.py

pytestmark = pytest.mark.browser

FRANCE = "What is the capital of France?"
TOL = 1e-3
STEP_MS = 600_000


def probabilities(ref, ids):
    import torch

    with torch.inference_mode():
        logits = ref(torch.tensor([ids])).logits[0, -1].numpy().astype(np.float64)
    e = np.exp(logits - logits.max())
    return e / e.sum()


def rows_of(page, column):
    return page.eval_on_selector_all(f".plain-col:nth-child({column}) .next-token .why-table tbody tr",
                                     "rs => rs.map(r => [Number(r.dataset.id), Number(r.dataset.p)])")


def test_the_capital_of_france_as_plain_text_and_as_a_chat_message(browser, plain_server, model, reference):
    """The mirror serves the session's GGUF (`model`, `reference`: conftest.py's, loaded once)."""
    ref = reference
    mirror = plain_server.mirror
    assert mirror.files[mirror.gguf].resolve() == model.path.resolve()
    app = App(browser, plain_server)
    try:
        page = open_with_the_model(app, f"?jspi=off&model={plain_server.url}{mirror.base}{mirror.gguf}")
        assert page.evaluate("crossOriginIsolated") is False
        page.click("#mode-plain")
        assert page.input_value("#plain-text") == FRANCE  # the lesson's text is there to start from
        page.select_option("#plain-max", "1")
        page.click("#plain-run")
        page.wait_for_selector(".plain-col:nth-child(1) .next-token .why-table", timeout=STEP_MS)
        plain = rows_of(page, 1)
        ids = model.tokenizer.encode(FRANCE)
        want = probabilities(ref, ids)
        assert plain[0][0] == model.eos_id == int(np.argmax(want))  # <|im_end|> is first
        assert page.text_content(".plain-col:nth-child(1) .next-token tr.chosen .cand") == "<|im_end|>"
        np.testing.assert_allclose([p for _, p in plain], want[[i for i, _ in plain]], atol=TOL, rtol=0)
        assert "end_turn" in page.text_content(".plain-col:nth-child(1) .plain-continuation .reply-title")

        cli = cli_in_process("complete", "--top-k", "10", "--max-new-tokens", "1", stdin=FRANCE, model=mirror.files[mirror.gguf])
        assert cli.returncode == 0, cli.stderr
        cli_first = json.loads(cli.stdout)["top_k"][0]
        assert [i for i, _ in plain] == [c[0] for c in cli_first]
        np.testing.assert_allclose([p for _, p in plain], [c[2] for c in cli_first], atol=TOL, rtol=0)

        page.click("#plain-as-chat")  # the same words the other way: through the template
        page.wait_for_selector(".plain-col:nth-child(2) .next-token .why-table", timeout=STEP_MS)
        chat = rows_of(page, 2)
        prompt = model.tokenizer.encode(model.template.render([{"role": "user", "content": FRANCE}], add_generation_prompt=True))
        want = probabilities(ref, prompt)
        assert chat[0][0] == int(np.argmax(want)) and chat[0][0] not in model.tokenizer.special_ids
        assert model.tokenizer.token_text(chat[0][0]).strip().isalpha()  # a word of an answer
        np.testing.assert_allclose([p for _, p in chat], want[[i for i, _ in chat]], atol=TOL, rtol=0)
        assert page.locator(".plain-col:nth-child(1) .next-token").count() == 1  # side by side: the plain side stays
        app.shot("plain-text-france")

        # the chat message replied to, as the command line replies on the same file (its prompt
        # mostly read from the cache the step above left: a few tokens cost seconds here)
        france = [{"role": "user", "content": FRANCE}]
        rec = page.evaluate("m => chatlens.run({messages: m, window: 256, maxTokens: 3})", france)
        done = cli_in_process("run", "--window", "256", "--max-tokens", "3", stdin=json.dumps({"messages": france}),
                              model=mirror.files[mirror.gguf])
        assert done.returncode == 0, done.stderr
        want = json.loads(done.stdout)
        assert rec["prompt_ids"] == want["prompt_ids"] == prompt and rec["reply_ids"] == want["reply_ids"]
        assert rec["reply_text"] == want["reply_text"] and rec["reply_ids"][0] == chat[0][0]
        assert rec["reused_tokens"] > 0
    finally:
        app.close()
    assert not app.errors, app.errors


def test_plain_text_shows_the_bytes_of_split_characters(app, tokenizer):
    """The plain text's tokens and a continuation's are drawn from the bytes the answers carry: a
    character split across tokens shows its bytes, grouped under it, as in the chat's panel."""
    page = app.open()
    page.click("#mode-plain")
    text = "東京<|im_end|>"
    page.fill("#plain-text", text)
    page.wait_for_function("t => document.querySelector('.plain-text-view')?.textContent === t", arg=text)
    chips = page.eval_on_selector_all(".plain-tokens .tok", """ts => ts.map(t => ({
        id: Number(t.dataset.id), hex: [...t.querySelectorAll('.hex')].map(h => h.textContent).join(' ')}))""")
    ids = tokenizer.encode(text)
    assert [c["id"] for c in chips] == ids
    split = [tokenizer.token_bytes(i) for i in ids if "\ufffd" in tokenizer.token_text(i)]
    assert len(split) == 4 and [c["hex"] for c in chips if c["hex"]] == [b.hex(" ").upper() for b in split]
    groups = page.eval_on_selector_all(".plain-tokens .char-group .char", "gs => gs.map(g => g.textContent)")
    assert groups == ["東", "京"]
    # a continuation's chips read its bytes the same way (the tokenize answer standing in for one)
    drawn = page.evaluate("""async (text) => {
        const t = await chatlens.tokenize({text});
        const v = await import('./js/views/plain.mjs');
        const box = document.createElement('div');
        document.body.append(box);
        const answer = {reply_ids: t.prompt_ids, reply_tokens: t.prompt_tokens, reply_bytes: t.prompt_bytes, reply_text: text,
                        stop_reason: 'max_tokens'};
        v.renderPlain(box, {tokens: t, plain: {answer}, chat: null, gap: chatlens.settings.near_tie_gap});
        const hexes = [...box.querySelectorAll('.plain-continuation .tok .hex')].map(h => h.textContent);
        box.remove();
        return hexes;
    }""", text)
    assert drawn == [b.hex(" ").upper() for b in split]
    page.click("#mode-live")


@pytest.fixture(scope="module")
def tiny(server):
    """The tiny random model (tests/tiny_model.py) beside the site: a continuation in seconds on SwiftShader."""
    from tiny_model import write_tiny_model

    folder = write_tiny_model(server.root / "tiny-plain" / "model", server.mirror.files["config.json"].parent, seed=4)
    return folder, f"{server.url}tiny-plain/model/"


def test_stop_ends_a_continuation_and_keeps_what_it_wrote(app, tiny):
    folder, url = tiny
    page = app.open(f"?model={url}")
    assert page.evaluate("chatlens.downloadModel()")["complete"]
    assert page.evaluate("chatlens.modelReady")["kind"] == "webgpu"
    page.click("#mode-plain")
    limit = page.evaluate("chatlens.settings.reply_limit")
    page.select_option("#plain-max", str(limit))  # the longest continuation offered
    page.click("#plain-run")
    chips = ".plain-col:nth-child(1) .plain-continuation .tok"
    page.wait_for_selector(chips, timeout=STEP_MS)  # the first token is written
    page.click("#plain-stop")
    page.wait_for_selector("#plain-stop", state="hidden", timeout=STEP_MS)
    assert page.text_content(".plain-col:nth-child(1) .plain-continuation .reply-title code.stop") == "stopped"
    kept = page.eval_on_selector_all(chips, "ts => ts.map(t => Number(t.dataset.id))")
    cli = run_cli("complete", "--max-new-tokens", str(limit), stdin=FRANCE, model=folder)
    assert cli.returncode == 0, cli.stderr
    want = json.loads(cli.stdout)["reply_ids"]
    assert len(want) == limit  # not stopped, it runs to the limit (the tiny model never writes <|im_end|>)
    assert 1 <= len(kept) < limit and kept == want[:len(kept)]  # what it wrote before the stop, as the CLI writes it
    assert page.is_enabled("#plain-run") and page.is_enabled("#plain-as-chat")
