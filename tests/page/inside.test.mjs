// lesson/inside.mjs: which step each lesson case looks inside, and what "which piece it needed"
// (a cause) of that step completes, in its own numbers, with where the step looked beside it. The
// figures below have the shape `python -m chatlens cause` and `inspect` print; the page runs the
// cases in tests/test_inspect_browser.py.
import assert from "node:assert/strict";
import { test } from "node:test";
import { add, branched, CASES, caseStep, caused, statedYear, tieStep, yearDigitSteps } from "../../site/js/lesson/inside.mjs";

const GAP = 0.01;
const byId = Object.fromEntries(CASES.map((c) => [c.id, c]));

/** A cause's answer: the chosen token's probability `p`, each piece's {kind: [removed p, knocked p, top token]}. */
function causeOf(step, chosenToken, p, pieces) {
  const measure = (q, top) => q === null ? null : { p: q, top_id: top ? 999 : 7, top_token: top ?? chosenToken, top_p: top ? 0.3 : q, reply_logprob: -1 };
  return {
    step, chosen_id: 7, chosen_token: chosenToken, p, top_id: 7, top_p: p, reply_logprob: -1,
    pieces: Object.entries(pieces).map(([kind, [removed, knocked, top]]) => ({
      name: `${kind}:0`, kind, label: kind, removed: measure(removed, top), knocked: measure(knocked, top),
    })),
  };
}

test("each case's step: the name's first token, the year's last digit, and none until the reply says it", () => {
  const record = { preset: "date", system: "Today's date is Thursday, December 3, 2026.", reply_tokens: ["The", " year", " is", " ", "2", "0", "2", "6", "."] };
  assert.equal(statedYear(record), "2026");
  assert.equal(caseStep(byId.year, record), 7);
  assert.deepEqual(yearDigitSteps(record), [4, 5, 6]);
  assert.equal(caseStep(byId.year, { ...record, reply_tokens: ["The", " year", " is", " ", "2", "0"] }, { partial: true }), null);
  assert.equal(caseStep(byId.year, { ...record, reply_tokens: ["I", " cannot"] }), null);
  const pirate = ["A", "ye", ",", " the", " Captain", "'s", " name", " is", " Captain", " Black", "wood"];
  assert.equal(caseStep(byId.pirate, { reply_tokens: pirate }), 8); // after "name is", not "the Captain's"
  assert.equal(caseStep(byId.pirate, { reply_tokens: pirate.slice(0, 8) }, { partial: true }), null); // not written yet
  assert.equal(caseStep(byId.dropped, { reply_tokens: ["I", "'m", " Emily", "."] }, { partial: true }), 2);
  assert.equal(caseStep(byId.dropped, { reply_tokens: ["Hello", " Sam", "!"] }), 1); // no "I'm": its first capitalised word
  assert.equal(caseStep(byId.dropped, { reply_tokens: ["I", " cannot", " know"] }), 0);
});

const SYSTEM_PROMPT = ["<|im_start|>", "system", "\n", "You", " are", " a", " pirate", ".", "<|im_end|>", "\n"];
const PIRATE = {
  preset: "pirate", prompt_ids: SYSTEM_PROMPT.map((_, i) => i), prompt_tokens: SYSTEM_PROMPT, reply_ids: [], dropped_messages: [],
  reply_tokens: ["A", "ye", ",", " the", " Captain", "'s", " name", " is", " Captain", " Black"],
  pieces: [{ kind: "system", text: "" }, { kind: "new", text: "<|im_start|>user\nWho are you?<|im_end|>\n" }],
};

test("the Pirate case completes from its name's first token without the system prompt, where it looked beside it", () => {
  const cause = causeOf(8, " Captain", 0.688, { system: [0.158, 0.658, " name"], new: [0.5, 0.6, null] });
  const inspection = { step: 8, strongest_heads: [{ kind: "system", layer: 23, head: 4, position: 6, weight: 0.82 }] };
  const { pirate } = caused(PIRATE, cause, { inspection });
  assert.equal(pirate, "Writing “·Captain”, the first token of the name it gives (68.8%): without the system prompt (the " +
    "template's default in its place) it falls to 15.8% (from 68.8%), and “·name” leads (30.0%); with the system prompt " +
    "there but not read by the reply, it stays near 65.8% (from 68.8%), and “·name” leads (30.0%). Not read, it barely " +
    "moves, yet removed it falls: the system prompt reaches this token through the tokens that read it, which a " +
    "knockout leaves as they were and a removal does not. Where it looked: block 24 · head 5 put 82.0% of its weight on " +
    "the system prompt's “·pirate” (“The head that reads each piece most”, in the inspection).");
  // another step's inspection is not this step's: nothing is said of where it looked
  assert.ok(!caused(PIRATE, cause, { inspection: { ...inspection, step: 0 } }).pirate.includes("Where it looked"));
  // with the whole reply's figures (the token strip): which of its tokens fell without the system prompt
  const row = (p) => ({ p, top_id: 0, top_p: p, top_token: "x" });
  const whole = { reply_logprob: -10, tokens: PIRATE.reply_tokens.map(() => row(0.5)),
                  pieces: [{ kind: "system", removed: { reply_logprob: -20, tokens: PIRATE.reply_tokens.map((_, k) => row([1, 4].includes(k) ? 0.001 : 0.5)) } }] };
  assert.match(caused(PIRATE, cause, { whole }).pirate, /Over every token of the reply so far \(10\), without the system prompt 2 fall, most “ye” \(token 2: 500 times\), “·Captain” \(token 5: 500 times\); the reply so far is about 2 × 10⁴ times less likely/);
  // another step than the name's, or not the first message of its conversation: not the case
  assert.deepEqual(caused(PIRATE, { ...cause, step: 1 }), {});
  assert.deepEqual(caused({ ...PIRATE, pieces: [...PIRATE.pieces, { kind: "user", text: "Hi" }] }, cause), {});
});

