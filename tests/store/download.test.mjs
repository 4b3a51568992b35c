// The downloader and the top-level store, in node: fake_fetch.mjs's faults, memdb.mjs's Db.
import "./hooks.mjs";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { bytesOf, fakeServer } from "./fake_fetch.mjs";
import { MemDb } from "./memdb.mjs";

const { ModelStore } = await import("../../site/js/store/models.mjs");
const { CorruptChunkError, HttpError, IntegrityError, NetworkError, NotStoredError, QuotaError, SizeError } = await import("../../site/js/store/errors.mjs");

const CS = 64 * 1024; // chunk size in these tests
const BASE = "http://127.0.0.1:9/models/org/tiny/resolve/rev1/";
const sha = (u8) => createHash("sha256").update(u8).digest("hex");
const chunkHashes = (u8, cs = CS) => {
  const out = [];
  for (let i = 0; i < u8.length; i += cs) out.push(sha(u8.subarray(i, i + cs)));
  return out;
};

// A small Hugging Face folder: text files with and without published hashes, and "weights".
function folder() {
  const files = {
    "config.json": new TextEncoder().encode('{"a": 1}'),
    "tokenizer.json": bytesOf(150_000, 2),
    "tokenizer_config.json": bytesOf(5_000, 3),
    "model.safetensors": bytesOf(10 * CS + 1234, 4),
  };
  const server = fakeServer(Object.fromEntries(Object.entries(files).map(([n, b]) => [BASE + n, b])), { block: 16 * 1024 });
  return { files, server };
}

function source(files, { hashes = true, chunks = false, sizes = true } = {}) {
  return {
    kind: "hf",
    url: BASE,
    label: "tiny",
    files: [
      { name: "config.json", ...(sizes ? { size: files["config.json"].length } : {}) },
      { name: "generation_config.json", optional: true },
      { name: "tokenizer.json", ...(sizes ? { size: files["tokenizer.json"].length } : {}), ...(hashes ? { sha256: sha(files["tokenizer.json"]) } : {}) },
      { name: "tokenizer_config.json" },
      {
        name: "model.safetensors",
        ...(sizes ? { size: files["model.safetensors"].length } : {}),
        ...(hashes ? { sha256: sha(files["model.safetensors"]) } : {}),
        ...(chunks ? { chunk_size: CS, chunks: chunkHashes(files["model.safetensors"]) } : {}),
      },
    ],
  };
}

function store(server, db = new MemDb(), opts = {}) {
  // speedSettle 0: these downloads last milliseconds, and their progress events show a speed at once
  return new ModelStore(db, { chunkSize: CS, fetch: server.fetch, retryDelay: 1, progressInterval: 0, speedSettle: 0, ...opts });
}

const sent = (server, name) => server.log.filter((e) => e.url === BASE + name).reduce((a, e) => a + e.sent, 0);
const requests = (server, name) => server.log.filter((e) => e.url === BASE + name);

