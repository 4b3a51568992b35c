// "Which turn each reply needed": the conversation's matrix (chatlens.needs, drawn by
// views/needs.mjs), asked of the live conversation, or of the recorded one Recorded mode shows
// once the model is stored, in its own box under the step box. Each reply is measured with the
// ids its record holds (so a row equals chatlens.cause on that turn's whole reply); a cell opens
// that reply's token strip (views/strip.mjs) for its piece. Progress reply by reply and pass by
// pass, with a Stop (updated in place: the Stop a learner reached by keyboard stays).
//
// What the box holds is the store's (page/state/needs.mjs), changed by its transitions only;
// app.mjs's one subscriber hands each change here (needsChanged).

import { readControls } from "../page/controls.mjs";
import { needsRequest } from "../page/step.mjs";
import { $, el, fill } from "../views/dom.mjs";
import { needsView } from "../views/needs.mjs";
import { workWords } from "../views/progress.mjs";
import { stripView } from "../views/strip.mjs";
import { findConversation, userMessage } from "./recorded.mjs";
import { nameStep, recordRequest, refusal, whereOf } from "./steps.mjs";
import { HELD_OFF } from "../page/writing.mjs";

/** The conversation a matrix can be asked of now: {label, messages, replies, args, note, records}
 * (records: each reply's, to open its steps), or {why} (a sentence), or null (nothing to offer).
 * controls: the page's (readControls: Recorded mode's preset and window name its conversation). */
export function conversationOf(state, controls = null) {
  if (state.mode === "live") {
    const turns = state.live.turns.filter((t) => t.reply !== undefined);
    if (!turns.length) return null;
    if (turns.length !== state.live.turns.length) return { why: "A turn of this conversation has no reply yet: the matrix measures every reply." };
    if (!turns.at(-1).record?.reply_ids?.length) return null; // its settings are the last turn's record's
    const messages = turns.flatMap((t) => [{ role: "user", content: t.user }, { role: "assistant", content: t.reply }]);
    const last = turns.at(-1).record;
    const other = turns.findIndex((t) => t.record && (t.record.window !== last.window || (t.record.system ?? null) !== (last.system ?? null)));
    const note = other < 0 ? null : `Turn ${other + 1} was sent with another window or system prompt: every reply is measured here ` +
      "with the last turn's, as a next message would read the conversation.";
    // a reply this visit has no record of (one a Look inside case restored from the recording) is
    // read as the template writes its text (null)
    return { label: "this conversation", messages, replies: turns.map((t) => t.record?.reply_ids ?? null), args: recordRequest(last, messages),
             records: turns.map((t) => t.record), note };
  }
  if (state.mode === "recorded" && state.recorded) {
    const { preset, window } = controls ?? readControls();
    const conv = findConversation(state.recorded, preset, window);
    if (!conv) return null;
    const messages = conv.turns.flatMap((t, i) => [{ role: "user", content: userMessage(state.recorded, conv, i) },
                                                   { role: "assistant", content: t.reply_text }]);
    return { label: "the recorded conversation", messages, replies: conv.turns.map((t) => t.reply_ids),
             args: { messages, system: conv.system, window: conv.window, maxTokens: state.recorded.reply_limit },
             records: conv.turns, note: null };
  }
  return null;
}

/** Ask the matrix of the conversation shown (knocked: each piece knocked out too). */
export async function askNeeds(page, { knocked = false } = {}) {
  const { api, state, store } = page;
  const conv = conversationOf(state);
  if (!conv || conv.why) return;
  const why = refusal(api, state, HELD_OFF.needs);
  if (why) return store.needsEnded(store.needsAsked({ label: conv.label, args: null, knocked, controller: null }), { error: why });
  const controller = new AbortController();
  const args = needsRequest(conv.args, conv.messages, conv.replies, { knocked });
  const run = store.needsAsked({ label: conv.label, args, knocked, controller });
  try {
    const answer = await api.needs(args, { signal: controller.signal, onProgress: (p) => store.needsProgress(run, p) });
    store.needsEnded(run, { answer });
  } catch (e) {
    store.needsEnded(run, { error: e.name === "AbortError" ? "Stopped: no figures." : `No figures: ${e.message}` });
  }
}

