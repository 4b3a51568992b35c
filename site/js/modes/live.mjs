// Live mode: the conversation the user types, previewed as they type (what the model would
// read if they sent it now), and sent one message at a time. With "why this token" on, replies
// carry each token's candidates (the worker's topK), and once the weights are in, the preview
// also shows what the model would most likely write first: one step of the model on the draft,
// asked for after a pause in typing, at most one at a time, and only for the newest draft.

import { callArgs } from "../page/controls.mjs";
import { hostNote } from "../page/hosts.mjs";
import { liveMessages, sentAgain, unanswered } from "../page/state.mjs";
import { EMPTY_LIVE, drawChat, droppedOf, liveBanner } from "../views/chat.mjs";
import { $ } from "../views/dom.mjs";
import { renderFailure } from "../views/reads.mjs";
import { renderCounted, renderMessage } from "../views/overflow.mjs";

/** Python answers previews once the tokenizer and template are read (the weights may still load). */
export const canPreview = (api) => ["text", "weights", "ready"].includes(api.status.state);

/** A turn's record as it stands: while the reply streams, the preview's record with the reply so far. */
function recordOf(turn) {
  const s = turn.streaming;
  if (!s) return turn.record;
  return { ...turn.record, reply_text: s.text, reply_ids: s.ids, reply_tokens: s.tokens, reply_bytes: s.bytes, stop_reason: null };
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
    items.push({ role: "user", text: t.user, record: t.record, saved: t.saved, dropped: dropped.has(index++) });
    if (t.reply !== undefined) items.push({ role: "assistant", text: t.reply, record: t.record, saved: t.saved, dropped: dropped.has(index++) });
    else if (t.streaming) items.push({ role: "assistant", text: t.streaming.text, record: null, streaming: true, progress: t.streaming.progress });
    else if (t.note) items.push({ note: t.note, noteClass: t.noteClass });
  }
  drawChat($("chat"), items, EMPTY_LIVE, { banner, why: whyOf(state) });
}

// -- the prediction ------------------------------------------------------------------------------------

const PREDICT_AFTER_MS = 300; // a pause in typing before the model is asked
let predictTimer = null;
let predicting = false; // one prediction at a time; a newer draft waits for it, older ones are skipped
let sending = false;

/** The prediction to draw with the preview of `args` (starting it when it is new), or null when
 * there is none to make: "why this token" is off, or the weights are not in yet. */
function predictionFor(page, args) {
  const { api, state } = page;
  if (!state.why || !api.model?.backend) return null;
  const key = JSON.stringify(args);
  if (state.prediction?.key !== key) {
    page.store.predicting(key, args);
    clearTimeout(predictTimer);
    predictTimer = setTimeout(() => predictNewest(page), PREDICT_AFTER_MS);
  }
  return state.prediction;
}

async function predictNewest(page) {
  const { api, state } = page;
  const wanted = state.prediction;
  if (predicting || sending || !wanted || wanted.state !== "pending") return; // the one in flight asks again
  predicting = true;
  let answer;
  try {
    answer = { state: "done", result: await api.predict({ ...wanted.args, topK: api.settings.top_k }) };
  } catch (e) {
    answer = { state: "error", message: e.message };
  } finally {
    predicting = false;
  }
  const current = state.prediction === wanted;
  page.store.predicted(wanted, answer); // drawn by the subscriber if the panel shows it
  if (!current) predictNewest(page); // a newer draft came while this one was computed: it is next
}

