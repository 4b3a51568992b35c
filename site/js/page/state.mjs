// The page's state: what it shows and the live conversation, which is the page's own (the
// worker only caches: every request carries the whole conversation).

import * as challenges from "../lesson/challenges.mjs";

export function createState() {
  return {
    mode: "live",
    view: "text", // the panel's tab: "text" | "tokens"
    live: { turns: [] }, // each: {user, record, reply?, note?} (the messages derive from them)
    draftSeq: 0, // the newest preview asked for; older answers are dropped
    recorded: null, // the recorded file, once loaded
    recordedError: null,
    step: 0, // the recorded turn shown
    progress: challenges.load(),
    // Whether live replies can be had, for the chat's banner (views/chat.mjs liveBanner):
    // state "unknown" (no run has answered yet), "none" (runs fail: `why` says why, e.g. the
    // weights are not downloaded; one banner says so and messages are marked "no reply"), or
    // "ready" (the model answers).
    replies: { state: "unknown", why: "" },
    // "Why this token": replies carry each token's candidates, and the preview predicts the
    // first one (live.mjs). Off by default: off costs nothing.
    why: false,
    nearTieGap: 0.01, // replaced by the site's settings (build.json's near_tie_gap) once read
    prediction: null, // {key, args, state: "pending" | "done" | "error", result?, message?}
    plain: null, // plain-text mode's state (plain.mjs)
  };
}

/** The messages of the live conversation, then `extra` as the new user message. */
export function liveMessages(state, extra) {
  const msgs = [];
  for (const t of state.live.turns) {
    msgs.push({ role: "user", content: t.user });
    if (t.reply !== undefined) msgs.push({ role: "assistant", content: t.reply });
  }
  if (extra !== undefined) msgs.push({ role: "user", content: extra });
  return msgs;
}
