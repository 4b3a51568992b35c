"""`python -m chatlens bench`: prefill and decode speed and peak memory of the NumPy backend with
one and two BLAS threads and on a NumPy built without BLAS (as Pyodide's is), against transformers.

Every row runs the same ~300-token chat prompt and exactly N new tokens (end of turn ignored, so
every run decodes the same number of steps) on the same float32 weights, each row in a child
process of its own: the BLAS thread count is fixed once NumPy is imported, the no-BLAS NumPy
lives in another interpreter (`scripts/noblas-numpy.sh` builds it into .cache/noblas-venv), and
each row's peak memory is its own. `--busy` measures every chatlens row again while a CPU-bound
process spins on the same cores, as another program or a test run does on a shared machine.

A row is a `Run`: a label, the child's command line and environment. `runs()` lists them; a new
backend adds its rows there. Figures are medians of `--repeats` runs and rows run back to back;
this machine is noisy, so read the ratios against the first row, not the absolute numbers.
"""

import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import ChatlensError
from .reference import reference_model

# A lesson-like conversation; its rendered prompt is about 300 tokens with SmolLM2's template.
CONVERSATION = [
    {"role": "system", "content": "You are a patient tutor who explains how language models read text. Keep answers short and concrete."},
    {"role": "user", "content": "Hi! My name is Priya. I am learning how chat models work and I would like to understand what the model actually sees when I send a message."},
    {"role": "assistant", "content": "Nice to meet you, Priya! Every time you send a message, the app renders the whole conversation into one long text with special tokens that mark who is speaking, then the model reads that text token by token."},
    {"role": "user", "content": "So the model does not remember earlier turns by itself? What happens when the conversation becomes longer than the context window of 2048 tokens?"},
    {"role": "assistant", "content": "Right, it has no memory of its own. When the text no longer fits, the app drops the oldest turns, keeps the system prompt and your newest message, and leaves room for the reply."},
    {"role": "user", "content": "And what is the key-value cache? I read that it makes the second turn of a chat faster than the first."},
    {"role": "assistant", "content": "While the model reads a prompt it computes keys and values for every token. The app keeps them, so on the next turn only the new tokens after the longest common prefix need computing."},
    {"role": "user", "content": "Give me one tip for sleeping better, and then explain in two sentences why dropping an old turn means less of the cache can be reused."},
]

NEW_TOKENS = 96  # new tokens a row decodes (--new-tokens)
# The figures every chatlens row prints, and the page's chatlens.bench() resolves with (page/bench.mjs,
# through build.json's settings.bench): on NumPy the last two are null.
FIGURE_KEYS = ("prefill_tok_s", "decode_tok_s", "first_token_ms", "backend", "dispatches_per_token", "adapter")
# Measured elsewhere: what the page's "Measure this device" shows beside a device's own figures
# (docs/speed.md lists the same, each as other_line writes it: tests/test_check.py holds them equal).
OTHER_DEVICES = (
    {"device": "this project's 2-core machine, NumPy in CPython, one BLAS thread", "prefill": "about 180",
     "decode": "about 11", "source": "chatlens bench, on this project's machine"},
    {"device": "the same machine, NumPy without BLAS (as Pyodide's)", "prefill": "25 to 33", "decode": "6 to 10",
     "source": "chatlens bench, on this project's machine"},
    {"device": "a 16-core desktop, wllama (llama.cpp in wasm), 16 threads", "prefill": "", "decode": "57.5",
     "source": "wllama's published figure"},
    {"device": "an M-series Mac in Chrome, WebLLM (f16/f32 weights)", "prefill": "", "decode": "about 100",
     "source": "WebLLM's published figure"},
    {"device": "an M-series Mac in Chrome, Flare (GGUF Q8_0)", "prefill": "", "decode": "173",
     "source": "Flare's published figure"},
)


def other_line(d: dict) -> str:
    """One of OTHER_DEVICES as docs/speed.md lists it."""
    prefill = f"prefill {d['prefill']}, " if d["prefill"] else ""
    return f"- {d['device']}: {prefill}decode {d['decode']} tokens/s ({d['source']})"


def page_input() -> dict:
    """build.json's settings.bench: the conversation and new tokens every row reads, the keys of a
    row's figures, and OTHER_DEVICES (the page's chatlens.bench(), page/bench.mjs)."""
    return {"conversation": CONVERSATION, "new_tokens": NEW_TOKENS, "keys": list(FIGURE_KEYS),
            "others": [dict(d) for d in OTHER_DEVICES]}


