"""What the browser tests share: Debian's Chromium and its flags, and App, a fresh browser context
on the site that records its requests and fails on page errors and CSP violations.

The session's `server`, `playwright` and `browser` fixtures are in conftest.py: one Playwright
for the whole session (a second sync Playwright in the same thread fails). So is
`python_snapshot`: Python's memory snapshot, which the page's first boot saves in Cache Storage
and later boots start from (site/js/worker/python.mjs). App(..., snapshot=python_snapshot) puts
it in the fresh context before the first page opens, so that page starts Python as a returning
visitor's does (a few seconds sooner than a first boot); the profile is otherwise new (no stored
model, no settings). tests/README.md says which fixture to take.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--enable-unsafe-webgpu"]  # SwiftShader's WebGPU adapter
# Every context asks for reduced motion, as a learner may (site/app.css): no pulsing dot, which the
# emulated compositor would otherwise draw 60 times a second (a tenth of a core a page here).
REDUCED_MOTION = "reduce"
SHOTS = ROOT / "artifacts" / "screenshots"
BOOT_MS = 120_000
# Every wait a test leaves at Playwright's default (30 s): a page waiting on SwiftShader while the
# other lane of scripts/test.sh loads the CPU, on a machine twice as slow as this one, outlasts it.
# A test that passes takes no longer for it; one that fails says so later.
WAIT_MS = 120_000
LIVE_BY_CHOICE = """try {
    if (localStorage.getItem('chatlens.prefs') === null) localStorage.setItem('chatlens.prefs', '{"mode": "live"}');
} catch {}"""
# SwiftShader is the only WebGPU adapter here, and `auto` never takes a CPU emulation while NumPy
# can compute (chatlens.device); Pyodide's NumPy cannot be had offline. So the tests ask for
# WebGPU by name, as a learner can in the settings (a test that says otherwise saves its own).
WEBGPU_BY_CHOICE = """try {
    if (localStorage.getItem('chatlens.backend') === null) localStorage.setItem('chatlens.backend', 'webgpu');
} catch {}"""


# The GPU's known-answer checks (site/js/page/check.mjs keeps them in localStorage, per adapter, build and
# weights). A check on SwiftShader takes seconds to tens of seconds here, so a session runs each once: the
# session's first boot waits for the program's (session_snapshot), every App's close() harvests what its
# context computed (a real model's weights check), and every App seeds what was harvested, as a learner's
# later visits find their own kept results. A test of the check itself takes App(..., checks=None).
CHECKS_KEY = "chatlens.gpu-checks"
_SESSION_CHECKS = {}  # key -> a result that passed, computed by one of this session's contexts


def seed_checks(kept: dict) -> str:
    """An init script that adds `kept` to the page's kept checks (what is there already stays)."""
    return """try {
    const kept = JSON.parse(localStorage.getItem(%s) || "{}");
    let added = false;
    for (const [key, result] of Object.entries(%s)) if (!(key in kept)) { kept[key] = result; added = true; }
    if (added) localStorage.setItem(%s, JSON.stringify(kept));
} catch {}""" % (json.dumps(CHECKS_KEY), json.dumps(kept), json.dumps(CHECKS_KEY))


def session_checks() -> dict:
    """The checks this session's contexts passed so far (a context not made by App seeds them itself)."""
    return dict(_SESSION_CHECKS)


def harvest_checks(context):
    """The checks `context`'s pages kept that passed, added to the session's."""
    for origin in context.storage_state().get("origins", []):
        for item in origin.get("localStorage", []):
            if item["name"] == CHECKS_KEY:
                try:
                    kept = json.loads(item["value"])
                except ValueError:
                    continue
                _SESSION_CHECKS.update({k: v for k, v in kept.items() if isinstance(v, dict) and v.get("passed")})


SNAPSHOTS = "python-snapshot"  # the Cache Storage cache site/js/worker/python.mjs keeps it in
SNAPSHOT_FILE = "__tests__/python-snapshot"  # where the tests serve a copy, under the site's root


class Snapshot(NamedTuple):
    """Python's memory snapshot as a first boot saved it: `id` is its build's pyodide.snapshot_id
    (the same Pyodide and wheels), `data` its bytes."""
    id: str
    data: bytes


def snapshot_id(root):
    return json.loads((Path(root) / "build.json").read_text())["pyodide"]["snapshot_id"]


def snapshot_key(url, root):
    """The snapshot's key in Cache Storage for the site built in `root` and served at `url`."""
    return f"{url}{SNAPSHOTS}/{snapshot_id(root)}"


