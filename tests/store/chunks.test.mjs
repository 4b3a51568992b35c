import assert from "node:assert/strict";
import { test } from "node:test";
import {
  DEFAULT_CHUNK_SIZE, chunkCount, chunkLength, chunkSpan, chunksOfRange, contiguousPrefix, missingRuns,
  parseContentRange, presentBytes, rangeHeader, runSpan,
} from "../../site/js/store/chunks.mjs";

test("the default chunk is 16 MiB", () => assert.equal(DEFAULT_CHUNK_SIZE, 16777216));

test("chunk counts and spans, the last chunk short", () => {
  assert.equal(chunkCount(0, 10), 0);
  assert.equal(chunkCount(1, 10), 1);
  assert.equal(chunkCount(10, 10), 1);
  assert.equal(chunkCount(11, 10), 2);
  assert.deepEqual(chunkSpan(0, 25, 10), { start: 0, end: 10 });
  assert.deepEqual(chunkSpan(2, 25, 10), { start: 20, end: 25 });
  assert.equal(chunkLength(2, 25, 10), 5);
  assert.equal(chunkLength(1, 20, 10), 10);
  assert.throws(() => chunkSpan(3, 25, 10), RangeError);
  assert.throws(() => chunkSpan(-1, 25, 10), RangeError);
  assert.throws(() => chunkCount(10, 0), RangeError);
  assert.throws(() => chunkCount(-1, 10), RangeError);
  assert.throws(() => chunkCount(1.5, 10), RangeError);
});

test("a 269 MB file in 16 MiB chunks", () => {
  const size = 269060552;
  const n = chunkCount(size, DEFAULT_CHUNK_SIZE);
  assert.equal(n, 17);
  let total = 0;
  for (let i = 0; i < n; i++) total += chunkLength(i, size, DEFAULT_CHUNK_SIZE);
  assert.equal(total, size);
});

test("the chunks a byte range touches", () => {
  assert.deepEqual(chunksOfRange(0, 25, 25, 10), { first: 0, last: 2 });
  assert.deepEqual(chunksOfRange(9, 11, 25, 10), { first: 0, last: 1 });
  assert.deepEqual(chunksOfRange(10, 20, 25, 10), { first: 1, last: 1 });
  assert.deepEqual(chunksOfRange(24, 25, 25, 10), { first: 2, last: 2 });
  assert.equal(chunksOfRange(5, 5, 25, 10), null);
  assert.throws(() => chunksOfRange(0, 26, 25, 10), RangeError);
  assert.throws(() => chunksOfRange(6, 5, 25, 10), RangeError);
});

test("resume point and missing runs", () => {
  assert.equal(contiguousPrefix([]), 0);
  assert.equal(contiguousPrefix([0, 1, 2]), 3);
  assert.equal(contiguousPrefix([2, 0, 1, 5]), 3);
  assert.equal(contiguousPrefix([1, 2]), 0);
  assert.deepEqual(missingRuns(6, [0, 3]), [[1, 2], [4, 5]]);
  assert.deepEqual(missingRuns(3, [0, 1, 2]), []);
  assert.deepEqual(missingRuns(3, []), [[0, 2]]);
  assert.deepEqual(missingRuns(0, []), []);
  assert.deepEqual(runSpan(1, 2, 25, 10), { start: 10, end: 25 });
});

test("bytes held by present chunks", () => {
  assert.equal(presentBytes([0, 2], 25, 10), 15);
  assert.equal(presentBytes([0, 0, 1], 25, 10), 20);
  assert.equal(presentBytes([0, 1], null, 10), 20);
  assert.equal(presentBytes([7], 25, 10), 0);
});

test("Range and Content-Range headers", () => {
  assert.equal(rangeHeader(0, 10), "bytes=0-9");
  assert.equal(rangeHeader(100), "bytes=100-");
  assert.throws(() => rangeHeader(5, 5), RangeError);
  assert.deepEqual(parseContentRange("bytes 100-199/1000"), { start: 100, end: 200, total: 1000 });
  assert.deepEqual(parseContentRange("bytes 0-0/*"), { start: 0, end: 1, total: null });
  assert.equal(parseContentRange("bytes */1000"), null);
  assert.equal(parseContentRange("bytes 5-4/10"), null);
  assert.equal(parseContentRange("bytes 0-10/10"), null);
  assert.equal(parseContentRange(null), null);
});
