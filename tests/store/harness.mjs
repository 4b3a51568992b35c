// The store, driven from tests/test_store_browser.py through window.t. Each helper returns plain
// JSON (errors included), so Playwright's evaluate() hands the test everything it asserts on.
// Raw IndexedDB here is test-only: counting chunk records and damaging one on purpose.

import { openDb } from "./js/store/db.mjs";
import { openModelStore, requestPersistence } from "./js/store/models.mjs";
import { sha256Hex } from "./js/store/sha256.mjs";
import { dbContract } from "./db_contract.mjs";

const DB = "chatlens-store-test";
let store = null;

const FIELDS = ["url", "status", "index", "chunk", "needed", "stored", "quota", "usage", "expected", "actual", "model", "fileName"];
function errorInfo(e) {
  const out = { name: e?.name ?? "Error", message: String(e?.message ?? e) };
  for (const k of FIELDS) if (e?.[k] !== undefined) out[k] = e[k];
  return out;
}

const slim = (e) => ({
  phase: e.phase,
  file: e.file && { name: e.file.name, done: e.file.done, total: e.file.total, percent: e.file.percent, speed: e.file.speed, eta: e.file.eta },
  overall: { ...e.overall },
  t: performance.now(),
});

function idb(name = DB) {
  return new Promise((resolve, reject) => {
    const r = indexedDB.open(name);
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

function done(r) {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

window.t = {
  async open(options = {}) {
    store?.close();
    // speedSettle 0: the test downloads last about a second, and their events show a speed at once
    store = await openModelStore({ dbName: DB, retryDelay: 20, progressInterval: 0, speedSettle: 0, ...options });
    return true;
  },

  async download(source, { abortAtBytes = null, file = null, names } = {}) {
    const events = [];
    const ac = new AbortController();
    let abortedAt = null;
    const t0 = performance.now();
    try {
      const summary = await store.download(source, {
        signal: ac.signal,
        names,
        onProgress: (e) => {
          events.push(slim(e));
          if (abortAtBytes != null && abortedAt == null && e.file && (!file || e.file.name === file) && e.file.done >= abortAtBytes) {
            abortedAt = performance.now();
            ac.abort();
          }
        },
      });
      return { ok: true, summary, events, ms: performance.now() - t0 };
    } catch (e) {
      return { ok: false, error: errorInfo(e), events, abortToReject: abortedAt == null ? null : performance.now() - abortedAt };
    }
  },

  async read(source, name, { start, end, repair = true } = {}) {
    const told = [];
    try {
      const bytes = await store.read(source, name, { start, end, repair, onCorrupt: (e) => told.push(e.index) });
      return { ok: true, sha256: await sha256Hex(bytes), length: bytes.length, told };
    } catch (e) {
      return { ok: false, error: errorInfo(e), told };
    }
  },

  list: () => store.list(),
  status: (source) => store.status(source),
  delete: (id) => store.delete(id),
  deleteAll: () => store.deleteAll(),
  estimate: () => store.estimate(),
  persist: () => requestPersistence(),

  async chunkRecords() {
    const db = await idb();
    try {
      return await done(db.transaction("chunks").objectStore("chunks").count());
    } finally {
      db.close();
    }
  },

  /** Flip one byte of a stored chunk, leaving its recorded sha256 as it was. */
  async corrupt(model, name, index, at = 0) {
    const db = await idb();
    try {
      const tx = db.transaction("chunks", "readwrite");
      const chunks = tx.objectStore("chunks");
      const rec = await done(chunks.get([model, name, index]));
      const bytes = new Uint8Array(rec.bytes);
      bytes[at] ^= 0xff;
      await done(chunks.put({ ...rec, bytes: bytes.buffer }, [model, name, index]));
      return true;
    } finally {
      db.close();
    }
  },

  async contract() {
    const failures = [];
    const names = [];
    const n = await dbContract(async () => {
      names.push(`chatlens-contract-${names.length}`);
      return openDb(names[names.length - 1]);
    }, (ok, what) => ok || failures.push(what));
    for (const name of names) await done(indexedDB.deleteDatabase(name));
    return { n, failures };
  },

  /** Read from a module worker, as the chatlens worker will. */
  inWorker(source, name, start, end) {
    const w = new Worker(new URL("./worker_harness.mjs", import.meta.url), { type: "module" });
    return new Promise((resolve) => {
      w.onmessage = (e) => {
        w.terminate();
        resolve(e.data);
      };
      w.onerror = (e) => {
        w.terminate();
        resolve({ ok: false, error: { name: "WorkerError", message: e.message } });
      };
      w.postMessage({ dbName: DB, source, name, start, end });
    });
  },
};

document.getElementById("state").textContent = "ready";
