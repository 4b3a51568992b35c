// Byte sources for the worker: the model's files from the store (site/js/store/) once it holds
// them, else over HTTP, written into Pyodide's file system; a GGUF, or a safetensors file whose
// header is all Python needs, mounted as a file of its full size whose head is in memory.

import { CorruptChunkError, NotStoredError } from "../store/errors.mjs";

const TEXT_FILES = ["tokenizer.json", "tokenizer_config.json", "config.json"];
const OPTIONAL_FILES = ["generation_config.json"];
const GGUF_HEAD = 8 << 20; // the first request for a GGUF: its metadata (vocabulary, template) fits in this
const GGUF_CHUNK = 1 << 20; // later reads, fetched on demand with Range requests
export const WEIGHTS_FILE = "model.safetensors"; // a Hugging Face folder's weights, as the store names them
const SNIFF_BYTES = 200; // enough of a file to tell an HTML page or an error from a model's bytes
const HEADER_MARGIN = 1 << 20; // more than any buffer Python reads ahead with (128 KiB since 3.14)
const EIO = 29; // what a failed read is to Python: OSError, not a fatal error of the whole runtime

/** fetch, whose network errors ("Failed to fetch") say which URL could not be reached. */
export async function fetchFrom(url, init) {
  try {
    return await fetch(url, init);
  } catch (e) {
    throw new Error(`${url}: ${e.message}`);
  }
}

/** What the text side needs from a source: from `store` when it holds the whole model
 * (`stored`), else fetched, and kept (textCache) so a page visited once previews, tokenizes
 * and renders templates offline, the model downloaded or not. A promise, started at once. */
export function textFiles(source, store, stored) {
  if (stored) return source.kind === "gguf" ? storedHead(store, source, ggufName(stored)) : storedFolderFiles(store, source);
  return source.kind === "gguf" ? ggufHead(source.url) : folderFiles(source.url);
}

// -- the text side, kept -------------------------------------------------------------------------------
// The few MB of tokenizer, template and config, in Cache Storage beside the site's runtime cache
// (sw.js keeps "chatlens-runtime" across builds). The network answers first: offline, or when the
// host is gone, the copy kept last time does.
const TEXT_CACHE = "chatlens-runtime";

async function textCache() {
  try {
    return globalThis.caches ? await caches.open(TEXT_CACHE) : null;
  } catch {
    return null; // storage disabled: the text side is fetched each visit
  }
}

/** fetch(url) for a text-side file, network first, the kept copy when the network fails; the
 * copy is refreshed on each good answer. `key` names the copy (a Range request's part). */
async function fetchKept(url, init, key = url) {
  const cache = await textCache();
  try {
    const r = await fetchFrom(url, init);
    if (r.ok && cache) {
      const bytes = await r.clone().arrayBuffer();
      const headers = { "Content-Type": r.headers.get("Content-Type") || "application/octet-stream" };
      for (const h of ["Content-Range"]) if (r.headers.get(h)) headers[h] = r.headers.get(h);
      await cache.put(key, new Response(bytes, { status: 200, headers: { ...headers, "X-Chatlens-Status": String(r.status) } }))
        .catch(() => {}); // full: the next visit fetches again
    }
    return r;
  } catch (e) {
    const kept = cache && await cache.match(key);
    if (!kept) throw e;
    const status = Number(kept.headers.get("X-Chatlens-Status")) || 200;
    return new Response(await kept.arrayBuffer(), { status, headers: kept.headers });
  }
}

/** The text side's files in Pyodide's file system, under `root` (the base model has its own);
 * returns the path chatlens reads. */
export function mountTextFiles(py, source, files, root = "/models") {
  return source.kind === "gguf" ? mountGguf(py, source.url, files, `${root}/gguf`) : writeFolder(py, files, `${root}/hf`);
}

/** A Hugging Face folder's weights file, for the weight plan: its header in memory, the rest of
 * its bytes left where they are (the GPU upload reads them from the store). */
