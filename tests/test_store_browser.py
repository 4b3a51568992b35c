"""The browser-side model store (site/js/store/) in Debian's Chromium, against tests/faulty_server.py.

Two local servers: one serves the test page (tests/store/page.html), the store's modules and
@noble/hashes with the site's cross-origin isolation headers; the other serves the model files,
on another port (cross-origin, as the Hub is), with faults injected per request. Each test gets a
fresh browser context (an empty IndexedDB), files of a few MB, and 256 KiB chunks. The pure
logic and the downloader's corner cases are covered faster by `node --test tests/store/`.
"""

import hashlib
import random
from pathlib import Path

import pytest

from faulty_server import FaultyServer
from webapp import REDUCED_MOTION, WAIT_MS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
NOBLE = ROOT / "build" / "node_modules" / "@noble" / "hashes"
CS = 256 * 1024  # chunk size in these tests
WEIGHTS = 3 * 1024 * 1024 + 12345  # 13 chunks, the last one short


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chunk_hashes(data: bytes, cs: int = CS) -> list:
    return [sha(data[i:i + cs]) for i in range(0, len(data), cs)]


@pytest.fixture(scope="module")
def pages():
    if not (NOBLE / "sha2.js").exists():
        pytest.fail(f"{NOBLE} is missing: the store hashes with @noble/hashes (npm ci --prefix build)")
    srv = FaultyServer(mounts={"/": ROOT / "tests" / "store", "/js/store/": ROOT / "site" / "js" / "store",
                               "/js/vendor/noble-hashes/": NOBLE}, isolate=True).start()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def blobs():
    srv = FaultyServer().start()
    yield srv
    srv.close()


class Model:
    """A small Hugging Face folder on the blob server: three text files and the weights."""

    def __init__(self, blobs, name, seed):
        rnd = random.Random(seed)
        self.base = f"/models/org/{name}/resolve/rev1/"
        self.url = blobs.url.rstrip("/") + self.base
        self.id = f"hf:org/{name}@rev1"
        self.data = {
            "config.json": b'{"model_type": "llama"}',
            "tokenizer.json": rnd.randbytes(300_000),
            "tokenizer_config.json": b'{"chat_template": "{{ messages }}"}',
            "model.safetensors": rnd.randbytes(WEIGHTS),
        }
        for n, d in self.data.items():
            blobs.add(self.base + n, d)

    def path(self, name="model.safetensors"):
        return self.base + name

    def source(self, sizes=True, hashes=True, chunks=False):
        files = []
        for n, d in self.data.items():
            f = {"name": n}
            if sizes:
                f["size"] = len(d)
            if hashes and n in ("tokenizer.json", "model.safetensors"):  # the files the Hub pins have a hash
                f["sha256"] = sha(d)
            if chunks and n == "model.safetensors":
                f.update(chunk_size=CS, chunks=chunk_hashes(d))
            files.append(f)
        return {"kind": "hf", "url": self.url, "label": "tiny test model", "files": files}

    def mirror_source(self):
        """The source as source.mjs makes it for a mirror: the manifest, in the shape the store
        asks Mirror.manifest() to take (sizes, plus sha256 and chunk hashes per file)."""
        manifest = {
            "repo": self.id[3:].split("@")[0], "revision": "rev1", "base": self.base.lstrip("/"), "hf": True,
            "gguf": None, "sha256": None, "about": "a test mirror",
            "files": {n: len(d) for n, d in sorted(self.data.items())},
            "chunk_size": CS,
            "digests": {n: {"sha256": sha(d), "chunks": chunk_hashes(d)} for n, d in sorted(self.data.items())},
        }
        return {"kind": "hf", "url": self.url, "label": "a test mirror", "origin": "mirror", "manifest": manifest}


