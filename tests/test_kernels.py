"""Each WGSL kernel of chatlens/gpu/wgsl against the NumPy function it mirrors, run natively
through wgpu-py (lavapipe on this machine: no test skips for want of a GPU).

A kernel runs in a one-dispatch program made by the same functions (chatlens.gpu.kernels) the
forward pass uses; its weights are uploaded as the files store them and decoded in the shader.
Shapes: this model's (K = 576 and 1536, 9/3 heads of 64) and odd ones (K = 40 or 96, N = 37,
4/2 heads of 16). Tolerances: f32 math within 1e-4 relative to the output's largest value
(sums of up to 1536 products in another order); exact where nothing is summed.
"""

import math
import struct
import zlib

import gguf
import numpy as np
import pytest

from chatlens.backend import log_z_of, top_k_of
from chatlens.gguf import GGML_TYPES, unpermute_qk
from chatlens.gpu import kernels as K
from chatlens.host import native_gpu as native
from chatlens.gpu.builder import ProgramBuilder
from chatlens.gpu.kernels import Matrix, Target
from chatlens.gpu.program import STEP_FIELDS, rope_table
from chatlens.model import Probe, attention, rms_norm, rope, rope_tables, silu, split_heads
from chatlens.config import ModelConfig
from chatlens.quants import dequantize

Q = gguf.GGMLQuantizationType
DTYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1"]
TYPE_ID = {t.name: i for i, t in GGML_TYPES.items()}
REL = 1e-4


def close(got, want, rel=REL):
    np.testing.assert_allclose(got, want, rtol=0, atol=rel * float(np.abs(want).max()))


def f16_close(got, want):
    """got (float16, as the KV cache holds it) is want rounded to f16: within half an f16 ulp of
    each value, plus f32 rounding of the sums it came from."""
    want = np.asarray(want, np.float32)
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float32)
    assert np.all(np.abs(got.astype(np.float32) - want) <= 0.5 * ulp + REL * float(np.abs(want).max()))


@pytest.fixture(scope="module")
def device():
    opened = native.shared_device()
    assert opened is not None, "wgpu found no adapter: install mesa-vulkan-drivers (lavapipe) or a GPU driver"
    return opened


TARGETS = {"subgroups": Target(True), "shared-memory": Target(False)}


def encode(a, dtype) -> bytes:
    """A float32 matrix as a file stores it in `dtype` (quantized by the gguf package)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "F32":
        return a.tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    if dtype == "BF16":
        bits = a.view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2").tobytes()
    return gguf.quants.quantize(a, Q[dtype]).tobytes()


def decoded(raw, dtype, shape):
    """What the file's bytes mean, by chatlens.quants (the CPU side's dequantizer)."""
    return dequantize(raw, GGML_TYPES[TYPE_ID[dtype]], shape)


class Kernel:
    """A program of a few buffers and one sequence; inputs are uploaded like weights (fills)."""

    def __init__(self, device):
        self.device, self.info = device
        self.b = ProgramBuilder()
        self.blobs = {}

    def input(self, name, data, size=None) -> str:
        raw = data if isinstance(data, bytes) else np.ascontiguousarray(data).tobytes()
        self.blobs[name] = raw
        self.b.weight(name, {"file": name, "offset": 0, "nbytes": len(raw)})
        return self.b.buffer(name, max(len(raw), size or 0), fill=[(name, 0)])

    def matrix(self, name, tensors, dtype) -> tuple[Matrix, list]:
        """Tensors (out, k) of one dtype back to back in one buffer, as program.py lays them out;
        returns the Matrix and the decoded float32 value of each."""
        fill, segs, at, values = [], [], 0, []
        for i, t in enumerate(tensors):
            raw = encode(t, dtype)
            self.blobs[f"{name}{i}"] = raw
            self.b.weight(f"{name}{i}", {"file": f"{name}{i}", "offset": 0, "nbytes": len(raw)})
            nbytes, layout = K.stored(dtype, len(raw))  # quantized blocks regrouped as they upload
            fill.append((f"{name}{i}", at, layout))
            segs.append(at // K.STORE_BYTES[dtype])
            at = -(-(at + nbytes) // 16) * 16
            values.append(decoded(raw, dtype, t.shape))
        self.b.buffer(name, at, fill=fill)
        return Matrix(name, dtype, tensors[0].shape[1], tuple(segs)), values

    def output(self, name, nbytes) -> str:
        self.b.buffer(name, nbytes)
        self.b.readback(name, name, 0, nbytes)
        return name

    def step(self, n_tokens=1, start=0, split=32, tokens=(), capacity=64, **fields) -> str:
        """The step buffer (program.STEP_FIELDS; fields: the others by name, 0 unless given)."""
        fields = {"n_tokens": n_tokens, "start": start, "split": split, **fields}
        assert set(fields) <= set(STEP_FIELDS), set(fields) - set(STEP_FIELDS)
        words = [fields.get(f, 0) for f in STEP_FIELDS]
        words += list(tokens) + [0] * (capacity - len(tokens))
        return self.input("step", struct.pack(f"<{len(words)}I", *words))

    def run(self, *outputs, dtype="<f4"):
        """The outputs' bytes as `dtype` (one for all, or a tuple of one for each)."""
        program = self.b.to_dict()
        program["meta"] = {"step_buffer": "step"}
        ex = native.NativeExecutor(self.device, program, lambda f, o, n: self.blobs[f][o:o + n])
        ex.run(["k"])
        dtypes = dtype if isinstance(dtype, tuple) else (dtype,) * len(outputs)
        return [np.frombuffer(ex.run([], b"", name), dtype=dt) for name, dt in zip(outputs, dtypes)]


