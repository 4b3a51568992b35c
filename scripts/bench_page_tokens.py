#!/usr/bin/env python3
"""What one streamed reply costs the page: `python3 scripts/bench_page_tokens.py [--site DIR] [options]`.

Issue 24's closing note, measured the same way before and after: in Live mode, a conversation whose
prompt is about 900 tokens (one long first message, the 1024 window, the Tokens tab shown as the
panel bench of scripts/bench_browser.py does), a reply of 40 tokens (the reply limit set to 40), and

  (a) the main thread's busy time per streamed token: Chromium's trace of the page's main thread
      (its top-level tasks, the same time CDP's Performance.getMetrics sums as TaskDuration) from the
      first token's arrival to the last one's, divided by the tokens between them; beside it the
      TaskDuration, ScriptDuration and LayoutDuration deltas of Performance.getMetrics over the
      whole send (the prompt's drawing and the reply's end included), and the DOM nodes of the
      panel's reply box and of the chat's reply once the reply has ended;
  (b) the calls from JavaScript into Python the send made: each text-side request the page posts
      during the send (a preview: one call) plus the pulls of the reply (start, a step per
      token, stop: the worker's "debug" request, `last_reply.pulls`).

The tiny random model (tests/tiny_model.py) computes the replies, so the model's own compute is
small and the page's cost shows. The site is `--site DIR` (copied into a temporary folder beside
the tiny model) or built from the checkout this script is in (chatlens.host.build). Debian's
Chromium (/usr/bin/chromium, tests/webapp.py's flags: SwiftShader's WebGPU, asked for by name).
Each run is a fresh browser context; figures are medians over `--runs`.
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))
sys.path.insert(0, str(ROOT / "tests"))

# The worker found among the page's, and its "debug" request asked inside it: as the browser bench does.
from bench_browser import WORKER_DEBUG, chatlens_worker  # noqa: E402  (scripts/, beside this file)

TOKEN_MARK = "chatlens-bench:token"
TEXT_SIDE = {"preview", "render", "tokenize", "chat_template", "lab_source", "run_python"}  # one Python call each
PULLED = {"run", "complete", "predict", "count"}  # pulled: their calls are the worker's `pulls`
# The main thread's top-level tasks and the marks: cheap to record. --breakdown adds the timeline's
# events (paint, layout, script), which cost the page time of their own while recorded.
TRACE_CATEGORIES = ["toplevel", "blink.user_timing"]
BREAKDOWN_CATEGORIES = ["disabled-by-default-devtools.timeline", "devtools.timeline"]
BREAKDOWN = ("Paint", "Layout", "UpdateLayoutTree", "PrePaint", "Layerize", "Commit", "FunctionCall", "HandlePostMessage",
             "MajorGC", "MinorGC")

# Before any script: each token event the page's worker handler gets is marked (a trace event on the
# main thread), the run's answer is kept, and the requests the page posts are listed while asked.
HOOK = """(() => {
  let answered;
  const b = (window.__bench = { tokens: 0, counting: false, posted: [], runId: null, result: null,
                                answered: new Promise((resolve) => (answered = resolve)) });
  const desc = Object.getOwnPropertyDescriptor(Worker.prototype, "onmessage");
  Object.defineProperty(Worker.prototype, "onmessage", {
    get: desc.get,
    set(fn) {
      desc.set.call(this, (e) => {
        const d = e.data;
        if (d && d.type === "token") { b.tokens += 1; performance.mark("%s"); }
        else if (d && d.id !== undefined && d.id === b.runId && "ok" in d)
          b.result = d.ok ? { used: d.result.used, reply: (d.result.reply_ids || []).length, stop: d.result.stop_reason }
                          : { error: d.error };
        try { return fn(e); } finally { if (b.result) answered(true); }
      });
    },
  });
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (m, ...rest) {
    if (b.counting && m && m.type) {
      b.posted.push(m.type);
      if (m.type === "run") b.runId = m.id;
    }
    return post.call(this, m, ...rest);
  };
})();""" % TOKEN_MARK

NODES = """() => {
  const count = (e) => (e ? e.querySelectorAll("*").length + 1 : null);
  const msgs = document.querySelectorAll("#chat .msg.assistant");
  return { panel: count(document.querySelector("#reads .reply")), chat: count(msgs[msgs.length - 1]),
           chips: document.querySelectorAll("#token-view .tok").length };
}"""


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def site_dir(args, tmp):
    """The site served: a copy of --site, or a fresh build of this checkout, with the tiny model beside it."""
    from chatlens.host.mirror import prepare_mirror
    from tiny_model import write_tiny_model

    out = tmp / "site"
    if args.site:
        src = Path(args.site).resolve()
        if not (src / "index.html").exists():
            raise SystemExit(f"{src} holds no built site (no index.html): build one with `python3 -m chatlens build`")
        shutil.copytree(src, out)
    else:
        from chatlens.host import build

        build.build_site(out, log=lambda m: None, root=ROOT)
    mirror = prepare_mirror(quiet=True)
    write_tiny_model(out / "tiny" / "model", mirror.files["config.json"].parent)
    return out, mirror


def last_reply(page):
    """The worker's record of the last reply (`debug`'s last_reply): the page API's if it has one."""
    if page.evaluate("typeof window.chatlens?.debug === 'function'"):
        got = page.evaluate("chatlens.debug()")
    else:
        got = chatlens_worker(page).evaluate(WORKER_DEBUG)
    return (got or {}).get("last_reply") or {}


