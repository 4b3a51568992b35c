// The page's state, and the only code that changes it: named transitions (a message sent, its
// record read, a token arrived, the reply ended, a mode chosen, a step inspected, a cause asked, a
// branch kept, a setting changed, ...). Each changes the state, then tells every subscriber what
// changed as {type, ...}: the modes call the API and the transitions, and app.mjs's subscriber
// redraws what the change touched. No DOM here: tests/page/state.test.mjs plays it in node.
//
// One state and one emit, composed by area (page/state/): each area declares its fields (with
// what each holds, who sets it and what ends it) beside the transitions that alone change them:
//   settings.mjs       the mode, the settings, the panel's tab, the page's start, the chat's banner
//   conversation.mjs   the live conversation: its turns sent, read, answered or failed; previews,
//                      counts and the prediction of the draft; the reply being written
//   growing.mjs        the one way a reply grows, whatever the mode (no fields of its own)
//   plain.mjs          plain text: the text, its tokens and its two sides
//   stepbox.mjs        the step box: a step named, inspected, its cause asked, branched, kept
//   needs.mjs          the conversation's matrix: which turn each reply needed
//   comparison.mjs     the comparison's run and its four cells
//   lesson.mjs         the challenges, Look inside's progress, Recorded mode, the workbench
// An area reads any of the state, and sets another's field where a transition means it (a message
// sent sets `writing`); what another area does as a whole it asks of that area's exported rule
// (stepbox.mjs closeBox) or transition (`store`: branchKept ends a reply through `replied`).
//
// What "model" names here: `model` is a model key, "instruct" or "base" (build.json's
// model_keys, chatlens.contract.MODELS): a comparison cell's, and compare.stored's keys; "the
// model" in prose is the network that reads and writes. None of the other things called model is
// in this state: what computes a model's replies once its weights are loaded (the API's
// chatlens.model and chatlens.baseModel), a stored copy of its files (the model store, store/,
// each record keyed by its source's id) and ?model=, a model source's URL (prefs.mjs sourceUrlPref).

import * as comparison from "./state/comparison.mjs";
import * as conversation from "./state/conversation.mjs";
import * as growing from "./state/growing.mjs";
import * as lesson from "./state/lesson.mjs";
import * as needs from "./state/needs.mjs";
import * as plain from "./state/plain.mjs";
import * as settings from "./state/settings.mjs";
import { record } from "./state/shapes.mjs";
import * as stepBox from "./state/stepbox.mjs";

export { addToken, replySoFar } from "./state/shapes.mjs";
export { liveMessages, newTurn, sentAgain, unanswered } from "./state/conversation.mjs";
export { cellsOf } from "./state/comparison.mjs";

const AREAS = [settings, conversation, growing, plain, stepBox, needs, comparison, lesson];

/** Each area's own: fields or transitions, merged; a name two areas both declare throws. */
function merged(parts, what) {
  const out = {};
  for (const part of parts) {
    for (const name of Object.keys(part)) if (name in out) throw new Error(`two areas of the page's state declare the ${what} ${name}`);
    Object.assign(out, part);
  }
  return out;
}

/** The store: {state, subscribe(fn) -> unsubscribe, ...transitions}. `progress`: the challenges
 * as saved (challenges.load() on the page); `insideProgress`: Look inside's (inside.load()). */
export function createStore(progress = {}, insideProgress = {}) {
  const state = record(merged(AREAS.map((a) => a.fields({ progress, insideProgress })), "field"));
  const subscribers = new Set();
  const emit = (type, detail = {}) => {
    const change = { type, ...detail };
    for (const fn of subscribers) fn(change, state);
    return change;
  };
  const store = {
    state,
    subscribe(fn) {
      subscribers.add(fn);
      return () => subscribers.delete(fn);
    },
  };
  return Object.assign(store, merged(AREAS.map((a) => a.transitions({ state, emit, store })), "transition"));
}
