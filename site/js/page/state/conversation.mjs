// The live conversation, an area of the page's state (page/state.mjs): its turns, the message
// sent and its record read, the reply's end or failure, the previews and the exact counts of the
// draft, the prediction while the learner types, and the reply being written (`writing`, `stopper`).
// The live conversation is the page's own (the worker only caches: every request carries the
// whole conversation). A token of a reply grows it through replies.mjs, the one way for every mode.

import { record, replySoFar } from "./shapes.mjs";
import { closeBox } from "./stepbox.mjs";

export const fields = () => ({
  live: record({ turns: [] }), // each turn: newTurn() below
  // A reply is being written: in Live, from the message sent to its reply's end (or its
  // failure); in plain text, while a side is written; in the comparison, while its four are.
  // One at a time: a send or a run while this is true does nothing. (chatlens.writing, the
  // API's, is true while a run is in flight, whoever asked for it.)
  writing: false,
  draftSeq: 0, // the newest preview asked for; older answers are dropped
  counter: null, // the AbortController of the exact count in flight (modes/live.mjs countExactly)
  prediction: null, // {key, args, state: "pending" | "done" | "error", result, message}
  predicting: false, // a prediction is in flight: one at a time, the newest draft's next
  predictTimer: null, // the pause in typing before the prediction is asked (a timer's id)
  // The reply being written in Live or in plain text, for Stop (one at a time: `writing`):
  // {mode ("live" or "plain"), controller, ended: a promise settled once its request has}
  // (modes/live.mjs, modes/plain.mjs); the comparison's run holds its own.
  stopper: null,
});

/** A live turn, every field declared: user (the message), settings (the key it was read under),
 * record (what the model read, then the reply's), reply (its text, undefined while it has none),
 * note and noteClass (why it has none), streaming (the reply being written: a reply so far),
 * reloaded: null for a turn of this visit; for one a reload brought back, what it holds of the
 * last visit (page/saved.mjs reloadedOf: its lines, whether the reload cut it, its record to read
 * again), until its reply changes (`replied`: a branch kept). */
export function newTurn({ user, settings, record = null, reply = undefined, note = undefined, noteClass = undefined, reloaded = null }) {
  return Object.seal({ user, settings, record, reply, note, noteClass, streaming: null, reloaded });
}

/** The reply of a live turn being written, begun by its record or, from an API that does not
 * answer the record first, by its first progress or token (replies.mjs). */
export function begun(state, turn) {
  if (!turn.streaming && turn.reply === undefined && !turn.note && state.writing) turn.streaming = replySoFar();
  return turn.streaming;
}

