import "./hooks.mjs";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { bytesOf } from "./fake_fetch.mjs";

const { createSha256, sha256Hex, toHex } = await import("../../site/js/store/sha256.mjs");
const ref = (u8) => createHash("sha256").update(u8).digest("hex");

test("known values", async () => {
  const abc = new TextEncoder().encode("abc");
  assert.equal(await sha256Hex(abc), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert.equal(createSha256().hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert.equal(toHex(new Uint8Array([0, 15, 255])), "000fff");
});

test("incremental and one-shot agree with node's crypto, for any split", async () => {
  // lengths around the 64-byte block and the 56-byte padding boundary, and a few MB
  for (const n of [0, 1, 55, 56, 63, 64, 65, 119, 120, 1000, 65537, 3 << 20]) {
    const data = bytesOf(n, n + 1);
    const want = ref(data);
    assert.equal(await sha256Hex(data), want, `one-shot, ${n} bytes`);
    assert.equal(await sha256Hex(data.buffer), want, `an ArrayBuffer, ${n} bytes`);
    const h = createSha256();
    let pos = 0;
    for (let step = 1; pos < n; step = (step * 3 + 1) % 9973 || 1) {
      h.update(data.subarray(pos, Math.min(n, pos + step)));
      pos += step;
    }
    assert.equal(h.hex(), want, `incremental, ${n} bytes`);
  }
});

test("a view hashes only its own bytes", async () => {
  const data = bytesOf(1000, 7);
  const view = data.subarray(100, 300);
  assert.equal(await sha256Hex(view), ref(view));
  assert.equal(createSha256().update(view).hex(), ref(view));
});