test("a full download: progress, then complete and verified as far as hashes are published", async () => {
  const { files, server } = folder();
  const s = store(server);
  const events = [];
  const summary = await s.download(source(files), { onProgress: (e) => events.push(e) });
  assert.equal(summary.complete, true);
  assert.equal(summary.verified, false); // config.json and tokenizer_config.json have no published hash
  const byName = Object.fromEntries(summary.files.map((f) => [f.name, f]));
  assert.equal(byName["model.safetensors"].verified, true);
  assert.equal(byName["tokenizer.json"].verified, true);
  assert.equal(byName["config.json"].check, "not verified against a published value (hashed on arrival)");
  assert.equal(byName["config.json"].sha256, sha(files["config.json"]));
  assert.equal(byName["generation_config.json"].state, "absent");
  const total = Object.values(files).reduce((a, b) => a + b.length, 0);
  assert.equal(summary.bytes, total);
  assert.equal(summary.total, total);

  const last = events[events.length - 1];
  assert.equal(last.phase, "done");
  assert.deepEqual([last.overall.done, last.overall.total, last.overall.percent], [total, total, 100]);
  const weights = events.filter((e) => e.file?.name === "model.safetensors" && e.phase === "download");
  assert.ok(weights.length > 5, `only ${weights.length} progress events for the weights`);
  for (let i = 1; i < weights.length; i++) assert.ok(weights[i].file.done >= weights[i - 1].file.done);
  assert.ok(weights.some((e) => e.file.speed > 0));
  assert.ok(weights.every((e) => e.file.total === files["model.safetensors"].length));
  // each file fetched once, in full
  for (const [n, b] of Object.entries(files)) assert.deepEqual(requests(server, n).map((e) => [e.range, e.sent]), [[null, b.length]], n);

  // the bytes read back, whole and across chunk boundaries
  const w = files["model.safetensors"];
  assert.equal(sha(await s.read(source(files), "model.safetensors")), sha(w));
  assert.deepEqual(await s.read(source(files), "model.safetensors", { start: CS - 10, end: 3 * CS + 5 }), w.slice(CS - 10, 3 * CS + 5));
  assert.deepEqual(await s.read(source(files), "model.safetensors", { start: 5, end: 9 }), w.slice(5, 9));
  assert.deepEqual(await s.read(summary.id, "config.json"), files["config.json"]);
  const pieces = [];
  for await (const p of s.chunks(summary.id, "model.safetensors", { start: 100, end: 2 * CS + 100 })) pieces.push([p.index, p.offset, p.bytes.length]);
  assert.deepEqual(pieces, [[0, 100, CS - 100], [1, CS, CS], [2, 2 * CS, 100]]);

  // again: nothing is fetched
  server.log.length = 0;
  const again = await s.download(source(files));
  assert.equal(again.complete, true);
  assert.deepEqual(server.log, []);
  assert.deepEqual((await s.list()).map((m) => [m.id, m.complete]), [["hf:org/tiny@rev1", true]]);
});

test("a cut download continues from the last whole chunk", async () => {
  const { files, server } = folder();
  const w = files["model.safetensors"];
  server.fault(BASE + "model.safetensors", { cutAfter: 3 * CS + 500 });
  const s = store(server);
  const summary = await s.download(source(files, { chunks: true }));
  assert.equal(summary.complete, true);
  assert.deepEqual(requests(server, "model.safetensors").map((e) => e.range), [null, `bytes=${3 * CS}-`]);
  assert.equal(sent(server, "model.safetensors"), w.length + 500); // about one file, not two
  assert.equal(sha(await s.read(summary.id, "model.safetensors")), sha(w));
});

test("without retries the error says so, and the next download resumes (checking what was stored)", async () => {
  const { files, server } = folder();
  const w = files["model.safetensors"];
  server.fault(BASE + "model.safetensors", { cutAfter: 4 * CS + 7 });
  const db = new MemDb();
  const s = store(server, db, { retries: 0 });
  await assert.rejects(s.download(source(files)), (e) => e instanceof NetworkError && e.message.startsWith(BASE + "model.safetensors: the download broke off at byte 262144"));
  const mid = await s.status(source(files));
  assert.equal(mid.complete, false);
  assert.equal(mid.files.find((f) => f.name === "model.safetensors").stored, 4 * CS);
  assert.equal(mid.files.find((f) => f.name === "model.safetensors").state, "partial");
  server.log.length = 0;
  const events = [];
  const done = await s.download(source(files), { onProgress: (e) => events.push(e) });
  assert.equal(done.complete, true);
  assert.deepEqual(server.log.map((e) => [e.url.slice(BASE.length), e.range]), [["model.safetensors", `bytes=${4 * CS}-`]]);
  assert.ok(events.some((e) => e.phase === "verify"));
  const first = events.find((e) => e.phase === "download" && e.file?.name === "model.safetensors");
  assert.ok(first.file.done >= 4 * CS, "resumed progress starts at what is stored");
  assert.equal(sha(await s.read(done.id, "model.safetensors")), sha(w));
});

test("a resumed file whose stored chunk went bad resumes before it", async () => {
  const { files, server } = folder();
  server.fault(BASE + "model.safetensors", { cutAfter: 5 * CS });
  const db = new MemDb();
  const s = store(server, db, { retries: 0 });
  await assert.rejects(s.download(source(files)), NetworkError);
  const id = s.spec(source(files)).id;
  db.corrupt(id, "model.safetensors", 2, 100);
  server.log.length = 0;
  await s.download(source(files));
  assert.deepEqual(requests(server, "model.safetensors").map((e) => e.range), [`bytes=${2 * CS}-`]);
  assert.equal(sha(await s.read(id, "model.safetensors")), sha(files["model.safetensors"]));
});

