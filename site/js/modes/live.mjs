// Live mode: the conversation the user types, previewed as they type (what the model would
// read if they sent it now), and sent one message at a time. With "why this token" on, replies
// carry each token's candidates (the worker's topK), and once the weights are in, the preview
// also shows what the model would most likely write first: one step of the model on the draft,
// asked for after a pause in typing, at most one at a time, and only for the newest draft.
//
// The logic takes a snapshot of the controls (page/controls.mjs readControls, read once per
// change by app.mjs) and changes the page through the store; its own DOM is the drawing
// (showLive, liveChanged), so a send can be played in node (tests/page/live.test.mjs).

import { callArgs } from "../page/controls.mjs";
import { hostNote } from "../page/hosts.mjs";
import { previewOf, recordAgain } from "../page/saved.mjs";
import { liveMessages, sentAgain, unanswered } from "../page/state.mjs";
import { EMPTY_LIVE, drawChat, droppedOf, liveBanner } from "../views/chat.mjs";
import { $ } from "../views/dom.mjs";
import { renderFailure } from "../views/reads.mjs";
import { replyGrew } from "../views/reply.mjs";
import { renderCounted, renderMessage } from "../views/overflow.mjs";

/** Python answers previews once the tokenizer and template are read (the weights may still load). */
export const canPreview = (api) => ["text", "weights", "ready"].includes(api.status.state);

/** A turn's record as it stands: while the reply streams, the preview's record with the reply so
 * far's fields (state.mjs replySoFar: the record's own names). */
function recordOf(turn) {
  const s = turn.streaming;
  if (!s) return turn.record;
  const { progress, ...reply } = s;
  return { ...turn.record, ...reply };
}

/** "Why this token" for the views: {gap: the near-tie gap}, or null when it is off. */
export const whyOf = (state) => (state.why ? { gap: state.nearTieGap } : null);

/** The arguments of a run: topK only when "why this token" is on (off costs nothing). */
const runArgs = (page, args) => (page.state.why ? { ...args, topK: page.api.settings.top_k } : args);

/** The live chat; messages the shown record no longer reads (by index) are marked dropped. */
function drawLiveChat(page, dropped = new Set(), banner = liveBanner(page.state, page.useBackend)) {
  const { state } = page;
  const items = [];
  let index = 0;
  for (const t of state.live.turns) {
    items.push({ role: "user", text: t.user, record: t.record, reloaded: t.reloaded, dropped: dropped.has(index++) });
    if (t.reply !== undefined) items.push({ role: "assistant", text: t.reply, record: t.record, reloaded: t.reloaded, dropped: dropped.has(index++) });
    else if (t.streaming) items.push({ role: "assistant", text: t.streaming.reply_text, record: null, streaming: true, progress: t.streaming.progress });
    else if (t.note) items.push({ note: t.note, noteClass: t.noteClass });
  }
  drawChat($("chat"), items, EMPTY_LIVE, { banner, why: whyOf(state) });
}

// -- the prediction ------------------------------------------------------------------------------------

const PREDICT_AFTER_MS = 300; // a pause in typing before the model is asked

/** The prediction to draw with the preview of `args` (starting it when it is new), or null when
 * there is none to make: "why this token" is off, or the weights are not in yet. */
function predictionFor(page, args) {
  const { api, state } = page;
  if (!state.why || !api.model?.backend) return null;
  const key = JSON.stringify(args);
  if (state.prediction?.key !== key) {
    page.store.predicting(key, args);
    clearTimeout(state.predictTimer);
    page.store.predictScheduled(setTimeout(() => predictNewest(page), PREDICT_AFTER_MS));
  }
  return state.prediction;
}

async function predictNewest(page) {
  const { api, state } = page;
  const wanted = state.prediction;
  // One prediction at a time (the one in flight asks again), and none while a reply is written.
  if (state.predicting || state.writing || !wanted || wanted.state !== "pending") return;
  page.store.predictAsked(true);
  let answer;
  try {
    answer = { state: "done", result: await api.predict({ ...wanted.args, topK: api.settings.top_k }) };
  } catch (e) {
    answer = { state: "error", message: e.message };
  } finally {
    page.store.predictAsked(false);
  }
  const current = state.prediction === wanted;
  page.store.predicted(wanted, answer); // drawn by the subscriber if the panel shows it
  if (!current) predictNewest(page); // a newer draft came while this one was computed: it is next
}

// -- a conversation a reload brought back -------------------------------------------------------------

