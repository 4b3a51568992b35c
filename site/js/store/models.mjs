// The model store as the page and the worker use it: download a source's files (with progress
// and an AbortSignal), say what is stored, read stored bytes (verified, whole or a range), and
// delete. Callers pass a source description (spec.mjs) or a stored model's id; they never see
// chunks or database records.
//
//   const store = await openModelStore();
//   await store.download(source, {onProgress, signal});      // resolves once stored and checked
//   const bytes = await store.read(source, "tokenizer.json");
//   const head = await store.read(source, "model.gguf", {start: 0, end: 8 << 20});
//   await store.list(); await store.delete(id); await store.estimate();

import { DEFAULT_CHUNK_SIZE } from "./chunks.mjs";
import { openDb } from "./db.mjs";
import { download } from "./download.mjs";
import { CorruptChunkError, NotStoredError, StoreError } from "./errors.mjs";
import { inventory, summarize } from "./inventory.mjs";
import { readChunks, readRange, verifyStored } from "./read.mjs";
import { modelSpec } from "./spec.mjs";

/**
 * Open the store. Options: dbName, chunkSize (for files without published chunk hashes),
 * fetch, retries, retryDelay (ms), progressInterval (ms), now (ms clock).
 */
export async function openModelStore(options = {}) {
  return new ModelStore(await openDb(options.dbName), options);
}

export class ModelStore {
  constructor(db, { chunkSize = DEFAULT_CHUNK_SIZE, ...downloadOptions } = {}) {
    this.db = db;
    this.chunkSize = chunkSize;
    this.downloadOptions = downloadOptions;
    this.running = new Set();
  }

  close() {
    this.db.close();
  }

  /** The normalized description of a source: its id and files (spec.mjs's modelSpec). */
  spec(source) {
    return modelSpec(source, { chunkSize: this.chunkSize });
  }

  /**
   * Fetch whatever of the source is not stored yet; resolves with its summary (see list()) once
   * every file is stored and matches its expected hash. Only one download of a model runs at a
   * time (across tabs and workers too, where the browser has Web Locks).
   * Options: onProgress(snapshot), signal, names (only these files: e.g. the text side first).
   */
  async download(source, { onProgress, signal, names } = {}) {
    const spec = this.spec(source);
    requestPersistence(); // beside the download, not in front of it: the answer may wait on a prompt
    await this.exclusive(spec.id, () => download(this.db, spec, { ...this.downloadOptions, onProgress, signal, names }));
    return summarize(this.db, spec.id, spec);
  }

  /** What is stored of a source, measured against what it asks for now. No network. */
  async status(source) {
    const spec = this.spec(source);
    return summarize(this.db, spec.id, spec);
  }

  /** Every stored model (partial ones too): [{id, source, files, bytes, total, complete, verified, stored_at}]. */
  list() {
    return inventory(this.db);
  }

  /** Delete a model's records and chunks (the chunks are what frees the space). */
  async delete(id) {
    const existed = Boolean(await this.db.getModel(id)) || (await this.db.filesOf(id)).length > 0;
    await this.db.deleteModel(id);
    return existed;
  }

  deleteAll() {
    return this.db.deleteAll();
  }

  /** The browser's figures for this site: {usage, quota, persisted} (null where it gives none). */
  async estimate() {
    const s = globalThis.navigator?.storage;
    const [e, persisted] = await Promise.all([s?.estimate?.().catch(() => null), s?.persisted?.().catch(() => null)]);
    return { usage: e?.usage ?? null, quota: e?.quota ?? null, persisted: persisted ?? null };
  }

  /** A stored file's completion record (size, sha256, ...) or null if it is not stored complete. */
  async file(source, name) {
    const rec = await this.db.getFile(this.idOf(source), name);
    return rec?.state === "complete" ? { name, size: rec.size, sha256: rec.sha256, verified: rec.published === rec.sha256, stored_at: rec.stored_at } : null;
  }