class StorePage:
    """The test page in a fresh browser context, with the store opened (window.t)."""

    def __init__(self, browser, pages):
        self.browser = browser
        self.pages = pages
        self.context = browser.new_context(reduced_motion=REDUCED_MOTION)
        self.context.set_default_timeout(WAIT_MS)
        self.errors = []
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.load()

    def load(self, **options):
        if self.page.url.startswith(self.pages.url):
            self.page.reload()
        else:
            self.page.goto(self.pages.url + "page.html")
        self.page.wait_for_function("() => document.getElementById('state').textContent === 'ready'")
        self.open(**options)

    def open(self, **options):
        self.js("o => t.open(o)", {"chunkSize": CS, **options})

    def js(self, code, arg=None):
        return self.page.evaluate(code, arg)

    def download(self, source, **kw):
        return self.js("([s, o]) => t.download(s, o)", [source, kw])

    def read(self, source, name, **kw):
        return self.js("([s, n, o]) => t.read(s, n, o)", [source, name, kw])

    def status(self, source):
        return self.js("s => t.status(s)", source)

    def file(self, source, name="model.safetensors"):
        return next(f for f in self.status(source)["files"] if f["name"] == name)

    def cdp(self, method, params):
        return self.context.new_cdp_session(self.page).send(method, params)

    def grant_durable_storage(self):
        # Headless Chromium refuses persist() unless granted; the grant must name this context.
        ctx = self.cdp("Target.getTargetInfo", {})["targetInfo"]["browserContextId"]
        self.browser.new_browser_cdp_session().send("Browser.grantPermissions", {
            "origin": self.pages.origin, "permissions": ["durableStorage"], "browserContextId": ctx})

    def close(self):
        self.context.close()


@pytest.fixture
def store(browser, pages, blobs):
    blobs.clear()
    s = StorePage(browser, pages)
    yield s
    assert s.errors == []
    s.close()


def ranges(blobs, path):
    return [(r.range, r.status) for r in blobs.requests(path)]


# -- the layers --------------------------------------------------------------------------------------
def test_db_layer_keeps_its_contract(store):
    """db.mjs passes the checks that tests/store/memdb.mjs passes in node (db_contract.mjs)."""
    got = store.js("t.contract()")
    assert got["failures"] == [] and got["n"] > 20


def test_full_download_reports_progress_and_ends_complete(store, blobs):
    m = Model(blobs, "full", 1)
    src = m.source()
    # Opening the store, listing and asking for status fetch nothing.
    assert store.js("t.list()") == []
    assert store.status(src)["complete"] is False
    assert blobs.requests(method=None) == []

    blobs.fault(m.path(), delay=0.005, block=64 * 1024)  # a pace at which progress has something to show
    got = store.download(src)
    assert got["ok"], got
    s = got["summary"]
    total = sum(len(d) for d in m.data.values())
    assert (s["id"], s["complete"], s["bytes"], s["total"]) == (m.id, True, total, total)
    files = {f["name"]: f for f in s["files"]}
    assert files["model.safetensors"]["verified"] and files["tokenizer.json"]["verified"]
    assert files["config.json"]["check"] == "not verified against a published value (hashed on arrival)"
    assert s["verified"] is False  # config.json has no published hash

    events = got["events"]
    weights = [e for e in events if e["phase"] == "download" and e["file"]["name"] == "model.safetensors"]
    assert len(weights) >= 5
    assert all(a["file"]["done"] <= b["file"]["done"] for a, b in zip(weights, weights[1:]))
    assert all(e["file"]["total"] == WEIGHTS for e in weights)
    assert any(e["file"]["speed"] and e["file"]["speed"] > 0 and e["file"]["eta"] is not None for e in weights)
    assert all(0 <= e["overall"]["percent"] <= 100 for e in events)
    last = events[-1]
    assert (last["phase"], last["overall"]["done"], last["overall"]["total"], last["overall"]["percent"]) == ("done", total, total, 100)
    # one request a file, each sent once in full
    for n, d in m.data.items():
        assert [(r.range, r.status, r.sent) for r in blobs.requests(m.path(n))] == [(None, 200, len(d))], n

    listed = store.js("t.list()")
    assert [(x["id"], x["complete"], x["bytes"]) for x in listed] == [(m.id, True, total)]
    assert listed[0]["stored_at"] and listed[0]["source"]["url"] == m.url


