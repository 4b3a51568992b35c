// One step of a reply, acted on: where its token looked (chatlens.inspect, drawn by
// views/inspect.mjs), which piece of what the model read it needed (chatlens.cause, drawn by
// views/cause.mjs: the step's token, and on asking the whole reply so far) and what another
// candidate would have written (chatlens.branch, drawn by views/branch.mjs beside the reply),
// whatever mode drew the reply. It attaches from outside: the reply views (views/reply.mjs) say
// which step was picked, and this module listens on the page:
//   a click on a reply's token chip (or Enter on one focused) the step bar names that step, with
//                                                             its actions: inspect it; branch
//                                                             with the token it nearly chose
//   chatlens:candidate {reply, step, id}, a candidate row     the chosen id: inspect the step;
//                                                             another: branch there with it
//   a click in the draft's prediction (#prediction)           inspect the draft's first token
//   a near-tie offer, a lens candidate of the last block      branch there with it
// A click on a chip shows its candidates (views/why.mjs) and names the step; the inspection,
// which recomputes the step (a GPU step, or a NumPy pass of a tenth of a second and more), waits
// for the button: tapping through tokens on a phone computes nothing.
//
// What the box holds is the store's (page/state/stepbox.mjs stepBox: the step named, its
// inspection, its cause, its branch, what the box says), changed by its transitions only; the
// actions here call the API (api.inspect, api.cause, api.branch: made by api.mjs's loop) and
// the transitions, and app.mjs's one subscriber draws the box (stepsChanged). Which request a
// step makes comes from where the reply lives (whereOf below: a live turn, a recorded turn, a
// comparison cell, plain text's chat side, the draft) and page/step.mjs's requests.
//
// A branch is written as a reply is (chatlens.writing while it streams; Stop keeps what it
// wrote): its tokens go through the store's tokenArrived into a reply so far, and the one reply
// view (views/reply.mjs) appends each. Kept, on a live conversation's last turn, it becomes that
// turn's reply through the store's one transition for a reply that ended (`replied`), with
// page/step.mjs keptRecord's record (`branched`: chosen by hand): later messages read its text,
// and a reload keeps it as it keeps any reply. Dropped, nothing changed. A new message, a new
// conversation or another mode ends a branch that is being written and closes the box (the
// store's transitions): the branch was never the conversation's.
//
// The pure part (whereOf, refusal, the sentences) is played in node (tests/page/steps.test.mjs),
// the box's state in tests/page/state.test.mjs; tests/test_inspect_browser.py plays the rest on
// the page.

import { branchRequest, causeRequest, compareCellRequest, draftRequest, inspectRequest, keptRecord, plainRequest, recordedRequest } from "../page/step.mjs";
import { branchReloaded, saveBranch } from "../page/saved.mjs";
import { cellsOf, liveMessages } from "../page/state.mjs";
import { PART_OF } from "../page/state/stepbox.mjs";
import { HELD_OFF, waitsForReply } from "../page/writing.mjs";
import { branchChoices, branchView, nearTieList } from "../views/branch.mjs";
import { causeView } from "../views/cause.mjs";
import { cellName } from "../views/compare.mjs";
import { $, el, refill } from "../views/dom.mjs";
import { inspectView, knownTokens, readOf } from "../views/inspect.mjs";
import { workWords } from "../views/progress.mjs";
import { stripView } from "../views/strip.mjs";
import { replyGrew, replyOf } from "../views/reply.mjs";
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
    return { kind: "compare", label: cellName(found.model, found.layout), args: cell.args,
             record: cellRecord(run.prompt, found.layout, reply), keep: "The comparison keeps no conversation: a branch is kept in Live mode.",
             branchWhy: cell.branchWhy };
  }
  return { why: "This reply is not one the engine can recompute (a saved comparison, or one from a recording)." };
}

/** Why nothing can be computed now (a sentence), or null: the weights must be in, and one reply
 * is written at a time (page/writing.mjs: chatlens refuses in the same sentence). `api`: chatlens;
 * `state`: the page's; `what`: the words the sentence starts with (writing.mjs HELD_OFF's). */
