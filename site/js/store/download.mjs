// Downloading a model's files into the store, chunk by chunk, each chunk hashed as it arrives and
// the whole file hashed as it streams. What can go wrong, and what happens:
//   the connection breaks       -> continue from the last whole chunk with a Range request
//   Range is ignored (200)      -> that file starts over from byte 0, its stored chunks dropped
//   a chunk's bytes are wrong   -> that chunk is fetched again (published chunk hashes), or, when
//                                  only the file's sha256 is published, the whole file once more
//   no bytes for a while        -> that request is dropped and retried like a broken connection
//   5xx / 429                   -> retried after a pause; then an HttpError naming the URL
//   the disk is full            -> a QuotaError with the sizes involved
//   the caller aborts           -> the AbortSignal's reason, at once, after the write of a chunk
//                                  that came whole (what the caller is told is stored, is)
// In every case a file becomes complete only through its completion record, written last, after
// all its chunks are in and its hash matched.

import { chunkCount, chunkLength, parseContentRange, presentBytes, rangeHeader, runSpan } from "./chunks.mjs";
import { HttpError, IntegrityError, NetworkError, QuotaError, SizeError, StoreError, isQuotaError } from "./errors.mjs";
import { storedBytes } from "./inventory.mjs";
import { Progress, throttle } from "./progress.mjs";
import { createSha256, sha256Hex } from "./sha256.mjs";
import { planFile } from "./state.mjs";

const iso = () => new Date().toISOString();
const WHOLE_FILE_TRIES = 2;

// Failures that the retry loop handles; anything else ends the download.
class Retry extends Error {
  constructor(message, { cause, chunk = null, expected = null, actual = null } = {}) {
    super(message);
    Object.assign(this, { cause, chunk, expected, actual });
  }
}

/**
 * Fetch and store the files of `spec` (spec.mjs's modelSpec) that are not stored complete.
 * Options: names (only these files), onProgress(snapshot), signal, fetch, retries (per trouble
 * spot), retryDelay (ms, doubled each time), stallMs (a request that brings no bytes for this
 * long is retried), now (ms clock), progressInterval (ms), speedSettle (ms of bytes before a speed
 * is said: progress.mjs), estimate (async () => {usage, quota}).
 * Resolves once every requested file is complete; nothing is fetched for files that already are.
 */
export async function download(db, spec, opts = {}) {
  const {
    names = null,
    onProgress = null,
    signal = null,
    fetch = globalThis.fetch.bind(globalThis),
    retries = 3,
    retryDelay = 500,
    stallMs = 30_000,
    now = () => performance.now(),
    progressInterval = 100,
    speedSettle = undefined,
    estimate = () => globalThis.navigator?.storage?.estimate?.() ?? null,
  } = opts;
  signal?.throwIfAborted();
  const files = names == null ? spec.files : names.map((n) => {
    const f = spec.files.find((x) => x.name === n);
    if (!f) throw new TypeError(`${spec.label} has no file ${n}`);
    return f;
  });
  const progress = new Progress({ model: spec.id, files, now, settle: speedSettle });
  const emit = throttle((s) => onProgress?.(s), progressInterval, now);
  const ctx = {
    db, spec, progress, signal, fetch, retries, retryDelay, stallMs, estimate,
    report: (force = false, phase = "download") => emit(() => progress.snapshot(phase), force),
  };

  // The model is recorded before any chunk, so that listing shows a partial download and deleting finds it.
  const old = await db.getModel(spec.id);
  await write(ctx, () => db.putModel(modelRecord(spec, old)));
  for (const f of files) {
    signal?.throwIfAborted();
    await storeFile(ctx, f);
  }
  ctx.report(true, "done");
}

function modelRecord(spec, old) {
  return {
    id: spec.id,
    kind: spec.kind,
    url: spec.url,
    repo: spec.repo,
    revision: spec.revision,
    label: spec.label,
    model: spec.model, // "instruct" | "base" | null: which of the page's models, for Manage downloads
    verified: spec.verified, // how the source's files are verified, in a sentence (null: not said)
    files: spec.files.map((f) => f.name),
    created_at: old?.created_at ?? iso(),
    updated_at: iso(),
  };
}

