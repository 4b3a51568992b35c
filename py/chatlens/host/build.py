"""`python -m chatlens build`: the static site, from a chatlens checkout.

build writes a deployable static site (default build/site/ in the checkout) from
- the sources in site/ (pages, scripts, styles, the recorded conversations);
- Pyodide's core, pinned by version in build/package.json and installed with `npm ci`, and from
  the same install @noble/hashes (js/vendor/noble-hashes/: the model store's incremental SHA-256);
- pure-Python wheels pinned here: micropip and jinja2 from PyPI, MarkupSafe built pure from its
  sdist (it has no pure wheel), and chatlens itself packed from its runtime modules (never
  chatlens.host: the browser runs no host job);
- build.json: what the worker loads, by URL relative to the site, so the page boots offline,
  and the site's settings (chatlens.defaults), so the page states no default of its own;
- check.json beside it: the known-answer check's reference (chatlens.check), which build.json's
  "check" names, with the documented fault (chatlens.gpu.fault) when built with --gpu-fault.
Inputs are cached in build/node_modules and build/wheels; a build whose inputs are cached
copies only what changed. NumPy for Pyodide is not on npm or PyPI: the page loads it at run
time from the Pyodide CDN of the pinned version, or from the site itself when the build
copied it from a full Pyodide distribution (--pyodide-dist).

The checkout is the working directory unless a caller names another one (`root`).
"""

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import defaults, hub, protocol
from ..errors import ChatlensError


@dataclass(frozen=True)
class Checkout:
    """The folders of a chatlens checkout that the host jobs read and write."""
    root: Path

    @classmethod
    def at(cls, root=None) -> "Checkout":
        """The checkout at `root`, else the working directory."""
        root = Path(root if root is not None else Path.cwd()).resolve()
        if not (root / "site" / "index.html").exists() or not (root / "pyproject.toml").exists():
            raise ChatlensError(f"{root} is not a chatlens checkout (no site/index.html and pyproject.toml): "
                                "run this from the project's folder")
        return cls(root)

    @property
    def site(self) -> Path:  # the site's sources
        return self.root / "site"

    @property
    def build(self) -> Path:  # pinned browser-side inputs, and the caches of the build
        return self.root / "build"

    @property
    def wheels(self) -> Path:
        return self.build / "wheels"

    @property
    def default_out(self) -> Path:
        return self.build / "site"

    @property
    def recorded(self) -> Path:
        return self.site / "recorded.json"

    @property
    def recorded_compare(self) -> Path:  # the recorded comparison (`record`), beside recorded.json
        return self.site / "recorded-compare.json"

# Pure-Python wheels from PyPI (py3-none-any), and MarkupSafe built pure from its sdist.
PYPI_WHEELS = {"micropip": "0.11.1", "jinja2": "3.1.6"}
MARKUPSAFE_VERSION = "3.0.3"
PYODIDE_CORE = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
NOBLE_FILES = ("sha2.js", "_md.js", "_u64.js", "utils.js", "LICENSE")  # sha2.js and what it imports
NPM_FILES = {"pyodide": PYODIDE_CORE, "@noble/hashes": NOBLE_FILES}  # what the build copies from each pinned package
RUNTIME_PACKAGES = ("numpy",)  # Pyodide packages the page loads when it computes (CDN or --pyodide-dist)
BUILD_MANIFEST = "build.json"
CHECK_FILE = "check.json"  # the known-answer check's reference (chatlens.check), beside build.json
SERVICE_WORKER = "sw.js"  # at the site's root, so its scope is the whole site
PRECACHE_MARK = "/* chatlens:precache */ null"


# -- build ---------------------------------------------------------------------------------------
def pinned_version(co: Checkout, package: str) -> str:
    """The version of an npm package pinned in build/package.json."""
    pkg = _read_json(co.build / "package.json")
    version = pkg.get("dependencies", {}).get(package)
    if not version or not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise ChatlensError(f"{co.build / 'package.json'} must pin {package} to an exact version, not {version!r}")
    return version


