"""Replies computed in the page, in Chromium on SwiftShader's WebGPU: the model is downloaded into
the page's store, its weights uploaded to the GPU, and the worker's JavaScript pulls each reply
from Python's greedy loop, a step at a time, with JSPI hidden (?jspi=off: nothing needs it). Every
reply is compared with the command line's on the same files; the reply controls (Stop while the
prompt is read or after the first token, a preview during a reply, New conversation during one)
are tried on a page served without cross-origin isolation, as most static hosts serve it. (The
real model's GGUF on such a host replies in test_plain_browser.py's France test.)

SwiftShader is a CPU emulation of a GPU: a step of the real model takes seconds to tens of
seconds here, so replies are a few tokens and prompts short (a brief custom system prompt).
"""

import json
import re

import pytest

from webapp import App, open_with_the_model, slow_gpu  # the `server`, `browser` and `python_snapshot` fixtures: tests/conftest.py
from conftest import cli_in_process, load_once

pytestmark = pytest.mark.browser

SYSTEM = "Be brief."
TURN_MS = 900_000  # one short reply on SwiftShader, on a busy machine


def cli_record(model, messages, max_tokens, window=256, system=SYSTEM):
    """`python -m chatlens run` on the same files: the record the page's must equal (run in this process)."""
    done = cli_in_process("run", "--window", str(window), "--max-tokens", str(max_tokens), "--system", system,
                   stdin=json.dumps({"messages": messages}), model=model)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def page_run(page, messages, max_tokens, window=256, system=SYSTEM):
    """chatlens.run in the page, with the tokens it streamed."""
    return page.evaluate("""([messages, maxTokens, window, system]) => {
        const streamed = [];
        return chatlens.run({system, messages, window, maxTokens}, {onToken: t => streamed.push(t)})
            .then(record => ({record, streamed}));
    }""", [messages, max_tokens, window, system])


def test_replies_in_the_page_equal_the_cli_and_a_second_turn_reuses_the_cache(browser, server, python_snapshot):
    """One page, two turns on the mirror's Hugging Face folder (bf16): each is compared with the
    command line on the same folder, and the second's reuse with `chatlens chat`'s. (The Stop
    button's partial reply and the turn after it: test_the_reply_controls_on_a_plain_host.)"""
    app = App(browser, server, snapshot=python_snapshot)
    try:
        page = open_with_the_model(app, "?jspi=off")
        folder = server.mirror.files["config.json"].parent
        first = [{"role": "user", "content": "Hi!"}]
        got = page_run(page, first, 3)
        want = cli_record(folder, first, 3)
        rec = got["record"]
        assert rec["prompt_ids"] == want["prompt_ids"] and rec["reply_ids"] == want["reply_ids"]
        assert rec["reply_text"] == want["reply_text"] and rec["backend"].startswith("webgpu: ")
        assert [t["id"] for t in got["streamed"] if t["id"] >= 0] == rec["reply_ids"]
        assert [t["bytes"] for t in got["streamed"] if t["id"] >= 0] == rec["reply_bytes"]
        assert "".join(t["text"] for t in got["streamed"]) == rec["reply_text"]
        assert rec["timings"]["prefill_ms"] > 0

        second = first + [{"role": "assistant", "content": rec["reply_text"]}, {"role": "user", "content": "And you?"}]
        again = page_run(page, second, 3)["record"]
        assert again["reply_ids"] == cli_record(folder, second, 3)["reply_ids"]
        # `chatlens chat` keeps its cache between the same two turns: the page reuses what it reuses.
        chat = cli_in_process("chat", "--window", "256", "--max-tokens", "3", "--system", SYSTEM,
                              stdin="Hi!\n/show\nAnd you?\n/show\n", model=folder)
        assert chat.returncode == 0, chat.stderr
        counts = re.findall(r"reused from the cache: (\d+) tokens; computed: (\d+) tokens", chat.stdout)
        replies = re.findall(r"reply \(\d+ tokens, stop: \w+\): (.*)", chat.stdout)
        assert len(counts) == 2 and int(counts[1][0]) > 0
        assert (again["reused_tokens"], again["computed_tokens"]) == tuple(int(n) for n in counts[1])
        assert [rec["reply_text"], again["reply_text"]] == [eval(r) for r in replies]  # /show prints repr()
        app.shot("reply-in-the-page")

    finally:
        app.close()


