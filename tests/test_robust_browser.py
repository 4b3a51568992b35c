"""Nothing lost, nothing run: a worker that dies, a GPU that is lost, settings that are not valid,
model sources that are not models, and text from users, model files and replies that must never
become markup. Each failure is reproduced in Chromium.

Replies here come from a tiny random Llama with SmolLM2's real tokenizer and template
(tests/tiny_model.py): nonsense, but through the whole machinery, and fast on SwiftShader.
"""

import json

import pytest

from conftest import cli_in_process
from tiny_model import write_tiny_model

pytestmark = pytest.mark.browser

PAYLOAD = '<img src=x onerror="window.__pwned = 1"><script>window.__pwned = 2</script>'
NO_MARKUP = "() => window.__pwned === undefined && document.querySelectorAll('img, script:not([type=module])').length === 0"


@pytest.fixture(scope="module")
def tiny(server):
    """The tiny model, served beside the site (same origin, so the CSP lets the page read it)."""
    folder = write_tiny_model(server.root / "tiny" / "model", server.mirror.files["config.json"].parent)
    return folder, f"{server.url}tiny/model/"


def with_tiny_model(app, url):
    page = app.open(f"?model={url}")
    assert page.evaluate("chatlens.downloadModel()")["complete"]
    model = page.evaluate("chatlens.modelReady")
    assert model["kind"] == "webgpu"
    # the GPU passed its known-answer check (this session's, kept: webapp.py), stated where the device is named
    assert model["check"]["passed"] and model["check"]["max_diff"] <= model["check"]["tolerance"], model["check"]
    assert "agrees with the reference within" in page.text_content("#device-check")
    return page


def cli_reply(folder, messages, max_tokens, window=256):
    """`python -m chatlens run` on the same files: the reply the page must give (run in this process)."""
    done = cli_in_process("run", "--window", str(window), "--max-tokens", str(max_tokens),
                          stdin=json.dumps({"messages": messages}), model=folder)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_dead_worker_is_replaced_and_the_conversation_survives(app, tiny):
    folder, url = tiny
    page = with_tiny_model(app, url)
    first = [{"role": "user", "content": "Hi!"}]
    rec = page.evaluate("m => chatlens.run({messages: m, window: 256, maxTokens: 4})", first)
    page.select_option("#window", "256")
    page.evaluate("chatlens.settings.reply_limit = 4")  # the tiny model never ends a reply: not the lab's 96
    page.fill("#draft", "Hello there.")
    page.press("#draft", "Enter")
    page.wait_for_selector("#chat .msg.assistant:not(.is-streaming)", timeout=300_000)
    chat_before = page.eval_on_selector_all("#chat .msg .content", "m => m.map(e => e.textContent)")

    # every line the status shows, from now on: the new worker's boot may already have moved it on
    page.evaluate("""() => { window.__statuses = [];
        new MutationObserver(() => window.__statuses.push(document.getElementById('status').textContent))
            .observe(document.getElementById('status'), {childList: true, subtree: true, characterData: true}); }""")
    page.evaluate("chatlens.terminateWorker()")
    page.wait_for_function("() => chatlens.restarts === 1", timeout=30_000)
    assert any("starting a new worker" in s for s in page.evaluate("window.__statuses")), page.evaluate("window.__statuses")
    app.shot("worker-restarting")
    assert page.evaluate("chatlens.modelReady")["kind"] == "webgpu"  # the stored model, on the new worker
    assert page.eval_on_selector_all("#chat .msg .content", "m => m.map(e => e.textContent)") == chat_before

    # The new worker's cache is empty: the next turn computes everything, and replies as before.
    again = page.evaluate("m => chatlens.run({messages: m, window: 256, maxTokens: 4})", first)
    assert again["reused_tokens"] == 0 and again["reply_ids"] == rec["reply_ids"]
    assert again["reply_ids"] == cli_reply(folder, first, 4)["reply_ids"]


