// page/writing.mjs: the one rule for what a reply being written holds off, as the page's buttons
// (modes/steps.mjs refusal) and window.chatlens (api.mjs) both say it. tests/test_inspect_browser.py
// asks the page's API during a reply and compares its sentences with the buttons'.
import assert from "node:assert/strict";
import { test } from "node:test";
import { refusal } from "../../site/js/modes/steps.mjs";
import { HELD_OFF, waitsForReply } from "../../site/js/page/writing.mjs";
import { createStore } from "../../site/js/page/state.mjs";
import { JOBS } from "../../site/js/worker/protocol.gen.mjs";

test("the jobs held off are jobs of the worker's, each looking at a reply already written; new replies are not", () => {
  for (const type of Object.keys(HELD_OFF)) assert.ok(JOBS[type], `${type} is no job`);
  assert.deepEqual(Object.keys(HELD_OFF).sort(), ["branch", "cause", "inspect", "needs"]);
  for (const type of ["run", "complete", "compare", "predict", "count"]) assert.equal(HELD_OFF[type], undefined, type);
});

test("the page's buttons and the API say the same sentence", () => {
  const api = { model: { backend: "webgpu" }, writing: true };
  for (const what of Object.values(HELD_OFF)) {
    assert.equal(refusal(api, createStore().state, what), waitsForReply(what));
  }
  assert.equal(waitsForReply(HELD_OFF.cause),
    "Taking a piece away waits for the reply being written: press Stop, or wait until it ends, then ask again.");
});