def test_after_a_reload_nothing_is_fetched_and_the_bytes_read_back(store, blobs):
    m = Model(blobs, "reload", 2)
    src = m.source(chunks=True)
    assert store.download(src)["ok"]
    blobs.clear()
    store.load()
    got = store.download(src)
    assert got["ok"] and got["summary"]["complete"] and got["summary"]["verified"] is False
    assert blobs.requests(method=None) == [], "a reload requested a file again"

    w = m.data["model.safetensors"]
    whole = store.read(src, "model.safetensors")
    assert whole == {"ok": True, "sha256": sha(w), "length": len(w), "told": []}
    for start, end in [(0, 1), (CS - 3, CS + 3), (5 * CS + 17, 9 * CS + 1), (len(w) - 100, len(w))]:
        part = store.read(src, "model.safetensors", start=start, end=end)
        assert part["ok"] and part["sha256"] == sha(w[start:end]), (start, end)
    assert store.read(m.id, "config.json")["sha256"] == sha(m.data["config.json"])

    # The same from a module worker, where the chatlens worker will read weights.
    start, end = 2 * CS - 10, 4 * CS + 10
    inw = store.js("([s, a, b]) => t.inWorker(s, 'model.safetensors', a, b)", [src, start, end])
    assert inw["ok"], inw
    assert inw["sha256"] == sha(w[start:end]) and inw["models"] == [m.id]
    assert inw["pieces"] == [[1, start, 10], [2, 2 * CS, CS], [3, 3 * CS, CS], [4, 4 * CS, 10]]
    assert inw["persist"] is None  # only a page can ask for persistent storage
    assert blobs.requests(method=None) == []


def test_persistent_storage_is_asked_for(store, blobs):
    assert store.js("t.estimate()")["persisted"] is False
    store.grant_durable_storage()
    m = Model(blobs, "persist", 3)
    assert store.download(m.source())["ok"]
    assert store.js("t.estimate()")["persisted"] is True


# -- faults ------------------------------------------------------------------------------------------
def test_a_cut_download_resumes_from_the_last_whole_chunk(store, blobs):
    m = Model(blobs, "cut", 4)
    cut = 4 * CS + 50_000
    blobs.fault(m.path(), cut_after=cut, linger=0.3)
    got = store.download(m.source())
    assert got["ok"], got
    assert ranges(blobs, m.path()) == [(None, 200), (f"bytes={4 * CS}-", 206)]
    # about one file's bytes in all, not two: only the part chunk before the cut came twice
    assert blobs.sent(m.path()) == WEIGHTS + (cut - 4 * CS)
    assert store.read(m.source(), "model.safetensors")["sha256"] == sha(m.data["model.safetensors"])


def test_a_download_cut_before_a_reload_resumes_after_it(store, blobs):
    m = Model(blobs, "cutreload", 5)
    store.open(retries=0)
    # stalled, then dropped: an abrupt cut lets the browser drop bytes it had not read yet (on a
    # loaded machine, all of them), and this test is about what the store kept, after a reload
    blobs.fault(m.path(), cut_after=7 * CS + 1, linger=0.3)
    got = store.download(m.source())
    assert not got["ok"] and got["error"]["name"] == "NetworkError"
    f = store.file(m.source())
    assert f["state"] == "partial" and f["complete"] is False
    kept = f["stored"]
    assert kept % CS == 0 and 0 < kept <= 7 * CS, kept
    assert got["error"]["message"].startswith(f"{m.url}model.safetensors: the download broke off at byte {kept} ")

    store.load()
    blobs.clear()
    got = store.download(m.source())
    assert got["ok"] and got["summary"]["complete"]
    assert ranges(blobs, m.path()) == [(f"bytes={kept}-", 206)]
    assert blobs.sent(m.path()) == WEIGHTS - kept
    assert {r.path for r in blobs.requests()} == {m.path()}, "the files already complete were not fetched again"
    assert any(e["phase"] == "verify" for e in got["events"]), "the stored part was checked before resuming"
    assert store.read(m.source(), "model.safetensors")["sha256"] == sha(m.data["model.safetensors"])