def test_previews_are_answered_while_the_weights_go_to_the_gpu(app, tiny):
    """The upload is JavaScript's work (the store read, pipelines compiled): Python answers a
    preview meanwhile instead of queueing it behind the weights."""
    folder, url = tiny
    page = app.open(f"?model={url}")
    got = page.evaluate("""async () => {
        const states = [];
        const seen = new Promise((resolve) => chatlens.onStatus((s) => {
            states.push(s.detail);
            if (s.state === 'weights' && /uploading/.test(s.detail)) resolve();
        }));
        const download = chatlens.downloadModel();
        await seen;
        const rec = await chatlens.preview({messages: [{role: 'user', content: 'Hi!'}], window: 256});
        const during = chatlens.status.state;
        await download;
        await chatlens.modelReady;
        return {during, used: rec.used, states};
    }""")
    assert got["during"] == "weights", got["states"]  # answered before the model was ready
    want = cli_in_process("run", "--window", "256", "--max-tokens", "1",
                          stdin=json.dumps({"messages": [{"role": "user", "content": "Hi!"}]}), model=folder)
    assert got["used"] == json.loads(want.stdout)["used"]
    page.wait_for_function("() => chatlens.status.state === 'ready'")


def chat_texts(page):
    return page.eval_on_selector_all("#chat .msg .content", "m => m.map(e => e.textContent)")


def watch_statuses(page):
    """From now on the page keeps each status it shows, and whether a reply was being written then."""
    page.evaluate("""() => {
        window.__statuses = [];
        chatlens.onStatus((s) => window.__statuses.push({...s, writing: chatlens.writing}));
    }""")


def count_adapter_requests(app):
    """From now on the chatlens worker counts the GPU adapters it asks for (self.__adapters)."""
    worker = next(w for w in app.page.workers if w.url.endswith("/worker/worker.mjs"))
    worker.evaluate("""() => {
        self.__adapters = 0;
        const gpu = Object.getPrototypeOf(navigator.gpu);
        const ask = gpu.requestAdapter;
        gpu.requestAdapter = function (...a) { self.__adapters += 1; return ask.apply(this, a); };
    }""")
    return worker


LOST = "the GPU device was lost"


def in_the_chat(page, window, reply_limit):
    """The chat's window and reply limit (what it sends as maxTokens), as the CLI's --window and --max-tokens."""
    page.select_option("#window", str(window))
    page.evaluate(f"chatlens.settings.reply_limit = {reply_limit}")


def test_a_lost_gpu_is_replaced_and_the_turn_completes(app, tiny):
    folder, url = tiny
    page = with_tiny_model(app, url)
    in_the_chat(page, 256, 3)
    app.send("Hi!")
    before = chat_texts(page)
    worker = count_adapter_requests(app)
    watch_statuses(page)
    page.evaluate("chatlens.loseGpu()")
    page.wait_for_function(f"() => window.__statuses.some(s => s.detail.startsWith('{LOST}')) && "
                           "chatlens.status.state === 'ready'", timeout=120_000)
    states = page.evaluate("window.__statuses")
    lost = next(i for i, s in enumerate(states) if s["detail"].startswith(LOST))
    assert states[lost]["state"] == "weights" and any("uploading the weights" in s["detail"] for s in states[lost:]), states
    assert worker.evaluate("self.__adapters") == 1  # the lost device's adapter is spent: a new one for the new device
    assert page.evaluate("chatlens.model.kind") == "webgpu"
    assert chat_texts(page) == before  # the conversation survived
    app.send("Tell me about GPUs.")
    messages = [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": before[1]},
                {"role": "user", "content": "Tell me about GPUs."}]
    assert chat_texts(page) == before + ["Tell me about GPUs.", cli_reply(folder, messages, 3)["reply_text"]]


