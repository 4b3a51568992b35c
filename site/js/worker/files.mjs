// Byte sources for the worker: the model's small files fetched over HTTP and written into
// Pyodide's file system, and a GGUF mounted as a file whose bytes are fetched on demand.

const TEXT_FILES = ["tokenizer.json", "tokenizer_config.json", "config.json"];
const OPTIONAL_FILES = ["generation_config.json"];
const GGUF_HEAD = 8 << 20; // the first request for a GGUF: its metadata (vocabulary, template) fits in this
const GGUF_CHUNK = 1 << 20; // later reads, fetched on demand with Range requests

/** fetch, whose network errors ("Failed to fetch") say which URL could not be reached. */
export async function fetchFrom(url, init) {
  try {
    return await fetch(url, init);
  } catch (e) {
    throw new Error(`${url}: ${e.message}`);
  }
}

/** What the text side needs from a source, fetched (a promise, started at once). */
export function textFiles(source) {
  return source.kind === "gguf" ? ggufHead(source.url) : folderFiles(source.url);
}

/** The text side's files in Pyodide's file system; returns the path chatlens reads. */
export function mountTextFiles(py, source, files) {
  return source.kind === "gguf" ? mountGguf(py, source.url, files) : writeFolder(py, files);
}

// A Hugging Face folder: only the small files the text side needs.
async function folderFiles(base) {
  const fetchOne = async (name, optional) => {
    const url = new URL(name, base).href;
    const r = await fetchFrom(url);
    if (!r.ok) {
      if (optional) return null;
      throw new Error(`${url}: HTTP ${r.status}`);
    }
    return [name, new Uint8Array(await r.arrayBuffer())];
  };
  const got = await Promise.all([...TEXT_FILES.map((n) => fetchOne(n, false)), ...OPTIONAL_FILES.map((n) => fetchOne(n, true))]);
  return got.filter(Boolean);
}

function writeFolder(py, files) {
  const dir = "/models/hf";
  py.FS.mkdirTree(dir);
  for (const [name, data] of files) py.FS.writeFile(`${dir}/${name}`, data);
  return dir;
}

// A GGUF: its first 8 MiB with one Range request, and the file's size.
async function ggufHead(url) {
  const r = await fetchFrom(url, { headers: { Range: `bytes=0-${GGUF_HEAD - 1}` } });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  const head = new Uint8Array(await r.arrayBuffer());
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

// The GGUF as a file of its full size in Pyodide's file system, whose bytes past the head are
// fetched on demand, synchronously (allowed in workers), one 1 MiB Range request at a time.
// The metadata reader rarely needs more than the head.
function mountGguf(py, url, { head, total }) {
  const dir = "/models/gguf";
  const name = decodeURIComponent(new URL(url).pathname.split("/").pop()) || "model.gguf";
  py.FS.mkdirTree(dir);
  // createLazyFile gives a node whose reads call contents.get(i); its own contents would HEAD
  // the URL on first use, so they are replaced by one that knows the size already.
  const node = py.FS.createLazyFile(dir, name, url, true, false);
  node.contents = new RemoteBytes(url, total, head);
  return `${dir}/${name}`;
}

class RemoteBytes {
  constructor(url, length, head) {
    this.url = url;
    this.length = length;
    this.head = head;
    this.chunks = new Map();
  }
  get(i) {
    if (i < this.head.length) return this.head[i];
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
        throw new Error(`${this.url}: ${e.message}`);
      }
      if (xhr.status === 200) chunk = new Uint8Array(xhr.response).subarray(start, end + 1);
      else if (xhr.status === 206) chunk = new Uint8Array(xhr.response);
      else throw new Error(`${this.url}: HTTP ${xhr.status}`);
      this.chunks.set(c, chunk);
    }
    return chunk[i - this.head.length - c * GGUF_CHUNK];
  }
}
