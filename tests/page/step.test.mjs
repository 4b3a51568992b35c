// The requests a step of a reply makes (site/js/page/step.mjs), as the page makes them and as
// they reach the worker (protocol.mjs's toWire). tests/test_page_step.py sends the same requests
// to the worker and checks that they read the prompts the replies were written from.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { branchRequest, compareCellRequest, draftRequest, inspectRequest, keptRecord, plainRequest, recordedRequest } from "../../site/js/page/step.mjs";
import { toWire } from "../../site/js/page/protocol.mjs";

const settings = { reply_limit: 96, windows: [256, 512, 1024], compare_limit: 48, top_k: 10 };
// A live turn's request with "why this token" on: its candidates a token, topK 10.
const turn = { messages: [{ role: "user", content: "Who are you?" }], preset: "pirate", window: 512, topK: 10 };
const reply = [32, 1045, 30, 2];

test("inspecting step 2 of a live reply: the turn's request, the reply and the step; the lens's own K", () => {
  const args = inspectRequest(turn, reply, 2);
  assert.deepEqual(toWire("inspect", args, settings), {
    messages: turn.messages, preset: "pirate", window: 512, max_tokens: 96, reserve: 96, reply_ids: reply, step: 2,
  }); // no top_k: the run's 10 candidates a token are not the lens's K (the engine's 5)
  assert.equal(toWire("inspect", inspectRequest(turn, reply, 2, { topK: 3 }), settings).top_k, 3);
});

test("the draft's first token: no reply, step 0", () => {
  const preview = { messages: [{ role: "user", content: "What year is it?" }], preset: "date", window: 256 };
  assert.deepEqual(draftRequest(preview), { ...preview, replyIds: [], step: 0, topK: undefined });
});

test("a branch at step 1 takes the id and keeps the turn's candidates a token, so it can be branched again", () => {
  const wire = toWire("branch", branchRequest(turn, reply, 1, 4093), settings);
  assert.deepEqual(wire, { messages: turn.messages, preset: "pirate", window: 512, max_tokens: 96, reserve: 96, top_k: 10,
                           reply_ids: reply, step: 1, id: 4093, reply_top_k: null });
  assert.equal(toWire("branch", branchRequest(turn, reply, 1, 4093, { topK: 0 }), settings).top_k, 0);
  // the reply's own candidates up to the step replaced go with it: the branch's reply has every step's
  const rows = reply.map((id) => [[id, 1, 0.5]]);
  assert.deepEqual(toWire("branch", branchRequest(turn, reply, 1, 4093, { replyTopK: rows }), settings).reply_top_k, rows.slice(0, 2));
});

test("the request is a copy: changing the reply afterwards changes nothing sent", () => {
  const ids = [...reply];
  const args = inspectRequest(turn, ids, 1);
  ids.push(7);
  assert.deepEqual(args.replyIds, reply);
});

const recorded = JSON.parse(readFileSync(new URL("../../site/recorded.json", import.meta.url), "utf8"));

test("a recorded turn's request: the lesson's messages, each earlier one answered as recorded", () => {
  const conversation = recorded.conversations.find((c) => c.preset === "date" && c.window === 256);
  const args = recordedRequest(recorded, conversation, 2);
  assert.deepEqual(args.messages.map((m) => m.role), ["user", "assistant", "user", "assistant", "user"]);
  assert.equal(args.messages[1].content, conversation.turns[0].reply_text);
  assert.equal(args.messages[4].content, recorded.messages[2]);
  // the recording's own system text (its day), not the date preset, which would state today's
  assert.equal(args.system, conversation.system);
  assert.equal(args.preset, undefined);
  assert.deepEqual([args.window, args.maxTokens], [256, recorded.reply_limit]);
});