def read_snapshot(page, url, root, timeout_ms=BOOT_MS) -> Snapshot:
    """The snapshot a first boot of `page` saved (saving goes on after the boot: wait for it)."""
    import base64

    b64 = page.evaluate("""async ([name, key, timeout]) => {
        const until = performance.now() + timeout;
        let saved;
        while (!(saved = await caches.open(name).then((c) => c.match(key)))) {
            if (performance.now() > until) throw new Error(`no Python snapshot at ${key} after ${timeout} ms`);
            await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const bytes = new Uint8Array(await saved.arrayBuffer());
        let s = "";
        for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
        return btoa(s);
    }""", [SNAPSHOTS, snapshot_key(url, root), timeout_ms])
    return Snapshot(snapshot_id(root), base64.b64decode(b64))


def seed_snapshot(context, url, root, snapshot: Snapshot) -> bool:
    """Put Python's `snapshot` into `context`'s Cache Storage for the site served at `url` from
    `root`, as a first boot there would have left it; False (nothing put) when that site was built
    from other wheels or another Pyodide (another snapshot_id: its first page boots as usual).
    The copy is served from the site's own server (a file under `root`), then stored by a page
    of the same origin."""
    if snapshot_id(root) != snapshot.id:
        return False
    file = Path(root) / SNAPSHOT_FILE
    if not file.exists() or file.stat().st_size != len(snapshot.data):
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(snapshot.data)
    page = context.new_page()
    try:
        page.goto(url + "build.json")  # any page of the origin: Cache Storage is per origin
        page.evaluate("""([name, key, file]) => fetch(file).then((r) => {
            if (!r.ok) throw new Error(`${file}: HTTP ${r.status}`);
            return caches.open(name).then((c) => c.put(key, r));
        })""", [SNAPSHOTS, snapshot_key(url, root), SNAPSHOT_FILE])
    finally:
        page.close()
    return True


_SESSION_SNAPSHOTS = {}  # snapshot_id -> Snapshot: what the session's one first boot of that build saved


def session_snapshot(browser, server) -> Snapshot:
    """Python's memory snapshot (about 30 MB) of the site `server` serves: made once a session, by
    a first boot of the page in a context of its own, then put in every App's context."""
    key = snapshot_id(server.root)
    if key not in _SESSION_SNAPSHOTS:
        a = App(browser, server, snapshot=None)
        try:
            page = a.open()
            assert page.evaluate("chatlens.ready.then(r => r.snapshot)") == "saved"
            _SESSION_SNAPSHOTS[key] = read_snapshot(page, server.url, server.root)
            # The GPU's known-answer check ran as this page booted (WebGPU asked for by name): kept
            # for every App from now on (harvested as it closes). A faulty test build's must fail.
            page.wait_for_function("() => chatlens.checked", timeout=BOOT_MS)
            faulty = json.loads((Path(server.root) / "build.json").read_text())["check"]["fault"] is not None
            assert page.evaluate("chatlens.checked.passed") != faulty, page.evaluate("chatlens.checked")
        finally:
            a.close()
        assert not a.errors, a.errors
    return _SESSION_SNAPSHOTS[key]


SESSION = object()  # App's default snapshot: session_snapshot's


def open_with_the_model(app, query="", weights="checked"):
    """The page, its model downloaded into the store and its weights on the GPU; `weights`: what
    their check says (the mirror's copies publish their first step; a tiny model has none)."""
    page = app.open(query)
    summary = page.evaluate("chatlens.downloadModel()")
    assert summary["complete"] and summary["bytes"] > 0
    model = page.evaluate("chatlens.modelReady")
    assert model["kind"] == "webgpu" and model["backend"].startswith("webgpu: ")
    # the mirror's copies (its bf16 folder, its GGUF, wherever they are read from) publish their first
    # step, by their sha256: checked on this GPU too
    assert model["check"]["passed"] and model["check"]["weights"] == weights, model["check"]
    page.wait_for_function("() => chatlens.status.state === 'ready'")
    assert page.text_content("#status-text") == "Ready"
    return page


