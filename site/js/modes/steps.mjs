// One step of a reply, acted on: where its token looked (chatlens.inspect, drawn by
// views/inspect.mjs) and what another candidate would have written (chatlens.branch, drawn by
// views/branch.mjs beside the reply), whatever mode drew the reply. It attaches from outside: the
// reply views (views/reply.mjs) say which step was picked, and this module listens on the page:
//   a click on a reply's token chip (or Enter on the chips)   the step bar names that step, with
//                                                             its actions: inspect it; branch
//                                                             with the token it nearly chose
//   chatlens:candidate {reply, step, id}, a candidate row     the chosen id: inspect the step;
//                                                             another: branch there with it
//   a click in the draft's prediction (#prediction)           inspect the draft's first token
//   a near-tie offer, a lens candidate of the last block      branch there with it
// A click on a chip shows its candidates (views/why.mjs) and names the step; the inspection,
// which recomputes the step (a GPU step, or a NumPy pass of a tenth of a second and more), waits
// for the button: tapping through tokens on a phone computes nothing.
// What it draws goes in one box under the panel (#step-box): a status line, the inspection, the
// branch. Which request a step makes comes from where the reply lives (whereOf below: a live
// turn, a recorded turn, a comparison cell, plain text's chat side, the draft) and
// page/step.mjs's requests.
//
// A branch is written as a reply is (chatlens.writing while it streams; Stop keeps what it
// wrote). Kept, on a live conversation's last turn, it becomes that turn's reply through the
// store's one transition for a reply that ended (`replied`), with page/step.mjs keptRecord's
// record (`branched`: chosen by hand): later messages read its text, and a reload keeps it as
// it keeps any reply. Dropped, nothing changed. A new message, a new conversation or another
// mode ends a branch that is being written and closes the box: the branch was never the
// conversation's.
//
// The pure part (whereOf, refusal, the sentences) is played in node (tests/page/steps.test.mjs);
// tests/test_inspect_browser.py plays the rest on the page.

import { branchRequest, compareCellRequest, draftRequest, inspectRequest, keptRecord, plainRequest, recordedRequest } from "../page/step.mjs";
import { branchReloaded, saveBranch } from "../page/prefs.mjs";
import { cellsOf, liveMessages } from "../page/state.mjs";
import { branchChoices, branchView, nearTieList } from "../views/branch.mjs";
import { $, el, fill } from "../views/dom.mjs";
import { inspectView, knownTokens, readOf } from "../views/inspect.mjs";
import { replyOf } from "../views/reply.mjs";
import { visibleToken } from "../views/tokens.mjs";

// -- where a reply lives, and the request a step of it makes ---------------------------------------

/** A turn's request from its record and the messages it read: the record's own system text (the
 * date preset's is the day it was sent, null the template's default), window, reserve and reply
 * limit, so the worker renders the prompt the reply was written from. */
export function recordRequest(record, messages) {
  return {
    messages, system: record.system ?? undefined, window: record.window, reserve: record.reserve, maxTokens: record.max_tokens,
    specialInText: record.special_in_text,
    ...(record.top_k?.length ? { topK: record.top_k[0].length } : {}), // a branch records as many candidates
  };
}

/** A comparison cell's reply with what it read, in a turn record's names (what the views read):
 * its layout's ids and tokens, and the special ids, from the comparison's prompt. */
const cellRecord = (prompt, layout, cell) => ({
  ...cell, prompt_ids: prompt[`${layout}_ids`], prompt_tokens: prompt[`${layout}_tokens`], prompt_bytes: prompt[`${layout}_bytes`] ?? null,
  special_ids: prompt.special_ids, system: null, window: null,
});

const MODEL_NAMES = { instruct: "the instruct model", base: "the base model" };
const LAYOUT_NAMES = { template: "chat-template", plain: "plain-text" };

/**
 * Where `reply` (a reply view's) lives, and what a step of it can ask:
 *   {kind, label, args, record, turn?, keep, branchWhy}  args: the Turn request (page/step.mjs's);
 *       record: the record the views read (its prompt and reply); turn: the live turn; keep:
 *       null when a branch of it can be kept, else why not (a sentence); branchWhy: null when
 *       it can be branched, else why not (a sentence: it can still be inspected)
 *   {why}  a sentence: no step of it can be asked
 * context: {settings (build.json's), context (the model's n_ctx)}.
 */
