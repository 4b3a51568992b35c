// What is stored, measured against what a source asks for: the plan for each file (skip it, stream
// it from some chunk on, or refetch only damaged chunks), and what "complete" and "verified" mean.
// Pure: records in, decisions out.
//
// A file record (the db's `files` store), one per (model, name):
//   {model, name, url, state, size, chunkSize, published, sha256, chunks, started_at, stored_at}
//   state "partial":  downloading; its chunks are trusted only after the whole file's hash is checked
//   state "complete": written last, after every chunk; sha256 is what the bytes hash to, chunks the
//                     sha256 of each chunk, published the sha256 the source named (null: none)
//   state "damaged":  was complete, then a stored chunk failed its hash and was removed; `chunks`
//                     still says what every chunk must hash to, so only the missing ones are fetched
//   state "absent":   an optional file the server does not have
// A model is complete when each of its files is complete (or absent and optional); verified when,
// besides, each file's sha256 equals a published value.

import { chunkCount, contiguousPrefix, missingRuns, presentBytes } from "./chunks.mjs";

export const NOT_VERIFIED = "not verified against a published value (hashed on arrival)";
export const VERIFIED = "sha256 matches the published value";

/** Can the stored record stand for the file the source describes now? */
export function matches(spec, rec) {
  if (!rec || rec.chunkSize !== spec.chunkSize) return false;
  if (spec.size != null && rec.size != null && rec.size !== spec.size) return false;
  if (spec.sha256 != null) {
    const known = rec.state === "partial" ? rec.published : rec.sha256;
    if (known !== spec.sha256) return false;
  }
  if (spec.chunks != null && rec.chunks != null && !sameList(spec.chunks, rec.chunks)) return false;
  return true;
}

/**
 * What to do for one file, given its record and the indices of the chunks stored for it:
 *   {action: "skip"}                          nothing to fetch
 *   {action: "repair", runs: [[first, last]]} fetch only these chunks, check them against rec.chunks
 *   {action: "stream", from, drop}            read on from chunk `from`; first delete stored chunks
 *                                             from index `drop` on (null: none to delete)
 */
export function planFile(spec, rec, present) {
  const stray = present.length ? 0 : null;
  if (!rec) return { action: "stream", from: 0, drop: stray };
  if (rec.state === "absent") return spec.optional ? { action: "skip" } : { action: "stream", from: 0, drop: stray };
  if (!matches(spec, rec)) return { action: "stream", from: 0, drop: stray };
  if (rec.state === "complete" || rec.state === "damaged") {
    const runs = missingRuns(chunkCount(rec.size, rec.chunkSize), present);
    if (rec.state === "complete" && runs.length === 0) return { action: "skip" };
    return { action: "repair", runs };
  }
  const from = contiguousPrefix(present);
  // Chunks past a gap were not written by one sequential download: do not trust them.
  const drop = present.some((i) => i >= from) ? from : null;
  return { action: "stream", from, drop };
}

/** One file as the manage-downloads view shows it. `spec` (optional) is what the source asks for now. */
export function fileSummary(name, rec, present, spec = null) {
  const size = rec?.size ?? spec?.size ?? null;
  const chunkSize = rec?.chunkSize ?? spec?.chunkSize;
  const state = !rec ? "missing" : spec && rec.state !== "absent" && !matches(spec, rec) ? "stale" : rec.state;
  const optional = Boolean(spec ? spec.optional : rec?.optional);
  const absent = state === "absent";
  const complete = state === "complete" || (absent && (spec ? spec.optional : true));
  const published = spec ? spec.sha256 : rec?.published ?? null;
  const verified = complete && !absent && published != null && rec.sha256 === published;
  return {
    name,
    state,
    size,
    stored: chunkSize ? presentBytes(present, size, chunkSize) : 0,
    complete,
    verified,
    sha256: state === "complete" ? rec.sha256 : null,
    published,
    optional,
    check: absent ? "absent on the server (optional)" : !complete ? null : verified ? VERIFIED : NOT_VERIFIED,
    stored_at: complete && rec ? rec.stored_at : null,
  };
}

/**
 * A model as callers see it: {id, source, files, bytes, total, complete, verified, stored_at}
 * (source: {kind, url, repo, revision, label, model: "instruct" | "base" | null, verified: a sentence or null}).
 * bytes: what its chunks hold now; total: what the whole model takes (null while a size is unknown).
 * With `spec`, the files are the ones the source asks for; without, the ones the model record lists.
 */
export function modelSummary(model, records, presentOf, spec = null) {
  const byName = new Map(records.map((r) => [r.name, r]));
  const specs = new Map((spec?.files ?? []).map((f) => [f.name, f]));
  const names = spec ? spec.files.map((f) => f.name) : model?.files ?? records.map((r) => r.name);
  const files = names.map((n) => fileSummary(n, byName.get(n), presentOf(n), specs.get(n) ?? null));
  const complete = files.length > 0 && files.every((f) => f.complete);
  const sizes = files.filter((f) => f.state !== "absent").map((f) => f.size);
  const src = spec ?? model ?? {};
  return {
    id: spec?.id ?? model?.id,
    source: { kind: src.kind, url: src.url, repo: src.repo ?? null, revision: src.revision ?? null, label: src.label ?? src.url,
              model: src.model ?? null, verified: src.verified ?? null },
    files,
    bytes: files.reduce((a, f) => a + f.stored, 0),
    total: sizes.every((s) => s != null) ? sizes.reduce((a, s) => a + s, 0) : null,
    complete,
    verified: complete && files.every((f) => f.verified || f.state === "absent"),
    stored_at: complete ? latest(files.map((f) => f.stored_at)) : null,
  };
}

function latest(times) {
  const t = times.filter(Boolean).sort();
  return t.length ? t[t.length - 1] : null;
}

function sameList(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
