// The page around the modes, an area of the page's state (page/state.mjs): the mode shown, the
// settings read from build.json and the controls, the panel's tab and last drawing, what the page
// read at its start, and whether replies can be had (the chat's banner).

import { record } from "./shapes.mjs";
import { closeBox } from "./stepbox.mjs";

const repliesOf = ({ state, why, offer = null }) => record({ state, why, offer });

export const fields = () => ({
  mode: "live",
  modeChosen: false, // the learner picked the mode (else it follows the store: app.mjs landingMode)
  customKept: false, // Recorded mode set a custom system prompt aside; Live gets it back
  view: "text", // the panel's tab: "text" | "tokens"
  drawn: null, // the panel's last drawing: [record, caption, extra] (app.mjs page.draw)
  // The window chosen in another mode while Recorded mode offers only the recorded windows:
  // given back when Recorded mode is left (modes/recorded.mjs).
  windowAside: null,
  // Whether live replies can be had, for the chat's banner (views/chat.mjs liveBanner):
  // state "unknown" (no run has answered yet), "none" (runs fail: `why` says why, e.g. the
  // weights are not downloaded; one banner says so and messages are marked "no reply"), or
  // "ready" (the model answers). offer: a backend that could compute them (a banner's button).
  replies: repliesOf({ state: "unknown", why: "" }),
  // "Why this token": replies carry each token's candidates, and the preview predicts the
  // first one (modes/live.mjs). Off by default: off costs nothing.
  why: false,
  // "Guess first": a cause's table and the conversation's matrix ask which piece the learner
  // thinks the token or reply needed before they show the figures. Saved with the settings.
  guessFirst: false,
  nearTieGap: null, // build.json's near_tie_gap (chatlens.defaults), once the settings are read
  // What the page read at its start (app.mjs): a window that waits for the model's context
  // (prefs.mjs conversationPrefs's pendingWindow), the notes about ignored settings, and
  // whether the landing mode was chosen by the page (not by the learner or a saved choice).
  start: record({ pendingWindow: undefined, notes: [], landed: false }),
});

export function transitions({ state, emit }) {
  return {
    /** build.json was read: the numbers the views need from it, and the comparison's shape. */
    settingsRead(settings) {
      state.nearTieGap = settings.near_tie_gap;
      if (settings.model_keys && settings.layouts) state.compare.shape = { model_keys: settings.model_keys, layouts: settings.layouts };
      emit("settings-read");
    },
    /** A mode shown; chosen: the learner picked it (it is then remembered). */
    modeChosen(mode, { chosen = false } = {}) {
      if (chosen) state.modeChosen = true;
      state.mode = mode;
      closeBox(state);
      emit("mode", { mode });
    },
    /** Recorded mode has no custom system prompt: kept aside (true) or given back (false). */
    customKept(on) {
      state.customKept = on;
    },
    /** Recorded mode set the window chosen elsewhere aside (a number), or gave it back (null). */
    windowAside(window) {
      state.windowAside = window;
    },
    /** The page's start read the saved settings: a window to check once the model is read, and
     * notes on what was ignored. */
    startRead({ pendingWindow, notes }) {
      state.start.pendingWindow = pendingWindow;
      state.start.notes = notes;
    },
    /** The page chose the landing mode itself (app.mjs landingMode). */
    landed() {
      state.start.landed = true;
    },
    /** The panel drew [record, caption, extra] (drawn again as it was when the tab changes). */
    panelDrawn(drawn) {
      state.drawn = drawn;
    },
    /** A control changed (system prompt, window, special tokens as text): the turn is read again. */
    settingChanged() {
      emit("setting");
    },
    viewChosen(view) {
      state.view = view;
      emit("view", { view });
    },
    guessFirstChosen(on) {
      state.guessFirst = on;
      emit("guess-first", { on });
    },
    whyChosen(on) {
      state.why = on;
      state.prediction = null;
      emit("why", { on });
    },
    /** Whether replies can be had (see `replies` above); `changed`: the banner differs now. */
    repliesKnown(replies) {
      const before = state.replies;
      state.replies = repliesOf(replies);
      const changed = ["state", "why", "offer"].some((k) => (replies[k] ?? null) !== (before[k] ?? null));
      emit("replies", { changed });
    },
  };
}