class App:
    """A fresh browser context on the site, recording every request it makes (worker included).

    snapshot: Python's memory snapshot, put in the context first so that its pages start Python
    from it (1-2 s, against 6-12 s for a first boot here): by default the session's
    (session_snapshot), for a first visit none; None: the first page boots Python as a first
    visit does (a test of that boot). checks: the GPU checks this session's contexts passed,
    kept for its pages (CHECKS_KEY), by default; None: none (a test of the check)."""

    def __init__(self, browser, server, first_visit=False, snapshot=SESSION, checks=SESSION):
        self.server = server
        if snapshot is SESSION:
            snapshot = None if first_visit else session_snapshot(browser, server)
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000}, reduced_motion=REDUCED_MOTION)
        self.context.set_default_timeout(WAIT_MS)
        if snapshot is not None:
            seed_snapshot(self.context, server.url, server.root, snapshot)
        if not first_visit:
            # A returning learner who chose Live mode, unless the test saves other settings: a
            # first visit lands where the store says (Recorded until the model is stored).
            self.context.add_init_script(LIVE_BY_CHOICE)
        self.context.add_init_script(WEBGPU_BY_CHOICE)
        if checks is SESSION and _SESSION_CHECKS:
            self.context.add_init_script(seed_checks(dict(_SESSION_CHECKS)))
        self.requests = []
        self.context.on("request", lambda r: self.requests.append(r))
        self.errors = []
        self.page = None

    def _console(self, message):
        # A Content-Security-Policy violation (in the page or a worker) fails the test.
        if "Content Security Policy" in message.text or "Content-Security-Policy" in message.text:
            self.errors.append(f"CSP: {message.text}")

    def open(self, query="", ready=True):
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", self._console)
        self.page.goto(self.server.url + query)
        self.page.wait_for_function("() => window.chatlens !== undefined")
        if ready:
            self.wait_ready()
        return self.page

    def wait_ready(self):
        """Until previews work: the tokenizer and template are read ("text"; the weights may follow)."""
        self.page.wait_for_function("() => ['text', 'weights', 'ready', 'error'].includes(document.getElementById('status').dataset.state)",
                                    timeout=BOOT_MS)
        state = self.page.get_attribute("#status", "data-state")
        assert state in ("text", "weights", "ready"), self.page.text_content("#status")

    def evaluate(self, js, arg=None):
        return self.page.evaluate(js, arg)

    def urls(self):
        return [r.url for r in self.requests]

    def prompt_text(self):
        return self.page.eval_on_selector("#prompt-text", "e => e.textContent")

    def pieces(self):
        return self.page.eval_on_selector_all(
            "tr.piece-row", "rows => rows.map(r => [r.querySelector('.label').textContent, Number(r.querySelector('.num').textContent)])")

    def dropped(self):
        return self.page.eval_on_selector_all(
            "tr.dropped-row", "rows => rows.map(r => [Number(r.dataset.index), Number(r.dataset.count)])")

    def send(self, text):
        n = self.page.locator("#chat .msg.user").count()
        self.page.fill("#draft", text)
        self.page.press("#draft", "Enter")
        # the message is in the chat, and the run call has answered (a reply, or marked "no reply")
        self.page.wait_for_function(
            "n => document.querySelectorAll('#chat .msg.user').length === n && "
            "document.querySelectorAll('#chat .msg.user.no-reply, #chat .msg.assistant:not(.is-streaming)').length === n",
            arg=n + 1)

    def type_draft(self, text):
        self.page.fill("#draft", text)
        self.page.wait_for_function(
            "t => document.getElementById('reads-caption')?.textContent.startsWith('Preview') && "
            "document.getElementById('prompt-text')?.textContent.includes(t)", arg=text)

    def shot(self, name):
        """A full-page screenshot into artifacts/screenshots/NAME.png, for a person to look at."""
        from playwright.sync_api import TimeoutError as Timeout

        SHOTS.mkdir(parents=True, exist_ok=True)
        path = str(SHOTS / f"{name}.png")
        try:
            self.page.screenshot(path=path, full_page=True, timeout=30_000)
        except Timeout:
            # Once in CI a screenshot after a reload waited its whole 120 s. Headless Chromium can
            # wait for a frame from a compositor gone idle over a still page (and ours are still:
            # reduced motion); a screencast asks for frames again. Then once more.
            cdp = self.context.new_cdp_session(self.page)
            try:
                cdp.send("Page.startScreencast", {"format": "jpeg", "quality": 1, "maxWidth": 64, "maxHeight": 64})
                self.page.wait_for_timeout(250)
                cdp.send("Page.stopScreencast")
            finally:
                cdp.detach()
            self.page.screenshot(path=path, full_page=True, timeout=60_000)

    def close_pages(self):
        """Close every page of the context (their workers go with them); the context and its
        storage stay, for the next test that shares them."""
        for page in list(self.context.pages):
            page.close()
        self.page = None

    def close(self):
        try:
            harvest_checks(self.context)
        except Exception:  # a context a test already broke: nothing to keep from it
            pass
        self.context.close()


