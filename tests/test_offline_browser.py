"""The site once visited: the model stored, a reload that fetches no weights, the whole site
with no network after a browser restart, and a new build that replaces the shell cleanly.

Each test has its own server (it is stopped or rebuilt) and its own browser profile on disk,
as a returning visitor's would be. A new profile holds Python's snapshot from the start
(conftest.py's `python_snapshot`): its first visit starts Python as its later ones do.
"""

import json
import shutil

import pytest

from conftest import cli_in_process
from webapp import (BOOT_MS, CHROMIUM, LAUNCH_ARGS, REDUCED_MOTION, ROOT, SHOTS, WAIT_MS, WEBGPU_BY_CHOICE,
                    assert_same_comparison, harvest_checks, seed_checks, seed_snapshot, session_checks)
from chatlens import chat
from chatlens.host import build as site
from chatlens.host.mirror import prepare_mirror
from chatlens.host.serve import SiteServer
from chatlens.source import load_text_side

pytestmark = pytest.mark.browser

WEIGHTS = (".safetensors", ".gguf")


class Visit:
    """A browser with a profile on disk, on one server, keeping every request it makes."""

    def __init__(self, playwright, profile, url, snapshot=None):
        """snapshot: (Python's snapshot, the served site's folder) to put in a new profile first."""
        self.context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True,
            viewport={"width": 1400, "height": 1000}, reduced_motion=REDUCED_MOTION)
        self.context.set_default_timeout(WAIT_MS)
        if snapshot is not None:
            seed_snapshot(self.context, url, snapshot[1], snapshot[0])
            self.context.add_init_script(seed_checks(session_checks()))  # the GPU checks the session ran (webapp.py)
        self.context.add_init_script(WEBGPU_BY_CHOICE)  # SwiftShader by name: auto would take NumPy
        self.requests, self.errors = [], []
        self.context.on("request", lambda r: self.requests.append(r.url))
        self.page = self.context.pages[0] if self.context.pages else self.context.new_page()
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.url = url

    def open(self, query=""):
        self.page.goto(self.url + query)
        self.page.wait_for_function("() => window.chatlens && ['text', 'weights', 'ready', 'error'].includes(chatlens.status.state)",
                                    timeout=BOOT_MS)
        assert self.page.evaluate("chatlens.status.state") != "error", self.page.evaluate("chatlens.status")
        return self.page

    def cached(self):
        """Wait until the service worker has cached this build and controls the page."""
        self.page.evaluate("navigator.serviceWorker.ready.then(() => true)")
        if not self.page.evaluate("Boolean(navigator.serviceWorker.controller)"):
            self.page.wait_for_function("() => Boolean(navigator.serviceWorker.controller)", timeout=60_000)

    def close(self):
        harvest_checks(self.context)
        self.context.close()
        assert not self.errors, self.errors


def offline_again(playwright, profile, srv):
    """The server gone, a browser started again on the same profile at the same address."""
    port = srv.server_address[1]
    srv.shutdown()
    srv.server_close()
    return Visit(playwright, profile, f"http://127.0.0.1:{port}/")


def serve(out):
    return SiteServer(out, mirror=prepare_mirror(quiet=True)).start()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return site.build_site(tmp_path_factory.mktemp("site") / "out", log=lambda m: None, root=ROOT)


def test_a_stored_model_loads_without_a_download_then_works_with_no_network(playwright, built, tmp_path,
                                                                          python_snapshot):
    """The mirror's model (here a tiny random one, served as `serve` serves the default model: the
    store, the reload and the offline boot are the point, not its replies; the real model's reply
    from the store with no network: test_firefox_browser.py's return visit) is stored; a reload reads
    it from the store; with the server gone and the browser restarted, the page previews and replies
    as the command line does on the same files."""
    from chatlens.host.mirror import Mirror
    from tiny_model import write_tiny_model

    real = prepare_mirror(quiet=True)
    folder = write_tiny_model(tmp_path / "tiny", real.files["config.json"].parent, seed=11)
    srv = SiteServer(built, mirror=Mirror.of(real.repo, "tiny-offline", folder=folder, about="a tiny random model")).start()
    profile = tmp_path / "profile"
    visit = Visit(playwright, profile, srv.url, snapshot=(python_snapshot, built))
    page = visit.open()
    visit.cached()
    summary = page.evaluate("chatlens.downloadModel()")
    assert summary["complete"]
    assert page.evaluate("chatlens.modelReady")["kind"] == "webgpu"

    # A reload reads the model from the store: no weight file is requested.
    visit.requests.clear()
    page = visit.open()
    assert page.evaluate("chatlens.modelReady")["kind"] == "webgpu"
    assert not [u for u in visit.requests if u.endswith(WEIGHTS)], visit.requests
    assert page.evaluate("chatlens.ready.then(r => r.stored.complete)")
    visit.close()

    # The server is gone and the browser restarted on the same profile.
    visit = offline_again(playwright, profile, srv)
    page = visit.open()
    assert page.evaluate("chatlens.source.origin") == "mirror"
    hi = [{"role": "user", "content": "Hi!"}]
    record = page.evaluate("m => chatlens.preview({messages: m, window: 256})", hi)
    text = load_text_side(folder)
    want = chat.preview(text.tokenizer, text.template, system=None, messages=hi, window=256)
    assert record["prompt_ids"] == want.prompt_ids and record["used"] == want.used
    assert page.evaluate("chatlens.modelReady")["kind"] == "webgpu"
    reply = page.evaluate("m => chatlens.run({system: 'Be brief.', messages: m, window: 256, maxTokens: 3})", hi)
    # the stored files (the mirror's Hugging Face folder) give the command line's reply
    cli = cli_in_process("run", "--window", "256", "--max-tokens", "3", "--system", "Be brief.",
                         stdin=json.dumps({"messages": hi}), model=folder)
    assert cli.returncode == 0, cli.stderr
    assert reply["reply_ids"] == json.loads(cli.stdout)["reply_ids"] and reply["backend"].startswith("webgpu: ")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "offline-after-restart.png"), full_page=True)
    visit.close()


