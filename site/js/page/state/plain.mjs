// Plain-text mode (modes/plain.mjs), an area of the page's state (page/state.mjs): the text read,
// its tokens, and its two sides, each a slot a reply is written in (growing.mjs grows them).

import { shownIn } from "./growing.mjs";
import { replySoFar, slotOf } from "./shapes.mjs";

export const fields = () => ({
  plain: null, // the text, its tokens and its two sides (plainText below), once a text is read
});

export function transitions({ state, emit }) {
  return {
    /** The text to read: a new one starts fresh (its tokens unknown, and its two sides, "plain"
     * (the continuation) and "chat" (the same words as a chat message), slots with nothing in them). */
    plainText(text) {
      if (!state.plain || state.plain.text !== text) state.plain = Object.seal({ text, tokens: null, error: null, seq: 0, plain: slotOf(), chat: slotOf() });
      return state.plain;
    },
    /** A side of plain text is being written (true) or ended (false). */
    plainWriting(on) {
      state.writing = on;
      emit("plain-writing", { on });
    },
    /** The text's tokens (or why not), for `p` if it is still the text shown. */
    tokenized(p, { tokens = null, error = null }) {
      if (state.plain !== p) return;
      p.tokens = tokens;
      p.error = error;
      emit("plain");
    },
    /** A plain-text side (a slot of state.plain) starts its reply. */
    sideStarted(side) {
      Object.assign(side, { streaming: replySoFar(), answer: null, error: null });
      if (shownIn(state, side)) emit("plain");
    },
    /** A plain-text side ended: {answer} (a Continuation, or the TurnRecord) or {error}. */
    sideEnded(side, { answer = null, error = null }) {
      Object.assign(side, { streaming: null, answer, error });
      if (shownIn(state, side)) emit("plain");
    },
  };
}