export function whereOf(state, reply, { settings, context } = {}) {
  if (!reply) return { why: "That reply is no longer on the page." };
  const turns = state.live.turns;
  const i = turns.findIndex((t) => t.record === reply || t.streaming === reply);
  if (i >= 0) {
    const turn = turns[i];
    if (turn.streaming || turn.reply === undefined || !turn.record?.reply_ids) {
      return { why: "This reply is still being written: its steps can be inspected and branched once it has ended." };
    }
    const messages = liveMessages({ live: { turns: turns.slice(0, i) } }, turn.user);
    const last = i === turns.length - 1;
    return {
      kind: "live", label: `turn ${i + 1}`, args: recordRequest(turn.record, messages), record: turn.record, turn,
      keep: last ? null : `Only the last turn's reply can be replaced: turn ${i + 2} and after already read this one.`,
    };
  }
  for (const conv of state.recorded?.conversations ?? []) {
    const k = conv.turns.indexOf(reply);
    if (k < 0) continue;
    const args = recordedRequest(state.recorded, conv, k);
    return { kind: "recorded", label: `recorded turn ${k + 1}`, args, record: reply,
             keep: "A recorded conversation stays as it was recorded: a branch is kept in Live mode." };
  }
  const plain = state.plain;
  if (plain && plain.chat?.answer === reply) {
    return { kind: "plain", label: "the chat side", args: recordRequest(reply, [{ role: "user", content: plain.text }]), record: reply,
             keep: "Plain text keeps no conversation: a branch is kept in Live mode." };
  }
  if (plain && plain.plain?.answer === reply) {
    return { kind: "text", label: "the plain-text side", args: plainRequest(plain.text), record: reply,
             keep: "Plain text keeps no conversation.",
             branchWhy: "A branch continues a chat turn: plain text's continuation can be inspected, not branched." };
  }
  const run = state.compare.run;
  const found = cellsOf(run).find((c) => c.cell.answer === reply);
  if (found) {
    if (!run.prompt) return { why: "The comparison's prompt is not known yet." };
    const cell = compareCellRequest(run.prompt, found, settings, context);
    return { kind: "compare", label: `${MODEL_NAMES[found.model]}'s ${LAYOUT_NAMES[found.layout]} cell`, args: cell.args,
             record: cellRecord(run.prompt, found.layout, reply), keep: "The comparison keeps no conversation: a branch is kept in Live mode.",
             branchWhy: cell.branchWhy };
  }
  return { why: "This reply is not one the engine can recompute (a saved comparison, or one from a recording)." };
}

/** Why nothing can be computed now (a sentence), or null: the weights must be in, and one reply
 * is written at a time. `api`: chatlens; `state`: the page's. */
export function refusal(api, state, what) {
  if (!api.model?.backend) {
    return `${what} needs the model's weights: ${api.model?.error ? api.model.error : "download them in the box at the top of the page"}.`;
  }
  if (state.writing || api.writing) {
    return `${what} waits for the reply being written: press Stop, or wait until it ends, then ask again.`;
  }
  return null;
}

/** "token 3 of turn 2's reply, “ pirate”" */
export function stepWords(where, step) {
  const t = where.record.reply_tokens?.[step];
  return `token ${step + 1} of ${where.label}'s reply${t === undefined ? "" : `, “${visibleToken(t)}”`}`;
}

/** A step of a reply the page can ask about: between 0 and the reply's length (the step after the
 * reply so far is len). */
export const inRange = (record, step) => Number.isInteger(step) && step >= 0 && step < (record.reply_ids?.length ?? 0);

// -- the page --------------------------------------------------------------------------------------

const STYLES = ["inspect.css", "branch.css"];

/** Attach to the page (app.mjs's `page`: api, store, state). Returns what a lesson's "try it"
 * asks of a step: {name(where, step), inspect(where, step), branch(where, step, id), say(text,
 * cls)}. It tells the page of each inspection and branch that ended: document events
 * "chatlens:inspected" {where, answer, draft} and "chatlens:branched" {where, answer}. */