const restoring = new WeakSet(); // the restored turns whose record was asked for again

/** The records of the turns a reload brought back with their replies (saved.mjs loadLive:
 * reloaded.kept), read again once Python can read (a preview: no weights needed), the last turn's
 * first (the panel shows it): their steps can then be inspected and branched as before the
 * reload. Where the prompt read now is not the one the reply was written after, the turn says why. */
export async function restoreRecords(page) {
  const { api, state, store } = page;
  if (!canPreview(api)) return;
  const todo = state.live.turns.filter((t) => t.reloaded?.kept && !t.record && !restoring.has(t)).reverse();
  for (const turn of todo) restoring.add(turn);
  for (const turn of todo) {
    const i = state.live.turns.indexOf(turn);
    if (i < 0) continue; // a new conversation since
    const kept = turn.reloaded.kept;
    const messages = liveMessages({ live: { turns: state.live.turns.slice(0, i) } }, turn.user);
    try {
      const record = recordAgain(await api.preview(previewOf(kept, messages)), kept);
      store.recordRestored(turn, record ? { record } : { why: "the prompt Python reads now is not the one it was written after " +
        "(the model's tokenizer or chat template changed since)" });
    } catch (e) {
      store.recordRestored(turn, { why: `its prompt could not be read again: ${e.message}` });
    }
  }
}

/** Draw Live mode: the chat, and in the panel the draft's preview or the last turn; `controls`: the
 * snapshot of the controls (page/controls.mjs readControls). */
export async function showLive(page, controls) {
  const { api, state } = page;
  if (state.mode !== "live") return;
  const reads = $("reads");
  const draft = controls.draft;
  const seq = page.store.previewAsked();
  const last = state.live.turns[state.live.turns.length - 1];
  if (api.status.state === "error") {
    const note = hostNote(api.source);
    if (note) {
      drawLiveChat(page);
      return renderMessage(reads, note, "error");
    }
    // Python could not start (the model's text side could not be read, most often): the page
    // says why, and what works without it, in the panel and above the chat (a phone shows the
    // chat first).
    const why = /^This page cannot reach/.test(api.status.detail) ? api.status.detail : `The worker failed: ${api.status.detail}`;
    const text = `${why} Recorded mode works without it, with real replies; or try again.`;
    const recorded = () => page.store.modeChosen("recorded", { chosen: true });
    const retry = () => location.reload();
    drawLiveChat(page, undefined, { text, actions: [{ id: "banner-recorded", label: "Recorded mode", run: recorded },
                                                   { id: "banner-retry", label: "Try again", run: retry }] });
    return renderFailure(reads, text, [
      { id: "failure-recorded", label: "Recorded mode", run: recorded },
      { id: "failure-retry", label: "Try again", run: retry },
    ]);
  }
  const n = state.live.turns.length;
  if (!draft.trim()) {
    const waiting = last && !last.record && state.writing; // sent, not read yet
    if (last?.streaming || waiting) drawLiveChat(page, last.record ? droppedOf(last.record) : undefined);
    if (last?.streaming && last.record) return page.draw(recordOf(last), STREAMING_CAPTION(n), { reply: last.streaming });
    if (waiting) {
      return renderMessage(reads, canPreview(api) ? "Reading the message: what the model reads is shown once Python has read it."
        : "Waiting for Python to start: the message is sent when it is ready.");
    }
    if (!last) {
      drawLiveChat(page);
      return renderMessage(reads, canPreview(api)
        ? "Start typing: this panel previews the prompt that would be sent, with its token counts."
        : "Python is starting in a worker; the preview appears when it is ready. Recorded mode works right away.");
    }
    const again = callArgs(liveMessages({ live: { turns: state.live.turns.slice(0, -1) } }, last.user), api.settings, controls);
    if (last.record && last.settings === settingsKey(again)) {
      drawLiveChat(page, droppedOf(last.record));
      return page.draw(last.record, last.note ? `Turn ${n}: what the model would have read; it read nothing, since no reply ` +
        `could be had${inARow(state.live.turns.slice(0, -1))}` : `Turn ${n}: what the model read when you sent it${cutByReload(last)
        ? ", and its reply as far as it got when the page was reloaded (the reload stopped it)" : ""}`);
    }
    // The settings changed since the last message was sent: show its turn again under the
    // settings chosen now, what sending it now would read. After a reload under the same
    // settings it is the same text, read again (the cache starts empty).
    if (!canPreview(api)) {
      drawLiveChat(page);
      renderMessage(reads, "Waiting for Python to start before the preview…");
    }
    const why = last.reloaded?.why ? ` Its reply's steps cannot be inspected or branched: ${last.reloaded.why}.` : "";
    const caption = last.settings === settingsKey(again)
      ? `Turn ${n} as you sent it: the same text, read again after the page reloaded (nothing is in the cache yet)${why && `.${why}`}`
      : `Turn ${n} again, under the settings chosen now: what the model would read if you sent it now`;
    return previewLive(page, again, seq, caption);
  }
  if (!canPreview(api)) {
    drawLiveChat(page);
    renderMessage(reads, "Waiting for Python to start before the preview…");
  }
  // During a reply the draft is previewed too (previews need only the tokenizer and template,
  // which the worker answers between two steps of the reply), after the reply as written so far.
  const turns = draftTurns(state, draft);
  return previewLive(page, callArgs(liveMessages({ live: { turns } }, draft, { partial: true }), api.settings, controls), seq,
    last?.streaming ? "Preview: what the model would read if you sent this after the reply being written (as far as it has got)"
      : turns !== state.live.turns ? "Preview: what the model would read if you sent this again now, in the place of the same message that got no reply"
        : `Preview: what the model would read if you sent this now${inARow(turns)}`);
}

