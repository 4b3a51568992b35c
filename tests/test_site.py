"""The site's build and its local server, without a browser."""

import contextlib
import hashlib
import json
import os
import queue
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from chatlens import defaults, hub
from chatlens.errors import ChatlensError
from chatlens.host import build as site
from chatlens.host import fetch as fetch_module
from chatlens.host import mirror as mirrors
from chatlens.host import serve as server_module
from standin_base import mismatched_tokenizer, standin_base

ROOT = Path(__file__).resolve().parent.parent


def quiet(_msg):
    pass


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return site.build_site(tmp_path_factory.mktemp("site") / "out", log=quiet, root=ROOT)


def test_build_holds_everything_the_page_loads(built):
    manifest = json.loads((built / "build.json").read_text())
    for name in ("index.html", "app.css", "js/page/app.mjs", "js/page/api.mjs", "js/worker/worker.mjs", "js/views/reads.mjs",
                 "js/modes/recorded.mjs", "js/lesson/challenges.mjs", "js/page/source.mjs"):
        assert (built / name).is_file(), name
    for name in site.PYODIDE_CORE:
        assert (built / "pyodide" / name).is_file(), name
    assert manifest["pyodide"]["version"] == site.pyodide_version(site.Checkout.at(ROOT)) == "314.0.7"
    assert manifest["pyodide"]["index"] == "pyodide/"
    names = [Path(w).name for w in manifest["wheels"]]
    assert names == ["micropip-0.11.1-py3-none-any.whl", "jinja2-3.1.6-py3-none-any.whl",
                     f"markupsafe-{site.MARKUPSAFE_VERSION}-py3-none-any.whl", "chatlens-0.1.0-py3-none-any.whl"]
    for w in manifest["wheels"]:
        assert (built / w).is_file(), w
    # both models' pins, from their one definition (chatlens.hub)
    assert "model" not in manifest
    assert manifest["models"] == hub.for_page() and set(manifest["models"]) == {"instruct", "base"}
    instruct = manifest["models"]["instruct"]
    assert instruct["repo"] == "HuggingFaceTB/SmolLM2-135M-Instruct" and instruct["verified"] == hub.INSTRUCT.verified
    base = manifest["models"]["base"]
    assert base["repo"] == "HuggingFaceTB/SmolLM2-135M" and re.fullmatch(r"[0-9a-f]{40}", base["revision"])
    assert {f["name"] for f in base["files"]} == {f["name"] for f in instruct["files"]}
    assert all(re.fullmatch(r"[0-9a-f]{64}", f["sha256"]) and f["size"] > 0 for f in base["files"])
    # the two models read the same tokenizer file (chatlens.compare refuses any other)
    assert hub.BASE.file("tokenizer.json")["sha256"] == hub.INSTRUCT.file("tokenizer.json")["sha256"]
    assert all(isinstance(m["verified"], str) and m["verified"].endswith(".") for m in manifest["models"].values())
    pinned = {f["name"]: f.get("sha256") for f in instruct["files"]}
    assert pinned["model.safetensors"] == "5af571cbf074e6d21a03528d2330792e532ca608f24ac70a143f6b369968ab8c"
    assert pinned["tokenizer.json"] == "9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c"
    # the store's hash library, where site/js/store/sha256.mjs imports it from
    assert all((built / "js" / "vendor" / "noble-hashes" / n).is_file() for n in site.NOBLE_FILES)
    assert re.fullmatch(r"[0-9a-f]{40}", instruct["revision"])
    # Only NumPy comes from a CDN, at run time: the pinned version's.
    assert manifest["pyodide"]["packages"] == "https://cdn.jsdelivr.net/pyodide/v314.0.7/full/"
    assert manifest["pyodide"]["self_hosted"] is False
    checkout = site.Checkout.at(ROOT)
    for recorded in (checkout.recorded, checkout.recorded_compare):  # shipped as they are
        if recorded.exists():
            assert (built / recorded.name).read_bytes() == recorded.read_bytes()
    # the defaults, and the comparison's models and layouts as Python computes them: the page
    # writes none of them again
    from chatlens import check, compare, protocol
    from chatlens.host import bench, check as host_check

    assert manifest["settings"] == {**defaults.for_page(), "model_keys": list(protocol.MODELS), "layouts": list(compare.LAYOUTS),
                                    "bench": bench.page_input()}
    # the GPU's known-answer check: its reference beside build.json, as NumPy computes it, keyed
    assert manifest["check"]["file"] == "check.json" and manifest["check"]["fault"] is None
    reference = json.loads((built / "check.json").read_text())
    assert reference == json.loads(json.dumps(host_check.reference()))
    assert manifest["check"]["reference"] == check.reference_id(reference)
    assert manifest["settings"]["model_keys"] == ["instruct", "base"] and manifest["settings"]["layouts"] == ["plain", "template"]