export function transitions({ state, emit }) {
  // A turn's change is drawn only while the turn is in the conversation shown (a new
  // conversation may have started while it was read or written).
  const turnChange = (type, turn, detail = {}) => emit(type, { turn, current: state.live.turns.includes(turn), ...detail });
  return {
    /** The live conversation kept from the last visit (page/saved.mjs loadLive). */
    restored(turns) {
      state.live = record({ turns: turns.map(newTurn) });
      closeBox(state);
      emit("restored");
    },
    /** A restored turn's record read again (modes/live.mjs restoreRecords: the prompt read anew,
     * the reply as saved), or why it cannot be (a sentence, said with the turn; not saved: the
     * next visit tries again). */
    recordRestored(turn, { record = null, why = null }) {
      if (record) turn.record = record;
      else turn.reloaded.why = why;
      turnChange("record-restored", turn);
    },
    /** New conversation: Live starts over; Recorded goes back to its first turn. */
    cleared() {
      if (state.mode === "live") state.live = record({ turns: [] });
      else state.step = 0;
      state.stepBox.reloaded = null;
      closeBox(state);
      emit("cleared", { mode: state.mode });
    },
    /** A preview is asked for: its number, to drop the answer if a newer one was asked since. */
    previewAsked() {
      return ++state.draftSeq;
    },
    isNewest: (seq) => seq === state.draftSeq,
    /** Preview `seq` answered: {args, caption, record} or {args, caption, error}; `current`: it is
     * still the newest (an older answer is not drawn). */
    previewed(seq, answer) {
      emit("previewed", { ...answer, current: seq === state.draftSeq });
    },
    /** An exact count started (its AbortController), or ended (null); a newer one aborts it. */
    countStarted(controller) {
      state.counter = controller;
    },
    /** A preview too long for the window (its bound, WindowError's at_least) counted exactly:
     * {counted} (the exact figures) or {error}. */
    counted(seq, answer) {
      emit("counted", { ...answer, current: seq === state.draftSeq });
    },
    /** The user sent `text` (read under `settings`, a key): its turn, with no record yet; a reply
     * is being written from now on (`writing`). A message sent again (sentAgain) takes the
     * place of the one that got no reply. */
    sent(text, settings) {
      if (sentAgain(state, text)) state.live.turns.pop();
      state.writing = true;
      state.stepBox.reloaded = null;
      closeBox(state);
      const turn = newTurn({ user: text, settings });
      state.live.turns.push(turn);
      turnChange("sent", turn);
      return turn;
    },
    /** The message could not be read (too long, Python failed): its turn is taken back. */
    unsent(turn, error) {
      const current = state.live.turns.includes(turn);
      if (current) state.live.turns.splice(state.live.turns.indexOf(turn), 1);
      state.writing = false;
      emit("unsent", { turn, current, error });
    },
    /** The turn's record (what the model reads) came back: its reply starts. */
    read(turn, record) {
      turn.record = record;
      turn.streaming ??= replySoFar();
      turnChange("read", turn);
    },
    /** The reply ended (end_turn, max_tokens or stopped): the turn's full record; the one
     * transition for a reply that ended (a branch kept ends so too: stepbox.mjs branchKept), so
     * the reply is this visit's (`reloaded` null). Another turn's reply ending closes a branch
     * the step box holds: it was never that turn's. */
    replied(turn, record) {
      turn.record = record;
      turn.reply = record.reply_text;
      turn.streaming = null;
      turn.reloaded = null;
      state.writing = false;
      const branch = state.stepBox.branch;
      if (branch && branch.where.turn !== turn) closeBox(state), emit("step-box", { what: "closed" });
      turnChange("replied", turn, { stopped: record.stop_reason === "stopped" });
    },
    /** Stop was pressed: the reply ends with what it has (a `replied` with stop_reason stopped). */
    stopAsked() {
      emit("stopping");
    },
    /** No reply could be had: the turn says why; `record`: what the model would have read, when
     * the run failed before it said. */
    failed(turn, message, record = turn.record) {
      turn.record = record;
      turn.note = `No reply: ${message}`;
      turn.noteClass = "no-reply";
      turn.streaming = null;
      state.writing = false;
      turnChange("failed", turn);
    },
    /** The reply being written in Live or plain text (`stopper` above) started, or ended (null). */
    stopperSet(stopper) {
      state.stopper = stopper;
    },

    // -- the prediction while the user types -------------------------------------------------------
    /** The prediction for a new draft is wanted (its key: the draft's arguments). */
    predicting(key, args) {
      state.prediction = Object.seal({ key, args, state: "pending", result: undefined, message: undefined });
      return state.prediction;
    },
    /** The prediction waits for a pause in typing: the timer that asks it (the one before is
     * cleared by the caller). */
    predictScheduled(timer) {
      state.predictTimer = timer;
    },
    /** A prediction was asked of the model (true), or answered (false). */
    predictAsked(on) {
      state.predicting = on;
    },
    /** A prediction's answer: {state: "done", result} or {state: "error", message}. */
    predicted(wanted, answer) {
      Object.assign(wanted, answer);
      emit("predicted", { prediction: wanted, current: state.prediction === wanted });
    },
  };
}

/** Whether a turn's message got no reply (and none is coming): the worker failed, or a reload
 * cut it off before the model wrote anything. */
export const unanswered = (turn) => turn.reply === undefined && !turn.streaming && Boolean(turn.note);

/** Whether `text` is the last message sent again: it got no reply (a reload cut it off, the
 * worker died), replies can be had now, and the text is the same. Without replies at all, a
 * message sent twice is two messages (the window fills, message by message). */
export function sentAgain(state, text) {
  const last = state.live.turns.at(-1);
  return Boolean(last && unanswered(last) && last.user === text && state.replies.state !== "none");
}

/** The messages of the live conversation, then `extra` as the new user message. A message that
 * got no reply stays in it (the page without a model still fills the window, message by
 * message), so the next follows it directly. partial: a reply being written counts with what it
 * has written so far (a draft previewed during a reply). */
export function liveMessages(state, extra, { partial = false } = {}) {
  const msgs = [];
  for (const t of state.live.turns) {
    msgs.push({ role: "user", content: t.user });
    if (t.reply !== undefined) msgs.push({ role: "assistant", content: t.reply });
    else if (partial && t.streaming) msgs.push({ role: "assistant", content: t.streaming.reply_text });
  }
  if (extra !== undefined) msgs.push({ role: "user", content: extra });
  return msgs;
}