async function storeFile(ctx, f) {
  const { db, spec, progress } = ctx;
  const rec = await db.getFile(spec.id, f.name);
  const plan = planFile(f, rec, await db.chunkIndices(spec.id, f.name));
  if (plan.action === "skip") {
    if (rec.state === "complete" && f.sha256 && rec.published !== f.sha256) {
      await write(ctx, () => db.putFile({ ...rec, published: f.sha256 })); // hashed on arrival, published since
    }
    progress.begin(f.name, { done: rec.size ?? 0, total: rec.size ?? 0 });
    progress.end(f.name, rec.state === "absent" ? "absent" : "skipped");
    ctx.report(true);
    return;
  }
  if (plan.action === "repair") {
    if (await repair(ctx, f, rec, plan.runs)) return;
    return stream(ctx, f, rec, { from: 0, drop: 0 }); // the server ignores Range: the whole file again
  }
  return stream(ctx, f, rec, plan);
}

// -- a file from some chunk on, to its end ----------------------------------------------------------
async function stream(ctx, f, old, plan) {
  const { db, spec, progress, signal } = ctx;
  const cs = f.chunkSize;
  const rec = {
    model: spec.id,
    name: f.name,
    url: f.url,
    state: "partial",
    size: f.size ?? (old?.state === "partial" ? old.size : null),
    chunkSize: cs,
    published: f.sha256,
    optional: f.optional,
    sha256: null,
    chunks: null,
    started_at: old?.state === "partial" ? old.started_at : iso(),
    stored_at: null,
  };
  await write(ctx, () => db.putFile(rec, { dropFrom: plan.drop }));

  let hasher = createSha256();
  let hashes = [];
  let next = plan.from; // chunks 0..next-1 are stored and fed to the hasher
  progress.begin(f.name, { done: 0, total: rec.size });
  if (next > 0) next = await rehash(ctx, f, rec, next, hasher, hashes);
  progress.begin(f.name, { done: Math.min(next * cs, rec.size ?? Infinity), total: rec.size });
  ctx.report(true);

  let failures = 0;
  let wholeTries = 1;
  for (;;) {
    signal?.throwIfAborted();
    const offset = next * cs;
    let ended = rec.size != null && offset >= rec.size; // everything was stored; only the completion is missing
    if (!ended) {
      const before = next;
      try {
        const got = await request(ctx, f, offset, null);
        if (got.absent) return absent(ctx, f, rec);
        if (got.start !== offset) {
          // The whole file came back, not the part asked for: start the file over.
          await write(ctx, () => db.putFile(rec, { dropFrom: 0 }));
          next = 0;
          hasher = createSha256();
          hashes = [];
          progress.reset(f.name, 0);
        }
        if (got.total != null) {
          if (f.size != null && got.total !== f.size) {
            got.cancel();
            throw new SizeError({ url: f.url, name: f.name, expected: f.size, actual: got.total });
          }
          if (rec.size == null) {
            rec.size = got.total;
            await write(ctx, () => db.putFile(rec));
          }
        }
        progress.total(f.name, rec.size ?? (got.length != null ? got.start + got.length : null));
        const stopAt = rec.size == null ? Infinity : chunkCount(rec.size, cs);
        next = await slice(ctx, f, got, next, stopAt, rec.size, async (i, bytes) => {
          const hash = await sha256Hex(bytes);
          if (f.chunks && hash !== f.chunks[i]) {
            throw new Retry(`chunk ${i} does not match its published sha256`, { chunk: i, expected: f.chunks[i], actual: hash });
          }
          hasher.update(bytes);
          hashes[i] = hash;
          return hash;
        });
        if (rec.size == null) rec.size = hashes.length ? (hashes.length - 1) * cs + (got.lastLength ?? cs) : 0;
        ended = true;
      } catch (e) {
        if (!(e instanceof Retry)) throw e;
        if (e.next != null) next = e.next;
        failures = next > before ? 1 : failures + 1;
        if (failures > ctx.retries) throw givenUp(e, f, failures, next * cs);
        await pause(ctx, failures);
        continue;
      }
    }
    const digest = hasher.hex();
    if (f.sha256 && digest !== f.sha256) {
      // Without chunk hashes nothing says which bytes were wrong: drop them all, and fetch the
      // file once more (only once: it may be hundreds of MB).
      await write(ctx, () => db.putFile(rec, { dropFrom: 0 }));
      if (f.chunks || wholeTries >= WHOLE_FILE_TRIES || wholeTries > ctx.retries) {
        throw new IntegrityError({ url: f.url, name: f.name, expected: f.sha256, actual: digest, tries: wholeTries });
      }
      wholeTries++;
      next = 0;
      hasher = createSha256();
      hashes = [];
      progress.reset(f.name, 0);
      continue;
    }
    signal?.throwIfAborted();
    await write(ctx, () => db.putFile({ ...rec, state: "complete", sha256: digest, chunks: hashes, stored_at: iso() }, { strict: true }));
    progress.end(f.name, "stored");
    ctx.report(true);
    return;
  }
}