def test_a_new_build_replaces_the_shell_when_the_page_reloads(playwright, tmp_path, python_snapshot):
    # A checkout of its own, so that a source file can change between two builds.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copytree(ROOT / "site", checkout / "site")
    shutil.copy(ROOT / "pyproject.toml", checkout / "pyproject.toml")
    (checkout / "py").symlink_to(ROOT / "py")
    (checkout / "build").mkdir()
    for name in ("package.json", "package-lock.json", "node_modules", "wheels"):
        (checkout / "build" / name).symlink_to(ROOT / "build" / name)
    out = tmp_path / "out"
    site.build_site(out, log=lambda m: None, root=checkout)
    srv = serve(out)
    visit = Visit(playwright, tmp_path / "profile", srv.url, snapshot=(python_snapshot, out))  # same wheels: same snapshot
    try:
        page = visit.open()
        visit.cached()
        first = page.evaluate("caches.keys()")
        assert [k for k in first if k.startswith("chatlens-") and k != "chatlens-runtime"]

        html = checkout / "site" / "index.html"
        html.write_text(html.read_text().replace("<h1>chatlens</h1>", "<h1>chatlens, the next version</h1>"))
        site.build_site(out, log=lambda m: None, root=checkout)
        page.reload()
        page.wait_for_function("() => window.chatlens !== undefined")
        # The old build still serves this page whole; the new one waits until asked.
        assert page.text_content("h1") == "chatlens"
        page.evaluate("navigator.serviceWorker.getRegistration().then(r => r.update())")
        page.wait_for_selector("#update:not([hidden])", timeout=60_000)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "update-ready.png"))
        with page.expect_navigation():
            page.click("#update-reload")
        page.wait_for_function("() => document.querySelector('h1').textContent === 'chatlens, the next version'")
        keys = page.evaluate("caches.keys()")
        builds = [k for k in keys if k.startswith("chatlens-") and k != "chatlens-runtime"]
        assert len(builds) == 1 and builds != [k for k in first if k.startswith("chatlens-") and k != "chatlens-runtime"]
    finally:
        visit.close()
        srv.shutdown()
        srv.server_close()


def test_a_page_visited_once_without_the_model_previews_offline(playwright, built, tmp_path, python_snapshot):
    """The text side (tokenizer, template, config: a few MB) is kept on the first visit: with the
    network gone, previews, plain text and the workbench work; only replies need the model."""
    srv = serve(built)
    profile = tmp_path / "profile"
    visit = Visit(playwright, profile, srv.url, snapshot=(python_snapshot, built))
    page = visit.open()
    visit.cached()
    assert page.evaluate("chatlens.status.state") == "text"  # nothing downloaded
    visit.close()

    visit = offline_again(playwright, profile, srv)
    page = visit.open()
    assert page.evaluate("chatlens.status.state") == "text", page.evaluate("chatlens.status")
    record = page.evaluate("chatlens.preview({messages: [{role: 'user', content: 'Hi!'}], window: 256})")
    assert record["used"] > 0 and "<|im_start|>user\nHi!<|im_end|>" in record["prompt_text"]
    assert page.evaluate("chatlens.tokenize({text: 'What is the capital of France?'})")["prompt_ids"]
    rendered = page.evaluate("chatlens.render({messages: [{role: 'user', content: 'Hi'}], add_generation_prompt: true})")
    assert rendered["text"].endswith("<|im_start|>assistant\n")
    page.click("#mode-live")
    page.fill("#draft", "Hello offline")
    page.wait_for_function("() => document.getElementById('prompt-text')?.textContent.includes('Hello offline')")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "offline-text-side.png"), full_page=True)
    visit.close()


