// The bytes behind each token (site/js/views/bytes.mjs, views/tokens.mjs wholeText), in node:
// texts with characters of one to four bytes cut into tokens at every kind of place, checked
// against the platform's UTF-8 decoder (TextDecoder, the one the page runs on) and against the
// bytes themselves.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fromHex, hex, layout, spelled, streamed } from "../../site/js/views/bytes.mjs";
import { wholeText } from "../../site/js/views/tokens.mjs";

const encoder = new TextEncoder();
const toHex = (bytes) => Buffer.from(bytes).toString("hex");
const TEXTS = ["Hello, world", "Paris · Berlin", "東京は日本の首都", "emoji 🙂👍 end", "mixed é漢🙂a"];

/** Every way of cutting `text`'s bytes into tokens of 1..3 bytes, walked with a fixed seed. */
function* cuts(text, rounds = 25) {
  const bytes = encoder.encode(text);
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 3;
  for (let r = 0; r < rounds; r++) {
    const hexes = [];
    for (let at = 0; at < bytes.length;) {
      const n = Math.min(bytes.length - at, 1 + next());
      hexes.push(toHex(bytes.subarray(at, at + n)));
      at += n;
    }
    yield hexes;
  }
}

test("hex and fromHex are each other's inverse", () => {
  const bytes = encoder.encode("é漢🙂");
  assert.deepEqual(fromHex(toHex(bytes)), bytes);
  assert.equal(hex(bytes), toHex(bytes).toUpperCase().match(/../g).join(" "));
});

test("streamed decodes as a streaming TextDecoder does, and spells the text", () => {
  for (const text of TEXTS) {
    for (const hexes of cuts(text)) {
      const d = new TextDecoder();
      const want = hexes.map((h) => d.decode(fromHex(h), { stream: true }));
      assert.deepEqual(streamed(hexes), want);
      assert.equal(spelled(hexes), text);
    }
  }
  // bytes that end inside a character: the rest goes to the last token, as U+FFFD
  const cut = toHex(encoder.encode("é")).slice(0, 2);
  assert.deepEqual(streamed(["61", cut]), ["a", new TextDecoder().decode(fromHex(cut))]);
});

test("layout lays each token's bytes on the text, and groups the characters no token holds whole", () => {
  for (const text of TEXTS) {
    for (const hexes of cuts(text)) {
      const lay = layout(text, hexes);
      assert.ok(lay, `${text}: ${hexes}`);
      hexes.forEach((h, i) => {
        // a token's parts are its bytes: whole characters as text, shared ones as their bytes
        const back = lay.parts[i].flatMap((p) => [...(p.text !== undefined ? encoder.encode(p.text) : p.bytes)]);
        assert.deepEqual(back, [...fromHex(h)]);
        assert.equal(wholeText(h), lay.parts[i].every((p) => p.text !== undefined) ? new TextDecoder().decode(fromHex(h)) : null);
      });
      for (const [first, last, spells] of lay.groups) {
        assert.ok(last > first);
        assert.equal(new TextDecoder().decode(Buffer.concat(hexes.slice(first, last + 1).map(fromHex))), spells);
      }
      // starts: non-decreasing UTF-16 offsets from 0 to the text's end
      assert.equal(lay.starts[0], 0);
      assert.equal(lay.starts.at(-1), text.length);
      assert.ok(lay.starts.every((s, k) => k === 0 || s >= lay.starts[k - 1]));
    }
  }
  assert.equal(layout("abc", ["6162"]), null); // bytes that do not spell the text
  assert.equal(layout("abc", null), null);
});