export function refusal(api, state, what) {
  if (!api.model?.backend) {
    return `${what} needs the model's weights: ${api.model?.error ? api.model.error : "download them in the box at the top of the page"}.`;
  }
  if (state.writing || api.writing) return waitsForReply(what);
  return null;
}

/** A step's name, where the box says which step it acts on: "token 3 of turn 2's reply, “·pirate”". */
export function stepName(where, step) {
  const t = where.record.reply_tokens?.[step];
  return `token ${step + 1} of ${where.label}'s reply${t === undefined ? "" : `, “${visibleToken(t)}”`}`;
}

/** Why a step's reply has no candidates to branch with (a sentence): the lens offers its last
 * block's once the step is inspected. */
export function noCandidates(where) {
  const then = "once a step is inspected, its last block's candidates are offered to branch with.";
  if (where.kind === "live" && where.turn?.reloaded?.kept?.candidates === "lost") {
    return `This reply's candidates were not kept across the reload (the browser's storage had no room for them): ${then}`;
  }
  if (where.kind === "live" || where.kind === "plain") return `This reply has no candidates: “Why this token” was off when it was written; ${then}`;
  if (where.kind === "recorded") return `This reply was recorded without its candidates: ${then}`;
  return `This reply has no candidates: ${then}`;
}

/** A step of a reply the page can ask about: between 0 and the reply's length (the step after the
 * reply so far is len). */
export const inRange = (record, step) => Number.isInteger(step) && step >= 0 && step < (record.reply_ids?.length ?? 0);

// -- the page --------------------------------------------------------------------------------------

const STYLES = ["inspect.css", "branch.css", "cause.css"];
const inspectionNodes = new WeakMap(); // an inspection (state.stepBox's) -> {looked, formed}: its views, drawn once each

const context = (api) => ({ settings: api.settings, context: api.model?.n_ctx });

/** Attach to the page (app.mjs's `page`: api, store, state): the box under the panel, and the
 * clicks that name a step. */
export function setUpStepActions(page) {
  const { state, store } = page;
  for (const href of STYLES) {
    if (!document.querySelector(`link[href="${href}"]`)) document.head.append(el("link", { rel: "stylesheet", href }));
  }
  // The box is no live region (an inspection is hundreds of nodes, a cause's progress changes every
  // second): what a screen reader hears is said once per event in #step-said (announce).
  $("reads").after(el("section", { id: "step-box", class: "step-box", "aria-label": "One step of a reply" }),
                   el("p", { id: "step-said", class: "visually-hidden", role: "status", "aria-live": "polite" }));
  const whereFrom = (node) => {
    const where = whereOf(state, replyOf(node), context(page.api));
    if (where.why) store.stepSaid(where.why, "error");
    return where.why ? null : where;
  };
  /** A chip clicked (Enter or Space on one focused clicks it: views/tokens.mjs steppable): its
   * step named in the bar. A branch's own reply, in the box, is no step to act on. */
  const named = (node, chip) => {
    if (chip.closest("#step-box .branch")) return;
    const where = whereFrom(node);
    if (!where) return;
    nameStep(page, where, [...chip.closest(".reply-tokens").querySelectorAll(".tok")].indexOf(chip));
  };
  document.addEventListener("click", (e) => {
    const chip = e.target.closest?.(".reply .reply-tokens .tok");
    if (chip) return named(chip, chip);
    if (e.target.closest?.("#prediction.is-done") && state.prediction?.state === "done") {
      const [record] = state.drawn ?? [];
      inspectStep(page, { args: state.prediction.args, record, label: "the draft" }, 0, { draft: true });
    }
  });
  document.addEventListener("chatlens:candidate", (e) => {
    const { reply, step, id } = e.detail;
    const where = whereOf(state, reply, context(page.api));
    if (where.why) return store.stepSaid(where.why, "error");
    store.stepNamed(where, step);
    if (reply.reply_ids?.[step] === id) inspectStep(page, where, step);
    else branchStep(page, where, step, id);
  });
  const lost = branchReloaded(); // a branch the page's last visit was writing when it went
  if (lost) store.branchReloaded(lost);
  drawSteps(page);
}