test("a server that ignores Range restarts the file cleanly", async () => {
  const { files, server } = folder();
  const w = files["model.safetensors"];
  server.fault(BASE + "model.safetensors", { cutAfter: 2 * CS + 10 });
  server.fault(BASE + "model.safetensors", { ignoreRange: true });
  const s = store(server);
  const summary = await s.download(source(files));
  assert.equal(summary.complete, true);
  assert.deepEqual(requests(server, "model.safetensors").map((e) => [e.range, e.status]), [[null, 200], [`bytes=${2 * CS}-`, 200]]);
  assert.equal(sha(await s.read(summary.id, "model.safetensors")), sha(w));
  assert.equal(summary.files.find((f) => f.name === "model.safetensors").stored, w.length);
});

test("a wrong byte: its chunk is fetched again when chunk hashes are published", async () => {
  const { files, server } = folder();
  server.fault(BASE + "model.safetensors", { wrongByteAt: 6 * CS + 3 });
  const s = store(server);
  const summary = await s.download(source(files, { chunks: true }));
  assert.equal(summary.verified, false);
  assert.equal(summary.files.find((f) => f.name === "model.safetensors").verified, true);
  assert.deepEqual(requests(server, "model.safetensors").map((e) => e.range), [null, `bytes=${6 * CS}-`]);
  assert.equal(sha(await s.read(summary.id, "model.safetensors")), sha(files["model.safetensors"]));
});

test("a wrong byte with only the file's sha256 published: the file is fetched again", async () => {
  const { files, server } = folder();
  server.fault(BASE + "model.safetensors", { wrongByteAt: 1000 });
  const s = store(server);
  const summary = await s.download(source(files));
  assert.equal(summary.complete, true);
  assert.deepEqual(requests(server, "model.safetensors").map((e) => e.range), [null, null]);
  assert.equal(sha(await s.read(summary.id, "model.safetensors")), sha(files["model.safetensors"]));
});

test("bytes that stay wrong end in an IntegrityError and nothing complete", async () => {
  const { files, server } = folder();
  server.fault(BASE + "model.safetensors", { wrongByteAt: 2 * CS, times: Infinity });
  const s = store(server, new MemDb(), { retries: 2 });
  await assert.rejects(s.download(source(files, { chunks: true })), (e) => e instanceof IntegrityError && e.chunk === 2 && e.message.includes(BASE + "model.safetensors"));
  assert.equal(requests(server, "model.safetensors").length, 3);
  await assert.rejects(s.download(source(files)), (e) => e instanceof IntegrityError && e.chunk === null && /downloaded 2 times/.test(e.message));
  const st = await s.status(source(files));
  assert.equal(st.complete, false);
  assert.equal(st.files.find((f) => f.name === "model.safetensors").stored, 0, "a file that failed its hash keeps no chunks");
  await assert.rejects(s.read(st.id, "model.safetensors"), NotStoredError);
});

test("without any published hash a wrong byte cannot be told: stored, marked not verified", async () => {
  const { files, server } = folder();
  server.fault(BASE + "model.safetensors", { wrongByteAt: 10 });
  const s = store(server);
  const summary = await s.download(source(files, { hashes: false }));
  const f = summary.files.find((x) => x.name === "model.safetensors");
  assert.deepEqual([f.complete, f.verified, f.check], [true, false, "not verified against a published value (hashed on arrival)"]);
});

