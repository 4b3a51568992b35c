// Checks that db.mjs (in Chromium) and memdb.mjs (in node) both pass: the Db methods the store
// relies on. `open()` gives a fresh, empty Db; `check(condition, what)` reports a failure.
// Returns the number of checks run.

export async function dbContract(open, check) {
  let n = 0;
  const eq = (a, b, what) => {
    n++;
    check(JSON.stringify(a) === JSON.stringify(b), `${what}: got ${JSON.stringify(a)}, expected ${JSON.stringify(b)}`);
  };
  const db = await open();
  const bytes = (k, len) => Uint8Array.from({ length: len }, (_, i) => (i * 7 + k) & 255);

  await db.putModel({ id: "m1", files: ["a", "b"] });
  await db.putModel({ id: "m1/x", files: ["z"] }); // an id that begins like another must not mix with it
  eq((await db.listModels()).map((m) => m.id), ["m1", "m1/x"], "listModels");
  eq((await db.getModel("m1")).files, ["a", "b"], "getModel");
  eq(await db.getModel("nope"), undefined, "getModel of a missing id");

  await db.putFile({ model: "m1", name: "a", state: "partial" });
  await db.putFile({ model: "m1", name: "b", state: "partial" });
  await db.putFile({ model: "m1/x", name: "z", state: "partial" });
  eq((await db.filesOf("m1")).map((r) => r.name), ["a", "b"], "filesOf");

  // A view into a larger buffer stores only its own bytes.
  const big = bytes(1, 100);
  await db.putChunk("m1", "a", 0, big.subarray(10, 20), "h0");
  await db.putChunk("m1", "a", 1, bytes(2, 10), "h1");
  await db.putChunk("m1", "a", 2, bytes(3, 4), "h2");
  await db.putChunk("m1", "b", 0, bytes(4, 10), "hb");
  await db.putChunk("m1/x", "z", 0, bytes(5, 10), "hz");
  const got = await db.getChunks("m1", "a", 0, 5);
  eq(got.map((c) => [c.index, c.sha256, c.bytes.length]), [[0, "h0", 10], [1, "h1", 10], [2, "h2", 4]], "getChunks");
  eq([...got[0].bytes], [...big.subarray(10, 20)], "chunk bytes");
  n++;
  check(got[0].bytes instanceof Uint8Array && got[0].bytes.buffer.byteLength === 10, "a chunk comes back as its own Uint8Array");
  eq((await db.getChunks("m1", "a", 1, 1)).map((c) => c.index), [1], "getChunks of one");
  eq(await db.chunkIndices("m1", "a"), [0, 1, 2], "chunkIndices");
  eq([...(await db.chunkIndicesOf("m1")).entries()], [["a", [0, 1, 2]], ["b", [0]]], "chunkIndicesOf");

  // Overwriting a chunk replaces it.
  await db.putChunk("m1", "a", 1, bytes(9, 10), "h1b");
  eq((await db.getChunks("m1", "a", 1, 1))[0].sha256, "h1b", "putChunk overwrites");

  await db.putFile({ model: "m1", name: "a", state: "partial", v: 2 }, { dropFrom: 1 });
  eq(await db.chunkIndices("m1", "a"), [0], "putFile dropFrom");
  eq((await db.getFile("m1", "a")).v, 2, "putFile writes the record");

  await db.putFile({ model: "m1", name: "b", state: "complete" }, { strict: true });
  await db.markDamaged("m1", "b", 0);
  eq((await db.getFile("m1", "b")).state, "damaged", "markDamaged marks a complete file");
  eq(await db.chunkIndices("m1", "b"), [], "markDamaged deletes the chunk");
  await db.markDamaged("m1", "a", 0);
  eq((await db.getFile("m1", "a")).state, "partial", "markDamaged leaves a partial file partial");

  await db.deleteModel("m1");
  eq(await db.getModel("m1"), undefined, "deleteModel: the model");
  eq(await db.filesOf("m1"), [], "deleteModel: its files");
  eq([...(await db.chunkIndicesOf("m1")).keys()], [], "deleteModel: its chunks");
  eq(await db.chunkIndices("m1/x", "z"), [0], "deleteModel leaves other models");

  await db.deleteAll();
  eq(await db.listModels(), [], "deleteAll: models");
  eq(await db.chunkIndices("m1/x", "z"), [], "deleteAll: chunks");
  db.close();
  return n;
}
