// The views' helpers that hold logic and no DOM (views/chat.mjs, views/tokens.mjs), in node.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createStore } from "../../site/js/page/state.mjs";
import { droppedOf, liveBanner, noRepliesText, readingText } from "../../site/js/views/chat.mjs";
import { specialPositions, visibleToken } from "../../site/js/views/tokens.mjs";

test("the reading line: how far the prompt is read, and none once it is", () => {
  assert.equal(readingText(null), null);
  assert.equal(readingText({ read: 9, of: 9, ms: 100 }), null);
  const line = readingText({ read: 64, of: 900, ms: 2000 });
  assert.ok(line.includes("64 of 900 tokens") && line.includes(`${(1000 * 64 / 2000).toFixed(0)} tokens/s`), line);
  assert.ok(!readingText({ read: 0, of: 900, ms: 0 }).includes("tokens/s")); // no rate before the first chunk
  assert.ok(readingText({ read: 0, of: 900, ms: 3000, parts: 2, partsOf: 5, covers: 128 }).includes("part 2 of 5 of the GPU's step for the next 128 tokens, 3 s"));
});

test("the chat's banner follows the store's replies, and offers a backend only when asked to", () => {
  const store = createStore();
  assert.equal(liveBanner(store.state), null);
  store.repliesKnown({ state: "none", why: "No reply: the weights are not downloaded" });
  assert.deepEqual(liveBanner(store.state), { text: noRepliesText("No reply: the weights are not downloaded") });
  assert.ok(!noRepliesText("No reply: x").includes("No reply: x")); // the reason once, without its prefix
  store.repliesKnown({ state: "none", why: "WebGPU would work here", offer: "webgpu" });
  const offered = [];
  const banner = liveBanner(store.state, (b) => offered.push(b));
  assert.equal(banner.text, "WebGPU would work here");
  banner.action.run();
  assert.deepEqual(offered, ["webgpu"]);
  assert.deepEqual(liveBanner(store.state), { text: noRepliesText("WebGPU would work here") }); // no way to offer it
  store.repliesKnown({ state: "ready", why: "" });
  assert.equal(liveBanner(store.state), null);
});

test("the tokens' helpers: special positions from the record's ids, whitespace made visible", () => {
  const record = { prompt_ids: [1, 9, 2, 1], special_ids: [1, 2] };
  assert.deepEqual(specialPositions(record), record.prompt_ids.map((id) => record.special_ids.includes(id)));
  assert.equal(visibleToken(" a\tb\n").length, " a\tb\n".length); // one mark a character
  assert.ok(!/[ \t\n]/.test(visibleToken(" a\tb\n")));
  // a no-break space (the lens once showed it as an empty cell), a zero-width space, a carriage return: their code points
  assert.equal(visibleToken("\u00a0a\u200bb\r\n"), "\u27e8U+00A0\u27e9a\u27e8U+200B\u27e9b\u27e8U+000D\u27e9\u21b5");
  assert.equal(visibleToken("caf\u00e9 \u6771"), "caf\u00e9\u00b7\u6771"); // what shows stays as it is
  assert.deepEqual(droppedOf({ dropped_messages: [{ message_index: 0 }, { message_index: 3 }] }), new Set([0, 3]));
});