/** Name `step` of the reply `where` lives in: the bar offers what can be done with it. */
export function nameStep(page, where, step) {
  const named = page.state.stepBox.named;
  if (named?.where.record === where.record && named.step === step) return;
  page.store.stepNamed(where, step);
}

/** Inspect `step` (draft: the draft's first token, where.args the preview's request). */
export async function inspectStep(page, where, step, { draft = false } = {}) {
  const { api, state, store } = page;
  const what = draft ? "the first token of a reply to this draft" : stepName(where, step);
  const why = refusal(api, state, HELD_OFF.inspect);
  if (why) return store.stepSaid(why, "error");
  if (!draft && !inRange(where.record, step)) return store.stepSaid(`There is no token ${step + 1} in ${where.label}'s reply.`, "error");
  const controller = new AbortController();
  const inspection = store.inspectionAsked(where, step, { draft, controller, says: `Inspecting ${what}…` });
  const args = draft ? draftRequest(where.args) : inspectRequest(where.args, where.record.reply_ids, step);
  try {
    store.inspected(inspection, await api.inspect(args, { signal: controller.signal }));
    $("step-box")?.scrollIntoView?.({ block: "nearest" });
  } catch (e) {
    store.inspectFailed(inspection, e.name === "AbortError" ? null : `Cannot inspect ${what}: ${e.message}`);
  }
}

/** Which piece of what the model read `step` needed: each piece knocked out and removed
 * (chatlens.cause), its progress piece by piece in the box, a Stop. Resolves with the answer,
 * or null (refused, stopped or failed: the box says why). */
export async function causeStep(page, where, step, { context = {} } = {}) {
  const { api, state, store } = page;
  const why = refusal(api, state, HELD_OFF.cause) ?? noCause(where);
  if (why) return store.stepSaid(why, "error"), null;
  if (!inRange(where.record, step)) return store.stepSaid(`There is no token ${step + 1} in ${where.label}'s reply.`, "error"), null;
  const cause = store.causeAsked(where, step, { controller: new AbortController(), context });
  $("step-box")?.scrollIntoView?.({ block: "nearest" });
  return askCause(page, cause, "token");
}

/** The same for the whole reply so far: the cause asked again at the reply's last step (its
 * answer's reply_logprob is the whole reply's), or shown again once it is known. */
export async function wholeReply(page, cause) {
  const { api, state, store } = page;
  if (cause.whole?.answer) return store.wholeShown(cause, true), cause.whole.answer; // at the reply's last step: the token's own
  const why = refusal(api, state, HELD_OFF.cause);
  if (why) return store.stepSaid(why, "error"), null;
  return store.wholeAsked(cause, { controller: new AbortController() }) ? askCause(page, cause, "whole") : null;
}

/** One of the cause's two answers asked of chatlens.cause (`which`: the step's "token", or the
 * "whole" reply so far, the cause at the reply's last step). */
async function askCause(page, cause, which) {
  const { api, store } = page;
  const { where } = cause;
  const step = which === "token" ? cause.step : where.record.reply_ids.length - 1;
  try {
    const answer = await api.cause(causeRequest(where.args, where.record.reply_ids, step), {
      signal: cause[which].controller.signal,
      onProgress: (p) => store.causeProgress(cause, which, p),
    });
    store.caused(cause, which, { answer });
    return answer;
  } catch (e) {
    store.caused(cause, which, { error: e.name === "AbortError" ? "Stopped: no figures." : `No figures: ${e.message}` });
    return null;
  }
}

/** Two pieces taken away together (`name` "a+b"), at the step shown (the token's, or the whole
 * reply's): a row of their own under the table. A single knockout can understate a piece when
 * another carries the same thing. */
export async function pairCause(page, cause, name) {
  const { api, state, store } = page;
  const why = refusal(api, state, "Taking two pieces away");
  if (why) return store.stepSaid(why, "error"), null;
  const which = cause.showWhole ? "whole" : "token";
  const step = which === "token" ? cause.step : cause.where.record.reply_ids.length - 1;
  const pair = store.pairAsked(cause, name, which, { controller: new AbortController() });
  if (!pair) return null;
  try {
    const answer = await api.cause(causeRequest(cause.where.args, cause.where.record.reply_ids, step, { pieces: [name] }), {
      signal: pair.controller.signal, onProgress: (p) => store.causeProgress(cause, pair, p),
    });
    store.pairCaused(cause, pair, { answer });
    return answer;
  } catch (e) {
    store.pairCaused(cause, pair, { error: e.name === "AbortError" ? "Stopped: no figures." : `No figures: ${e.message}` });
    return null;
  }
}