export function setUpStepActions(page) {
  const { api, state, store } = page;
  for (const href of STYLES) {
    if (!document.querySelector(`link[href="${href}"]`)) document.head.append(el("link", { rel: "stylesheet", href }));
  }
  const box = el("section", { id: "step-box", class: "step-box", "aria-label": "One step of a reply", "aria-live": "polite" });
  $("reads").after(box);
  // what the box shows: the step named {where, step}, a status line, the inspection {node, where,
  // step, answer}, the branch {where, model, controller}
  const shown = { step: null, status: null, statusClass: "", inspection: null, branch: null };
  let inspecting = null; // the AbortController of the inspection in flight

  const context = () => ({ settings: api.settings, context: api.model?.n_ctx });
  const say = (text, cls = "note") => {
    shown.status = text;
    shown.statusClass = cls;
    draw();
  };

  function draw() {
    const b = shown.branch;
    fill(
      box,
      stepBar(),
      shown.status ? el("p", { class: `step-status ${shown.statusClass}`, text: shown.status }) : null,
      b ? branchView(b.where.record, b.model, {
        gap: state.nearTieGap,
        onStop: b.controller ? () => b.controller.abort() : null,
        onKeep: b.where.keep === null && b.model.answer ? () => keep(b) : null,
        onDrop: () => drop(b),
      }) : null,
      b?.model.answer && b.where.keep ? el("p", { class: "term branch-no-keep", text: b.where.keep }) : null,
      shown.inspection?.node ?? null,
      idle(),
    );
  }

  /** The step a click named: what it is, and what can be done with it. */
  function stepBar() {
    if (!shown.step) return null;
    const { where, step } = shown.step;
    const offer = where.branchWhy ? null : branchChoices(where.record, step, state.nearTieGap).find((c) => c.near);
    const inspected = shown.inspection?.where === where && shown.inspection.step === step ? shown.inspection.answer : null;
    // a reply recorded without candidates: the last block's of the inspection are the model's own
    const lensChoices = !where.branchWhy && !where.record.top_k && inspected
      ? inspected.lens.at(-1).filter(([id]) => id !== where.record.reply_ids[step]) : [];
    const tokens = inspected ? shown.inspection.tokens : new Map();
    return el(
      "div",
      { class: "step-bar", dataset: { step, kind: where.kind } },
      el("p", { class: "step-name" }, el("b", { text: `${stepWords(where, step)[0].toUpperCase()}${stepWords(where, step).slice(1)}` })),
      el(
        "div",
        { class: "step-actions" },
        el("button", { type: "button", class: "step-inspect", onclick: () => inspect(where, step), text: "Where it looked, and how it chose" }),
        offer ? el("button", { type: "button", class: "branch-offer", dataset: { step, id: offer.id }, onclick: () => branch(where, step, offer.id),
                                text: `Take “${visibleToken(offer.token)}”, which it nearly chose` }) : null,
        lensChoices.map(([id, p]) => el("button", { type: "button", class: "branch-lens", dataset: { step, id }, onclick: () => branch(where, step, id, tokens.get(id)),
                                                    text: `Take ${tokens.has(id) ? `“${visibleToken(tokens.get(id))}”` : `token ${id}`} (${(100 * p).toFixed(1)}%)` })),
      ),
      where.branchWhy ? el("p", { class: "term", text: where.branchWhy })
        : where.record.top_k
        ? el("p", { class: "term", text: "Another of this step's candidates, picked in the table of candidates, starts a branch: what the model would have written after it." })
        : el("p", { class: "term", text: "This reply was recorded without its candidates: once inspected, the last block's are offered to branch with." }),
    );
  }

  /** With nothing open: what a click does, and the shown reply's near-ties to branch from. */
  function idle() {
    if (shown.step || shown.inspection || shown.branch) return null;
    const [record] = state.drawn ?? [];
    if (!record?.reply_ids?.length || !record.stop_reason) return null;
    const where = whereOf(state, record, context());
    return el(
      "div",
      { class: "step-idle" },
      el("p", { class: "term", text: "Click a token of the reply to look inside its step: where it looked, and how its choice formed block by block." +
        (record.top_k ? " Pick another of a step's candidates to see what the model would have written after it." : "") }),
      !where.why && !where.branchWhy && record.top_k ? nearTieList(record, state.nearTieGap, (step, id) => branch(where, step, id)) : null,
    );
  }

  async function inspect(where, step, { draft = false } = {}) {
    const what = draft ? "the first token of a reply to this draft" : stepWords(where, step);
    const why = refusal(api, state, "Inspecting a step");
    if (why) return say(why, "error");
    if (!draft && !inRange(where.record, step)) return say(`There is no token ${step + 1} in ${where.label}'s reply.`, "error");
    inspecting?.abort();
    const controller = new AbortController();
    inspecting = controller;
    shown.inspection = null;
    say(`Inspecting ${what}…`);
    const args = draft ? draftRequest(where.args) : inspectRequest(where.args, where.record.reply_ids, step);
    let answer;
    try {
      answer = await api.inspect(args, { signal: controller.signal });
    } catch (e) {
      if (inspecting === controller && e.name !== "AbortError") say(`Cannot inspect ${what}: ${e.message}`, "error");
      return;
    } finally {
      if (inspecting === controller) inspecting = null;
    }
    if (controller.signal.aborted) return;
    const tokens = knownTokens(answer, where.record); // the lens's spellings are in its answer
    const close = () => {
      shown.inspection = null;
      draw();
    };
    document.dispatchEvent(new CustomEvent("chatlens:inspected", { detail: { where, answer, draft } }));
    shown.inspection = { where, step, answer, tokens, node: inspectView(answer, readOf(answer, where.record), { tokens, onClose: close, title: `Inside ${what}` }) };
    shown.status = null;
    draw();
    box.scrollIntoView?.({ block: "nearest" });
  }

  async function branch(where, step, id, token = undefined) {
    const why = refusal(api, state, "A branch");
    if (why) return say(why, "error");
    if (where.branchWhy) return say(where.branchWhy, "error");
    if (!inRange(where.record, step)) return say(`There is no token ${step + 1} in ${where.label}'s reply to branch at.`, "error");
    if (where.record.reply_ids[step] === id) return inspect(where, step); // the model's own choice: no branch
    const choice = branchChoices(where.record, step, state.nearTieGap).find((c) => c.id === id);
    const controller = new AbortController();
    const model = { step, id, token: choice?.token ?? token ?? `#${id}`, ids: [], texts: [], answer: null, error: null };
    const b = { where, model, controller };
    shown.branch = b;
    shown.status = null;
    draw();
    box.scrollIntoView?.({ block: "nearest" });
    saveBranch({ label: where.label, step, token: visibleToken(model.token) }); // a reload says it went
    try {
      model.answer = await api.branch(branchRequest(where.args, where.record.reply_ids, step, id, { replyTopK: where.record.top_k }), {
        signal: controller.signal,
        onToken: (t) => {
          if (shown.branch !== b) return;
          model.ids.push(t.id);
          model.texts.push(t.text);
          draw();
        },
      });
      if (model.answer.reply_tokens?.[step] !== undefined) model.token = model.answer.reply_tokens[step];
      document.dispatchEvent(new CustomEvent("chatlens:branched", { detail: { where, answer: model.answer } }));
    } catch (e) {
      model.error = e.name === "AbortError" ? "Stopped before it began." : `No branch: ${e.message}`;
    }
    saveBranch(null);
    b.controller = null;
    if (shown.branch === b) draw();
  }

  /** The branch becomes the live turn's reply: the store's transition for a reply that ended. */
  function keep(b) {
    const { turn } = b.where;
    if (!state.live.turns.includes(turn) || state.live.turns.at(-1) !== turn) return say("That turn is no longer the conversation's last.", "error");
    if (state.writing) return say("A reply is being written: the branch can be kept once it ends.", "error");
    if (turn.record !== b.where.record) return say("That reply changed since the branch was made (another branch was kept): branch it again.", "error");
    const step = b.model.step;
    shown.branch = null;
    shown.inspection = null;
    shown.step = null;
    shown.status = `Kept: ${b.where.label}'s reply is now the branch, its token ${step + 1} chosen by hand. Your next message reads it.`;
    shown.statusClass = "kept";
    store.replied(turn, keptRecord(turn.record, b.model.answer));
    draw();
  }

  function drop(b) {
    b.controller?.abort();
    if (shown.branch === b) shown.branch = null;
    say("Dropped: the conversation is as it was.");
  }

  /** Close everything: the conversation it was about changed. */
  function reset() {
    inspecting?.abort();
    shown.branch?.controller?.abort();
    Object.assign(shown, { step: null, status: null, inspection: null, branch: null });
    draw();
  }

  // -- what the page says ------------------------------------------------------------------------
  const whereFrom = (node) => {
    const where = whereOf(state, replyOf(node), context());
    if (where.why) say(where.why, "error");
    return where.why ? null : where;
  };
  document.addEventListener("click", (e) => {
    const chip = e.target.closest?.(".reply .reply-tokens .tok");
    if (chip) return named(chip, chip);
    if (e.target.closest?.("#prediction.is-done") && state.prediction?.state === "done") {
      const [record] = state.drawn ?? [];
      inspect({ args: state.prediction.args, record, label: "the draft" }, 0, { draft: true });
    }
  });
  document.addEventListener("keydown", (e) => {
    if (e.key !== "Enter") return;
    const chips = e.target.closest?.(".reply .reply-tokens");
    const picked = chips?.querySelector(".tok.picked");
    if (picked) named(chips, picked);
  });
  /** A chip clicked (or Enter on the one picked): its step named in the bar. */
  function named(node, chip) {
    const where = whereFrom(node);
    if (!where) return;
    const step = [...chip.closest(".reply-tokens").querySelectorAll(".tok")].indexOf(chip);
    if (shown.step?.where.record === where.record && shown.step.step === step) return;
    shown.step = { where, step };
    shown.status = null;
    draw();
  }
  document.addEventListener("chatlens:candidate", (e) => {
    const { reply, step, id } = e.detail;
    const where = whereOf(state, reply, context());
    if (where.why) return say(where.why, "error");
    shown.step = { where, step };
    if (reply.reply_ids?.[step] === id) inspect(where, step);
    else branch(where, step, id);
  });
  const name = (where, step) => {
    shown.step = { where, step };
    shown.status = null;
    draw();
  };
  let lost = branchReloaded(); // a branch the page's last visit was writing when it went
  store.subscribe((change) => {
    if (["sent", "cleared", "mode", "restored"].includes(change.type)) {
      reset();
      // the page's start restores the conversation, then sets the mode: the sentence outlives both,
      // until the learner sends or starts again
      if (change.type === "sent" || change.type === "cleared") lost = null;
      else if (lost) say(lost);
    } else if (change.type === "replied" && shown.branch && change.turn !== shown.branch.where.turn) reset();
    else if (!shown.inspection && !shown.branch) draw(); // the panel drew another reply: the idle line follows it
    markByHand(state); // a restored conversation's kept branches too
    offerDraft();
  });
  draw();
  markByHand(state); // the conversation a reload restored before this module listened
  if (lost) say(lost);
  return { name, inspect, branch, say, box };
}