# A GPU slow enough to watch a reply's progress, or to act in the middle of a read, on any adapter
# (tests/README.md: wait for events, never for time).
SLOW_GPU = """(ms) => {
    // Each GPU completion this worker waits for (work done, a readback mapped) comes `ms` later;
    // 0: on time again (the originals are kept the first time).
    const q = GPUQueue.prototype, b = GPUBuffer.prototype;
    q.onTime ??= q.onSubmittedWorkDone;
    b.onTime ??= b.mapAsync;
    const later = (p) => p.then((v) => new Promise((resolve) => setTimeout(() => resolve(v), ms)));
    q.onSubmittedWorkDone = ms ? function () { return later(q.onTime.call(this)); } : q.onTime;
    b.mapAsync = ms ? function (...args) { return later(b.onTime.apply(this, args)); } : b.onTime;
}"""


def slow_gpu(page, ms=150):
    """The page's worker, its model on the GPU, waits `ms` longer for each GPU completion: a slow GPU
    on any adapter (a part of a step, a token, each then takes at least that long); 0 undoes it."""
    page.wait_for_function("() => chatlens.status.state === 'ready'", timeout=300_000)  # the weights on the GPU
    worker = next(w for w in page.workers if w.url.endswith("/worker/worker.mjs"))
    worker.evaluate(SLOW_GPU, ms)


def cli_run(messages, window, preset):
    """Start `python -m chatlens run` for the same conversation: the reference the page must
    match. It runs while the browser works; call the result to wait for its turn record."""
    proc = subprocess.Popen([sys.executable, "-m", "chatlens", "run", "--window", str(window), "--preset", preset],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    proc.stdin.write(json.dumps({"messages": messages}))
    proc.stdin.close()

    def result():
        out, err = proc.stdout.read(), proc.stderr.read()
        assert proc.wait(timeout=600) == 0, err
        return json.loads(out)
    return result


def assert_same_comparison(out, want, tol=1e-3):
    """chatlens.compare's answer in the page equals CPython's (chatlens.host.compare.compared, a
    Compared) on the same weights: the ids both read, and each of the four's reply, stop and each
    step's candidates (within `tol`), computed on the GPU."""
    from chatlens.compare import LAYOUTS, MODELS
    from chatlens.protocol import to_json

    want = to_json(want)

    assert out["prompt"]["plain_ids"] == want["prompt"]["plain_ids"]
    assert out["prompt"]["template_ids"] == want["prompt"]["template_ids"]
    for key in MODELS:
        for layout in LAYOUTS:
            cell, ref = out[key][layout], want[key][layout]
            assert cell["reply_ids"] == ref["reply_ids"], (key, layout)
            assert cell["stop_reason"] == ref["stop_reason"], (key, layout)
            assert cell["backend"].startswith("webgpu: "), (key, layout, cell["backend"])
            assert len(cell["top_k"]) == len(ref["top_k"]), (key, layout)  # each step's candidates
            for step, ref_step in zip(cell["top_k"], ref["top_k"]):
                assert [r[0] for r in step] == [r[0] for r in ref_step], (key, layout)
                for (_, _, p), (_, _, q) in zip(step, ref_step):
                    assert abs(p - q) < tol, (key, layout, p, q)


# -- accessibility: axe-core on the page as it is --------------------------------------------------------------------
AXE = ROOT / "tests" / "axe" / "node_modules" / "axe-core" / "axe.min.js"  # tests/axe/package.json's pin
SERIOUS = ("serious", "critical")


def axe_scan(page, within=None):
    """axe-core's violations on `page` as it is now (`within`: a selector, to scan that part only):
    [{rule, impact, nodes: [selector, ...], help}], every impact. The engine goes in through the
    debugging protocol (page.evaluate), which the page's Content-Security-Policy does not govern:
    nothing is added to the site."""
    if not page.evaluate("typeof axe !== 'undefined'"):
        assert AXE.exists(), f"{AXE} is missing: bash scripts/setup.sh --test installs it (tests/axe/package.json)"
        page.evaluate(AXE.read_text())
    return page.evaluate("""async (within) => {
        const found = await axe.run(within ? document.querySelector(within) : document, {resultTypes: ['violations']});
        return found.violations.map((v) => ({rule: v.id, impact: v.impact, help: v.help,
                                             nodes: v.nodes.map((n) => n.target.join(' '))}));
    }""", within)


def assert_accessible(page, state, within=None):
    """No serious or critical axe violation on `page` (`state` names it in the failure); the
    violations found, of every impact, are returned (and printed, for the report)."""
    import time

    began = time.perf_counter()
    found = axe_scan(page, within)
    print(f"axe, {state} ({time.perf_counter() - began:.1f} s): " +
          (", ".join(f"{v['rule']} ({v['impact']}, {len(v['nodes'])})" for v in found) or "none"))
    serious = [v for v in found if v["impact"] in SERIOUS]
    assert not serious, f"axe, {state}: {serious}"
    return found