const PLAIN_CAUSE = "Plain text is one piece with nothing around it: there is no piece to take away and keep the rest.";

/** Why a step of `where`'s reply is not asked which piece it needed (a sentence), or null: plain
 * text (the plain-text side, a comparison's plain cells). The step bar says it where it would
 * offer the button; causeStep refuses with it. */
export const noCause = (where) => (where.args?.layout === "plain" ? PLAIN_CAUSE : null);

/** Branch at `step` with `id` (token: its text, when the step's candidates do not say it). */
export async function branchStep(page, where, step, id, token = undefined) {
  const { api, state, store } = page;
  const why = refusal(api, state, HELD_OFF.branch);
  if (why) return store.stepSaid(why, "error");
  if (where.branchWhy) return store.stepSaid(where.branchWhy, "error");
  if (!inRange(where.record, step)) return store.stepSaid(`There is no token ${step + 1} in ${where.label}'s reply to branch at.`, "error");
  if (where.record.reply_ids[step] === id) return inspectStep(page, where, step); // the model's own choice: no branch
  const choice = branchChoices(where.record, step, state.nearTieGap).find((c) => c.id === id);
  const controller = new AbortController();
  const branch = store.branchStarted(where, step, id, choice?.token ?? token ?? `#${id}`, controller);
  $("step-box")?.scrollIntoView?.({ block: "nearest" });
  saveBranch({ label: where.label, step, token: visibleToken(branch.token) }); // a reload says it went
  try {
    const answer = await api.branch(branchRequest(where.args, where.record.reply_ids, step, id, { replyTopK: where.record.top_k }), {
      signal: controller.signal,
      onToken: (t) => store.tokenArrived(branch, t),
    });
    store.branchEnded(branch, { answer });
  } catch (e) {
    store.branchEnded(branch, { error: e.name === "AbortError" ? "Stopped before it began." : `No branch: ${e.message}` });
  }
  saveBranch(null);
}

/** The branch becomes the live turn's reply: the store's transition for a reply that ended. */
function keepBranch(page, branch) {
  const { state, store } = page;
  const { turn, label } = branch.where;
  if (!state.live.turns.includes(turn) || state.live.turns.at(-1) !== turn) return store.stepSaid("That turn is no longer the conversation's last.", "error");
  if (state.writing) return store.stepSaid("A reply is being written: the branch can be kept once it ends.", "error");
  if (turn.record !== branch.where.record) return store.stepSaid("That reply changed since the branch was made (another branch was kept): branch it again.", "error");
  store.branchKept(branch, keptRecord(turn.record, branch.answer),
    `Kept: ${label}'s reply is now the branch, its token ${branch.step + 1} chosen by hand. Your next message reads it.`);
}

// -- what the box draws ---------------------------------------------------------------------------

/** A change of the store, as app.mjs's subscriber hands it on: the box draws its own changes (a
 * cause's progress in place, its Stop kept); a branch's token is appended by its reply view; with
 * nothing open, the idle line follows the reply the panel drew. */
export function stepsChanged(page, change) {
  const box = page.state.stepBox;
  if (change.type === "step-box") {
    announce(page, change.what);
    return change.what === "cause-progress" ? causeProgressed(page) : drawSteps(page);
  }
  if (change.mode === "branch") return change.type !== "token" || replyGrew(change.reply) || drawSteps(page);
  if (change.type === "guess-first" && box.cause) return drawSteps(page);
  if (!box.inspection && !box.branch) drawSteps(page);
  offerDraft();
}

/** What a screen reader hears of the box: once per event, in #step-said (the box itself is not
 * live). A cause is said piece by piece: its line only when what it computes changes. */
