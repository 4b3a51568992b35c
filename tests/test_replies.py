"""Replies computed in the page, in Chromium on SwiftShader's WebGPU: the model is downloaded into
the page's store, its weights uploaded to the GPU, and Python's greedy loop in the worker waits
for each token through JSPI. Every reply is compared with the command line's on the same files.

SwiftShader is a CPU emulation of a GPU: a step of the real model takes seconds to tens of
seconds here, so replies are a few tokens and prompts short (a brief custom system prompt).
"""

import json
import re

import pytest

from webapp import App  # the `server` and `browser` fixtures: tests/conftest.py
from conftest import run_cli

pytestmark = pytest.mark.browser

SYSTEM = "Be brief."
TURN_MS = 900_000  # one short reply on SwiftShader, on a busy machine


def cli_record(model, messages, max_tokens, window=256, system=SYSTEM):
    done = run_cli("run", "--window", str(window), "--max-tokens", str(max_tokens), "--system", system,
                   stdin=json.dumps({"messages": messages}), model=model)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def open_with_the_model(app, query=""):
    """The page, its model downloaded into the store and its weights on the GPU."""
    page = app.open(query)
    summary = page.evaluate("chatlens.downloadModel()")
    assert summary["complete"] and summary["bytes"] > 0
    model = page.evaluate("chatlens.modelReady")
    assert model["kind"] == "webgpu" and model["backend"].startswith("webgpu: ")
    page.wait_for_function("() => chatlens.status.state === 'ready'")
    assert page.text_content("#status-text") == "Ready"
    return page


def page_run(page, messages, max_tokens, window=256, system=SYSTEM):
    """chatlens.run in the page, with the tokens it streamed."""
    return page.evaluate("""([messages, maxTokens, window, system]) => {
        const streamed = [];
        return chatlens.run({system, messages, window, maxTokens}, {onToken: t => streamed.push(t)})
            .then(record => ({record, streamed}));
    }""", [messages, max_tokens, window, system])


def test_replies_in_the_page_equal_the_cli_a_second_turn_reuses_the_cache_and_stop_keeps_a_partial_reply(
        browser, server):
    """One page, four turns on the mirror's Hugging Face folder (bf16): each is compared with the
    command line on the same folder."""
    app = App(browser, server)
    try:
        page = open_with_the_model(app)
        folder = server.mirror.files["config.json"].parent
        first = [{"role": "user", "content": "Hi!"}]
        got = page_run(page, first, 3)
        want = cli_record(folder, first, 3)
        rec = got["record"]
        assert rec["prompt_ids"] == want["prompt_ids"] and rec["reply_ids"] == want["reply_ids"]
        assert rec["reply_text"] == want["reply_text"] and rec["backend"].startswith("webgpu: ")
        assert [t["token"] for t in got["streamed"] if t["token"] >= 0] == rec["reply_ids"]
        assert "".join(t["text"] for t in got["streamed"]) == rec["reply_text"]
        assert rec["timings"]["prefill_ms"] > 0

        second = first + [{"role": "assistant", "content": rec["reply_text"]}, {"role": "user", "content": "And you?"}]
        again = page_run(page, second, 3)["record"]
        assert again["reply_ids"] == cli_record(folder, second, 3)["reply_ids"]
        # `chatlens chat` keeps its cache between the same two turns: the page reuses what it reuses.
        chat = run_cli("chat", "--window", "256", "--max-tokens", "3", "--system", SYSTEM,
                       stdin="Hi!\n/show\nAnd you?\n/show\n", model=folder)
        assert chat.returncode == 0, chat.stderr
        counts = re.findall(r"reused from the cache: (\d+) tokens; computed: (\d+) tokens", chat.stdout)
        replies = re.findall(r"reply \(\d+ tokens, stop: \w+\): (.*)", chat.stdout)
        assert len(counts) == 2 and int(counts[1][0]) > 0
        assert (again["reused_tokens"], again["computed_tokens"]) == tuple(int(n) for n in counts[1])
        assert [rec["reply_text"], again["reply_text"]] == [eval(r) for r in replies]  # /show prints repr()
        app.shot("reply-in-the-page")

        # Through the page: Stop halts the reply and keeps what it wrote; the next turn goes on.
        page.click("#new-conversation")
        page.select_option("#preset", "custom")
        page.fill("#custom-system", SYSTEM)
        page.select_option("#window", "256")
        page.fill("#draft", "Tell me a story about a lighthouse.")
        page.press("#draft", "Enter")
        page.wait_for_selector("#stop:not([hidden])")
        page.wait_for_function("() => document.querySelector('#chat .msg.assistant.is-streaming .content')?.textContent.length > 0",
                               timeout=TURN_MS)
        page.click("#stop")
        page.wait_for_selector("#chat .msg.assistant:not(.is-streaming) .meta", timeout=TURN_MS)
        assert "stopped" in page.text_content("#chat .msg.assistant .meta")
        assert page.is_hidden("#stop")
        partial = page.text_content("#chat .msg.assistant .content")
        assert partial
        app.shot("reply-stopped")
        history = [{"role": "user", "content": "Tell me a story about a lighthouse."}, {"role": "assistant", "content": partial},
                   {"role": "user", "content": "Thanks."}]
        nxt = page_run(page, history, 1)["record"]
        assert nxt["reply_ids"] == cli_record(folder, history, 1)["reply_ids"] and nxt["reused_tokens"] > 0
    finally:
        app.close()


def test_a_gguf_source_replies_in_the_page_as_the_cli_does(browser, server):
    mirror = server.mirror
    app = App(browser, server)
    try:
        page = open_with_the_model(app, f"?model={server.url}{mirror.base}{mirror.gguf}")
        first = [{"role": "user", "content": "Hi!"}]
        rec = page_run(page, first, 3)["record"]
        want = cli_record(mirror.files[mirror.gguf], first, 3)
        assert rec["reply_ids"] == want["reply_ids"] and rec["reply_text"] == want["reply_text"]
    finally:
        app.close()