def test_a_server_that_ignores_range_restarts_the_file_cleanly(store, blobs):
    m = Model(blobs, "norange", 6)
    blobs.fault(m.path(), cut_after=3 * CS + 5, linger=0.3)
    blobs.fault(m.path(), ignore_range=True)
    got = store.download(m.source(chunks=True))
    assert got["ok"], got
    assert ranges(blobs, m.path()) == [(None, 200), (f"bytes={3 * CS}-", 200)]
    f = store.file(m.source(chunks=True))
    assert (f["complete"], f["verified"], f["stored"]) == (True, True, WEIGHTS)
    assert store.read(m.source(), "model.safetensors")["sha256"] == sha(m.data["model.safetensors"])


def test_a_wrong_byte_is_found_by_its_chunk_hash_and_that_chunk_fetched_again(store, blobs):
    """With a mirror's manifest (every file's sha256 and chunk hashes): verified end to end."""
    m = Model(blobs, "wrongchunk", 7)
    src = m.mirror_source()
    blobs.fault(m.path(), wrong_byte_at=9 * CS + 123)
    got = store.download(src)
    assert got["ok"], got
    assert ranges(blobs, m.path()) == [(None, 200), (f"bytes={9 * CS}-", 206)]
    s = got["summary"]
    assert (s["id"], s["complete"], s["verified"]) == (m.id, True, True)
    assert [f["name"] for f in s["files"]] == ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]
    assert store.read(src, "model.safetensors")["sha256"] == sha(m.data["model.safetensors"])


def test_a_wrong_byte_is_found_by_the_file_hash_and_the_file_fetched_again(store, blobs):
    m = Model(blobs, "wrongfile", 8)
    blobs.fault(m.path(), wrong_byte_at=12345)
    got = store.download(m.source())
    assert got["ok"], got
    assert ranges(blobs, m.path()) == [(None, 200), (None, 200)]
    assert store.read(m.source(), "model.safetensors")["sha256"] == sha(m.data["model.safetensors"])


def test_a_chunk_damaged_in_the_store_is_found_on_read_and_only_it_refetched(store, blobs):
    m = Model(blobs, "damaged", 9)
    src = m.source()
    assert store.download(src)["ok"]
    assert store.js("([m, n, i]) => t.corrupt(m, n, i, 1000)", [m.id, "model.safetensors", 5])
    blobs.clear()
    w = m.data["model.safetensors"]
    got = store.read(src, "model.safetensors", start=4 * CS, end=7 * CS)
    assert got == {"ok": True, "sha256": sha(w[4 * CS:7 * CS]), "length": 3 * CS, "told": [5]}
    assert [(r.range, r.status, r.sent) for r in blobs.requests(method=None)] == [(f"bytes={5 * CS}-{6 * CS - 1}", 206, CS)]
    assert store.status(src)["complete"] is True

    # Told and not repaired: the model shows incomplete until the next download fetches the chunk.
    assert store.js("([m, n, i]) => t.corrupt(m, n, i)", [m.id, "model.safetensors", 0])
    got = store.read(src, "model.safetensors", repair=False)
    assert not got["ok"] and got["error"]["name"] == "CorruptChunkError" and got["error"]["index"] == 0
    assert store.status(src)["complete"] is False
    blobs.clear()
    assert store.download(src)["ok"]
    assert ranges(blobs, m.path()) == [(f"bytes=0-{CS - 1}", 206)]
    assert store.read(src, "model.safetensors")["sha256"] == sha(w)


def test_delete_frees_the_space(store, blobs):
    a, b = Model(blobs, "del-a", 10), Model(blobs, "del-b", 11)
    assert store.download(a.source())["ok"] and store.download(b.source())["ok"]
    before = store.js("t.estimate()")["usage"]
    n = store.js("t.chunkRecords()")
    assert store.js("id => t.delete(id)", a.id) is True
    assert [x["id"] for x in store.js("t.list()")] == [b.id]
    assert store.js("t.chunkRecords()") < n
    after = store.js("t.estimate()")["usage"]
    assert before - after >= WEIGHTS, (before, after)
    store.js("t.deleteAll()")
    assert store.js("t.list()") == [] and store.js("t.chunkRecords()") == 0
    assert store.js("t.estimate()")["usage"] < after - WEIGHTS