function announce(page, what) {
  const node = $("step-said");
  if (!node) return;
  const { status, inspection, cause, branch, named } = page.state.stepBox;
  const name = named ? stepName(named.where, named.step) : "the step";
  const said = {
    said: status?.text,
    named: named ? `${stepName(named.where, named.step)}: its actions are below it.` : null,
    inspected: inspection?.answer ? `Where ${name} looked, and how it chose: shown.` : null,
    "inspect-failed": status?.text,
    caused: cause && (cause.token.answer || cause.token.error) ? (cause.token.error ?? `Which piece ${name} needed: the table is shown.`) : null,
    "branch-ended": branch?.answer ? `The branch is written: ${branch.answer.reply_ids.length} tokens.` : branch?.error,
    kept: status?.text,
    dropped: status?.text,
  }[what];
  if (what === "cause-progress") {
    const measure = [cause?.token, cause?.whole, ...(cause?.pairs ?? [])].find((m) => m && m.progress && !m.answer);
    const doing = measure?.progress?.doing;
    if (doing && doing !== node.dataset.doing) {
      node.dataset.doing = doing;
      node.textContent = `Which piece it needed: ${workWords(measure.progress).line}`;
    }
    return;
  }
  if (said) node.textContent = said;
}

/** The box, drawn from the store's stepBox: the step bar, what it says, a tab for each part it
 * holds (where it looked, how the choice formed, which piece it needed, what another token
 * writes) and the part in view, and with nothing open what a click does. Redrawn whole, focus
 * kept on the control of the same id (dom.mjs refill). */
export function drawSteps(page) {
  const node = $("step-box");
  if (!node) return;
  const { state } = page;
  const { status, open } = state.stepBox;
  refill(
    node,
    stepBar(page),
    page.stepShare?.(), // the step as a link or a command (modes/shared.mjs)
    status ? el("p", { class: `step-status ${status.cls}`, text: status.text }) : null,
    tabs(page),
    open ? el("div", { id: `step-part-${open}`, class: "step-part", role: "tabpanel", "aria-labelledby": `step-tab-${open}` },
      partNode(page, open)) : null,
    idle(page),
  );
}

const PARTS = [["looked", "Where it looked"], ["formed", "How the choice formed"], ["cause", "Which piece it needed"],
               ["branch", "What another token writes"]];

/** A tab for each part the box holds; the one in view selected. Arrow keys move between them. */
function tabs(page) {
  const box = page.state.stepBox;
  const held = PARTS.filter(([part]) => box[PART_OF[part]] && (PART_OF[part] !== "inspection" || box.inspection.answer));
  if (!held.length) return null;
  const list = el("div", { class: "step-tabs", role: "tablist", "aria-label": "The step's parts",
                           onkeydown: (e) => moveTab(e, held.map(([p]) => p), page) },
    held.map(([part, label]) => el("button", {
      type: "button", role: "tab", id: `step-tab-${part}`, class: "step-tab", "aria-selected": box.open === part ? "true" : "false",
      "aria-controls": `step-part-${part}`, tabindex: box.open === part ? "0" : "-1", onclick: () => page.store.partOpened(part), text: label,
    })));
  return list;
}

function moveTab(e, parts, page) {
  const at = parts.indexOf(page.state.stepBox.open);
  const to = e.key === "ArrowRight" ? at + 1 : e.key === "ArrowLeft" ? at - 1 : e.key === "Home" ? 0 : e.key === "End" ? parts.length - 1 : null;
  if (to === null) return;
  e.preventDefault();
  const part = parts[(to + parts.length) % parts.length];
  page.store.partOpened(part);
  $(`step-tab-${part}`)?.focus();
}

/** The part of the box in view. */
function partNode(page, open) {
  const { state, store } = page;
  const { branch, inspection, cause } = state.stepBox;
  if (open === "branch" && branch) {
    return [
      branchView(branch.where.record, branch, {
        gap: state.nearTieGap,
        onStop: branch.controller ? () => branch.controller.abort() : null,
        onKeep: branch.where.keep === null && branch.answer ? () => keepBranch(page, branch) : null,
        onDrop: () => store.branchDropped(branch),
      }),
      branch.answer && branch.where.keep ? el("p", { class: "term branch-no-keep", text: branch.where.keep }) : null,
    ];
  }
  if ((open === "looked" || open === "formed") && inspection?.answer) return inspectionNode(page, inspection, open);
  if (open === "cause" && cause) return causeNode(page, cause);
  return null;
}

