"""`python -m chatlens serve`: the built site and the model mirror over HTTP, with the headers a
cross-origin isolated page, module workers, WebAssembly and Range requests need."""

import email.utils
import json
import re
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .build import BUILD_MANIFEST, Checkout, build_site
from .mirror import prepare_mirror
from ..errors import ChatlensError

MIME_TYPES = {
    ".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8", ".js": "text/javascript; charset=utf-8",
    ".json": "application/json", ".map": "application/json",
    ".wasm": "application/wasm", ".zip": "application/zip", ".whl": "application/zip",
    ".png": "image/png", ".svg": "image/svg+xml", ".ico": "image/x-icon",
    ".txt": "text/plain; charset=utf-8", ".md": "text/plain; charset=utf-8",
    ".gguf": "application/octet-stream", ".safetensors": "application/octet-stream",
}
# The site loads its own files only; fetches go to itself, the Hugging Face Hub (and the CDN its
# downloads redirect to) and the Pyodide CDN (NumPy); WebAssembly may compile; no inline script.
# site/index.html carries the same policy as a meta tag, for static hosting without this server
# (tests/test_site.py keeps them equal).
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self' 'wasm-unsafe-eval'",
    "worker-src 'self'",
    "connect-src 'self' https://huggingface.co https://*.huggingface.co https://*.hf.co https://cdn.jsdelivr.net",
    "img-src 'self' data:",
    "style-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
])
# frame-ancestors only works as a header (a meta tag cannot say it).
HEADER_POLICY = CONTENT_SECURITY_POLICY + "; frame-ancestors 'none'"
# Cross-origin isolation. The site needs none of it (a stop is a message between two pulls of a
# reply, not shared memory): it works on a static host that cannot send these headers, and the
# tests serve it both ways (SiteServer(isolated=False)). Sent here, they keep the page isolated
# from other origins' windows and resources.
ISOLATION_HEADERS = {
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
}
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": HEADER_POLICY,
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
        headers = {**ISOLATION_HEADERS, **SECURITY_HEADERS} if self.server.isolated else SECURITY_HEADERS
        for k, v in headers.items():
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
        try:
            mirrored, target = mirror.file_at(rel) if mirror is not None else (False, None)
            if not mirrored:
                if path.endswith("/") or not parts:
                    rel = f"{rel}/index.html" if rel else "index.html"
                target = self.server.root / rel
                if not target.resolve().is_relative_to(self.server.root):
                    target = None
            found = target is not None and target.is_file()
        except OSError:  # a name the file system refuses (too long, say): no such file is served
            found = False
        if not found:
            return self._fail(HTTPStatus.NOT_FOUND, f"not found: {path[:200]}", head)
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

    def __init__(self, root, host="127.0.0.1", port=0, mirror=None, quiet=True, isolated=True):
        """isolated False: no cross-origin isolation headers, as most static hosts serve."""
        self.root = Path(root).resolve()
        self.mirror = mirror
        self.quiet = quiet
        self.isolated = isolated
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
    co = Checkout.at()
    fault = getattr(args, "gpu_fault", False)
    out = co.build / "site-gpu-fault" if fault else co.default_out  # a faulty test build is never the default one
    if not args.no_build:
        build_site(out, keep_self_hosted=True, log=lambda m: print(m, file=sys.stderr, flush=True), gpu_fault=fault)
    elif not (out / BUILD_MANIFEST).exists():
        raise ChatlensError(f"{out} holds no build: run `python -m chatlens build` or drop --no-build")
    mirror = prepare_mirror(base_model=args.base_model)
    try:
        server = SiteServer(out, args.host, args.port, mirror=mirror, quiet=False)
    except OSError as e:
        raise ChatlensError(f"cannot listen on {args.host}:{args.port}: {e}") from None
    print(f"chatlens: serving {out} with the model mirror at {server.url}{mirror.base}", file=sys.stderr)
    if mirror.base_model is not None:
        print(f"chatlens: the base model at {server.url}{mirror.base_model.base}: {mirror.base_model.about}",
              file=sys.stderr)
    if fault:
        print("chatlens: this is a faulty test build (--gpu-fault): its GPU program computes wrong values on purpose",
              file=sys.stderr)
    print(f"chatlens: open {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