def test_a_full_disk_gives_a_clear_error_and_nothing_complete(store, blobs):
    m = Model(blobs, "quota", 12)
    origin = store.pages.origin
    usage = store.js("t.estimate()")["usage"]
    store.cdp("Storage.overrideQuotaForOrigin", {"origin": origin, "quotaSize": usage + 1_500_000})
    try:
        got = store.download(m.source())
    finally:
        store.cdp("Storage.overrideQuotaForOrigin", {"origin": origin})  # no size: the override is gone
    assert not got["ok"]
    e = got["error"]
    assert e["name"] == "QuotaError", e
    assert e["message"].startswith("Not enough storage to keep tiny test model: it needs ")
    assert "the model store holds" in e["message"] and "Delete stored models you no longer need" in e["message"]
    assert 0 < e["stored"] < 1_500_000 + CS and e["needed"] > 0 and e["quota"] > 0 and e["usage"] > 0
    total = sum(len(d) for d in m.data.values())
    assert e["stored"] + e["needed"] <= total + CS
    s = store.status(m.source())
    assert s["complete"] is False and [x["complete"] for x in store.js("t.list()")] == [False]
    assert store.file(m.source())["state"] == "partial"
    assert store.read(m.source(), "model.safetensors")["error"]["name"] == "NotStoredError"

    blobs.clear()
    got = store.download(m.source())
    assert got["ok"] and got["summary"]["complete"]
    assert ranges(blobs, m.path())[0][0].startswith("bytes="), "resumed after the quota error"


def test_abort_stops_at_once_and_leaves_the_model_incomplete(store, blobs):
    m = Model(blobs, "abort", 13)
    blobs.fault(m.path(), delay=0.03, block=32 * 1024)  # about 3 s for the weights
    got = store.download(m.source(), abortAtBytes=2 * CS, file="model.safetensors")
    assert not got["ok"] and got["error"]["name"] == "AbortError"
    (req,) = blobs.requests(m.path())
    assert not req.complete, "rejected while the body was still coming, not once it had all come"
    weights = [e["file"]["done"] for e in got["events"] if e["file"] and e["file"]["name"] == "model.safetensors"]
    aborted = next(d for d in weights if d >= 2 * CS)
    assert max(weights) == aborted, "no byte was counted after the abort"
    blobs.wait_ended(req)  # the server sees the hang-up at its next write
    assert req.hung_up and not req.complete and req.sent < WEIGHTS // 2
    f = store.file(m.source())
    assert f["complete"] is False and f["state"] == "partial"
    assert store.status(m.source())["complete"] is False

    blobs.clear()
    got = store.download(m.source())
    assert got["ok"] and got["summary"]["complete"]
    assert ranges(blobs, m.path())[0][0].startswith("bytes=")


def test_http_500_names_the_url(store, blobs):
    m = Model(blobs, "500", 14)
    store.open(retries=1)
    blobs.fault(m.path(), status=500, times=None)
    got = store.download(m.source())
    assert not got["ok"]
    assert got["error"]["name"] == "HttpError" and got["error"]["status"] == 500
    assert got["error"]["message"].startswith(f"{m.url}model.safetensors: HTTP 500"), got["error"]["message"]
    assert len(blobs.requests(m.path())) == 2  # retried once
    assert store.status(m.source())["complete"] is False


@pytest.mark.parametrize("mode", ["chunked", "close"])
def test_no_content_length_still_gives_bytes_and_speed(store, blobs, mode):
    m = Model(blobs, f"nolength-{mode}", 15)
    blobs.fault(m.path(), no_length=mode, delay=0.005, block=64 * 1024)
    src = m.source(sizes=False, hashes=False)
    got = store.download(src)
    assert got["ok"], got
    weights = [e for e in got["events"] if e["phase"] == "download" and e["file"]["name"] == "model.safetensors"]
    moving = [e for e in weights if 0 < e["file"]["done"] < WEIGHTS]
    assert len(moving) >= 3
    assert all(e["file"]["total"] is None and e["file"]["percent"] is None and e["file"]["eta"] is None for e in moving)
    assert all(e["overall"]["total"] is None for e in moving)
    assert all(e["file"]["speed"] > 0 for e in moving[1:])  # (the first bytes alone have no rate)
    f = store.file(src)
    assert (f["complete"], f["size"], f["verified"]) == (True, WEIGHTS, False)
    assert store.read(src, "model.safetensors")["sha256"] == sha(m.data["model.safetensors"])


