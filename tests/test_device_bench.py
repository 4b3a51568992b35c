"""`bash scripts/device-bench.sh --quick`: the device run's steps, checked on this machine's adapter
(lavapipe here) with the tiny random model of tests/test_gpu_backend.py as a GGUF (Q4_1) and a
Hugging Face folder (BF16), so that it takes seconds. The figures are printed, never asserted:
what is checked is that every step ran and every row carries its figures.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from test_gpu_backend import SOURCES, TINY

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    models = tmp_path_factory.mktemp("models")
    out = tmp_path_factory.mktemp("out")
    env = {**os.environ, "CHATLENS_MODEL": str(SOURCES["gguf-q4_1"](models)),
           "CHATLENS_HF": str(SOURCES["hf-bf16"](models)), "OUT": str(out)}
    done = subprocess.run(["bash", "scripts/device-bench.sh", "--quick"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, out


def test_each_row_pulls_the_reply_at_1_2_and_4_steps_in_flight(quick_run):
    stdout, out = quick_run
    rows = json.loads((out / "device-bench.json").read_text())
    decode = [r for r in rows if r["kind"] == "decode"]
    assert [(r["model"], r["kv"], r["context"]) for r in decode] == [
        ("m.gguf", "F16", 8), ("m.gguf", "F16", 140), ("hf", "F16", 8), ("hf", "F16", 140)]
    for r in decode:
        assert sorted(r["in_flight"]) == ["1", "2", "4"]
        for f in r["in_flight"].values():
            assert set(f) == {"decode_tok_s", "first_token_ms", "prefill_tok_s", "submit_ms", "python_ms", "wait_ms"}
            assert f["decode_tok_s"] > 0 and f["first_token_ms"] > 0
            assert min(f["submit_ms"], f["python_ms"], f["wait_ms"]) >= 0
        # the roofline's inputs beside each row: 5 dispatches a layer at 8 keys and past 128 alike
        assert r["dispatches_per_token"] == 1 + 5 * TINY.n_layers + 2 and r["dispatches_per_layer"] == 5
        assert r["weight_bytes_per_token"] > 0 and r["kv_bytes_per_token"] > 0 and r["keys"] == r["context"] + 1


def test_the_known_answer_check_comes_first_beside_the_speed_rows(quick_run):
    """The "CPU match": the GPU program's check on this adapter, and each model's first step against
    NumPy's on the same file, in the rows and in the table to paste."""
    stdout, out = quick_run
    rows = json.loads((out / "device-bench.json").read_text())
    checks = [r for r in rows if r["kind"] == "check"]
    assert [r["what"] for r in checks] == ["the GPU program on the check model", "m.gguf's weights", "hf's weights"]
    assert all(r["passed"] and r["max_diff"] <= 1e-3 and r["ms"] > 0 for r in checks), checks
    assert rows.index(checks[-1]) == len(checks) - 1  # before any speed row
    assert "| CPU match (known-answer check, tolerance 0.001) |" in stdout


def test_every_prefill_gemm_is_measured(quick_run):
    """Each of kernels.GEMMS (the emulated adapters' small tiles too: what they cost on a real GPU)."""
    from chatlens.gpu import kernels

    _, out = quick_run
    rows = json.loads((out / "device-bench.json").read_text())
    prefill = {(r["model"], r["gemm"], r["context"]) for r in rows if r["kind"] == "prefill"}
    assert prefill == {(m, g, 140) for m in ("m.gguf", "hf") for g in kernels.GEMMS}


def test_it_ends_with_one_table_to_paste_and_times_each_kernel(quick_run):
    from chatlens.gpu import kernels

    stdout, out = quick_run
    table = stdout[stdout.index("| model | KV | context |"):].splitlines()
    assert len([line for line in table if line.startswith("| m.gguf |") or line.startswith("| hf |")]) == 4 + 2 * len(kernels.GEMMS)
    for kv, gemm in (("F32", "matmul"), ("F16", "matmul"), ("F32", "matmul_plain")):
        times = json.loads((out / f"kernel-times-{kv}-{gemm}.json").read_text())
        assert (times["kv"], times["gemm"]) == (kv, gemm)
        # past 128 keys the decode's o projection merges the split attention: no merge pass
        labels = times["runs"]["decode at 140 keys"]["ms_per_label"]
        assert "matvec-merge-residual-Q4_1" in labels and "attention_merge" not in labels
        assert any(label.startswith(gemm + "-") for label in times["runs"]["prefill"]["ms_per_label"])
