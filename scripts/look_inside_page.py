#!/usr/bin/env python3
"""Look inside's three lesson cases, run on the page with the real model, against the command line:
`python3 scripts/look_inside_page.py [--cases pirate dropped year]`.

The site is built from this checkout and served with the model mirror (as `chatlens serve` does:
the page computes with the mirror's bf16 export of the Q4_1 GGUF). Debian's Chromium runs it on
SwiftShader's WebGPU (tests/webapp.py's flags), the real model downloaded into the page's store
first. For each case: one click on its "Try it", then the wait until the case is complete; the
page's line, the step it opened, the inspection's and the cause's figures as drawn, screenshots
of the step box and the case at 1400 and 390 pixels wide (artifacts/screenshots/look-inside-*);
then `python -m chatlens cause` and `inspect` on the same request with the page's copy
(`--model` the export folder) and the figures compared (probabilities within 1e-3). SwiftShader
is a CPU emulation: a case takes minutes. Prints a summary and writes artifacts/look-inside.json.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))
sys.path.insert(0, str(ROOT / "tests"))

from webapp import CHROMIUM, LAUNCH_ARGS, SHOTS, App  # noqa: E402

CASE_MS = 3_600_000  # a case on SwiftShader with the real model: minutes; an hour at most


class Served:
    """The site built from the checkout, served with the mirror (tests/conftest.py's `server`)."""

    def __init__(self):
        import tempfile

        from chatlens.host.build import build_site
        from chatlens.host.mirror import prepare_mirror
        from chatlens.host.serve import SiteServer

        self.dir = tempfile.TemporaryDirectory()
        out = Path(self.dir.name) / "site"
        build_site(out, log=lambda *a: None, root=ROOT)
        self.mirror = prepare_mirror(quiet=True)
        self.srv = SiteServer(out, mirror=self.mirror).start()
        self.url, self.root = self.srv.url, self.srv.root

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
        self.dir.cleanup()


def shots(page, name, at):
    SHOTS.mkdir(parents=True, exist_ok=True)
    for w, h in ((390, 844), (1400, 1000)):
        page.set_viewport_size({"width": w, "height": h})
        page.evaluate("(at) => document.querySelector(at)?.scrollIntoView({block: 'start', behavior: 'instant'})", at)
        page.screenshot(path=str(SHOTS / f"look-inside-{name}-{w}.png"))
    return [f"look-inside-{name}-{w}.png" for w in (390, 1400)]


def cli(command, request, step, model, *flags):
    step = [] if step is None else ["--step", str(step)]
    done = subprocess.run([sys.executable, "-m", "chatlens", command, "--model", str(model), *step, *flags],
                          input=json.dumps(request), capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT / "py"), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    if done.returncode:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout)