/** Set the box up under the step box. */
export function setUpNeeds(page) {
  if ($("needs-box")) return;
  $("step-box").after(el("section", { id: "needs-box", class: "needs-box", "aria-labelledby": "needs-title" }));
  drawNeeds(page);
}

/** A change of the store (app.mjs's subscriber): the box's own, or the conversation's. */
export function needsChanged(page, change) {
  if (change.type === "needs" && change.what === "progress") return progressed(page);
  if (change.type === "needs" || ["replied", "restored", "cleared", "mode", "record-restored", "step", "failed", "sent"].includes(change.type)) {
    drawNeeds(page);
  }
}

const title = () => el("h3", { id: "needs-title", text: "Which turn each reply needed" });

/** The box: the offer, the progress and Stop, the matrix, the open cell's token strip. */
export function drawNeeds(page) {
  const node = $("needs-box");
  if (!node) return;
  const { state, store } = page;
  const run = state.needs.run;
  const conv = conversationOf(state);
  if (!run && (!conv || conv.why)) {
    node.hidden = !conv;
    return fill(node, conv ? [title(), el("p", { class: "note", text: conv.why })] : []);
  }
  node.hidden = false;
  const computing = run && !run.answer && !run.error && run.controller;
  const knocked = el("input", { type: "checkbox", id: "needs-knocked", checked: run?.knocked ?? false });
  fill(
    node,
    el("div", { class: "inspect-head" }, title(),
      run ? el("button", { type: "button", class: "needs-close", onclick: () => store.needsClosed(), text: "Close" }) : null),
    !run ? el("p", { class: "term", text: `For each reply of ${conv.label}, each piece it read taken away: the system prompt, each ` +
      "earlier message, its own message, the header, every earlier reply at once, and a dropped turn put back. One pass a piece a reply." }) : null,
    conv?.note ? el("p", { class: "note", text: conv.note }) : null,
    !computing ? el("p", { class: "needs-offer" },
      el("button", { type: "button", class: "needs-ask", onclick: () => askNeeds(page, { knocked: knocked.checked }),
                     text: run?.answer ? "Measure again" : "Which turn each reply needed" }),
      " ", el("label", {}, knocked, " also not read (twice the passes)")) : null,
    computing ? progressNode(run) : null,
    run?.error ? el("p", { class: "error", text: run.error }) : null,
    run?.answer ? needsView(run.answer, run.args.messages, {
      open: run.open, onOpen: (open) => store.needsOpened(run, open),
      guessFirst: state.guessFirst, guess: run.guess, onGuess: (turn, name) => store.needsGuessed(run, turn, name),
    }) : null,
    run?.answer && run.open ? openStrip(page, run) : null,
  );
}

function progressNode(run) {
  const w = workWords(run.progress);
  return el("div", { class: "needs-progress progress-box" },
    el("p", { class: "note progress-line", text: `Measuring ${run.label}: ${w.line}` }),
    el("p", { class: "term progress-detail", text: w.detail }),
    el("button", { type: "button", class: "needs-stop stop", onclick: () => run.controller?.abort(), text: "Stop" }));
}

/** The progress, updated in place: the line and its detail change, the Stop stays the same node. */
function progressed(page) {
  const run = page.state.needs.run;
  const box = $("needs-box")?.querySelector(".needs-progress");
  if (!run || !box) return drawNeeds(page);
  const w = workWords(run.progress);
  box.querySelector(".progress-line").textContent = `Measuring ${run.label}: ${w.line}`;
  box.querySelector(".progress-detail").textContent = w.detail;
}

/** The open cell's turn as a token strip, its tokens opening their steps in the step box. */
function openStrip(page, run) {
  const turn = run.answer.turns.find((t) => t.turn === run.open.turn);
  if (!turn) return null;
  const { state, store } = page;
  const conv = conversationOf(state);
  const record = conv?.records?.[turn.turn] ?? null;
  const where = record ? whereOf(state, record, { settings: page.api.settings, context: page.api.model?.n_ctx }) : null;
  return stripView(turn, turn.reply_tokens, { piece: run.open.piece, measure: run.open.measure }, {
    label: `Reply ${turn.turn + 1}, every token`,
    onChoose: ({ piece, measure }) => store.needsOpened(run, { turn: turn.turn, piece, measure }),
    onOpen: where && !where.why ? (k) => nameStep(page, where, k) : null,
  });
}