NOBLAS_PYTHON = Path(".cache") / "noblas-venv" / "bin" / "python"  # in the checkout: scripts/noblas-numpy.sh
BUSY_LOOP = "while True: pass"


def _importable() -> str:
    """Where this chatlens is imported from: the children import the same package."""
    import chatlens

    return str(Path(chatlens.__file__).resolve().parent.parent)


@dataclass(frozen=True)
class Run:
    """One row: a child process that reads the prompt ids (JSON) on stdin and prints its figures
    as one JSON line (`measure_chatlens`, `measure_reference`)."""
    label: str
    argv: list
    env: dict = field(default_factory=dict)  # on top of this process's environment
    busy: bool = False  # spin a CPU-bound process on the same cores while it runs


def runs(args, path) -> list:
    """The rows `bench` measures, in order; the ratios are against the first."""
    def child(python=sys.executable, backend=args.backend):
        return [str(python), "-m", "chatlens", "bench", "--child", "--model", str(path), "--backend", backend,
                "--new-tokens", str(args.new_tokens), "--repeats", str(args.repeats)]

    rows = []
    if args.backend == "numpy":
        for row in args.numpy:
            if row == "noblas":
                if Path(args.noblas_python).exists():
                    rows.append(Run("numpy, no BLAS", child(args.noblas_python)))
            elif row.isdigit() and int(row) > 0:
                rows.append(Run(f"numpy, BLAS {row} thread{'s' if int(row) > 1 else ''}", child(), {"OPENBLAS_NUM_THREADS": row}))
            else:
                raise ChatlensError(f"bench --numpy: {row!r} is neither a thread count nor noblas")
    else:  # the GPU, and beside it the NumPy default in the same run
        rows += [Run(args.backend, child()), Run("numpy, BLAS 1 thread", child(backend="numpy"), {"OPENBLAS_NUM_THREADS": "1"})]
    if args.busy:
        rows = [r for row in rows for r in (row, replace(row, label=row.label + ", busy", busy=True))]
    if not args.no_reference and has_transformers():
        rows.append(Run("transformers f32", [sys.executable, "-m", "chatlens", "bench", "--reference-child", "--model", str(path),
                                             "--new-tokens", str(args.new_tokens), "--repeats", str(args.repeats)]))
    return rows


def prompt_ids(text_side) -> list:
    rendered = text_side.template.render(CONVERSATION, add_generation_prompt=True)
    return text_side.tokenizer.encode(rendered)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def timed_runs(backend, ids, new_tokens, repeats) -> list:
    """(prefill seconds, decode seconds) of each repeat: the prompt from an empty cache, then
    new_tokens - 1 greedy steps (the first new id comes out of the prefill's last step)."""
    runs = []
    for _ in range(repeats):
        backend.reset()
        t0 = time.perf_counter()
        step = backend.prefill(ids)
        t1 = time.perf_counter()
        for _ in range(new_tokens - 1):
            step = backend.decode(step.id)
        runs.append((t1 - t0, time.perf_counter() - t1))
    return runs


