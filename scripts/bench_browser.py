#!/usr/bin/env python3
"""The site in a browser, measured: `python3 scripts/bench_browser.py [--only SECTIONS] [options]`.

Debian's Chromium (/usr/bin/chromium, the flags of tests/webapp.py) runs the site that
`chatlens.host.build.build_site` writes into a temporary folder, served with the same-origin model
mirror `serve` uses. Without a GPU its WebGPU adapter is SwiftShader, a CPU emulation: every
figure from the page is a functional measurement of this machine, not a GPU's speed.

Sections (`--only reload,replies,wllama,long,panel`; all by default):
  reload   issue 9: a persistent profile visits once online (the model downloaded into the store,
           the service worker in control), then `--reloads` reloads: the time from navigation to
           previews ready and to the model ready to answer, and where it goes (the worker's
           performance marks, one at each status it sends: site/js/worker/worker.mjs)
  replies  issue 8: a chat prompt (`--prompt short|conversation`) and `--new-tokens` N: prefill and
           decode tokens/s and the time to the first token in the page, the GPU program's dispatches
           (built natively for the page's adapter) and the weight bytes a decode step reads; beside
           it the NumPy backend natively in CPython on the same prompt ids, back to back
  wllama   issue 8: @wllama/wllama (llama.cpp in WebAssembly, pinned in scripts/bench/package.json,
           installed with npm into .cache/bench/) on the mirror's Q4_1 GGUF, same browser, same
           prompt, same N, greedy
  long     issue 11: the tiny model (tests/tiny_model.py) in one page: `--turns` previews of a growing
           conversation, then `--replies` replies, with the page's JS heap, the worker's wasm memory
           and JS heap (its "debug" request) and the GPU process's resident memory along the way
  panel    issue 15: the main thread's time for each streamed token at a ~900-token prompt on the
           Tokens tab, the whole panel drawn again (before) against the reply's box alone (after)

Figures are medians of repeats, printed, never asserted; rows compared by a ratio run back to
back in the same invocation. The machine's load average is printed with each section.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))
sys.path.insert(0, str(ROOT / "tests"))

SECTIONS = ("reload", "replies", "wllama", "long", "panel")
BENCH_FILES = ROOT / "scripts" / "bench"  # package.json + lock (wllama), the wllama page
NPM_DIR = ROOT / ".cache" / "bench"  # ignored (/.cache/ in .gitignore): wllama's node_modules
WORKER_URL = "/js/worker/worker.mjs"
MB = 1e6
LONG_WAIT_MS = 3_600_000  # the real model on SwiftShader takes seconds a token

SHORT_PROMPT = [
    {"role": "system", "content": "You are a helpful assistant. Answer in one short sentence."},
    {"role": "user", "content": "What is the capital of France?"},
]

# Marks the page records for the reload section: every status (the worker's marks say the same
# from the worker's side), the API's promises as they settle, and a preview asked for at once.
RECORDER = """(() => {
  const b = (window.__bench = { statuses: [], chatlensAt: null, modelReadyAt: null, previewAt: null, errors: [] });
  let api;
  Object.defineProperty(window, "chatlens", {
    configurable: true, enumerable: true,
    get() { return api; },
    set(v) {
      api = v;
      b.chatlensAt = performance.now();
      v.onStatus((s) => b.statuses.push([performance.now(), s.state, s.detail]));
      Promise.resolve(v.modelReady).then((m) => { b.modelReadyAt = performance.now(); b.model = m; },
                                         (e) => b.errors.push(String(e)));
      v.preview({ messages: [{ role: "user", content: "Hi!" }], window: 256 })
        .then(() => (b.previewAt = performance.now()), (e) => b.errors.push(String(e)));
    },
  });
})();"""

# Calls the worker's "debug" request from inside the worker (Playwright's worker.evaluate): the
# answer is taken before it would reach the page, which has no request of that id waiting.
WORKER_DEBUG = """() => new Promise((resolve, reject) => {
  const id = -1 - Math.floor(Math.random() * 1e9);
  const post = self.postMessage;
  self.postMessage = function (m, ...rest) {
    if (m && m.id === id) {
      self.postMessage = post;
      return m.ok ? resolve(m.result) : reject(new Error(m.error));
    }
    return post.call(this, m, ...rest);
  };
  self.onmessage({ data: { id, type: "debug" } });
})"""

WORKER_MARKS = """() => ({ origin: performance.timeOrigin,
  marks: performance.getEntriesByType("mark").filter((m) => m.name.startsWith("chatlens:"))
    .map((m) => [m.name.slice(9), m.startTime, m.detail]) })"""

ADAPTER = """async () => {
  const a = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  const limits = {};
  for (const k in a.limits) limits[k] = a.limits[k];
  const i = a.info || {};
  return { features: [...a.features].sort(), limits,
           name: [i.vendor, i.architecture, i.description || i.device].filter(Boolean).join(" ") };
}"""

RUN = """async ({ messages, window, n }) => {
  const t0 = performance.now();
  const times = [];
  const r = await chatlens.run({ messages, window, maxTokens: n }, { onToken: (t) => t.id >= 0 && times.push(performance.now()) });
  return { t0, times, end: performance.now(), record: { used: r.used, reused: r.reused_tokens, computed: r.computed_tokens,
           ids: r.prompt_ids, reply_ids: r.reply_ids, reply_text: r.reply_text, stop_reason: r.stop_reason,
           timings: r.timings, backend: r.backend } };
}"""

# Reading the stored model back as the GPU upload does (chunks checked against their sha256), and
# the same chunks without the check: how much of an upload is the store.
STORE_READ = """async () => {
  const { openModelStore } = await import("/js/store/models.mjs");
  const store = await openModelStore();
  const source = chatlens.source;
  const summary = await store.status(source);
  const out = { files: [], verified_ms: 0, raw_ms: 0, bytes: 0 };
  for (const f of summary.files) {
    let t = performance.now();
    let n = 0;
    for await (const c of store.chunks(source, f.name)) n += c.bytes.length;
    out.verified_ms += performance.now() - t;
    const rec = await store.db.getFile(store.idOf(source), f.name);
    t = performance.now();
    for (let i = 0; i < rec.chunks.length; i += 4) await store.db.getChunks(rec.model, rec.name, i, Math.min(rec.chunks.length - 1, i + 3));
    out.raw_ms += performance.now() - t;
    out.bytes += n;
    out.files.push([f.name, n]);
  }
  return out;
}"""


# The GPU upload without the store: the page's executor (site/js/gpu/executor.mjs) on the program
# the page builds, its weights zeros (fill) or left out (no fill: buffers, shaders, pipelines only).
EXECUTOR = """async ({ program, fill }) => {
  const { createExecutor, probe } = await import("/js/gpu/executor.mjs");
  const gpu = await probe();
  if (!fill) for (const b of program.buffers) delete b.fill;
  const t = performance.now();
  const ex = await createExecutor(gpu.adapter, program, (file, offset, n) => new Uint8Array(n), { name: gpu.name });
  const created = performance.now() - t;
  await ex.device.queue.onSubmittedWorkDone();
  const done = performance.now() - t;
  ex.destroy();
  return { created, done };
}"""

# The same steps as executor.mjs, each timed: buffers (weights written as zeros), shader modules,
# pipelines. A diagnostic copy: executor.mjs itself is what the EXECUTOR figure above runs.
GPU_PARTS = """async ({ program }) => {
  const { probe } = await import("/js/gpu/executor.mjs");
  const { adapter } = await probe();
  const need = program.requires;
  const device = await adapter.requestDevice({ requiredFeatures: need.features, requiredLimits: need.limits });
  const out = {};
  let t = performance.now();
  const made = program.buffers.map((b) => device.createBuffer({ size: b.size, usage: 0x80 | 0x08 | 0x04 }));
  await device.queue.onSubmittedWorkDone();
  out.buffers = performance.now() - t;
  t = performance.now();
  program.buffers.forEach((b, i) => {
    for (const f of b.fill || []) {
      const n = program.weights[f.weight].nbytes;
      device.queue.writeBuffer(made[i], f.offset, new Uint8Array(n + ((4 - (n % 4)) % 4)));
    }
  });
  await device.queue.onSubmittedWorkDone();
  out.writes = performance.now() - t;
  t = performance.now();
  const modules = {};
  out.slowest_module = [0, ""];
  for (const m of program.modules) {
    const t0 = performance.now();
    modules[m.name] = device.createShaderModule({ code: m.code });
    await modules[m.name].getCompilationInfo();
    const ms = performance.now() - t0;
    if (ms > out.slowest_module[0]) out.slowest_module = [ms, m.name];
  }
  out.modules = performance.now() - t;
  t = performance.now();
  out.slowest_pipeline = [0, ""];
  for (const p of program.pipelines) {
    const t0 = performance.now();
    const layout = device.createBindGroupLayout({
      entries: p.bindings.map((type, binding) => ({ binding, visibility: 4, buffer: { type } })) });
    const compute = { module: modules[p.module], entryPoint: p.entry };
    if (Object.keys(p.constants).length) compute.constants = p.constants;
    await device.createComputePipelineAsync({ layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }), compute });
    const ms = performance.now() - t0;
    if (ms > out.slowest_pipeline[0]) out.slowest_pipeline = [ms, p.name];
  }
  out.pipelines = performance.now() - t;
  device.destroy();
  return out;
}"""

# Pyodide's wasm compiled as Pyodide does it (instantiateStreaming of a fetch), twice.
WASM_COMPILE = """async () => {
  const out = [];
  for (let i = 0; i < 2; i++) {
    const t = performance.now();
    await WebAssembly.compileStreaming(fetch("/pyodide/pyodide.asm.wasm"));
    out.push(performance.now() - t);
  }
  return out;
}"""


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt_s(ms):
    return "   n/a" if ms is None else f"{ms / 1000:6.2f}"


def fmt_mb(n):
    return "n/a" if n is None else f"{n / MB:.1f} MB"


# -- the server, the browser, the stored model ----------------------------------------------------


def bench_server(out, mirror):
    """SiteServer, whose /bench/ pages go without the site's Content-Security-Policy: wllama starts
    its worker from a blob: URL, which the site's `worker-src 'self'` refuses. Cross-origin
    isolation (COOP/COEP) stays, which wllama's threads need."""
    from chatlens.host.serve import ISOLATION_HEADERS, SiteHandler, SiteServer

    class Handler(SiteHandler):
        def end_headers(self):
            if not urlsplit(self.path).path.startswith("/bench/"):
                return super().end_headers()
            for k, v in ISOLATION_HEADERS.items():
                self.send_header(k, v)
            BaseHTTPRequestHandler.end_headers(self)

    server = SiteServer(out, mirror=mirror)
    server.RequestHandlerClass = Handler
    return server.start()