def pyodide_version(co: Checkout) -> str:
    """The Pyodide version pinned in build/package.json."""
    return pinned_version(co, "pyodide")


def pyodide_cdn(version: str) -> str:
    return f"https://cdn.jsdelivr.net/pyodide/v{version}/full/"


def ensure_node_modules(co: Checkout, log=print) -> Path:
    """build/node_modules with every package in NPM_FILES at its pinned version and with the files
    the build copies (`npm ci` when one is missing or stale)."""
    modules = co.build / "node_modules"
    pins = {name: pinned_version(co, name) for name in NPM_FILES}

    def current():
        for name, needed in NPM_FILES.items():
            meta = modules / name / "package.json"
            if not (meta.exists() and _read_json(meta).get("version") == pins[name]
                    and all((modules / name / f).exists() for f in needed)):
                return False
        return True

    if not current():
        npm = shutil.which("npm")
        if npm is None:
            raise ChatlensError("the build needs npm to install its pinned packages (apt-get install npm)")
        what = ", ".join(f"{n} {v}" for n, v in pins.items())
        log(f"chatlens: npm ci ({what}) ...")
        done = subprocess.run([npm, "ci", "--prefix", str(co.build), "--no-audit", "--no-fund", "--ignore-scripts"],
                              capture_output=True, text=True)
        if done.returncode != 0 or not current():
            raise ChatlensError(f"npm ci in {co.build} did not install {what}:\n{done.stderr.strip()[-2000:]}")
    return modules


