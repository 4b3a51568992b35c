"""What the GPU's known-answer check (chatlens.check) costs: its size (dispatches, bytes, work), its
time on lavapipe through wgpu-py and on SwiftShader in Chromium's page, and what those sizes would
cost a real GPU.

    PYTHONPATH=py python3 scripts/bench_check.py [--repeats 3] [--no-browser] [--bandwidth 100] [--dispatch-us 4]

lavapipe: `chatlens check`'s own run in this process, the first (pipelines compiled) and the
later ones (compiled pipelines reused by wgpu-py's device). SwiftShader: the page's first visit in
a fresh Chromium context (WebGPU asked for by name), its check as the worker times it (the
program built in Pyodide, the pipelines compiled, the weights made and uploaded: setup; then the
script's nine runs). A real GPU is estimated, not measured: its dispatches at --dispatch-us each
(chatlens.host.bench.DISPATCH_US by default, an assumption), the bytes its runs read at
--bandwidth GB/s, the weights uploaded at the same rate; its pipelines' compile time is the
driver's and not estimated. Both emulations are CPUs: their times say how long a test run
waits, not how long a learner does. Figures vary with the machine's load: read medians.
"""

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def size() -> dict:
    """The check's program and script: dispatches, the weights' bytes, and the bytes and
    multiply-adds its runs take (each dispatch reads its matrix whole; a GEMM's rows are its tokens)."""
    from chatlens import check
    from chatlens.host.check import check_program

    program = check_program(("subgroups",))
    runs = check.plan_of(program)
    seqs = program["sequences"]
    dispatches = sum(len(seqs[s]) for r in runs for s in r.sequences)
    tensors = check.spec()["tensors"]
    weights = sum(t["nbytes"] for t in tensors.values())
    cfg = check.CONFIG
    per_token = sum(math.prod(t["shape"]) for name, t in tensors.items() if len(t["shape"]) == 2 and "embed" not in name)
    fields = program["meta"]["step_fields"]
    tokens = [r.to_json()["params"][fields.index("n_tokens")] if r.params else 0 for r in runs]
    layers_bytes = weights - tensors["model.embed_tokens.weight"]["nbytes"]
    head = tensors["model.embed_tokens.weight"]["nbytes"]
    read = sum(layers_bytes + head for r in runs if r.params)  # every layer's matrices, and the head, once a run
    macs = sum(n * per_token + cfg.vocab_size * cfg.dim * max(1, n) for n in tokens)
    return {"runs": len(runs), "dispatches": dispatches, "pipelines": len(program["pipelines"]),
            "weights_bytes": weights, "bytes_read": read, "macs": macs, "tokens": sum(tokens)}


def lavapipe(repeats: int) -> list:
    from chatlens.host import check as host_check
    from chatlens.host.native_gpu import adapter_available

    if not adapter_available():
        print("lavapipe: wgpu finds no adapter (mesa-vulkan-drivers?)")
        return []
    want = host_check.reference()
    out = []
    for i in range(repeats):
        r = host_check.run("webgpu", want=want)
        out.append(r)
        print(f"lavapipe run {i + 1}: {r.ms:.0f} ms ({r.setup_ms:.0f} setup), {'passed' if r.passed else 'FAILED'} "
              f"within {r.max_diff:.1g} on {r.adapter}", flush=True)
    return out


def swiftshader(repeats: int) -> list:
    """The page's own check on Chromium's SwiftShader, a fresh context each time."""
    sys.path.insert(0, str(ROOT / "tests"))
    from playwright.sync_api import sync_playwright
    from webapp import CHROMIUM, LAUNCH_ARGS, WEBGPU_BY_CHOICE

    from chatlens.host.build import build_site
    from chatlens.host.mirror import prepare_mirror
    from chatlens.host.serve import SiteServer

    import tempfile
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        site = build_site(Path(tmp) / "site", log=lambda m: None, root=ROOT)
        srv = SiteServer(site, mirror=prepare_mirror(quiet=True)).start()  # the page boots on the mirror's text side
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
                for i in range(repeats):
                    context = browser.new_context()
                    context.add_init_script(WEBGPU_BY_CHOICE)
                    page = context.new_page()
                    page.goto(srv.url)
                    page.wait_for_function("() => window.chatlens && (chatlens.checked || chatlens.status.state === 'error')",
                                           timeout=600_000)
                    if not page.evaluate("chatlens.checked"):
                        raise RuntimeError(f"the page failed before its check: {page.evaluate('chatlens.status')}")
                    r = page.evaluate("chatlens.checked")
                    out.append(r)
                    print(f"SwiftShader run {i + 1}: {r['ms']:.0f} ms ({r['setup_ms']:.0f} setup), "
                          f"{'passed' if r['passed'] else 'FAILED'} within {r['max_diff']:.1g} on {r['adapter']}", flush=True)
                    context.close()
                browser.close()
        finally:
            srv.shutdown()
            srv.server_close()
    return out


def main(argv=None) -> int:
    from chatlens.host.bench import DISPATCH_US

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-browser", action="store_true", help="lavapipe only")
    ap.add_argument("--bandwidth", type=float, default=100.0, metavar="GB/S", help="a real GPU's, for the estimate")
    ap.add_argument("--dispatch-us", type=float, default=DISPATCH_US, metavar="US")
    args = ap.parse_args(argv)
    s = size()
    print(f"the check: {s['runs']} runs, {s['dispatches']} dispatches, {s['pipelines']} pipelines; "
          f"{s['weights_bytes'] / 1e6:.1f} MB of weights made and uploaded; its runs read about "
          f"{s['bytes_read'] / 1e6:.0f} MB and take {s['macs'] / 1e6:.0f} M multiply-adds over {s['tokens']} tokens")
    gpu_ms = (s["dispatches"] * args.dispatch_us * 1e-3 + (s["bytes_read"] + s["weights_bytes"]) / (args.bandwidth * 1e6))
    print(f"a real GPU, estimated: {gpu_ms:.1f} ms for the runs and the upload at {args.bandwidth:g} GB/s and "
          f"{args.dispatch_us:g} us a dispatch (plus compiling {s['pipelines']} pipelines, the driver's), against a "
          "model download of 270 MB (the bf16 folder) or 97 MB (the Q4_1 GGUF)", flush=True)
    rows = {"size": s, "gpu_estimate_ms": gpu_ms}
    lava = lavapipe(args.repeats)
    if lava:
        rows["lavapipe"] = [{"ms": r.ms, "setup_ms": r.setup_ms, "max_diff": r.max_diff} for r in lava]
        later = [r.ms for r in lava[1:]] or [lava[0].ms]
        print(f"lavapipe: first {lava[0].ms:.0f} ms (pipelines compiled), then median {statistics.median(later):.0f} ms")
    if not args.no_browser:
        swift = swiftshader(args.repeats)
        rows["swiftshader"] = [{k: r[k] for k in ("ms", "setup_ms", "max_diff")} for r in swift]
        if swift:
            print(f"SwiftShader (the page's worker): median {statistics.median(r['ms'] for r in swift):.0f} ms, of which "
                  f"setup {statistics.median(r['setup_ms'] for r in swift):.0f} ms")
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    code = main()
    print(f"(in {time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    sys.exit(code)
