// Reading a stored file: whole, or any byte range, chunk by chunk, each chunk checked against the
// sha256 its completion record lists before its bytes are handed out. A chunk that fails is
// removed and its file marked damaged (so the next download refetches just that chunk), and the
// caller gets a CorruptChunkError naming it. A range never needs the whole file in memory.

import { chunkLength, chunksOfRange } from "./chunks.mjs";
import { CorruptChunkError, NotStoredError } from "./errors.mjs";
import { sha256Hex } from "./sha256.mjs";

const BATCH_BYTES = 64 << 20; // chunks read per transaction, at most

function checkReadable(rec, model, name) {
  if (!rec || rec.state !== "complete") throw new NotStoredError(model, name);
}

/**
 * Verified pieces of bytes [start, end) of a complete file, in order, as
 * {index, offset (of the piece in the file), bytes: Uint8Array}; a piece is a chunk or a part of one.
 */
export async function* readChunks(db, rec, start = 0, end = rec?.size) {
  checkReadable(rec, rec?.model, rec?.name);
  const span = chunksOfRange(start, end, rec.size, rec.chunkSize);
  if (!span) return;
  const per = Math.max(1, Math.floor(BATCH_BYTES / rec.chunkSize));
  for (let first = span.first; first <= span.last; first += per) {
    const last = Math.min(span.last, first + per - 1);
    const got = new Map((await db.getChunks(rec.model, rec.name, first, last)).map((c) => [c.index, c]));
    for (let i = first; i <= last; i++) {
      const bytes = await verified(db, rec, i, got.get(i));
      const base = i * rec.chunkSize;
      const from = Math.max(start, base) - base;
      const to = Math.min(end, base + bytes.length) - base;
      yield { index: i, offset: base + from, bytes: from === 0 && to === bytes.length ? bytes : bytes.subarray(from, to) };
    }
  }
}

/** Bytes [start, end) of a complete stored file as one Uint8Array. */
export async function readRange(db, rec, start = 0, end = rec?.size) {
  checkReadable(rec, rec?.model, rec?.name);
  if (!(start >= 0 && end <= rec.size && start <= end)) {
    throw new RangeError(`bytes ${start}-${end} are outside ${rec.name} (${rec.size} bytes)`);
  }
  const pieces = [];
  for await (const piece of readChunks(db, rec, start, end)) pieces.push(piece);
  if (pieces.length === 1 && pieces[0].bytes.length === end - start) {
    const b = pieces[0].bytes;
    // A part of a chunk is copied so that the caller holds (and may transfer) only what it asked for.
    return b.byteLength === b.buffer.byteLength ? b : b.slice();
  }
  const out = new Uint8Array(end - start);
  for (const p of pieces) out.set(p.bytes, p.offset - start);
  return out;
}

/** Check every chunk of a complete file; returns the indices that failed (each now removed). */
export async function verifyStored(db, rec) {
  checkReadable(rec, rec?.model, rec?.name);
  const bad = [];
  const per = Math.max(1, Math.floor(BATCH_BYTES / rec.chunkSize));
  const n = rec.chunks.length;
  for (let first = 0; first < n; first += per) {
    const last = Math.min(n - 1, first + per - 1);
    const got = new Map((await db.getChunks(rec.model, rec.name, first, last)).map((c) => [c.index, c]));
    for (let i = first; i <= last; i++) {
      try {
        await verified(db, rec, i, got.get(i));
      } catch (e) {
        if (!(e instanceof CorruptChunkError)) throw e;
        bad.push(i);
      }
    }
  }
  return bad;
}

async function verified(db, rec, index, chunk) {
  const expected = rec.chunks[index];
  const actual = chunk ? await sha256Hex(chunk.bytes) : null;
  if (actual === expected && chunk.bytes.length === chunkLength(index, rec.size, rec.chunkSize)) return chunk.bytes;
  await db.markDamaged(rec.model, rec.name, index);
  throw new CorruptChunkError({ model: rec.model, name: rec.name, index, expected, actual });
}