def test_the_worker_killed_or_the_gpu_lost_in_the_middle_of_a_reply_loses_nothing(app, tiny):
    folder, url = tiny
    page = with_tiny_model(app, url)
    in_the_chat(page, 256, 6)
    page.set_default_timeout(120_000)  # a new device, or a new worker, loads the weights first
    # The chat's next reply is cut right after its first token: `window.__cut` names how. The ids
    # each reply streams are kept (window.__streamed).
    page.evaluate("""() => {
        const run = chatlens.run;
        window.__cut = null;
        chatlens.run = (args, options = {}) => (window.__streamed = [], run(args, {...options, onToken: (t) => {
            options.onToken?.(t);
            if (t.id >= 0) window.__streamed.push(t.id);
            const cut = window.__cut;
            window.__cut = null;
            if (cut) chatlens[cut]();
        }}));
    }""")
    watch_statuses(page)

    # The GPU lost: the weights go to a new device and the reply is computed again there; the
    # chat shows it once, as the command line writes it, and each token streamed once.
    page.evaluate("window.__cut = 'loseGpu'")
    app.send("Hi!")
    assert any(s["writing"] and s["detail"].startswith(LOST) for s in page.evaluate("window.__statuses"))
    first = [{"role": "user", "content": "Hi!"}]
    want = cli_reply(folder, first, 6)
    reply = want["reply_text"]
    assert chat_texts(page) == ["Hi!", reply] and page.evaluate("window.__streamed") == want["reply_ids"]

    # The worker killed: the reply is lost with it and the message says so; the conversation before
    # it is kept, a new worker loads the stored model, and the message sent again is answered right.
    page.evaluate("window.__cut = 'terminateWorker'")
    app.send("Tell me more.")
    page.wait_for_function("() => chatlens.restarts === 1 && chatlens.status.state === 'ready'", timeout=120_000)
    assert chat_texts(page) == ["Hi!", reply, "Tell me more."]
    assert page.locator("#chat .msg.user.no-reply").count() == 1  # marked "no reply", and kept
    page.fill("#draft", "Tell me more.")
    page.press("#draft", "Enter")
    page.wait_for_function("() => document.querySelectorAll('#chat .msg.assistant:not(.is-streaming)').length === 2",
                           timeout=120_000)
    messages = first + [{"role": "assistant", "content": reply}, {"role": "user", "content": "Tell me more."}]
    assert chat_texts(page) == ["Hi!", reply, "Tell me more.", cli_reply(folder, messages, 6)["reply_text"]]
    assert page.locator("#chat .msg.user.no-reply").count() == 0


def test_settings_that_are_not_valid_are_ignored_with_a_note(app):
    app.context.add_init_script("""
        localStorage.setItem('chatlens.prefs', JSON.stringify({preset: 'shakespeare', window: 'wide', mode: 'live'}));
        localStorage.setItem('chatlens.backend', 'quantum');
    """)
    page = app.open("?window=99999&mode=sideways&model=javascript:alert(1)")
    note = page.text_content("#settings-note")
    for what in ['"shakespeare"', '"quantum"', '"sideways"', '"javascript:alert(1)"']:
        assert what in note, (what, note)
    page.wait_for_function("() => document.getElementById('settings-note').textContent.includes('99999')")
    assert page.input_value("#preset") == "none" and page.input_value("#window") == "1024"
    assert page.evaluate("chatlens.backend") == "auto" and page.evaluate("chatlens.source.origin") == "mirror"
    page.wait_for_function("() => document.body.dataset.mode === 'recorded'")  # no mode of its own: the landing one
    page.click("#mode-live")
    app.type_draft("Still working?")
    app.shot("settings-ignored")


def bad_folder(root, name, **files):
    """A Hugging Face folder beside the site whose files are given (the others copied from the mirror's)."""
    folder = root / "bad" / name
    folder.mkdir(parents=True, exist_ok=True)
    for file, content in files.items():
        (folder / file.replace("__", ".")).write_bytes(content if isinstance(content, bytes) else content.encode())
    return folder


@pytest.mark.parametrize("case", ["html_gguf", "json_error", "truncated_gguf", "gpt2_config"])
def test_a_source_that_is_not_a_model_says_what_is_wrong_and_the_default_comes_back(app, server, case):
    mirror = server.mirror
    real = mirror.files["config.json"].parent
    root = server.root
    if case == "html_gguf":
        (root / "bad").mkdir(exist_ok=True)
        (root / "bad" / "model.gguf").write_text("<!doctype html><title>Sign in</title><p>Please sign in")
        url, why = f"{server.url}bad/model.gguf", "not a GGUF file: the server sent an HTML page"
    elif case == "truncated_gguf":
        (root / "bad").mkdir(exist_ok=True)
        (root / "bad" / "cut.gguf").write_bytes(mirror.files[mirror.gguf].read_bytes()[: 4 << 20])
        url, why = f"{server.url}bad/cut.gguf", "lies past the end of the file"
    elif case == "json_error":
        bad_folder(root, "json", config__json='{"error": "Repository not found"}',
                   tokenizer__json=(real / "tokenizer.json").read_bytes(),
                   tokenizer_config__json=(real / "tokenizer_config.json").read_bytes())
        url, why = f"{server.url}bad/json/", "the server sent an error"
    else:
        cfg = json.loads((real / "config.json").read_text())
        bad_folder(root, "gpt2", config__json=json.dumps({**cfg, "model_type": "gpt2"}),
                   tokenizer__json=(real / "tokenizer.json").read_bytes(),
                   tokenizer_config__json=(real / "tokenizer_config.json").read_bytes())
        url, why = f"{server.url}bad/gpt2/", "model_type 'gpt2' is not supported"
    page = app.open(f"?model={url}", ready=False)
    page.wait_for_function("() => chatlens.status.state === 'error'", timeout=120_000)
    message = page.text_content("#source-error")
    assert url in message and why in message, message
    app.shot(f"bad-source-{case}")
    with page.expect_navigation():
        page.click("#use-default")
    app.wait_ready()
    assert page.evaluate("chatlens.source.origin") == "mirror"
    app.errors.clear()  # the failed source's own errors were the point


