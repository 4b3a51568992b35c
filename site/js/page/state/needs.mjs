// The conversation's matrix, an area of the page's state (page/state.mjs): which turn each reply
// of a conversation needed (chatlens.needs), asked of the live conversation or a recorded one,
// and which turn's token strip it shows. Its changes are told as {type: "needs", what}.

import { record } from "./shapes.mjs";

export const fields = () => ({
  // needs.run: the newest matrix asked, or null:
  //   {label, args, messages, controller, progress, answer, error, knocked, open, guess}
  //   label   whose conversation ("this conversation", "the recorded conversation")
  //   args    the request (chatlens.needs's: the messages, each reply's ids, the settings)
  //   controller, progress, answer, error   as a cause's measure: asked, then answered or failed
  //   knocked each piece knocked out too (asked so)
  //   open    {turn, piece, measure}: the turn whose token strip is shown, the piece and measure
  //           it tints by (null: none)
  //   guess   {turn: piece name}: the learner's guess for a turn's row, before its figures
  // A new message, a new conversation, another mode or a restored conversation ends it (the step
  // box's closeBox).
  needs: record({ run: null }),
});

export function transitions({ state, emit }) {
  const changed = (what) => emit("needs", { what });
  return {
    /** The matrix is asked (its AbortController): the one before it is stopped. Returns it. */
    needsAsked({ label, args, knocked, controller }) {
      state.needs.run?.controller?.abort();
      state.needs.run = Object.seal({ label, args, controller, progress: null, answer: null, error: null, knocked,
                                      open: null, guess: {} });
      changed("asked");
      return state.needs.run;
    },
    /** How far it has got: the worker's progress ({read, of, ms, doing, stage}). */
    needsProgress(run, progress) {
      if (state.needs.run !== run) return;
      run.progress = progress;
      changed("progress");
    },
    /** It answered (chatlens.needs's), or failed (a sentence; "Stopped: ..." when stopped). */
    needsEnded(run, { answer = null, error = null }) {
      run.controller = null;
      if (state.needs.run !== run) return;
      Object.assign(run, { answer, error, progress: null });
      changed("ended");
    },
    /** A turn's token strip is shown ({turn, piece, measure}), or none (null). */
    needsOpened(run, open) {
      if (state.needs.run !== run) return;
      run.open = open;
      changed("opened");
    },
    /** The learner guessed which piece a turn's reply needed most (Guess first). */
    needsGuessed(run, turn, name) {
      if (state.needs.run !== run) return;
      run.guess = { ...run.guess, [turn]: name };
      changed("guessed");
    },
    /** The matrix's Close (its Stop too: what it computes is stopped). */
    needsClosed() {
      state.needs.run?.controller?.abort();
      state.needs.run = null;
      changed("closed");
    },
  };
}