# Ways a script could turn text into markup; the page inserts user and model text as text only.
HTML_SINKS = ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment",
              "srcdoc", "DOMParser", "parseHTMLUnsafe", "setHTMLUnsafe")


def test_pages_load_nothing_from_other_hosts_and_parse_no_html(built):
    """Scripts, styles and modules are local; the only absolute URLs in the code are the Hub
    (the model's last-resort source) and the model-source placeholder. No script parses HTML."""
    pages = list(built.glob("*.html")) + list(built.glob("*.css")) + list(built.glob("js/**/*.mjs"))
    assert len([p for p in pages if p.suffix == ".mjs"]) >= len(list((ROOT / "site").rglob("*.mjs")))
    for p in pages:
        text = p.read_text()
        # The CSP meta tag names what fetches may reach; it loads nothing (tested on its own below).
        text = re.sub(r'<meta http-equiv="Content-Security-Policy" content="[^"]*">', "", text)
        hosts = set(re.findall(r"https?://([^/\"'`\s)]+)", text))
        assert hosts <= {"huggingface.co"}, (p.name, hosts)
        found = [s for s in HTML_SINKS if s.lower() in text.lower()]
        assert not found, (p.name, found)


def test_the_page_takes_its_defaults_from_python(built):
    """The reply limit, the windows and the presets are defined once, in chatlens.defaults and
    chatlens.presets; the build writes them into build.json and the page builds its controls
    from there: no literal of them in its HTML or scripts."""
    settings = json.loads((built / "build.json").read_text())["settings"]
    assert settings["reply_limit"] == defaults.REPLY_LIMIT == 96  # the issue's number
    assert settings["compare_limit"] == defaults.COMPARE_LIMIT == 48  # the lesson's cap for the base model
    assert settings["compare_top_k"] == defaults.COMPARE_TOP_K
    assert settings["windows"] == [256, 512, 1024] and settings["default_window"] == 1024
    assert [p["name"] for p in settings["presets"]] == ["none", "pirate", "brief", "date", "custom"]
    numbers = {str(n) for n in [defaults.REPLY_LIMIT, *defaults.WINDOWS, defaults.DEFAULT_WINDOW]}
    # no page module writes these numbers again: they come from build.json (chatlens.defaults)
    pages = [built / "index.html", *(p for p in built.rglob("js/**/*.mjs") if not p.name.endswith(".gen.mjs"))]
    found = {p.name: [line for line in p.read_text().splitlines()
                      for n in numbers if re.search(rf"(?<![\w.#-]){n}(?![\w.-])", line)] for p in pages}
    assert {k: v for k, v in found.items() if v} == {}
    # nor the comparison's two models or two layouts, as a list: build.json carries Python's
    both = re.compile(r"""[\[(]\s*["'](instruct|base)["']\s*,\s*["'](instruct|base)["']|[\[(]\s*["'](plain|template)["']\s*,\s*["'](plain|template)["']""")
    written = {p.name: both.findall(p.read_text()) for p in pages}
    assert {k: v for k, v in written.items() if v} == {}
    assert settings["model_keys"] == ["instruct", "base"] and settings["layouts"] == ["plain", "template"]
    html = (built / "index.html").read_text()
    assert '<select id="window"></select>' in html and '<select id="preset"></select>' in html
    assert "Pirate" not in html


