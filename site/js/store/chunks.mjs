// Chunk geometry: how a file of a given size splits into fixed-size chunks, which chunks a byte
// range touches, which are missing, and the HTTP Range headers that fetch them. Pure: no
// browser globals, so node --test covers it.

export const DEFAULT_CHUNK_SIZE = 16 << 20; // 16 MiB

function check(n, what) {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${what} must be a whole number >= 0, not ${n}`);
}

export function checkChunkSize(chunkSize) {
  if (!Number.isSafeInteger(chunkSize) || chunkSize <= 0) {
    throw new RangeError(`the chunk size must be a whole number > 0, not ${chunkSize}`);
  }
  return chunkSize;
}

/** How many chunks a file of `size` bytes has (an empty file has none). */
export function chunkCount(size, chunkSize) {
  check(size, "a file size");
  checkChunkSize(chunkSize);
  return Math.ceil(size / chunkSize);
}

/** Bytes [start, end) of chunk `index`; the last chunk may be short. */
export function chunkSpan(index, size, chunkSize) {
  const n = chunkCount(size, chunkSize);
  if (!Number.isSafeInteger(index) || index < 0 || index >= n) {
    throw new RangeError(`chunk ${index} is outside a ${size}-byte file of ${n} chunks`);
  }
  const start = index * chunkSize;
  return { start, end: Math.min(size, start + chunkSize) };
}

export function chunkLength(index, size, chunkSize) {
  const { start, end } = chunkSpan(index, size, chunkSize);
  return end - start;
}

/** The chunks that bytes [start, end) of a file touch: {first, last}, inclusive; null if empty. */
export function chunksOfRange(start, end, size, chunkSize) {
  check(start, "a range start");
  check(end, "a range end");
  checkChunkSize(chunkSize);
  if (start > end || end > size) throw new RangeError(`bytes ${start}-${end} are outside a ${size}-byte file`);
  if (start === end) return null;
  return { first: Math.floor(start / chunkSize), last: Math.floor((end - 1) / chunkSize) };
}

/** How many chunks from index 0 on are all present: a sequential download resumes there. */
export function contiguousPrefix(present) {
  const have = new Set(present);
  let k = 0;
  while (have.has(k)) k++;
  return k;
}

/** Runs [first, last] (inclusive) of the chunks of 0..count-1 that `present` lacks. */
export function missingRuns(count, present) {
  check(count, "a chunk count");
  const have = new Set(present);
  const runs = [];
  for (let i = 0; i < count; i++) {
    if (have.has(i)) continue;
    if (runs.length && runs[runs.length - 1][1] === i - 1) runs[runs.length - 1][1] = i;
    else runs.push([i, i]);
  }
  return runs;
}

/** The byte range [start, end) that chunks first..last cover. */
export function runSpan(first, last, size, chunkSize) {
  return { start: chunkSpan(first, size, chunkSize).start, end: chunkSpan(last, size, chunkSize).end };
}

/** Bytes that the present chunks of a file hold (unknown size: every chunk counted as full). */
export function presentBytes(present, size, chunkSize) {
  let total = 0;
  for (const i of new Set(present)) {
    total += size == null ? chunkSize : i < chunkCount(size, chunkSize) ? chunkLength(i, size, chunkSize) : 0;
  }
  return total;
}

/** An HTTP Range header value for bytes [start, end); end null means "to the end". */
export function rangeHeader(start, end = null) {
  check(start, "a range start");
  if (end == null) return `bytes=${start}-`;
  if (!(end > start)) throw new RangeError(`empty range ${start}-${end}`);
  return `bytes=${start}-${end - 1}`;
}

/** `Content-Range: bytes S-E/T` as {start, end (exclusive), total (null for "*")}, else null. */
export function parseContentRange(value) {
  const m = /^\s*bytes\s+(\d+)-(\d+)\/(\d+|\*)\s*$/i.exec(value || "");
  if (!m) return null;
  const start = Number(m[1]);
  const end = Number(m[2]) + 1;
  const total = m[3] === "*" ? null : Number(m[3]);
  if (end <= start || (total != null && end > total)) return null;
  return { start, end, total };
}