def _pip_into_cache(cache: Path, pip_args, filename, env=None, log=print) -> Path:
    """Run `pip download|wheel ... -d TMP`, then keep the one expected wheel in `cache`."""
    target = cache / filename
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    log(f"chatlens: pip {pip_args[0]} {filename} ...")
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        into = "-d" if pip_args[0] == "download" else "-w"
        cmd = [sys.executable, "-m", "pip", *pip_args, "--no-deps", "--disable-pip-version-check", into, tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
        got = Path(tmp) / filename
        if done.returncode != 0 or not got.exists():
            made = ", ".join(p.name for p in Path(tmp).iterdir()) or "nothing"
            raise ChatlensError(f"pip did not produce {filename} (it made: {made}):\n{done.stderr.strip()[-2000:]}")
        os.replace(got, target)
    return target


def ensure_wheels(co: Checkout, log=print) -> list:
    """The pinned pure-Python wheels, downloaded or built once into build/wheels."""
    wheels = []
    for name, version in PYPI_WHEELS.items():
        wheels.append(_pip_into_cache(
            co.wheels, ["download", "--only-binary=:all:", "--python-version", "3.14", "--platform", "any",
             "--implementation", "py", f"{name}=={version}"],
            f"{name}-{version}-py3-none-any.whl", log=log))
    # No compiler: MarkupSafe's setup falls back to its pure-Python escaping. --no-cache-dir keeps
    # pip from reusing a compiled wheel it built before.
    wheels.append(_pip_into_cache(
        co.wheels, ["wheel", "--no-binary", ":all:", "--no-cache-dir", f"markupsafe=={MARKUPSAFE_VERSION}"],
        f"markupsafe-{MARKUPSAFE_VERSION}-py3-none-any.whl", env={"CC": "/bin/false"}, log=log))
    return wheels


# What the browser's wheel holds: the runtime modules and their data, never the host jobs.
WHEEL_SUFFIXES = (".py", ".json", ".wgsl")
HOST_PACKAGE = "host"


def wheel_members(pkg: Path) -> list:
    """The files of the package `pkg` that the browser's wheel packs, as paths relative to it."""
    return [p.relative_to(pkg) for p in sorted(pkg.rglob("*"))
            if p.is_file() and p.suffix in WHEEL_SUFFIXES and "__pycache__" not in p.parts
            and p.relative_to(pkg).parts[0] != HOST_PACKAGE]


def chatlens_wheel(co: Checkout) -> tuple:
    """(filename, bytes) of a pure wheel of the checkout's runtime modules (py/chatlens without
    chatlens.host), byte-identical for identical sources.

    Packed here rather than with `pip wheel .`: setuptools would write its own build/ folder
    into the one that holds this build's inputs, and a pure wheel is a zip with three small
    metadata files."""
    project = tomllib.loads((co.root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name, version = project["name"], project["version"]
    pkg = co.root / "py" / "chatlens"
    entries = [(f"chatlens/{rel.as_posix()}", (pkg / rel).read_bytes()) for rel in wheel_members(pkg)]
    dist = f"{name}-{version}.dist-info"
    metadata = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                f"Summary: {project.get('description', '')}"]
    if "requires-python" in project:
        metadata.append(f"Requires-Python: {project['requires-python']}")
    metadata += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    entries += [
        (f"{dist}/METADATA", ("\n".join(metadata) + "\n").encode()),
        (f"{dist}/WHEEL", b"Wheel-Version: 1.0\nGenerator: chatlens.host.build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
        (f"{dist}/top_level.txt", b"chatlens\n"),
    ]
    record = "".join(
        f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n"
        for n, d in entries) + f"{dist}/RECORD,,\n"
    entries.append((f"{dist}/RECORD", record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in entries:
            info = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, d)
    return f"{name}-{version}-py3-none-any.whl", buf.getvalue()


def _runtime_package_files(lock: dict, names) -> list:
    """File names of Pyodide packages `names` and everything they depend on, from a lock file."""
    packages = lock["packages"]
    seen, todo, files = set(), list(names), []
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n not in packages:
            raise ChatlensError(f"the Pyodide lock file has no package {n!r}")
        files.append(packages[n]["file_name"])
        todo += packages[n].get("depends", [])
    return sorted(files)


def _self_hosted_files(dist: Path, core_lock: dict) -> dict:
    """{relative path in the site: source file} for the runtime packages of a full distribution."""
    lock_path = dist / "pyodide-lock.json"
    if not lock_path.exists():
        raise ChatlensError(f"{dist} is not a Pyodide distribution: it has no pyodide-lock.json")
    lock = _read_json(lock_path)
    if lock.get("info") != core_lock.get("info"):
        raise ChatlensError(f"{dist} is a Pyodide distribution for {lock.get('info')}, "
                            f"but the pinned core is for {core_lock.get('info')}")
    out = {}
    for name in _runtime_package_files(lock, RUNTIME_PACKAGES):
        src = dist / name
        if not src.exists():
            raise ChatlensError(f"{dist} lacks {name}, which its lock file lists")
        out[f"pyodide/{name}"] = src
    return out


def build_site(out=None, pyodide_dist=None, keep_self_hosted=False, log=print, root=None, gpu_fault=False) -> Path:
    """Write the static site of the checkout at `root` (default: the working directory) into
    `out` (default build/site in it) and return its path.

    pyodide_dist: a full Pyodide distribution of the pinned version whose NumPy (and what it
    depends on) is copied in, so the site needs no CDN at all. keep_self_hosted: without
    pyodide_dist, keep the packages a previous self-hosted build copied in (serve's rebuilds).
    gpu_fault: a faulty test build (chatlens.gpu.fault), by default into build/site-gpu-fault."""
    co = Checkout.at(root)
    out = Path(out) if out else co.default_out if not gpu_fault else co.build / "site-gpu-fault"
    _check_out(out)
    version = pyodide_version(co)
    modules = ensure_node_modules(co, log)
    core = modules / "pyodide"
    core_lock = _read_json(core / "pyodide-lock.json")

    files = {}  # relative path -> source Path or bytes
    for p in sorted(co.site.rglob("*")):
        rel = p.relative_to(co.site)
        if p.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            files[rel.as_posix()] = p
    if "recorded.json" not in files:
        log(f"chatlens: warning: {co.recorded} is missing (python -m chatlens record): "
            "recorded mode will be empty")
    if "recorded-compare.json" not in files:  # shipped like recorded.json: every file of site/ is
        log(f"chatlens: warning: {co.recorded_compare} is missing (python -m chatlens record): "
            "Base vs instruct shows nothing before both models are downloaded")
    for name in PYODIDE_CORE:
        files[f"pyodide/{name}"] = core / name
    for name in NOBLE_FILES:  # where site/js/store/sha256.mjs imports it from
        files[f"js/vendor/noble-hashes/{name}"] = modules / "@noble" / "hashes" / name

    wheel_urls = []
    for w in ensure_wheels(co, log):
        files[f"wheels/{w.name}"] = w
        wheel_urls.append(f"wheels/{w.name}")
    name, data = chatlens_wheel(co)
    files[f"wheels/{name}"] = data
    wheel_urls.append(f"wheels/{name}")

    previous = _read_json(out / BUILD_MANIFEST) if (out / BUILD_MANIFEST).exists() else {}
    if pyodide_dist:
        files.update(_self_hosted_files(Path(pyodide_dist), core_lock))
        self_hosted = True
    elif keep_self_hosted and previous.get("pyodide", {}).get("self_hosted"):
        kept = {f"pyodide/{n}": out / "pyodide" / n for n in _runtime_package_files(core_lock, RUNTIME_PACKAGES)}
        self_hosted = all(p.exists() for p in kept.values())
        if self_hosted:
            files.update(kept)
    else:
        self_hosted = False

    # What the worker's Python is made of: a memory snapshot of it (site/js/worker/python.mjs)
    # is only valid for the same bytes.
    python = hashlib.sha256()
    for rel in [f"pyodide/{n}" for n in PYODIDE_CORE] + wheel_urls:
        data = files[rel]
        python.update(data if isinstance(data, bytes) else Path(data).read_bytes())
    manifest = {
        "about": "Written by `python -m chatlens build`: what the site's worker loads. URLs are relative to the site.",
        "pyodide": {
            "version": version,
            "snapshot_id": python.hexdigest()[:16],
            "python": core_lock.get("info", {}).get("python"),
            "index": "pyodide/",
            # Where Pyodide's own packages (NumPy) come from when the page needs them.
            "packages": "pyodide/" if self_hosted else pyodide_cdn(version),
            "self_hosted": self_hosted,
        },
        "wheels": wheel_urls,
        "models": hub.for_page(),  # {"instruct": ..., "base": ...}: repo, revision, files, verified
        "settings": page_settings(),
        "protocol": protocol.describe(),  # the worker's requests and their arguments (chatlens.protocol)
    }
    reference = check_reference(co, data, log)
    files[CHECK_FILE] = (json.dumps(reference, separators=(",", ":")) + "\n").encode()
    manifest["check"] = check_manifest(reference, manifest["pyodide"]["snapshot_id"], gpu_fault)
    files[BUILD_MANIFEST] = (json.dumps(manifest, indent=1) + "\n").encode()
    files[SERVICE_WORKER] = service_worker(files, manifest["pyodide"]["packages"] if not self_hosted else None)
    changed = _sync(out, files)
    log(f"chatlens: site built in {out} ({changed} file{'s' if changed != 1 else ''} written)")
    return out


def check_reference(co: Checkout, wheel: bytes, log=print) -> dict:
    """The known-answer check's reference (chatlens.host.check.reference), computed once for this
    chatlens (its wheel's bytes), this host module and this NumPy, and cached in build/."""
    import numpy

    from . import check as host_check

    key = hashlib.sha256(wheel + Path(host_check.__file__).read_bytes() + numpy.__version__.encode()).hexdigest()[:16]
    cached = co.build / "cache" / "check" / f"{key}.json"
    if cached.exists():
        return _read_json(cached)
    log("chatlens: computing the GPU check's reference with NumPy ...")
    reference = host_check.reference()
    cached.parent.mkdir(parents=True, exist_ok=True)
    for old in cached.parent.glob("*.json"):
        old.unlink()
    cached.write_text(json.dumps(reference, separators=(",", ":")), encoding="utf-8")
    return reference


def check_manifest(reference: dict, snapshot_id: str, gpu_fault: bool) -> dict:
    """build.json's "check": where the reference is, and what keys a result the page keeps: the
    reference, the Python the page runs (its snapshot id: the wheels, so the GPU program's
    kernels) and the fault, if any (chatlens.gpu.fault: the page says it is a faulty test build)."""
    from .. import check
    from ..gpu import fault

    ref_id = check.reference_id(reference)
    return {"file": CHECK_FILE, "reference": ref_id, "tolerance": check.TOLERANCE,
            "key": hashlib.sha256(f"{ref_id} {snapshot_id} {gpu_fault}".encode()).hexdigest()[:16],
            "fault": fault.DESCRIPTION if gpu_fault else None}


def page_settings() -> dict:
    """build.json's "settings": chatlens.defaults' for the page, and the comparison's shape as Python
    computes it, so the page writes neither again: its two models' keys, in the order a comparison
    computes them (chatlens.protocol.MODELS), and the layouts each reads (chatlens.compare.LAYOUTS)."""
    from .. import compare
    from .bench import page_input

    return {**defaults.for_page(), "model_keys": list(protocol.MODELS), "layouts": list(compare.LAYOUTS),
            "bench": page_input()}


def service_worker(files: dict, packages: str | None) -> bytes:
    """site/sw.js with the build's precache list filled in: every file of the site (its path,
    sha256 and size) and the build's id, the hash of that list. The browser installs a service
    worker again whenever its bytes change, so a new build is noticed, cached beside the old one
    under its own id, and offered to the page; an unchanged build writes the same bytes."""
    entries = []
    for rel in sorted(files):
        if rel == SERVICE_WORKER:
            continue
        src = files[rel]
        data = src if isinstance(src, bytes) else Path(src).read_bytes()
        entries.append({"url": rel, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
    listing = json.dumps(entries, separators=(",", ":"), sort_keys=True)
    precache = {"build": hashlib.sha256(listing.encode()).hexdigest()[:16], "packages": packages, "files": entries}
    template = files[SERVICE_WORKER]
    text = (template if isinstance(template, bytes) else Path(template).read_bytes()).decode()
    if PRECACHE_MARK not in text:
        raise ChatlensError(f"site/{SERVICE_WORKER} lacks the {PRECACHE_MARK} the build fills in")
    return text.replace(PRECACHE_MARK, json.dumps(precache, separators=(",", ":"))).encode()


def _check_out(out: Path):
    """Refuse to clean a folder that is not a chatlens build (a typo in --out must not wipe it)."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / BUILD_MANIFEST).exists())):
        raise ChatlensError(f"{out} is not empty and holds no {BUILD_MANIFEST}: not overwriting it")


def _sync(out: Path, files: dict) -> int:
    """Make `out` hold exactly `files`, writing only what differs. Returns the number written."""
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for rel, src in files.items():
        dest = out / rel
        if isinstance(src, bytes):
            if dest.is_file() and dest.stat().st_size == len(src) and dest.read_bytes() == src:
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".part")
            tmp.write_bytes(src)
            os.replace(tmp, dest)
        else:
            if dest.resolve() == src.resolve():
                continue
            s = src.stat()
            if dest.is_file():
                d = dest.stat()
                if d.st_size == s.st_size and int(d.st_mtime) == int(s.st_mtime):
                    continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".part")
            shutil.copy2(src, tmp)
            os.replace(tmp, dest)
        written += 1
    keep = {Path(r) for r in files}
    for p in sorted(out.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        rel = p.relative_to(out)
        if p.is_dir():
            if not any(p.iterdir()):
                p.rmdir()
        elif rel not in keep:
            p.unlink()
    return written


def build(args) -> int:
    build_site(args.out, pyodide_dist=args.pyodide_dist, gpu_fault=args.gpu_fault)
    return 0


def _read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ChatlensError(f"cannot read {path}: {e}") from None