test("HTTP errors name the URL; 5xx is retried first; an optional file's 404 is 'absent'", async () => {
  const { files, server } = folder();
  server.fault(BASE + "model.safetensors", { status: 500, times: Infinity });
  const s = store(server, new MemDb(), { retries: 2 });
  await assert.rejects(s.download(source(files)), (e) => e instanceof HttpError && e.status === 500 && e.message === `${BASE}model.safetensors: HTTP 500`);
  assert.equal(requests(server, "model.safetensors").length, 3);
  assert.equal((await s.status(source(files))).complete, false);
  const missing = { ...source(files), files: [{ name: "nothere.json" }] };
  await assert.rejects(s.download(missing), (e) => e instanceof HttpError && e.status === 404 && e.message === `${BASE}nothere.json: HTTP 404`);
  assert.equal(requests(server, "nothere.json").length, 1, "a 404 is not retried");
  const optional = { ...source(files), files: [{ name: "config.json" }, { name: "nothere.json", optional: true }] };
  const ok = await s.download(optional);
  assert.equal(ok.complete, true);
});

test("no Content-Length and no listed size: bytes and speed, no percent; the size is learned", async () => {
  const { files, server } = folder();
  server.fault(BASE + "model.safetensors", { noLength: true });
  const events = [];
  let t = 0;
  const s = store(server, new MemDb(), { now: () => (t += 5) });
  const summary = await s.download(source(files, { sizes: false, hashes: false }), { onProgress: (e) => events.push(e) });
  const w = events.filter((e) => e.file?.name === "model.safetensors" && e.phase === "download");
  assert.ok(w.length > 3);
  assert.ok(w.slice(0, -1).every((e) => e.file.total === null && e.file.percent === null && e.file.eta === null && e.overall.total === null));
  assert.ok(w.some((e) => e.file.done > 0 && e.file.speed > 0));
  assert.equal(summary.files.find((f) => f.name === "model.safetensors").size, files["model.safetensors"].length);
  assert.equal(summary.complete, true);
});

test("a close-delimited response cut short is caught by the known size and resumed", async () => {
  const { files, server } = folder();
  server.fault(BASE + "model.safetensors", { noLength: true, closeAfter: 3 * CS + 99 });
  const s = store(server);
  const summary = await s.download(source(files));
  assert.equal(summary.complete, true);
  assert.deepEqual(requests(server, "model.safetensors").map((e) => e.range), [null, `bytes=${3 * CS}-`]);
});

test("the size on the server differs from the listed one: a SizeError", async () => {
  const { files, server } = folder();
  const src = source(files);
  src.files[4].size += 1;
  const s = store(server);
  await assert.rejects(s.download(src), (e) => e instanceof SizeError && e.actual === files["model.safetensors"].length);
  const src2 = source(files);
  src2.files[4].size += 1;
  server.fault(BASE + "model.safetensors", { cutAfter: CS + 1 });
  const s2 = store(server, new MemDb(), { retries: 0 });
  await assert.rejects(s2.download(src2), NetworkError);
  await assert.rejects(s2.download(src2), (e) => e instanceof SizeError && e.expected === files["model.safetensors"].length + 1);
});

// A disk that takes a while to write each chunk.
class SlowDb extends MemDb {
  async putChunk(...args) {
    await new Promise((r) => setTimeout(r, 30));
    return super.putChunk(...args);
  }
}

test("an AbortSignal stops at once and leaves the model incomplete; the next download resumes", async () => {
  const { files, server } = folder();
  server.fault(BASE + "model.safetensors", { delayMs: 20, times: 1 });
  const db = new SlowDb();
  const s = store(server, db);
  const ac = new AbortController();
  let atAbort = null;
  let after = 0;
  const p = s.download(source(files), {
    signal: ac.signal,
    onProgress: (e) => {
      if (atAbort) after++;
      else if (e.file?.name === "model.safetensors" && e.file.done >= 2 * CS) {
        atAbort = { requests: server.log.length, sent: sent(server, "model.safetensors"), done: e.file.done };
        ac.abort();
      }
    },
  });
  await assert.rejects(p, { name: "AbortError" });
  // every chunk that came whole is stored by the time the caller hears, the last one's write included
  const weights = [...db.chunks.values()].filter((c) => c.name === "model.safetensors").map((c) => c.index);
  assert.deepEqual(weights.sort((a, b) => a - b), [...Array(Math.floor(atAbort.done / CS)).keys()]);
  // at once: not a byte more read (the rest of the body comes a block every 20 ms), no request, no progress
  assert.ok(atAbort.sent < files["model.safetensors"].length);
  const { done: _, ...asked } = atAbort;
  assert.deepEqual({ requests: server.log.length, sent: sent(server, "model.safetensors") }, asked);
  assert.equal(after, 0);
  const st = await s.status(source(files));
  assert.equal(st.complete, false);
  assert.equal(st.files.find((f) => f.name === "model.safetensors").complete, false);
  await assert.rejects(s.download(source(files), { signal: AbortSignal.abort() }), { name: "AbortError" });
  const done = await s.download(source(files));
  assert.equal(done.complete, true);
  assert.match(requests(server, "model.safetensors").at(-1).range, /^bytes=\d+-$/);
});

