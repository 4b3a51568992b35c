// The step box (modes/steps.mjs), an area of the page's state (page/state.mjs): one step of a
// reply acted on, whatever mode drew the reply: named, inspected, its cause asked, branched. Its
// changes are told as {type: "step-box", what}.

import * as inside from "../../lesson/inside.mjs";
import { insideFound } from "./lesson.mjs";
import { record, replySoFar } from "./shapes.mjs";

export const fields = () => ({
  // The step box, field by field:
  //   named       {where, step}: the step a click named (where: steps.mjs whereOf's)
  //   status      {text, cls}: what the box says (a refusal, a step under way, "Kept: ...")
  //   inspection  {where, step, draft, controller, answer}: asked (answer null), then answered
  //               (chatlens.inspect's); draft: the draft's first token
  //   branch      {where, step, id, token, controller, streaming, answer, error}: another
  //               choice at a step, written as a reply is: streaming is what the model wrote
  //               after the id taken (a reply so far, tokenArrived's), kept once it ends with
  //               its stop_reason; answer chatlens.branch's (the branch as a reply); error why
  //               there is none (a sentence)
  //   cause       {where, step, context, token, whole, showWhole, strip, pairs, guess}: which
  //               piece the step needed (context: what Look inside measured beside it, for its
  //               line), its two answers each a measure asked (measureOf below): token, the
  //               step's token (chatlens.cause at `step`); whole, the whole reply so far (the
  //               same at the reply's last step: the token's own when `step` is the last), null
  //               until asked; showWhole: whether the view shows it; strip {piece, measure}: the
  //               piece and measure the whole reply's token strip tints by; pairs: two pieces
  //               taken away together, each {name, which, ...measureOf}; guess {token, whole}:
  //               the piece the learner guessed before the figures (Guess first), null until then
  //   open        the part of the box in view (the one asked last; a tab brings another back):
  //               "looked" (where it looked) or "formed" (how the choice formed), both the
  //               inspection's; "cause"; "branch"; null with none
  //   reloaded    a sentence: a branch the last visit was writing when it went, said until a
  //               message is sent or the conversation cleared
  // A new message, a new conversation, another mode or a restored conversation closes it: what
  // it computes is stopped (closeBox aborts its controllers), the conversation's matrix too.
  stepBox: record({ named: null, status: null, inspection: null, branch: null, cause: null, open: null, reloaded: null }),
});

/** One of a cause's answers, asked: its AbortController while it computes, the worker's progress
 * ({read, of, doing}), then its answer (chatlens.cause's) or why there is none (a sentence). */
const measureOf = (controller) => Object.seal({ controller, progress: null, answer: null, error: null });

/** The box's cause goes (another step named or inspected, the box closed): what it computes is stopped. */
function causeEnded(state) {
  const cause = state.stepBox.cause;
  cause?.token.controller?.abort();
  cause?.whole?.controller?.abort();
  for (const pair of cause?.pairs ?? []) pair.controller?.abort();
  state.stepBox.cause = null;
  const box = state.stepBox;
  if (box.open === "cause") box.open = box.inspection ? "looked" : box.branch ? "branch" : null;
}

/** Which of the box's fields each part shows (`open`). */
export const PART_OF = { looked: "inspection", formed: "inspection", cause: "cause", branch: "branch" };

/** Whether the cause's step is its reply's last: its answer is then the whole reply's too. */
const lastStep = (cause) => cause.step === cause.where.record.reply_ids.length - 1;

/** The step box closed: the conversation it was about changed. What it computes is stopped. */
export function closeBox(state) {
  const box = state.stepBox;
  box.inspection?.controller?.abort();
  box.branch?.controller?.abort();
  causeEnded(state);
  Object.assign(box, { named: null, status: box.reloaded ? { text: box.reloaded, cls: "note" } : null, inspection: null, branch: null,
                       open: null });
  state.needs.run?.controller?.abort(); // the conversation's matrix was about it too
  state.needs.run = null;
}

/** Whether the box's cause is of another step than `where`'s `step`. */
function causeElsewhere(state, where, step) {
  const cause = state.stepBox.cause;
  return cause !== null && (cause.where.record !== where.record || cause.step !== step);
}

