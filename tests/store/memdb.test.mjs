import assert from "node:assert/strict";
import { test } from "node:test";
import { dbContract } from "./db_contract.mjs";
import { MemDb } from "./memdb.mjs";

test("the in-memory Db keeps db.mjs's contract", async () => {
  const failures = [];
  const n = await dbContract(async () => new MemDb(), (ok, what) => ok || failures.push(what));
  assert.deepEqual(failures, []);
  assert.ok(n > 20);
});

test("its byte limit fails writes like a full disk", async () => {
  const db = new MemDb({ limit: 15 });
  await db.putChunk("m", "a", 0, new Uint8Array(10), "h");
  await assert.rejects(db.putChunk("m", "a", 1, new Uint8Array(10), "h"), { name: "QuotaExceededError" });
  await db.putChunk("m", "a", 0, new Uint8Array(12), "h"); // replacing counts the difference
});
