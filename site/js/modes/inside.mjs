// "Look inside" run (lesson/inside.mjs): one click sets the lesson's case up in Live mode (its
// preset and window, a new conversation, the recording's first turns where the case needs a
// history), sends its message as the learner would, and once the reply has ended names the step
// to look at and inspects it (modes/steps.mjs). The branch case takes the reply shown and branches
// at its first near-tie, or its closest call. It calls the store's transitions and the step
// box's actions; the cases complete in the store, from the page's own inspections and branches
// of live turns (page/state.mjs `inspected` and `branchEnded`), whoever asked for them, and
// app.mjs's subscriber draws the box of cases (drawInside) as it draws the challenges.

import * as inside from "../lesson/inside.mjs";
import { readControls } from "../page/controls.mjs";
import { drawInside } from "../views/challenges.mjs";
import { $ } from "../views/dom.mjs";
import { send } from "./live.mjs";
import { findConversation, loadRecorded, userMessage } from "./recorded.mjs";
import { branchStep, inspectStep, nameStep, refusal, whereOf } from "./steps.mjs";

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
  const window = c.window === "smallest" ? Math.min(...api.settings.windows) : c.window;
  if (window) $("window").value = String(window);
  store.settingChanged();
  store.cleared();
  if (c.history) {
    if (!state.recorded) store.recordedLoaded(await loadRecorded());
    const conv = findConversation(state.recorded, c.history.preset, window);
    store.restored(conv.turns.slice(0, c.history.turns).map((t, i) => ({ user: userMessage(state.recorded, conv, i), reply: t.reply_text })));
  }
  $("draft").value = c.message;
  say(page, `Sent “${c.message}” with ${$("preset").selectedOptions[0]?.textContent ?? c.preset} and ${readControls().window} tokens: ` +
      "the step to look at opens here once the reply has ended.");
  await send(page, readControls());
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
  return inspectStep(page, where, step);
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