export function transitions({ state, emit, store }) {
  const box = state.stepBox; // one record for the page's life: its fields change, never the box
  const boxChange = (what) => emit("step-box", { what });
  const found = (lines) => insideFound({ state, emit }, lines);
  return {
    /** A click named a step of a reply (where: steps.mjs whereOf's). */
    stepNamed(where, step) {
      if (causeElsewhere(state, where, step)) causeEnded(state);
      Object.assign(box, { named: { where, step }, status: null });
      boxChange("named");
    },
    /** The box says `text` (cls: "note", "error", "kept"). */
    stepSaid(text, cls = "note") {
      box.status = { text, cls };
      boxChange("said");
    },
    /** An inspection is asked (its AbortController; `says`: the line while it computes): the one
     * before it is stopped. Returns it, for inspected/inspectFailed. */
    inspectionAsked(where, step, { draft = false, controller, says }) {
      box.inspection?.controller?.abort();
      if (causeElsewhere(state, where, step)) causeEnded(state);
      box.inspection = Object.seal({ where, step, draft, controller, answer: null });
      box.status = { text: says, cls: "note" };
      box.open = "looked";
      boxChange("inspecting");
      return box.inspection;
    },
    /** The inspection answered (chatlens.inspect's), if it is still the box's: shown (a cause of
     * the same step names where it looked in its Look inside line). */
    inspected(inspection, answer) {
      if (box.inspection !== inspection) return;
      Object.assign(inspection, { answer, controller: null });
      box.status = null;
      boxChange("inspected");
    },
    /** The inspection failed (a sentence) or was stopped (null: nothing said), if it is still the box's. */
    inspectFailed(inspection, message) {
      if (box.inspection !== inspection) return;
      box.inspection = null;
      box.status = message ? { text: message, cls: "error" } : box.status;
      boxChange("inspect-failed");
    },
    /** The inspection's Close. */
    inspectionClosed() {
      box.inspection = null;
      if (box.open === "looked" || box.open === "formed") box.open = box.cause ? "cause" : box.branch ? "branch" : null;
      boxChange("inspection-closed");
    },
    /** A part of the box brought into view ("looked", "formed", "cause", "branch"): a tab. */
    partOpened(part) {
      if (!box[PART_OF[part]]) return;
      box.open = part;
      boxChange("opened");
    },
    /** Which piece a step needed is asked (its AbortController): the cause before it is stopped.
     * Returns it, for causeProgress and caused. */
    causeAsked(where, step, { controller, context = {} }) {
      causeEnded(state);
      box.cause = Object.seal({ where, step, context, token: measureOf(controller), whole: null, showWhole: false,
                                strip: record({ piece: null, measure: "removed" }), pairs: [], guess: record({ token: null, whole: null }) });
      box.status = null;
      box.open = "cause";
      boxChange("causing");
      return box.cause;
    },
    /** The whole reply so far is asked for the box's cause: the same at the reply's last step.
     * False when the cause is no longer the box's. */
    wholeAsked(cause, { controller }) {
      if (box.cause !== cause) return false;
      cause.whole?.controller?.abort();
      cause.whole = measureOf(controller);
      cause.showWhole = true;
      boxChange("causing");
      return true;
    },
    /** How far one of a cause's answers has got (`which`: "token", "whole" or a pair): the worker's progress. */
    causeProgress(cause, which, progress) {
      if (box.cause !== cause) return;
      (typeof which === "string" ? cause[which] : which).progress = progress; // a pair's: the pair
      boxChange("cause-progress");
    },
    /** One of a cause's answers (`which`: "token" or "whole") came, or failed (a sentence; null:
     * stopped, nothing said). The token's, of a live turn, completes what it shows of Look inside. */
    caused(cause, which, { answer = null, error = null }) {
      const measure = cause[which];
      measure.controller = null;
      if (box.cause !== cause) return;
      Object.assign(measure, { answer, error, progress: null });
      if (answer && which === "token" && lastStep(cause) && !cause.whole) cause.whole = measure; // the same figures
      // a live turn's cause completes what it shows of Look inside: the step's figures, and the
      // token strip's once the whole reply's come (a case that opens on the strip waits for them)
      // (one that opens on the conversation's matrix completes there: modes/inside.mjs)
      if (answer && cause.where.kind === "live" && cause.token.answer && !cause.context.matrix &&
          (which === "whole" || !cause.context.strip || cause.whole === measure)) {
        const seen = box.inspection;
        const inspection = seen?.where.record === cause.where.record && seen.step === cause.step ? seen.answer : null;
        const whole = cause.whole?.answer ?? null;
        found(inside.caused(cause.where.record, cause.token.answer, { inspection, ...cause.context, whole }));
      }
      boxChange("caused");
    },
    /** The view shows the cause's whole reply so far (show), or its step. */
    wholeShown(cause, show) {
      if (box.cause !== cause) return;
      cause.showWhole = show;
      boxChange("cause-shown");
    },
    /** The whole reply's token strip tints by another piece or measure ({piece, measure}). */
    stripChosen(cause, { piece = cause.strip.piece, measure = cause.strip.measure }) {
      if (box.cause !== cause) return;
      Object.assign(cause.strip, { piece, measure });
      boxChange("strip");
    },
    /** Two pieces taken away together are asked (`name` "a+b", for the token's step or the whole
     * reply: `which`): returns the pair, for pairCaused. */
    pairAsked(cause, name, which, { controller }) {
      if (box.cause !== cause) return null;
      const pair = Object.seal({ name, which, ...measureOf(controller) });
      cause.pairs.push(pair);
      boxChange("causing");
      return pair;
    },
    /** A pair's answer came, or failed (a sentence). */
    pairCaused(cause, pair, { answer = null, error = null }) {
      pair.controller = null;
      if (box.cause !== cause) return;
      Object.assign(pair, { answer, error, progress: null });
      boxChange("caused");
    },
    /** The learner's guess, before the figures (Guess first): a piece's name, for the token's
     * step or the whole reply (`which`). */
    guessed(cause, which, name) {
      if (box.cause !== cause) return;
      cause.guess[which] = name;
      boxChange("guessed");
    },
    /** The cause's Close (and Stop: what it computes is stopped). */
    causeClosed() {
      causeEnded(state);
      boxChange("cause-closed");
    },
    /** A branch starts (another id at a step: its token's text, its AbortController); the one
     * before it is stopped. Its reply streams through tokenArrived. Returns it. */
    branchStarted(where, step, id, token, controller) {
      box.branch?.controller?.abort();
      box.branch = Object.seal({ where, step, id, token, controller, streaming: replySoFar(), answer: null, error: null });
      box.status = null;
      box.open = "branch";
      boxChange("branch");
      return box.branch;
    },
    /** The branch ended: {answer} (chatlens.branch's) or {error} (a sentence). One of a live
     * turn completes what it shows of Look inside. */
    branchEnded(branch, { answer = null, error = null }) {
      branch.controller = null;
      if (box.branch !== branch) return;
      Object.assign(branch, { answer, error });
      if (answer) {
        branch.streaming.stop_reason = answer.stop_reason;
        branch.streaming.progress = null;
        branch.token = answer.reply_tokens?.[branch.step] ?? branch.token;
        if (branch.where.kind === "live") found(inside.branched(branch.where.record, answer, state.nearTieGap));
      }
      boxChange("branch-ended");
    },
    /** The branch is kept (its turn checked by the caller: the conversation's last, its reply
     * unchanged): its turn's record becomes `record` (page/step.mjs keptRecord's), through the
     * one transition for a reply that ended (conversation.mjs replied); the box says so. */
    branchKept(branch, record, said) {
      const turn = branch.where.turn;
      Object.assign(box, { named: null, inspection: null, branch: null, open: null, status: { text: said, cls: "kept" } });
      boxChange("kept");
      store.replied(turn, record);
    },
    /** The branch is dropped: stopped if it is being written; the conversation is as it was. */
    branchDropped(branch) {
      branch.controller?.abort();
      if (box.branch === branch) box.branch = null;
      if (box.open === "branch") box.open = box.cause ? "cause" : box.inspection ? "looked" : null;
      box.status = { text: "Dropped: the conversation is as it was.", cls: "note" };
      boxChange("dropped");
    },
    /** The page's last visit was writing a branch when it went: `said` (a sentence), until a
     * message is sent or the conversation cleared. */
    branchReloaded(said) {
      box.reloaded = said;
      if (said) box.status = { text: said, cls: "note" };
      boxChange("said");
    },
  };
}
