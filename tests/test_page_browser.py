"""End-to-end tests of the site in Debian's Chromium, driven by Playwright.

One server for the session: the site built into a temporary folder, served on a free local
port with the same-origin model mirror `serve` uses. Each test gets a fresh browser context
(a fresh profile: no storage, no cache). Screenshots of the main states go to
artifacts/screenshots/ for people to look at.
"""

import json
import re
import socket

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")

from chatlens import hub as chatlens_hub  # noqa: E402
from chatlens.host.serve import SiteServer  # noqa: E402
from webapp import BOOT_MS, App, cli_run  # noqa: E402

pytestmark = pytest.mark.browser

LONG_1 = ("Tell me about the history of the printing press, from Gutenberg's workshop in Mainz to the "
          "newspapers of the nineteenth century.")
LONG_2 = "Now compare that with how books were copied by hand in monasteries before the press, and how long one copy took."
LONG_3 = "Which inventions after the printing press changed reading the most, and why? Give me three, with their years."
SENT = ["Hi! My name is Priya.", LONG_1, "Give me one tip for sleeping better.", LONG_2, LONG_3]
DRAFT = "What is my name? And what did I ask you about printing, and who built the first press in Mainz?"


def test_boots_from_the_local_build_with_no_request_leaving_the_server(app, text_side):
    page = app.open()
    assert page.evaluate("crossOriginIsolated") is True
    info = page.evaluate("chatlens.ready")
    assert info["pyodide"] == "314.0.7"
    assert info["source"]["origin"] == "mirror" and info["source"]["kind"] == "hf"
    assert info["info"]["eos_token"] == "<|im_end|>"
    urls = app.urls()
    assert urls and all(u.startswith(app.server.url) for u in urls), [u for u in urls if not u.startswith(app.server.url)]
    loaded = {u[len(app.server.url):] for u in urls}
    built = json.loads((app.server.root / "build.json").read_text())
    assert {"pyodide/pyodide.mjs", "pyodide/pyodide.asm.wasm", "pyodide/python_stdlib.zip", *built["wheels"]} <= loaded
    by_page = [r.url for r in app.requests if r.service_worker is None]  # the service worker precaches its own copy
    assert [u for u in by_page if u.endswith("/build.json")] == [app.server.url + "build.json"]  # read once, by the page
    assert page.evaluate("chatlens.build") == built
    assert page.text_content("#reply-limit") == "96" and page.evaluate("chatlens.settings.reply_limit") == 96
    # the text side only: the model's small files, no weights
    assert not [u for u in urls if u.endswith((".safetensors", ".gguf"))]
    record = page.evaluate("chatlens.preview({messages: [{role: 'user', content: 'Who are you?'}], window: 1024})")
    want = cpython_preview(text_side, "Who are you?")  # the same files read by CPython's chatlens
    assert [p["label"] for p in record["pieces"]] == ["system (template default)", "new message", "generation header"]
    assert [(p["label"], p["count"]) for p in record["pieces"]] == [(p["label"], p["count"]) for p in want.pieces]
    assert record["reserve"] == record["max_tokens"] == 96  # the page's reply limit, given by the API
    assert record["prompt_text"].endswith("<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n")
    error = page.evaluate("chatlens.run({messages: [{role: 'user', content: 'Hi'}], window: 1024})"
                          ".then(() => null, e => [e.name, e.message])")
    assert error == ["ChatlensError", "the model's weights are not loaded yet: replies need them"]


def cpython_preview(text, message, window=1024):
    """What CPython's chatlens says the model reads for one message (the template's default system
    prompt), on a text side read from the same files as the page's."""
    from chatlens.chat import preview

    return preview(text.tokenizer, text.template, system=None, messages=[{"role": "user", "content": message}], window=window)


SNAPSHOTS = "python-snapshot"  # site/js/worker/python.mjs


