"""The native GPU bench a device run prints (scripts/device-bench.sh): the figures a user gets.

For each model source, KV cache precision and context, the reply is pulled as the page and the
command line pull it (chatlens.pull, through chatlens.host.bench.pulled_runs) with 1, 2 and 4
steps in flight: the time to the first token (the prompt of that many tokens read from an empty
cache), prefill and decode tokens/s, and the host's time a decode token (encoding and
submitting, Python, waiting for the bytes). Beside each row, the program's performance model
(chatlens.host.bench: bytes and dispatches a token, the roofline at --bandwidth and the share
of it and of the bandwidth each rate reaches). Then each prefill GEMM (chatlens.gpu.kernels.GEMMS:
the double-buffered one and the plain one) on the same program otherwise: prefill tokens/s at
--gemm-contexts. First of all, the known-answer check (chatlens.check: the GPU program on its check
model against NumPy, then each model's first step against NumPy's on the same file): the "CPU
match" the speed rows stand beside. Ends with one summary table to paste.

    PYTHONPATH=py python3 scripts/device_bench.py MODEL... [--contexts 256 1000 4000] [--new-tokens 64]
        [--repeats 3] [--kv F32 F16] [--depths 1 2 4] [--gemm matmul matmul_plain]
        [--gemm-contexts 256 1000] [--bandwidth GB/S] [--dispatch-us US] [--json OUT]

The prompt is bench's conversation, its ids repeated to the context's length (the figures depend
on the number of tokens, not their text); a model whose tokenizer cannot encode it (a test's
tiny random model) gets ids cycling through its vocabulary.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def prompt_of(path, n: int) -> list:
    from chatlens.errors import ChatlensError
    from chatlens.host.bench import prompt_ids
    from chatlens.source import load_text_side

    text = load_text_side(path)
    try:
        ids = prompt_ids(text)
    except (ChatlensError, KeyError, ValueError):
        vocab = text.config.vocab_size
        ids = [3 + (17 * i) % (vocab - 3) for i in range(97)]
    return (ids * (n // len(ids) + 1))[:n]


def prefill_rate(backend, ids, repeats: int) -> float:
    """Median prefill tokens/s of the prompt from an empty cache, to its first id (the GEMM rows)."""
    rates = []
    for _ in range(repeats):
        backend.reset()
        t0 = time.perf_counter()
        backend.prefill(ids)
        rates.append(len(ids) / (time.perf_counter() - t0))
    return statistics.median(rates)


def opened(model, n_ctx, kv, gemm):
    from chatlens.host.native_gpu import open_native

    t0 = time.perf_counter()
    backend = open_native(model, n_ctx, kv=kv, gemm=gemm)
    print(f"{model.name}, {backend.meta['kv']} cache, {backend.meta['gemm']}: program for {n_ctx} keys made, weights "
          f"uploaded and pipelines compiled in {time.perf_counter() - t0:.1f} s", flush=True)
    backend.prefill(prompt_of(model, 8))  # the first run of each pipeline out of the figures
    backend.decode(0)
    return backend


def checked(models) -> list:
    """The known-answer check's rows: the program's, then each model's weights' (their first step
    against NumpyBackend's on the same file), printed as they come."""
    from chatlens import check
    from chatlens.host import check as host_check

    result = host_check.run("webgpu")
    rows = [{"kind": "check", "what": "the GPU program on the check model", "passed": result.passed,
             "max_diff": result.max_diff, "ms": result.ms, "setup_ms": result.setup_ms, "adapter": result.adapter}]
    print(f"known-answer check: {result.adapter} {result.sentence} ({result.ms:.0f} ms, {result.setup_ms:.0f} of them "
          "compiling and uploading)", flush=True)
    for model in map(Path, models):
        t0 = time.perf_counter()
        from chatlens.source import load_text_side

        # a test's tiny model whose tokenizer reads nothing of the text is checked on prompt ids instead
        reads = load_text_side(model).tokenizer.encode(check.WEIGHTS_TEXT)
        entry = host_check.weights_check(model, None if reads else prompt_of(model, 8))
        rows.append({"kind": "check", "what": f"{model.name}'s weights", "passed": entry.passed,
                     "max_diff": entry.max_diff, "ms": round(1000 * (time.perf_counter() - t0)), "setup_ms": None,
                     "adapter": result.adapter})
        print(f"  {model.name}'s first step after “{check.WEIGHTS_TEXT}”: "
              f"{'agrees' if entry.passed else 'DIFFERS'} ({entry.differed or f'within {entry.max_diff:.1g}'})", flush=True)
    return rows


def summary(rows, bandwidth, dispatch_us) -> list:
    """The run as Markdown tables: the known-answer check's rows, the decode rows, then the GEMMs'
    prefill rows."""
    from chatlens import check
    from chatlens.host import bench

    checks = [r for r in rows if r["kind"] == "check"]
    lines = []
    if checks:
        lines += [f"| CPU match (known-answer check, tolerance {check.TOLERANCE:g}) | passed | max difference | ms |",
                  "|---|---|---|---|"]
        lines += [f"| {r['what']} | {'yes' if r['passed'] else 'NO'} | {r['max_diff']:.1g} | {r['ms']:.0f} |" for r in checks]
        lines.append("")
    decode = [r for r in rows if r["kind"] == "decode"]
    depths = list(decode[0]["in_flight"]) if decode else []
    head = (["model", "KV", "context", "first token ms", "prefill tok/s",
             f"decode tok/s at {' / '.join(depths)} in flight",
             "host ms a token at " + " / ".join(depths) + " (submit + Python + wait)", "dispatches a token",
             "MB a token"] + (["roofline tok/s", "bandwidth used, best"] if bandwidth else []))
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in decode:
        f = r["in_flight"]
        cells = [r["model"], r["kv"], str(r["context"]), f"{r['first_token_ms']:.0f}", f"{r['prefill_tok_s']:.0f}",
                 " / ".join(f"{f[d]['decode_tok_s']:.1f}" for d in depths),
                 " / ".join(f"{f[d]['submit_ms']:.2f}+{f[d]['python_ms']:.2f}+{f[d]['wait_ms']:.2f}" for d in depths),
                 str(r["dispatches_per_token"]), f"{(r['weight_bytes_per_token'] + r['kv_bytes_per_token']) / 1e6:.1f}"]
        if bandwidth:
            best = max(f[d]["decode_tok_s"] for d in depths)
            roof = bench.roofline(r, bandwidth, bench.DISPATCH_US if dispatch_us is None else dispatch_us)
            cells += [f"{roof['both']:.0f}", f"{bench.bandwidth_share(r, best, bandwidth)['percent']:.0f}%"]
        lines.append("| " + " | ".join(cells) + " |")
    gemm = [r for r in rows if r["kind"] == "prefill"]
    if gemm:
        lines += ["", "| model | KV | prefill GEMM | context | prefill tok/s |", "|---|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['kv']} | {r['gemm']} | {r['context']} | {r['prefill_tok_s']:.0f} |" for r in gemm]
    return lines


def main(argv=None) -> int:
    from chatlens.gpu import kernels

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+", help="a .gguf file or a Hugging Face folder")
    p.add_argument("--contexts", nargs="+", type=int, default=[256, 1000, 4000])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--kv", nargs="+", default=["F32", "F16"], choices=["F32", "F16"], help="KV cache precisions")
    p.add_argument("--depths", nargs="+", type=int, default=[1, 2, 4], help="steps in flight")
    p.add_argument("--gemm", nargs="*", default=sorted(kernels.GEMMS), choices=sorted(kernels.GEMMS),
                   help="prefill GEMMs to compare (none: no GEMM rows)")
    p.add_argument("--gemm-contexts", nargs="+", type=int, default=[256, 1000])
    p.add_argument("--bandwidth", type=float, metavar="GB/S")
    p.add_argument("--dispatch-us", type=float, metavar="US")
    p.add_argument("--json", metavar="OUT")
    p.add_argument("--budget", type=float, metavar="S",
                   help="start no new row after S seconds; the rows done are still summed up (a run under a time limit)")
    args = p.parse_args(argv)
    started = time.perf_counter()

    def over_budget() -> bool:
        if args.budget is not None and time.perf_counter() - started > args.budget:
            print(f"past the {args.budget:g} s budget: the rows left are not measured", flush=True)
            return True
        return False

    from chatlens.host import bench
    from chatlens.host import native_gpu as native

    device = native.shared_device()
    if device is None:
        print("no GPU adapter: wgpu found none (a Vulkan driver and libvulkan1?)", file=sys.stderr)
        return 1
    print(f"adapter: {device[1]['name']}", flush=True)
    rows = checked(args.models)
    n_ctx = max(args.contexts + args.gemm_contexts) + args.new_tokens
    # in the order a budget that runs out should keep: each model's first KV cache and its GEMMs, then the rest
    plan = [row for m in map(Path, args.models)
            for row in [(m, "decode", args.kv[0])] + [(m, "prefill", g) for g in args.gemm]]
    plan += [(Path(m), "decode", kv) for kv in args.kv[1:] for m in args.models]
    for model, kind, which in plan:
        if over_budget():
            break
        if kind == "decode":
            kv = which
            backend = opened(model, n_ctx, kv, None)
            for context in args.contexts:
                if over_budget():
                    break
                ids = prompt_of(model, context)
                flight = {str(d): bench.pulled_runs(backend, ids, args.new_tokens, args.repeats, d) for d in args.depths}
                # the performance model at the decode's mean keys ("keys"); "context": the prompt's tokens
                figures = bench.gpu_figures(backend.meta, model, context + args.new_tokens // 2)
                row = {"kind": "decode", "model": model.name, "kv": kv, "gemm": backend.meta["gemm"],
                       **figures, "keys": figures["context"], "context": context,
                       "new_tokens": args.new_tokens, "in_flight": flight,
                       "first_token_ms": statistics.median(f["first_token_ms"] for f in flight.values()),
                       "prefill_tok_s": statistics.median(f["prefill_tok_s"] for f in flight.values()),
                       "decode_tok_s": max(f["decode_tok_s"] for f in flight.values())}
                rows.append(row)
                print(f"{model.name}, {kv} cache, at {context} tokens: first token after {row['first_token_ms']:.0f} ms "
                      f"(prefill {row['prefill_tok_s']:.1f} tok/s)", flush=True)
                for depth, f in flight.items():
                    print(f"  {bench.in_flight_line(depth, f)}", flush=True)
                measured = [(f"at {d} in flight", f["decode_tok_s"]) for d, f in flight.items()]
                for line in bench.gpu_model_lines({**row, "context": row["keys"]}, args.bandwidth, args.dispatch_us,
                                                  measured):
                    print(f"  {line}", flush=True)
        else:
            kv, gemm = args.kv[0], which
            backend = opened(model, n_ctx, kv, gemm)
            for context in args.gemm_contexts:
                if over_budget():
                    break
                rate = prefill_rate(backend, prompt_of(model, context), args.repeats)
                rows.append({"kind": "prefill", "model": model.name, "kv": kv, "gemm": gemm, "context": context,
                             "prefill_tok_s": rate})
                print(f"{model.name}, {gemm}, at {context} tokens: prefill {rate:.1f} tok/s", flush=True)
    print()
    for line in summary(rows, args.bandwidth, args.dispatch_us):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