LONG = " ".join(["The lighthouse keeper counted the ships that passed the rocks each night and wrote their names"
                 " in a book."] * 14)  # several prompt chunks of the GPU program


@pytest.fixture(scope="module")
def tiny(server):
    """The tiny random model (tests/tiny_model.py) beside the site: replies in seconds on SwiftShader."""
    from tiny_model import write_tiny_model

    folder = write_tiny_model(server.root / "tiny-replies" / "model", server.mirror.files["config.json"].parent, seed=3)
    return folder, f"{server.url}tiny-replies/model/"


def test_a_signal_stops_a_reply_while_its_prompt_is_read_or_once_it_writes_or_before_it_starts(app, tiny):
    folder, url = tiny
    page = open_with_the_model(app, f"?model={url}", weights="no reference for these weights")
    long, short = [{"role": "user", "content": LONG + " " + LONG}], [{"role": "user", "content": "Hi!"}]
    got = page.evaluate("""async ([system, long, short]) => {
        // run() aborted by its signal at its first prompt progress ('reading') or its first token ('writing')
        const cut = async (messages, when) => {
            const stopper = new AbortController();
            const seen = {progress: 0, tokens: []};
            const record = await chatlens.run({system, messages, window: 1024, maxTokens: 24}, {
                signal: stopper.signal,
                onProgress: () => (seen.progress += 1, when === 'reading' && stopper.abort()),
                onToken: (t) => (t.id >= 0 && seen.tokens.push(t.id), when === 'writing' && stopper.abort()),
            });
            return {...seen, ids: record.reply_ids, stop: record.stop_reason, writing: chatlens.writing};
        };
        const reading = await cut(long, 'reading');
        const writing = await cut(short, 'writing');
        // a signal aborted before the call: the run rejects and nothing is written
        const early = new AbortController();
        early.abort();
        const idle = await chatlens.run({system, messages: short, window: 1024, maxTokens: 24}, {signal: early.signal})
            .then(() => null, (e) => ({name: e.name, writing: chatlens.writing}));
        // aborted while it waits behind another reply (replies are written one at a time): it
        // settles "stopped" once it has had its turn, and the reply before it is written whole
        const queued = new AbortController();
        const first = chatlens.run({system, messages: short, window: 1024, maxTokens: 24}, {onToken: () => queued.abort()});
        const second = chatlens.run({system, messages: short, window: 1024, maxTokens: 24}, {signal: queued.signal});
        const [whole, waited] = await Promise.all([first, second]);
        return {reading, writing, idle, writingAfter: chatlens.writing, whole: whole.reply_ids,
                waited: {ids: waited.reply_ids, stop: waited.stop_reason}};
    }""", [SYSTEM, long, short])
    want = cli_record(folder, short, 24, window=1024)["reply_ids"]
    assert len(want) == 24  # the tiny model never ends a reply: a reply that was not stopped has 24 tokens

    reading = got["reading"]
    assert reading["progress"] >= 1 and reading["stop"] == "stopped" and reading["ids"] == reading["tokens"] == []
    writing = got["writing"]
    assert writing["stop"] == "stopped" and 1 <= len(writing["ids"]) < 24 and writing["ids"] == want[:len(writing["ids"])]
    assert writing["tokens"] == writing["ids"] and not reading["writing"] and not writing["writing"]

    assert got["idle"] == {"name": "AbortError", "writing": False}
    assert got["whole"] == want and got["waited"]["stop"] == "stopped" and got["waited"]["ids"] == []
    assert got["writingAfter"] is False