@pytest.fixture
def cold_app(browser, server):
    """A fresh context with nothing in Cache Storage: its first page boots Python as a first visit does."""
    from webapp import App

    a = App(browser, server, snapshot=None)
    yield a
    a.close()
    assert not a.errors, a.errors


def test_a_reload_starts_python_from_the_snapshot_the_first_boot_saved(cold_app):
    """The first boot saves Python's memory once chatlens is imported (a Pyodide memory snapshot
    in Cache Storage, keyed by build.json's pyodide.snapshot_id); a reload starts from it and
    previews the same; a snapshot that does not load is dropped and the boot goes on without it."""
    app = cold_app
    page = app.open()
    assert page.evaluate("chatlens.ready.then(r => r.snapshot)") == "saved"
    messages = [{"role": "user", "content": "Who are you? Ünïcödé 東京 🙂"}]
    first = page.evaluate("m => chatlens.preview({messages: m, window: 256})", messages)
    key = app.server.url + "python-snapshot/" + json.loads((app.server.root / "build.json").read_text())["pyodide"]["snapshot_id"]
    page.wait_for_function("([name, key]) => caches.open(name).then(c => c.match(key)).then(Boolean)", arg=[SNAPSHOTS, key],
                           timeout=60_000)
    page.reload()
    app.wait_ready()
    assert page.evaluate("chatlens.ready.then(r => r.snapshot)") == "restored"
    assert page.evaluate("m => chatlens.preview({messages: m, window: 256})", messages) == first
    # a lazily imported module still loads (the wheels' files are unpacked again: a snapshot holds memory only)
    assert page.evaluate("chatlens.runPython({code: 'import chatlens.by_hand; print(chatlens.by_hand.DEFAULT_SYSTEM)'})")["stdout"]
    page.evaluate("""([name, key]) => caches.open(name).then(c => c.put(key, new Response(new Uint8Array(4096))))""",
                  [SNAPSHOTS, key])
    page.reload()
    app.wait_ready()
    assert page.evaluate("chatlens.ready.then(r => r.snapshot)") == "saved"  # booted as a first visit does
    assert page.evaluate("m => chatlens.preview({messages: m, window: 256})", messages) == first
    # the NumPy path loads a binary package into Python after the boot: no snapshot there
    page.goto(app.server.url + "?backend=numpy")
    app.wait_ready()
    assert page.evaluate("chatlens.ready.then(r => r.snapshot)") == "none"


def test_recorded_mode_shows_every_turn_and_downloads_no_weights(app):
    recorded_path = app.server.root / "recorded.json"
    if not recorded_path.exists():
        pytest.skip("site/recorded.json is not there yet (python -m chatlens record)")
    doc = json.loads(recorded_path.read_text())
    app.context.clock.set_fixed_time("2031-01-01T12:00:00Z")
    page = app.open("?mode=recorded", ready=False)
    page.wait_for_selector("#reads-caption")
    about = page.text_content("#rec-about")
    assert doc["model"]["file"] in about and doc["model"]["sha256"][:8] in about
    for conv in doc["conversations"]:
        page.select_option("#preset", conv["preset"])
        page.select_option("#window", str(conv["window"]))
        for i, turn in enumerate(conv["turns"]):
            if i == 0:
                while page.is_enabled("#rec-prev"):
                    page.click("#rec-prev")
            else:
                page.click("#rec-next")
            page.wait_for_function("t => document.getElementById('rec-pos').textContent.startsWith(t)", arg=f"Turn {i + 1} of")
            where = (conv["preset"], conv["window"], i)
            assert app.prompt_text() == turn["prompt_text"], where
            assert app.pieces() == [[p["label"], p["count"]] for p in turn["pieces"]], where
            assert app.dropped() == [[d["message_index"], d["count"]] for d in turn["dropped_messages"]], where
            assert page.text_content(".reply-text") == turn["reply_text"], where
            assert page.text_content(".reply code.stop") == turn["stop_reason"], where
            bubbles = page.eval_on_selector_all("#chat .msg.assistant .content", "b => b.map(e => e.textContent)")
            assert bubbles == [t["reply_text"] for t in conv["turns"][: i + 1]], where
            if conv["preset"] == "pirate" and conv["window"] == 256 and i == len(conv["turns"]) - 1:
                app.shot("recorded-mode")
    assert not [u for u in app.urls() if u.endswith((".safetensors", ".gguf"))]
    assert not [u for u in app.urls() if not u.startswith(app.server.url)]  # nothing leaves the local server
    # Recorded turns never complete a challenge (only live turns with a reply do), but show
    # each as "seen in the recording": "Who are you?" with and without a system prompt, dropped
    # turns at 256, and the year: the browser's clock is years past the recording here, so only a
    # date-preset reply that states its own date's year shows it.
    assert page.evaluate("new Date().getFullYear()") == 2031
    assert any(c["preset"] == "date" and re.search(r", (\d{4})\.$", t["system"])[1] in (t["reply_text"] or "")
               for c in doc["conversations"] for t in c["turns"]), "no recorded reply states its date's year"
    assert page.eval_on_selector_all("#challenges li.seen", "ls => ls.map(l => l.dataset.challenge)") == [
        "identity", "year", "drop"]
    assert page.text_content("#challenge-count") == "0 of 3 complete"