// Feed the chunks a previous download stored to the file's hasher, checking each on the way.
// Returns how many are good; chunks from the first bad one on are dropped.
async function rehash(ctx, f, rec, count, hasher, hashes) {
  const { db, progress } = ctx;
  const per = Math.max(1, Math.floor((64 << 20) / f.chunkSize));
  for (let first = 0; first < count; first += per) {
    const last = Math.min(count - 1, first + per - 1);
    const got = new Map((await db.getChunks(rec.model, rec.name, first, last)).map((c) => [c.index, c]));
    for (let i = first; i <= last; i++) {
      const c = got.get(i);
      const want = rec.size == null ? f.chunkSize : chunkLength(i, rec.size, f.chunkSize);
      const hash = c && c.bytes.length === want ? await sha256Hex(c.bytes) : null;
      if (!hash || hash !== c.sha256 || (f.chunks && hash !== f.chunks[i])) {
        await write(ctx, () => db.putFile(rec, { dropFrom: i }));
        return i;
      }
      hasher.update(c.bytes);
      hashes[i] = hash;
      progress.credit(f.name, c.bytes.length);
      ctx.report(false, "verify");
    }
  }
  return count;
}

// -- only some chunks of a file that was complete -------------------------------------------------
// Returns false when the server ignores Range (the caller then refetches the whole file).
async function repair(ctx, f, rec, runs) {
  const { db, progress, signal } = ctx;
  const present = await db.chunkIndices(rec.model, rec.name);
  progress.begin(f.name, { done: presentBytes(present, rec.size, rec.chunkSize), total: rec.size });
  ctx.report(true);
  for (const [a, b] of runs) {
    let next = a;
    let failures = 0;
    while (next <= b) {
      signal?.throwIfAborted();
      const { start, end } = runSpan(next, b, rec.size, rec.chunkSize);
      const before = next;
      try {
        const got = await request(ctx, f, start, end);
        if (got.absent || got.start !== start) {
          got.cancel?.();
          return false;
        }
        next = await slice(ctx, f, got, next, b + 1, rec.size, async (i, bytes) => {
          const hash = await sha256Hex(bytes);
          if (hash !== rec.chunks[i]) throw new Retry(`chunk ${i} does not match its sha256`, { chunk: i, expected: rec.chunks[i], actual: hash });
          return hash;
        });
      } catch (e) {
        if (!(e instanceof Retry)) throw e;
        if (e.next != null) next = e.next;
        failures = next > before ? 1 : failures + 1;
        if (failures > ctx.retries) throw givenUp(e, f, failures, next * rec.chunkSize);
        await pause(ctx, failures);
      }
    }
  }
  signal?.throwIfAborted();
  await write(ctx, () => db.putFile({ ...rec, state: "complete", repaired_at: iso() }, { strict: true }));
  progress.end(f.name, "stored");
  ctx.report(true);
  return true;
}

