"""A local HTTP server for tests that serves byte blobs, with faults chosen per path and request.

    with FaultyServer() as srv:                       # 127.0.0.1, a free port, serving from a thread
        srv.add("/m/model.bin", data)                 # a blob (bytes), by path
        srv.mount("/js/", Path("site/js"))            # a folder of static files
        srv.fault("/m/model.bin", cut_after=300_000)  # the next request for it breaks off
        ... srv.url + "m/model.bin" ...
        srv.requests("/m/model.bin")                  # what was asked and sent, request by request
        srv.wait_ended(req)                           # until one is answered, or the client hung up

Faults (each applies to the next `times` requests for its path, default 1; times=None: all):
    cut_after=N       close the connection after N body bytes (Content-Length promised the rest);
                      linger=S waits S seconds first (a stalled connection that then drops:
                      without it, a browser may drop bytes it received but had not yet read)
    wrong_byte_at=K   flip the byte at offset K of the file
    ignore_range      answer 200 with the whole body whatever Range asks
    status=S          answer S (500, 404, 503, ...) with a short text body
    no_length=M       no Content-Length: M is "chunked" (Transfer-Encoding) or "close" (the body
                      ends when the connection closes)
    delay=D           sleep D seconds before each block of `block` bytes (a slow server)
Every response allows cross-origin reads (Access-Control-Allow-Origin: *, Content-Range and
Content-Length exposed, Cross-Origin-Resource-Policy: cross-origin), so a page served from
another port reads Range responses the way the site reads the Hub. isolate=True adds COOP/COEP,
the headers the site itself is served with, for a server that serves test pages.
"""

import re
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from chatlens.host.serve import parse_range  # the site's own server reads Range headers the same way

CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Expose-Headers": "Content-Range, Content-Length, Accept-Ranges",
    "Cross-Origin-Resource-Policy": "cross-origin",
}
ISOLATION_HEADERS = {"Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp"}
MIME_TYPES = {".html": "text/html; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
              ".js": "text/javascript; charset=utf-8", ".json": "application/json", ".css": "text/css"}


@dataclass
class Fault:
    cut_after: int | None = None
    linger: float = 0.0
    wrong_byte_at: int | None = None
    ignore_range: bool = False
    status: int | None = None
    no_length: str | None = None  # "chunked" | "close"
    delay: float = 0.0
    block: int = 64 * 1024
    times: int | None = 1

    def __post_init__(self):
        if self.no_length not in (None, "chunked", "close"):
            raise ValueError(f"no_length is 'chunked' or 'close', not {self.no_length!r}")

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in vars(self).items()
                 if k not in ("times", "block") and v not in (None, False, 0.0)]
        return ", ".join(parts) or "none"


@dataclass
class Request:
    """One request as the server saw it; `sent` grows while the body is being written."""
    method: str
    path: str
    range: str | None
    status: int | None = None
    sent: int = 0  # body bytes written
    fault: str | None = None
    complete: bool = False  # the whole body was written
    hung_up: bool = False  # the client went away while the body was being written
    at: float = field(default_factory=time.monotonic)
    ended: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)  # answered, or given up


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "faulty"

    def log_message(self, fmt, *args):
        pass

    def end_headers(self):
        for k, v in {**CORS_HEADERS, **(ISOLATION_HEADERS if self.server.isolate else {})}.items():
            self.send_header(k, v)
        super().end_headers()

    def do_OPTIONS(self):
        # A CORS preflight (a Range the browser does not count as simple): allow it.
        self.server.record(Request("OPTIONS", unquote(urlsplit(self.path).path), self.headers.get("Range"), 204, complete=True))
        self.send_response(HTTPStatus.NO_CONTENT)
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "Range")
        self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self._respond(head=False)

    def do_HEAD(self):
        self._respond(head=True)

    def _respond(self, head):
        path = unquote(urlsplit(self.path).path)
        req = Request(self.command, path, self.headers.get("Range"))
        self.server.record(req)
        try:
            self._answer(req, path, head)
        finally:
            req.ended.set()

    def _answer(self, req, path, head):
        body, ctype = self.server.lookup(path)
        if body is None:
            return self._text(req, HTTPStatus.NOT_FOUND, f"not found: {path}", head)
        fault = self.server.take_fault(path)
        req.fault = fault.describe() if fault else None
        fault = fault or Fault()
        if fault.status:
            return self._text(req, fault.status, f"HTTP {fault.status} (an injected fault)", head)
        size = len(body)
        rng = None if fault.ignore_range else parse_range(req.range, size)
        if rng == "unsatisfiable":
            return self._text(req, HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, "range not satisfiable", head,
                              {"Content-Range": f"bytes */{size}"})
        start, end = rng if rng else (0, size - 1)
        data = bytearray(body[start:end + 1])
        if fault.wrong_byte_at is not None and start <= fault.wrong_byte_at <= end:
            data[fault.wrong_byte_at - start] ^= 0x5A
        req.status = int(HTTPStatus.PARTIAL_CONTENT if rng else HTTPStatus.OK)
        self.send_response(req.status)
        self.send_header("Content-Type", ctype)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Cache-Control", "no-store")
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        if fault.no_length == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        elif fault.no_length == "close":
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if head:
            req.complete = True
            return
        self._body(req, data, fault)

    def _body(self, req, data, fault):
        limit = len(data) if fault.cut_after is None else min(len(data), fault.cut_after)
        chunked = fault.no_length == "chunked"
        try:
            pos = 0
            while pos < limit:
                if fault.delay:
                    time.sleep(fault.delay)
                block = bytes(data[pos:min(limit, pos + fault.block)])
                self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
                self.wfile.flush()
                pos += len(block)
                req.sent = pos
            if limit < len(data):
                time.sleep(fault.linger)
                self._hang_up()
                return
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            req.complete = True
        except (BrokenPipeError, ConnectionResetError):
            req.hung_up = True
            self.close_connection = True  # the client went away (a cancelled download)

    def _hang_up(self):
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _text(self, req, status, text, head, extra=None):
        req.status = int(status)
        body = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)
            req.sent = len(body)
        req.complete = True


class FaultyServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, blobs=None, mounts=None, host="127.0.0.1", port=0, isolate=False):
        super().__init__((host, port), _Handler)
        self.isolate = isolate
        self._lock = threading.Lock()
        self._blobs = {}
        self._mounts = {}
        self._faults = {}
        self.log = []
        for path, data in (blobs or {}).items():
            self.add(path, data)
        for prefix, folder in (mounts or {}).items():
            self.mount(prefix, folder)
        self._thread = None

    # -- what it serves -------------------------------------------------------------------------
    def add(self, path, data, content_type="application/octet-stream"):
        with self._lock:
            self._blobs[_norm(path)] = (bytes(data), content_type)

    def mount(self, prefix, folder):
        prefix = _norm(prefix).rstrip("/") + "/"
        with self._lock:
            self._mounts[prefix] = Path(folder).resolve()

    def lookup(self, path):
        with self._lock:
            if path in self._blobs:
                return self._blobs[path]
            mounts = sorted(self._mounts.items(), key=lambda kv: -len(kv[0]))
        for prefix, folder in mounts:
            if path.startswith(prefix):
                target = (folder / path[len(prefix):]).resolve()
                if target.is_relative_to(folder) and target.is_file():
                    return target.read_bytes(), MIME_TYPES.get(target.suffix, "application/octet-stream")
        return None, None

    # -- faults ---------------------------------------------------------------------------------
    def fault(self, path, fault=None, **kw):
        """Queue a fault for the next request(s) for `path` (faults apply in the order queued)."""
        f = fault or Fault(**kw)
        with self._lock:
            self._faults.setdefault(_norm(path), []).append(f)
        return f

    def take_fault(self, path):
        with self._lock:
            queue = self._faults.get(path) or []
            if not queue:
                return None
            f = queue[0]
            if f.times is not None:
                f.times -= 1
                if f.times <= 0:
                    queue.pop(0)
            return f

    def clear(self):
        """Forget the faults and the log."""
        with self._lock:
            self._faults.clear()
            self.log.clear()

    # -- the log --------------------------------------------------------------------------------
    def record(self, req):
        with self._lock:
            self.log.append(req)

    def requests(self, path=None, method="GET"):
        with self._lock:
            return [r for r in self.log if (path is None or r.path == _norm(path)) and (method is None or r.method == method)]

    def sent(self, path=None):
        """Body bytes sent for `path` (all GETs), however the responses ended."""
        return sum(r.sent for r in self.requests(path))

    @staticmethod
    def wait_ended(req, timeout=30):
        """Until the server is done with `req`: its answer written, or given up (the client gone)."""
        if not req.ended.wait(timeout):
            raise TimeoutError(f"the server was still answering {req.method} {req.path} after {timeout} s")

    # -- running --------------------------------------------------------------------------------
    @property
    def url(self):
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    @property
    def origin(self):
        return self.url.rstrip("/")

    def start(self):
        self._thread = threading.Thread(target=self.serve_forever, name="faulty-server", daemon=True)
        self._thread.start()
        return self

    def close(self):
        if self._thread:
            self.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self.server_close()

    def handle_error(self, request, client_address):
        """Clients hanging up (cancelled downloads, cut connections) are what these tests cause;
        anything else is a bug here, and is printed."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


def _norm(path):
    return "/" + str(path).lstrip("/")
