// The store's errors. Each says what happened, to which file or URL, and what to do, because the
// page shows `message` as it is; the fields let code react without parsing text. Pure.

export class StoreError extends Error {
  constructor(message, fields = {}) {
    super(message);
    this.name = new.target.name;
    Object.assign(this, fields);
  }
}

/** The server answered with a status the download cannot use (404, 500, ...). */
export class HttpError extends StoreError {
  constructor(url, status, statusText = "") {
    super(`${url}: HTTP ${status}${statusText ? ` ${statusText}` : ""}`, { url, status });
  }
}

/** The connection failed or broke off, and retrying did not help. */
export class NetworkError extends StoreError {
  constructor(url, cause, { offset = null } = {}) {
    const at = offset == null ? "" : ` at byte ${offset}`;
    super(`${url}: the download broke off${at} (${cause?.message ?? cause}); what is stored so far is kept and ` +
      "downloading again resumes from it", { url, offset, cause });
  }
}

/** Bytes that do not match the published sha256 (of the file, or of one chunk of it). */
export class IntegrityError extends StoreError {
  constructor({ url, name, expected, actual, chunk = null, tries = 1 }) {
    const what = chunk == null ? name : `chunk ${chunk} of ${name}`;
    const again = tries > 1 ? ` (downloaded ${tries} times, same result)` : "";
    super(`${url}: the sha256 of ${what} is ${actual}, but ${expected} was published for it${again}: the server ` +
      "sends other bytes than the source names; nothing of it is kept as complete", { url, name, expected, actual, chunk, tries });
  }
}

/** The server's file is not the size the source promised. */
export class SizeError extends StoreError {
  constructor({ url, name, expected, actual }) {
    super(`${url}: ${name} is ${actual} bytes on the server, but the source lists ${expected}`,
      { url, name, expected, actual });
  }
}

/** A chunk whose stored bytes no longer match their sha256: removed, and fetched again on the next download. */
export class CorruptChunkError extends StoreError {
  constructor({ model, name, index, expected = null, actual = null }) {
    super(`${name} of ${model}: stored chunk ${index} is damaged (its sha256 no longer matches); it was removed ` +
      "and only that chunk is downloaded again", { model, fileName: name, index, expected, actual });
  }
}

/** A file asked for that is not stored complete. */
export class NotStoredError extends StoreError {
  constructor(model, name) {
    super(`${name} of ${model} is not stored (or not complete): download the model first`, { model, fileName: name });
  }
}

/** The browser refused a write for lack of space. */
export class QuotaError extends StoreError {
  constructor({ model, needed, stored, quota = null, usage = null, cause = null }) {
    super(quotaMessage({ model, needed, stored, quota, usage }), { model, needed, stored, quota, usage, cause });
  }
}

export function quotaMessage({ model, needed, stored, quota, usage }) {
  const room = quota == null || usage == null
    ? "the browser gives no storage estimate"
    : `the browser lets this site store ${formatBytes(quota)} and it uses ${formatBytes(usage)} ` +
      `(${formatBytes(Math.max(0, quota - usage))} free)`;
  return `Not enough storage to keep ${model}: it needs ${formatBytes(needed)} more; the model store holds ` +
    `${formatBytes(stored)} already and ${room}. Delete stored models you no longer need, or free disk space ` +
    "(the browser's quota grows with free disk), then download again: what is stored so far is kept, " +
    "and the model counts as complete only once every file is in.";
}

export function isQuotaError(e) {
  return e?.name === "QuotaExceededError";
}

export function formatBytes(n) {
  if (n == null || !Number.isFinite(n)) return "an unknown amount";
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  const K = 2 ** 10;
  let i = 0;
  let v = n;
  while (v >= K && i < units.length - 1) {
    v /= K;
    i++;
  }
  return i === 0 ? `${n} bytes` : `${v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[i]}`;
}