/** Whether the turn's reply is the one a reload cut off, brought back, its record read again. */
const cutByReload = (turn) => Boolean(turn.reloaded?.cut && turn.record?.reply_ids);

/** The turns a draft is sent after: a message sent again takes the place of the one that got no
 * reply (state.mjs sentAgain). */
function draftTurns(state, draft) {
  const turns = state.live.turns;
  return sentAgain(state, draft) ? turns.slice(0, -1) : turns;
}

/** When the last of `turns` got no reply, why the next message follows it directly (else ""). */
function inARow(turns) {
  const last = turns.at(-1);
  return last && unanswered(last) ? "; with no reply to your message before, the two come one after the other" : "";
}

/** The settings a turn is read under (the system prompt, the window, how typed special tokens
 * are read), as a key: the same key, the same text. */
const settingsKey = (args) => JSON.stringify({ ...args, messages: undefined });

async function previewLive(page, args, seq, caption) {
  const { api, store } = page;
  try {
    store.previewed(seq, { args, caption, record: await api.preview(args) });
  } catch (error) {
    store.previewed(seq, { args, caption, error });
    if (error.name === "WindowError" && error.data?.at_least && store.isNewest(seq)) countExactly(page, args, seq);
  }
}

// A message too long for the window is answered at once from a bound ("at least N tokens"); its
// exact count follows from the worker, which answers other requests meanwhile. One count at a
// time: a newer preview ends the one before it.
async function countExactly(page, args, seq) {
  const { api, state, store } = page;
  state.counter?.abort();
  const counter = new AbortController();
  store.countStarted(counter);
  try {
    store.counted(seq, { counted: await api.count(args, { signal: counter.signal }) });
  } catch (error) {
    if (error.name !== "AbortError") store.counted(seq, { error });
  } finally {
    if (state.counter === counter) store.countStarted(null);
  }
}

/** A message that cannot be read (too long for the window, Python failed) is taken back; a
 * window's overflow is then counted exactly. */
function cannotSend(page, turn, args, error) {
  page.store.unsent(turn, error);
  if (error.name === "WindowError" && error.data?.at_least) countExactly(page, args, page.store.previewAsked());
}

