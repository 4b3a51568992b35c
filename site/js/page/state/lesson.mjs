// The lesson's parts, an area of the page's state (page/state.mjs): the challenges and Look
// inside's progress, Recorded mode's conversation and turn, the template workbench and the lab's
// hand-written Python.

import * as challenges from "../../lesson/challenges.mjs";
import * as inside from "../../lesson/inside.mjs";
import { record } from "./shapes.mjs";

export const fields = ({ progress, insideProgress }) => ({
  progress, // the challenges: lesson/challenges.mjs
  insideProgress, // "Look inside": lesson/inside.mjs's cases, each completed by a cause or a branch of a live turn
  recorded: null, // the recorded file, once loaded
  recordedError: null,
  step: 0, // the recorded turn shown
  workbench: record({ template: null, editing: "rows", seq: 0 }), // modes/workbench.mjs
  byHand: record({ source: null }), // the lab's hand-written Python as the package has it (modes/byhand.mjs)
});

/** What a cause or a branch of a live turn completes of Look inside (lesson/inside.mjs's
 * `found`): kept, and said ("inside"), when it is new. */
export function insideFound({ state, emit }, found) {
  const next = inside.add(state.insideProgress, found);
  if (next === state.insideProgress) return;
  state.insideProgress = next;
  emit("inside");
}

export function transitions({ state, emit }) {
  return {
    // -- the challenges ----------------------------------------------------------------------------
    /** A record seen (live: a turn sent and answered; else a recorded turn): what it completes. */
    observed(record, { live, where, now = new Date() }) {
      const next = challenges.observe(state.progress, record, now, { live, where });
      if (next === state.progress) return;
      state.progress = next;
      emit("challenges");
    },
    /** What Look inside measured of a live turn beyond one cause (the conversation's matrix):
     * lesson/inside.mjs's found lines. */
    insideLooked(found) {
      insideFound({ state, emit }, found);
    },
    progressReset() {
      state.progress = {};
      emit("challenges");
    },

    // -- recorded mode -----------------------------------------------------------------------------
    recordedLoaded(doc) {
      state.recorded = doc;
      state.recordedError = null;
    },
    recordedFailed(message) {
      state.recordedError = message;
    },
    /** The recorded turn asked for (a button, a "Try this" jump). */
    stepped(step) {
      state.step = step;
      emit("step", { step });
    },
    /** The turn shown, clamped to the conversation's turns (no redraw: it is being drawn). */
    stepShown(step) {
      state.step = step;
    },

    // -- the workbench and the hand-written Python -------------------------------------------------
    /** The model's chat template came: {source, names, special_tokens}. */
    workbenchTemplate(template) {
      state.workbench.template = template;
    },
    /** The messages are edited as "rows" or "json". */
    workbenchEditing(editing) {
      state.workbench.editing = editing;
    },
    /** A render is asked for: its number (only the newest answer is drawn). */
    workbenchAsked() {
      return ++state.workbench.seq;
    },
    /** The lab's Python source was read from the package. */
    byHandRead(source) {
      state.byHand.source = source;
    },
  };
}