def test_live_preview_matches_the_cli_including_dropped_messages(app):
    reference = cli_run([{"role": "user", "content": t} for t in SENT + [DRAFT]], 256, "brief")
    page = app.open()
    page.select_option("#preset", "brief")
    page.select_option("#window", "256")
    app.type_draft(SENT[0])
    assert app.dropped() == []
    for text in SENT:
        app.send(text)
    app.type_draft(DRAFT)
    ref = reference()
    assert ref["dropped_messages"], "the reference conversation should overflow a 256-token window"
    assert app.prompt_text() == ref["prompt_text"]
    assert app.pieces() == [[p["label"], p["count"]] for p in ref["pieces"]]
    assert app.dropped() == [[d["message_index"], d["count"]] for d in ref["dropped_messages"]]
    legend = dict(page.eval_on_selector_all(".legend li", "ls => ls.map(l => [l.dataset.seg, Number(l.querySelector('b').textContent)])"))
    assert legend["free"] == ref["free"] and legend["reserved for the reply"] == 96
    assert sum(legend[k] for k in ("system", "turns", "new message + header")) == ref["used"]
    # the chat marks what the model no longer reads
    assert page.locator("#chat .msg.user.is-dropped").count() == len(ref["dropped_messages"])
    app.shot("live-dropped-turns")

    page.click(".tabs button[data-view=tokens]")
    chips = page.eval_on_selector_all("#token-view .tok", "ts => ts.map(t => Number(t.dataset.id))")
    assert chips == ref["prompt_ids"]
    assert page.locator("#token-view .tok.special").count() == sum(1 for i in ref["prompt_ids"] if i in ref["special_ids"])
    app.shot("token-view")


