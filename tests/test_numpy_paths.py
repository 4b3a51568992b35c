"""The NumPy backend's two sets of products, matmul (with a BLAS) and einsum (without one, as in
Pyodide), compute the same model: on the tiny random Llama of test_backend, in one interpreter,
whichever NumPy runs the tests (`scripts/noblas-numpy.sh` builds one without BLAS)."""

from dataclasses import replace

import numpy as np
import pytest

from chatlens import model
from chatlens.model import EINSUM, MATMUL, NumpyBackend, attention, split_heads
from test_backend import TINY, tiny_weights

# A longer context than test_backend's, so a prefill reaches einsum's many-rows loop.
CFG = replace(TINY, n_ctx=2 * model.EinsumProducts.ROWS_FOR_MULTIPLY_ADD + 16)
WEIGHTS = tiny_weights(CFG, seed=1)
RNG = np.random.default_rng(2)
LONG = [int(i) for i in RNG.integers(0, CFG.vocab_size, model.EinsumProducts.ROWS_FOR_MULTIPLY_ADD + 20)]
TOL = dict(atol=1e-4, rtol=0)


def steps(products, prompt, chunks, n_decode=3):
    """Logits after each chunk of the prompt and after each greedy decode step."""
    b = NumpyBackend(CFG, WEIGHTS, CFG.n_ctx, products=products)
    out, at = [], 0
    for n in chunks:
        step = b.prefill(prompt[at:at + n])
        at += n
        out.append((step.id, b.last_logits().copy()))
    for _ in range(n_decode):
        step = b.decode(step.id)
        out.append((step.id, b.last_logits().copy()))
    return out


@pytest.mark.parametrize("chunks", [[1], [7], [len(LONG)], [5, len(LONG) - 5], [100, 1, len(LONG) - 101]],
                         ids=["one", "few", "many-rows", "few-then-many", "many-one-rest"])
def test_einsum_and_matmul_give_the_same_steps(chunks):
    prompt = LONG[:sum(chunks)]
    for (a_id, a), (b_id, b) in zip(steps(MATMUL, prompt, chunks), steps(EINSUM, prompt, chunks), strict=True):
        np.testing.assert_allclose(b, a, **TOL)
        assert a_id == b_id


@pytest.mark.parametrize("T, start", [(1, 0), (1, 40), (6, 0), (6, 30), (120, 10)])
def test_attention_is_the_same_either_way_and_for_cache_views(T, start):
    """attention() with either set of products, on contiguous k, v and on the backend's views of
    a cache that keeps positions innermost."""
    nh, nkv, hd = CFG.n_heads, CFG.n_kv_heads, CFG.head_dim
    q = RNG.standard_normal((nh, T, hd)).astype(np.float32)
    k, v = (RNG.standard_normal((nkv, start + T, hd)).astype(np.float32) for _ in range(2))
    want = attention(q, k, v, start, MATMUL)
    k_view, v_view = (np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1) for a in (k, v))
    for products in (MATMUL, EINSUM):
        np.testing.assert_allclose(attention(q, k, v, start, products), want, atol=1e-5, rtol=0)
        np.testing.assert_allclose(attention(q, k_view, v_view, start, products), want, atol=1e-5, rtol=0)
    assert attention(q, k, v, start).shape == (T, nh * hd)  # the default: this NumPy's choice


@pytest.mark.parametrize("T", [1, 3, model.EinsumProducts.ROWS_FOR_MULTIPLY_ADD + 1])
def test_einsum_linear_is_x_times_w_transposed(T):
    x = RNG.standard_normal((T, 48)).astype(np.float32)
    w = RNG.standard_normal((80, 48)).astype(np.float32)
    got = EINSUM.linear(x, w)
    assert got.shape == (T, 80) and got.dtype == np.float32
    np.testing.assert_allclose(got, MATMUL.linear(x, w), atol=1e-4, rtol=0)
    np.testing.assert_allclose(EINSUM.linear(split_heads(x, 4).transpose(1, 0, 2).reshape(T, 48), w), got, atol=0, rtol=0)


def test_the_default_follows_this_numpys_blas():
    assert model.PRODUCTS is (MATMUL if model.HAS_BLAS else EINSUM)
    assert NumpyBackend(CFG, WEIGHTS, 8).products is model.PRODUCTS
    assert model.HAS_BLAS == model.has_blas()


@pytest.mark.parametrize("config, has", [
    ({"blas": {"name": "scipy-openblas", "found": True, "version": "0.3.31"}}, True),  # CPython's wheels
    ({"blas": {"name": "none"}, "lapack": {"name": "none"}}, False),  # -Dblas=none, as Pyodide builds it
    ({"blas": {"name": "openblas", "found": False}}, False),
    ({}, True),  # nothing recorded: matmul, as before
])
def test_has_blas_reads_the_build_configuration(monkeypatch, config, has):
    monkeypatch.setattr(np.__config__, "CONFIG", {"Build Dependencies": config}, raising=False)
    assert model.has_blas() is has


@pytest.mark.parametrize("env, want", [({}, "1"), ({"OPENBLAS_NUM_THREADS": "2"}, "2")])
def test_the_command_line_sets_blas_threads_before_numpy_loads(env, want):
    """`python -m chatlens` and the `chatlens` script default to one BLAS thread (host/cli.py says
    why); the user's environment wins."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = "import os, sys, chatlens.host.cli; print(os.environ['OPENBLAS_NUM_THREADS'], 'numpy' in sys.modules)"
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**base, **env, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "py")})
    assert out.stdout.split() == [want, "False"]