async function absent(ctx, f, rec) {
  await write(ctx, () => ctx.db.putFile({ ...rec, state: "absent", size: 0, stored_at: iso() }, { dropFrom: 0, strict: true }));
  ctx.progress.end(f.name, "absent");
  ctx.report(true);
}

// -- HTTP -------------------------------------------------------------------------------------------
// One request for bytes [start, end) (end null: to the end of the file). Resolves with
// {body reader, start (of the bytes that come), total (file size, when the server says),
// length (of this response, when known), cancel}; {absent: true} for an optional file's 404.
async function request(ctx, f, start, end) {
  const { signal } = ctx;
  const ranged = start > 0 || end != null;
  // Each request has its own controller: the caller's signal aborts it, and so does a stall (no
  // bytes for stallMs), which the retry loop then treats like a broken connection.
  const ac = new AbortController();
  const follow = () => ac.abort(signal.reason);
  signal?.addEventListener("abort", follow, { once: true });
  let timer = null;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => ac.abort(new DOMException(`no data for ${ctx.stallMs / 1000} s`, "TimeoutError")), ctx.stallMs);
  };
  const release = () => {
    clearTimeout(timer);
    signal?.removeEventListener("abort", follow);
  };
  arm();
  let r;
  try {
    r = await ctx.fetch(f.url, { headers: ranged ? { Range: rangeHeader(start, end) } : {}, signal: ac.signal, cache: "no-store" });
  } catch (e) {
    release();
    if (signal?.aborted) throw signal.reason;
    throw new Retry(`${f.url}: ${e.message}`, { cause: e });
  }
  const cancel = () => {
    release();
    r.body?.cancel().catch(() => {});
  };
  const got = (fields) => ({ body: r.body, cancel, arm, release, ...fields });
  const length = r.headers.get("Content-Length") == null ? null : Number(r.headers.get("Content-Length"));
  if (r.status === 206) {
    const cr = parseContentRange(r.headers.get("Content-Range"));
    if (!cr || cr.start !== start) {
      cancel();
      throw new StoreError(`${f.url}: a partial response (206) whose Content-Range (${r.headers.get("Content-Range")}) ` +
        `is not the bytes asked for (${rangeHeader(start, end)}); a server on another origin must list Content-Range ` +
        "in Access-Control-Expose-Headers", { url: f.url });
    }
    return got({ start: cr.start, total: cr.total, length: cr.end - cr.start });
  }
  if (r.status === 200) return got({ start: 0, total: null, length });
  cancel();
  if (r.status === 416 && end == null) {
    // Asked from exactly the end of a file whose size was unknown: nothing more to come.
    const total = /\*\/(\d+)\s*$/.exec(r.headers.get("Content-Range") || "");
    if (total && Number(total[1]) === start) return got({ body: null, start, total: start, length: 0 });
  }
  if (r.status === 404 && f.optional && start === 0) return { absent: true };
  if (r.status >= 500 || r.status === 429 || r.status === 408) {
    const e = new Retry(`${f.url}: HTTP ${r.status}`);
    e.status = r.status;
    e.statusText = r.statusText;
    throw e;
  }
  throw new HttpError(f.url, r.status, r.statusText);
}