def test_challenge_progress_updates_and_survives_a_reload(app):
    page = app.open()
    assert page.text_content("#challenge-count") == "0 of 3 complete"
    # Turns without a reply complete nothing (tests/test_lab_browser.py tests the rule itself)
    app.send("Who are you?")  # no system prompt
    page.select_option("#preset", "pirate")
    app.send("Who are you?")  # again with one
    page.click("#new-conversation")
    page.select_option("#window", "256")
    for text in SENT + [DRAFT]:
        app.send(text)
    if page.locator("#chat .msg.assistant").count() == 0:
        assert page.text_content("#challenge-count") == "0 of 3 complete"
    # Live turns with replies complete challenges; the progress the page keeps survives a reload
    page.evaluate("""async () => {
        const c = await import('./js/lesson/challenges.mjs');
        const rec = (text, system, extra) => ({pieces: [{kind: 'new', text}], dropped_messages: [], system,
                                               preset: system ? 'pirate' : 'none', window: 256, reply_text: 'Hello.', ...extra});
        let p = c.load();
        p = c.observe(p, rec('Who are you?', null), new Date(), {live: true});
        p = c.observe(p, rec('Who are you?', 'You are a pirate.'), new Date(), {live: true});
        p = c.observe(p, rec('Hi', null, {dropped_messages: [{message_index: 0, role: 'user', content: 'Hi', count: 13}]}),
                      new Date(), {live: true});
        c.save(p);
    }""")

    # the year challenge needs a reply that says the current year: check the detector itself
    year = page.evaluate("""async () => {
        const c = await import('./js/lesson/challenges.mjs');
        const base = {pieces: [], dropped_messages: [], system: null, preset: 'none'};
        const dated = {...base, preset: 'date', system: "You are a helpful assistant. Today's date is Monday, November 30, 2026."};
        const later = new Date(2031, 0, 1);
        const year = (rec, now) => c.observe({}, rec, now, {live: true}).year === true;
        return {
            clock: year({...base, reply_text: `It is ${new Date().getFullYear()}.`}),
            other: year({...base, reply_text: 'It is 1999.'}),
            givenClock: year({...base, reply_text: 'It is 2031.'}, later),
            recordDate: year({...dated, reply_text: 'It is 2026, I believe.'}, later),
            recordDateNotThere: year({...dated, reply_text: 'It is 2025.'}, later),
            noDateContext: year({...base, reply_text: 'It is 2026.'}, later),
            customDate: year({...base, preset: 'custom', system: 'Today is May 1, 1999.', reply_text: '1999'}, later),
            longerNumber: year({...dated, reply_text: 'Order 120261.'}, later),
        };
    }""")
    assert year == {"clock": True, "other": False, "givenClock": True, "recordDate": True, "recordDateNotThere": False,
                    "noDateContext": False, "customDate": False, "longerNumber": False}

    page.reload()
    page.wait_for_function("() => window.chatlens !== undefined")
    assert page.text_content("#challenge-count") == "2 of 3 complete"
    done = page.eval_on_selector_all("#challenges li.done", "ls => ls.map(l => l.dataset.challenge)")
    assert done == ["identity", "drop"]


def test_enter_pressed_twice_while_python_boots_sends_one_message(app):
    # Python starts from its snapshot in a second or two: the worker's script is held until the
    # keys are pressed, so Python is still booting then however fast this machine is.
    held = []
    app.context.route("**/js/worker/worker.mjs", lambda route: held.append(route))
    page = app.open(ready=False)
    page.fill("#draft", "Who are you?")
    page.press("#draft", "Enter")
    page.press("#draft", "Enter")
    page.locator("#draft").press_sequentially("What is my name?")  # typed while the first one waits
    page.press("#draft", "Enter")  # still waiting: not sent, and not wiped
    assert page.get_attribute("#status", "data-state") in ("booting", "loading"), "Python booted before the test could press Enter"
    assert page.eval_on_selector_all("#chat .msg.user .content", "b => b.map(e => e.textContent)") == ["Who are you?"]
    assert len(held) == 1, "the page asked for its worker's script once"
    held[0].continue_()
    app.context.unroute("**/js/worker/worker.mjs")
    app.wait_ready()
    page.wait_for_function("() => document.querySelectorAll('#chat .msg.user.no-reply, #chat .msg.assistant').length === 1")
    page.wait_for_timeout(300)
    assert page.eval_on_selector_all("#chat .msg.user .content", "b => b.map(e => e.textContent)") == ["Who are you?"]
    assert page.input_value("#draft") == "What is my name?"
    # the sent turn's record is the one shown, and the draft now previews after it
    app.type_draft("What is my name?")
    assert "<|im_start|>user\nWho are you?<|im_end|>" in app.prompt_text()