def busy_between_marks(trace_bytes):
    """The page's main-thread task time (ms; wall, and the thread's CPU time) between the first and
    the last token mark, the marks counted, the tasks that overlapped that span, the span (ms), and
    the time of each timeline event kind in it (BREAKDOWN; with --breakdown only)."""
    events = json.loads(trace_bytes)
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    marks = sorted((e for e in events if e.get("name") == TOKEN_MARK and "ts" in e), key=lambda e: e["ts"])
    if len(marks) < 2:
        raise RuntimeError(f"the trace holds {len(marks)} token marks: too few to measure between")
    pid, tid = marks[0]["pid"], marks[0]["tid"]
    lo, hi = marks[0]["ts"], marks[-1]["ts"]
    # One name of the top-level task (toplevel's, else the timeline's), outermost only: a nested
    # run loop's tasks lie inside their parent's.
    tasks = [e for e in events if e.get("ph") == "X" and e.get("pid") == pid and e.get("tid") == tid
             and e.get("name") in ("ThreadControllerImpl::RunTask", "RunTask")]
    name = "ThreadControllerImpl::RunTask" if any(e["name"] == "ThreadControllerImpl::RunTask" for e in tasks) else "RunTask"
    busy = cpu = 0.0
    count, end = 0, None
    for e in sorted((e for e in tasks if e["name"] == name), key=lambda e: e["ts"]):
        a, b = e["ts"], e["ts"] + e.get("dur", 0)
        if end is not None and b <= end:
            continue  # nested
        end = b
        ca, cb = max(a, lo), min(b, hi)
        if cb <= ca:
            continue
        count += 1
        busy += cb - ca
        # the task's thread (CPU) time, in the share of it inside the span: on a loaded machine the
        # wall time holds the time the thread waited for a core
        cpu += e.get("tdur", b - a) * (cb - ca) / max(b - a, 1)
    kinds = {}
    for e in events:
        if e.get("ph") == "X" and e.get("name") in BREAKDOWN and e.get("pid") == pid and e.get("tid") == tid \
                and lo <= e["ts"] <= hi:
            kinds[e["name"]] = kinds.get(e["name"], 0) + e.get("dur", 0) / 1000
    return busy / 1000, cpu / 1000, len(marks), count, (hi - lo) / 1000, kinds


def metrics(cdp):
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}


