"""The known-answer check (chatlens.check, issue 49): its model's weights made alike in Python
and in the browser's JavaScript, exact in every format; its script runs every sequence of the
GPU program; it passes on NumPy and on lavapipe, and fails, naming what differed, with the
documented fault (chatlens.gpu.fault) in the program; `python -m chatlens check` prints it."""

import hashlib
import json
import shutil
import subprocess

import numpy as np
import pytest

from chatlens import check
from chatlens.gpu import fault
from chatlens.host import check as host_check
from conftest import ROOT, cli_in_process

NODE_DIGESTS = """
import { checkReader } from "./site/js/gpu/checkmodel.mjs";
import { createHash } from "node:crypto";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const spec = JSON.parse(text);
const read = checkReader(spec);
const out = {};
for (const [name, t] of Object.entries(spec.tensors)) {
  out[name] = createHash("sha256").update(read(name, 0, t.nbytes)).digest("hex");
}
console.log(JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def reference():
    return host_check.reference()


def test_the_browser_makes_the_same_weights_as_python():
    if shutil.which("node") is None:
        pytest.skip("node is missing")
    spec = check.spec()
    done = subprocess.run(["node", "--input-type=module", "-e", NODE_DIGESTS], input=json.dumps(spec), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    js = json.loads(done.stdout)
    py = {name: hashlib.sha256(check.tensor_bytes(t)).hexdigest() for name, t in spec["tensors"].items()}
    assert js == py
    # every format the kernels decode is among them, and every gain format
    assert {t["dtype"] for t in spec["tensors"].values() if not t["gain"]} == set(check.DTYPES)
    assert {t["dtype"] for t in spec["tensors"].values() if t["gain"]} == {"F32", "F16", "BF16"}


def test_the_vectorised_weights_are_the_one_scalar_rule():
    """check.values (NumPy, the host's) is check.integer (one element, plain Python) scaled."""
    for name, t in list(check.spec()["tensors"].items())[:4]:
        got = check.values(t).ravel()[:257]
        scale = 1 / check.GAIN_STEP if t["gain"] else 2.0 ** -t["exponent"]
        want = [(1 if t["gain"] else 0) + check.integer(t["key"], i) * scale for i in range(257)]
        np.testing.assert_array_equal(got, np.array(want, np.float32), err_msg=name)


def test_every_format_holds_the_check_model_s_values_exactly():
    from chatlens.gguf import GGML_TYPES
    from chatlens.quants import dequantize

    types = {t.name: t for t in GGML_TYPES.values()}
    for name, t in check.spec()["tensors"].items():
        raw = check.tensor_bytes(t)
        assert len(raw) == t["nbytes"], name
        got = dequantize(raw, types[t["dtype"]], t["shape"])
        np.testing.assert_array_equal(got, check.values(t), err_msg=name)
    # a tensor is neither flat nor constant: its integers span -8..7
    w = check.values(check.spec()["tensors"]["model.layers.0.mlp.down_proj.weight"])
    assert sorted(set((w * 256).astype(int).ravel())) == list(range(-8, 8))


def test_the_script_dispatches_every_sequence_of_the_program():
    for features, gemm in (((), None), (("subgroups",), None), (("subgroups",), "matmul_small")):
        program = host_check.check_program(features, gemm=gemm)
        runs = check.plan_of(program)
        assert {s for r in runs for s in r.sequences} == set(program["sequences"]), (features, gemm)
        meta = program["meta"]
        assert meta["splits"] > 1 and meta["short"]["keys"] == 128  # attention splits past 128 keys, as the page's
        # the first prompt stays within one attention workgroup, the second goes past it
        fields = meta["step_fields"]
        keys = [(lambda w: w[fields.index("start")] + w[fields.index("n_tokens")])(r.to_json()["params"])
                for r in runs if r.params]
        assert max(keys[:4]) <= 128 < min(keys[4:])


def test_the_fault_changes_only_the_mlp_activation():
    program = host_check.check_program(("subgroups",))
    wrong = fault.perturb(program)
    changed = [m["name"] for m, w in zip(program["modules"], wrong["modules"]) if m["code"] != w["code"]]
    assert changed and all("silu" in name for name in changed)
    assert wrong["meta"]["fault"] == fault.DESCRIPTION and "fault" not in program["meta"]
    assert [p["name"] for p in wrong["pipelines"]] == [p["name"] for p in program["pipelines"]]


def test_the_numpy_check_passes_and_the_cli_prints_it(reference):
    result = host_check.run("numpy", want=reference)
    assert result.passed and result.max_diff <= check.TOLERANCE
    assert [c["what"] for c in result.checks] == [op.what for op in check.RUNS]
    done = cli_in_process("check", "--backend", "numpy")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["passed"] and printed["backend"] == "numpy" and printed["ms"] > 0
    assert set(printed) >= {"passed", "max_diff", "checks", "ms", "cached", "adapter"}


def test_compare_names_the_figure_that_differed(reference):
    """The NumPy answers laid out as the GPU reads them back pass; one logit moved fails, naming it."""
    program = host_check.check_program(())
    runs = check.plan_of(program)
    raws = _numpy_raws(program, runs, reference)
    assert check.compare(reference, program["meta"], runs, raws).passed
    moved = list(raws)
    logits = np.frombuffer(moved[1], "<f4").copy()
    logits[7] += 0.01
    moved[1] = logits.tobytes()
    result = check.compare(reference, program["meta"], runs, moved)
    assert not result.passed and [c["passed"] for c in result.checks].count(False) == 1
    assert "the logit of id 7" in result.checks[1]["differed"] and "the logit of id 7" in result.sentence


def _numpy_raws(program, runs, reference):
    """The reference's figures written as the GPU's readbacks lay them out (top_k, logits, inspection, score)."""
    meta = program["meta"]
    raws = []
    for op, run, fig in zip(check.RUNS, runs, reference["figures"]):
        size = {r: v["size"] for r, v in program["readbacks"].items()}[run.readback]
        out = bytearray(size)
        if run.readback == "top_k":
            logits = np.array(check._floats(fig["logits"]), np.float32)
            best = np.argsort(-logits, kind="stable")[:run.top_k]
            for r, i in enumerate(best):
                out[8 * r:8 * r + 8] = np.array([i], "<u4").tobytes() + np.array([logits[i]], "<f4").tobytes()
            big = logits.max()
            total = np.exp(logits.astype(np.float64) - big).sum()
            out[8 * meta["top_k_max"]:8 * meta["top_k_max"] + 8] = np.array([big, total], "<f4").tobytes()
        elif run.readback == "logits":
            out[:4 * check.CONFIG.vocab_size] = np.array(check._floats(fig["logits"]), "<f4").tobytes()
        elif run.readback == "inspection":
            lens = np.array(check._floats(fig["lens"]), np.float32).reshape(check.CONFIG.n_layers, -1)
            row = 8 * (meta["top_k_max"] + 1)
            for layer, logits in enumerate(lens):
                best = np.argsort(-logits, kind="stable")[:run.top_k]
                for r, i in enumerate(best):
                    at = layer * row + 8 * r
                    out[at:at + 8] = np.array([i], "<u4").tobytes() + np.array([logits[i]], "<f4").tobytes()
                big = logits.max()
                total = np.exp(logits.astype(np.float64) - big).sum()
                out[layer * row + row - 8:layer * row + row] = np.array([big, total], "<f4").tobytes()
            attention = np.array(check._floats(fig["attention"]), "<f4").tobytes()
            at = meta["inspect"]["attention_at"]
            out[at:at + len(attention)] = attention
        else:
            fields = meta["step_fields"]
            score_from = run.to_json()["params"][fields.index("score_from")]
            for r, (target, log_z, top, big, _) in enumerate(fig["rows"]):
                total = np.exp(np.float64(log_z) - big)
                out[16 * (score_from + r):16 * (score_from + r) + 16] = (
                    np.array([target, big, total], "<f4").tobytes() + np.array([top], "<u4").tobytes())
        raws.append(bytes(out))
    return raws


def test_the_check_passes_on_lavapipe_and_fails_with_the_fault(reference):
    """The GPU program on wgpu-py's adapter (lavapipe here) agrees with NumPy far inside the tolerance;
    with the fault every run's figures differ, and the result says which and by how much."""
    pytest.importorskip("wgpu")
    from chatlens.host.native_gpu import adapter_available

    if not adapter_available():
        pytest.skip("wgpu finds no adapter")
    good = host_check.run("webgpu", want=reference)
    assert good.passed, good.sentence
    assert good.max_diff < check.TOLERANCE / 10 and good.backend == "webgpu" and good.fault is None
    bad = host_check.run("webgpu", fault=True, want=reference)
    assert not bad.passed and bad.fault == fault.DESCRIPTION
    assert not any(c["passed"] for c in bad.checks), bad.checks
    assert bad.sentence.startswith("computes wrong values: ") and "tolerance is 0.001" in bad.sentence
    # the command line: the same JSON, and exit status 2 when it fails
    done = cli_in_process("check", "--gpu-fault")
    assert done.returncode == 2 and "check failed" in done.stderr
    printed = json.loads(done.stdout)
    assert not printed["passed"] and printed["adapter"] == good.adapter


def test_a_weights_reference_and_its_entry():
    """The weights check's comparison: the reference's own step passes; a logit moved or an id that
    is not among the reference's best fails, named."""
    want = {"text": check.WEIGHTS_TEXT, "ids": [1, 2], "log_z": 3.0,
            "top": [[i, 2.0 - 0.1 * i] for i in range(64)]}
    top = [(i, 2.0 - 0.1 * i) for i in range(10)]
    assert check.weights_entry(want, top, 3.0).passed
    moved = check.weights_entry(want, [(0, 2.01)] + top[1:], 3.0)
    assert not moved.passed and "the logit of id 0" in moved.differed
    other = check.weights_entry(want, [(99, 2.0)] + top[1:], 3.0)
    assert not other.passed and "id 99" in other.differed
    result = check.with_weights(check.result_of([check.Checked("a", True, 1e-6)], "x", "webgpu"), moved)
    assert not result.passed and len(result.checks) == 2 and "the model's own weights" in result.sentence


def test_the_other_hardware_the_page_shows_is_what_docs_speed_md_lists():
    from chatlens.host import bench

    text = (ROOT / "docs" / "speed.md").read_text(encoding="utf-8")
    for device in bench.OTHER_DEVICES:
        assert bench.other_line(device) in text, bench.other_line(device)


def test_a_faulty_build_is_said_so_and_kept_apart(reference):
    """build --gpu-fault: build.json's check names the fault, and a result kept for the honest build
    is not this one's (another key); both commands take the flag."""
    from chatlens.host import build, cli

    honest = build.check_manifest(reference, "snapshot", False)
    faulty = build.check_manifest(reference, "snapshot", True)
    assert honest["fault"] is None and faulty["fault"] == fault.DESCRIPTION
    assert honest["key"] != faulty["key"] and honest["reference"] == faulty["reference"] == check.reference_id(reference)
    assert build.check_manifest(reference, "another", False)["key"] != honest["key"]  # other wheels: checked again
    for command in ("build", "serve"):
        assert cli.parser().parse_args([command, "--gpu-fault"]).gpu_fault
        assert not cli.parser().parse_args([command]).gpu_fault
