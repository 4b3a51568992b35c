// views/cause.mjs's sentences: how a piece taken away moves the chosen token, and the whole reply,
// in words, from chatlens.cause's answer. The figures below are the shape `python -m chatlens cause`
// prints (the Pirate's "ye", its numbers rounded); the view only words them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { likelier } from "../../site/js/lesson/terms.mjs";
import { moved, pieceWords, replySpan, tokenSentence } from "../../site/js/views/cause.mjs";

const answer = {
  step: 1, reply_ids: [49, 6602, 28], chosen_id: 6602, chosen_token: "ye", p: 0.1256, top_id: 6602, top_p: 0.1256,
  reply_logprob: -3.61,
  pieces: [
    { name: "system:0", kind: "system", label: "system", start: 0, end: 21, attention_share: 0.66,
      knocked: { p: 0.0019, top_id: 995, top_token: " You", top_p: 0.248, reply_logprob: -12.48 },
      removed: { p: 0.0027, top_id: 9283, top_token: " curious", top_p: 0.091, reply_logprob: -8.83, what: "The template's default system prompt in its place." },
      knocked_why: null, removed_why: null },
    { name: "new:0", kind: "new", label: "new message", start: 21, end: 30, attention_share: 0.12,
      knocked: { p: 0.226, top_id: 6602, top_token: "ye", top_p: 0.226, reply_logprob: -4.2 },
      removed: null, knocked_why: null, removed_why: "Without it no message is left: the template would render nothing to read." },
  ],
};

test("a measure says where the chosen token's probability went and what leads instead", () => {
  const [system, message] = answer.pieces;
  assert.equal(tokenSentence(answer, system.knocked), "“ye” falls to 0.19% (from 12.6%); it would write “·You” instead (24.8%).");
  // nearly twice as likely is a rise (lesson/terms.mjs change: "stays near" only within a tenth)
  assert.equal(tokenSentence(answer, message.knocked), "“ye” rises to 22.6% (from 12.6%); it is still the model's choice.");
  assert.equal(moved(0.5, 0.1), "rises to 50.0% (from 10.0%)");
});

test("a piece that cannot be taken away says why; the whole reply says how much less likely", () => {
  const [system, message] = answer.pieces;
  assert.equal(pieceWords(answer, message, "removed"), message.removed_why);
  assert.equal(pieceWords(answer, system, "knocked", true),
    "the reply so far is 7,100 times less likely (log-probability -12.48, from -3.61).");
  assert.equal(likelier(-3.0, -3.05), "about as likely");
  assert.equal(likelier(-2.0, -3.0), "2.7 times more likely");
  assert.equal(likelier(-37.72, -10.58), "about 6 × 10¹¹ times less likely");
});

test("the reply so far a whole-reply answer measures: its tokens, the chosen one last", () => {
  assert.equal(replySpan(answer, ["A", "ye", ","]), "2 tokens, “Aye”");
});
