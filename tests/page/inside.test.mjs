// lesson/inside.mjs: which step each lesson case looks inside, and what an inspection or a branch
// completes, in its own numbers. The page runs the cases in tests/test_inspect_browser.py.
import assert from "node:assert/strict";
import { test } from "node:test";
import { add, branched, CASES, caseStep, inspected, statedYear, tieStep } from "../../site/js/lesson/inside.mjs";

const GAP = 0.01;
const byId = Object.fromEntries(CASES.map((c) => [c.id, c]));

/** An answer over `n` positions, with the figures chatlens.inspect computes for it: head (1, 2)
 * puts w on `j` (the rest of every head's weight on position 0), so it is the head that read
 * `j`'s piece most, and that piece holds all the weight beyond the first token. */
function answerOf(n, step, j, w, pieces) {
  const at = pieces.find((p) => j >= p.start && j < p.end);
  const strongest_heads = [{ kind: at.kind, label: at.label, layer: 1, head: 2, position: j, weight: w }];
  const shares_skip_first = pieces.map((p) => ({ ...p, share: p === at ? 1 : 0 }));
  return { step, position: n - 1, by_piece: pieces, strongest_heads, every_layer: { shares_skip_first }, lens: [] };
}

test("the year case looks inside the year's last digit, where the reply writes the stated year", () => {
  const record = { preset: "date", system: "Today's date is Thursday, December 3, 2026.", reply_tokens: ["The", " year", " is", " ", "2", "0", "2", "6", "."] };
  assert.equal(statedYear(record), "2026");
  assert.equal(caseStep(byId.year, record), 7);
  assert.equal(caseStep(byId.year, { ...record, reply_tokens: ["I", " cannot"] }), null);
  assert.equal(caseStep(byId.pirate, record), 0);
  assert.equal(caseStep(byId.dropped, { reply_tokens: ["I", "'m", " Emily", "."] }), 2);
  assert.equal(caseStep(byId.dropped, { reply_tokens: ["I", " cannot", " know"] }), 0);
});

test("an inspection of Pirate's first reply token completes the case with the head that read the system prompt", () => {
  const prompt = ["<|im_start|>", "system", "\n", "You", " are", " a", " pirate", ".", "<|im_end|>", "\n", "<|im_start|>", "user", "\n", "Who",
                  " are", " you", "?", "<|im_end|>", "\n", "<|im_start|>", "assistant", "\n"];
  const pieces = [{ kind: "system", label: "system prompt", start: 0, end: 10 }, { kind: "new", label: "new message", start: 10, end: 19 },
                  { kind: "header", label: "generation header", start: 19, end: 22 }];
  const record = {
    preset: "pirate", prompt_ids: prompt.map((_, i) => i), prompt_tokens: prompt, reply_tokens: ["Ar", "r"], reply_ids: [90, 91],
    pieces: [{ kind: "system", text: "" }, { kind: "new", text: "<|im_start|>user\nWho are you?<|im_end|>\n" }], dropped_messages: [],
  };
  const found = inspected(record, answerOf(22, 0, 6, 0.82, pieces));
  assert.deepEqual(Object.keys(found), ["pirate"]);
  assert.equal(found.pirate, "Writing “Ar”, block 2 · head 3 put 82.0% of its weight on the system prompt's “·pirate”: the name it gives is read from there.");
  // not the first message of its conversation: the answer could echo an earlier reply
  const later = { ...record, pieces: [...record.pieces, { kind: "user", text: "Hi" }] };
  assert.deepEqual(inspected(later, answerOf(22, 0, 6, 0.82, pieces)), {});
});

test("the dropped case says each piece's share, as the answer has it, once the first message was dropped", () => {
  const prompt = ["<|im_start|>", "system", "x", "<|im_end|>", "What", " is", " my", " name", "?", "<|im_start|>", "assistant"];
  const pieces = [{ kind: "system", label: "system prompt", start: 0, end: 4 }, { kind: "new", label: "new message", start: 4, end: 9 },
                  { kind: "header", label: "generation header", start: 9, end: 11 }];
  const record = {
    preset: "brief", prompt_ids: prompt.map((_, i) => i), prompt_tokens: prompt, reply_tokens: ["I"], reply_ids: [5],
    pieces: [{ kind: "new", text: "What is my name?" }], dropped_messages: [{ message_index: 0, count: 17 }],
  };
  const answer = answerOf(11, 0, 7, 0.5, pieces);
  const line = inspected(record, answer).dropped;
  assert.ok(line.startsWith("Writing “I”: the message with your name was dropped (17 tokens)."), line);
  assert.ok(line.includes("new message 100.0%") && !line.includes("system prompt"), line); // a share under 0.5% is left out
});

test("the branch case: the first near-tie, else the closest call; completed by taking its runner-up", () => {
  const row = (id, d) => [[id, 5, 0.5], [id + 1, 5 - d, 0.4]];
  const record = { reply_ids: [10, 20, 30], reply_tokens: ["a", "b", "c"], top_k: [row(10, 0.3), row(20, 0.005), row(30, 0.001)] };
  assert.deepEqual(tieStep(record, GAP), { step: 1, id: 21, gap: 5 - (5 - 0.005), tie: true });
  const none = { ...record, top_k: [row(10, 0.3), row(20, 0.2), row(30, 0.25)] };
  assert.deepEqual(tieStep(none, GAP), { step: 1, id: 21, gap: 5 - (5 - 0.2), tie: false });
  const answer = { step: 1, id: 21, reply_ids: [10, 21, 40], reply_tokens: ["a", "B", "d"] };
  assert.match(branched(record, answer, GAP).branch, /^At token 2, a near-tie, 0\.0050 logits apart, the model wrote “b”; taking “B”, the reply went on “Bd” instead of “bc”\.$/);
  assert.deepEqual(branched(record, { ...answer, id: 22 }, GAP), {});
});

test("progress keeps the first line of each case", () => {
  const p = add({}, { pirate: "one" });
  assert.equal(add(p, { pirate: "two" }), p);
  assert.deepEqual(add(p, { year: "y" }), { pirate: "one", year: "y" });
});