def gpu_processes():
    """Chromium's GPU processes started by this script (its descendants)."""
    import psutil

    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "--type=gpu-process" in p.cmdline():
                found.append(p)
        except psutil.Error:
            pass
    return found


class Bench:
    """The built site, its server, Playwright, and browser profiles that hold the model."""

    def __init__(self, args, sections):
        from chatlens.host import build
        from chatlens.host.mirror import prepare_mirror

        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="chatlens-bench-"))
        self.out = build.build_site(self.tmp / "site", log=lambda m: None, root=ROOT)
        self.mirror = prepare_mirror(quiet=True)
        self.hf_folder = self.mirror.files["config.json"].parent
        self.gguf = self.mirror.files[self.mirror.gguf]
        self.results = {}
        self.profiles = {}
        self.wllama_error = None
        if "long" in sections or "panel" in sections:
            from tiny_model import write_tiny_model

            write_tiny_model(self.out / "tiny" / "model", self.hf_folder)
        if "wllama" in sections:
            try:
                install_wllama(self.out / "bench")
            except Exception as e:  # reported by the section
                self.wllama_error = str(e)
        self.server = bench_server(self.out, self.mirror)
        self.url = self.server.url
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self.pw = self._pw

    def close(self):
        self._pw.stop()
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def launch_args(self):
        from webapp import LAUNCH_ARGS

        # gc() in the page and the worker, and exact heap sizes: for the long section's figures.
        return LAUNCH_ARGS + ["--js-flags=--expose-gc", "--enable-precise-memory-info"]

    def persistent(self, profile):
        from webapp import CHROMIUM

        return self.pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, args=self.launch_args(), headless=True,
            viewport={"width": 1400, "height": 1000})

    def browser(self):
        from webapp import CHROMIUM

        return self.pw.chromium.launch(executable_path=CHROMIUM, args=self.launch_args())

    def page_query(self):
        # WebGPU by name: `auto` passes SwiftShader over for NumPy (chatlens.device), and the page
        # is measured on the GPU path
        query = "?backend=webgpu" + ("&jspi=off" if self.args.no_jspi else "")
        if self.args.page_source == "gguf":
            return f"{query}&model={self.url}{self.mirror.base}{self.mirror.gguf}"
        return query

    def page_model_path(self):
        return self.gguf if self.args.page_source == "gguf" else self.hf_folder

    def stored_profile(self):
        """A browser profile on disk that visited the site once online: the model downloaded into
        the store, the service worker in control. Made once per run and source."""
        query = self.page_query()
        if query in self.profiles:
            return self.profiles[query]
        profile = self.tmp / f"profile-{len(self.profiles)}"
        ctx = self.persistent(profile)
        try:
            page = ctx.pages[0] if ctx.pages else ctx.new_page()
            t0 = time.perf_counter()
            page.goto(self.url + query)
            wait_previews(page)
            page.evaluate("navigator.serviceWorker.ready.then(() => true)")
            page.wait_for_function("() => Boolean(navigator.serviceWorker.controller)", timeout=120_000)
            t1 = time.perf_counter()
            summary = page.evaluate("chatlens.downloadModel()")
            t2 = time.perf_counter()
            model = page.evaluate("chatlens.modelReady")
            t3 = time.perf_counter()
            if not summary.get("complete") or model.get("kind") != "webgpu":
                raise RuntimeError(f"the model did not load on WebGPU: {summary} {model}")
            print(f"first visit (online): previews and the service worker in {t1 - t0:.1f} s; "
                  f"download of {fmt_mb(summary.get('bytes'))} into the store {t2 - t1:.1f} s; "
                  f"weights on the GPU {t3 - t2:.1f} s ({model.get('backend')})")
        finally:
            ctx.close()
        self.profiles[query] = profile
        return profile