  /**
   * Bytes [start, end) of a stored file (default: all of it), each chunk checked against its
   * sha256. A damaged chunk is reported to onCorrupt(error), fetched again on its own (repair:
   * false to throw the CorruptChunkError instead), and the read retried once.
   */
  async read(source, name, { start = 0, end, onCorrupt, repair = true, signal, onProgress } = {}) {
    const id = this.idOf(source);
    for (let attempt = 0; ; attempt++) {
      const rec = await this.db.getFile(id, name);
      if (rec?.state === "damaged" && repair && attempt === 0) {
        await this.repair(source, name, { signal, onProgress }); // damaged by an earlier read
        continue;
      }
      if (rec?.state !== "complete") throw new NotStoredError(id, name);
      try {
        return await readRange(this.db, rec, start, end ?? rec.size);
      } catch (e) {
        if (!(e instanceof CorruptChunkError) || !repair || attempt > 0) throw e;
        onCorrupt?.(e);
        await this.repair(source, name, { signal, onProgress });
      }
    }
  }

  /**
   * Verified pieces of a stored file, in order, for callers that consume bytes as they come (a
   * GPU upload, tensor by tensor): {index, offset, bytes}. Throws CorruptChunkError on a damaged
   * chunk (call repair(), then start again); nothing here assembles the file.
   */
  async *chunks(source, name, { start = 0, end } = {}) {
    const id = this.idOf(source);
    const rec = await this.db.getFile(id, name);
    if (rec?.state !== "complete") throw new NotStoredError(id, name);
    yield* readChunks(this.db, rec, start, end ?? rec.size);
  }

  /** Fetch again only the chunks of a file that are missing or were found damaged. */
  async repair(source, name, { signal, onProgress } = {}) {
    const src = typeof source === "string" ? await this.storedSource(source) : source;
    return this.download(src, { names: [name], signal, onProgress });
  }

  /** Check every chunk of every stored file of a model: {name: [damaged chunk indices]} (each now removed). */
  async verify(source) {
    const id = this.idOf(source);
    const out = {};
    for (const rec of await this.db.filesOf(id)) {
      if (rec.state === "complete") out[rec.name] = await verifyStored(this.db, rec);
    }
    return out;
  }

  idOf(source) {
    return typeof source === "string" ? source : this.spec(source).id;
  }

  // A stored model's id back to a source, from what its records remember (for repairs by id).
  async storedSource(id) {
    const model = await this.db.getModel(id);
    if (!model) throw new NotStoredError(id, "its record");
    const records = new Map((await this.db.filesOf(id)).map((r) => [r.name, r]));
    const files = model.files.map((name) => {
      const r = records.get(name);
      return r ? { name, size: r.size, sha256: r.published, chunk_size: r.chunkSize, optional: r.optional } : { name };
    });
    return { id, kind: model.kind, url: model.url, repo: model.repo, revision: model.revision, label: model.label,
             model: model.model ?? null, verified: model.verified ?? null, files };
  }

  async exclusive(id, run) {
    if (this.running.has(id)) throw new StoreError(`${id} is already downloading here`, { model: id });
    this.running.add(id);
    try {
      const locks = globalThis.navigator?.locks;
      if (!locks) return await run();
      return await locks.request(`chatlens-store:${id}`, { ifAvailable: true }, (lock) => {
        if (!lock) throw new StoreError(`${id} is already downloading in another tab or worker`, { model: id });
        return run();
      });
    } finally {
      this.running.delete(id);
    }
  }
}

/**
 * Ask the browser to keep this site's storage under pressure (a page only: workers cannot ask).
 * Resolves true when storage is persistent, false when refused, null when it cannot be asked.
 * It may resolve only when the user answers a prompt (Firefox), or never: never await it before
 * work the user asked for.
 */
export async function requestPersistence() {
  const s = globalThis.navigator?.storage;
  if (!s?.persist) return null;
  try {
    return (await s.persisted()) || (await s.persist());
  } catch {
    return false;
  }
}

/**
 * What the page puts on window.chatlens: `currentSource()` gives the source the page runs on.
 *   downloadModel({onProgress, signal}) -> summary, once stored and verified
 *   storedModels() -> [{id, source, files, bytes, total, complete, verified, stored_at}]
 *   deleteModel(id), deleteAllModels(), storageEstimate()
 */
export function pageApi(store, currentSource) {
  return {
    downloadModel: ({ onProgress, signal } = {}) => store.download(currentSource(), { onProgress, signal }),
    storedModels: () => store.list(),
    deleteModel: (id) => store.delete(id),
    deleteAllModels: () => store.deleteAll(),
    storageEstimate: () => store.estimate(),
  };
}