def test_an_empty_custom_prompt_is_the_template_default(app):
    page = app.open()
    page.select_option("#preset", "custom")
    page.fill("#custom-system", "  \n ")
    app.type_draft("Who are you?")
    assert app.pieces()[0] == ["system (template default)", 21]
    rec = page.evaluate("chatlens.preview({preset: 'custom', custom: ' ', messages: [{role: 'user', content: 'Hi'}]})")
    assert rec["system"] is None and rec["preset"] == "none"
    app.send("Who are you?")
    page.fill("#custom-system", "You are a cat.")
    app.send("Who are you?")
    # The first counts as asked with no system prompt, the second as asked with one (the records
    # the page sends, with a reply added: the completion rule needs one)
    kinds = page.evaluate("""async () => {
        const c = await import('./js/lesson/challenges.mjs');
        const args = (custom) => ({preset: 'custom', custom, window: 1024, messages: [{role: 'user', content: 'Who are you?'}]});
        const blank = await chatlens.preview(args('  \\n '));
        const cat = await chatlens.preview(args('You are a cat.'));
        const who = (r) => Object.keys(c.observe({}, {...r, reply_text: 'Hi.'}, new Date(), {live: true})).filter(k => k.startsWith('who'));
        return [who(blank), who(cat)];
    }""")
    assert kinds == [["whoDefault"], ["whoSystem"]]


def test_special_tokens_are_marked_from_the_record(app):
    """The panel's chips are the record's special_ids: a special token written in a message is
    one (the model reads it as a boundary), a lookalike is plain text."""
    page = app.open()
    app.type_draft("Real <|im_end|> and fake <|IM_END|> and <|nothing|>")
    record = page.evaluate("chatlens.preview({messages: [{role: 'user', content: "
                           "'Real <|im_end|> and fake <|IM_END|> and <|nothing|>'}]})")
    chips = page.eval_on_selector_all("#prompt-text .special", "s => s.map(e => e.textContent)")
    assert chips == [t for i, t in zip(record["prompt_ids"], record["prompt_tokens"]) if i in record["special_ids"]]
    assert "<|IM_END|>" not in chips and "<|nothing|>" not in chips and chips.count("<|im_end|>") == 3
    assert app.prompt_text() == record["prompt_text"]


STREAM = """async (pieces) => {
    // A reply streamed token by token through the one reply view (views/reply.mjs) as every mode
    // draws it: the store adds each token to the reply so far (state.mjs addToken) and the view
    // grows (replyGrew) or, where it cannot, draws itself again whole in its own node. Each piece
    // is a token's bytes as hex; the tokens' texts are what the worker streams (a character once whole).
    const {replyGrew, replyView} = await import('./js/views/reply.mjs');
    const {addToken, replySoFar} = await import('./js/page/state.mjs');
    const {streamed} = await import('./js/views/bytes.mjs');
    const root = document.createElement('div');
    document.body.append(root);
    const texts = streamed(pieces);
    const reply = replySoFar();
    const box = replyView(reply);
    root.append(box);
    let chips = 0;
    const seen = new MutationObserver((records) => {
        for (const r of records) for (const n of r.addedNodes) {
            if (n.nodeType === 1) chips += n.matches('.tok') + n.querySelectorAll('.tok').length;
        }
    });
    seen.observe(root, {childList: true, subtree: true});
    for (let i = 0; i < pieces.length; i++) {
        addToken(reply, {id: 1000 + i, text: texts[i], token: texts[i] || '\ufffd', bytes: pieces[i]});
        if (!replyGrew(reply)) throw new Error('the view of the reply is on the page: it grows');
        await new Promise((r) => setTimeout(r)); // as tokens come: the observer counts each token's nodes then
    }
    await new Promise((r) => setTimeout(r));
    seen.disconnect();
    const whole = replyView({...reply, reply_ids: [...reply.reply_ids]});
    root.remove();
    return {chips, same: box.innerHTML === whole.innerHTML, n: box.querySelectorAll('.tok').length};
}"""


