// "Look inside" run (lesson/inside.mjs): one click sets the lesson's case up in Live mode (its
// preset and window, a new conversation, the recording's first turns where the case needs a
// history), sends its message as the learner would, and once the reply has ended names the step
// to look at and inspects it (modes/steps.mjs). The branch case takes the reply shown and branches
// at its first near-tie, or its closest call. Progress completes from the page's own inspections
// and branches of live turns (steps.mjs's "chatlens:inspected" and "chatlens:branched"), whoever
// asked for them.

import * as inside from "../lesson/inside.mjs";
import { readControls } from "../page/controls.mjs";
import { drawInside } from "../views/challenges.mjs";
import { $ } from "../views/dom.mjs";
import { send } from "./live.mjs";
import { findConversation, loadRecorded, userMessage } from "./recorded.mjs";
import { refusal, whereOf } from "./steps.mjs";

/** Attach the box to the page; `steps`: setUpStepActions's answer. */
export function setUpInside(page, steps) {
  const { api, state, store } = page;
  let progress = inside.load();
  const redraw = () => drawInside(progress, (c) => run(c));
  const update = (found) => {
    const next = inside.add(progress, found);
    if (next === progress) return;
    progress = next;
    inside.save(progress);
    redraw();
  };
  document.addEventListener("chatlens:inspected", ({ detail }) => {
    if (detail.where.kind === "live" && !detail.draft) update(inside.inspected(detail.where.record, detail.answer));
  });
  document.addEventListener("chatlens:branched", ({ detail }) => {
    if (detail.where.kind === "live") update(inside.branched(detail.where.record, detail.answer, state.nearTieGap));
  });
  const context = () => ({ settings: api.settings, context: api.model?.n_ctx });
  const say = (text, cls) => {
    steps.say(text, cls);
    steps.box.scrollIntoView?.({ block: "nearest" });
  };
  /** A control set as the learner would set it: its change handler (app.mjs) runs. */
  const choose = (id, value) => {
    if ($(id).value === String(value)) return;
    $(id).value = String(value);
    $(id).dispatchEvent(new Event("change"));
  };

  async function run(c) {
    const why = refusal(api, state, "Looking inside");
    if (why) return say(why, "error");
    if (c.id === "branch") return branchShown();
    if (state.mode !== "live") store.modeChosen("live", { chosen: true });
    choose("preset", c.preset);
    const window = c.window === "smallest" ? Math.min(...api.settings.windows) : c.window;
    if (window) choose("window", window);
    store.cleared();
    if (c.history) {
      if (!state.recorded) store.recordedLoaded(await loadRecorded());
      const conv = findConversation(state.recorded, c.history.preset, window);
      store.restored(conv.turns.slice(0, c.history.turns).map((t, i) => ({ user: userMessage(state.recorded, conv, i), reply: t.reply_text })));
    }
    $("draft").value = c.message;
    say(`Sent “${c.message}” with ${$("preset").selectedOptions[0]?.textContent ?? c.preset} and ${readControls().window} tokens: ` +
        "the step to look at opens here once the reply has ended.");
    await send(page, readControls());
    const turn = state.live.turns.at(-1);
    if (!turn?.record?.reply_ids?.length || turn.user !== c.message) return say("No reply came, so there is nothing to look inside: the chat says why.", "error");
    const where = whereOf(state, turn.record, context());
    if (where.why) return say(where.why, "error");
    const step = inside.caseStep(c, turn.record);
    if (step === null) {
      steps.name(where, 0);
      return say(`This reply does not write the year ${inside.statedYear(turn.record) ?? ""}: click any of its tokens to look inside it.`);
    }
    steps.name(where, step);
    return steps.inspect(where, step);
  }

  /** The branch case: the reply the panel shows, at its first near-tie or its closest call. */
  function branchShown() {
    if (!state.why) {
      $("why").checked = true;
      store.whyChosen(true);
    }
    const [record] = state.drawn ?? [];
    const where = record?.reply_ids?.length && record.stop_reason ? whereOf(state, record, context()) : null;
    if (!where || where.why || !record.top_k) {
      return say("Send a message in Live mode with “Why this token” on (it is on now): its reply's candidates are what a branch picks from.");
    }
    const t = inside.tieStep(record, state.nearTieGap);
    steps.name(where, t.step);
    return steps.branch(where, t.step, t.id);
  }

  redraw();
}