export async function mountWeightsHeader(py, store, source, dir) {
  const size = (await store.file(source, WEIGHTS_FILE)).size;
  const n = Number(new DataView((await store.read(source, WEIGHTS_FILE, { start: 0, end: 8 })).buffer).getBigUint64(0, true));
  // Python's buffered reads run a little past what it asks for: keep a margin past the header.
  const head = await store.read(source, WEIGHTS_FILE, { start: 0, end: Math.min(size, 8 + n + HEADER_MARGIN) });
  mountPartial(py, dir, WEIGHTS_FILE, { head, total: size, url: null });
}

/** read(file, offset, nbytes) over a stored model, for the GPU upload. Reads go forward through
 * one pass over each file's verified chunks (executor.mjs asks in file order), so each chunk is
 * read and checked once. A chunk found damaged is reported to onCorrupt, fetched again alone,
 * and the pass restarted there. */
export function storedReader(store, source, { onCorrupt } = {}) {
  const passes = new Map(); // file -> {iter, chunk}: the pass and the chunk it is at
  const open = (file, at) => {
    const pass = { iter: store.chunks(source, file, { start: at })[Symbol.asyncIterator](), chunk: null };
    passes.set(file, pass);
    return pass;
  };
  async function chunkAt(file, at) {
    let pass = passes.get(file);
    if (!pass || (pass.chunk && at < pass.chunk.offset)) pass = open(file, at); // backwards: a new pass
    while (!pass.chunk || at >= pass.chunk.offset + pass.chunk.bytes.length) {
      let next;
      try {
        next = await pass.iter.next();
      } catch (e) {
        if (!(e instanceof CorruptChunkError)) throw e;
        onCorrupt?.(e);
        await store.repair(source, file);
        pass = open(file, at);
        continue;
      }
      if (next.done) throw new NotStoredError(source.url, `${file} (bytes at ${at})`);
      pass.chunk = next.value;
    }
    return pass.chunk;
  }
  return async (file, offset, nbytes) => {
    const out = new Uint8Array(nbytes);
    for (let at = offset; at < offset + nbytes; ) {
      const chunk = await chunkAt(file, at);
      const from = at - chunk.offset;
      const take = Math.min(chunk.bytes.length - from, offset + nbytes - at);
      out.set(chunk.bytes.subarray(from, from + take), at - offset);
      at += take;
    }
    return out;
  };
}

/** The store's name of a GGUF source's one file. */
export const ggufName = (summary) => summary.files[0].name;

async function storedFolderFiles(store, source) {
  const one = async (name, optional) => {
    try {
      return [name, await store.read(source, name)];
    } catch (e) {
      if (optional && e instanceof NotStoredError) return null;
      throw e;
    }
  };
  const got = await Promise.all([...TEXT_FILES.map((n) => one(n, false)), ...OPTIONAL_FILES.map((n) => one(n, true))]);
  return got.filter(Boolean);
}

async function storedHead(store, source, name) {
  const total = (await store.file(source, name)).size;
  return { head: await store.read(source, name, { start: 0, end: Math.min(total, GGUF_HEAD) }), total, stored: true };
}

/** What bytes that should be a model's file look like when they are something else (a sign-in
 * page, an error as JSON): a few words for the error message, or null. */
export function notAModel(bytes, contentType = "") {
  const start = new TextDecoder().decode(bytes.subarray(0, SNIFF_BYTES)).trimStart();
  if (/text\/html/i.test(contentType) || /^<(!doctype|html|head|body)\b/i.test(start)) return "an HTML page";
  if (start.startsWith("{") && /"(error|message)"\s*:/.test(start)) return `an error: ${start.slice(0, 120)}`;
  return null;
}

// A Hugging Face folder: only the small files the text side needs.
async function folderFiles(base) {
  const fetchOne = async (name, optional) => {
    const url = new URL(name, base).href;
    const r = await fetchKept(url);
    if (!r.ok) {
      if (optional) return null;
      throw new Error(`${url}: HTTP ${r.status}`);
    }
    const bytes = new Uint8Array(await r.arrayBuffer());
    const other = notAModel(bytes, r.headers.get("Content-Type") || "");
    if (other) throw new Error(`${url}: the server sent ${other}, not the model's ${name}`);
    return [name, bytes];
  };
  const got = await Promise.all([...TEXT_FILES.map((n) => fetchOne(n, false)), ...OPTIONAL_FILES.map((n) => fetchOne(n, true))]);
  return got.filter(Boolean);
}

