// An in-memory stand-in for db.mjs's Db, with the same methods and semantics, for node --test.
// db_contract.mjs runs the same checks on both (here, and in Chromium on the real one), so the
// two cannot drift apart unnoticed. Extras for tests: a byte limit that fails writes the way a
// full disk does, write and read counts, and corrupt().

const key = (...parts) => JSON.stringify(parts);
const clone = (v) => structuredClone(v);

export class MemDb {
  constructor({ limit = Infinity } = {}) {
    this.models = new Map();
    this.files = new Map();
    this.chunks = new Map(); // key(model, name, index) -> {model, name, index, sha256, bytes: ArrayBuffer}
    this.limit = limit;
    this.writes = 0;
    this.chunkReads = 0;
  }

  close() {}

  bytes() {
    let n = 0;
    for (const c of this.chunks.values()) n += c.bytes.byteLength;
    return n;
  }

  async getModel(id) {
    return clone(this.models.get(id));
  }

  async putModel(record) {
    this.models.set(record.id, clone(record));
  }

  async listModels() {
    return [...this.models.values()].map(clone).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  async getFile(model, name) {
    return clone(this.files.get(key(model, name)));
  }

  async filesOf(model) {
    return [...this.files.values()].filter((r) => r.model === model).map(clone).sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  async putFile(record, { dropFrom = null } = {}) {
    if (dropFrom != null) this.dropChunks(record.model, record.name, dropFrom);
    this.files.set(key(record.model, record.name), clone(record));
  }

  async putChunk(model, name, index, bytes, sha256) {
    const copy = bytes.slice().buffer;
    const old = this.chunks.get(key(model, name, index));
    if (this.bytes() - (old?.bytes.byteLength ?? 0) + copy.byteLength > this.limit) {
      throw new DOMException("the quota has been exceeded", "QuotaExceededError");
    }
    this.writes++;
    this.chunks.set(key(model, name, index), { model, name, index, sha256, bytes: copy });
  }

  async getChunks(model, name, first, last) {
    return [...this.chunks.values()]
      .filter((c) => c.model === model && c.name === name && c.index >= first && c.index <= last)
      .sort((a, b) => a.index - b.index)
      .map((c) => {
        this.chunkReads++;
        return { index: c.index, sha256: c.sha256, bytes: new Uint8Array(c.bytes.slice(0)) };
      });
  }

  async chunkIndices(model, name) {
    return [...this.chunks.values()].filter((c) => c.model === model && c.name === name).map((c) => c.index).sort((a, b) => a - b);
  }

  async chunkIndicesOf(model) {
    const out = new Map();
    for (const c of [...this.chunks.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.index - b.index))) {
      if (c.model !== model) continue;
      if (!out.has(c.name)) out.set(c.name, []);
      out.get(c.name).push(c.index);
    }
    return out;
  }

  async markDamaged(model, name, index) {
    this.chunks.delete(key(model, name, index));
    const rec = this.files.get(key(model, name));
    if (rec && rec.state === "complete") rec.state = "damaged";
  }

  async deleteModel(id) {
    for (const [k, c] of this.chunks) if (c.model === id) this.chunks.delete(k);
    for (const [k, r] of this.files) if (r.model === id) this.files.delete(k);
    this.models.delete(id);
  }

  async deleteAll() {
    this.chunks.clear();
    this.files.clear();
    this.models.clear();
  }

  dropChunks(model, name, from) {
    for (const [k, c] of this.chunks) if (c.model === model && c.name === name && c.index >= from) this.chunks.delete(k);
  }

  /** Test helper: flip one byte of a stored chunk (its recorded sha256 stays as it was). */
  corrupt(model, name, index, at = 0) {
    const c = this.chunks.get(key(model, name, index));
    const u8 = new Uint8Array(c.bytes);
    u8[at] ^= 0xff;
  }
}