def wait_previews(page, timeout=600_000):
    page.wait_for_function("() => window.chatlens && ['text', 'weights', 'ready', 'error'].includes(chatlens.status.state)",
                           timeout=timeout)
    if page.evaluate("chatlens.status.state") == "error":
        raise RuntimeError(f"the page failed: {page.evaluate('chatlens.status.detail')}")


def chatlens_worker(page, timeout_s=120):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        for w in page.workers:
            if urlsplit(w.url).path.endswith(WORKER_URL):
                return w
        page.wait_for_timeout(100)
    raise RuntimeError("the page started no chatlens worker")


def install_wllama(dest):
    """wllama from npm at the version scripts/bench/package.json pins (its lock file), into
    .cache/bench/ (npm ci, only when it is not there yet), and the files the bench page loads
    copied into `dest` beside the page."""
    pinned = json.loads((BENCH_FILES / "package.json").read_text())["dependencies"]["@wllama/wllama"]
    pkg = NPM_DIR / "node_modules" / "@wllama" / "wllama"
    have = json.loads((pkg / "package.json").read_text())["version"] if (pkg / "package.json").exists() else None
    if have != pinned:
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(BENCH_FILES / name, NPM_DIR / name)
        done = subprocess.run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=NPM_DIR,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"npm ci in {NPM_DIR} failed: {done.stderr.strip()[-1000:]}")
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("wllama.html", "wllama.mjs"):
        shutil.copy(BENCH_FILES / name, dest / name)
    for rel in ("esm/index.js", "esm/wasm/wllama.wasm"):
        (dest / "wllama" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(pkg / rel, dest / "wllama" / rel)
    return pinned


# -- 1. warm reload -------------------------------------------------------------------------------


def section_reload(bench, args):
    print(f"\n== warm reload (issue 9): {args.reloads} reloads of a persistent profile that holds the model; {load()}")
    print("   SwiftShader is a CPU emulation: a functional measurement of this machine")
    profile = bench.stored_profile()
    ctx = bench.persistent(profile)
    try:
        ctx.add_init_script(RECORDER)
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        visits = []
        for i in range(args.reloads + 1):
            if i == 0:
                page.goto(bench.url + bench.page_query())  # the browser just started on the profile
            else:
                page.reload()
            page.wait_for_function("() => window.__bench && __bench.modelReadyAt !== null && __bench.previewAt !== null"
                                   " || (window.__bench && __bench.errors.length > 0)", timeout=LONG_WAIT_MS)
            visits.append(reload_figures(page))
            if visits[-1]["errors"]:
                raise RuntimeError(f"the page failed: {visits[-1]['errors']}")
        if errors:
            print(f"   page errors: {errors[:3]}")
        store = page.evaluate(STORE_READ)
        n_ctx = page.evaluate("__bench.model.n_ctx")
        page.goto(bench.url + "build.json")  # a page of the site without the app: its worker and GPU device gone
        adapter = page.evaluate(ADAPTER)
        program = native_program(bench.page_model_path(), n_ctx, adapter["features"], adapter["limits"])
        gpu_fill = page.evaluate(EXECUTOR, {"program": program, "fill": True})
        gpu_bare = page.evaluate(EXECUTOR, {"program": program, "fill": False})
        gpu_parts = page.evaluate(GPU_PARTS, {"program": program})
        compile_ms = page.evaluate(WASM_COMPILE)
    finally:
        ctx.close()
    cold, warm = visits[0], visits[1:]
    print(f"   first navigation after the browser started: previews {fmt_s(cold['previews'])} s, "
          f"ready {fmt_s(cold['ready'])} s, first preview answered {fmt_s(cold['preview'])} s")
    print(f"   {'reload':<8}" + "".join(f"{k:>10}" for k in ("previews", "ready", "preview")) + "   (s from navigation)")
    for n, v in enumerate(warm, 1):
        print(f"   {n:<8}{fmt_s(v['previews']):>10}{fmt_s(v['ready']):>10}{fmt_s(v['preview']):>10}")
    for key, what in (("previews", "previews ready (status text/weights/ready)"), ("ready", "model ready (status ready, modelReady)"),
                      ("preview", "first preview answered (asked for at once)")):
        xs = [v[key] for v in warm if v[key] is not None]
        if xs:
            print(f"   {what:<46} median {med(xs) / 1000:6.2f} s   min {min(xs) / 1000:6.2f}   max {max(xs) / 1000:6.2f}")
    gap = med([v["preview"] - v["previews"] for v in warm if v["preview"] is not None and v["previews"] is not None])
    if gap is not None and gap > 1000:
        print(f"   a preview asked for at once is answered {gap / 1000:.2f} s after the status says previews work: it "
              "waited for Python (a run, or the weights' attach)")
    print("   where the time goes (median over the reloads; the worker's marks, in ms from one to the next):")
    phases = [p for p, _ in warm[0]["phases"]]
    for name in phases:
        xs = [dict(v["phases"]).get(name) for v in warm]
        m = med(xs)
        print(f"     {name:<58} {'n/a' if m is None else f'{m:8.0f}'}")
    ready = med([v["ready"] for v in warm])
    if ready is not None:
        big = sorted(((med([dict(v['phases']).get(p) for v in warm]) or 0, p) for p in phases), reverse=True)[:2]
        print(f"   target: ready in at most 3 s here. Median {ready / 1000:.2f} s: "
              + ("met" if ready <= 3000 else f"{(ready - 3000) / 1000:.2f} s over ({ready / 3000:.1f}x)")
              + f"; largest: {big[0][1]} ({big[0][0] / 1000:.2f} s), {big[1][1]} ({big[1][0] / 1000:.2f} s)")
    print("   the weights upload taken apart, once each, in the page's main thread:")
    print(f"     the store read back ({fmt_mb(store['bytes'])}) as the upload reads it, sha256 of each chunk checked: "
          f"{store['verified_ms'] / 1000:.2f} s; the same IndexedDB reads without the check: {store['raw_ms'] / 1000:.2f} s")
    print(f"     executor.mjs on the same program, zeros for weights: {gpu_fill['created'] / 1000:.2f} s to return, "
          f"{gpu_fill['done'] / 1000:.2f} s until the queue is done; without the weights (buffers, shaders, pipelines): "
          f"{gpu_bare['created'] / 1000:.2f} s, {gpu_bare['done'] / 1000:.2f} s")
    print(f"     so writing {fmt_mb(store['bytes'])} of weights to the device: about {(gpu_fill['done'] - gpu_bare['done']) / 1000:.2f} s")
    g = gpu_parts
    print(f"     the same steps timed one by one: buffers {g['buffers'] / 1000:.2f} s, weight writes {g['writes'] / 1000:.2f} s, "
          f"{len(program['modules'])} shader modules {g['modules'] / 1000:.2f} s (slowest {g['slowest_module'][1]} "
          f"{g['slowest_module'][0] / 1000:.2f} s), {len(program['pipelines'])} pipelines {g['pipelines'] / 1000:.2f} s "
          f"(slowest {g['slowest_pipeline'][1].split(':')[0]} {g['slowest_pipeline'][0] / 1000:.2f} s)")
    print(f"     Pyodide's wasm ({fmt_mb((bench.out / 'pyodide' / 'pyodide.asm.wasm').stat().st_size)}) compiled by "
          f"compileStreaming: {compile_ms[0] / 1000:.2f} s, again {compile_ms[1] / 1000:.2f} s")
    bench.results["reload"] = {"warm": warm, "store": store, "gpu": [gpu_fill, gpu_bare, gpu_parts], "compile": compile_ms}


def reload_figures(page):
    """One visit's times in ms from navigation, and its phases from the worker's marks."""
    got = page.evaluate("() => ({ origin: performance.timeOrigin, bench: window.__bench })")
    w = chatlens_worker(page).evaluate(WORKER_MARKS)
    b = got["bench"]
    shift = w["origin"] - got["origin"]  # the worker's clock started later than the page's
    marks = [(name, t + shift, detail or "") for name, t, detail in w["marks"]]

    def mark(state, starts=""):
        for name, t, detail in marks:
            if name == state and detail.startswith(starts):
                return t
        return None

    def first_status(states):
        for t, state, _ in b["statuses"]:
            if state in states:
                return t
        return None

    boot = mark("booting", "starting Python")
    python = mark("booting", "installing chatlens")
    installed = mark("loading")
    text = mark("weights", "the tokenizer") or mark("text", "the tokenizer")
    attach = mark("weights", "loading the model")
    program = mark("weights", "building the GPU program")
    upload = mark("weights", "uploading the weights")
    ready = mark("ready")

    def span(a, b_):
        return None if a is None or b_ is None else b_ - a

    phases = [
        ("page: navigation to its worker created (HTML, modules)", shift),
        ("worker: created to its first status (module load)", span(shift, boot)),
        ("Pyodide boot (loadPyodide; store and text files meanwhile)", span(boot, python)),
        ("chatlens install (wheels, import)", span(python, installed)),
        ("text side (tokenizer, template: Python load)", span(installed, text)),
        ("until the attach request starts (page round trip)", span(text, attach)),
        ("GPU adapter (requestAdapter)", span(attach, program)),
        ("GPU program built in Python", span(program, upload)),
        ("weights upload (store read+sha256, writeBuffer, pipelines)", span(upload, ready)),
    ]
    if b["previewAt"] is not None and ready is not None and b["previewAt"] > ready:
        phases.append(("after ready, the queued first preview", span(ready, b["previewAt"])))
    return {"previews": first_status({"text", "weights", "ready"}), "ready": b["modelReadyAt"], "preview": b["previewAt"],
            "status_ready": first_status({"ready"}), "phases": phases, "errors": b["errors"]}


# -- 2. replies in the page -----------------------------------------------------------------------


def prompt_messages(args, repeat):
    """The chat prompt of one repeat: its system text numbered, so that the prompt cache of the
    page reuses only the few tokens before the number and every repeat prefills the prompt."""
    if args.prompt == "conversation":
        from chatlens.host.bench import CONVERSATION as base
    else:
        base = SHORT_PROMPT
    msgs = [dict(m) for m in base]
    msgs[0]["content"] = f"({repeat + 1}) " + msgs[0]["content"]
    return msgs


def native_program(path, n_ctx, features, limits):
    """The GPU program the page runs, built here for the same source, context and adapter."""
    from chatlens.gpu import build_program, weight_plan

    return build_program(weight_plan(path), n_ctx, features, limits)


def program_figures(path, n_ctx, features, limits):
    """The decode step of the GPU program the page runs, built natively for the same plan, context
    and adapter: dispatches per token and per layer, and the weight bytes it reads."""
    from chatlens.gpu import weight_plan

    plan = weight_plan(path)
    program = native_program(path, n_ctx, features, limits)
    seqs = program["sequences"]
    groups = {g["name"]: g["buffers"] for g in program["bind_groups"]}
    buffers = {b["name"]: b for b in program["buffers"]}
    step = seqs["decode"] + seqs["head"]
    layer0 = [d for d in seqs["decode"] if any(b.startswith("L0.") for b in groups[d["bind_group"]])]
    read = {b for d in step for b in groups[d["bind_group"]] if buffers[b].get("fill")}
    cfg = program["meta"]["config"]
    dtypes = sorted({t["dtype"] for t in plan["tensors"].values()})
    return {"decode": len(seqs["decode"]), "head": len(seqs["head"]), "layer": len(layer0), "layers": cfg["n_layers"],
            "prefill": len(seqs["prefill"]) + len(seqs["head"]), "chunk": program["meta"]["chunk"],
            "weight_bytes": sum(buffers[b]["size"] for b in read), "dtypes": dtypes,
            "kv_bytes_per_key": 2 * cfg["n_layers"] * cfg["n_kv_heads"] * cfg["head_dim"] * 4}


def native_figures(path, ids, n, repeats, threads):
    """The NumPy backend in CPython on the same ids, in a child process (its BLAS threads fixed)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py"), "OPENBLAS_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--native-child"],
                          input=json.dumps({"path": str(path), "ids": ids, "new_tokens": n, "repeats": repeats}),
                          capture_output=True, text=True, env=env, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"the native run failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def native_child():
    import numpy as np

    from chatlens import model as numpy_model
    from chatlens.host.bench import timed_runs
    from chatlens.source import load_model

    req = json.loads(sys.stdin.read())
    ids, n = req["ids"], req["new_tokens"]
    backend = load_model(Path(req["path"])).backend(len(ids) + n)
    runs = [{"prefill_ms": 1000 * p, "decode_ms": 1000 * d} for p, d in timed_runs(backend, ids, n, req["repeats"])]
    blas = "with BLAS" if numpy_model.HAS_BLAS else "without BLAS"
    print(json.dumps({"runs": runs, "detail": f"NumPy {np.__version__} {blas}, OPENBLAS_NUM_THREADS="
                      f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, products {numpy_model.PRODUCTS.name}"}))
    return 0


def section_replies(bench, args):
    n = args.new_tokens
    print(f"\n== replies in the page (issue 8): {args.prompt} prompt, {n} new tokens, median of {args.page_repeats} run(s) in the page "
          f"({'after' if args.warmup else 'no'} warm-up turn) and {args.repeats} natively; {load()}")
    print("   WebGPU here is SwiftShader, a CPU emulation: functional figures, not a GPU's speed")
    profile = bench.stored_profile()
    ctx = bench.persistent(profile)
    try:
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        page.goto(bench.url + bench.page_query())
        wait_previews(page)
        model = page.evaluate("chatlens.modelReady")
        if not model or model.get("kind") != "webgpu":
            raise RuntimeError(f"no WebGPU model in the page: {model} {page.evaluate('chatlens.model')}")
        adapter = page.evaluate(ADAPTER)
        if args.warmup:  # a short turn first, so that nothing the first dispatches do once is counted
            page.evaluate(RUN, {"messages": [{"role": "user", "content": "Hi"}], "window": 256, "n": 1})
        runs = [page.evaluate(RUN, {"messages": prompt_messages(args, r), "window": args.window, "n": n})
                for r in range(args.page_repeats)]
        host = chatlens_worker(page).evaluate(WORKER_DEBUG)["last_reply"]
    finally:
        ctx.close()
    rec0 = runs[0]["record"]
    figs = []
    for run in runs:
        rec, times = run["record"], run["times"]
        ttft = times[0] - run["t0"] if times else None
        decode = (len(times) - 1) / ((times[-1] - times[0]) / 1000) if len(times) > 1 else None
        figs.append({"ttft": ttft, "prefill": rec["computed"] / (ttft / 1000) if ttft else None, "decode": decode,
                     "n": len(times), "rec_prefill": (rec["timings"] or {}).get("prefill_tok_s"),
                     "rec_decode": (rec["timings"] or {}).get("decode_tok_s")})
    page_fig = {k: med([f[k] for f in figs]) for k in figs[0]}
    print(f"   prompt: {rec0['used']} tokens ({rec0['computed']} computed, {rec0['reused']} reused from the cache), "
          f"replies of {sorted({f['n'] for f in figs})} tokens ({rec0['stop_reason']}); {rec0['backend']}")
    print(f"   {'page, WebGPU':<34} prefill {page_fig['prefill']:8.2f} tok/s   decode {fmt_rate(page_fig['decode'])} tok/s   "
          f"first token {page_fig['ttft'] / 1000:7.2f} s")
    print(f"   {'  (the record: worker-side)':<34} prefill {fmt_rate(page_fig['rec_prefill'])} tok/s   "
          f"decode {fmt_rate(page_fig['rec_decode'])} tok/s")
    if host:
        pulls = max(host["pulls"], 1)
        print(f"   the worker's time a pull of the last run ({host['pulls']} pulls, one a token): Python "
              f"{host['python_ms'] / pulls:.2f} ms, encoding and submitting runs {host['submit_ms'] / pulls:.2f} ms, "
              f"waiting for the GPU's bytes {host['wait_ms'] / pulls:.0f} ms; at most {host['most_in_flight']} steps in flight")
    native = native_figures(bench.page_model_path(), rec0["ids"], n, args.repeats, args.native_threads)
    nat = {"prefill": med([len(rec0["ids"]) / (r["prefill_ms"] / 1000) for r in native["runs"]]),
           "decode": med([(n - 1) / (r["decode_ms"] / 1000) for r in native["runs"]]) if n > 1 else None,
           "ttft": med([r["prefill_ms"] for r in native["runs"]])}
    print(f"   {'native NumPy (CPython)':<34} prefill {nat['prefill']:8.2f} tok/s   decode {fmt_rate(nat['decode'])} tok/s   "
          f"first token {nat['ttft'] / 1000:7.2f} s   ({native['detail']}; all {len(rec0['ids'])} tokens computed)")
    print(f"   page / native: prefill {page_fig['prefill'] / nat['prefill']:.3f}x   decode "
          + (f"{page_fig['decode'] / nat['decode']:.3f}x" if page_fig["decode"] and nat["decode"] else "n/a"))
    prog = program_figures(bench.page_model_path(), model["n_ctx"], adapter["features"], adapter["limits"])
    print(f"   the GPU program (built natively for {adapter['name'] or 'the adapter'}, n_ctx {model['n_ctx']}): a decode step is "
          f"{prog['decode'] + prog['head']} dispatches ({prog['decode']} decode + {prog['head']} head), "
          f"{prog['layer']} per layer x {prog['layers']} layers; a prefill chunk of up to {prog['chunk']} tokens is {prog['prefill']}")
    kv = prog["kv_bytes_per_key"] * rec0["used"]
    print(f"   weights read per decode step: {fmt_mb(prog['weight_bytes'])} ({'/'.join(prog['dtypes'])} as stored), "
          f"plus the KV cache: {fmt_mb(kv)} at {rec0['used']} keys")
    if page_fig["decode"]:
        rate = (prog["weight_bytes"] + kv) * page_fig["decode"] / 1e9
        share = (f"{100 * rate / args.bandwidth:.2f}% of the stated {args.bandwidth:g} GB/s" if args.bandwidth
                 else "share: unknown bandwidth (SwiftShader; --bandwidth GB/s states one)")
        print(f"   at the measured decode rate that is {rate:.3f} GB/s read; {share}")
    bench.results["replies"] = {"page": page_fig, "native": nat, "messages": prompt_messages(args, 0), "record": rec0}


def fmt_rate(x):
    return "     n/a" if x is None else f"{x:8.2f}"


# -- 3. wllama ------------------------------------------------------------------------------------


def section_wllama(bench, args):
    from chatlens.source import load_text_side

    n = args.new_tokens
    print(f"\n== wllama (issue 8): llama.cpp in WebAssembly on the same Q4_1 GGUF, {args.prompt} prompt, {n} new tokens, "
          f"median of {args.repeats} runs; {load()}")
    if bench.wllama_error:
        print(f"   wllama could not be installed: {bench.wllama_error}")
        raise RuntimeError("wllama is not installed")
    version = json.loads((BENCH_FILES / "package.json").read_text())["dependencies"]["@wllama/wllama"]
    messages = prompt_messages(args, 0)
    text = load_text_side(bench.gguf)
    prompt = text.template.render(messages, add_generation_prompt=True)
    ours = len(text.tokenizer.encode(prompt))
    rows = [(f"wasm (CPU), {'its default threads' if t is None else f'n_threads {t}'}", 0, t) for t in args.wllama_threads]
    if args.wllama_webgpu:
        rows.append(("WebGPU (SwiftShader)", 999, args.wllama_threads[0]))
    browser = bench.browser()
    results = []
    try:
        for label, layers, threads in rows:
            page = browser.new_page()
            page.goto(bench.url + "bench/wllama.html")
            page.wait_for_function("() => typeof window.benchWllama === 'function'", timeout=60_000)
            got = page.evaluate("a => benchWllama(a)", {
                "url": f"{bench.url}{bench.mirror.base}{bench.mirror.gguf}", "prompt": prompt, "nNew": n,
                "repeats": args.repeats, "threads": threads, "gpuLayers": layers, "nCtx": args.window})
            page.close()
            results.append((label, got))
    finally:
        browser.close()
    replies = bench.results.get("replies")
    for label, got in results:
        info, runs = got["info"], got["runs"]
        t = [r["timings"] or {} for r in runs]
        prompt_n = sorted({x.get("prompt_n") for x in t})
        pre = med([x.get("prompt_per_second") for x in t])
        dec = med([x.get("predicted_per_second") for x in t])
        ttft = med([r["first_ms"] for r in runs])
        print(f"   @wllama/wllama {version} (llama.cpp {info['libllama']}), {label}: {info['threads']} thread(s), "
              f"multithread {info['multithread']}, cross-origin isolated {info['isolated']}; "
              f"model fetched in {got['fetch_ms'] / 1000:.2f} s, loaded in {got['load_ms'] / 1000:.2f} s")
        print(f"   {'wllama ' + label:<34} prefill {fmt_rate(pre)} tok/s   decode {fmt_rate(dec)} tok/s   "
              f"first token {fmt_s(ttft)} s   (llama.cpp's own timings; {sorted({x.get('predicted_n') for x in t})} tokens)")
        same = "the same" if prompt_n == [ours] else f"chatlens's tokenizer counts {ours}"
        print(f"   prompt tokens by wllama's tokenization: {prompt_n} ({same}; add_bos_token {info['add_bos_token']})")
        print(f"   its reply: {runs[0]['text']!r}"
              + (f"; the page's: {replies['record']['reply_text']!r}" if replies and replies["messages"] == messages else ""))
        if replies and replies["messages"] == messages and pre and dec:
            p = replies["page"]
            print(f"   wllama / page (same run): prefill {pre / p['prefill']:.2f}x   decode "
                  + (f"{dec / p['decode']:.2f}x" if p["decode"] else "n/a")
                  + f"   (the page reads {'bf16 safetensors' if args.page_source == 'mirror' else 'the same Q4_1 GGUF'})")
        elif not replies:
            print("   (run the replies section in the same invocation for the ratio to the page)")
        if got["logs"]:
            print(f"   its warnings: {got['logs'][:3]}")


# -- 4. long use ----------------------------------------------------------------------------------


def growing(turns):
    """The conversations of `turns` successive turns: each adds a reply and a new question."""
    msgs = []
    for i in range(1, turns + 1):
        msgs.append({"role": "user", "content": f"Turn {i}: tell me one more thing about the number {i}, in a sentence or two."})
        yield [dict(m) for m in msgs]
        msgs.append({"role": "assistant", "content": f"The number {i} comes after {i - 1} and before {i + 1}; "
                                                     f"{i} squared is {i * i}."})


class WorkerCDP:
    """DevTools protocol commands to the page's chatlens worker, through the browser's session
    (Playwright opens sessions on pages only)."""

    def __init__(self, browser, page):
        self.page, self.cdp, self.replies, self.next = page, browser.new_browser_cdp_session(), {}, 0
        targets = self.cdp.send("Target.getTargets")["targetInfos"]
        worker = [t for t in targets if t["type"] == "worker" and urlsplit(t["url"]).path.endswith(WORKER_URL)]
        if len(worker) != 1:
            raise RuntimeError(f"expected one chatlens worker, found {len(worker)}")
        self.cdp.on("Target.receivedMessageFromTarget", self._got)
        self.session = self.cdp.send("Target.attachToTarget", {"targetId": worker[0]["targetId"], "flatten": False})["sessionId"]

    def _got(self, event):
        message = json.loads(event["message"])
        if "id" in message:
            self.replies[message["id"]] = message

    def send(self, method, params=None, timeout_s=60):
        self.next += 1
        n = self.next
        self.cdp.send("Target.sendMessageToTarget", {"sessionId": self.session,
                                                      "message": json.dumps({"id": n, "method": method, "params": params or {}})})
        end = time.monotonic() + timeout_s
        while n not in self.replies:
            if time.monotonic() > end:
                raise RuntimeError(f"the worker did not answer {method}")
            self.page.wait_for_timeout(20)
        reply = self.replies.pop(n)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]


def memory(page, cdp, worker_cdp, gpu_pids):
    """The page's JS heap and the worker's (after a GC each), Python's wasm memory (the worker's
    debug request), and the resident memory of the browser's GPU process."""
    import psutil

    cdp.send("HeapProfiler.collectGarbage")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    worker_cdp.send("HeapProfiler.collectGarbage")
    worker_js = worker_cdp.send("Runtime.getHeapUsage")["usedSize"]
    wasm = chatlens_worker(page).evaluate(WORKER_DEBUG)["wasm_heap"]
    rss = 0
    for pid in gpu_pids:
        try:
            rss += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            pass
    return {"page_js": metrics.get("JSHeapUsedSize"), "wasm": wasm, "worker_js": worker_js, "gpu_rss": rss or None}