def test_a_template_that_raises_and_weights_that_lie_leave_the_page_usable(app, server):
    real = server.mirror.files["config.json"].parent
    template_cfg = json.loads((real / "tokenizer_config.json").read_text())
    template_cfg["chat_template"] = "{{ raise_exception('This template refuses: ' ~ messages[0].content) }}"
    bad_folder(server.root, "raises", config__json=(real / "config.json").read_bytes(),
               tokenizer__json=(real / "tokenizer.json").read_bytes(),
               tokenizer_config__json=json.dumps(template_cfg))
    page = app.open(f"?model={server.url}bad/raises/")
    page.fill("#draft", "hello")
    page.wait_for_function("() => document.getElementById('reads').textContent.includes('This template refuses: hello')")

    # A safetensors header that promises more bytes than the file has.
    header = json.dumps({"model.embed_tokens.weight": {"dtype": "F32", "shape": [49152, 576], "data_offsets": [0, 113246208]}})
    raw = len(header).to_bytes(8, "little") + header.encode() + b"\0" * 1024
    bad_folder(server.root, "lies", config__json=(real / "config.json").read_bytes(),
               tokenizer__json=(real / "tokenizer.json").read_bytes(),
               tokenizer_config__json=(real / "tokenizer_config.json").read_bytes(), model__safetensors=raw)
    page = app.open(f"?model={server.url}bad/lies/")
    assert page.evaluate("chatlens.downloadModel()")["complete"]
    error = page.evaluate("chatlens.modelReady.then(() => null, e => e.message)")
    assert "lies past the end of the file" in error, error
    page.wait_for_function("() => document.getElementById('model-backend')?.textContent.includes('lies past')")
    app.type_draft("The page still previews.")
    app.errors.clear()


def test_text_from_users_models_files_and_errors_is_only_ever_text(app, server):
    # A model reply and a user message with markup, in a crafted recording.
    recorded = json.loads((server.root / "recorded.json").read_text())
    turn = recorded["conversations"][0]["turns"][0]
    turn["reply_text"] = PAYLOAD
    recorded["messages"][0] = PAYLOAD
    app.context.route("**/recorded.json", lambda route: route.fulfill(status=200, content_type="application/json",
                                                                       body=json.dumps(recorded)))
    page = app.open("?mode=recorded")
    page.wait_for_selector("#chat .msg.assistant")
    assert PAYLOAD in page.text_content("#chat") and page.evaluate(NO_MARKUP)

    # A custom system prompt and a message with markup, in the live preview and the panel.
    page.click("#mode-live")
    page.select_option("#preset", "custom")
    page.fill("#custom-system", PAYLOAD)
    app.type_draft(PAYLOAD)
    assert PAYLOAD in app.prompt_text() and page.evaluate(NO_MARKUP)

    # A file name and an error message with markup: a GGUF URL that does not exist.
    name = "%3Cimg%20src%3Dx%20onerror%3D%22window.__pwned%3D3%22%3E.gguf"
    page = app.open(f"?model={server.url}bad/{name}", ready=False)
    page.wait_for_function("() => chatlens.status.state === 'error'", timeout=120_000)
    assert '<img src=x onerror="window.__pwned=3">.gguf' in page.text_content("#source-label")
    assert page.evaluate(NO_MARKUP)
    app.errors.clear()