def test_the_reply_controls_on_a_plain_host(browser, plain_server, python_snapshot, tiny):
    """The tiny model on a page without cross-origin isolation (JSPI hidden), its GPU made slow
    (webapp.slow_gpu): Stop right after the first token keeps exactly it; the Stop button keeps a
    partial reply, and the next turn goes on from it as the command line does; Stop while a long
    prompt is read ends the reply with no token, a preview asked meanwhile answered; New
    conversation during a reply stops it and the next message sends at once."""
    from chatlens.chat import ChatSession

    folder, _ = tiny
    app = App(browser, plain_server, snapshot=python_snapshot)
    try:
        page = open_with_the_model(app, f"?jspi=off&model={plain_server.url}tiny-replies/model/",
                                   weights="no reference for these weights")
        assert page.evaluate("crossOriginIsolated") is False
        first = [{"role": "user", "content": "Hi!"}]
        rec = page_run(page, first, 3)["record"]
        assert rec["reply_ids"] == cli_record(folder, first, 3)["reply_ids"]

        # Stop right after the first token: exactly that token is kept, the record says stopped,
        # and the next turn reuses what the command line's chat session reuses for that history.
        second = first + [{"role": "assistant", "content": rec["reply_text"]}, {"role": "user", "content": "And you?"}]
        got = page.evaluate("""([messages, system]) => {
            const streamed = [], stopper = new AbortController();
            return chatlens.run({system, messages, window: 256, maxTokens: 3}, {signal: stopper.signal, onToken: (t) => {
                if (streamed.push(t) === 1) stopper.abort();
            }}).then((record) => ({record, streamed}));
        }""", [second, SYSTEM])
        stopped = got["record"]
        assert stopped["stop_reason"] == "stopped" and len(stopped["reply_ids"]) == 1
        assert [t["id"] for t in got["streamed"] if t["id"] >= 0] == stopped["reply_ids"]
        session = ChatSession(load_once(folder), window=256, max_tokens=3, system=SYSTEM)
        session.send("Hi!")
        asked = iter([True])
        assert session.send("And you?", should_stop=lambda: next(asked)).reply_ids == stopped["reply_ids"]
        third = second + [{"role": "assistant", "content": stopped["reply_text"]}, {"role": "user", "content": "Bye."}]
        preview = page.evaluate("(args) => chatlens.preview(args)", {"system": SYSTEM, "messages": third, "window": 256})
        assert preview["reused_tokens"] == session.preview("Bye.").reused_tokens > 0

        # Through the page: the Stop button halts the reply and keeps what it wrote; the next turn goes on.
        slow_gpu(page, ms=500)  # each GPU completion half a second later: a reply to stop, a read to stop in
        page.click("#new-conversation")
        page.select_option("#preset", "custom")
        page.fill("#custom-system", SYSTEM)  # the page's default window: room for LONG below
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

        # Stop while a long prompt is read: the reply ends within a part of the first chunk, with
        # no reply token; a preview asked meanwhile is answered while the reply is being written.
        page.click("#new-conversation")
        page.wait_for_function("() => document.querySelectorAll('#chat .msg').length === 0")
        page.fill("#draft", LONG)
        page.press("#draft", "Enter")
        page.wait_for_function("() => document.querySelector('#chat .msg.assistant.is-streaming .meta')?.textContent"
                               ".startsWith('reading the prompt')", timeout=TURN_MS)
        assert page.text_content("#status-text") == "Writing a reply"
        during = page.evaluate("""(args) => chatlens.preview(args).then((r) => ({used: r.used, writing: chatlens.writing}))""",
                               {"system": SYSTEM, "messages": [{"role": "user", "content": "Hello"}], "window": 256})
        hello = page.evaluate("(args) => chatlens.preview(args)",
                              {"system": SYSTEM, "messages": [{"role": "user", "content": "Hello"}], "window": 256})
        assert during["writing"] is True and during["used"] == hello["used"]
        page.click("#stop")
        page.wait_for_selector("#chat .msg.assistant:not(.is-streaming) .meta", timeout=TURN_MS)
        assert "stopped" in page.text_content("#chat .msg.assistant .meta")
        assert page.text_content("#chat .msg.assistant .content") == ""
        assert page.evaluate("chatlens.writing") is False

        # New conversation during a reply stops it; the next message sends at once.
        page.fill("#draft", LONG)
        page.press("#draft", "Enter")
        page.wait_for_function("() => chatlens.writing && document.querySelector('#chat .msg.assistant.is-streaming')",
                               timeout=TURN_MS)
        page.click("#new-conversation")
        page.wait_for_function("() => !chatlens.writing && document.querySelectorAll('#chat .msg').length === 0",
                               timeout=TURN_MS)
        assert page.is_enabled("#send")
        page.fill("#draft", "Hello again.")
        page.press("#draft", "Enter")
        page.wait_for_function("() => chatlens.writing && document.querySelectorAll('#chat .msg.user').length === 1",
                               timeout=TURN_MS)
        page.click("#stop")
        page.wait_for_function("() => !chatlens.writing", timeout=TURN_MS)
        app.shot("reply-controls")
    finally:
        app.close()
    assert not app.errors, app.errors