def rng_for(*key):
    """A generator seeded by the test's own key (stable across runs, unlike hash())."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


# -- x @ W.T --------------------------------------------------------------------------------------
SHAPES = [(576, 576), (1536, 576), (576, 1536), (37, 40), (37, 96)]  # (N, K)


def shapes_for(dtype):
    return [(n, k) for n, k in SHAPES if k % max(K.UNIT, K.BLOCK[dtype]) == 0]


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_matvec_equals_x_at_w_t(device, dtype, target):
    """One token (decode): y = x @ W.T, every shape its dtype allows, both reductions."""
    for n, k in shapes_for(dtype):
        rng = rng_for(dtype, n, k)
        x = rng.standard_normal((1, k)).astype(np.float32)
        kern = Kernel(device)
        step = kern.step()
        w, (wv,) = kern.matrix("w", [rng.standard_normal((n, k)).astype(np.float32)], dtype)
        y = kern.output("y", 4 * n)
        K.project(kern.b, "k", TARGETS[target], step=step, x=kern.input("x", x), w=w, epilogue=K.store(y, n))
        (got,) = kern.run("y")
        close(got, (x @ wv.T)[0])


@pytest.mark.parametrize("gemm", sorted(K.GEMMS))
@pytest.mark.parametrize("chunk", [64, 128])
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_equals_x_at_w_t(device, dtype, chunk, gemm):
    """A prefill chunk: Y = X @ W.T for T tokens of a chunk (partial tiles, tokens past T
    untouched), by each prefill GEMM (double-buffered and plain)."""
    for (n, k), t in zip(shapes_for(dtype)[::-1], (5, chunk, chunk // 2 + 1, 1)):
        rng = rng_for("mm", dtype, n, k, chunk)
        x = rng.standard_normal((chunk, k)).astype(np.float32)
        kern = Kernel(device)
        step = kern.step(n_tokens=t, capacity=chunk)
        w, (wv,) = kern.matrix("w", [rng.standard_normal((n, k)).astype(np.float32)], dtype)
        y = kern.output("y", 4 * n * chunk)
        K.project(kern.b, "k", Target(), step=step, x=kern.input("x", x), w=w, epilogue=K.store(y, n), chunk=chunk,
                  gemm=gemm)
        assert kern.b.sequences["k"][0]["label"].startswith(gemm + "-")
        (got,) = kern.run("y")
        got = got.reshape(chunk, n)
        close(got[:t], x[:t] @ wv.T)
        assert not got[t:].any()


@pytest.mark.parametrize("gain_dtype", ["F32", "F16", "BF16"])
@pytest.mark.parametrize("chunk, gemm", [(None, None), *((64, gemm) for gemm in sorted(K.GEMMS))])
def test_rms_norm_folded_into_the_projection(device, gain_dtype, chunk, gemm):
    """rms_norm(x, g, eps) @ W.T with g stored as F32/F16/BF16, by the matvec and each prefill GEMM."""
    for n, k, dtype in ((1536, 576, "Q4_1"), (37, 40, "F32")):
        rng = rng_for("norm", gain_dtype, chunk, n)
        t = 1 if chunk is None else 7
        x = (3 * rng.standard_normal((t, k))).astype(np.float32)
        g_raw = encode(1 + 0.3 * rng.standard_normal(k), gain_dtype)
        g = decoded(g_raw, gain_dtype, (k,))
        kern = Kernel(device)
        step = kern.step(n_tokens=t)
        w, (wv,) = kern.matrix("w", [rng.standard_normal((n, k)).astype(np.float32)], dtype)
        y = kern.output("y", 4 * n * t)
        K.project(kern.b, "k", Target(True), step=step, x=kern.input("x", x), w=w, epilogue=K.store(y, n),
                  gain=(kern.input("g", g_raw), gain_dtype), eps=1e-5, chunk=chunk, gemm=gemm)
        (got,) = kern.run("y")
        close(got.reshape(t, n), rms_norm(x, g, 1e-5) @ wv.T)


@pytest.mark.parametrize("chunk", [None, 64])
def test_residual_add_inside_the_projection(device, chunk):
    """x + a @ W.T written in place on the residual stream (o_proj and down_proj)."""
    for n, k, dtype in ((576, 1536, "Q4_1"), (576, 576, "BF16"), (40, 96, "Q8_0")):
        rng = rng_for("res", chunk, n, k)
        t = 1 if chunk is None else 9
        a = rng.standard_normal((t, k)).astype(np.float32)
        stream = rng.standard_normal((t, n)).astype(np.float32)
        kern = Kernel(device)
        step = kern.step(n_tokens=t)
        w, (wv,) = kern.matrix("w", [rng.standard_normal((n, k)).astype(np.float32)], dtype)
        r = kern.input("r", stream)
        kern.b.readback("r", r)
        K.project(kern.b, "k", Target(True), step=step, x=kern.input("a", a), w=w, epilogue=K.residual(r, n), chunk=chunk)
        (got,) = kern.run("r")
        close(got[:t * n].reshape(t, n), stream + a @ wv.T)


@pytest.mark.parametrize("chunk", [None, 64])
@pytest.mark.parametrize("dtype", ["Q4_1", "F16"])
def test_silu_gate_times_up(device, dtype, chunk):
    """silu(rms_norm(x) @ gate.T) * (rms_norm(x) @ up.T), gate and up in one buffer."""
    for ffn, dim in ((1536, 576), (96, 64)):
        rng = rng_for("silu", dtype, chunk, ffn)
        t = 1 if chunk is None else 3
        x = rng.standard_normal((t, dim)).astype(np.float32)
        g = (1 + 0.2 * rng.standard_normal(dim)).astype(np.float32)
        kern = Kernel(device)
        step = kern.step(n_tokens=t)
        w, (gate, up) = kern.matrix("w", [3 * rng.standard_normal((ffn, dim)).astype(np.float32),
                                          rng.standard_normal((ffn, dim)).astype(np.float32)], dtype)
        h = kern.output("h", 4 * ffn * t)
        K.project(kern.b, "k", Target(False), step=step, x=kern.input("x", x), w=w, epilogue=K.silu_mul(h, ffn),
                  gain=(kern.input("g", g), "F32"), eps=1e-5, chunk=chunk)
        (got,) = kern.run("h")
        n = rms_norm(x, g, 1e-5)
        close(got.reshape(t, ffn), silu(n @ gate.T) * (n @ up.T))


@pytest.mark.parametrize("chunk", [None, 64])
def test_the_silu_kernel_gives_numpy_s_values_where_exp_overflows(device, chunk):
    """silu(gate) * up in the shader, with the gate's values chosen exactly (x one-hot, gate rows
    holding the value in column 0): from -1e30 to 1e30, past where exp(-x) overflows float32
    (x < -88.7) and where exp(-x) underflows (x > 103). WGSL promises nothing about inf, so the
    kernel must not lean on x / inf: its outputs equal NumPy's silu (0 for the large negative
    ones, x for the large positive ones), none of them NaN."""
    gate = np.array([-1e30, -1e4, -1000, -100, -89, -88, -80.5, -79.5, -50, -1, 0, 1, 50, 88, 89, 100, 1000, 1e4,
                     1e30, -3.0e38, 3.0e38, -87.5, 87.5, -0.5], np.float32)
    ffn, dim = len(gate), 64
    t = 1 if chunk is None else 3
    x = np.zeros((t, dim), np.float32)
    x[:, 0] = 1
    gate_w = np.zeros((ffn, dim), np.float32)
    gate_w[:, 0] = gate
    up = np.full((ffn, dim), 0.0, np.float32)
    up[:, 0] = 0.5
    kern = Kernel(device)
    step = kern.step(n_tokens=t)
    w, _ = kern.matrix("w", [gate_w, up], "F32")
    h = kern.output("h", 4 * ffn * t)
    K.project(kern.b, "k", Target(False), step=step, x=kern.input("x", x), w=w, epilogue=K.silu_mul(h, ffn), chunk=chunk)
    (got,) = kern.run("h")
    with np.errstate(over="ignore"):
        want = silu(gate) * np.float32(0.5)
    got = got.reshape(t, ffn)
    assert not np.isnan(got).any()
    for row in got:  # float32 exp's rounding (1e-5); the kernel's 0 below -80 against NumPy's |silu| < 1e-32
        np.testing.assert_allclose(row, want, rtol=1e-5, atol=1e-30)
    assert (got[:, gate < -88] == 0).all()


def llama_cpp_permute(w, n_heads):
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


@pytest.mark.parametrize("kv", ["F16", "F32"])
@pytest.mark.parametrize("layout", ["hf", "gguf"])
@pytest.mark.parametrize("chunk", [None, 64])
def test_rope_and_kv_cache_write_after_the_qkv_projection(device, layout, chunk, kv):
    """q, k, v in one dispatch: q and k rotated by model.rope at positions start.., k and v written
    into the cache in f16 (two per u32, rounded as NumPy's float16) or f32. For a GGUF source the rows stay in llama.cpp's permuted
    order and are rotated in adjacent pairs: undoing the permutation gives HF's result."""
    for nh, nkv, hd, dim, dtype in ((9, 3, 64, 576, "Q4_1"), (4, 2, 16, 40, "F32")):
        rng = rng_for("rope", layout, chunk, nh)
        t, start, n_ctx = (1, 11, 16) if chunk is None else (6, 5, 16)
        cfg = ModelConfig(n_layers=1, dim=dim, n_heads=nh, n_kv_heads=nkv, head_dim=hd, ffn_dim=dim,
                          vocab_size=8, n_ctx=n_ctx, rope_base=1e5, norm_eps=1e-5, tied_output=True)
        wq, wk, wv = (rng.standard_normal((n * hd, dim)).astype(np.float32) for n in (nh, nkv, nkv))
        stored = [wq, wk, wv] if layout == "hf" else [llama_cpp_permute(wq, nh), llama_cpp_permute(wk, nkv), wv]
        x = rng.standard_normal((t, dim)).astype(np.float32)
        kern = Kernel(device)
        step = kern.step(n_tokens=t, start=start)
        w, (q_st, k_st, v_st) = kern.matrix("w", stored, dtype)
        table = kern.input("rope", rope_table(cfg, n_ctx))
        q = kern.output("q", 4 * t * nh * hd)
        kc = kern.output("kc", K.kv_cache_bytes(nkv, n_ctx, hd, kv))
        vc = kern.output("vc", K.kv_cache_bytes(nkv, n_ctx, hd, kv))
        segs = dict(zip("qkv", w.segs))
        epi = K.rope_kv(q, kc, vc, table, n_heads=nh, n_kv_heads=nkv, head_dim=hd, n_ctx=n_ctx,
                        hf_pairs=layout == "hf", segs=segs, pairs=(0, (nh + 2 * nkv) * hd // 2), kv=kv)
        K.project(kern.b, "k", Target(True), step=step, x=kern.input("x", x), w=w, epilogue=epi, chunk=chunk)
        cache = {"F16": "<f2", "F32": "<f4"}[kv]
        got_q, got_k, got_v = kern.run("q", "kc", "vc", dtype=("<f4", cache, cache))
        got_q = got_q.reshape(t, nh * hd)
        got_k, got_v = got_k.reshape(nkv, n_ctx, hd), got_v.reshape(nkv, n_ctx, hd)
        if layout == "gguf":  # back to HF's row order, the order NumPy computes in
            q_st, k_st = unpermute_qk(q_st, nh), unpermute_qk(k_st, nkv)
            got_q = unpermute_qk(got_q.T, nh).T
            by_pos = unpermute_qk(got_k.transpose(1, 0, 2).reshape(n_ctx, nkv * hd).T, nkv).T
            got_k = by_pos.reshape(n_ctx, nkv, hd).transpose(1, 0, 2)
        cos, sin = rope_tables(cfg, n_ctx)
        cos, sin = cos[start:start + t], sin[start:start + t]
        want_q = rope(split_heads(x @ q_st.T, nh), cos, sin).transpose(1, 0, 2).reshape(t, nh * hd)
        close(got_q, want_q)
        cached = f16_close if kv == "F16" else close
        cached(got_k[:, start:start + t], rope(split_heads(x @ k_st.T, nkv), cos, sin))
        cached(got_v[:, start:start + t], split_heads(x @ v_st.T, nkv))
        assert not got_k[:, :start].any() and not got_v[:, start + t:].any()  # nothing else written


# -- attention ------------------------------------------------------------------------------------
ATTENTION_SHAPES = [(9, 3, 64), (4, 2, 16), (4, 4, 16)]  # (heads, KV heads, head_dim)


def attention_case(kern, nh, nkv, hd, kv, splits, t, start, split, n_ctx=320, hidden=None):
    """A cache in f16 or f32, q for t tokens at `start`, and NumPy's attention over them: the
    kernel's inputs as buffers of `kern` and the (t, nh * hd) it must equal. hidden = ((a, b), ...):
    key ranges hidden from every token (model.attention's `hidden`; in the step buffer, the ranges'
    envelope and their count, the pairs after the chunk's ids)."""
    rng = rng_for("attn", nh, nkv, hd, t, start)
    kc = rng.standard_normal((nkv, n_ctx, hd)).astype({"F16": np.float16, "F32": np.float32}[kv])
    vc = rng.standard_normal((nkv, n_ctx, hd)).astype(kc.dtype)
    q = (2 * rng.standard_normal((t, nh * hd))).astype(np.float32)
    ranges = list(hidden or ())
    a, b = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else (0, 0)
    step = kern.step(n_tokens=t, start=start, split=split if splits > 1 else n_ctx, hidden_start=a, hidden_end=b,
                     n_hidden=len(ranges), tokens=[0] * t + [x for r in ranges for x in r])
    o_bytes, stats_bytes = K.partials_bytes(t, nh, splits, hd)
    kern.b.buffer("partials", o_bytes)
    kern.b.buffer("stats", stats_bytes)
    end = start + t
    want = attention(split_heads(q, nh), kc[:, :end].astype(np.float32), vc[:, :end].astype(np.float32), start,
                     hidden=hidden)
    return step, kern.input("q", q), kern.input("kc", kc), kern.input("vc", vc), want


@pytest.mark.parametrize("nh, nkv, hd", ATTENTION_SHAPES)
@pytest.mark.parametrize("splits", [1, 10])
@pytest.mark.parametrize("kv", ["F16", "F32"])
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_attention_equals_numpy_attention_over_the_cache(device, nh, nkv, hd, splits, kv, target):
    """model.attention over a cache held in f16 or f32 (NumPy reads the same values), causal: one
    split written directly, or split in keys of `split` and merged by a pass of its own (as a
    prefill chunk's is); decode (T=1) at 1, 71 and 320 keys (over 1, 3 and 10 splits, and blocks
    of keys past one), and prefill chunks of 7; its reductions by subgroups and by shared memory."""
    n_ctx, split_max = 320, 32
    for t, start, split in ((1, 0, 32), (1, 70, 32), (1, 319, 32), (7, 100, 16), (7, 20, 32)):
        kern = Kernel(device)
        step, q, kc, vc, want = attention_case(kern, nh, nkv, hd, kv, splits, t, start, split, n_ctx)
        out = kern.output("out", 4 * t * nh * hd)
        K.attention(kern.b, "k", step=step, q=q, kc=kc, vc=vc, partials="partials", stats="stats", out=out,
                    n_heads=nh, n_kv_heads=nkv, head_dim=hd, n_ctx=n_ctx, splits=splits,
                    split_max=split_max if splits > 1 else n_ctx, tokens=t, kv=kv, target=TARGETS[target])
        (got,) = kern.run("out")
        close(got.reshape(t, nh * hd), want)


@pytest.mark.parametrize("nh, nkv, hd", ATTENTION_SHAPES[:2])
@pytest.mark.parametrize("splits", [1, 10])
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_hidden_keys_attention_equals_numpy_s_hidden(device, nh, nkv, hd, splits, target):
    """The *_hidden sequences' attention (HIDDEN): key ranges masked for every token of a chunk,
    as model.attention(hidden=((a, b), ...)) masks them, written directly or over splits of 32
    keys merged by a pass of their own: a range inside one split, one that is a whole split, one
    whose splits (the first three) are all hidden (their partials weigh exactly 0: no NaN), one
    whose first block of 256 keys is all hidden (the running max still its start when the next
    block's keys come: their exp is taken against the first real max, the hidden ones' is 0), and
    three ranges at once (pieces knocked out together), the keys between them read."""
    n_ctx, split_max = 320, 320
    cases = ((7, 100, 32, ((40, 50),)), (7, 100, 32, ((32, 64),)), (7, 100, 32, ((0, 96),)),
             (1, 319, 32, ((32, 64),)), (7, 310, 300, ((0, 260),)), (7, 100, 32, ((3, 9), (20, 21), (60, 90))))
    for t, start, split, hidden in cases:
        kern = Kernel(device)
        step, q, kc, vc, want = attention_case(kern, nh, nkv, hd, "F32", splits, t, start, split, n_ctx, hidden)
        out = kern.output("out", 4 * t * nh * hd)
        K.attention(kern.b, "k", step=step, q=q, kc=kc, vc=vc, partials="partials", stats="stats", out=out,
                    n_heads=nh, n_kv_heads=nkv, head_dim=hd, n_ctx=n_ctx, splits=splits,
                    split_max=split_max if splits > 1 else n_ctx, tokens=t, kv="F32", target=TARGETS[target],
                    hidden=True)
        assert kern.b.sequences["k"][0]["label"].startswith("attention-hidden")
        (got,) = kern.run("out")
        assert np.isfinite(got).all()
        close(got.reshape(t, nh * hd), want)


@pytest.mark.parametrize("nh, nkv, hd", ATTENTION_SHAPES)
@pytest.mark.parametrize("dtype", ["F32", "Q4_1"])
@pytest.mark.parametrize("kv", ["F16", "F32"])
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_o_projection_merges_split_attention_as_it_loads_it(device, nh, nkv, hd, dtype, kv, target):
    """A decode step past one split: attention's partials go straight to the o projection's
    matvec, which merges them as it loads x: stream + model.attention(...) @ W.T, in two
    dispatches, at 33, 71 and 320 keys (2, 3 and 10 splits of 32) and 100 keys in splits of 16.
    Q4_1's wide units (32 elements) span two heads of 16."""
    n_ctx, split_max, splits = 320, 32, 10
    for start, split in ((32, 32), (70, 32), (319, 32), (99, 16)):
        kern = Kernel(device)
        step, q, kc, vc, want = attention_case(kern, nh, nkv, hd, kv, splits, 1, start, split, n_ctx)
        rng = rng_for("merge", nh, hd, dtype, start)
        n = 40
        w, (wv,) = kern.matrix("w", [rng.standard_normal((n, nh * hd)).astype(np.float32)], dtype)
        stream = rng.standard_normal((1, n)).astype(np.float32)
        r = kern.input("r", stream)
        kern.b.readback("r", r)
        split_out = K.attention(kern.b, "k", step=step, q=q, kc=kc, vc=vc, partials="partials", stats="stats",
                                out=None, n_heads=nh, n_kv_heads=nkv, head_dim=hd, n_ctx=n_ctx, splits=splits,
                                split_max=split_max, tokens=1, kv=kv, target=TARGETS[target])
        K.project(kern.b, "k", TARGETS[target], step=step, x=split_out, w=w, epilogue=K.residual(r, n))
        assert [d["label"] for d in kern.b.sequences["k"]] == ["attention", f"matvec-merge-residual-{dtype}"]
        (got,) = kern.run("r")
        close(got[:n].reshape(1, n), stream + want.reshape(1, nh * hd) @ wv.T)


@pytest.mark.parametrize("nh, nkv, hd", ATTENTION_SHAPES)
@pytest.mark.parametrize("kv", ["F16", "F32"])
def test_attention_weights_equal_numpy_attention_s(device, nh, nkv, hd, kv):
    """An inspection's weights (attention_weights.wgsl): one token's softmax over keys 0..start for
    each query head, as model.attention computes them (its Probe), at 1, 71 and 320 keys (past the
    workgroup's 64), written for layer index[0] at `at`, packed for this step's keys."""
    n_ctx, layer, at = 320, 2, 12
    for start in (0, 70, 319):
        kern = Kernel(device)
        step, q, kc, vc, _ = attention_case(kern, nh, nkv, hd, kv, splits=1, t=1, start=start, split=n_ctx, n_ctx=n_ctx)
        n_keys = start + 1
        out = kern.output("out", 4 * (at + (layer + 1) * nh * n_keys))
        index = kern.input("index", np.array([layer, 0, 0, 0], np.uint32))
        K.attention_weights(kern.b, "k", step=step, q=q, kc=kc, vc=vc, out=out, index=index, at=at, n_heads=nh,
                            n_kv_heads=nkv, head_dim=hd, n_ctx=n_ctx, kv=kv)
        (got,) = kern.run("out")
        probe = Probe()
        qv = np.frombuffer(kern.blobs["q"], np.float32).reshape(1, nh * hd)
        keys = np.frombuffer(kern.blobs["kc"], {"F16": np.float16, "F32": np.float32}[kv]).reshape(nkv, n_ctx, hd)
        values = np.frombuffer(kern.blobs["vc"], keys.dtype).reshape(nkv, n_ctx, hd)
        attention(split_heads(qv, nh), keys[:, :n_keys].astype(np.float32), values[:, :n_keys].astype(np.float32),
                  start, probe=probe)
        want = probe.attention[0][:, 0]  # (nh, n_keys)
        rows = got[at + layer * nh * n_keys:at + (layer + 1) * nh * n_keys].reshape(nh, n_keys)
        np.testing.assert_allclose(rows, want, rtol=0, atol=1e-6)
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=0, atol=1e-5)


def test_decode_attention_takes_one_dispatch_at_every_length():
    """Up to SHORT_KEYS keys attention writes its output directly; past them its splits' partials
    are merged by the o projection (no merge pass): one dispatch either way, 5 a layer."""
    for n_ctx in (K.SHORT_KEYS, K.SHORT_KEYS + 1, 4096):
        b = ProgramBuilder()
        for name in ("step", "q", "kc", "vc", "a", "partials", "stats"):
            b.buffer(name, 64)
        splits, split_max = K.attention_splits(n_ctx, 3)
        assert (splits == 1) == (n_ctx <= K.SHORT_KEYS)
        split = K.attention(b, "s", step="step", q="q", kc="kc", vc="vc", partials="partials", stats="stats",
                            out="a" if splits == 1 else None, n_heads=9, n_kv_heads=3, head_dim=64, n_ctx=n_ctx,
                            splits=splits, split_max=split_max, tokens=1)
        assert [d["label"] for d in b.sequences["s"]] == ["attention-direct" if splits == 1 else "attention"]
        assert (split is None) == (splits == 1)


def test_a_matvec_merges_split_attention_while_the_splits_weights_fit():
    """SmolLM2's 9 heads at its whole context (32 splits) fit kernels.MERGE_MAX; past it a matvec
    refuses to merge (the program then merges in a pass of its own: test_gpu_backend.py)."""
    assert K.merges_in_matvec(9, K.attention_splits(8192, 3)[0])
    b = ProgramBuilder()
    for name in ("step", "p", "s", "w", "r"):
        b.buffer(name, 64)
    too_many = K.Partials("p", "s", n_heads=64, head_dim=64, splits=32)
    assert not K.merges_in_matvec(too_many.n_heads, too_many.splits)
    with pytest.raises(ValueError, match="more split weights than a matvec holds"):
        K.project(b, "k", Target(), step="step", x=too_many, w=Matrix("w", "F32", 64 * 64), epilogue=K.residual("r", 8))


def test_attention_splits_cover_the_context():
    for n_ctx in (1, 8, 64, 100, 8192, 32768, 131072):
        for group in (1, 3, 8):
            splits, split_max = K.attention_splits(n_ctx, group)
            assert splits * split_max >= n_ctx and splits <= 65535
            assert splits == 1 or group * split_max <= 2048


# -- choosing tokens ------------------------------------------------------------------------------
@pytest.mark.parametrize("vocab", [49152, 301])
def test_argmax_takes_the_lowest_id_among_equal_maxima(device, vocab):
    rng = rng_for("argmax", vocab)
    logits = rng.standard_normal(vocab).astype(np.float32)
    for tie in ([vocab - 1], [vocab - 1, 7], [0, vocab // 2]):
        logits[tie] = logits.max() + 1
        kern = Kernel(device)
        out = kern.output("out", 16)
        K.argmax(kern.b, "k", logits=kern.input("logits", logits), out=out, vocab=vocab)
        (got,) = kern.run("out", dtype="<u4")
        assert got[0] == np.argmax(logits) == min(tie)


@pytest.mark.parametrize("vocab", [49152, 301, 1025])
def test_top_k_equals_backend_top_k_of(device, vocab):
    """chatlens.backend.top_k_of: best first, equal logits by lower id, for k up to the GPU's 64."""
    rng = rng_for("topk", vocab)
    logits = np.round(rng.standard_normal(vocab), 1).astype(np.float32)  # rounding makes many ties
    for k in (1, 5, 32, 64):
        kern = Kernel(device)
        step = kern.step(top_k=k)
        out = kern.output("out", K.top_k_out_bytes(64))
        kern.b.buffer("cand", K.top_k_candidates_bytes(vocab, 64))
        K.top_k(kern.b, "k", step=step, logits=kern.input("logits", logits), candidates="cand", out=out,
                vocab=vocab, k_max=64)
        (got,) = kern.run("out", dtype="<u4")
        ids, vals = got[0:2 * k:2], got[1:2 * k:2].view(np.float32)
        want = top_k_of(logits, k)
        assert list(ids) == [i for i, _ in want]
        assert list(vals) == [v for _, v in want]
        # after the pairs: the max and the sum of exp(logit - max), the softmax's normalizer
        big, total = got[2 * 64:2 * 64 + 2].view(np.float32)
        assert big == logits.max()
        np.testing.assert_allclose(float(big) + np.log(total), log_z_of(logits), rtol=0, atol=1e-5)


@pytest.mark.parametrize("vocab", [301, 1025])
def test_top_k_over_rows_finds_each_row_s_own(device, vocab):
    """The logit lens's top-k: logits (rows, vocab), each row's top_k_of and normalizer written
    after the row before's, as one row's are (rows that tie across rows keep to their own)."""
    rng = rng_for("topk-rows", vocab)
    rows, k = 3, 7
    logits = np.round(rng.standard_normal((rows, vocab)), 1).astype(np.float32)
    logits[1] = logits[0][::-1]  # the same values in another order: each row must read its own
    kern = Kernel(device)
    step = kern.step(top_k=k)
    out = kern.output("out", rows * K.top_k_out_bytes(64))
    kern.b.buffer("cand", rows * K.top_k_candidates_bytes(vocab, 64))
    K.top_k(kern.b, "k", step=step, logits=kern.input("logits", logits), candidates="cand", out=out,
            vocab=vocab, k_max=64, rows=rows)
    (got,) = kern.run("out", dtype="<u4")
    for r in range(rows):
        row = got[r * 2 * 65:(r + 1) * 2 * 65]
        want = top_k_of(logits[r], k)
        assert list(row[0:2 * k:2]) == [i for i, _ in want]
        assert list(row[1:2 * k:2].view(np.float32)) == [v for _, v in want]
        big, total = row[2 * 64:2 * 64 + 2].view(np.float32)
        np.testing.assert_allclose(float(big) + np.log(total), log_z_of(logits[r]), rtol=0, atol=1e-5)


@pytest.mark.parametrize("vocab", [49152, 301])
def test_score_rows_equal_numpy_backend_score_s(device, vocab):
    """score.wgsl: for rows score_from..T-1 of logits (chunk, vocab), the target logit (row r's
    target the step's tokens[r + 1], the last row's next_id), the max, the sum of exp(logit -
    max) (log_z within 1e-5 of log_z_of) and the argmax, the lowest id among equal maxima; rows
    outside them untouched."""
    rng = rng_for("score", vocab)
    chunk, t, score_from, next_id = 8, 6, 2, vocab - 1
    logits = np.round(3 * rng.standard_normal((chunk, vocab)), 1).astype(np.float32)  # many ties
    logits[3, [5, vocab - 2, 9]] = logits[3].max() + 1  # a tie for the max: id 5 wins
    logits[4, 0] = logits[4].max() + 1  # the max at id 0
    logits[5, vocab - 1] = logits[5].max() + 1  # ... and at the last id
    ids = [int(i) for i in rng.integers(0, vocab, t)]
    kern = Kernel(device)
    step = kern.step(n_tokens=t, tokens=ids, capacity=chunk, score_from=score_from, next_id=next_id)
    out = kern.output("out", K.score_bytes(chunk))
    K.score(kern.b, "k", step=step, logits=kern.input("logits", logits), out=out, vocab=vocab, chunk=chunk)
    (got,) = kern.run("out", dtype="<u4")
    got = got.reshape(chunk, 4)
    targets = ids[1:] + [next_id]
    for r in range(score_from, t):
        target, big, total = got[r, :3].view(np.float32)
        assert target == logits[r, targets[r]] and big == logits[r].max()
        assert got[r, 3] == np.argmax(logits[r])
        np.testing.assert_allclose(float(big) + np.log(total), log_z_of(logits[r]), rtol=0, atol=1e-5)
    assert not got[:score_from].any() and not got[t:].any()
    assert [got[r, 3] for r in (3, 4, 5)] == [5, 0, vocab - 1]


@pytest.mark.parametrize("dtype", DTYPES)
def test_embed_gathers_rows_as_numpy_indexes_them(device, dtype):
    """x = embed[ids], decoded exactly; or, with use_argmax, the row of the id the argmax wrote."""
    vocab, dim = 300, 64
    rng = rng_for("embed", dtype)
    ids = [5, 299, 0, 5, 17]
    for use_argmax in (0, 1):
        kern = Kernel(device)
        step = kern.step(n_tokens=len(ids) if not use_argmax else 1, tokens=ids, use_argmax=use_argmax)
        w, (table,) = kern.matrix("w", [rng.standard_normal((vocab, dim)).astype(np.float32)], dtype)
        x = kern.output("x", 4 * len(ids) * dim)
        chosen = kern.input("chosen", np.array([123, 0, 0, 0], np.uint32))
        K.embed(kern.b, "k", step=step, w=w, x=x, chosen=chosen, chunk=len(ids))
        (got,) = kern.run("x")
        want = table[[123]] if use_argmax else table[ids]
        np.testing.assert_array_equal(got.reshape(len(ids), dim)[:len(want)], want)


def test_matvec_workgroups_are_sized_for_the_row():
    """Rows in wide units (kernels.WIDE): Q4_1 at K = 576 has 18 blocks, 32 invocations leave fewest
    idle; BF16 at K = 1536 has 192 units of 8, filling 192; at K = 576, 72 units take 96."""
    assert K.matvec_workgroup(576 // K.WIDE["Q4_1"]) == 32
    assert K.matvec_workgroup(1536 // K.WIDE["BF16"]) == 192
    assert K.matvec_workgroup(576 // K.WIDE["BF16"]) == 96
    for units in (1, 5, 18, 36, 48, 72, 192, 1000):
        wg = K.matvec_workgroup(units)
        assert wg % 32 == 0 and 32 <= wg <= 256 and math.ceil(units / wg) * wg - units < wg