# Times the page's handling of each streamed token: the handler the page gives the worker
# (connection.mjs), wrapped before any script runs.
TOKEN_TIMER = """(() => {
  const times = (window.__tokenMs = []);
  const desc = Object.getOwnPropertyDescriptor(Worker.prototype, "onmessage");
  Object.defineProperty(Worker.prototype, "onmessage", {
    get: desc.get,
    set(fn) {
      desc.set.call(this, (e) => {
        const t = performance.now();
        try { return fn(e); } finally { if (e.data?.type === "token") times.push(performance.now() - t); }
      });
    },
  });
  if (new URLSearchParams(location.search).has("full-redraw")) window.chatlensFullRedraw = true;
})();"""


def section_panel(bench, args):
    print(f"\n== the panel while a reply streams (issue 15): the tiny model, a ~900-token prompt on the Tokens tab, "
          f"{args.panel_tokens} tokens a reply; main-thread time a streamed token, before (the whole panel drawn "
          f"again) and after (the reply's box alone); {load()}")
    browser = bench.browser()
    try:
        rows = []
        for label, flag in (("before: whole panel", "&full-redraw"), ("after: the reply alone", "")):
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            ctx.add_init_script(TOKEN_TIMER)
            page = ctx.new_page()
            page.goto(f"{bench.url}?backend=webgpu&model={bench.url}tiny/model/{flag}")
            wait_previews(page)
            if not page.evaluate("chatlens.downloadModel()").get("complete"):
                raise RuntimeError("the tiny model was not stored")
            page.evaluate("chatlens.modelReady")
            page.wait_for_function("() => chatlens.status.state === 'ready'")
            page.evaluate("localStorage.clear()")
            page.click("#mode-live")
            page.select_option("#window", "1024")
            page.evaluate(f"chatlens.settings.reply_limit = {args.panel_tokens}")
            page.fill("#draft", " ".join(["the lighthouse keeper"] * 290))
            page.wait_for_selector("#reads-tab-tokens")
            page.click("#reads-tab-tokens")
            page.press("#draft", "Enter")
            page.wait_for_function("() => !chatlens.writing && document.querySelector('#chat .msg.assistant:not(.is-streaming)')",
                                   timeout=LONG_WAIT_MS)
            used = page.evaluate("document.querySelectorAll('#token-view .tok').length")
            ms = sorted(page.evaluate("window.__tokenMs"))
            rows.append((label, ms, used))
            ctx.close()
        for label, ms, used in rows:
            p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))] if ms else float("nan")
            print(f"   {label:<26} {len(ms)} tokens: median {med(ms):6.2f} ms, p90 {p90:6.2f} ms a token "
                  f"(the Tokens tab holds {used} chips)")
        if rows[0][1] and rows[1][1]:
            print(f"   after / before: {med(rows[1][1]) / med(rows[0][1]):.3f}x (medians)")
    finally:
        browser.close()