def one_run(browser, url, args, prompt):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        ctx.add_init_script(HOOK)
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}?backend=webgpu&model={url}tiny/model/")
        page.wait_for_function("() => window.chatlens && ['text', 'weights', 'ready', 'error'].includes(chatlens.status.state)",
                               timeout=180_000)
        if not page.evaluate("chatlens.downloadModel()").get("complete"):
            raise RuntimeError("the tiny model was not stored")
        page.evaluate("chatlens.modelReady")
        page.wait_for_function("() => chatlens.status.state === 'ready'", timeout=180_000)
        page.evaluate("localStorage.clear()")
        page.click("#mode-live")
        page.select_option("#window", str(args.window))
        page.evaluate(f"chatlens.settings.reply_limit = {args.tokens}")
        page.fill("#draft", prompt)
        page.wait_for_selector("#reads-tab-tokens")
        page.click("#reads-tab-tokens")
        # the draft's preview drawn on the Tokens tab, and anything it started settled
        page.wait_for_function("() => document.querySelectorAll('#token-view .tok').length > 100", timeout=120_000)
        page.wait_for_timeout(1000)
        cdp = ctx.new_cdp_session(page)
        cdp.send("Performance.enable")
        browser.start_tracing(page=page, categories=TRACE_CATEGORIES + (BREAKDOWN_CATEGORIES if args.breakdown else []))
        m0 = metrics(cdp)
        page.evaluate("window.__bench.counting = true")
        page.press("#draft", "Enter")
        # Waited for without polling the page (Playwright's default polls at each animation frame,
        # which would be main-thread work of its own): the run's answer settles a promise.
        page.evaluate("window.__bench.answered")
        page.wait_for_function("() => !chatlens.writing && document.querySelector('#chat .msg.assistant:not(.is-streaming)')",
                               polling=200, timeout=60_000)
        page.evaluate("window.__bench.counting = false")
        m1 = metrics(cdp)
        trace = browser.stop_tracing()
        bench = page.evaluate("window.__bench")
        if bench["result"].get("error"):
            raise RuntimeError(f"the reply failed: {bench['result']['error']}")
        busy, cpu, marks, tasks, span, kinds = busy_between_marks(trace)
        reply = last_reply(page)
        text_calls = sum(1 for t in bench["posted"] if t in TEXT_SIDE)
        unknown = [t for t in bench["posted"] if t not in TEXT_SIDE | PULLED | {"stop", "debug"}]
        pulled = [t for t in bench["posted"] if t in PULLED]
        pulls = reply.get("pulls")
        delta = {k: (m1.get(k, 0) - m0.get(k, 0)) * 1000 for k in ("TaskDuration", "ScriptDuration", "LayoutDuration",
                                                                    "RecalcStyleDuration")}
        if errors:
            raise RuntimeError(f"page errors: {errors}")
        return {
            "prompt": bench["result"]["used"] - bench["result"]["reply"] if bench["result"].get("used") else None,
            "used": bench["result"].get("used"), "reply": bench["result"]["reply"], "stop": bench["result"]["stop"],
            "tokens": bench["tokens"], "marks": marks, "tasks": tasks, "span_ms": span,
            "ms_per_token": busy / (marks - 1), "cpu_ms_per_token": cpu / (marks - 1), "busy_ms": busy, "kinds": {k: v / (marks - 1) for k, v in kinds.items()},
            "send": delta, "nodes": page.evaluate(NODES),
            "posted": bench["posted"], "text_calls": text_calls, "pulls": pulls, "pulled_requests": pulled,
            "unknown": unknown, "calls": None if pulls is None or len(pulled) != 1 else text_calls + pulls,
            "last_reply": reply,
        }
    finally:
        ctx.close()


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--site", help="a built site (python3 -m chatlens build writes build/site); default: build this checkout")
    p.add_argument("--runs", type=int, default=3, help="runs, each in a fresh browser context (default 3)")
    p.add_argument("--tokens", type=int, default=40, help="the reply limit (default 40)")
    p.add_argument("--words", type=int, default=290,
                   help="the long message: 'the lighthouse keeper' this many times (default 290: a ~900-token prompt)")
    p.add_argument("--window", type=int, default=1024, help="the window chosen (default 1024)")
    p.add_argument("--breakdown", action="store_true",
                   help="also trace the timeline's events and print where a token's time goes (slows the page)")
    p.add_argument("--json", help="also write every run's figures to this file")
    args = p.parse_args(argv)
    if min(args.runs, args.tokens, args.words) < 1:
        p.error("sizes must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    from webapp import CHROMIUM, LAUNCH_ARGS

    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing (apt-get install -y chromium)")
        return 1
    from chatlens.host.serve import SiteServer
    from playwright.sync_api import sync_playwright

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "site", "py"], capture_output=True,
                           text=True).stdout.strip()
    version = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="chatlens-tokens-"))
    t0 = time.monotonic()
    try:
        out, mirror = site_dir(args, tmp)
        server = SiteServer(out, mirror=mirror).start()
        prompt = " ".join(["the lighthouse keeper"] * args.words)
        runs = []
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
                try:
                    for i in range(args.runs):
                        r = one_run(browser, server.url, args, prompt)
                        runs.append(r)
                        print(f"run {i + 1}: prompt {r['prompt']} tokens, reply {r['reply']} ({r['stop']}), "
                              f"{r['ms_per_token']:.2f} ms a token ({r['cpu_ms_per_token']:.2f} ms CPU) over {r['marks'] - 1} gaps ({r['tasks']} tasks, "
                              f"{r['span_ms']:.0f} ms); send: TaskDuration {r['send']['TaskDuration']:.0f} ms; "
                              f"requests {r['posted']}; pulls {r['pulls']}", flush=True)
                finally:
                    browser.close()
        finally:
            server.shutdown()
            server.server_close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))

    def m(key, f=lambda r, k: r[k]):
        return med([f(r, key) for r in runs])

    r0 = runs[0]
    print(f"\nchatlens {commit}{' (site/ or py/ modified)' if dirty else ''}, {version}, SwiftShader WebGPU, the tiny model; "
          f"{len(runs)} runs in {time.monotonic() - t0:.0f} s\n")
    print("| figure | value |")
    print("|---|---|")
    print(f"| prompt tokens (window {args.window}, Tokens tab) | {m('prompt')} |")
    print(f"| reply tokens streamed (limit {args.tokens}) | {m('reply')} ({', '.join(sorted({r['stop'] for r in runs}))}) |")
    per_run = ", ".join(f"{r['ms_per_token']:.2f}" for r in runs)
    print(f"| main-thread time per streamed token, median of {len(runs)} (trace: tasks' wall time, first to last token) | "
          f"{m('ms_per_token'):.2f} ms (runs: {per_run}) |")
    cpu_runs = ", ".join(f"{r['cpu_ms_per_token']:.2f}" for r in runs)
    print(f"| the same, the main thread's CPU time (trace) | {m('cpu_ms_per_token'):.2f} ms (runs: {cpu_runs}) |")
    for k in ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration"):
        print(f"| whole send, CDP {k} delta (median) | {m(k, lambda r, k: r['send'][k]):.0f} ms |")
    print(f"| DOM nodes of the panel's reply box after the reply | {m('panel', lambda r, k: r['nodes'][k])} |")
    print(f"| DOM nodes of the chat's reply after the reply | {m('chat', lambda r, k: r['nodes'][k])} |")
    print(f"| requests the page posted for the send | {', '.join(r0['posted'])} |")
    print(f"| JS->Python calls: text-side requests (1 each) | {m('text_calls')} |")
    print(f"| JS->Python calls: the reply's pulls (start, steps, stop) | {m('pulls')} |")
    print(f"| **JS->Python calls for the {m('reply')}-token reply** | **{m('calls')}** |")
    if args.breakdown:
        for k in BREAKDOWN:
            got = med([r["kinds"].get(k) for r in runs])
            if got is not None:
                print(f"| per token: {k} (trace, median) | {got:.2f} ms |")
    if any(r["unknown"] for r in runs):
        print(f"\nrequests not counted (unknown to this script): {sorted({t for r in runs for t in r['unknown']})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
