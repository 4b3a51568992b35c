"""The browser's GPU executor (site/js/gpu/executor.mjs) in headless Chromium on SwiftShader.

tests/gpu_executor.html runs the executor in a module worker, as the site will. Python builds
the tiny model's program for the browser's adapter (program.py, the code Pyodide will run),
serves it with the model file, and drives it with the same WebGPUBackend class the native
host uses, through an executor that forwards run(sequences, params, readback) to the page as
bytes. Its ids and logits must equal the native run's (wgpu-py on lavapipe) within 1e-4: two
GPU stacks, the same WGSL, sums in other orders.
"""

import base64
import functools
import json
import http.server
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from chatlens.gpu import build_program, kernels as K, weight_plan
from chatlens.host.native_gpu import open_native
from chatlens.gpu.backend import WebGPUBackend
from test_gpu_backend import PROMPT, SOURCES

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
TOL = 1e-4


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """http://127.0.0.1:PORT/ serving the test page, site/js/gpu/, and the tiny models."""
    root = tmp_path_factory.mktemp("gpu-site")
    shutil.copy(ROOT / "tests" / "gpu_executor.html", root / "index.html")
    shutil.copytree(ROOT / "site" / "js" / "gpu", root / "js" / "gpu")
    models = {}
    for name in ("gguf-mixed", "hf-bf16"):
        (root / name).mkdir()
        models[name] = SOURCES[name](root / name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/", root, models
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def page(browser, served):
    """The executor's test page in the session's Chromium (conftest.py: one Playwright a session)."""
    url, _, _ = served
    context = browser.new_context()
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_function("() => window.gpuReady === true")
    yield page
    context.close()
    assert not errors


class PageExecutor:
    """The JS executor in the page's worker behind the native executor's submit / collect: each
    run forwarded and waited for, its bytes base64-encoded across Playwright."""

    def __init__(self, page, name):
        self.page, self.name = page, name

    def submit(self, sequences, params=b"", readback=None):
        out = self.page.evaluate("([s, p, r]) => gpuCall('run', s, p, r)",
                                 [list(sequences), base64.b64encode(params).decode(), readback])
        return base64.b64decode(out)

    def collect(self, ticket):
        return ticket


def browser_backend(page, served, source, n_ctx, features=None, gemm=None):
    url, root, models = served
    info = page.evaluate("gpuCall('probe')")
    path = models[source]
    plan = weight_plan(path)
    program = build_program(plan, n_ctx, info["features"] if features is None else features, info["limits"], gemm=gemm)
    (root / "program.json").write_text(json.dumps(program))
    model_file = path.relative_to(root) if path.is_file() else (path / "model.safetensors").relative_to(root)
    name = page.evaluate("([p, m]) => gpuCall('open', p, m)", [url + "program.json", url + model_file.as_posix()])
    return WebGPUBackend(program, PageExecutor(page, name), name=f"webgpu: {name}"), program


def test_chromium_offers_webgpu_on_swiftshader(page):
    info = page.evaluate("gpuCall('probe')")
    assert "subgroups" in info["features"] and info["limits"]["maxStorageBufferBindingSize"] >= 128 << 20


# (n_ctx, prompt tokens): 96 keys take one attention workgroup; past 128 (a 140-token prompt) the
# attention splits, a chunk merging it in a pass of its own and a decode step in its o projection.
# The prefill GEMM: the one a real GPU's program takes (kernels.GEMM) once, else the one the page
# takes on an emulated adapter, as SwiftShader is (kernels.EMULATED_GEMM: the native run's is
# kernels.GEMM, whose sums along K run in the same order). Compiling matmul's large tiles takes
# SwiftShader about 10 s a program here, the emulated GEMM's a fraction of that.
@pytest.mark.parametrize("source, reduction, n_ctx, prompt, gemm", [
    ("gguf-mixed", "subgroups", 96, 78, K.EMULATED_GEMM), ("hf-bf16", "shared-memory", 96, 78, K.GEMM),
    ("gguf-mixed", "subgroups", 160, 140, K.EMULATED_GEMM), ("hf-bf16", "shared-memory", 160, 140, K.EMULATED_GEMM)])
def test_the_js_executor_gives_the_native_ids_and_logits(page, served, source, reduction, n_ctx, prompt, gemm):
    features = None if reduction == "subgroups" else []
    gpu, program = browser_backend(page, served, source, n_ctx, features, gemm)
    assert program["meta"]["gemm"] == gemm
    assert gpu.name == "webgpu: " + page.evaluate("gpuCall('probe')")["name"]
    assert program["meta"]["reduce"] == ("reduce_subgroup" if reduction == "subgroups" else "reduce_shared")
    enabled = any(m["code"].startswith("enable subgroups;") for m in program["modules"])
    assert enabled == (reduction == "subgroups")  # Chromium's WGSL needs the enable; naga refuses it
    assert (program["meta"]["splits"] > 1) == (n_ctx > 128)
    native = open_native(served[2][source], n_ctx)
    ids = (PROMPT * 2)[:prompt]
    got, want = gpu.prefill(ids, top_k=5), native.prefill(ids, top_k=5)
    for step in range(3):
        np.testing.assert_allclose(gpu.last_logits(), native.last_logits(), atol=TOL, rtol=0, err_msg=f"step {step}")
        assert got.id == want.id
        assert [i for i, _ in got.top_k] == [i for i, _ in want.top_k]
        got, want = gpu.decode(got.id, top_k=5), native.decode(want.id, top_k=5)
    gpu.truncate(10)
    native.truncate(10)
    assert gpu.prefill([3, 4]).id == native.prefill([3, 4]).id
    # an inspection (chatlens.inspection): its run names its own sequences and readback, which the
    # executor runs as it runs any (no change to it); the page's bytes read as the native host's
    from chatlens.cache import PromptCache
    from chatlens.inspection import Inspecting
    from chatlens.pull import greedy

    ids = (PROMPT * 2)[:prompt]
    seen = greedy(Inspecting(PromptCache(gpu), ids, prompt - 1))
    want = greedy(Inspecting(PromptCache(native), ids, prompt - 1))
    assert seen.chosen_id == want.chosen_id
    assert [[i for i, _ in row] for row in seen.lens] == [[i for i, _ in row] for row in want.lens]
    np.testing.assert_allclose(seen.attention, want.attention, atol=TOL, rtol=0)
    np.testing.assert_allclose([[p for _, p in row] for row in seen.lens], [[p for _, p in row] for row in want.lens],
                               atol=TOL, rtol=0)
    # a scored pass with keys hidden (chatlens.cause's knockout): the hidden bodies and the score
    # sequence, a run and a readback of their own as well; past 128 keys its second chunk splits
    gpu.reset()
    native.reset()
    kwargs = {"score_from": prompt - 12, "next_id": 5, "hidden": ((32, 64),)}
    seen, want = gpu.score(ids, **kwargs), native.score(ids, **kwargs)
    assert [row[2] for row in seen] == [row[2] for row in want]
    np.testing.assert_allclose([row[:2] + row[3:] for row in seen], [row[:2] + row[3:] for row in want],
                               atol=TOL, rtol=0)
