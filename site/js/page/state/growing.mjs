// A reply growing, an area of the page's state (page/state.mjs) with no fields of its own: the one
// way a reply grows (a token, the prompt's progress), wherever it is written (a live turn, a
// plain-text side, a comparison's cell, the step box's branch), and which mode shows it.

import { cellsOf } from "./comparison.mjs";
import { begun } from "./conversation.mjs";
import { addToken } from "./shapes.mjs";

export const fields = () => ({});

/** Which mode shows the reply written at `at` (a live turn, a plain-text side, a comparison's
 * cell, the step box's branch), or null when none does (a new conversation, text or comparison
 * took its place). */
export function shownIn(state, at) {
  if (state.live.turns.includes(at)) return "live";
  if (state.stepBox.branch === at) return "branch";
  if (state.plain && (state.plain.plain === at || state.plain.chat === at)) return "plain";
  if (cellsOf(state.compare.run).some((c) => c.cell === at)) return "compare";
  return null;
}

export function transitions({ state, emit }) {
  /** The reply so far written at `at`; a live turn's begins here when its record did not come first. */
  const writtenAt = (at) => at.streaming ?? (state.live.turns.includes(at) ? begun(state, at) : null);
  /** A reply's change ({at, reply, mode, current}; a live turn's as `turn` too, as Live's are). */
  const replyChange = (type, at, reply, detail = {}) => {
    const mode = shownIn(state, at);
    emit(type, { at, reply, mode, current: mode !== null, ...(mode === "live" ? { turn: at } : {}), ...detail });
  };
  return {
    /** A token of the reply written at `at` (a live turn, a plain-text side, a comparison's cell,
     * the step box's branch): {id, text, token, bytes}, added to its reply so far. The change
     * carries the reply: the one view that draws it appends the token (views/reply.mjs replyGrew). */
    tokenArrived(at, token) {
      const reply = writtenAt(at);
      // (a reply the page saw end takes only the text its last ids left unfinished, id -1)
      if (!reply || (reply.stop_reason && token.id >= 0)) return;
      addToken(reply, token);
      replyChange("token", at, reply, { token });
    },
    /** The prompt of the reply written at `at` is being read: {read, of, ms, parts} so far. */
    progressed(at, progress) {
      const reply = writtenAt(at);
      if (!reply) return;
      reply.progress = progress;
      replyChange("progress", at, reply);
    },
  };
}