test("the dropped case puts the turn back and says what the model writes then, whatever it is", () => {
  const prompt = ["<|im_start|>", "system", "\n", "You", " are", " Sm", "ol", "LM", "<|im_end|>", "What", " is", " my", " name", "?"];
  const record = {
    preset: "none", prompt_ids: prompt.map((_, i) => i), prompt_tokens: prompt, reply_tokens: ["I", "'m", " Emily"], reply_ids: [1, 2, 3],
    pieces: [{ kind: "new", text: "What is my name?" }],
    dropped_messages: [{ message_index: 0, count: 13 }, { message_index: 1, count: 45 }], // your message, a long reply
  };
  const cause = causeOf(2, " Emily", 0.115, { default_system: [null, 0.002, " called"], dropped: [0.032, null, " Sarah"] });
  // the cause answer's dropped turn, as pieces.py makes it: its row says the whole turn's tokens, both messages
  Object.assign(cause.pieces[1], { label: "dropped turn 1 (58 tokens)", count: 58 });
  const inspection = { step: 2, every_layer: { look_back: [{ layer: 23, head: 5, reads: [[7, 0.4]] }] },
                       by_piece: [{ kind: "default_system", label: "system (template default)", start: 0, end: 9 }, { label: "new message", start: 9, end: 14 }] };
  assert.equal(caused(record, cause, { inspection }).dropped,
    "Writing “·Emily” (11.5%): the turn with your name was dropped (the whole turn: 58 tokens), so nothing the model read holds your " +
    "name; the head that reads furthest back, block 24 · head 6, reads “LM” in the template's default system prompt. Put back, as " +
    "a larger window would read it, the model would write “·Sarah” there (30.0%), and “·Emily” falls to 3.2% (from 11.5%).");
  // with the conversation's matrix (its row for this turn): which turn the whole reply needed
  const needed = { reply_logprob: -3, reply_tokens: ["I", "'m", " Emily", ".", "<|im_end|>"], pieces: [
    { kind: "default_system", label: "system (template default)", removed: null },
    { kind: "user", label: "turn 2 · user", removed: { reply_logprob: -9.5 } }, // a kept turn is removed whole:
    { kind: "assistant", label: "turn 2 · assistant", removed: { reply_logprob: -9.5 } }, // one figure for both
    { kind: "new", label: "new message", removed: { reply_logprob: -3.05 } },
    { kind: "header", label: "generation header", removed: { reply_logprob: -25 } }, // the template's: not a turn
    { kind: "dropped", label: "dropped turn 1 (58 tokens)", removed: { reply_logprob: -8 } },
  ] };
  assert.match(caused(record, cause, { inspection, needed }).dropped,
    /“·Sarah” there \(30\.0%\), and “·Emily” falls to 3\.2% \(from 11\.5%\)\. Over the whole reply \(“I'm·Emily\.”, the conversation's matrix\): without turn 2 it is 670 times less likely; without your new message, about as likely; with the dropped turn put back, 150 times less likely\.$/);
  // were a turn's two messages ever measured apart, each would be said
  needed.pieces[1] = { ...needed.pieces[1], removed: { reply_logprob: -4 } };
  assert.match(caused(record, cause, { inspection, needed }).dropped,
    /without turn 2 · user it is 2\.7 times less likely; without turn 2 · assistant it is 670 times less likely;/);
});

test("the year case: the last digit needs the date; the digits before it are said as measured", () => {
  const record = { ...PIRATE, preset: "date", system: "You are a helpful assistant. Today's date is Thursday, December 3, 2026.",
                   reply_tokens: ["The", " year", " is", " ", "2", "0", "2", "6", "."] };
  const cause = causeOf(7, "6", 0.379, { system: [0.021, 0.025, "3"] });
  const digits = [{ token: "2", p: 0.976, removed: 0.978 }, { token: "0", p: 0.993, removed: 0.993 }, { token: "2", p: 0.891, removed: 0.798 }];
  const { year } = caused(record, cause, { digits });
  assert.equal(year, "Writing “6”, the last digit of 2026 (37.9%): without the date (the template's default system prompt " +
    "in its place) it falls to 2.1% (from 37.9%), and “3” leads (30.0%); not read by the reply, it falls to 2.5% (from " +
    "37.9%), and “3” leads (30.0%). The digits before it, without the date: “2” stays near 97.8% (from 97.6%), “0” stays " +
    "near 99.3% (from 99.3%), “2” falls to 79.8% (from 89.1%).");
  assert.deepEqual(caused(record, { ...cause, step: 6 }), {}); // not the last digit
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