def hexes(*tokens):
    return [t.encode().hex() if isinstance(t, str) else t.hex() for t in tokens]


def test_a_streamed_token_appends_one_chip_and_draws_what_the_whole_box_draws(app):
    """A reply of N tokens streamed into its reply view creates N chips, not N²/2 (each token
    appends its chip and its text), and ends as the view draws the same reply at once; a
    character split across tokens is drawn again whole, grouped under its character."""
    page = app.open(ready=False)
    words = [" word"] * 40
    got = page.evaluate(STREAM, hexes("Hello", *words, "."))
    assert got == {"chips": 42, "same": True, "n": 42}
    e = "é".encode()
    got = page.evaluate(STREAM, hexes("Caf", e[:1], e[1:], " au", " lait"))
    assert got["same"] and got["n"] == 5


def test_user_text_is_shown_as_text_and_runs_nothing(app):
    page = app.open()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    evil = '<img src=x onerror="window.__pwned=1;alert(1)"><script>window.__pwned=2</script>'
    app.type_draft(evil)
    app.send(evil)
    page.wait_for_timeout(500)
    assert page.evaluate("window.__pwned") is None and dialogs == []
    assert page.locator("#chat img, #reads img, #chat script, #reads script").count() == 0
    assert page.text_content("#chat .msg.user .content") == evil
    assert evil in app.prompt_text()
    assert not [u for u in app.urls() if u.endswith("/x")]


def test_a_gguf_url_works_as_the_model_source(app):
    mirror = app.server.mirror
    url = f"{app.server.url}{mirror.base}{mirror.gguf}"
    page = app.open(f"?model={url}")
    info = page.evaluate("chatlens.ready")
    assert info["source"] == {"kind": "gguf", "url": url, "label": mirror.gguf, "origin": "url"}
    messages = [{"role": "user", "content": "Who are you?"}]
    record = page.evaluate("m => chatlens.preview({preset: 'pirate', messages: m, window: 512})", messages)

    from chatlens.chat import preview
    from chatlens.presets import system_for
    from chatlens.source import load_text_side

    text = load_text_side(mirror.files[mirror.gguf])
    ref = preview(text.tokenizer, text.template, system=system_for("pirate"), messages=messages, window=512,
                  preset="pirate", context=text.config.n_ctx)
    assert record == ref.to_json()
    # only the header was read, with Range requests
    gguf = [r for r in app.requests if r.url == url]
    assert gguf and all(r.headers.get("range", "").startswith("bytes=") for r in gguf)
    assert not [u for u in app.urls() if u.endswith(".safetensors")]


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("where", ["missing", "unreachable"])
def test_a_broken_source_shows_the_error(app, where):
    """A folder the server does not have (HTTP 404), and a host that cannot be reached (the
    browser says only "Failed to fetch"): both errors name the URL, in the status and in the
    settings line."""
    if where == "missing":
        base, why = f"{app.server.url}models/nowhere/", "HTTP 404"
    else:
        base, why = f"http://127.0.0.1:{closed_port()}/models/", "Failed to fetch"
    page = app.open(f"?model={base}", ready=False)
    page.wait_for_function("() => document.getElementById('status').dataset.state === 'error'", timeout=BOOT_MS)
    status = page.text_content("#status")
    if where == "missing":
        assert re.search(re.escape(base) + r"[\w.]+\.json: " + why, status), status
    else:  # another port is another origin, which the page's policy does not let it read: said so
        assert f"this page cannot read 127.0.0.1:{base.split(':')[2].split('/')[0]}" in status, status
        assert "Content-Security-Policy" in page.text_content("#source-error")
    label = page.text_content("#source-label")
    assert label.startswith(f"{base} ({base}): failed: {base}") and why in label, label