def test_the_base_model_alone_is_kept_for_offline_use(playwright, built, tmp_path, python_snapshot):
    """Only the base model stored (a tiny random stand-in, served as `serve --base-model` serves
    one): with the server gone and the browser restarted, the page names the same base model (the
    mirror's manifest is cached), finds it complete in the store, and reads its files back."""
    import hashlib

    from chatlens.host.mirror import base_mirror
    from tiny_model import write_tiny_model

    mirror = prepare_mirror(quiet=True)
    folder = write_tiny_model(tmp_path / "standin", mirror.files["config.json"].parent, seed=9)
    (folder / "README.md").write_text("# A stand-in for SmolLM2-135M: a tiny random model (test_offline_browser)\n")
    mirror.base_model = base_mirror(folder)
    srv = SiteServer(built, mirror=mirror).start()
    profile = tmp_path / "profile"
    visit = Visit(playwright, profile, srv.url, snapshot=(python_snapshot, built))
    page = visit.open()
    visit.cached()
    summary = page.evaluate("chatlens.downloads.downloadModel({model: 'base'})")
    assert summary["complete"] and summary["source"]["model"] == "base"
    visit.close()

    visit = offline_again(playwright, profile, srv)
    page = visit.open()
    got = page.evaluate("""async () => {
        const base = await chatlens.downloads.base();
        const { openModelStore } = await import('./js/store/models.mjs');
        const store = await openModelStore();
        const bytes = await store.read(base.source, 'config.json');
        const digest = await crypto.subtle.digest('SHA-256', bytes);
        return {base, sha256: [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('')};
    }""")
    assert got["base"]["source"]["origin"] == "mirror"
    assert got["base"]["status"]["id"] == summary["id"] and got["base"]["status"]["complete"]
    assert got["sha256"] == hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
    assert [s["id"] for s in page.evaluate("chatlens.storedModels()")] == [summary["id"]]
    visit.close()


def test_both_models_stored_compare_offline_after_a_restart(playwright, built, tmp_path, python_snapshot):
    """The instruct model (a tiny random model given by ?model=) and the base model (a tiny random
    stand-in for SmolLM2-135M, served as `serve --base-model` serves one) both stored: with the
    server gone and the browser restarted on the same profile, the page opened at the same address
    compares the two from the store alone, equal to CPython's chatlens.host.compare.compared on the same
    files, and no weight file is asked for."""
    from chatlens.host.compare import compared as compare
    from chatlens.host.mirror import base_mirror
    from chatlens.source import load_model
    from tiny_model import write_tiny_model

    text = "What is the capital of France?"
    mirror = prepare_mirror(quiet=True)
    tokenizers = mirror.files["config.json"].parent
    # the instruct by URL: a folder the server serves, beside the site (test-owned name)
    instruct = write_tiny_model(built / "tiny-offline-compare" / "instruct", tokenizers, seed=27)
    folder = write_tiny_model(tmp_path / "standin", tokenizers, seed=28)
    (folder / "README.md").write_text("# A stand-in for SmolLM2-135M: a tiny random model (test_offline_browser)\n")
    mirror.base_model = base_mirror(folder)
    srv = SiteServer(built, mirror=mirror).start()
    query = f"?model={srv.url}tiny-offline-compare/instruct/"
    profile = tmp_path / "profile"
    visit = Visit(playwright, profile, srv.url, snapshot=(python_snapshot, built))
    page = visit.open(query)
    visit.cached()
    assert page.evaluate("chatlens.downloadModel()")["complete"]
    assert page.evaluate("chatlens.downloadModel({model: 'base'})")["complete"]
    stored = sorted(s["id"] for s in page.evaluate("chatlens.storedModels()"))
    assert len(stored) == 2
    visit.close()

    visit = offline_again(playwright, profile, srv)
    page = visit.open(query)
    assert page.evaluate("chatlens.modelReady")["kind"] == "webgpu", page.evaluate("chatlens.status")
    assert page.evaluate("chatlens.source.origin") == "url"  # the ?model= folder, found in the store
    got = page.evaluate("t => chatlens.compare({text: t, maxTokens: 2, topK: 3})", text)
    assert page.evaluate("chatlens.model")["model"] == "instruct"
    assert page.evaluate("chatlens.baseModel")["model"] == "base"
    assert sorted(s["id"] for s in page.evaluate("chatlens.storedModels()")) == stored
    want = compare(load_model(instruct), load_model(folder), text, max_tokens=2, top_k=3)
    assert_same_comparison(got, want)
    # every file read from the store: the browser asked for no weights (nor could it have had them)
    assert not [u for u in visit.requests if u.endswith(WEIGHTS)], visit.requests
    visit.close()