export async function showLive(page) {
  const { api, state } = page;
  if (state.mode !== "live") return;
  const reads = $("reads");
  const draft = $("draft").value;
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
    if (last?.streaming || (last && !last.record && sending)) drawLiveChat(page, last.record ? droppedOf(last.record) : undefined);
    if (last?.streaming) return page.draw(recordOf(last), `Turn ${n}: what the model read, and its reply as it writes it`);
    if (last && !last.record && sending) return renderMessage(reads, "Waiting for Python to start: the message is sent when it is ready.");
    if (!last) {
      drawLiveChat(page);
      return renderMessage(reads, canPreview(api)
        ? "Start typing: this panel previews the prompt that would be sent, with its token counts."
        : "Python is starting in a worker; the preview appears when it is ready. Recorded mode works right away.");
    }
    const again = callArgs(liveMessages({ live: { turns: state.live.turns.slice(0, -1) } }, last.user), api.settings);
    if (last.record && last.settings === settingsKey(again)) {
      drawLiveChat(page, droppedOf(last.record));
      return page.draw(last.record, last.note ? `Turn ${n}: what the model would have read; it read nothing, since no reply ` +
        `could be had${inARow(state.live.turns.slice(0, -1))}` : `Turn ${n}: what the model read when you sent it`);
    }
    // The settings changed since the last message was sent: show its turn again under the
    // settings chosen now, what sending it now would read. After a reload under the same
    // settings it is the same text, read again (the cache starts empty).
    if (!canPreview(api)) {
      drawLiveChat(page);
      renderMessage(reads, "Waiting for Python to start before the preview…");
    }
    const caption = last.settings === settingsKey(again)
      ? `Turn ${n} as you sent it: the same text, read again after the page reloaded (nothing is in the cache yet)`
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
  return previewLive(page, callArgs(liveMessages({ live: { turns } }, draft, { partial: true }), api.settings), seq,
    last?.streaming ? "Preview: what the model would read if you sent this after the reply being written (as far as it has got)"
      : turns !== state.live.turns ? "Preview: what the model would read if you sent this again now, in the place of the same message that got no reply"
        : `Preview: what the model would read if you sent this now${inARow(turns)}`);
}

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
let counter = null;
async function countExactly(page, args, seq) {
  counter?.abort();
  counter = new AbortController();
  try {
    page.store.counted(seq, { counted: await page.api.count(args, { signal: counter.signal }) });
  } catch (error) {
    if (error.name !== "AbortError") page.store.counted(seq, { error });
  }
}

// One message at a time: a second Enter while the first waits (for Python to boot, or for its
// reply) sends nothing. The draft is cleared at once, so text typed during the wait is kept
// for the next message; the sent text lives in its turn, shown before Python has read it.
// What each step changes goes through the store; app.mjs's subscriber draws it (liveChanged).
export async function send(page) {
  const { api, state, store } = page;
  const text = $("draft").value;
  if (sending || !text.trim() || state.mode !== "live") return;
  sending = true;
  $("send").disabled = true;
  const args = callArgs(liveMessages({ live: { turns: draftTurns(state, text) } }, text), api.settings);
  $("draft").value = "";
  const turn = store.sent(text, settingsKey(args));
  try {
    let record;
    try {
      record = await api.preview(args);
    } catch (e) {
      if (!$("draft").value.trim()) $("draft").value = text; // nothing new typed: give it back
      store.unsent(turn, e);
      if (e.name === "WindowError" && e.data?.at_least) countExactly(page, args, store.previewAsked());
      return;
    }
    if (!state.live.turns.includes(turn)) return; // a new conversation started meanwhile
    store.observed(record, { live: true });
    store.read(turn, record);
    $("stop").hidden = false;
    try {
      const full = await api.run(runArgs(page, args), {
        onToken: (t) => store.tokenArrived(turn, t),
        onProgress: (p) => store.progressed(turn, p),
      });
      store.observed(full, { live: true });
      store.replied(turn, full);
    } catch (e) {
      store.failed(turn, e.message);
    } finally {
      $("stop").hidden = true;
    }
  } finally {
    sending = false;
    $("send").disabled = false;
  }
}

/** Stop the reply being written: it keeps what it has, marked stopped. */
export function stop(page) {
  page.store.stopAsked();
  page.api.stop();
}

/** What a change of the store (page/state.mjs) redraws in Live mode; app.mjs subscribes it. */
export function liveChanged(page, change) {
  const { state } = page;
  if (state.mode !== "live") return;
  switch (change.type) {
    case "sent":
    case "read":
    case "token":
    case "replied":
    case "failed":
      if (change.current) showLive(page);
      return;
    case "progress":
      if (change.current && change.turn) drawLiveChat(page, droppedOf(change.turn.record));
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
      if (!renderCounted($("reads"), change.counted, `Cannot preview: ${change.counted.message}`)) showLive(page);
      return;
    case "unsent":
      if (!change.current) return;
      drawLiveChat(page);
      renderMessage($("reads"), `Cannot send: ${change.error.message}`, "error", change.error,
                    { counting: Boolean(change.error.data?.at_least) });
      return;
    case "predicted": {
      const [record, caption, extra] = page.drawn || [];
      if (change.current && extra?.prediction === change.prediction) page.draw(record, caption, { prediction: change.prediction });
      return;
    }
    case "replies":
      if (change.changed) showLive(page);
      return;
  }
}