def run_chatlens(model, ids, new_tokens, repeats):
    backend = model.backend(len(ids) + new_tokens)
    runs = timed_runs(backend, ids, new_tokens, repeats)
    prefill = [len(ids) / p for p, _ in runs]
    decode = [(new_tokens - 1) / d for _, d in runs]
    first = [p * 1000 for p, _ in runs]
    out = {"prefill_tok_s": statistics.median(prefill), "decode_tok_s": statistics.median(decode), "peak_mb": peak_mb(),
           "first_token_ms": statistics.median(first), "backend": backend.name, "dispatches_per_token": None,
           "adapter": backend.name.removeprefix("webgpu: ") if backend.name.startswith("webgpu: ") else None}
    if hasattr(backend, "meta"):  # the GPU: what one token costs it, at the decode's mean context
        out.update(gpu_figures(backend.meta, model.path, len(ids) + new_tokens // 2))
    if getattr(backend, "planned", False):  # the GPU's loop as chatlens.pull drives it
        out["in_flight"] = {str(depth): pulled_runs(backend, ids, new_tokens, repeats, depth) for depth in DEPTHS}
    return out


DEPTHS = (1, 2, 4)  # steps in flight the GPU rows are measured at (the page takes 2 or more, as its host's latency asks)


def pulled_runs(backend, ids, new_tokens, repeats, depth) -> dict:
    """The reply as the page and the command line pull it (chatlens.pull, `depth` steps in
    flight; 1: the host waits for each id before it submits the next step), from an empty cache:
    the time to the first token (the prompt read) and prefill tokens/s, then decode tokens/s and
    the host's time a decode token, taken apart: encoding and submitting the runs, waiting for
    their bytes, and the rest (Python: planning the steps, the loop). Medians of `repeats`. The
    depth - 1 steps submitted with the prompt's last chunk may be computed before the first id is
    read back: with few new tokens the decode rate at depth > 1 is flattered (use dozens)."""
    from ..pull import Pull, greedy

    ex = backend.executor
    spent = {"submit": 0.0, "collect": 0.0}
    submit, collect = ex.submit, ex.collect

    def timed(name, call):
        def run(*a):
            t = time.perf_counter()
            try:
                return call(*a)
            finally:
                spent[name] += time.perf_counter() - t
        return run

    ex.submit, ex.collect = timed("submit", submit), timed("collect", collect)
    rates, first, host = [], [], []
    try:
        for _ in range(repeats):
            backend.reset()
            t0 = time.perf_counter()
            read = []  # when the first id came: the prompt's time ends, the decode's starts

            def first_id(_chosen):
                if not read:
                    read.append(time.perf_counter())
                    spent.update(submit=0.0, collect=0.0)

            greedy(Pull(backend, ids, eos_id=-1, max_new_tokens=new_tokens, depth=depth), on_token=first_id)
            t1 = read[0]
            total = time.perf_counter() - t1
            steps = max(new_tokens - 1, 1)
            rates.append(steps / total)
            first.append(t1 - t0)
            host.append({"submit_ms": 1000 * spent["submit"] / steps, "wait_ms": 1000 * spent["collect"] / steps,
                         "python_ms": 1000 * (total - spent["submit"] - spent["collect"]) / steps})
    finally:
        ex.submit, ex.collect = submit, collect
    mid = {k: statistics.median(h[k] for h in host) for k in host[0]}
    ttft = statistics.median(first)
    return {"decode_tok_s": statistics.median(rates), "first_token_ms": 1000 * ttft, "prefill_tok_s": len(ids) / ttft,
            **mid}


# --- the GPU's performance model: what a decode token reads and dispatches, and the rate that
# bandwidth and a fixed cost a dispatch allow ------------------------------------------------
DISPATCH_US = 4.0  # assumed cost of one dispatch in a compute pass on a discrete GPU (--dispatch-us)


def gpu_figures(meta, path, context: int) -> dict:
    """Dispatches a decode step runs (per token, per layer), the bytes of weights it reads (every
    matrix once, a tied model's output projection is its embedding, read whole, and one
    embedding row for the next token's gather), and the bytes of the KV cache its attention
    reads at `context` keys (K and V of every layer)."""
    from ..gpu import weight_plan

    tensors = weight_plan(path)["tensors"]
    embed = tensors["model.embed_tokens.weight"]
    tied = "lm_head.weight" not in tensors
    weight_bytes = sum(t["nbytes"] for t in tensors.values()) + (0 if tied else embed["nbytes"] // embed["shape"][0] - embed["nbytes"])
    cfg, runs = meta["config"], meta["dispatches"]
    kv_bytes = 2 * cfg["n_layers"] * cfg["n_kv_heads"] * cfg["head_dim"] * context * meta.get("kv_value_bytes", 4)
    short = meta.get("short")
    return {"dispatches_per_token": runs["decode"] + runs["head"], "dispatches_per_layer": (runs["decode"] - 1) / cfg["n_layers"],
            "short_dispatches_per_token": runs[short["decode"]] + runs["head"] if short else None,
            "short_keys": short["keys"] if short else None,
            "weight_bytes_per_token": weight_bytes, "kv_bytes_per_token": kv_bytes, "context": context}


def roofline(r: dict, bandwidth: float, dispatch_us: float) -> dict:
    """Decode tokens/s that the bytes alone allow at `bandwidth` GB/s, the dispatches alone at
    `dispatch_us` each, and both one after the other (the model: a token's kernels are
    dependent, so their fixed costs add to the time its bytes take)."""
    read = (r["weight_bytes_per_token"] + r["kv_bytes_per_token"]) / (bandwidth * 1e9)
    fixed = r["dispatches_per_token"] * dispatch_us * 1e-6
    return {"bytes": 1 / read, "dispatches": 1 / fixed if fixed else float("inf"), "both": 1 / (read + fixed)}


def gpu_model_lines(r: dict, bandwidth: float | None, dispatch_us: float | None, measured=None) -> list:
    """The performance model's lines under a GPU row: what a token reads and dispatches, then the
    roofline and each measured rate's share of it and of the bandwidth. measured: (label, decode
    tokens/s) pairs, default the row's own decode_tok_s."""
    short = (f" ({r['short_dispatches_per_token']} up to {r['short_keys']} keys)"
             if r.get("short_dispatches_per_token") not in (None, r["dispatches_per_token"]) else "")
    lines = [f"per token: {r['weight_bytes_per_token'] / 1e6:.1f} MB of weights + {r['kv_bytes_per_token'] / 1e6:.2f} MB "
             f"of KV cache at {r['context']} keys, {r['dispatches_per_token']} dispatches{short} "
             f"({r['dispatches_per_layer']:g} a layer)"]
    if not bandwidth:
        lines.append("roofline: give --bandwidth GB/s (and --dispatch-us); lavapipe and SwiftShader have none to speak of")
        return lines
    dispatch_us = DISPATCH_US if dispatch_us is None else dispatch_us
    roof = roofline(r, bandwidth, dispatch_us)
    lines.append(f"roofline at {bandwidth:g} GB/s and {dispatch_us:g} us a dispatch: {roof['both']:.0f} tok/s "
                 f"(bytes alone {roof['bytes']:.0f}, dispatches alone {roof['dispatches']:.0f})")
    for label, tok_s in measured or [("", r["decode_tok_s"])]:
        share = bandwidth_share(r, tok_s, bandwidth)
        lines.append(f"measured{' ' + label if label else ''} {tok_s:.1f} tok/s: {100 * tok_s / roof['both']:.0f}% of the "
                     f"roofline, {share['gb_s']:.2f} GB/s ({share['percent']:.0f}% of the bandwidth)")
    return lines


def bandwidth_share(r: dict, tok_s: float, bandwidth: float) -> dict:
    """The bytes a decode token reads at `tok_s`, as GB/s and as a share of `bandwidth` GB/s."""
    gb_s = (r["weight_bytes_per_token"] + r["kv_bytes_per_token"]) * tok_s / 1e9
    return {"gb_s": gb_s, "percent": 100 * gb_s / bandwidth}


def measure_chatlens(path, backend, ids, new_tokens, repeats) -> dict:
    """A child's figures for a chatlens backend, and which NumPy computed them."""
    import numpy as np

    from .. import model as numpy_model
    from .models import open_model

    out = run_chatlens(open_model(path, backend), ids, new_tokens, repeats)
    if numpy_model.HAS_BLAS:
        blas = np.__config__.CONFIG["Build Dependencies"]["blas"].get("name", "BLAS")
        threads = os.environ.get("OPENBLAS_NUM_THREADS", "all cores")
        numpy = f"NumPy {np.__version__} with {blas}, OPENBLAS_NUM_THREADS={threads}, products {numpy_model.PRODUCTS.name}"
    else:
        numpy = f"NumPy {np.__version__} without BLAS, products {numpy_model.PRODUCTS.name}"
    return {**out, "detail": numpy if out["backend"] == "numpy" else f"{out['backend']}; {numpy}"}


def measure_reference(model_path, ids, new_tokens, repeats):
    """transformers float32 on the same weights, streamed from the model file."""
    import torch

    from ..gguf import GGUFFile, hf_tensors
    from ..source import load_text_side

    config = load_text_side(model_path).config
    if model_path.is_dir():
        from .. import safetensors

        tensors = (item for f in sorted(model_path.glob("*.safetensors")) for item in safetensors.load(f).items())
    else:
        tensors = hf_tensors(GGUFFile(model_path), config.n_heads, config.n_kv_heads)
    ref = reference_model(config, tensors)
    prefill, decode = [], []
    x = torch.tensor([ids])
    with torch.inference_mode():
        for _ in range(repeats):
            t0 = time.perf_counter()
            out = ref(x, use_cache=True)
            t1 = time.perf_counter()
            past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            for _ in range(new_tokens - 1):
                out = ref(token, past_key_values=past, use_cache=True)
                past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
            t2 = time.perf_counter()
            prefill.append(len(ids) / (t1 - t0))
            decode.append((new_tokens - 1) / (t2 - t1))
    return {"prefill_tok_s": statistics.median(prefill), "decode_tok_s": statistics.median(decode), "peak_mb": peak_mb(),
            "detail": f"torch {torch.__version__}, {torch.get_num_threads()} threads"}


def measure(run: Run, ids) -> dict:
    """Run one row's child (beside a busy process when the row asks) and read its figures."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_importable(), os.environ.get("PYTHONPATH")])), **run.env}
    spinner = subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) if run.busy else None
    try:
        child = subprocess.run(run.argv, input=json.dumps(ids), capture_output=True, text=True, env=env)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    if child.returncode != 0:
        raise RuntimeError(child.stderr[-2000:])
    return json.loads(child.stdout.strip().splitlines()[-1])


def main(args) -> int:
    from ..source import load_text_side
    from .fetch import resolve_model

    path = resolve_model(args.model)
    if args.child or args.reference_child:
        ids = json.loads(sys.stdin.read())
        if args.child:
            print(json.dumps(measure_chatlens(path, args.backend, ids, args.new_tokens, args.repeats)))
        else:
            print(json.dumps(measure_reference(path, ids, args.new_tokens, args.repeats)))
        return 0
    ids = prompt_ids(load_text_side(path))
    args.noblas_python = args.noblas_python or str(NOBLAS_PYTHON)
    rows = runs(args, path)
    print(f"prompt: {len(ids)} tokens, {args.new_tokens} new tokens, median of {args.repeats} runs a row, model {path.name}")
    if args.backend == "numpy" and "noblas" in args.numpy and not Path(args.noblas_python).exists():
        print(f"no NumPy without BLAS at {args.noblas_python} (scripts/noblas-numpy.sh builds it): no such row")
    if not args.no_reference and not has_transformers():
        print("transformers is not installed: no reference run")
    done = []
    for run in rows:
        try:
            figures = measure(run, ids)
        except RuntimeError as e:
            print(f"{run.label}: the run failed:\n{e}")
            return 1
        done.append((run, figures))
        _row(run.label, figures, args.bandwidth, getattr(args, "dispatch_us", None))
    if getattr(args, "json", False):  # the rows' figures, as the page's chatlens.bench() names them
        print(json.dumps([{"label": run.label, **figures} for run, figures in done]))
    if len(done) > 1:
        print(f"ratios against {done[0][0].label}:")
        for run, r in done[1:]:
            _ratio(run.label, r, done[0][1])
    idle = {run.label: r for run, r in done if not run.busy}
    busy = [(run, r) for run, r in done if run.busy and run.label.removesuffix(", busy") in idle]
    if busy:
        print("busy against idle, row by row:")
        for run, r in busy:
            _ratio(run.label, r, idle[run.label.removesuffix(", busy")])
    return 0


def has_transformers() -> bool:
    return importlib.util.find_spec("transformers") is not None


def _ratio(name, r, base):
    print(f"  {name:34s} prefill {r['prefill_tok_s'] / base['prefill_tok_s']:5.2f}x   "
          f"decode {r['decode_tok_s'] / base['decode_tok_s']:5.2f}x   peak memory {r['peak_mb'] / base['peak_mb']:5.2f}x")


def _row(name, r, bandwidth=None, dispatch_us=None):
    print(f"{name:36s} prefill {r['prefill_tok_s']:7.1f} tok/s   decode {r['decode_tok_s']:6.1f} tok/s   "
          f"peak {r['peak_mb']:6.0f} MB   ({r['detail']})")
    if "first_token_ms" in r:
        print(f"{'':36s} first token after {r['first_token_ms']:.0f} ms")
    if "weight_bytes_per_token" in r:
        for line in gpu_model_lines(r, bandwidth, dispatch_us):
            print(f"{'':36s} {line}")
    for depth, f in r.get("in_flight", {}).items():
        print(f"{'':36s} {in_flight_line(depth, f)}")


def in_flight_line(depth, f: dict) -> str:
    """One pulled_runs figure as a line: steps in flight, decode rate, first token, host time a token."""
    return (f"{depth} step{'s' if str(depth) != '1' else ''} in flight: decode {f['decode_tok_s']:6.1f} tok/s, first "
            f"token {f['first_token_ms']:.0f} ms; host a token: encode+submit {f['submit_ms']:.2f} ms, Python "
            f"{f['python_ms']:.2f} ms, waiting for the bytes {f['wait_ms']:.2f} ms")