def test_a_worker_that_cannot_start_fails_ready_and_calls_at_once(app):
    app.context.route("**/js/worker/worker.mjs", lambda route: route.fulfill(status=404, body="not found"))
    page = app.open(ready=False)
    # Once the page says the worker failed (the event), chatlens.ready has settled and a call
    # settles at once: a promise still pending after the jobs already queued (a 0 ms timer runs
    # after them) never would.
    page.wait_for_function("() => document.getElementById('status').dataset.state === 'error'", timeout=BOOT_MS)
    settle = """p => Promise.race([p.then(() => 'resolved', e => e.message),
                                   new Promise(r => setTimeout(() => r('still pending')))])"""
    error = page.evaluate(f"({settle})(chatlens.ready)")
    assert "worker failed to start" in error and "js/worker/worker.mjs" in error, error
    preview = page.evaluate(f"({settle})(chatlens.preview({{messages: [{{role: 'user', content: 'Hi'}}]}}))")
    assert preview == error
    assert page.get_attribute("#status", "data-state") == "error"
    assert error in page.text_content("#status")
    assert "worker failed to start" in page.text_content("#reads")


def test_model_urls_name_a_gguf_or_a_hugging_face_folder(app):
    page = app.open(ready=False)
    got = page.evaluate("""async () => {
        const { sourceFromUrl } = await import('./js/page/source.mjs');
        const base = location.href;
        return [
            'https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct',
            'https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/tree/abc123',
            'https://huggingface.co/org/repo/resolve/main/sub/model.Q8_0.gguf',
            'https://huggingface.co/org/repo/blob/v1/m.gguf',
            'https://example.org/models/smol',
            'models/x/m.gguf',
        ].map(u => { const s = sourceFromUrl(u, base); return [s.kind, s.url]; });
    }""")
    assert got == [
        ["hf", "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/main/"],
        ["hf", "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/resolve/abc123/"],
        ["gguf", "https://huggingface.co/org/repo/resolve/main/sub/model.Q8_0.gguf"],
        ["gguf", "https://huggingface.co/org/repo/resolve/v1/m.gguf"],
        ["hf", "https://example.org/models/smol/"],
        ["gguf", f"{app.server.url}models/x/m.gguf"],
    ]