/** The inspection's view for one of its parts, made once for it (its controls redraw it in place). */
function inspectionNode(page, inspection, part) {
  if (!inspectionNodes.has(inspection)) inspectionNodes.set(inspection, {});
  const made = inspectionNodes.get(inspection);
  if (!made[part]) {
    const { answer, where, draft, step } = inspection;
    const tokens = knownTokens(answer, where.record); // the lens's spellings are in its answer
    const what = draft ? "the first token of a reply to this draft" : stepName(where, step);
    const title = part === "looked" ? `Where ${what} looked` : `How the choice of ${what} formed, block by block`;
    made[part] = inspectView(answer, readOf(answer, where.record), { tokens, title, part, onClose: () => page.store.inspectionClosed() });
  }
  return made[part];
}

/** Which piece the box's step needed: the figures once known (the whole reply so far as a token
 * strip and a table behind a switch), else how far they have got, with a Stop. */
function causeNode(page, cause) {
  const { state, store } = page;
  const { where, step, token, whole } = cause;
  const computing = (measure) => measure && !measure.answer && !measure.error;
  const wholeState = !whole ? "none" : whole.error ? whole.error : computing(whole) ? "computing" : cause.showWhole ? "shown" : "none";
  const which = cause.showWhole && whole?.answer ? "whole" : "token";
  const pairs = cause.pairs.filter((p) => p.which === which);
  return el(
    "div",
    { class: "cause-box", dataset: { step } },
    el("div", { class: "inspect-head" },
      el("h3", { text: `Which piece ${stepName(where, step)} needed` }),
      el("button", { type: "button", id: "cause-close", class: "cause-close", onclick: () => store.causeClosed(), text: "Close" })),
    computing(token) ? progressNode(token, "token", "Taking each piece away, one pass each") : null,
    token.error ? el("p", { class: "error", text: token.error }) : null,
    which === "whole" ? stripView(whole.answer, where.record.reply_tokens, cause.strip, {
      label: "Every token of the reply so far",
      onChoose: (chosen) => store.stripChosen(cause, chosen),
      onOpen: (k) => nameStep(page, where, k),
    }) : null,
    token.answer ? causeView(token.answer, whole?.answer ?? null, {
      wholeState, replyTokens: where.record.reply_tokens,
      onWhole: (show) => (show ? wholeReply(page, cause) : store.wholeShown(cause, false)),
      pairs: pairs.filter((p) => p.answer).map((p) => p.answer.pieces[0]),
      onPair: (name) => pairCause(page, cause, name),
      guessFirst: state.guessFirst, guess: cause.guess[which], onGuess: (name) => store.guessed(cause, which, name),
      onGuessFirst: (on) => store.guessFirstChosen(on),
    }) : null,
    computing(whole) ? progressNode(whole, "whole", "The whole reply so far, each piece away") : null,
    pairs.filter(computing).map((p) => progressNode(p, `pair-${cause.pairs.indexOf(p)}`, `${p.name.replace("+", " and ")} together`)),
    pairs.filter((p) => p.error).map((p) => el("p", { class: "error", text: p.error })),
  );
}

/** A computation's progress and its Stop: ids that stay the same, so a redraw keeps the Stop a
 * learner reached (and causeProgressed updates the words in place). */
function progressNode(measure, key, what) {
  const w = workWords(measure.progress);
  return el("div", { class: "cause-progress progress-box", id: `cause-progress-${key}`, dataset: { key } },
    el("p", { class: "note progress-line", text: `${what}: ${w.line}` }),
    el("p", { class: "term progress-detail", text: w.detail }),
    el("button", { type: "button", id: `cause-stop-${key}`, class: "cause-stop stop", onclick: () => measure.controller?.abort(), text: "Stop" }));
}