# -- the fault server itself -----------------------------------------------------------------------
def test_faulty_server_faults_and_log():
    import http.client
    import urllib.request

    data = bytes(range(256)) * 1000
    with FaultyServer({"/a.bin": data}) as srv:
        def get(headers=None):
            with urllib.request.urlopen(urllib.request.Request(srv.url + "a.bin", headers=headers or {})) as r:
                return r.status, dict(r.headers), r.read()

        status, h, body = get({"Range": "bytes=10-19"})
        assert (status, h["Content-Range"], body) == (206, "bytes 10-19/256000", data[10:20])
        assert h["Access-Control-Allow-Origin"] == "*" and "Content-Range" in h["Access-Control-Expose-Headers"]
        srv.fault("/a.bin", ignore_range=True)
        assert get({"Range": "bytes=10-"})[0] == 200
        srv.fault("/a.bin", wrong_byte_at=7, no_length="chunked")
        status, h, body = get()
        assert "Content-Length" not in h and h["Transfer-Encoding"] == "chunked"
        assert body[7] == data[7] ^ 0x5A and body[:7] == data[:7] and body[8:] == data[8:]
        srv.fault("/a.bin", no_length="close")
        status, h, body = get()
        assert "Content-Length" not in h and body == data
        srv.fault("/a.bin", status=503, times=2)
        for _ in range(2):
            with pytest.raises(urllib.error.HTTPError):
                get()
        assert get()[0] == 200
        srv.fault("/a.bin", cut_after=1000)
        conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=10)
        conn.request("GET", "/a.bin")
        with pytest.raises(http.client.IncompleteRead):
            conn.getresponse().read()
        log = [(r.range, r.status, r.sent, r.complete) for r in srv.requests("/a.bin")]
        assert log == [("bytes=10-19", 206, 10, True), ("bytes=10-", 200, 256000, True), (None, 200, 256000, True),
                       (None, 200, 256000, True), (None, 503, 29, True), (None, 503, 29, True),
                       (None, 200, 256000, True), (None, 200, 1000, False)]
        assert srv.sent("/a.bin") == sum(x[2] for x in log)