def section_long(bench, args):
    print(f"\n== long use (issue 11): the tiny model in one page, {args.turns} previews of a growing conversation, "
          f"{args.replies} replies of 4 tokens; {load()}")
    before = {p.pid for p in gpu_processes()}
    browser = bench.browser()
    try:
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(f"{bench.url}?backend=webgpu&model={bench.url}tiny/model/")
        wait_previews(page)
        summary = page.evaluate("chatlens.downloadModel()")
        model = page.evaluate("chatlens.modelReady")
        if not summary.get("complete") or (model or {}).get("kind") != "webgpu":
            raise RuntimeError(f"the tiny model did not load on WebGPU: {summary} {model}")
        cdp = ctx.new_cdp_session(page)
        cdp.send("Performance.enable")
        worker_cdp = WorkerCDP(browser, page)
        gpu = [p.pid for p in gpu_processes() if p.pid not in before]
        previews = []
        for msgs in growing(args.turns):
            previews.append(page.evaluate("""async (m) => { const t = performance.now();
                const r = await chatlens.preview({ messages: m, window: 1024 });
                return { ms: performance.now() - t, used: r.used, dropped: r.dropped_messages.length }; }""", msgs))
        first, last = previews[:10], previews[-10:]
        print(f"   previews, first {len(first)}: median {med([p['ms'] for p in first]):.1f} ms, max {max(p['ms'] for p in first):.1f} ms; "
              f"last {len(last)}: median {med([p['ms'] for p in last]):.1f} ms, max {max(p['ms'] for p in last):.1f} ms "
              f"(the last reads {previews[-1]['used']} tokens, {previews[-1]['dropped']} messages dropped to fit 1024)")
        samples = [("before", memory(page, cdp, worker_cdp, gpu))]
        at = {1, 10, 25, 50, args.replies}
        conv, times, computed = [], [], []
        for i in range(1, args.replies + 1):
            conv.append({"role": "user", "content": f"Question {i}: what comes after {i}?"})
            got = page.evaluate(RUN, {"messages": conv, "window": 1024, "n": 4})
            times.append(got["end"] - got["t0"])
            computed.append(got["record"]["computed"])
            conv.append({"role": "assistant", "content": got["record"]["reply_text"] or "..."})
            if i in at:
                samples.append((str(i), memory(page, cdp, worker_cdp, gpu)))
        print(f"   replies: first {min(10, len(times))} median {med(times[:10]):.0f} ms, last {min(10, len(times))} "
              f"median {med(times[-10:]):.0f} ms each (tokens computed a turn, medians: {med(computed[:10]):.0f} and "
              f"{med(computed[-10:]):.0f}; once turns are dropped the cache is reused only up to the first change)")
        print(f"   {'reply':<8}{'page JS heap':>16}{'worker wasm memory':>22}{'worker JS heap':>18}{'GPU process RSS':>19}")
        for label, m in samples:
            print(f"   {label:<8}{fmt_mb(m['page_js']):>16}{fmt_mb(m['wasm']):>22}{fmt_mb(m['worker_js']):>18}{fmt_mb(m['gpu_rss']):>19}")
        print(f"   (JS heaps after a GC; the GPU process{'es' if len(gpu) > 1 else ''} {gpu or 'not found'}: psutil RSS)")
        ctx.close()
    finally:
        browser.close()