/** A cause's progress changed: its words updated in place (no redraw: the Stop keeps its focus). */
function causeProgressed(page) {
  const cause = page.state.stepBox.cause;
  if (!cause) return;
  const measures = { token: cause.token, whole: cause.whole, ...Object.fromEntries(cause.pairs.map((p, i) => [`pair-${i}`, p])) };
  for (const [key, m] of Object.entries(measures)) {
    if (!m?.progress) continue;
    const node = $(`cause-progress-${key}`);
    if (!node) return drawSteps(page);
    const w = workWords(m.progress);
    const line = node.querySelector(".progress-line");
    line.textContent = `${line.textContent.split(":")[0]}: ${w.line}`;
    node.querySelector(".progress-detail").textContent = w.detail;
  }
}

/** The step a click named: what it is, and what can be done with it. */
function stepBar(page) {
  const { named, inspection } = page.state.stepBox;
  if (!named) return null;
  const { where, step } = named;
  const gap = page.state.nearTieGap;
  const offer = where.branchWhy ? null : branchChoices(where.record, step, gap).find((c) => c.near);
  const inspected = inspection?.where === where && inspection.step === step ? inspection.answer : null;
  // a reply recorded without candidates: the last block's of the inspection are the model's own
  const lensChoices = !where.branchWhy && !where.record.top_k && inspected
    ? inspected.lens.at(-1).filter(([id]) => id !== where.record.reply_ids[step]) : [];
  const tokens = inspected ? knownTokens(inspected, where.record) : new Map();
  const words = stepName(where, step);
  return el(
    "div",
    { class: "step-bar", dataset: { step, kind: where.kind } },
    el("p", { class: "step-name" }, el("b", { text: `${words[0].toUpperCase()}${words.slice(1)}` })),
    el(
      "div",
      { class: "step-actions" },
      el("button", { type: "button", class: "step-inspect", onclick: () => inspectStep(page, where, step), text: "Where it looked, and how it chose" }),
      noCause(where) ? null
        : el("button", { type: "button", class: "step-cause", onclick: () => causeStep(page, where, step), text: "Which piece it needed" }),
      offer ? el("button", { type: "button", class: "branch-offer", dataset: { step, id: offer.id }, onclick: () => branchStep(page, where, step, offer.id),
                              text: `Take “${visibleToken(offer.token)}”, which it nearly chose` }) : null,
      lensChoices.map(([id, p]) => el("button", { type: "button", class: "branch-lens", dataset: { step, id }, onclick: () => branchStep(page, where, step, id, tokens.get(id)),
                                                  text: `Take ${tokens.has(id) ? `“${visibleToken(tokens.get(id))}”` : `token ${id}`} (${(100 * p).toFixed(1)}%)` })),
    ),
    noCause(where) ? el("p", { class: "term step-no-cause", text: `“Which piece it needed” is not offered here. ${noCause(where)}` }) : null,
    where.branchWhy ? el("p", { class: "term", text: where.branchWhy })
      : where.record.top_k
      ? el("p", { class: "term", text: "Another of this step's candidates, picked in the table of candidates, starts a branch: what the model would have written after it." })
      : el("p", { class: "term", text: noCandidates(where) }),
  );
}

/** With nothing open: what a click does, and the shown reply's near-ties to branch from. */
function idle(page) {
  const { state } = page;
  const { named, inspection, branch } = state.stepBox;
  if (named || inspection || branch) return null;
  const [record] = state.drawn ?? [];
  if (!record?.reply_ids?.length || !record.stop_reason) return null;
  const where = whereOf(state, record, context(page.api));
  return el(
    "div",
    { class: "step-idle" },
    el("p", { class: "term", text: "Click a token of the reply to look inside its step: where it looked, and how its choice formed block by block." +
      (record.top_k ? " Pick another of a step's candidates to see what the model would have written after it." : "") }),
    !where.why && !where.branchWhy && record.top_k ? nearTieList(record, state.nearTieGap, (step, id) => branchStep(page, where, step, id)) : null,
  );
}

/** The draft's prediction, once made, offers its own inspection (a click anywhere in it asks). */
function offerDraft() {
  const box = document.querySelector("#prediction.is-done");
  if (!box || box.querySelector(".prediction-inspect")) return;
  box.append(el("button", { type: "button", class: "prediction-inspect", text: "Where it would look, and how it would choose" }));
}