function writeFolder(py, files, dir) {
  py.FS.mkdirTree(dir);
  for (const [name, data] of files) py.FS.writeFile(`${dir}/${name}`, data);
  return dir;
}

// A GGUF: its first 8 MiB with one Range request, and the file's size.
async function ggufHead(url) {
  const part = new URL(url);
  part.searchParams.set("chatlens-kept", `bytes=0-${GGUF_HEAD - 1}`); // the kept copy's name: a part, not the file
  const r = await fetchKept(url, { headers: { Range: `bytes=0-${GGUF_HEAD - 1}` } }, part.href);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  const head = new Uint8Array(await r.arrayBuffer());
  if (String.fromCharCode(...head.subarray(0, 4)) !== "GGUF") {
    const other = notAModel(head, r.headers.get("Content-Type") || "");
    throw new Error(`${url}: not a GGUF file: the server sent ${other || "bytes that do not begin with GGUF"}`);
  }
  let total = head.length;
  if (r.status === 206) {
    const m = /\/(\d+)\s*$/.exec(r.headers.get("Content-Range") || "");
    if (m) total = Number(m[1]);
    else {
      const h = await fetchFrom(url, { method: "HEAD" });
      total = Number(h.headers.get("Content-Length"));
      if (!total) throw new Error(`${url}: the server gives no size for this file`);
    }
  }
  return { head, total };
}

// The GGUF as a file of its full size in Pyodide's file system (see mountPartial). The metadata
// reader rarely needs more than the head.
function mountGguf(py, url, { head, total, stored }, dir) {
  const name = decodeURIComponent(new URL(url).pathname.split("/").pop()) || "model.gguf";
  mountPartial(py, dir, name, { head, total, url: stored ? null : url });
  return `${dir}/${name}`;
}

// A file of `total` bytes in Pyodide's file system of which `head` is in memory; bytes past it
// are fetched on demand from `url`, synchronously (allowed in workers), one 1 MiB Range request
// at a time, or, with no url, are an error (they are in the store, which only reads async).
function mountPartial(py, dir, name, { head, total, url }) {
  py.FS.mkdirTree(dir);
  try {
    py.FS.unlink(`${dir}/${name}`); // a new mount replaces an old one
  } catch {}
  // createLazyFile gives a node whose reads call contents.get(i); its own contents would HEAD
  // the URL on first use, so they are replaced by one that knows the size already.
  const node = py.FS.createLazyFile(dir, name, url || `stored:${name}`, true, false);
  node.contents = new RemoteBytes(url, total, head, name, py.FS);
}

// Pyodide reads a lazy file through get(i); an exception there would end the whole runtime, so a
// byte that cannot be had is an I/O error, which Python raises as OSError.
class RemoteBytes {
  constructor(url, length, head, name, fs) {
    this.url = url;
    this.length = length;
    this.head = head;
    this.name = name;
    this.fs = fs;
    this.chunks = new Map();
  }
  fail(message) {
    console.error(message);
    throw new this.fs.ErrnoError(EIO);
  }
  get(i) {
    if (i < this.head.length) return this.head[i];
    if (!this.url) this.fail(`${this.name}: byte ${i} lies past the ${this.head.length} bytes read from the store`);
    const c = Math.floor((i - this.head.length) / GGUF_CHUNK);
    let chunk = this.chunks.get(c);
    if (!chunk) {
      const start = this.head.length + c * GGUF_CHUNK;
      const end = Math.min(this.length, start + GGUF_CHUNK) - 1;
      const xhr = new XMLHttpRequest();
      xhr.open("GET", this.url, false);
      xhr.setRequestHeader("Range", `bytes=${start}-${end}`);
      xhr.responseType = "arraybuffer";
      try {
        xhr.send(null);
      } catch (e) {
        this.fail(`${this.url}: ${e.message}`);
      }
      if (xhr.status === 200) chunk = new Uint8Array(xhr.response).subarray(start, end + 1);
      else if (xhr.status === 206) chunk = new Uint8Array(xhr.response);
      else this.fail(`${this.url}: HTTP ${xhr.status}`);
      this.chunks.set(c, chunk);
    }
    return chunk[i - this.head.length - c * GGUF_CHUNK];
  }
}
