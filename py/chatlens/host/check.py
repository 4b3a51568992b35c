"""`python -m chatlens check`: the known-answer check (chatlens.check) run natively, and the
references it and the page compare with.

    reference() -> dict                  the check model's figures, computed by NumpyBackend
                                         (`build` writes them into check.json beside build.json)
    run(backend, fault) -> CheckResult   the check on wgpu-py's adapter (webgpu) or NumPy
    weights_reference(path) -> dict      a model file's first step after check.WEIGHTS_TEXT
                                         (`serve`'s mirror publishes one for each copy it serves)

On NumPy the check runs NumpyBackend with einsum's products (Pyodide's NumPy has no BLAS)
against the reference's (this NumPy's own: matmul with a BLAS), so it says how far the two
paths the page can take on NumPy are apart; on the GPU it runs the page's script through
chatlens.host.native_gpu. CHATLENS_GPU_FAULT=1 or --gpu-fault puts chatlens.gpu.fault's fault
into the GPU program, as `build --gpu-fault` does into the page's.
"""

import base64
import copy
import json
import sys
import time
from dataclasses import replace

from .. import check
from ..errors import ChatlensError

VERSION = 1


def _b64(a) -> str:
    import numpy as np

    return base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode("ascii")


def reference(products=None) -> dict:
    """The figures NumpyBackend gives for the script (check.OPS), as check.json holds them:
    {format, version, tolerance, figures: one a run: {logits (base64 float32), log_z} for a
    prefill, the logits read back and a decode; {attention, lens} for an inspection (attention
    (layers, heads, keys) and lens logits (layers, vocab), flattened); {rows: [[target logit,
    log_z, best id, best logit, second best logit], ...]} for a score}. products: NumpyBackend's
    (default this NumPy's). Refuses a script whose argmax the GPU feeds back (a decode's input)
    sits within ten tolerances of a tie: another rounding could take another id there."""
    import numpy as np

    from ..backend import log_z_of
    from ..model import NumpyBackend, rms_norm

    nb = NumpyBackend(check.CONFIG, check.weights(), check.N_CTX, products=products)
    figures, last = [], None

    def logits_figure(logits):
        return {"logits": _b64(logits), "log_z": log_z_of(logits)}

    def decided(logits, what):
        top2 = np.sort(logits)[-2:]
        if top2[1] - top2[0] < 10 * check.TOLERANCE:
            raise ChatlensError(f"the check's script is near a tie at {what}: choose other ids (check.IDS)")
        return int(np.argmax(logits))

    for op in check.OPS:
        if op.kind == "skip":
            nb.length = op.ids[0]  # positions up to it left as they are: zeros (check.SKIP_TO)
        elif op.kind == "prefill":
            nb.prefill(list(op.ids))
            last = nb.logits.copy()
            figures.append(logits_figure(last))
        elif op.kind == "logits":
            figures.append(logits_figure(last))
        elif op.kind == "decode":
            nb.decode(decided(last, op.what))
            last = nb.logits.copy()
            figures.append(logits_figure(last))
        elif op.kind == "inspect":
            attention, blocks = nb.inspect(op.ids[0])  # (layers, heads, keys), (layers, dim)
            lens = np.stack([nb._logits(b) for b in blocks])  # (layers, vocab): the head of each block's output
            figures.append({"attention": _b64(attention), "lens": _b64(lens)})
        else:
            rows_nb = copy.deepcopy(nb)  # the same pass, for each row's second best (a near-tie's margin)
            rows = nb.score(list(op.ids), score_from=op.score_from, next_id=op.next_id, hidden=op.hidden)
            x = rows_nb._forward(list(op.ids), hidden=op.hidden)[op.score_from:]
            logits = rows_nb.products.linear(rms_norm(x, rows_nb.final_norm, check.CONFIG.norm_eps), rows_nb.lm_head)
            second = np.sort(logits, axis=1)[:, -2]
            figures.append({"rows": [[float(t), float(z), int(i), float(b), float(s)]
                                     for (t, z, i, b), s in zip(rows, second)]})
    return {"format": check.FORMAT, "version": VERSION, "tolerance": check.TOLERANCE, "seed": check.SEED,
            "about": "Written by `python -m chatlens build` (chatlens.host.check.reference): what NumpyBackend "
                     "computes for the known-answer check's script (chatlens.check.OPS) on its model.",
            "figures": figures}


def _numpy_checks(want: dict, got: dict) -> list:
    """Each figure of two references against each other (the NumPy check)."""
    out = []
    for op, w, g in zip(check.RUNS, want["figures"], got["figures"]):
        diffs = []
        for key in ("logits", "attention", "lens"):
            if key in w:
                a, b = check._floats(w[key]), check._floats(g[key])
                diffs += [abs(x - y) for x, y in zip(a, b)]
        if "log_z" in w:
            diffs.append(abs(w["log_z"] - g["log_z"]))
        same_ids = True
        for rw, rg in zip(w.get("rows", ()), g.get("rows", ())):
            diffs += [abs(rw[0] - rg[0]), abs(rw[1] - rg[1]), abs(rw[3] - rg[3])]
            same_ids &= rw[2] == rg[2] or abs(rw[3] - rw[4]) <= check.TOLERANCE
        worst = max(diffs)
        passed = worst <= check.TOLERANCE and same_ids
        out.append(check.Checked(op.what, passed, worst, None if passed else f"figures differ by up to {worst:.3g}"))
    return out


