// What a model source asks the store to keep: its id, and each file's URL and what is known of it
// in advance (size, sha256, per-chunk sha256). Pure.
//
// A source, as the page describes it (source.mjs, plus what the mirror's manifest or build.json adds):
//   {kind: "hf" | "gguf", url, label?, origin?, repo?, revision?, id?, chunk_size?,
//    model?: "instruct" | "base", verified?: how its files are verified, in a sentence,
//    files?: [{name, size?, sha256?, chunk_size?, chunks?: [sha256 of each chunk], optional?}],
//    manifest?: the mirror's models/manifest.json}
// An "hf" url is a folder (ends with "/"); a "gguf" url is the file itself. Which files a
// browser needs from a Hugging Face folder is said once, in Python (build.json's models.*.files):
// an "hf" source names them in `files`; with a manifest, `files` picks the names and the
// manifest says what each holds.

import { DEFAULT_CHUNK_SIZE, checkChunkSize, chunkCount } from "./chunks.mjs";

const HEX64 = /^[0-9a-f]{64}$/;
const WEIGHTS = /\.(safetensors|gguf|bin|pt|pth|onnx)$/i;

/** {repo, revision, path} of a Hub-style `.../ORG/NAME/resolve/REV/PATH` URL, or null. */
export function parseResolveUrl(url) {
  const m = /(?:^|\/)([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.*)$/.exec(new URL(url).pathname);
  if (!m) return null;
  return { repo: decodeURIComponent(m[1]), revision: decodeURIComponent(m[2]), path: decodeURIComponent(m[3]) };
}

/**
 * The store's key for a source: its repo and revision where it has them (its own, its mirror
 * manifest's, or its URL's: so the same export served by a mirror on another port, or at another
 * path, is the same model), else its URL.
 */
export function modelId(source) {
  if (source.id) return String(source.id);
  const kind = checkKind(source.kind);
  const url = new URL(source.url);
  url.hash = "";
  const parsed = parseResolveUrl(url.href);
  const repo = source.repo ?? source.manifest?.repo ?? parsed?.repo;
  const revision = source.revision ?? source.manifest?.revision ?? parsed?.revision;
  if (repo && revision) return kind === "hf" ? `hf:${repo}@${revision}` : `gguf:${repo}@${revision}/${fileNameOf(url.href)}`;
  return `${kind}:${url.href}`;
}

/**
 * The normalized description of what to store for `source`:
 * {id, kind, url, repo, revision, label, model, verified, files: [{name, url, size, sha256, chunkSize, chunks, optional, role}]}
 * (unknown size or sha256: null; chunks: null unless published).
 */
export function modelSpec(source, { chunkSize = DEFAULT_CHUNK_SIZE } = {}) {
  const kind = checkKind(source.kind);
  if (!source.url) throw new TypeError("a model source needs a url");
  const url = new URL(source.url).href;
  const parsed = parseResolveUrl(url);
  const listed = filesFromManifest(source, kind) ?? source.files ?? defaultFiles(kind, url);
  const baseChunk = checkChunkSize(source.chunk_size ?? source.manifest?.chunk_size ?? chunkSize);
  const seen = new Set();
  const files = listed.map((f) => {
    const file = fileSpec(f, kind, url, baseChunk);
    if (seen.has(file.name)) throw new TypeError(`the source lists ${file.name} twice`);
    seen.add(file.name);
    return file;
  });
  if (kind === "gguf" && files.length !== 1) throw new TypeError("a GGUF source is one file");
  return {
    id: modelId(source),
    kind,
    url,
    repo: source.repo ?? source.manifest?.repo ?? parsed?.repo ?? null,
    revision: source.revision ?? source.manifest?.revision ?? parsed?.revision ?? null,
    label: source.label ?? url,
    model: source.model ?? null,
    verified: source.verified ?? null,
    files,
  };
}

/** The mirror's manifest (models/manifest.json) as a file list, or null when the source has none:
 * the files the source names (an optional one only where the mirror has it), else all the
 * manifest's files but the GGUF, the weights last. */
export function filesFromManifest(source, kind = source.kind) {
  const m = source.manifest;
  if (!m?.files) return null;
  const digest = (name) => m.digests?.[name] ?? {};
  const entry = (name, extra = {}) => ({
    name,
    size: m.files[name],
    sha256: digest(name).sha256 ?? (name === m.gguf ? m.sha256 : null) ?? null,
    chunks: digest(name).chunks ?? null,
    chunk_size: digest(name).chunks ? m.chunk_size : undefined,
    ...extra,
  });
  if (kind === "gguf") {
    const name = m.gguf ?? fileNameOf(source.url);
    if (!(name in m.files)) throw new TypeError(`the mirror's manifest does not list ${name}`);
    return [entry(name)];
  }
  // (the weights last, as build.json lists them: the worker reads the text side first)
  const wanted = source.files ?? Object.keys(m.files).filter((n) => n !== m.gguf)
    .sort((a, b) => WEIGHTS.test(a) - WEIGHTS.test(b)).map((name) => ({ name }));
  return wanted.filter((f) => !f.optional || f.name in m.files).map((f) => {
    if (!(f.name in m.files)) throw new TypeError(`the mirror's manifest does not list ${f.name}`);
    return entry(f.name, f.optional ? { optional: true } : {});
  });
}

function defaultFiles(kind, url) {
  if (kind === "gguf") return [{ name: fileNameOf(url) }];
  throw new TypeError(`${url} is a Hugging Face folder: its source must name the files to keep (build.json's models list them)`);
}

function fileSpec(f, kind, url, baseChunk) {
  const name = checkName(f.name);
  const size = f.size == null ? null : f.size;
  if (size != null && (!Number.isSafeInteger(size) || size < 0)) throw new TypeError(`${name}: size ${f.size} is not a byte count`);
  const sha256 = f.sha256 == null ? null : String(f.sha256).toLowerCase();
  if (sha256 != null && !HEX64.test(sha256)) throw new TypeError(`${name}: ${f.sha256} is not a sha256 in hex`);
  const chunkSize = checkChunkSize(f.chunk_size ?? baseChunk);
  let chunks = null;
  if (f.chunks != null) {
    // Chunk hashes only mean something for a known size and the chunk size they were made with.
    if (size == null) throw new TypeError(`${name}: chunk hashes need the file's size`);
    if (f.chunk_size == null) throw new TypeError(`${name}: chunk hashes need the chunk size they were made with`);
    chunks = f.chunks.map((h) => String(h).toLowerCase());
    if (chunks.length !== chunkCount(size, chunkSize) || !chunks.every((h) => HEX64.test(h))) {
      throw new TypeError(`${name}: expected ${chunkCount(size, chunkSize)} chunk hashes of ${chunkSize} bytes`);
    }
  }
  const fileUrl = kind === "gguf" ? url : new URL(name.split("/").map(encodeURIComponent).join("/"), url).href;
  return {
    name,
    url: fileUrl,
    size,
    sha256,
    chunkSize,
    chunks,
    optional: Boolean(f.optional),
    role: kind === "gguf" || WEIGHTS.test(name) ? "weights" : "text",
  };
}

function checkKind(kind) {
  if (kind !== "hf" && kind !== "gguf") throw new TypeError(`a model source is "hf" or "gguf", not ${JSON.stringify(kind)}`);
  return kind;
}

function checkName(name) {
  const parts = String(name ?? "").split("/");
  if (!name || parts.some((p) => p === "" || p === "." || p === ".." || p.includes("\\"))) {
    throw new TypeError(`${JSON.stringify(name)} is not a file name inside the model's folder`);
  }
  return String(name);
}

function fileNameOf(url) {
  return decodeURIComponent(new URL(url).pathname.split("/").pop()) || "model.gguf";
}