/** The draft's prediction, once made, offers its own inspection (a click anywhere in it asks). */
function offerDraft() {
  const box = document.querySelector("#prediction.is-done");
  if (!box || box.querySelector(".prediction-inspect")) return;
  box.append(el("button", { type: "button", class: "prediction-inspect", text: "Where it would look, and how it would choose" }));
}

/** A reply kept from a branch says so where it is drawn: a badge on its view's title, and one on
 * its bubble in the live chat (the chat draws the turns' replies in order, one bubble each). */
function markByHand(state) {
  const badge = (branched) => el("span", { class: "by-hand", title: `token ${branched.step + 1} was chosen by hand`,
                                           text: `chosen by hand at token ${branched.step + 1}` });
  for (const node of document.querySelectorAll(".reply")) {
    const reply = replyOf(node);
    const title = node.querySelector(".reply-title");
    if (reply?.branched && title && !title.querySelector(".by-hand")) title.append(" ", badge(reply.branched));
  }
  if (state.mode !== "live") return;
  const bubbles = [...($("chat")?.children ?? [])].filter((n) => n._kind === "assistant");
  const answered = state.live.turns.filter((t) => t.reply !== undefined);
  bubbles.forEach((n, k) => {
    const branched = answered[k]?.record?.branched ?? answered[k]?.saved?.branched; // kept, or kept before a reload
    const has = n.querySelector(":scope > .by-hand");
    if (branched && !has) n.prepend(badge(branched));
    else if (!branched && has) has.remove();
  });
}