test("a stalled connection is dropped and the download goes on", async () => {
  const { files, server } = folder();
  server.fault(BASE + "model.safetensors", { delayMs: 400 }); // the first block never comes in time
  const s = store(server, new MemDb(), { stallMs: 100 });
  const summary = await s.download(source(files));
  assert.equal(summary.complete, true);
  assert.deepEqual(requests(server, "model.safetensors").map((e) => [e.range, e.sent]), [[null, 0], [null, files["model.safetensors"].length]]);
  server.fault(BASE + "tokenizer.json", { delayMs: 400, times: Infinity });
  const s2 = store(server, new MemDb(), { stallMs: 100, retries: 1 });
  await assert.rejects(s2.download(source(files)), (e) => e instanceof NetworkError && /no data for 0.1 s/.test(e.message));
});

test("a full disk: a QuotaError with the sizes, nothing complete; after space is freed it resumes", async () => {
  const { files, server } = folder();
  const db = new MemDb({ limit: 400_000 });
  const s = store(server, db, { estimate: async () => ({ quota: 1_000_000, usage: 990_000 }) });
  const err = await s.download(source(files)).catch((e) => e);
  assert.ok(err instanceof QuotaError, String(err));
  assert.equal(err.name, "QuotaError");
  assert.ok(err.stored > 0 && err.stored <= 400_000, err.stored);
  const total = Object.values(files).reduce((a, b) => a + b.length, 0);
  assert.ok(err.needed > 0 && err.needed <= total - err.stored + CS, err.needed);
  assert.deepEqual([err.quota, err.usage], [1_000_000, 990_000]);
  assert.match(err.message, /^Not enough storage to keep tiny: it needs .* more; the model store holds .* already and the browser lets this site store 977 KiB and it uses 967 KiB/);
  const st = await s.status(source(files));
  assert.equal(st.complete, false);
  assert.equal(st.files.find((f) => f.name === "model.safetensors").state, "partial");
  assert.deepEqual((await s.list()).map((m) => m.complete), [false]);
  db.limit = Infinity;
  server.log.length = 0;
  const done = await s.download(source(files));
  assert.equal(done.complete, true);
  assert.match(requests(server, "model.safetensors")[0].range, /^bytes=\d+-$/, "resumed, not restarted");
});

test("a chunk damaged in the store: found on read, the caller told, only that chunk fetched again", async () => {
  const { files, server } = folder();
  const db = new MemDb();
  const s = store(server, db);
  const { id } = await s.download(source(files));
  db.corrupt(id, "model.safetensors", 7, 5);
  server.log.length = 0;
  const told = [];
  const w = files["model.safetensors"];
  const got = await s.read(source(files), "model.safetensors", { start: 6 * CS, end: 9 * CS, onCorrupt: (e) => told.push(e) });
  assert.deepEqual(got, w.slice(6 * CS, 9 * CS));
  assert.equal(told.length, 1);
  assert.ok(told[0] instanceof CorruptChunkError && told[0].index === 7);
  assert.deepEqual(server.log.map((e) => [e.url.slice(BASE.length), e.range, e.sent]), [["model.safetensors", `bytes=${7 * CS}-${8 * CS - 1}`, CS]]);
  assert.equal((await s.status(source(files))).complete, true);

  // repair: false hands the error over and leaves the file damaged (incomplete) until a download
  db.corrupt(id, "model.safetensors", 10, 0); // the short last chunk
  await assert.rejects(s.read(id, "model.safetensors", { repair: false }), (e) => e instanceof CorruptChunkError && e.index === 10);
  assert.equal((await s.status(source(files))).complete, false);
  server.log.length = 0;
  await s.download(source(files));
  assert.deepEqual(server.log.map((e) => e.range), [`bytes=${10 * CS}-${w.length - 1}`]);
  // verify() checks every chunk
  db.corrupt(id, "tokenizer.json", 1, 0);
  assert.deepEqual(await s.verify(id), { "config.json": [], "model.safetensors": [], "tokenizer.json": [1], "tokenizer_config.json": [] });
  // a repair by id alone (the model record remembers the URL)
  server.log.length = 0;
  assert.deepEqual(await s.read(id, "tokenizer.json"), files["tokenizer.json"]);
  assert.deepEqual(server.log.map((e) => e.range), [`bytes=${CS}-${2 * CS - 1}`]);
});