def run_case(page, case, export):
    started = time.monotonic()
    page.click(f"#inside-box button.inside-try[data-inside={case}]")
    page.wait_for_selector(f"#inside-box li[data-inside={case}].done", timeout=CASE_MS)
    took = time.monotonic() - started
    line = page.text_content(f"#inside-box li[data-inside={case}] .showed")
    box = page.evaluate("""() => { const b = chatlens.pageState.stepBox; return {
        step: b.cause?.step, cause: b.cause?.token.answer, inspection: b.inspection?.answer && {step: b.inspection.answer.step,
        strongest_heads: b.inspection.answer.strongest_heads}, said: b.status?.text ?? null} }""")
    record = page.evaluate("chatlens.pageState.live.turns.at(-1).record")
    files = shots(page, f"{case}-cause", "#step-box .cause-box") + shots(page, f"{case}-line", f"#inside-box li[data-inside={case}]")
    messages = page.evaluate("() => { const t = chatlens.pageState.live.turns; return t.flatMap((x, i) => "
                             "i < t.length - 1 ? [{role: 'user', content: x.user}, {role: 'assistant', content: x.record?.reply_text ?? x.reply}] "
                             ": [{role: 'user', content: x.user}]) }")
    request = {"messages": messages, "reply_ids": record["reply_ids"], "window": record["window"],
               "reserve": record["reserve"], "max_tokens": record["max_tokens"],
               **({"system": record["system"]} if record["system"] is not None else {"preset": "none"})}
    want = cli("cause", request, box["step"], export)
    page_cause = box["cause"]
    worst = max([abs(page_cause["p"] - want["p"])] +
                [abs(a[m]["p"] - b[m]["p"]) for a, b in zip(page_cause["pieces"], want["pieces"])
                 for m in ("knocked", "removed") if a[m] and b[m]])
    tops = all((a[m] or {}).get("top_id") == (b[m] or {}).get("top_id")
               for a, b in zip(page_cause["pieces"], want["pieces"]) for m in ("knocked", "removed"))
    more = {}
    whole = page.evaluate("chatlens.pageState.stepBox.cause?.whole?.answer ?? null")
    if case == "pirate" and whole:  # the strip: every reply token's figures, against cause --tokens
        tokens = cli("cause", request, box["step"], export, "--tokens")
        more["strip"] = {"reply_tokens": len(whole["tokens"]), **strip_difference(whole, tokens)}
    needs = page.evaluate("""() => { const r = chatlens.pageState.needs.run; return r?.answer ? import('./js/page/protocol.mjs')
        .then((m) => ({answer: r.answer, request: m.toWire('needs', r.args, chatlens.settings)})) : null; }""")
    if case == "dropped" and needs:  # the matrix: each turn's row, against needs
        rows = cli("needs", needs["request"], None, export, *(["--tokens"] if needs["request"].get("tokens") else []))
        more["matrix"] = matrix_difference(needs["answer"], rows)
    return {**more, "case": case, "seconds": round(took), "line": line, "said": box["said"], "step": box["step"],
            "reply_text": record["reply_text"], "stop_reason": record["stop_reason"], "chosen_token": page_cause["chosen_token"],
            "p": page_cause["p"], "pieces": [{"name": p["name"], "share": p["attention_share"],
                                             "knocked": p["knocked"] and [p["knocked"]["p"], p["knocked"]["top_token"]],
                                             "removed": p["removed"] and [p["removed"]["p"], p["removed"]["top_token"]]}
                                            for p in page_cause["pieces"]],
            "cli_p": want["p"], "largest_difference": worst, "same_tops": tops, "screenshots": files}


def strip_difference(page, cli):
    """The largest difference of a token's probability, the reply's and each measure's, and whether
    every token's top id agrees."""
    pairs = [(page["tokens"], cli["tokens"])] + [
        (a[m]["tokens"], b[m]["tokens"]) for a, b in zip(page["pieces"], cli["pieces"]) for m in ("knocked", "removed")
        if a[m] and b[m] and a[m].get("tokens") is not None]
    worst = max(abs(x["p"] - y["p"]) for t, u in pairs for x, y in zip(t, u))
    return {"largest_difference": worst, "same_tops": all(x["top_id"] == y["top_id"] for t, u in pairs for x, y in zip(t, u))}


def matrix_difference(page, cli):
    """Each turn's cells: the largest difference of the reply's change of log-probability."""
    worst, rows = 0.0, []
    for a, b in zip(page["turns"], cli["turns"], strict=True):
        cells = {c["name"]: c for c in b["pieces"]}
        for c in a["pieces"]:
            for m in ("knocked", "removed"):
                if c.get(m) and cells[c["name"]].get(m):
                    worst = max(worst, abs(c[m]["reply_logprob"] - cells[c["name"]][m]["reply_logprob"]))
        rows.append({c["name"]: c["removed"] and round(c["removed"]["reply_logprob"] - a["reply_logprob"], 2)
                     for c in a["pieces"]})
    return {"largest_logprob_difference": worst, "rows": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", default=["pirate", "dropped", "year"])
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    served = Served()
    export = served.mirror.files["config.json"].parent
    out = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            app = App(browser, served, snapshot=None)
            page = app.open()
            page.set_default_timeout(CASE_MS)
            assert page.evaluate("chatlens.downloadModel()")["complete"]
            assert page.evaluate("chatlens.modelReady")["kind"] == "webgpu"
            page.wait_for_function("() => chatlens.status.state === 'ready'")
            for case in args.cases:
                result = run_case(page, case, export)
                out.append(result)
                print(json.dumps(result, indent=1), flush=True)
            assert not app.errors, app.errors
            browser.close()
    finally:
        served.close()
    (ROOT / "artifacts").mkdir(exist_ok=True)
    (ROOT / "artifacts" / "look-inside.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