// Cut a response body into chunks first, first+1, ... (stopping before index stopAt), and for
// each: check(i, bytes) -> its sha256 (or throws), then store it. One write is in flight while the
// next chunk arrives. Returns the index after the last chunk stored; sets got.lastLength. A Retry
// thrown from here carries `next`: the first chunk not stored.
async function slice(ctx, f, got, first, stopAt, size, check) {
  const { db, progress, signal, spec } = ctx;
  const cs = f.chunkSize;
  const whole = size != null && stopAt === chunkCount(size, cs); // this response runs to the file's end
  const lengthOf = (i) => (size == null ? cs : chunkLength(i, size, cs));
  const reader = got.body ? got.body.getReader() : null;
  let index = first;
  let buf = null;
  let fill = 0;
  let pending = null; // the previous chunk's write: resolves to null, or to its error
  const settle = async () => {
    const err = pending && (await pending);
    pending = null;
    if (err) throw err;
  };
  const commit = async (bytes) => {
    const hash = await check(index, bytes);
    await settle();
    const i = index;
    pending = write(ctx, () => db.putChunk(spec.id, f.name, i, bytes, hash)).then(() => null, (e) => e);
    index++;
    got.lastLength = bytes.length;
  };
  let done = !reader;
  try {
    while (!done && index < stopAt) {
      let value;
      try {
        ({ value, done } = await reader.read());
      } catch (e) {
        if (signal?.aborted) throw signal.reason;
        throw new Retry(`${f.url}: ${e.message}`, { cause: e }); // a broken connection, or a stall
      }
      if (done) break;
      got.arm();
      for (let pos = 0; pos < value.length;) {
        if (index >= stopAt) {
          if (whole) throw new SizeError({ url: f.url, name: f.name, expected: size, actual: `more than ${size}` });
          break; // bytes past a bounded request's end
        }
        buf ??= new Uint8Array(lengthOf(index));
        const take = Math.min(buf.length - fill, value.length - pos);
        buf.set(value.subarray(pos, pos + take), fill);
        fill += take;
        pos += take;
        progress.add(f.name, take);
        if (fill === buf.length) {
          await commit(buf);
          buf = null;
          fill = 0;
        }
      }
      ctx.report();
    }
    if (fill > 0 && size == null) {
      await commit(buf.subarray(0, fill)); // an unknown size: the body's end is the file's end
    } else if (index < stopAt && size != null) {
      throw new Retry(`${f.url}: the response ended early, at byte ${index * cs + fill}`);
    }
    await settle();
    return index;
  } catch (e) {
    if (e instanceof Retry) {
      await settle(); // a failed write (a full disk) outranks the network's trouble
      e.next = index;
    } else {
      await pending; // a chunk that came whole is stored before the caller hears (a cancel says it stays)
    }
    throw e;
  } finally {
    got.release();
    if (!done) reader?.cancel().catch(() => {});
  }
}

// -- helpers ------------------------------------------------------------------------------------------
// A store write; a full disk becomes a QuotaError that says how much is needed and held.
async function write(ctx, op) {
  try {
    return await op();
  } catch (e) {
    if (!isQuotaError(e)) throw e;
    const snap = ctx.progress.snapshot();
    const needed = snap.overall.total != null ? snap.overall.total - snap.overall.done : snap.file?.total != null ? snap.file.total - snap.file.done : null;
    let stored = null;
    let est = null;
    try {
      stored = await storedBytes(ctx.db);
      est = await ctx.estimate();
    } catch {
      // the message says what is unknown
    }
    throw new QuotaError({ model: ctx.spec.label, needed, stored, quota: est?.quota ?? null, usage: est?.usage ?? null, cause: e });
  }
}

/** The error a file's download ends with once its retries are spent: the chunk that kept
 * failing its hash, the HTTP status, or the network failure at `offset`. */
function givenUp(e, f, tries, offset) {
  if (e.chunk != null) return new IntegrityError({ url: f.url, name: f.name, expected: e.expected, actual: e.actual, chunk: e.chunk, tries });
  if (e.status) return new HttpError(f.url, e.status, e.statusText);
  return new NetworkError(f.url, e.cause ?? e, { offset });
}

function pause(ctx, failures) {
  const ms = Math.min(ctx.retryDelay * 2 ** (failures - 1), 8000);
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(t);
      reject(ctx.signal.reason);
    };
    const t = setTimeout(() => {
      ctx.signal?.removeEventListener("abort", done);
      resolve();
    }, ms);
    ctx.signal?.addEventListener("abort", done, { once: true });
  });
}