# -- main -----------------------------------------------------------------------------------------


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default=",".join(SECTIONS), help=f"sections, comma-separated: {','.join(SECTIONS)}")
    p.add_argument("--reloads", type=int, default=5, help="reload: reloads measured (default 5)")
    p.add_argument("--prompt", choices=("short", "conversation"), default="short",
                   help="replies/wllama: a short chat, or host/bench.py's ~300-token CONVERSATION")
    p.add_argument("--new-tokens", type=int, default=4, help="replies/wllama: new tokens a run (default 4)")
    p.add_argument("--repeats", type=int, default=3, help="replies (native row), wllama: runs a row (default 3)")
    p.add_argument("--page-repeats", type=int, default=1,
                   help="replies: runs in the page (default 1: on SwiftShader a run of the real model takes minutes)")
    p.add_argument("--warmup", action="store_true", help="replies: a short turn in the page before the runs measured")
    p.add_argument("--window", type=int, default=1024, help="replies/wllama: the context window (default 1024)")
    p.add_argument("--page-source", choices=("mirror", "gguf"), default="mirror",
                   help="the page's model: the mirror's default (its Hugging Face folder, bf16) or its Q4_1 GGUF")
    p.add_argument("--bandwidth", type=float, default=None, help="replies: the device's memory bandwidth in GB/s")
    p.add_argument("--native-threads", type=int, default=1, help="replies: OPENBLAS_NUM_THREADS of the native row (default 1)")
    p.add_argument("--wllama-threads", default="auto",
                   help="wllama: n_threads, one row each, comma-separated (default auto: wllama's choice, half the cores)")
    p.add_argument("--wllama-webgpu", action="store_true", help="wllama: also a row with its layers on WebGPU")
    p.add_argument("--turns", type=int, default=100, help="long: previews of a growing conversation (default 100)")
    p.add_argument("--replies", type=int, default=50, help="long: replies of 4 tokens (default 50)")
    p.add_argument("--panel-tokens", type=int, default=40, help="panel: tokens a streamed reply (default 40)")
    p.add_argument("--no-jspi", action="store_true", help="the page's worker hides JSPI (?jspi=off), as a browser without it")
    p.add_argument("--native-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    try:
        args.wllama_threads = [None if t.strip() == "auto" else int(t) for t in args.wllama_threads.split(",")]
    except ValueError:
        p.error("--wllama-threads: thread counts or auto, comma-separated")
    bad = [s for s in args.sections if s not in SECTIONS]
    if bad:
        p.error(f"unknown section(s) {', '.join(bad)}: choose from {', '.join(SECTIONS)}")
    if min(args.new_tokens, args.repeats, args.page_repeats, args.reloads, args.turns, args.replies) < 1:
        p.error("sizes must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    if args.native_child:
        return native_child()
    from webapp import CHROMIUM

    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing (apt-get install -y chromium)")
        return 1
    version = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"chatlens browser bench: {version}, headless, SwiftShader's WebGPU adapter; {load()}")
    print(f"sections: {', '.join(args.sections)}")
    bench = Bench(args, args.sections)
    failed = []
    try:
        for name in args.sections:
            try:
                {"reload": section_reload, "replies": section_replies, "wllama": section_wllama, "long": section_long,
                 "panel": section_panel}[name](bench, args)
            except Exception as e:
                failed.append(name)
                print(f"   {name}: failed: {type(e).__name__}: {e}")
    finally:
        bench.close()
    print(f"\ndone; {load()}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
