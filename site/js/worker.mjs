// The module worker where all Python runs: boot Pyodide from the site's own files, install the
// wheels build.json lists, import chatlens, read the tokenizer and chat template from the model
// source, then answer the page's requests one at a time.
//
// Page -> worker: {id, type: "init", args: {source, build}} | {id, type: "preview" | "run", args}
//   (build: build.json as the page read it; preview and run args always carry reserve)
// Worker -> page: {id, ok: true, result} | {id, ok: false, error} | {type: "status", state, detail}

const SITE = new URL("../", import.meta.url);
const TEXT_FILES = ["tokenizer.json", "tokenizer_config.json", "config.json"];
const OPTIONAL_FILES = ["generation_config.json"];
const GGUF_HEAD = 8 << 20; // the first request for a GGUF: its metadata (vocabulary, template) fits in this
const GGUF_CHUNK = 1 << 20; // later reads, fetched on demand with Range requests

// Python side: thin glue between JSON messages and chatlens.
const BRIDGE = `
import json
from chatlens import presets
from chatlens.chat import preview as _preview
from chatlens.errors import ChatlensError
from chatlens.source import load_text_side

_text = None

def load(path):
    global _text
    _text = load_text_side(path)
    return json.dumps({"eos_token": _text.eos_token, "n_ctx": _text.config.n_ctx})

def preview(args_json):
    a = json.loads(args_json)
    try:
        preset = a.get("preset")
        if "system" in a:
            system = a["system"]
            preset = preset or (None if system is None else "custom")
        else:
            system = presets.system_for(preset, a.get("custom"))
        if isinstance(system, str) and not system.strip():
            system, preset = None, "none"  # empty custom text: the template's default, as with None
        rec = _preview(_text.tokenizer, _text.template, system=system, messages=a["messages"],
                       window=int(a.get("window", 1024)), reserve=int(a["reserve"]),
                       preset=preset, max_tokens=a.get("maxTokens"))
        rec["special_ids"] = sorted(set(rec["prompt_ids"]) & _text.tokenizer.special_ids)
        return json.dumps({"record": rec})
    except (ChatlensError, KeyError, TypeError, ValueError) as e:
        return json.dumps({"error": str(e) or type(e).__name__, "type": type(e).__name__})
`;

let py = null;
let bridge = null;
let booting = null;

const status = (state, detail = "") => self.postMessage({ type: "status", state, detail });

// fetch, whose network errors ("Failed to fetch") say which URL could not be reached.
async function fetchFrom(url, init) {
  try {
    return await fetch(url, init);
  } catch (e) {
    throw new Error(`${url}: ${e.message}`);
  }
}

async function boot(source, build) {
  status("booting", "starting Python (Pyodide)");
  // The model's small files download while Python starts.
  const download = source.kind === "gguf" ? ggufHead(source.url) : folderFiles(source.url);
  download.catch(() => {}); // reported below, once awaited
  const indexURL = new URL(build.pyodide.index, SITE).href;
  const { loadPyodide } = await import(new URL("pyodide.mjs", indexURL).href);
  const pyodide = loadPyodide({
    indexURL,
    packageBaseUrl: new URL(build.pyodide.packages, SITE).href,
    stdout: () => {},
    stderr: (line) => console.warn("[python]", line),
  });
  await Promise.race([pyodide, download.then(() => pyodide)]); // a failed download fails the boot now
  py = await pyodide;
  status("booting", "installing chatlens");
  await py.loadPackage(build.wheels.map((w) => new URL(w, SITE).href), { messageCallback: () => {} });
  py.runPython(BRIDGE);
  bridge = { load: py.globals.get("load"), preview: py.globals.get("preview") };

  status("loading", `reading the tokenizer and chat template from ${source.label}`);
  const path = source.kind === "gguf" ? mountGguf(source.url, await download) : writeFolder(await download);
  const info = JSON.parse(bridge.load(path));
  status("ready", source.label);
  return { source, info, pyodide: build.pyodide.version };
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

function writeFolder(files) {
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
function mountGguf(url, { head, total }) {
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

function preview(args) {
  const out = JSON.parse(bridge.preview(JSON.stringify(args)));
  if (out.error) {
    const e = new Error(out.error);
    e.name = out.type;
    throw e;
  }
  return out.record;
}

const handlers = {
  async init({ source, build }) {
    booting ??= boot(source, build).catch((e) => {
      status("error", errorText(e));
      throw e;
    });
    return booting;
  },
  async preview(args) {
    await booting;
    return preview(args);
  },
  async run() {
    await booting;
    throw new Error(
      "no replies in the browser yet: they need the model's weights, which the next release downloads. " +
        "Recorded mode has real replies.",
    );
  },
};

// One request at a time, in order: Python is single-threaded and previews must not interleave.
let queue = Promise.resolve();
self.onmessage = (event) => {
  const { id, type, args } = event.data;
  queue = queue.then(async () => {
    try {
      const handler = handlers[type];
      if (!handler) throw new Error(`unknown request ${type}`);
      self.postMessage({ id, ok: true, result: await handler(args || {}) });
    } catch (e) {
      self.postMessage({ id, ok: false, error: errorText(e), name: e?.name });
    }
  });
};

function errorText(e) {
  const text = String(e?.message ?? e);
  // A Python traceback: its last line says what went wrong.
  if (/Traceback \(most recent call last\)/.test(text)) {
    const lines = text.trim().split("\n");
    return lines[lines.length - 1];
  }
  return text;
}