# -- the page's two models -----------------------------------------------------------------------
def test_the_base_model_is_stored_beside_the_instruct_only_when_asked(browser, server, python_snapshot):
    """The model box offers the base model with its size; a cancelled download leaves it
    incomplete (resumed, never used), the next one completes it; Manage downloads says which model
    and revision it is and how it was verified; deleting the instruct leaves it, and it is deleted
    on its own. The base here is a stand-in: a tiny random model with SmolLM2's tokenizer, served
    by the mirror as `serve --base-model FOLDER` serves one (host/mirror.py's base_mirror)."""
    from chatlens.host.mirror import base_mirror
    from tiny_model import write_tiny_model
    from webapp import SHOTS, App

    tokenizers = server.mirror.files["config.json"].parent
    write_tiny_model(server.root / "tiny-two" / "instruct", tokenizers, seed=7)
    folder = write_tiny_model(server.root / "tiny-two" / "base", tokenizers, seed=8)
    (folder / "README.md").write_text("# A stand-in for SmolLM2-135M: a tiny random model (test_store_browser)\n")
    base = base_mirror(folder)
    entry = base.manifest()
    base_id = f"hf:HuggingFaceTB/SmolLM2-135M@{base.revision}"
    kept = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]
    assert base.stand_in and set(entry["files"]) == {*kept, "README.md"}
    a = App(browser, server, snapshot=python_snapshot)
    server.mirror.base_model = base  # as `serve --base-model FOLDER` does; put back below
    try:
        page = a.open(f"?model={server.url}tiny-two/instruct/")
        page.click("#base-model summary")
        page.wait_for_selector("#download-base")
        about = page.text_content("#about-base")
        # named from what its files are: a stand-in, never "SmolLM2-135M, the base model" (issue 32.2)
        assert "a stand-in for the base model, not SmolLM2-135M's weights" in about and "SmolLM2-135M, the base model" not in about
        assert "only if you ask" in about and "this site's mirror" in about
        assert "a stand-in for HuggingFaceTB/SmolLM2-135M (not its weights)" in about
        total = sum(entry["files"][n] for n in kept)
        size = page.evaluate("n => import('./js/store/errors.mjs').then((m) => m.formatBytes(n))", total)
        assert page.text_content("#download-base") == f"Download the base model ({size})" and size in about
        assert not [u for u in a.urls() if "/tiny-two/base/" in u], "the base was fetched before it was asked for"

        # cancelled part way: stored in part, not complete, so nothing reads it
        got = page.evaluate("""async () => {
            const stop = new AbortController();
            const error = await chatlens.downloadModel({model: "base", signal: stop.signal, onProgress: (p) => {
                if (p.file?.name === "tokenizer.json" && p.file.done > 0) stop.abort();
            }}).then(() => null, (e) => e.name);
            return {error, base: await chatlens.downloads.base(), stored: await chatlens.storedModels()};
        }""")
        assert got["error"] == "AbortError"
        status = got["base"]["status"]
        assert status["id"] == base_id and not status["complete"] and 0 < status["bytes"] < status["total"]
        assert [(s["id"], s["complete"], s["source"]["model"]) for s in got["stored"]] == [(base_id, False, "base")]

        page.reload()
        a.wait_ready()
        page.click("#base-model summary")
        assert "the download goes on from there" in page.text_content("#base-partial")
        box = lambda name: page.locator("#model-box").screenshot(path=str(SHOTS / f"{name}.png"))  # noqa: E731
        SHOTS.mkdir(parents=True, exist_ok=True)
        box("base-model-partial")
        before = len(a.requests)
        page.click("#download-base")
        page.wait_for_selector("#base-stored", timeout=120_000)
        again = [r.url for r in a.requests[before:] if "/tiny-two/base/" in r.url]
        assert not any(u.endswith("/config.json") for u in again), again  # stored whole before: not fetched again
        assert "a stand-in for the base model, not SmolLM2-135M's weights" in page.text_content("#base-stored")

        # the instruct beside it: two ids, two rows, each saying which it is
        page.evaluate("chatlens.downloads.downloadModel()")
        stored = {s["id"]: s for s in page.evaluate("chatlens.storedModels()")}
        assert len(stored) == 2 and stored[base_id]["complete"] and stored[base_id]["verified"]
        assert stored[base_id]["source"]["model"] == "base"
        (instruct_id,) = [i for i in stored if i != base_id]
        page.reload()  # the instruct is read from the store now, and loaded
        a.wait_ready()
        page.click("#manage summary")
        row = page.wait_for_selector(f'#manage-body tr[data-model="{base_id}"] .which')
        which = row.text_content()
        assert "the base model's stand-in (not SmolLM2-135M's weights)" in which and f"revision {base.revision}" in which
        assert "this site's mirror" in which
        # the box drawn once the instruct's weights are in: while they load, its lines change (and
        # wrap anew on a phone), and a screenshot waits for a box that stays still
        page.wait_for_function("() => chatlens.model?.backend", timeout=300_000)
        page.click("#base-model summary")
        box("base-model-stored-1400")
        page.set_viewport_size({"width": 390, "height": 844})
        box("base-model-stored-390")
        page.set_viewport_size({"width": 1400, "height": 1000})
        assert not [u for u in a.urls() if u.endswith("/README.md")]  # in the mirror, not among the files kept

        # deleting the instruct (loaded: the page starts again without it) leaves the base whole
        with page.expect_navigation():
            page.evaluate("id => { chatlens.deleteModel(id); }", instruct_id)
        a.wait_ready()
        left = page.evaluate("chatlens.storedModels()")
        assert [(s["id"], s["complete"]) for s in left] == [(base_id, True)]
        assert page.evaluate("chatlens.downloads.base()")["status"]["complete"]

        # and the base deleted from Manage downloads: asked once, the page not started again
        page.click("#manage summary")
        page.wait_for_selector(f'#manage-body tr[data-model="{base_id}"]')
        assert page.locator("#manage-body tbody tr").count() == 1
        page.click("#manage-body .delete-model")
        page.click("#manage-body .confirm-delete")
        page.wait_for_function("() => document.getElementById('download-base')")
        assert page.evaluate("chatlens.storedModels()") == []
        assert not a.errors, a.errors
    finally:
        server.mirror.base_model = None
        a.close()