test("a comparison cell: its model and layout read the message; only the instruct template cell branches", () => {
  const prompt = { text: "What is the capital of France?", template_ids: new Array(40).fill(0), plain_ids: new Array(8).fill(0) };
  const { args, branchWhy } = compareCellRequest(prompt, { model: "instruct", layout: "template" }, settings, 8192);
  assert.deepEqual(args, { messages: [{ role: "user", content: prompt.text }], preset: "none", window: 256, maxTokens: 48,
                           model: "instruct", layout: "template" });
  assert.equal(branchWhy, null);
  // a longer message: the smallest window that holds it and the cap
  const long = { ...prompt, template_ids: new Array(300).fill(0) };
  assert.equal(compareCellRequest(long, { model: "instruct", layout: "template" }, settings, 8192).args.window, 512);
  const huge = { ...prompt, template_ids: new Array(2000).fill(0) };
  assert.equal(compareCellRequest(huge, { model: "instruct", layout: "template" }, settings, 8192).args.window, 8192);
  for (const cell of [{ model: "instruct", layout: "plain" }, { model: "base", layout: "template" }, { model: "base", layout: "plain" }]) {
    const out = compareCellRequest(prompt, cell, settings, 8192);
    assert.deepEqual([out.args.model, out.args.layout, out.args.messages], [cell.model, cell.layout, args.messages]);
    assert.match(out.branchWhy, /can be inspected, not branched/);
  }
});

test("plain text: the text as the one message, read with no template", () => {
  assert.deepEqual(plainRequest("Once upon"), { messages: [{ role: "user", content: "Once upon" }], layout: "plain" });
  assert.deepEqual(inspectRequest(plainRequest("Once upon"), [5, 6], 1),
                   { messages: [{ role: "user", content: "Once upon" }], layout: "plain", replyIds: [5, 6], step: 1, topK: undefined });
});

test("keeping a branch: the branch's reply is the turn's, marked chosen by hand, the turn's figures kept", () => {
  const row = (id) => [[id, 1, 0.5], [id + 1, 0.5, 0.3]];
  const record = { prompt_ids: [1, 2], reply_ids: [10, 11, 12], reply_text: "abc", reply_tokens: ["a", "b", "c"], reply_bytes: ["61", "62", "63"],
                   reply_vocab: ["a", "b", "c"], stop_reason: "max_tokens", top_k: [row(10), row(11), row(12)],
                   top_k_tokens: [["a", "x"], ["b", "y"], ["c", "z"]], top_k_bytes: [["61", "78"], ["62", "79"], ["63", "7a"]], reused_tokens: 0,
                   timings: { decode_ms: 5 } };
  // chatlens.branch's answer: the branch as a reply, every step's candidates built in Python
  const branched = { step: 1, id: 12, branched_from: record.reply_ids, prompt_ids: [1, 2], reply_ids: [10, 12, 13], reply_text: "acd",
                     reply_tokens: ["a", "c", "d"], reply_vocab: ["a", "c", "d"], reply_bytes: ["61", "63", "64"], stop_reason: "max_tokens",
                     top_k: [row(10), row(11), row(13)], top_k_tokens: [["a", "x"], ["b", "y"], ["d", "w"]], top_k_bytes: [["61", "78"], ["62", "79"], ["64", "77"]],
                     reused_tokens: 3, computed_tokens: 1, backend: "numpy", timings: { decode_ms: 1 } };
  const kept = keptRecord(record, branched);
  assert.deepEqual(kept.branched, { step: 1, id: 12, reply_ids: [10, 11, 12] });
  assert.deepEqual([kept.reply_ids, kept.reply_text, kept.reply_tokens, kept.reply_vocab], [[10, 12, 13], "acd", ["a", "c", "d"], ["a", "c", "d"]]);
  assert.deepEqual([kept.top_k, kept.top_k_tokens], [branched.top_k, branched.top_k_tokens]);
  assert.deepEqual([kept.reused_tokens, kept.timings, kept.prompt_ids], [0, { decode_ms: 5 }, [1, 2]]); // the turn's own figures stay
  assert.deepEqual(Object.keys(kept).sort(), Object.keys({ ...record, branched: null }).sort()); // nothing of the answer's own
  // a branch whose rows before the step were not given (null): a record's candidates are every step's, or none (with_branch's rule)
  const partial = keptRecord(record, { ...branched, top_k: [null, row(11), row(13)], top_k_tokens: [null, ["b", "y"], ["d", "w"]],
                                       top_k_bytes: [null, ["62", "79"], ["64", "77"]] });
  assert.deepEqual([partial.top_k, partial.top_k_tokens, partial.top_k_bytes, partial.reply_ids], [null, null, null, [10, 12, 13]]);
});
