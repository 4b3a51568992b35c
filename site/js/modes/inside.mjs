// "Look inside" run (lesson/inside.mjs): one click sets the lesson's case up in Live mode (its
// preset and window, a new conversation, the recording's first turns where the case needs a
// history) and sends its message as the learner would. The step the case is about opens as soon
// as its token is written: the reply is stopped there (the box says so), that step is inspected
// and then each piece of what it read is taken away (which piece it needed), the year's earlier
// digits with the date taken away first. The branch case takes the reply shown and branches at
// its first near-tie, or its closest call. It calls the store's transitions and the step box's
// actions; the cases complete in the store, from the page's own causes and branches of live
// turns (page/state/stepbox.mjs `caused` and `branchEnded`), whoever asked for them, and app.mjs's
// subscriber draws the box of cases (drawInside) as it draws the challenges.

import * as inside from "../lesson/inside.mjs";
import { readControls } from "../page/controls.mjs";
import { drawInside } from "../views/challenges.mjs";
import { $ } from "../views/dom.mjs";
import { causeRequest } from "../page/step.mjs";
import { send, stop } from "./live.mjs";
import { askNeeds } from "./needs.mjs";
import { findConversation, loadRecorded, userMessage } from "./recorded.mjs";
import { branchStep, causeStep, inspectStep, nameStep, refusal, stepName, wholeReply, whereOf } from "./steps.mjs";

/** The box of cases, drawn from the store's progress (app.mjs's subscriber, on "inside"). */
export function drawLookInside(page) {
  drawInside(page.state.insideProgress, (c) => run(page, c));
}

/** What the step box says, brought into view (the case's button may be screens above it). */
function say(page, text, cls) {
  page.store.stepSaid(text, cls);
  $("step-box")?.scrollIntoView?.({ block: "nearest" });
}

async function run(page, c) {
  const { api, state, store } = page;
  const why = refusal(api, state, "Looking inside");
  if (why) return say(page, why, "error");
  if (c.id === "branch") return branchShown(page);
  if (state.mode !== "live") store.modeChosen("live", { chosen: true });
  // the case's controls set as the learner would set them: the turn is read again under them
  $("preset").value = c.preset;
  const window = c.window === "smallest" ? Math.min(...api.settings.windows) : api.settings.default_window;
  $("window").value = String(window);
  store.settingChanged();
  store.cleared();
  if (c.history) {
    if (!state.recorded) store.recordedLoaded(await loadRecorded());
    const conv = findConversation(state.recorded, c.history.preset, window);
    store.restored(conv.turns.slice(0, c.history.turns).map((t, i) => ({ user: userMessage(state.recorded, conv, i), reply: t.reply_text })));
  }
  $("draft").value = c.message;
  say(page, `Sent “${c.message}” with ${$("preset").selectedOptions[0]?.textContent ?? c.preset} and ${readControls().window} tokens: ` +
      "the step to look at opens here as soon as its token is written.");
  const watching = stopAtStep(page, c);
  try {
    await send(page, readControls());
  } finally {
    watching.off();
  }
  const turn = state.live.turns.at(-1);
  if (!turn?.record?.reply_ids?.length || turn.user !== c.message) return say(page, "No reply came, so there is nothing to look inside: the chat says why.", "error");
  const where = whereOf(state, turn.record, { settings: api.settings, context: api.model?.n_ctx });
  if (where.why) return say(page, where.why, "error");
  const step = inside.caseStep(c, turn.record);
  if (step === null) {
    nameStep(page, where, 0);
    return say(page, `This reply does not write the year ${inside.statedYear(turn.record) ?? ""}: click any of its tokens to look inside it.`);
  }
  nameStep(page, where, step);
  if (watching.stopped) {
    say(page, `The reply was stopped at token ${step + 1}, ${stepName(where, step).split(", ").at(-1)}, to look inside it now: ` +
        "send the message again for the whole reply.");
  }
  await inspectStep(page, where, step);
  const digits = c.step === "year" ? await earlierDigits(page, where, turn.record) : [];
  if (digits === null) return undefined; // refused or stopped: the box says why
  // the Pirate's claim is about the reply's voice: it opens on every token of the reply so far,
  // the system prompt removed (the token strip; the same figures when the step is the reply's last)
  const strip = c.id === "pirate";
  // the dropped name's is about which turn the reply needed: it completes from the conversation's matrix
  const matrix = c.id === "dropped";
  const answer = await causeStep(page, where, step, { context: { digits, strip, matrix } });
  const cause = state.stepBox.cause;
  if (!answer || !cause) return answer;
  if (matrix) {
    await askNeeds(page);
    const needed = state.needs.run?.answer?.turns.at(-1) ?? null;
    const seen = state.stepBox.inspection;
    const inspection = seen?.where.record === turn.record && seen.step === step ? seen.answer : null;
    if (needed) store.insideLooked(inside.caused(turn.record, answer, { inspection, needed }));
    $("needs-box")?.scrollIntoView?.({ block: "nearest" });
    return answer;
  }
  if (!strip) return answer;
  store.stripChosen(cause, { piece: answer.pieces.find((p) => p.kind === "system")?.name ?? null, measure: "removed" });
  return wholeReply(page, cause);
}

/** Watch the reply Look inside sent: once the case's step is written, stop the reply there
 * (what the GPU computed past it comes too). {off(), stopped}. */
function stopAtStep(page, c) {
  const { state, store } = page;
  const watching = { stopped: false, off: () => {} };
  watching.off = store.subscribe((change) => {
    if (change.type !== "token" || change.mode !== "live" || watching.stopped) return;
    const turn = state.live.turns.at(-1);
    if (change.turn !== turn || !turn.record) return;
    if (inside.caseStep(c, { ...turn.record, reply_tokens: change.reply.reply_tokens }, { partial: true }) !== null) {
      watching.stopped = true;
      stop(page);
    }
  });
  return watching;
}

/** The year's digits before its last, each with the date taken away (chatlens.cause, the system
 * prompt alone): [{token, p, removed}], said in the box as they come; null when one could not be
 * had (the box says why). */
async function earlierDigits(page, where, record) {
  const { api, store } = page;
  const steps = inside.yearDigitSteps(record);
  const out = [];
  for (const [k, step] of steps.entries()) {
    store.stepSaid(`Taking the date away from the year's digit ${k + 1} of ${steps.length + 1}, “${record.reply_tokens[step]}”…`);
    try {
      const answer = await api.cause(causeRequest(where.args, record.reply_ids, step, { pieces: ["system:0"] }));
      const removed = answer.pieces[0].removed;
      out.push({ token: answer.chosen_token, p: answer.p, removed: removed.p });
    } catch (e) {
      store.stepSaid(`No figures for the year's digit ${k + 1}: ${e.message}`, "error");
      return null;
    }
  }
  return out;
}

/** The branch case: the reply the panel shows, at its first near-tie or its closest call. */
function branchShown(page) {
  const { api, state, store } = page;
  if (!state.why) {
    $("why").checked = true;
    store.whyChosen(true);
  }
  const [record] = state.drawn ?? [];
  const where = record?.reply_ids?.length && record.stop_reason ? whereOf(state, record, { settings: api.settings, context: api.model?.n_ctx }) : null;
  if (!where || where.why || !record.top_k) {
    return say(page, "Send a message in Live mode with “Why this token” on (it is on now): its reply's candidates are what a branch picks from.");
  }
  const t = inside.tieStep(record, state.nearTieGap);
  nameStep(page, where, t.step);
  return branchStep(page, where, t.step, t.id);
}
