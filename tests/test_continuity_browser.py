"""Nothing lost, nothing promised that does not happen: in Chromium, a reload in the middle of a
reply keeps the message and what the reply had written; the prompt's progress moves while it is
read; the draft is previewed while a reply is written; a page that cannot compute replies, or
cannot reach the model's host, says so in a sentence and offers what works; a message after one
that got no reply is not read as two of the learner's messages in a row.

The tiny random model (tests/tiny_model.py) runs the machinery. What a reply's progress and a reload
in its middle need is a GPU slow enough to watch: the test makes the worker's GPU that slow, whatever
the adapter (`slow_gpu`: each completion it waits for comes later), so that they hold on a fast GPU as
on this machine's SwiftShader. Each changed state is saved at 1400x900 and 390x844
(artifacts/screenshots/).
"""

import json
import re

import pytest

from conftest import cli_in_process
from webapp import SHOTS, App, slow_gpu  # the `server`, `browser` and `python_snapshot` fixtures: tests/conftest.py

pytestmark = pytest.mark.browser

SYSTEM = "Be brief."
TURN_MS = 300_000  # a prompt read and a token of the tiny model on a slowed GPU, on a busy machine
SIZES = {"wide": (1400, 900), "phone": (390, 844)}


def shots(page, name, at="#chat-title"):
    """The page as it is now, at both sizes (the wide one last: the tests' own size), scrolled to
    `at` (the chat's title: the chat and the panel beside it, or above it on a phone)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for size in ("phone", "wide"):
        w, h = SIZES[size]
        page.set_viewport_size({"width": w, "height": h})
        page.evaluate("(at) => document.querySelector(at)?.scrollIntoView({block: 'start', behavior: 'instant'})", at)
        page.screenshot(path=str(SHOTS / f"{name}-{size}.png"))


@pytest.fixture(scope="module")
def tiny(server):
    """The tiny random model beside the site: stored and loaded in seconds."""
    from tiny_model import write_tiny_model

    write_tiny_model(server.root / "tiny-continuity" / "model", server.mirror.files["config.json"].parent, seed=5)
    return f"{server.url}tiny-continuity/model/"


@pytest.fixture(scope="module")
def deep(server):
    """The tiny model with 16 layers: a GPU step of 83 dispatches, more than the 64 the page runs
    whole before it has timed the GPU (site/js/gpu/executor.mjs), so its first prompt chunk goes
    in parts, each of which says how far the read has got."""
    from tiny_model import write_tiny_model

    folder = write_tiny_model(server.root / "tiny-continuity" / "deep", server.mirror.files["config.json"].parent,
                              seed=5, n_layers=16)
    return folder, f"{server.url}tiny-continuity/deep/"


# Every localStorage write, with how many tokens the live reply being written had then (0: none
# is being written): a token writes only its own reply, never the whole conversation.
COUNT_WRITES = """(() => {
  const set = Storage.prototype.setItem;
  window.__writes = [];
  Storage.prototype.setItem = function (key, value) {
    const turn = window.chatlens?.pageState?.live.turns.at(-1);
    window.__writes.push([key, turn?.streaming?.reply_ids.length ?? 0]);
    return set.call(this, key, value);
  };
})();"""


def metas(page):
    return page.eval_on_selector_all("#chat .msg .meta", "ms => ms.map(m => m.textContent)")


def bubbles(page):
    return page.eval_on_selector_all("#chat .msg", "ms => ms.map(m => [m.classList.contains('user') ? 'user' : "
                                     "'assistant', m.querySelector('.content').textContent])")


def send_live(page, text):
    page.fill("#draft", text)
    page.press("#draft", "Enter")


# -- a reply: its progress, a preview meanwhile, a reload in the middle ----------------------------------------------


def test_a_reply_shows_its_read_moving_previews_a_draft_and_a_reload_loses_nothing(browser, server, python_snapshot,
                                                                                  deep):
    folder, url = deep
    app = App(browser, server, snapshot=python_snapshot)
    app.context.add_init_script(COUNT_WRITES)
    try:
        page = app.open(f"?jspi=off&model={url}")
        assert page.evaluate("chatlens.downloadModel()")["complete"]
        assert page.evaluate("chatlens.modelReady")["kind"] == "webgpu"
        slow_gpu(page)
        page.select_option("#preset", "custom")
        page.fill("#custom-system", SYSTEM)
        page.select_option("#window", "256")
        send_live(page, "Hi!")
        # The first GPU step reads the whole prompt, in parts on this slow GPU: the line moves.
        reading = "(document.querySelector('#chat .msg.assistant.is-streaming .meta')?.textContent ?? '')"
        page.wait_for_function(f"() => / · part \\d+ of /.test({reading})", timeout=TURN_MS)
        first = page.evaluate(f"() => {reading}")
        found = re.fullmatch(r"reading the prompt: 0 of (\d+) tokens · part (\d+) of (\d+) of the GPU's step for the "
                             r"next (\d+) tokens, \d+ s", first)
        assert found, first
        preview = page.evaluate("m => chatlens.preview({system: 'Be brief.', messages: m, window: 256})",
                                [{"role": "user", "content": "Hi!"}])
        assert int(found[1]) == preview["used"] == int(found[4])  # the whole prompt, one step, as the preview counts it
        assert 1 <= int(found[2]) <= int(found[3])
        page.wait_for_function(f"(n) => Number(/ · part (\\d+) of /.exec({reading})?.[1]) > n", arg=int(found[2]),
                               timeout=TURN_MS)  # the figure moves while the step is read
        shots(page, "continuity-reading-progress")

        # A draft typed meanwhile is previewed, after the reply as far as it has got.
        page.fill("#draft", "And you?")
        page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith("
                               "'Preview: what the model would read if you sent this after the reply being written')")
        assert page.evaluate("chatlens.writing") is True
        text = app.prompt_text()
        assert "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n" in text and "And you?" in text
        assert text.index("Hi!") < text.index("And you?")
        shots(page, "continuity-preview-during-a-reply")

        # A reload once a token is written: the message, and the reply as far as it got, marked.
        page.wait_for_function("() => document.querySelector('#chat .msg.assistant.is-streaming .content')?.textContent.length > 0",
                               timeout=TURN_MS)
        # its tokens wrote the reply by itself (at most once a second), never the conversation again
        during = {key for key, tokens in page.evaluate("window.__writes") if tokens}
        assert "chatlens.live.growing" in during and "chatlens.live" not in during, during
        page.reload()  # the page hidden first: the reply as far as it was shown is written
        app.wait_ready()
        page.wait_for_function("() => document.querySelectorAll('#chat .msg').length === 2")
        (who, said), (who2, partial) = bubbles(page)
        assert (who, said, who2) == ("user", "Hi!", "assistant")
        whole = cli_in_process("run", "--window", "256", "--system", SYSTEM, stdin=json.dumps({"messages": [
            {"role": "user", "content": "Hi!"}]}), model=folder)
        assert partial and json.loads(whole.stdout)["reply_text"].startswith(partial)  # the reply as far as it got
        assert metas(page)[1].endswith("stopped: the page was reloaded while it was written")
        shots(page, "continuity-reloaded-mid-reply")
        # its tokens as far as it got, read again: the panel draws them, to inspect (issue 43.3)
        page.fill("#draft", "")
        page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.endsWith('(the reload stopped it)')")
        chips = page.eval_on_selector_all("#reads .reply-tokens .tok", "cs => cs.map((c) => c.querySelector('.t').textContent)")
        assert chips and "".join(chips).replace("\u00b7", " ") == partial, (chips, partial)

        # A reload while the prompt is read: the message comes back with no reply, in the box to send again.
        slow_gpu(page)
        send_live(page, "Tell me a joke.")
        page.wait_for_function(f"() => {reading}.startsWith('reading the prompt')", timeout=TURN_MS)
        page.reload()
        app.wait_ready()
        page.wait_for_function("() => document.querySelectorAll('#chat .msg').length === 3")
        assert bubbles(page)[2] == ["user", "Tell me a joke."]
        assert "no reply: the page was reloaded while the model read it" in metas(page)[2]
        assert page.input_value("#draft") == "Tell me a joke."
        shots(page, "continuity-reloaded-while-read")
        # Sent again, it takes the unanswered message's place: never two of the learner's in a row.
        slow_gpu(page)
        page.press("#draft", "Enter")
        page.wait_for_function("() => chatlens.writing && document.querySelector('#chat .msg.assistant.is-streaming')",
                               timeout=TURN_MS)
        assert [b[0] for b in bubbles(page)] == ["user", "assistant", "user", "assistant"]
        assert app.prompt_text().count("Tell me a joke.") == 1
        page.click("#stop")
        page.wait_for_function("() => !chatlens.writing", timeout=TURN_MS)
    finally:
        app.close()
    assert not app.errors, app.errors


# -- what computes replies, and what a host can reach ---------------------------------------------------------------

AUTO_ONCE = """try {
    if (!sessionStorage.getItem('auto-once')) {
        sessionStorage.setItem('auto-once', '1');
        localStorage.setItem('chatlens.backend', 'auto');
    }
} catch {}"""


def test_auto_without_numpy_names_the_software_gpu_and_offers_it(browser, server, python_snapshot, tiny):
    app = App(browser, server, snapshot=python_snapshot)
    app.context.add_init_script(AUTO_ONCE)  # `auto`, as a learner who chose nothing has it
    try:
        page = app.open(f"?model={tiny}")
        cdn = page.evaluate("new URL(chatlens.build.pyodide.packages).host")
        page.route(f"https://{cdn}/**", lambda route: route.abort())  # Pyodide's CDN out of reach
        app.context.route(f"https://{cdn}/**", lambda route: route.abort())
        assert page.evaluate("chatlens.backend") == "auto"
        page.evaluate("chatlens.downloadModel()")
        page.wait_for_function("() => chatlens.model?.error || chatlens.model?.backend", timeout=300_000)
        error = page.evaluate("chatlens.model.error")
        assert "NumPy: NumPy" not in error and "(NumPy" not in error
        assert error.startswith("NumPy, which computes replies in this browser, could not be fetched")
        assert "This browser's software GPU (" in error and "can compute replies instead, slowly" in error
        page.wait_for_selector("#chat-banner #banner-action")
        banner = page.text_content("#chat-banner")
        assert error in banner and "NumPy: NumPy" not in page.text_content("#status")
        shots(page, "continuity-auto-offers-webgpu")
        page.click("#banner-action")  # the way out: WebGPU, saved, the page reloads with it
        page.wait_for_function("() => window.chatlens?.model?.backend", timeout=300_000)
        assert page.evaluate("chatlens.backend") == "webgpu" and page.input_value("#backend") == "webgpu"
        assert page.evaluate("chatlens.model.kind") == "webgpu" and page.is_hidden("#chat-banner")
    finally:
        app.close()
    assert not app.errors, app.errors


@pytest.fixture
def hubless(server):
    """The site on a static host with no mirror beside it: the model's default source is the Hub."""
    from chatlens.host.serve import SiteServer

    srv = SiteServer(server.root, mirror=None, isolated=False).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_a_host_that_cannot_reach_the_hub_says_so_and_offers_recorded_mode_and_a_retry(browser, hubless, server,
                                                                                       python_snapshot):
    app = App(browser, hubless, snapshot=python_snapshot)
    blocked = {"on": True}
    mirror = server.mirror.files["config.json"].parent  # the same tokenizer and template, for the retry

    def hub(route):
        if blocked["on"]:
            return route.abort()
        name = route.request.url.rsplit("/", 1)[-1]
        path = mirror / name
        return route.fulfill(status=200, body=path.read_bytes(), headers={"Access-Control-Allow-Origin": "*"}) \
            if path.is_file() else route.fulfill(status=404, body=b"", headers={"Access-Control-Allow-Origin": "*"})

    app.context.route("https://huggingface.co/**", hub)
    try:
        page = app.open(ready=False)
        page.wait_for_selector("#reads-failure", timeout=120_000)
        text = page.text_content("#reads-failure")
        assert text.startswith("This page cannot reach huggingface.co, where the model's tokenizer and chat template are")
        assert "Recorded mode works without it" in text
        page.wait_for_selector("#model-body #source-error")  # the model box's own account of the source, too
        for where in ("#reads", "#status", "#chat", "body"):
            assert "Failed to fetch" not in page.text_content(where), where
        assert page.is_visible("#failure-recorded") and page.is_visible("#failure-retry")
        assert text in page.text_content("#chat-banner")  # above the chat too: a phone shows it first
        assert page.is_visible("#banner-recorded") and page.is_visible("#banner-retry")
        shots(page, "continuity-hub-unreachable")
        page.click("#banner-recorded")
        page.wait_for_function("() => document.body.dataset.mode === 'recorded' && document.querySelector('#chat .msg.assistant')")
        page.click("#mode-live")
        page.wait_for_selector("#failure-retry")
        blocked["on"] = False  # the network is back: a retry reads the text side, and previews work
        page.click("#failure-retry")
        app.wait_ready()
        app.type_draft("Hello again")
        assert "<|im_start|>user\nHello again<|im_end|>" in app.prompt_text()
    finally:
        app.close()
    assert not app.errors, app.errors