test("a repair from a server that ignores Range fetches the file again", async () => {
  const { files, server } = folder();
  const db = new MemDb();
  const s = store(server, db);
  const { id } = await s.download(source(files));
  db.corrupt(id, "model.safetensors", 4);
  server.fault(BASE + "model.safetensors", { ignoreRange: true });
  server.log.length = 0;
  assert.equal(sha(await s.read(source(files), "model.safetensors")), sha(files["model.safetensors"]));
  assert.deepEqual(server.log.map((e) => [e.range, e.status]), [[`bytes=${4 * CS}-${5 * CS - 1}`, 200], [null, 200]]);
});

test("a source whose published hash changed is fetched again; delete frees the chunks", async () => {
  const { files, server } = folder();
  const db = new MemDb();
  const s = store(server, db);
  const src = source(files);
  await s.download(src);
  files["model.safetensors"][0] ^= 1;
  src.files[4].sha256 = sha(files["model.safetensors"]);
  assert.equal((await s.status(src)).complete, false);
  assert.equal((await s.status(src)).files[4].state, "stale");
  server.log.length = 0;
  await s.download(src);
  assert.deepEqual(server.log.map((e) => e.url.slice(BASE.length)), ["model.safetensors"]);
  assert.equal(sha(await s.read(src, "model.safetensors")), src.files[4].sha256);

  const other = { kind: "gguf", url: "http://127.0.0.1:9/x/model.gguf" };
  const server2 = fakeServer({ [other.url]: bytesOf(3 * CS, 9) });
  const s2 = new ModelStore(db, { chunkSize: CS, fetch: server2.fetch, retryDelay: 1 });
  await s2.download(other);
  assert.equal((await s.list()).length, 2);
  assert.equal(await s.delete("hf:org/tiny@rev1"), true);
  assert.equal(await s.delete("hf:org/tiny@rev1"), false);
  assert.deepEqual((await s.list()).map((m) => m.id), ["gguf:http://127.0.0.1:9/x/model.gguf"]);
  assert.equal(db.bytes(), 3 * CS);
  await s.deleteAll();
  assert.equal(db.bytes(), 0);
  assert.deepEqual(await s.list(), []);
});

test("only the files asked for; one download of a model at a time; empty files", async () => {
  const { files, server } = folder();
  const s = store(server);
  const src = source(files);
  const text = await s.download(src, { names: ["config.json", "tokenizer.json"] });
  assert.deepEqual(server.log.map((e) => e.url.slice(BASE.length)), ["config.json", "tokenizer.json"]);
  assert.equal(text.complete, false);
  assert.deepEqual(await s.read(src, "config.json"), files["config.json"]);
  await assert.rejects(s.read(src, "model.safetensors"), NotStoredError);
  await assert.rejects(s.download(src, { names: ["nope"] }), /has no file nope/);

  const a = s.download(src);
  await assert.rejects(s.download(src), /already downloading/);
  assert.equal((await a).complete, true);

  const empty = fakeServer({ "http://127.0.0.1:9/e/empty.gguf": new Uint8Array(0) });
  const s3 = new ModelStore(new MemDb(), { chunkSize: CS, fetch: empty.fetch });
  const e = await s3.download({ kind: "gguf", url: "http://127.0.0.1:9/e/empty.gguf" });
  assert.deepEqual([e.complete, e.files[0].size, e.files[0].sha256], [true, 0, sha(new Uint8Array(0))]);
  assert.deepEqual(await s3.read(e.id, "empty.gguf"), new Uint8Array(0));
});
