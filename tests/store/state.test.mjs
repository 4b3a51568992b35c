import assert from "node:assert/strict";
import { test } from "node:test";
import { NOT_VERIFIED, VERIFIED, fileSummary, matches, modelSummary, planFile } from "../../site/js/store/state.mjs";

const H = (c) => c.repeat(64);
const spec = (over = {}) => ({ name: "w", size: 25, sha256: H("a"), chunkSize: 10, chunks: null, optional: false, ...over });
const rec = (over = {}) => ({
  model: "m", name: "w", state: "complete", size: 25, chunkSize: 10, published: H("a"), sha256: H("a"),
  chunks: [H("1"), H("2"), H("3")], stored_at: "2026-01-01T00:00:00.000Z", ...over,
});

test("nothing stored: stream from the start", () => {
  assert.deepEqual(planFile(spec(), undefined, []), { action: "stream", from: 0, drop: null });
  assert.deepEqual(planFile(spec(), undefined, [0, 1]), { action: "stream", from: 0, drop: 0 }); // stray chunks
});

test("complete and matching: skip; missing chunks: repair only those", () => {
  assert.deepEqual(planFile(spec(), rec(), [0, 1, 2]), { action: "skip" });
  assert.deepEqual(planFile(spec(), rec({ state: "damaged" }), [0, 2]), { action: "repair", runs: [[1, 1]] });
  assert.deepEqual(planFile(spec(), rec(), [1]), { action: "repair", runs: [[0, 0], [2, 2]] });
  // a damaged file whose chunk is back but whose completion was not rewritten
  assert.deepEqual(planFile(spec(), rec({ state: "damaged" }), [0, 1, 2]), { action: "repair", runs: [] });
  // no published hash then, one now: still the same bytes if they hash to it
  assert.deepEqual(planFile(spec(), rec({ published: null }), [0, 1, 2]), { action: "skip" });
});

test("a record that no longer matches the source is replaced", () => {
  const restart = { action: "stream", from: 0, drop: 0 };
  assert.deepEqual(planFile(spec({ sha256: H("b") }), rec(), [0, 1, 2]), restart);
  assert.deepEqual(planFile(spec({ size: 26 }), rec(), [0, 1, 2]), restart);
  assert.deepEqual(planFile(spec({ chunkSize: 20 }), rec(), [0, 1, 2]), restart);
  assert.deepEqual(planFile(spec({ chunks: [H("1"), H("2"), H("4")] }), rec(), [0, 1, 2]), restart);
  assert.equal(matches(spec({ size: null, sha256: null }), rec()), true);
});

test("a partial file resumes after its whole chunks, and drops chunks past a gap", () => {
  const partial = rec({ state: "partial", sha256: null, chunks: null });
  assert.deepEqual(planFile(spec(), partial, [0, 1]), { action: "stream", from: 2, drop: null });
  assert.deepEqual(planFile(spec(), partial, [0, 2]), { action: "stream", from: 1, drop: 1 });
  assert.deepEqual(planFile(spec(), partial, []), { action: "stream", from: 0, drop: null });
  // a partial download for another published hash does not resume
  assert.deepEqual(planFile(spec({ sha256: H("c") }), partial, [0, 1]), { action: "stream", from: 0, drop: 0 });
});

test("optional files the server lacks", () => {
  const absent = { model: "m", name: "g", state: "absent", size: 0, chunkSize: 10 };
  assert.deepEqual(planFile(spec({ name: "g", optional: true }), absent, []), { action: "skip" });
  assert.deepEqual(planFile(spec({ name: "g", optional: false }), absent, []), { action: "stream", from: 0, drop: null });
  const s = fileSummary("g", absent, [], spec({ name: "g", optional: true }));
  assert.equal(s.complete, true);
  assert.equal(s.verified, false);
});

test("complete and verified", () => {
  const v = fileSummary("w", rec(), [0, 1, 2], spec());
  assert.deepEqual([v.state, v.complete, v.verified, v.stored, v.check], ["complete", true, true, 25, VERIFIED]);
  const u = fileSummary("w", rec({ published: null }), [0, 1, 2], spec({ sha256: null }));
  assert.deepEqual([u.complete, u.verified, u.check], [true, false, NOT_VERIFIED]);
  const p = fileSummary("w", rec({ state: "partial", sha256: null }), [0], spec());
  assert.deepEqual([p.complete, p.verified, p.stored, p.check], [false, false, 10, null]);
  const stale = fileSummary("w", rec(), [0, 1, 2], spec({ sha256: H("f") }));
  assert.deepEqual([stale.state, stale.complete], ["stale", false]);
  const missing = fileSummary("w", undefined, [], spec());
  assert.deepEqual([missing.state, missing.complete, missing.size, missing.stored], ["missing", false, 25, 0]);
});

test("a model is complete when every file is; verified when every file matched a published hash", () => {
  const model = { id: "m", kind: "hf", url: "http://x/", label: "X", files: ["a", "b"] };
  const a = rec({ name: "a" });
  const b = rec({ name: "b", published: null, stored_at: "2026-02-01T00:00:00.000Z" });
  const present = () => [0, 1, 2];
  const both = modelSummary(model, [a, b], present);
  assert.deepEqual([both.complete, both.verified, both.bytes, both.total, both.stored_at], [true, false, 50, 50, "2026-02-01T00:00:00.000Z"]);
  assert.deepEqual(both.source, { kind: "hf", url: "http://x/", repo: null, revision: null, label: "X", model: null, verified: null });
  const base = modelSummary({ ...model, model: "base", verified: "pinned" }, [a, b], present);
  assert.deepEqual([base.source.model, base.source.verified], ["base", "pinned"]);
  const onlyA = modelSummary(model, [a], (n) => (n === "a" ? [0, 1, 2] : []));
  assert.deepEqual([onlyA.complete, onlyA.verified, onlyA.bytes, onlyA.total, onlyA.stored_at], [false, false, 25, null, null]);
  const allPublished = modelSummary(model, [a, rec({ name: "b" })], present);
  assert.equal(allPublished.verified, true);
  // against a spec: its files, its hashes
  const s = { id: "m", kind: "hf", url: "http://x/", label: "X", files: [spec({ name: "a" }), spec({ name: "b", sha256: H("a") })] };
  assert.equal(modelSummary(model, [a, b], present, s).verified, true);
  assert.equal(modelSummary(null, [], () => [], s).complete, false);
});