# -- a message after one that got no reply ------------------------------------------------------------------------------


def test_without_a_model_no_caption_claims_a_read_and_two_messages_in_a_row_are_said(app):
    """Without the model the messages still fill the window, one after another (the lesson's
    window can be watched filling with no download): the page says plainly that nothing was read,
    and why two of the learner's messages come in a row."""
    app = app
    page = app.open()
    app.send("Hi! My name is Priya.")
    page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Turn 1')")
    caption = page.text_content("#reads-caption")
    assert caption == "Turn 1: what the model would have read; it read nothing, since no reply could be had"
    app.type_draft("What is my name?")
    assert page.text_content("#reads-caption").endswith(
        "if you sent this now; with no reply to your message before, the two come one after the other")
    app.send("What is my name?")
    page.wait_for_function("() => document.getElementById('reads-caption')?.textContent.startsWith('Turn 2')")
    caption = page.text_content("#reads-caption")
    assert "when you sent it" not in caption
    assert caption == ("Turn 2: what the model would have read; it read nothing, since no reply could be had; "
                       "with no reply to your message before, the two come one after the other")
    assert app.prompt_text().count("<|im_start|>user") == 2
    assert [b[1] for b in bubbles(page)] == ["Hi! My name is Priya.", "What is my name?"]
    assert "a second one would be read as two of your messages in a row" in page.text_content("#chat-banner")
    shots(page, "continuity-no-reply-caption")
    shots(page, "continuity-no-reply-panel", at="#reads-caption")