// One message at a time: a second Enter while the first waits (for Python to boot, or for its
// reply) sends nothing (the store's `writing`). The draft is cleared at once (app.mjs's
// subscriber, on "sent"), so text typed during the wait is kept for the next message; the sent
// text lives in its turn, shown before Python has read it.
//
// A send is one request, the run: it answers the turn's record (onRecord) before its first token,
// and the record with the reply at its end. What each step changes goes through the store;
// app.mjs's subscriber draws it (liveChanged).
//
// The reply being written holds its AbortController in the store (`stopper`), for Stop.
export async function send(page, controls) {
  const { api, state, store } = page;
  const text = controls.draft;
  if (state.writing || !text.trim() || state.mode !== "live") return;
  const args = callArgs(liveMessages({ live: { turns: draftTurns(state, text) } }, text), api.settings, controls);
  const turn = store.sent(text, settingsKey(args));
  let read = false;
  const readNow = (record) => {
    if (read) return;
    read = true;
    if (state.live.turns.includes(turn)) store.observed(record, { live: true }); // not a conversation cleared since
    store.read(turn, record);
  };
  const controller = new AbortController();
  const running = api.run(runArgs(page, args), {
    signal: controller.signal,
    onRecord: readNow,
    onToken: (t) => store.tokenArrived(turn, t),
    onProgress: (p) => store.progressed(turn, p),
  });
  const ended = () => {
    if (state.stopper?.controller === controller) store.stopperSet(null);
  };
  store.stopperSet({ mode: "live", controller, ended: running.then(ended, ended) });
  let full;
  try {
    full = await running;
  } catch (e) {
    if (read) return store.failed(turn, e.message);
    if (e.name === "WindowError") return cannotSend(page, turn, args, e);
    // The run failed before it said what the model reads (no weights, most often): the preview
    // says it for the turn, or why the message cannot be read at all.
    let record;
    try {
      record = await api.preview(args);
    } catch (error) {
      return cannotSend(page, turn, args, error);
    }
    return store.failed(turn, e.message, record);
  }
  readNow(full); // an API that does not answer the record first: the reply's record is the read too
  if (state.live.turns.includes(turn)) store.observed(full, { live: true });
  store.replied(turn, full);
}

/** Stop the reply being written, if any: it keeps what it has, marked stopped. Resolves once it
 * has ended. */
export function stop(page) {
  const replying = page.state.stopper;
  if (replying?.mode !== "live") return Promise.resolve();
  page.store.stopAsked();
  replying.controller.abort();
  return replying.ended;
}

const STREAMING_CAPTION = (n) => `Turn ${n}: what the model read, and its reply as it writes it`;

/** A token of the last turn's reply, with no draft previewed: the chat's bubble grows by what it
 * adds (views/chat.mjs) and the panel's reply view appends it (views/reply.mjs replyGrew). False
 * when the panel does not show this reply as it streams (showLive draws it then). */
function tokenDrawn(page, change, controls) {
  const { state } = page;
  const { turn, reply } = change;
  // (globalThis.chatlensFullRedraw: scripts/bench_browser.py's "before" row, the whole panel each token)
  if (controls.draft.trim() || !turn.record || state.live.turns.at(-1) !== turn || globalThis.chatlensFullRedraw) return false;
  drawLiveChat(page, droppedOf(turn.record));
  if (!replyGrew(reply)) return false;
  const [, caption, extra] = state.drawn || [];
  page.store.panelDrawn([recordOf(turn), caption, extra]); // a tab chosen draws the reply as it is now
  return true;
}

/** What a change of the store (page/state.mjs) redraws in Live mode, `controls` being the
 * snapshot of the controls taken for the change; app.mjs subscribes it. */
export function liveChanged(page, change, controls) {
  const { state } = page;
  if (state.mode !== "live") return;
  switch (change.type) {
    case "token":
      if (change.current && !tokenDrawn(page, change, controls)) showLive(page, controls);
      return;
    case "sent":
    case "read":
    case "replied":
    case "failed":
    case "record-restored":
      if (change.current) showLive(page, controls);
      return;
    case "progress":
      if (change.current && change.turn) drawLiveChat(page, change.turn.record ? droppedOf(change.turn.record) : undefined);
      return;
    case "previewed":
      if (!change.current) return; // a newer preview is on its way
      if (change.record) {
        drawLiveChat(page, droppedOf(change.record));
        return page.draw(change.record, change.caption, { prediction: predictionFor(page, change.args) });
      }
      drawLiveChat(page);
      return renderMessage($("reads"), `Cannot preview: ${change.error.message}`, "error", change.error,
                           { counting: Boolean(change.error.data?.at_least) });
    case "counted":
      if (!change.current) return;
      if (change.error) return renderMessage($("reads"), `Cannot count the tokens: ${change.error.message}`, "error");
      if (!renderCounted($("reads"), change.counted, `Cannot preview: ${change.counted.message}`)) showLive(page, controls);
      return;
    case "unsent":
      if (!change.current) return;
      drawLiveChat(page);
      renderMessage($("reads"), `Cannot send: ${change.error.message}`, "error", change.error,
                    { counting: Boolean(change.error.data?.at_least) });
      return;
    case "predicted": {
      const [record, caption, extra] = state.drawn || [];
      if (change.current && extra?.prediction === change.prediction) page.draw(record, caption, { prediction: change.prediction });
      return;
    }
    case "replies":
      if (change.changed) showLive(page, controls);
      return;
  }
}
