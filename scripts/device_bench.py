"""The native GPU bench a device run prints (scripts/device-bench.sh): for each model source and
context, prefill tokens/s of a prompt of that many tokens, decode tokens/s after it, and beside
them the program's performance model (chatlens.host.bench: bytes and dispatches a token, the
roofline at --bandwidth).

    PYTHONPATH=py python3 scripts/device_bench.py MODEL... [--contexts 256 1000] [--new-tokens 64]
        [--repeats 3] [--kv F32 F16] [--bandwidth GB/S] [--dispatch-us US] [--json OUT]

The prompt is bench's conversation, its ids repeated to the context's length: the figures
depend on the number of tokens, not their text. Each model runs with each KV cache precision
given (chatlens.gpu.program.KV_CACHE). Prints one line a row, and with --json the rows.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def prompt_of(path, n: int) -> list:
    from chatlens.host.bench import prompt_ids
    from chatlens.source import load_text_side

    ids = prompt_ids(load_text_side(path))
    return (ids * (n // len(ids) + 1))[:n]


def measure(backend, ids, new_tokens: int, repeats: int) -> dict:
    """Medians of prefill tokens/s (the prompt from an empty cache, to its first id) and decode
    tokens/s (new_tokens greedy steps after it)."""
    prefill, decode = [], []
    for _ in range(repeats):
        backend.reset()
        t0 = time.perf_counter()
        step = backend.prefill(ids)
        t1 = time.perf_counter()
        for _ in range(new_tokens):
            step = backend.decode(step.id)
        t2 = time.perf_counter()
        prefill.append(len(ids) / (t1 - t0))
        decode.append(new_tokens / (t2 - t1))
    return {"prefill_tok_s": statistics.median(prefill), "decode_tok_s": statistics.median(decode)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+", help="a .gguf file or a Hugging Face folder")
    p.add_argument("--contexts", nargs="+", type=int, default=[256, 1000])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--kv", nargs="+", default=["F32", "F16"], choices=["F32", "F16"], help="KV cache precisions")
    p.add_argument("--bandwidth", type=float, metavar="GB/S")
    p.add_argument("--dispatch-us", type=float, metavar="US")
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)

    from chatlens.gpu import program
    from chatlens.host import native_gpu as native
    from chatlens.host.native_gpu import open_native
    from chatlens.host import bench

    opened = native.shared_device()
    if opened is None:
        print("no GPU adapter: wgpu found none (a Vulkan driver and libvulkan1?)", file=sys.stderr)
        return 1
    print(f"adapter: {opened[1]['name']}", flush=True)
    rows = []
    for model, kv in ((Path(m), kv) for m in args.models for kv in args.kv):
        n_ctx = max(args.contexts) + args.new_tokens
        program.KV_CACHE = kv
        t0 = time.perf_counter()
        backend = open_native(model, n_ctx)
        print(f"{model.name}, {kv} cache: program for {n_ctx} keys made, weights uploaded and pipelines compiled in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        backend.prefill(prompt_of(model, 8))  # the first run of each pipeline out of the figures
        backend.decode(0)
        for context in args.contexts:
            ids = prompt_of(model, context)
            row = {"model": model.name, "kv": kv, "context": context, "new_tokens": args.new_tokens,
                   **measure(backend, ids, args.new_tokens, args.repeats),
                   **bench.gpu_figures(backend.meta, model, context + args.new_tokens // 2)}
            rows.append(row)
            print(f"{model.name}, {kv} cache, at {context} tokens: prefill {row['prefill_tok_s']:.1f} tok/s, "
                  f"decode {row['decode_tok_s']:.1f} tok/s", flush=True)
            for line in bench.gpu_model_lines(row, args.bandwidth, args.dispatch_us):
                print(f"  {line}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
