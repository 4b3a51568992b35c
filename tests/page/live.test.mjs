// Live mode's send (site/js/modes/live.mjs), played in node: the store, a fake API that answers
// as chatlens.run answers (the turn's record first, then the tokens, then the full record) and a
// snapshot of the controls, no DOM. A send is one request: the run, with no preview before it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { send, stop } from "../../site/js/modes/live.mjs";
import { callArgs } from "../../site/js/page/controls.mjs";
import { createStore, liveMessages } from "../../site/js/page/state.mjs";

const settings = { reply_limit: 96, top_k: 5 };
const controls = (draft) => ({ preset: "none", custom: undefined, window: 512, specialInText: true, draft });
const TOKENS = [
  { id: 19556, text: "Hello", token: "Hello", bytes: "48656c6c6f" },
  { id: 17, text: "!", token: "!", bytes: "21" },
];
const record = (args) => ({ messages: args.messages, prompt_ids: [1, 2, 3], prompt_tokens: ["a", "b", "c"], pieces: [],
                             dropped_messages: [], reply_text: null, stop_reason: null });
const answered = (args) => ({ ...record(args), reply_text: "Hello!", reply_ids: [19556, 17], stop_reason: "end_turn" });

/** A fake chatlens: each call booked in `calls`; run answers `onRecord` first when `withRecord`. */
function fakeApi({ withRecord = true, runError = null, previewError = null } = {}) {
  const calls = [];
  const api = {
    settings,
    calls,
    async preview(args) {
      calls.push(["preview", args]);
      if (previewError) throw previewError;
      return record(args);
    },
    async run(args, { onRecord, onToken, onProgress } = {}) {
      calls.push(["run", args]);
      await null; // answers come later, as the worker's do
      if (runError) throw runError;
      if (withRecord) onRecord?.(record(args));
      onProgress?.({ read: 3, of: 3, ms: 1 });
      for (const t of TOKENS) onToken?.(t);
      return answered(args);
    },
    async count() {
      calls.push(["count"]);
      return {};
    },
  };
  return api;
}

function play(api) {
  const store = createStore();
  const changes = [];
  store.subscribe((c) => changes.push(c.type));
  return { page: { api, store, state: store.state }, store, changes };
}

test("a send is one request: the run answers the record, then the tokens, then the reply", async () => {
  const api = fakeApi();
  const { page, store, changes } = play(api);
  const sending = send(page, controls("Hi!"));
  assert.equal(store.state.writing, true); // from the message sent, before any answer
  await send(page, controls("Hi again!")); // a second Enter meanwhile sends nothing
  await sending;
  assert.deepEqual(api.calls.map((c) => c[0]), ["run"]);
  const want = callArgs(liveMessages(createStore().state, "Hi!"), settings, controls("Hi!"));
  assert.deepEqual(api.calls[0][1], want);
  assert.deepEqual(changes, ["sent", "read", "progress", "token", "token", "replied"]);
  const [turn] = store.state.live.turns;
  assert.equal(turn.reply, "Hello!");
  assert.equal(turn.record.stop_reason, "end_turn");
  assert.equal(store.state.writing, false);
});

test("why this token on: the run asks for the candidates", async () => {
  const api = fakeApi();
  const { page, store } = play(api);
  store.whyChosen(true);
  await send(page, controls("Hi!"));
  assert.equal(api.calls[0][1].topK, settings.top_k);
});

test("an API that does not answer the record first: the reply's record is the read too", async () => {
  const api = fakeApi({ withRecord: false });
  const { page, store, changes } = play(api);
  await send(page, controls("Hi!"));
  assert.deepEqual(api.calls.map((c) => c[0]), ["run"]);
  // the tokens stream before the record; the read comes with the reply
  assert.deepEqual(changes, ["sent", "progress", "token", "token", "read", "replied"]);
  const [turn] = store.state.live.turns;
  assert.deepEqual([turn.reply, turn.record.reply_text, turn.streaming], ["Hello!", "Hello!", null]);
  assert.equal(store.state.writing, false);
});

test("a message too long for the window is taken back and counted exactly", async () => {
  const tooLong = Object.assign(new Error("too long"), { name: "WindowError", data: { at_least: 600 } });
  const api = fakeApi({ runError: tooLong });
  const { page, store, changes } = play(api);
  await send(page, controls("a long message"));
  assert.deepEqual(api.calls.map((c) => c[0]), ["run", "count"]);
  assert.deepEqual(changes.slice(0, 2), ["sent", "unsent"]);
  assert.deepEqual(store.state.live.turns, []);
  assert.equal(store.state.writing, false);
});

test("a run that fails before its record (no weights): the turn gets no reply, and the record it would have read", async () => {
  const api = fakeApi({ runError: new Error("the model's weights are not loaded yet: replies need them") });
  const { page, store, changes } = play(api);
  await send(page, controls("Hi!"));
  assert.deepEqual(api.calls.map((c) => c[0]), ["run", "preview"]);
  assert.deepEqual(changes, ["sent", "failed"]);
  const [turn] = store.state.live.turns;
  assert.equal(turn.note, "No reply: the model's weights are not loaded yet: replies need them");
  assert.deepEqual(turn.record, await fakeApi().preview(api.calls[0][1]));
  assert.equal(store.state.writing, false);
});

test("a message Python cannot read is taken back", async () => {
  const api = fakeApi({ runError: new Error("Python failed"), previewError: new Error("Python failed") });
  const { page, store, changes } = play(api);
  await send(page, controls("Hi!"));
  assert.deepEqual(changes, ["sent", "unsent"]);
  assert.deepEqual(store.state.live.turns, []);
});

test("an empty draft, or one outside Live mode, sends nothing", async () => {
  const api = fakeApi();
  const { page, store } = play(api);
  await send(page, controls("  \n"));
  store.modeChosen("recorded");
  await send(page, controls("Hi!"));
  assert.deepEqual(api.calls, []);
});

test("Stop aborts the run its send started: the reply keeps what it wrote, marked stopped", async () => {
  const api = fakeApi();
  // a run that writes one token, then waits for its signal, as a long reply does
  api.run = async (args, { onRecord, onToken, signal }) => {
    api.calls.push(["run", args, signal]);
    await null;
    onRecord(record(args));
    onToken(TOKENS[0]);
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    return { ...record(args), reply_text: "Hello", reply_ids: [19556], stop_reason: "stopped" };
  };
  const { page, store, changes } = play(api);
  await stop(page); // nothing is being written: nothing to stop
  assert.deepEqual(changes, []);
  const sending = send(page, controls("Hi!"));
  while (!store.state.live.turns[0].streaming?.reply_ids.length) await new Promise((r) => setImmediate(r));
  const stopped = stop(page);
  assert.equal(api.calls[0][2].aborted, true);
  await stopped; // once the reply has ended
  await sending;
  const [turn] = store.state.live.turns;
  assert.deepEqual([turn.reply, turn.record.stop_reason], ["Hello", "stopped"]);
  assert.deepEqual(changes.slice(-2), ["stopping", "replied"]);
  assert.equal(store.state.writing, false);
});
