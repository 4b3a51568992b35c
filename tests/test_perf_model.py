"""The GPU program's performance model (`bench --backend webgpu`): what a decode token reads and
dispatches, read from the program itself, and the roofline rate bandwidth and dispatch costs
allow. Pure Python: the program is built, never run."""

import math

import pytest

from chatlens.gpu import build_program, program, weight_plan
from chatlens.host import bench
from test_gpu_backend import SOURCES, TINY


@pytest.mark.parametrize("kv, value_bytes", [(None, 4), ("F16", 2)])
def test_bytes_and_dispatches_a_token_come_from_the_program(tmp_path, kv, value_bytes):
    path = SOURCES["gguf-q4_1"](tmp_path)
    plan = weight_plan(path)
    meta = build_program(plan, 256, kv=kv)["meta"]
    r = bench.gpu_figures(meta, path, context=200)
    assert r["kv_bytes_per_token"] == 2 * TINY.n_layers * TINY.n_kv_heads * TINY.head_dim * 200 * value_bytes
    # untied: every matrix once, and one row of the embedding for the gather
    embed = plan["tensors"]["model.embed_tokens.weight"]
    assert r["weight_bytes_per_token"] == sum(t["nbytes"] for t in plan["tensors"].values()) \
        - embed["nbytes"] + embed["nbytes"] // embed["shape"][0]
    # embed + 5 a layer + head and argmax, at 256 keys (attention split, merged by the o projection)
    # as up to 128 (one split)
    assert r["dispatches_per_token"] == r["short_dispatches_per_token"] == 1 + 5 * TINY.n_layers + 2
    assert r["short_keys"] == 128


def test_a_short_context_program_has_one_attention_dispatch_a_layer(tmp_path):
    path = SOURCES["hf-f16"](tmp_path)
    meta = build_program(weight_plan(path), 128)["meta"]
    r = bench.gpu_figures(meta, path, context=100)
    assert r["dispatches_per_layer"] == 5 and r["short_dispatches_per_token"] is None


def test_the_roofline_adds_the_time_bytes_take_to_the_dispatches_fixed_cost():
    r = {"weight_bytes_per_token": 90e6, "kv_bytes_per_token": 10e6, "dispatches_per_token": 100}
    roof = bench.roofline(r, bandwidth=1000, dispatch_us=5)
    assert math.isclose(roof["bytes"], 10_000)  # 100 MB at 1000 GB/s: 0.1 ms
    assert math.isclose(roof["dispatches"], 2_000)  # 100 x 5 us: 0.5 ms
    assert math.isclose(roof["both"], 1 / 0.6e-3)


def test_the_model_lines_say_what_to_give_without_a_bandwidth():
    r = {"weight_bytes_per_token": 96.6e6, "kv_bytes_per_token": 3.5e6, "dispatches_per_token": 152,
         "dispatches_per_layer": 5, "short_dispatches_per_token": None, "short_keys": None, "context": 348,
         "decode_tok_s": 2.0}
    assert "--bandwidth" in bench.gpu_model_lines(r, None, None)[1]
    lines = bench.gpu_model_lines(r, 1000, 4)
    assert "roofline at 1000 GB/s and 4 us a dispatch" in lines[1] and "measured 2.0 tok/s" in lines[2]


def test_model_files_get_the_default_cache_and_numpy_arrays_numpy_s_f32(tmp_path, monkeypatch):
    """The cache is program.KV_CACHE's for a model's files; a plan over NumPy's float32 arrays
    (host.native_gpu.open_arrays, the backend contract's tests held to NumPy at f32 precision) keeps f32."""
    monkeypatch.setattr(program, "KV_CACHE", "F16")
    plan = weight_plan(SOURCES["hf-f16"](tmp_path))
    assert build_program(plan, 64)["meta"]["kv"] == "F16"
    assert build_program({**plan, "source": "arrays"}, 64)["meta"]["kv"] == "F32"