# -- the page's download: the box's Cancel button, and a download worker that dies ---------------------------------
WEIGHTS_FILE = "model.safetensors"  # the mirror's Hugging Face folder: the weights, about 270 MB of bf16
KEEP_WORKERS = """(() => {
  // every Worker the page starts, kept (window.__workers) so that a test can end one as a crash would
  const Native = window.Worker;
  window.__workers = [];
  window.Worker = class extends Native {
    constructor(url, options) {
      super(url, options);
      window.__workers.push({url: String(url), worker: this});
    }
  };
})();"""


def weights_part(page):
    """The stored model (one, not complete) and its weights file as chatlens.storedModels() lists them."""
    (model,) = page.evaluate("chatlens.storedModels()")
    return model, next(f for f in model["files"] if f["name"] == WEIGHTS_FILE)


def resumed(app, page, stored, download):
    """`download()` ends the download; it asked for the weights from `stored` on, once, and the
    model is complete with every file matching its published sha256."""
    before = len(app.requests)
    download()
    (model,) = page.evaluate("chatlens.storedModels()")
    assert model["complete"] and model["verified"], model
    again = [r.all_headers().get("range") for r in app.requests[before:] if r.url.endswith("/" + WEIGHTS_FILE)]
    assert again == [f"bytes={stored}-"]


def test_the_boxs_cancel_button_stops_the_download_and_the_next_one_goes_on(app, server):
    """Cancel, clicked in the model box while the weights come: the box says what was kept, the
    store holds whole chunks of the weights, and Download goes on from there."""
    chunk = server.mirror.manifest()["chunk_size"]
    page = app.open()
    page.click("#download")
    page.wait_for_function("""([name, at]) => [...document.querySelectorAll('#download-progress .file')].some(
        (line) => line.firstChild.textContent === name && line.querySelector('progress').value >= at)""",
                           arg=[WEIGHTS_FILE, chunk])
    page.click("#download-cancel")
    page.wait_for_selector("#download-error")
    assert page.text_content("#download-error") == \
        "The download was cancelled; what was stored stays, and the next one goes on from there."
    model, part = weights_part(page)
    assert not model["complete"] and part["state"] == "partial"
    assert part["stored"] > 0 and part["stored"] % chunk == 0  # whole chunks, each checked against its sha256
    assert page.is_visible("#download")
    resumed(app, page, part["stored"],
            lambda: (page.click("#download"), page.wait_for_selector("#model-body [data-stored='complete']",
                                                                     timeout=180_000)))


def test_a_download_worker_killed_mid_download_keeps_whole_chunks_and_the_next_download_resumes(app, server):
    """The download's own worker (store/download-worker.mjs) ended while it writes the weights, as
    a crash would end it: what the store kept is whole verified chunks, and after a reload the
    download goes on from them to a model whose every file matches its published sha256."""
    chunk = server.mirror.manifest()["chunk_size"]
    app.context.add_init_script(KEEP_WORKERS)
    page = app.open()
    at = page.evaluate("""([name, at]) => new Promise((killed) => {
        chatlens.downloadModel({onProgress: (p) => {
            if (p.file?.name !== name || p.file.done < at) return;
            const w = window.__workers.find((w) => w.url.endsWith('/store/download-worker.mjs'));
            w.worker.terminate();
            killed(p.file.done);
        }});
    })""", [WEIGHTS_FILE, 2 * chunk])
    page.reload()
    app.wait_ready()
    model, part = weights_part(page)
    assert not model["complete"] and part["state"] == "partial"
    assert 0 < part["stored"] < part["size"] and part["stored"] % chunk == 0, (part, at)
    resumed(app, page, part["stored"], lambda: page.evaluate("chatlens.downloadModel()"))