def test_without_a_mirror_the_page_reads_the_pinned_revision_on_the_hub(browser, server):
    """A static deployment has no models/manifest.json: the text side comes from Hugging Face at
    the pinned revision. The Hub is played here by a route that answers from the local export."""
    from chatlens.source import load_text_side

    bare = SiteServer(server.root).start()  # the same build, no mirror
    folder = server.mirror.files["tokenizer.json"].parent
    hub = f"https://huggingface.co/{chatlens_hub.INSTRUCT.repo}/resolve/{chatlens_hub.INSTRUCT.revision}/"
    asked = []

    def answer(route):
        url = route.request.url
        asked.append(url)
        name = url[len(hub):] if url.startswith(hub) else None
        path = folder / name if name else None
        if path is None or not path.is_file():
            return route.fulfill(status=404, body="not found", headers={"Access-Control-Allow-Origin": "*"})
        route.fulfill(status=200, body=path.read_bytes(), content_type="application/json",
                      headers={"Access-Control-Allow-Origin": "*"})

    a = App(browser, bare)
    try:
        a.context.route("https://huggingface.co/**", answer)
        page = a.open()
        info = page.evaluate("chatlens.ready")
        assert info["source"]["origin"] == "hub" and info["source"]["url"] == hub
        assert sorted(asked) == sorted(hub + n for n in
                                       ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"])
        record = page.evaluate("chatlens.preview({messages: [{role: 'user', content: 'Who are you?'}], window: 1024})")
        assert record["used"] == cpython_preview(load_text_side(folder), "Who are you?").used  # the Hub's files, read by CPython
        assert not a.errors
    finally:
        a.close()
        bare.shutdown()
        bare.server_close()


def test_a_download_cancelled_through_the_api_resumes_where_it_stopped(app):
    """chatlens.downloadModel({onProgress, signal}): aborted part way through the weights, it rejects
    with an AbortError and keeps the chunks it verified; called again, it asks only for the rest."""
    page = app.open()
    weights = "model.safetensors"
    got = page.evaluate("""async (weights) => {
        const stopper = new AbortController();
        let at = null;
        const error = await chatlens.downloadModel({signal: stopper.signal, onProgress: (p) => {
            if (at === null && p.file?.name === weights && p.file.done >= 40 << 20) (at = p.file.done), stopper.abort();
        }}).then(() => null, (e) => ({name: e.name, message: e.message}));
        return {error, at, stored: await chatlens.storedModels()};
    }""", weights)
    assert got["at"] is not None and (got["error"] or {}).get("name") == "AbortError", got["error"]
    (stored,) = got["stored"]
    assert not stored["complete"] and 0 < stored["bytes"] < stored["total"]
    part = next(f for f in stored["files"] if f["name"] == weights)
    # the whole chunks it had verified when the abort reached the download's worker (bytes go on
    # coming meanwhile: it may hold more than `at`, the progress the page had seen then)
    chunk = app.server.mirror.manifest()["chunk_size"]
    assert part["state"] == "partial" and part["stored"] >= got["at"] // chunk * chunk and part["stored"] % chunk == 0
    before = len(app.requests)
    summary = page.evaluate("chatlens.downloadModel()")
    assert summary["complete"] and summary["verified"]
    again = [r.all_headers().get("range") for r in app.requests[before:] if r.url.endswith("/" + weights)]
    assert again == [f"bytes={part['stored']}-"]  # only the rest, once


def test_every_recorded_reply_is_the_recorders_greedy_reply(doc, model):
    """Each reply recorded mode shows (site/recorded.json, as the site serves it) is what `chatlens
    record` writes for its prompt: at every step the recorded token is NumPy's most likely next one
    (or within the near-tie gap of it: README, Fidelity), and it ends as the recorder ends a reply.
    The prompts are the recorder's too (tests/test_chat.py derives each one again). Teacher forcing:
    one forward pass over a turn's prompt and reply (its shared start with the turn before kept in
    the cache) gives every step's logits, where decoding token by token would take minutes."""
    import numpy as np

    from chatlens import defaults
    from chatlens.cache import common_prefix
    from chatlens.model import rms_norm

    backend = model.backend(2048)  # the largest window recorded and its reply
    head = backend.lm_head.T  # (dim, vocab)
    seen, checked = set(), 0
    for conv in doc["conversations"]:
        backend.reset()
        prev = []
        for i, turn in enumerate(conv["turns"]):
            where = (conv["preset"], conv["window"], i)
            prompt, reply = turn["prompt_ids"], turn["reply_ids"]
            if turn["stop_reason"] == "end_turn":
                assert reply[-1] == model.eos_id and model.eos_id not in reply[:-1], where
            else:
                assert turn["stop_reason"] == "max_tokens" and len(reply) == doc["reply_limit"], where
                assert model.eos_id not in reply, where
            ids = prompt + reply
            if tuple(ids) in seen:  # the same turn in another window (nothing dropped yet): checked once
                continue
            seen.add(tuple(ids))
            keep = min(common_prefix(prev, ids), len(prompt) - 1)  # the step before the reply is computed again
            backend.truncate(keep)
            x = backend._forward(ids[keep:])  # (T, dim): the hidden state after each of ids[keep:]
            steps = rms_norm(x[len(prompt) - 1 - keep:-1], backend.final_norm, model.config.norm_eps) @ head  # (len(reply), vocab)
            best = steps.max(axis=1)
            chosen = steps[np.arange(len(reply)), reply]
            assert np.all(best - chosen <= defaults.NEAR_TIE_GAP), (where, np.flatnonzero(best - chosen > defaults.NEAR_TIE_GAP))
            checked += 1
            prev = ids  # what the cache holds now
    print(f"\n{checked} distinct recorded replies checked step by step")
