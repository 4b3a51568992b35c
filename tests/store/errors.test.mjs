import assert from "node:assert/strict";
import { test } from "node:test";
import { CorruptChunkError, HttpError, IntegrityError, NetworkError, QuotaError, StoreError, formatBytes, isQuotaError } from "../../site/js/store/errors.mjs";

test("messages name what failed and say what to do", () => {
  const h = new HttpError("http://x/a.bin", 500, "Internal Server Error");
  assert.ok(h instanceof StoreError && h instanceof Error);
  assert.equal(h.name, "HttpError");
  assert.equal(h.message, "http://x/a.bin: HTTP 500 Internal Server Error");
  assert.equal(h.status, 500);
  assert.match(new NetworkError("http://x/a", new TypeError("network error"), { offset: 10 }).message, /^http:\/\/x\/a: the download broke off at byte 10 \(network error\).*resumes/);
  const i = new IntegrityError({ url: "http://x/a", name: "a", expected: "e", actual: "f", chunk: 3, tries: 2 });
  assert.match(i.message, /chunk 3 of a is f, but e was published.*downloaded 2 times/);
  assert.match(new CorruptChunkError({ model: "m", name: "w", index: 4 }).message, /stored chunk 4 is damaged.*only that chunk/);
});

test("the quota message gives the sizes and what to do", () => {
  const e = new QuotaError({ model: "SmolLM2", needed: 269 << 20, stored: 3 << 20, quota: 100 << 20, usage: 90 << 20 });
  assert.equal(e.name, "QuotaError");
  assert.equal(e.message,
    "Not enough storage to keep SmolLM2: it needs 269 MiB more; the model store holds 3.00 MiB already and the " +
    "browser lets this site store 100 MiB and it uses 90.0 MiB (10.0 MiB free). Delete stored models you no " +
    "longer need, or free disk space (the browser's quota grows with free disk), then download again: what is " +
    "stored so far is kept, and the model counts as complete only once every file is in.");
  assert.deepEqual([e.needed, e.stored, e.quota, e.usage], [269 << 20, 3 << 20, 100 << 20, 90 << 20]);
  assert.match(new QuotaError({ model: "m", needed: null, stored: 0 }).message, /needs an unknown amount more.*no storage estimate/);
  assert.ok(isQuotaError(new DOMException("x", "QuotaExceededError")));
});

test("byte counts for people", () => {
  assert.equal(formatBytes(0), "0 bytes");
  assert.equal(formatBytes(1023), "1023 bytes");
  assert.equal(formatBytes(1536), "1.50 KiB");
  assert.equal(formatBytes(269060552), "257 MiB");
  assert.equal(formatBytes(12 * 2 ** 30), "12.0 GiB");
});