def check_program(features=(), limits=None, fault=False, gemm=None) -> dict:
    """The check model's GPU program for an adapter's features and limits (the same builder as
    the model's), with chatlens.gpu.fault's fault when asked."""
    from ..gpu import fault as faults
    from ..gpu.program import build_program

    program = build_program(check.plan(), check.N_CTX, features, limits, check.CHUNK, gemm=gemm)
    return faults.perturb(program) if fault else program


def run(backend: str = "webgpu", fault: bool = False, want: dict | None = None) -> check.CheckResult:
    """The known-answer check here: on wgpu-py's adapter, or NumPy's einsum path (see the module's
    docstring), against `want` (default: reference() computed now)."""
    from ..gpu import fault as faults

    want = want or reference()
    t0 = time.perf_counter()
    if backend == "numpy":
        from ..model import EINSUM

        result = check.result_of(_numpy_checks(want, reference(products=EINSUM)), "numpy (einsum's products)", "numpy")
    elif backend == "webgpu":
        from .native_gpu import NativeExecutor, check_device, shared_device

        opened = shared_device()
        if opened is None:
            raise ChatlensError("no WebGPU adapter: wgpu found no GPU (install a Vulkan, Metal or D3D12 driver)")
        device, info = opened
        program = check_program(info["features"], info["limits"], fault)
        check_device(info, program)
        tensors = check.spec()["tensors"]
        made = {}

        def read(file, offset, nbytes):
            if file not in made:
                made[file] = check.tensor_bytes(tensors[file])
            return made[file][offset:offset + nbytes]

        executor = NativeExecutor(device, program, read, info["name"])
        setup_ms = round(1000 * (time.perf_counter() - t0), 1)
        runs = check.plan_of(program)
        raws = [executor.run(list(r.sequences), r.params, r.readback) for r in runs]
        result = replace(check.compare(want, program["meta"], runs, raws, adapter=info["name"], backend="webgpu",
                                       fault=faults.DESCRIPTION if fault else None), setup_ms=setup_ms)
    else:
        raise ChatlensError(f"check --backend must be numpy or webgpu, not {backend!r}")
    return _timed(result, t0)


def _timed(result, t0):
    return replace(result, ms=round(1000 * (time.perf_counter() - t0), 1))


# -- a model's own weights ---------------------------------------------------------------------

def weights_reference(path, ids=None) -> dict:
    """The first step after check.WEIGHTS_TEXT (plain text, no template) on the model at `path`,
    computed by NumpyBackend: {text, ids, top: the 64 best [id, logit], log_z}. ids: others (a
    test's model whose tokenizer reads nothing of the text; text is then null)."""
    from ..source import load_model

    model = load_model(path)
    text = check.WEIGHTS_TEXT if ids is None else None
    ids = model.text.tokenizer.encode(text) if ids is None else [int(i) for i in ids]
    if not ids:
        raise ChatlensError(f"{path}: its tokenizer reads no token of “{check.WEIGHTS_TEXT}”: give the check ids")
    backend = model.backend(len(ids))
    step = backend.prefill(ids, 64)
    return {"text": text, "ids": list(ids), "top": [[int(i), float(x)] for i, x in step.top_k], "log_z": step.log_z}


def weights_check(path, ids=None) -> check.Checked:
    """The weights check natively: the model at `path` on wgpu-py (its first step after
    WEIGHTS_TEXT, or after `ids`) against NumpyBackend's on the same file."""
    from .native_gpu import open_native

    want = weights_reference(path, ids)
    gpu = open_native(path, len(want["ids"]) + 1)
    step = gpu.prefill(want["ids"], check.WEIGHTS_TOP_K)
    return check.weights_entry(want, step.top_k, step.log_z)


def main(args) -> int:
    from dataclasses import asdict

    from ..gpu import fault as faults

    if args.weights_reference:  # the mirror's child: one model file's reference, as JSON
        from pathlib import Path

        print(json.dumps(weights_reference(Path(args.weights_reference))))
        return 0
    fault = args.gpu_fault or faults.from_env()
    if args.model and args.backend != "webgpu":
        raise ChatlensError("check --model checks a model's weights on the GPU: add --backend webgpu")
    t0 = time.perf_counter()
    result = run(args.backend, fault)
    if args.model:
        from .fetch import resolve_model

        result = _timed(check.with_weights(result, weights_check(resolve_model(args.model))), t0)
    print(json.dumps(asdict(result), indent=1))
    if not result.passed:
        print(f"chatlens: the {args.backend} check failed: {result.adapter} {result.sentence}", file=sys.stderr)
    return 0 if result.passed else 2
