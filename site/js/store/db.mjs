// The only code that touches IndexedDB. Three object stores:
//   models  {id, kind, url, repo, revision, label, files: [name], created_at, updated_at}   key id
//   files   a file record (state.mjs says what its fields mean)                            key [model, name]
//   chunks  {sha256, bytes: ArrayBuffer}                                                    key [model, name, index]
// Chunk bytes live apart from the records that describe them, so listing and planning never
// load bytes, and deleting a model deletes its chunk records (which is what frees the space).
// Works in a window and in a worker.

export const DB_NAME = "chatlens-models";
const VERSION = 1;

const req = (r) => new Promise((resolve, reject) => {
  r.onsuccess = () => resolve(r.result);
  r.onerror = () => reject(r.error);
});

// All of a model's keys: arrays sort after strings, so [id, []] is above every [id, name, ...].
const modelRange = (id) => IDBKeyRange.bound([id], [id, []]);
const chunkRange = (model, name, first = 0, last = Infinity) => IDBKeyRange.bound([model, name, first], [model, name, last]);

export async function openDb(name = DB_NAME) {
  if (typeof indexedDB === "undefined") throw new Error("this browser has no IndexedDB here (a private window, or an insecure page)");
  const open = indexedDB.open(name, VERSION);
  open.onupgradeneeded = () => {
    const db = open.result;
    if (!db.objectStoreNames.contains("models")) db.createObjectStore("models", { keyPath: "id" });
    if (!db.objectStoreNames.contains("files")) db.createObjectStore("files", { keyPath: ["model", "name"] });
    if (!db.objectStoreNames.contains("chunks")) db.createObjectStore("chunks");
  };
  const blocked = new Promise((_, reject) => {
    open.onblocked = () => reject(new Error(`the model store ${name} is held open by an older version of this page in another tab`));
  });
  const idb = await Promise.race([req(open), blocked]);
  // Another tab upgrading or deleting the database must not wait for this one to close.
  idb.onversionchange = () => idb.close();
  return new Db(idb);
}

export class Db {
  constructor(idb) {
    this.idb = idb;
  }

  close() {
    this.idb.close();
  }

  // One transaction; resolves with body's result once the transaction has committed, rejects
  // with the transaction's error (a QuotaExceededError shows up here, at commit).
  tx(stores, mode, body, options) {
    return new Promise((resolve, reject) => {
      const t = this.idb.transaction(stores, mode, options);
      let out;
      Promise.resolve(body(t)).then((v) => (out = v), (e) => {
        try {
          t.abort();
        } catch {
          // already finished
        }
        reject(e);
      });
      t.oncomplete = () => resolve(out);
      t.onabort = () => reject(t.error ?? new DOMException("the transaction was aborted", "AbortError"));
    });
  }

  getModel(id) {
    return this.tx("models", "readonly", (t) => req(t.objectStore("models").get(id)));
  }

  putModel(record) {
    return this.tx("models", "readwrite", (t) => req(t.objectStore("models").put(record)));
  }

  listModels() {
    return this.tx("models", "readonly", (t) => req(t.objectStore("models").getAll()));
  }

  getFile(model, name) {
    return this.tx("files", "readonly", (t) => req(t.objectStore("files").get([model, name])));
  }

  filesOf(model) {
    return this.tx("files", "readonly", (t) => req(t.objectStore("files").getAll(modelRange(model))));
  }

  /**
   * Write a file record; dropFrom: first delete its chunks from that index on, in the same
   * transaction. strict: flushed to disk before resolving (used for the completion record).
   */
  putFile(record, { dropFrom = null, strict = false } = {}) {
    return this.tx(["files", "chunks"], "readwrite", (t) => {
      if (dropFrom != null) t.objectStore("chunks").delete(chunkRange(record.model, record.name, dropFrom));
      return req(t.objectStore("files").put(record));
    }, strict ? { durability: "strict" } : undefined);
  }

  putChunk(model, name, index, bytes, sha256) {
    // Structured clone copies a view's whole underlying buffer: store exactly the chunk's bytes.
    const exact = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
      ? bytes.buffer
      : bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
    return this.tx("chunks", "readwrite", (t) => req(t.objectStore("chunks").put({ sha256, bytes: exact }, [model, name, index])));
  }

  /** Stored chunks first..last of a file, in order, as {index, sha256, bytes: Uint8Array}; missing ones are left out. */
  getChunks(model, name, first, last) {
    return this.tx("chunks", "readonly", async (t) => {
      const range = chunkRange(model, name, first, last);
      const store = t.objectStore("chunks");
      const [keys, values] = await Promise.all([req(store.getAllKeys(range)), req(store.getAll(range))]);
      return keys.map((k, i) => ({ index: k[2], sha256: values[i]?.sha256, bytes: new Uint8Array(values[i]?.bytes ?? 0) }));
    });
  }

  /** Indices of the chunks stored for one file. */
  chunkIndices(model, name) {
    return this.tx("chunks", "readonly", async (t) => (await req(t.objectStore("chunks").getAllKeys(chunkRange(model, name)))).map((k) => k[2]));
  }

  /** Map name -> indices of the stored chunks, for every file of a model (keys only: no bytes are read). */
  chunkIndicesOf(model) {
    return this.tx("chunks", "readonly", async (t) => {
      const out = new Map();
      for (const [, name, index] of await req(t.objectStore("chunks").getAllKeys(modelRange(model)))) {
        if (!out.has(name)) out.set(name, []);
        out.get(name).push(index);
      }
      return out;
    });
  }

  /** A stored chunk failed its hash: delete it, and mark its file damaged, in one transaction. */
  markDamaged(model, name, index) {
    return this.tx(["files", "chunks"], "readwrite", async (t) => {
      t.objectStore("chunks").delete([model, name, index]);
      const files = t.objectStore("files");
      const rec = await req(files.get([model, name]));
      if (rec && rec.state === "complete") await req(files.put({ ...rec, state: "damaged" }));
    });
  }

  deleteModel(id) {
    return this.tx(["models", "files", "chunks"], "readwrite", (t) => {
      t.objectStore("chunks").delete(modelRange(id));
      t.objectStore("files").delete(modelRange(id));
      t.objectStore("models").delete(id);
    });
  }

  deleteAll() {
    return this.tx(["models", "files", "chunks"], "readwrite", (t) => {
      for (const s of ["chunks", "files", "models"]) t.objectStore(s).clear();
    });
  }
}