def test_second_build_reuses_everything_and_writes_nothing(built, monkeypatch):
    """The pinned packages and wheels are cached and the site's files are up to date: a second build runs neither
    npm nor pip, copies nothing and writes nothing."""
    messages = []
    monkeypatch.setattr(site.subprocess, "run", lambda cmd, **k: pytest.fail(f"the second build ran {cmd}"))
    monkeypatch.setattr(site.shutil, "copy2", lambda src, dst: pytest.fail(f"the second build copied {src}"))
    before = {p: p.stat().st_mtime_ns for p in built.rglob("*") if p.is_file()}
    site.build_site(built, log=messages.append, root=ROOT)
    assert any("(0 files written)" in m for m in messages), messages
    assert {p: p.stat().st_mtime_ns for p in built.rglob("*") if p.is_file()} == before


def test_build_removes_stale_files_and_refuses_foreign_folders(built, tmp_path):
    stale = built / "js" / "old.mjs"
    stale.write_text("// gone")
    site.build_site(built, log=quiet, root=ROOT)
    assert not stale.exists()

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(ChatlensError, match="not overwriting"):
        site.build_site(foreign, log=quiet, root=ROOT)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_chatlens_wheel_installs_and_imports(built, tmp_path):
    wheel = built / "wheels" / "chatlens-0.1.0-py3-none-any.whl"
    assert site.chatlens_wheel(site.Checkout.at(ROOT))[1] == wheel.read_bytes()  # reproducible
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "chatlens/chat.py" in names and "chatlens/worker.py" in names
    assert not [n for n in names if n.startswith("chatlens/host/")]  # the browser runs no host job
    assert "chatlens-0.1.0.dist-info/RECORD" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # pip checks the wheel's metadata and RECORD hashes when it installs it.
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                    "--disable-pip-version-check", "--target", str(target), str(wheel)], check=True)
    done = subprocess.run([sys.executable, "-I", "-c",
                           f"import sys; sys.path.insert(0, {str(target)!r}); import chatlens.chat, chatlens.source; "
                           "print(chatlens.__file__)"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith(str(target))


def test_markupsafe_wheel_is_pure(built):
    wheel = built / "wheels" / f"markupsafe-{site.MARKUPSAFE_VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        wheel_meta = z.read(f"markupsafe-{site.MARKUPSAFE_VERSION}.dist-info/WHEEL").decode()
    assert "markupsafe/_native.py" in names
    assert not [n for n in names if n.endswith((".so", ".pyd"))]
    assert "Root-Is-Purelib: true" in wheel_meta


def test_pyodide_dist_is_copied_in_for_self_hosting(built, tmp_path):
    lock = json.loads((site.Checkout.at(ROOT).build / "node_modules" / "pyodide" / "pyodide-lock.json").read_text())
    files = site._runtime_package_files(lock, site.RUNTIME_PACKAGES)
    assert any(f.startswith("numpy-") for f in files)
    dist = tmp_path / "full"
    dist.mkdir()
    (dist / "pyodide-lock.json").write_text(json.dumps(lock))
    for f in files:
        (dist / f).write_bytes(b"wheel " + f.encode())
    out = tmp_path / "selfhosted"
    shutil.copytree(built, out)

    site.build_site(out, pyodide_dist=dist, log=quiet, root=ROOT)
    manifest = json.loads((out / "build.json").read_text())
    assert manifest["pyodide"]["packages"] == "pyodide/" and manifest["pyodide"]["self_hosted"] is True
    for f in files:
        assert (out / "pyodide" / f).read_bytes() == b"wheel " + f.encode()

    site.build_site(out, keep_self_hosted=True, log=quiet, root=ROOT)  # what serve does: keep them
    assert json.loads((out / "build.json").read_text())["pyodide"]["self_hosted"] is True
    assert all((out / "pyodide" / f).exists() for f in files)

    site.build_site(out, log=quiet, root=ROOT)  # a plain build goes back to the CDN
    assert json.loads((out / "build.json").read_text())["pyodide"]["packages"].startswith("https://cdn.jsdelivr.net/")
    assert not any((out / "pyodide" / f).exists() for f in files)

    lock["info"] = {**lock["info"], "python": "3.0.0"}
    (dist / "pyodide-lock.json").write_text(json.dumps(lock))
    with pytest.raises(ChatlensError, match="Pyodide distribution for"):
        site.build_site(out, pyodide_dist=dist, log=quiet, root=ROOT)


# -- the server -----------------------------------------------------------------------------------
@pytest.mark.parametrize("header,size,expected", [
    (None, 10, None),
    ("bytes=0-0", 10, (0, 0)),
    ("bytes=2-", 10, (2, 9)),
    ("bytes=-3", 10, (7, 9)),
    ("bytes=-30", 10, (0, 9)),
    ("bytes=5-100", 10, (5, 9)),
    ("bytes=10-", 10, "unsatisfiable"),
    ("bytes=-0", 10, "unsatisfiable"),
    ("bytes=0-", 0, "unsatisfiable"),
    ("bytes=5-2", 10, None),
    ("bytes=0-1,4-5", 10, None),
    ("items=0-1", 10, None),
])
def test_parse_range(header, size, expected):
    assert server_module.parse_range(header, size) == expected


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("www")
    (root / "index.html").write_text("<!doctype html><title>t</title>")
    (root / "js").mkdir()
    (root / "js" / "a.mjs").write_text("export const a = 1;\n")
    (root / "x.wasm").write_bytes(b"\0asm\1\0\0\0")
    (root / "data.json").write_text("{}")
    models = tmp_path_factory.mktemp("hf")
    (models / "config.json").write_text('{"a": 1}')
    (models / "tokenizer.json").write_text("{}")
    gguf = tmp_path_factory.mktemp("gguf") / "m.gguf"
    gguf.write_bytes(bytes(range(256)) * 4)
    outside = root.parent / "secret.txt"
    outside.write_text("secret")
    mirror = mirrors.Mirror.of("org/model", "rev1", folder=models, gguf=gguf, sha256="ab" * 32, about="test")
    srv = server_module.SiteServer(root, mirror=mirror).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def fetch(url, headers=None, method="GET"):
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def test_server_isolation_headers_and_mime_types(server):
    for path, ctype in [("", "text/html"), ("js/a.mjs", "text/javascript"), ("x.wasm", "application/wasm"),
                        ("data.json", "application/json")]:
        status, headers, body = fetch(server.url + path)
        assert status == 200, path
        assert headers["Content-Type"].startswith(ctype), (path, headers["Content-Type"])
        assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
        assert headers["Cross-Origin-Embedder-Policy"] == "require-corp"
        assert headers["Cross-Origin-Resource-Policy"] == "same-origin"
        assert headers["Accept-Ranges"] == "bytes"
        assert headers["Content-Security-Policy"] == server_module.HEADER_POLICY
    status, headers, _ = fetch(server.url + "missing.js")
    assert status == 404 and headers["Cross-Origin-Embedder-Policy"] == "require-corp"


def test_server_range_requests(server):
    url = server.url + "models/org/model/resolve/rev1/m.gguf"
    status, headers, body = fetch(url)
    assert status == 200 and len(body) == 1024 and headers["Content-Length"] == "1024"
    status, headers, body = fetch(url, {"Range": "bytes=0-0"})
    assert status == 206 and body == b"\0" and headers["Content-Range"] == "bytes 0-0/1024"
    status, headers, body = fetch(url, {"Range": "bytes=1000-"})
    assert status == 206 and body == bytes(range(232, 256)) and headers["Content-Range"] == "bytes 1000-1023/1024"
    status, headers, body = fetch(url, {"Range": "bytes=-4"})
    assert status == 206 and body == bytes([252, 253, 254, 255])
    status, headers, body = fetch(url, {"Range": "bytes=2000-"})
    assert status == 416 and headers["Content-Range"] == "bytes */1024"
    status, headers, body = fetch(url, method="HEAD")
    assert status == 200 and headers["Content-Length"] == "1024" and body == b""


def test_server_mirror_and_manifest(server):
    status, headers, body = fetch(server.url + "models/manifest.json")
    assert status == 200 and headers["Content-Type"] == "application/json"
    m = json.loads(body)
    assert m["base"] == "models/org/model/resolve/rev1/" and m["hf"] is True and m["gguf"] == "m.gguf"
    assert m["files"] == {"config.json": 8, "m.gguf": 1024, "tokenizer.json": 2}
    # what the browser's model store checks: each file's sha256, and each 16 MiB chunk's
    assert m["chunk_size"] == 16 << 20
    gguf = bytes(range(256)) * 4
    assert m["digests"] == {
        "config.json": {"sha256": hashlib.sha256(b'{"a": 1}').hexdigest(), "chunks": [hashlib.sha256(b'{"a": 1}').hexdigest()]},
        "m.gguf": {"sha256": hashlib.sha256(gguf).hexdigest(), "chunks": [hashlib.sha256(gguf).hexdigest()]},
        "tokenizer.json": {"sha256": hashlib.sha256(b"{}").hexdigest(), "chunks": [hashlib.sha256(b"{}").hexdigest()]},
    }
    assert mirrors.file_digests(server.mirror.files["m.gguf"], chunk_size=1000)["chunks"] == [
        hashlib.sha256(gguf[:1000]).hexdigest(), hashlib.sha256(gguf[1000:]).hexdigest()]
    status, _, body = fetch(server.url + m["base"] + "config.json")
    assert status == 200 and json.loads(body) == {"a": 1}
    assert fetch(server.url + m["base"] + "nothing.json")[0] == 404


def test_server_stays_inside_its_folders(server):
    for path in ["../secret.txt", "%2e%2e/secret.txt", "js/../../secret.txt", "models/org/model/resolve/rev1/../../x"]:
        status, _, body = fetch(server.url + path)
        assert status in (400, 404), path
        assert b"secret" not in body


def test_a_name_too_long_for_the_file_system_is_not_found(server):
    """A 5,000-character path (a long ?model= the page tried as a same-origin URL): a plain 404,
    not a traceback and a dropped connection."""
    status, _, body = fetch(server.url + "models/" + "a" * 5000 + "/config.json")
    assert status == 404 and len(body) < 400


def test_server_not_modified(server):
    status, headers, _ = fetch(server.url + "js/a.mjs")
    status, _, body = fetch(server.url + "js/a.mjs", {"If-Modified-Since": headers["Last-Modified"]})
    assert status == 304 and body == b""


def test_server_is_quiet_about_dropped_connections(server, capfd, monkeypatch):
    """A browser closing a keep-alive connection with a reset prints no traceback; other
    errors still do."""
    import threading

    ended, handled = threading.Event(), server.process_request_thread

    def watched(request, client_address):  # each connection's thread, as the server starts it
        try:
            handled(request, client_address)
        finally:
            if client_address[:2] == mine[:2]:
                ended.set()
    monkeypatch.setattr(server, "process_request_thread", watched)
    sock = socket.create_connection((server.server_address[0], server.server_address[1]), timeout=10)
    mine = sock.getsockname()
    sock.sendall(b"GET /data.json HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    # SO_LINGER 0: close() sends a reset, which the handler's wait for the next request reads
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    assert ended.wait(60)  # the handler thread has read the reset, and its connection is done
    assert fetch(server.url + "data.json")[0] == 200  # the server still answers
    assert "Traceback" not in capfd.readouterr().err

    for exc, shown in [(ConnectionResetError(104, "reset"), False), (BrokenPipeError(32, "pipe"), False),
                       (ValueError("a real bug"), True)]:
        try:
            raise exc
        except OSError:
            server.handle_error(None, ("127.0.0.1", 1))
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
        err = capfd.readouterr().err
        assert ("Traceback" in err) == shown and ("a real bug" in err) == shown, (exc, err)


@contextlib.contextmanager
def serving(tmp_path, *args):
    """`python -m chatlens serve --port 0 ARGS` in the checkout, as a user runs it: yields its URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py"), "CHATLENS_HOME": str(fetch_module.home())}
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "chatlens", "serve", "--port", "0", *args], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)
    lines = queue.Queue()

    def read():  # a thread, so that waiting for the URL can time out even if serve prints nothing
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + 600
        url = None
        while url is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            url = m and m.group(1)
        assert url, f"serve printed no URL (exit code {proc.poll()}); its stderr:\n{err_path.read_text()[-4000:]}"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_serve_command_builds_mirrors_and_prints_its_url(tmp_path):
    """`python -m chatlens serve --port 0`: the README's main command, end to end (no browser).
    It runs in the checkout, builds into its build/site (serve has no --out) and mirrors the model
    from the real cache."""
    with serving(tmp_path) as url:
        status, headers, body = fetch(url)
        assert status == 200 and b"chatlens" in body
        assert headers["Cross-Origin-Embedder-Policy"] == "require-corp"
        m = json.loads(fetch(url + "models/manifest.json")[2])
        assert m["hf"] and m["gguf"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
        assert {"config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"} <= set(m["files"])
        status, headers, body = fetch(url + m["base"] + m["gguf"], {"Range": "bytes=0-3"})
        assert status == 206 and body == b"GGUF"
        assert headers["Content-Range"] == f"bytes 0-3/{m['files'][m['gguf']]}"
        assert m["base_model"] is None  # no --base-model


def test_serve_puts_a_base_model_beside_the_instruct(tmp_path):
    """`serve --base-model FOLDER`: the base model in the same-origin mirror under its own repo name,
    its manifest of the instruct's shape under "base_model". The Hub is unreachable here, so the
    base model is tests/standin_base.py's stand-in (the instruct's export with seeded noise), and
    the manifest says it is one."""
    base = standin_base()
    with serving(tmp_path, "--base-model", str(base)) as url:
        m = json.loads(fetch(url + "models/manifest.json")[2])
        b = m["base_model"]
        weights = (base / "model.safetensors").read_bytes()
        sha = hashlib.sha256(weights).hexdigest()
        # other bytes than the Hub's pinned file never carry the Hub's revision
        assert b["repo"] == hub.BASE.repo and b["revision"] == f"local-{sha[:12]}" != hub.BASE.revision
        assert b["base"] == f"models/{hub.BASE.repo}/resolve/{b['revision']}/" != m["base"]
        assert b["hf"] is True and b["gguf"] is None and b["sha256"] == sha and b["chunk_size"] == m["chunk_size"]
        assert b["stand_in"] is True and "stand-in" in b["about"] and base.name in b["about"]
        assert "base_model" not in b and "stand_in" not in m
        on_disk = {p.name: p.read_bytes() for p in base.iterdir()}
        assert b["files"] == {n: len(d) for n, d in on_disk.items()}
        for name, data in on_disk.items():
            chunks = [hashlib.sha256(data[i:i + b["chunk_size"]]).hexdigest() for i in range(0, len(data), b["chunk_size"])]
            assert b["digests"][name] == {"sha256": hashlib.sha256(data).hexdigest(), "chunks": chunks}, name
        status, headers, body = fetch(url + b["base"] + "model.safetensors", {"Range": "bytes=8-15"})
        assert status == 206 and body == weights[8:16]
        assert fetch(url + b["base"] + "tokenizer_config.json")[2] == on_disk["tokenizer_config.json"]
        assert fetch(url + m["base"] + "config.json")[0] == 200  # the instruct model is still there
        assert fetch(url + b["base"] + "missing.json")[0] == 404


def test_a_base_model_with_another_tokenizer_is_refused_by_the_mirror(tmp_path):
    """The comparison needs both models to read the same ids: serve's mirror refuses such a base
    model in a sentence (the command prints it), as it refuses a path that is not there."""
    with pytest.raises(ChatlensError, match=r"tokenizer differs from the instruct model's \(its merges\).*same ids"):
        mirrors.prepare_mirror(quiet=True, base_model=mismatched_tokenizer(tmp_path / "bad"))
    with pytest.raises(ChatlensError, match="no such model file or folder"):
        mirrors.prepare_mirror(quiet=True, base_model=tmp_path / "nothing")


def test_mirror_serves_a_base_model_under_its_own_folder(tmp_path):
    """The mirror's routing and manifest with a base model beside the instruct (small fake files)."""
    inst, base = tmp_path / "inst", tmp_path / "base"
    inst.mkdir()
    base.mkdir()
    (inst / "config.json").write_text("{}")
    (base / "config.json").write_text('{"base": 1}')
    mirror = mirrors.Mirror.of(hub.INSTRUCT.repo, "r1", folder=inst, about="instruct")
    assert mirror.manifest()["base_model"] is None and mirror.file_at("models/x") == (False, None)
    mirror.base_model = mirrors.Mirror.of(hub.BASE.repo, "r2", folder=base, about="base")
    mirror.base_model.stand_in = False
    m = mirror.manifest()
    assert m["base_model"]["base"] == "models/HuggingFaceTB/SmolLM2-135M/resolve/r2/"
    assert m["base_model"]["files"] == {"config.json": 11} and m["base_model"]["stand_in"] is False
    # "SmolLM2-135M-Instruct/..." starts with "SmolLM2-135M" but is not the base model's folder
    assert mirror.file_at(m["base"] + "config.json") == (True, inst / "config.json")
    assert mirror.file_at(m["base_model"]["base"] + "config.json") == (True, base / "config.json")
    assert mirror.file_at(m["base_model"]["base"] + "nothing") == (True, None)
    assert mirror.file_at("index.html") == (False, None)


def test_the_page_states_the_servers_content_security_policy(built):
    """serve sends the policy as a header; the page carries it as a meta tag for static hosts."""
    html = (built / "index.html").read_text()
    meta = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html)
    assert meta and meta.group(1) == server_module.CONTENT_SECURITY_POLICY
    assert server_module.HEADER_POLICY.startswith(server_module.CONTENT_SECURITY_POLICY)
    assert "unsafe-inline" not in server_module.HEADER_POLICY and "'unsafe-eval'" not in server_module.HEADER_POLICY
    assert "<script>" not in html and not re.search(r"\son[a-z]+=", html)  # no inline script or handler


def test_only_the_pinned_weights_are_named_as_the_hubs_base_model(tmp_path, monkeypatch):
    """A base model folder is served under the Hub's revision, and said to be the original, only
    when its model.safetensors has the sha256 chatlens.hub pins; any other bytes get a local name.
    (Checked with a pin set to these bytes: the real file cannot be downloaded here.)"""
    import dataclasses

    folder = tmp_path / "base"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    other = mirrors.BaseWeights.at(folder)
    assert not other.original and not other.stand_in and "not the Hub's HuggingFaceTB/SmolLM2-135M file" in other.about
    files = tuple({**f, "sha256": hashlib.sha256(b"weights").hexdigest()} if f["name"] == "model.safetensors" else f
                  for f in hub.BASE.files)
    monkeypatch.setattr(mirrors.hub, "BASE", dataclasses.replace(hub.BASE, files=files))
    pinned = mirrors.BaseWeights.at(folder)
    assert pinned.original and "the original HuggingFaceTB/SmolLM2-135M weights" in pinned.about
    (folder / "model.safetensors").write_bytes(b"weightz")  # one byte off
    mirrors._digests.clear()
    assert not mirrors.BaseWeights.at(folder).original
