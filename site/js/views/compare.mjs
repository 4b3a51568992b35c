// The comparison's panel: one message, read by the base model and the instruct model, each in two
// layouts (the text as it is, and the chat template around it). Below the 2x2, once, the exact
// text and ids both read; in each cell its state (waiting, reading the prompt, writing, ended),
// the reply as the reply view draws it (views/reply.mjs: a chip a token, appended as it comes),
// why it stopped the moment it ends, and once the four have ended the first step's candidates
// beside the lesson's figures. Before any download, a recorded comparison stands in for the run
// (site/recorded-compare.json: the instruct half recorded from this copy's weights, the base half
// only from the pinned base).
//
// The pure parts (the sentences, the names, the lesson's figures against this copy's, the
// estimate) hold no DOM: node tests play them (tests/page/compare.test.mjs).

import { stopReasonText } from "../lesson/terms.mjs";
import { stepParts } from "./chat.mjs";
import { $, announce, count, el, fill } from "./dom.mjs";
import { differenceNote, LESSON_SHARES } from "./lessonfigures.mjs";
import { replyView, textWithSpecials } from "./reply.mjs";
import { chips, visibleToken } from "./tokens.mjs";
import { percent } from "./why.mjs";

/** Each layout's name: in a sentence ("read with plain text"), and before a noun ("a plain-text cell"). */
export const LAYOUT_NAMES = { plain: { name: "plain text", cell: "plain-text" }, template: { name: "the chat template", cell: "chat-template" } };
/** One of the four, in words: "the base model's chat-template cell". */
export const cellName = (model, layout) => `the ${model} model's ${LAYOUT_NAMES[layout].cell} cell`;
const LESSON_SIDE = { plain: "plain", template: "chat" }; // lessonfigures.mjs's LESSON_SHARES keys
const TOP_SHOWN = 5;

/**
 * What a model of the comparison is, named from what its files are (page/weights.mjs baseNameOf
 * for the base): {short, long}. `names`: {instruct, base}, each {kind, name, says}.
 */
const headingOf = (model, names) => (model === "base" ? names?.base?.name ?? "Base" : "Instruct");

/** Why one of the four stopped, in words. cell: the reply ({reply_ids, stop_reason, backend});
 * limit: the cap the run had; stopped: why the page stopped the run, when it did (a sentence). */
export function stopSentence(model, cell, limit, stopped = null) {
  const n = count(cell.reply_ids.length, "token");
  if (cell.stop_reason === "end_turn") {
    return cell.reply_ids.length <= 1
      ? "Its first token was <|im_end|>, the end of a turn: the reply ended before it began."
      : `It wrote <|im_end|>, the end of a turn, after ${n}: the reply ended there.`;
  }
  if (cell.stop_reason === "max_tokens") {
    const who = model === "base" ? "The base model" : "It";
    return `${who} never wrote <|im_end|>: it ran until the cap of ${limit} tokens stopped it.`;
  }
  if (cell.stop_reason === "stopped") {
    const why = stopped ? ` (${stopped})` : "";
    if (neverRan(cell)) return `Never ran: the comparison was stopped before this reply's turn${why}.`;
    return `Stopped after ${n}, before the model ended it${why}.`;
  }
  return "Still writing…";
}

/** A reply a stop kept from starting: no ids, and nothing computed it. */
export const neverRan = (cell) => cell.stop_reason === "stopped" && !cell.reply_ids.length && !cell.backend && !cell.computed_tokens;

/** The first step's best candidates: [{id, token, p, percent}], best first (at most `n`). A
 * cell's top_k holds each step's rows (a Reply's); the first step's say why it starts as it does. */
export function firstStep(cell, n = TOP_SHOWN) {
  const rows = cell?.top_k?.[0];
  if (!rows?.length) return [];
  return rows.slice(0, n).map(([id, , p], i) => ({ id, token: cell.top_k_tokens?.[0]?.[i] ?? "", p, percent: percent(p) }));
}

/**
 * Which weights a model's replies come from, for the sentence where this page's figures differ
 * from the lesson's: {kind: "copy" | "original" | "stand-in" | "other", says}. instruct: weightsOf
 * the page's source (page/weights.mjs); base: baseNameOf the base's source, or null when unknown.
 * Each `says` states only what is known of the weights, and what would settle the rest.
 */
export function whoseWeights(model, { instruct = null, base = null } = {}) {
  if (model === "base") {
    if (!base || base.kind === "unknown") return { kind: "other", says: "The base model's weights here are not known to be the lesson's." };
    if (base.kind === "stand-in") return { kind: "stand-in", says: `The base here is ${base.says}: its replies say nothing about what the real base model writes, so the lesson's claim is not tested here.` };
    if (base.kind === "original") return { kind: "original", says: "These are the base model's original weights: only the arithmetic differs here (its order and rounding on this device)." };
    return { kind: "other", says: `The base here is ${base.says}: whether its replies are the real base model's cannot be told from here.` };
  }
  if (!instruct) return { kind: "other", weights: null, says: null }; // its source not known yet (a reload's first draw): nothing said
  return { kind: instruct.kind === "copy" || instruct.kind === "original" ? instruct.kind : "other", weights: instruct,
           says: differenceNote(instruct, "chat") };
}

/**
 * The lesson's figure for one of the four beside this run's, when the message is the lesson's
 * (`lesson` true; else null): {lesson, here, differs} sentences (differs null when they agree).
 * weights: whoseWeights's answer for the model; cap: the lab's cap (build.json's compare_limit,
 * the lesson's 48).
 */
export function lessonFigure(model, layout, cell, { lesson: isLesson, weights, cap }) {
  if (!cell || !isLesson) return null;
  if (model === "instruct") {
    const side = LESSON_SIDE[layout];
    const want = LESSON_SHARES[side];
    const at = (cell.top_k_tokens?.[0] || []).indexOf(want.token);
    const p = at >= 0 ? cell.top_k[0][at][2] : null;
    const first = at === 0;
    const lesson = `The lesson (original bf16 weights): “${want.token}” first, at ${want.percent}%.`;
    const here = p === null ? `Here: “${want.token}” is not among the candidates shown.`
      : `Here: “${want.token}” ${first ? "first" : `ranked ${at + 1}`}, at ${percent(p)}.`;
    const same = first && Math.round(100 * p) === want.percent;
    const says = weights.weights ? differenceNote(weights.weights, side) : weights.says;
    return { lesson, here, differs: same ? null : says };
  }
  const ended = cell.stop_reason === "end_turn";
  if (layout !== "template") {
    // the lesson gives no figure for the base on plain text; a base that ends the turn there is
    // still news when it is not the base model
    return ended && weights.kind !== "original" ? { lesson: "The lesson gives no figure for the base model on plain text.", here: `Here: it wrote <|im_end|> after ${count(cell.reply_ids.length, "token")}.`, differs: weights.says } : null;
  }
  const lesson = `The lesson: the base model never writes <|im_end|> and runs to the lab's cap of ${cap} tokens.`;
  const here = ended ? `Here: it wrote <|im_end|> after ${count(cell.reply_ids.length, "token")}.`
    : cell.stop_reason === "max_tokens" ? "Here too: no <|im_end|>, cut off at the cap." : "Here: stopped before either.";
  return { lesson, here, differs: ended ? weights.says : null };
}

/** What the page needs before a comparison can run, in a sentence per missing model; [] when both
 * are stored. stored: {instruct, base} (true, false, or null while the store has not said);
 * base: baseNameOf the base's source (page/weights.mjs), to name it. */
export function missingModels(stored, base = null) {
  const out = [];
  const name = base?.kind === "original" || !base || base.kind === "unknown" ? "The base model (SmolLM2-135M)" : `The base model (here ${base.says})`;
  if (stored.base === false) out.push({ model: "base", text: `${name} is not stored in this browser: the comparison needs it beside the instruct model.`, button: "Get the base model…" });
  if (stored.instruct === false) out.push({ model: "instruct", text: "The instruct model (SmolLM2-135M-Instruct) is not stored in this browser: the comparison needs it beside the base model.", button: "Get the instruct model…" });
  return out;
}

/**
 * Where one of the four is: "waiting" (computed after the ones before it), "reading" (its prompt
 * being read), "writing", "ended", "never-ran" (a stop came before its turn). slot: the run's
 * cell ({streaming, answer}); running: the run is still computing.
 */
export function cellState(slot, running) {
  const reply = slot?.answer ?? slot?.streaming;
  if (!reply) return running ? "waiting" : "never-ran";
  if (reply.stop_reason) return slot.answer && neverRan(slot.answer) ? "never-ran" : "ended";
  if (!running) return "ended";
  return reply.reply_ids.length ? "writing" : "reading"; // begun, no token yet: its prompt is read first
}

/** A cell's state in words: what it is doing now. */
export function stateSentence(state, reply, before) {
  if (state === "waiting") return before ? `Waiting: computed after ${before}.` : "Waiting for the prompt to be read.";
  if (state === "reading") {
    const p = reply.progress;
    return p?.of ? `Reading the prompt: ${p.read} of ${count(p.of, "token")}${stepParts(p)}.` : "Reading the prompt.";
  }
  if (state === "writing") return "Writing…";
  if (state === "never-ran") return "Never ran.";
  return "Ended.";
}

/**
 * How long the rest of a run takes, from what each reply took so far: {least, most, likely,
 * length, perToken, read, written} (seconds; written: tokens the four wrote), or null until a
 * reply has written a few tokens after its first. cells: the four in the order they are computed,
 * each {written, ended (it has stopped), begun, first, last} (ms: when its prompt began to
 * be read, when its first and its last token came; null before). A reply costs the reading of its
 * prompt (up to its first token: the GPU's first steps, their compiling and upload included, so
 * never divided among the tokens) and then a step a token: both are measured apart. Where each
 * reply still to write will end is not known before it does: `most` is the worst case, every one
 * running to the cap; `least`, every one ending at its next token; `likely`, every one as long as
 * the median of the replies ended so far, `length` tokens (the one under way at least a token
 * longer than it is now), null until a reply has ended.
 */
export function estimate({ cells, now, cap }) {
  let steps = 0;
  let stepMs = 0;
  let written = 0;
  const reads = [];
  for (const c of cells) {
    written += c.written;
    if (c.first == null) continue;
    if (c.begun != null) reads.push(c.first - c.begun);
    if (c.written > 1 && c.last != null) {
      steps += c.written - 1;
      stepMs += c.last - c.first;
    }
  }
  if (steps < 2 || !reads.length) return null;
  const perToken = stepMs / steps;
  const read = reads.reduce((a, b) => a + b, 0) / reads.length;
  // a cell a stop kept from starting wrote nothing: no length
  const length = median(cells.filter((c) => c.ended && c.written > 0).map((c) => c.written));
  let least = 0;
  let most = 0;
  let likely = length === null ? null : 0;
  for (const c of cells) {
    if (c.ended) continue;
    if (!c.written) { // still to read its prompt (or reading it): then its first token
      const reading = Math.max(0, read - (c.begun != null ? now - c.begun : 0));
      least += reading;
      most += reading + (cap - 1) * perToken;
      if (likely !== null) likely += reading + (length - 1) * perToken;
    } else {
      least += perToken;
      most += (cap - c.written) * perToken;
      if (likely !== null) likely += (Math.max(length, c.written + 1) - c.written) * perToken;
    }
  }
  return { least: least / 1000, most: most / 1000, likely: likely === null ? null : likely / 1000, length,
           perToken: perToken / 1000, read: read / 1000, written };
}

/** The middle of some numbers (the mean of the two middle ones where they are even), null of none. */
function median(xs) {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const duration = (s) => (s < 90 ? `${Math.max(1, Math.round(s))} s` : `${Math.round(s / 60)} min`);
const stepTime = (s) => `${s < 1 ? s.toFixed(2) : s.toFixed(1)} s`;
const tokensOf = (n) => count(Math.round(n * 10) / 10, "token");

/** The estimate in a sentence (null once nothing is left to write). cap: the cap each reply has. */
export function estimateSentence(e, cap) {
  if (!e) return "Timing the first tokens: how long the four take is estimated once a reply has written a few.";
  if (!(e.most > 0)) return null;
  const [least, most] = [duration(e.least), duration(e.most)];
  const so = `so far ${stepTime(e.perToken)} a token, ${duration(e.read)} to read a prompt`;
  if (least === most) return `About ${most} more (${so}).`;
  const bounds = `the most if no reply ends before the cap of ${cap} tokens, the least if each ends at its next token`;
  if (e.likely === null || e.likely === undefined) {
    return `Between about ${least} and ${most} more: ${bounds} (${so}); a likely figure once a reply has ended.`;
  }
  return `Likely about ${duration(e.likely)} more, between ${least} and ${most}: likely if each reply still to come is as ` +
    `long as the median of those ended so far (${tokensOf(e.length)}), ${bounds} (${so}).`;
}

// -- the DOM -----------------------------------------------------------------------------------------

function readBlock(layout, text, ids, tokens, special) {
  const names = new Set(ids.map((id, i) => (special.has(id) ? tokens[i] : null)));
  const box = el("div", { class: "tokens compare-ids", "aria-label": `The ids read with ${LAYOUT_NAMES[layout].name}` });
  chips(box, { tokens, ids, lay: null, classOf: (i) => (special.has(ids[i]) ? "special" : "") });
  return el("div", { class: "compare-layout", dataset: { layout } },
    el("h4", {}, `With ${LAYOUT_NAMES[layout].name}: `, el("b", { text: count(ids.length, "token") })),
    textWithSpecials(text, names, el("pre", { class: "prompt-text compare-read", dir: "auto" })), box);
}

/** "Both read exactly this": the text and ids of each layout, once. */
function bothRead(prompt) {
  const special = new Set(prompt.special_ids);
  return el("section", { class: "compare-both", id: "compare-both" },
    el("h3", { text: "Both models read exactly this" }),
    el("p", { class: "term", text: "The same ids go to both models: they share one tokenizer, so only the weights differ. Dark chips are special tokens." }),
    el("div", { class: "compare-reads" },
      readBlock("plain", prompt.text, prompt.plain_ids, prompt.plain_tokens, special),
      readBlock("template", prompt.template_text, prompt.template_ids, prompt.template_tokens, special)));
}

function candidates(rows) {
  if (!rows.length) return null;
  return el("table", { class: "compare-first" },
    el("caption", { text: "Its first token: the top candidates" }),
    el("tbody", {}, rows.map((r) => el("tr", { dataset: { id: r.id } },
      el("td", {}, el("span", { class: r.special ? "cand special" : "cand", text: visibleToken(r.token) })),
      el("td", { class: "num", text: r.percent })))));
}

/** The reply's count, the reply view's title: none while its prompt is read (the state line says so). */
const countLine = (reply, state) => el("p", { class: "compare-count", dataset: { n: reply.reply_ids.length }, hidden: state === "reading" },
  count(reply.reply_ids.length, "token"), state === "writing" ? ", writing…" : "");

/** The lesson's own words on what the base model does, quoted and attributed (a recorded base
 * cell that could not be recorded: site/recorded-compare.json's `lesson`). */
function lessonQuote(q) {
  if (!q?.quote) return null;
  return el("figure", { class: "lesson-quote" },
    el("blockquote", { text: `“${q.quote}”` }),
    el("figcaption", { text: `The lesson's own words (${q.source}), not a reply recorded here.` }));
}

/** One of the four. slot: the run's cell ({streaming, answer}); ctx: {limit, cap, lesson, weights,
 * names, special, running, stopped, before, why, hooks, recorded}. */
function cellView(model, layout, slot, ctx) {
  const state = cellState(slot, ctx.running);
  const reply = slot?.answer ?? slot?.streaming;
  const parts = [el("h3", {}, el("span", { class: `compare-model model-${model}`, text: headingOf(model, ctx.names) }), ` · ${LAYOUT_NAMES[layout].name}`)];
  if (slot?.notRecorded) {
    parts.push(el("p", { class: "compare-state", dataset: { state: "not-recorded" }, text: slot.notRecorded }), lessonQuote(slot.lesson));
    return el("article", { class: "compare-cell not-recorded", dataset: { model, layout, state: "not-recorded" } }, parts);
  }
  // no live region: the reading line changes with every part read (#compare-announce says each end)
  parts.push(el("p", { class: "compare-state", dataset: { state } }, stateSentence(state, reply, ctx.before)));
  if (reply && state !== "never-ran") {
    parts.push(replyView(reply, {
      title: (r) => countLine(r, cellState(slot, ctx.running)), special: ctx.special, textClass: "compare-reply",
      className: "compare-reply-view", empty: "(no text: the first token ended it)",
      why: ctx.why && slot.answer ? ctx.why : null, ...ctx.hooks,
    }));
  }
  if (reply?.stop_reason) {
    parts.push(el("p", { class: `compare-stop stop-${reply.stop_reason}`, dataset: { stop: reply.stop_reason } }, stopSentence(model, reply, ctx.limit, ctx.stopped)));
  }
  if (slot?.answer && state !== "never-ran") {
    parts.push(candidates(firstStep(slot.answer).map((r) => ({ ...r, special: ctx.special.has(r.id) }))));
    const f = lessonFigure(model, layout, slot.answer, { lesson: ctx.lesson, weights: ctx.weights[model], cap: ctx.cap });
    if (f) parts.push(el("p", { class: "note lesson-note compare-lesson", dataset: { lesson: `${model}-${layout}` } }, [f.lesson, f.here, f.differs].filter(Boolean).join(" ")));
  } else if (reply?.stop_reason && ctx.running) {
    parts.push(el("p", { class: "compare-later", text: "Its first step's candidates come once the last of the four has ended." }));
  }
  return el("article", { class: "compare-cell", dataset: { model, layout, state } }, parts);
}

/** The name of the cell before `i` in the order they are computed, for "Waiting: computed after …". */
const beforeOf = (order, i) => (i > 0 ? `the ${order[i - 1].model} model's reply to ${order[i - 1].layout === "plain" ? "the plain text" : "the chat template"}` : null);

/** What every cell of `view`'s run is drawn with. */
function runContext(view) {
  const { run } = view;
  const special = new Set([...(run.prompt?.special_ids || []), ...(view.eosId !== undefined ? [view.eosId] : [])]);
  return { limit: run.answer?.max_tokens ?? view.limit, cap: view.limit, lesson: view.lesson, weights: view.weights, names: view.names,
           special, running: Boolean(run.controller), stopped: run.stopped, why: view.why, hooks: view.hooks };
}

/** The cells in the 2x2's places: a row a layout, the models in the order opposite to the one they
 * are computed in (the base, pretraining only, on the left: where the lesson starts). */
function placed(order, cells) {
  const at = (model, layout) => cells[order.findIndex((o) => o.model === model && o.layout === layout)];
  const models = [...new Set(order.map((o) => o.model))].reverse();
  return [...new Set(order.map((o) => o.layout))].flatMap((layout) => models.map((m) => at(m, layout)).filter(Boolean));
}

const cellNode = (root, model, layout) => root.querySelector(`#compare-grid .compare-cell[data-model="${model}"][data-layout="${layout}"]`);

/**
 * Draw the comparison into `root`. view: {run (the store's compare.run, or null), recorded (a
 * recorded comparison to show instead, or null: modes/compare.mjs recordedView), limit
 * (build.json's compare_limit), lesson (the message is the lesson's), weights: {instruct, base}
 * (whoseWeights), names: {base: baseNameOf}, eosId, why ({gap} or null), hooks (the reply view's),
 * order ([{model, layout}]: the order the four are computed in)}.
 */
export function renderCompare(root, view) {
  const { run } = view;
  const parts = [el("p", { class: "about compare-about", text: `One message, two models, two layouts: ${view.names?.base?.says ?? "the base model"} and SmolLM2-135M-Instruct read exactly the same ids (shown below the four), first the text as it is, then inside the chat template. Each writes greedily (the most likely token at every step), ` +
    `and stops at <|im_end|> or at the cap of ${view.limit ?? "the site's"} tokens. The four are computed one after another.` })];
  if (!run && view.recorded) return fill(root, ...parts, ...recordedParts(view));
  if (run?.error) parts.push(el("p", { class: "error", id: "compare-error", role: "alert", text: `No comparison: ${run.error}` }));
  if (run?.restored) parts.push(el("p", { class: "note compare-restored", id: "compare-restored", text: run.answer ? "The comparison you ran before the page was reloaded, as it ended." : "The comparison that was running when the page was reloaded: what it had written, stopped there." }));
  else if (run?.stopped && !run.controller) parts.push(el("p", { class: "note compare-stopped", id: "compare-stopped", role: "status", text: `Stopped: ${run.stopped}.` }));
  if (run && !run.error) {
    const ctx = runContext(view);
    const cells = view.order.map(({ model, layout }, i) => cellView(model, layout, run.cells[model]?.[layout], { ...ctx, before: beforeOf(view.order, i) }));
    // how long the rest will take: modes/compare.mjs fills it as the tokens come
    parts.push(el("p", { class: "about compare-estimate", id: "compare-estimate", hidden: true })); // changes each token: no live region
    parts.push(el("div", { class: "compare-grid", id: "compare-grid" }, placed(view.order, cells)));
  }
  // below the 2x2: it comes a few seconds after Send (Python reads the message first), and above
  // the cells it pushed them out of view as they began
  if (run?.prompt) parts.push(bothRead(run.prompt));
  fill(root, ...parts);
}

/** One cell of the run drawn again in its place (its state changed: begun, ended); false when the
 * 2x2 is not drawn (the caller draws it all). */
export function renderCell(root, view, model, layout) {
  const old = cellNode(root, model, layout);
  if (!old || !view.run || root.querySelector("#compare-grid")?.dataset.recorded) return false;
  const i = view.order.findIndex((o) => o.model === model && o.layout === layout);
  const slot = view.run.cells[model]?.[layout];
  old.replaceWith(cellView(model, layout, slot, { ...runContext(view), before: beforeOf(view.order, i) }));
  const reply = slot?.answer ?? slot?.streaming;
  if (old.dataset.state !== "ended" && cellState(slot, Boolean(view.run.controller)) === "ended" && reply) {
    // said once, the moment it ends: which of the four, and how it ended
    announce($("compare-announce"), `${cellName(model, layout)}: ${count(reply.reply_ids.length, "token")}, ended: ${stopReasonText(reply.stop_reason)}.`);
  }
  return true;
}

/** A cell's state line brought up to its reply (a token or the prompt's progress came): false when
 * the cell is not drawn, or its state changed in a way only renderCell draws. */
export function renderCellState(root, view, model, layout) {
  const node = cellNode(root, model, layout);
  if (!node || !view.run) return false;
  const slot = view.run.cells[model]?.[layout];
  const state = cellState(slot, Boolean(view.run.controller));
  // reading and writing differ in the line alone; any other change of state redraws the cell
  const inPlace = new Set(["reading", "writing"]);
  if (node.dataset.state !== state && !(inPlace.has(node.dataset.state) && inPlace.has(state))) return false;
  const line = node.querySelector(".compare-state");
  const i = view.order.findIndex((o) => o.model === model && o.layout === layout);
  const text = stateSentence(state, slot?.answer ?? slot?.streaming, beforeOf(view.order, i));
  if (line.textContent !== text) line.textContent = text;
  node.dataset.state = line.dataset.state = state;
  return true;
}

/** What both models read, put below the 2x2 as it comes (the cells stay where they are); false
 * when the 2x2 is not drawn. */
export function renderPrompt(root, prompt) {
  const grid = root.querySelector("#compare-grid");
  if (!grid || grid.dataset.recorded) return false;
  root.querySelector("#compare-both")?.remove();
  grid.after(bothRead(prompt));
  return true;
}

/** A recorded comparison (site/recorded-compare.json's), drawn as a run that has ended, with
 * what it was recorded from and, for a base that could not be recorded, the lesson's words. */
function recordedParts(view) {
  const r = view.recorded;
  const order = view.order;
  const special = new Set([...(r.compared.prompt?.special_ids || []), r.compared.eos_id]);
  const ctx = { limit: r.compared.max_tokens, cap: view.limit, lesson: r.lesson, weights: r.weights, names: r.names, special,
                running: false, stopped: null, why: view.why, hooks: view.hooks };
  const cells = order.map(({ model, layout }) => {
    const cell = r.compared[model]?.[layout];
    const slot = cell?.recorded === false ? { notRecorded: cell.why, lesson: cell.lesson } : { streaming: null, answer: cell ?? null };
    return cellView(model, layout, slot, ctx);
  });
  const grid = placed(order, cells);
  return [
    el("section", { class: "compare-recorded-about", id: "compare-recorded" },
      el("h3", { text: "A recorded comparison: nothing to download to see it" }),
      el("p", { class: "note", text: r.about }),
      r.others.length ? el("p", { class: "compare-recorded-others" }, "Other recorded messages: ",
        ...r.others.map((o) => el("button", { type: "button", class: "compare-recorded-pick", onclick: o.pick, text: o.text }))) : null),
    el("div", { class: "compare-grid", id: "compare-grid", dataset: { recorded: "true" } }, grid),
    r.compared.prompt ? bothRead(r.compared.prompt) : null, // below the four, as a run's
  ];
}

/** Beside the message: the models the comparison still needs (missingModels), each with a
 * button to where it is downloaded (onGet(model)); nothing when both are there. */
export function renderMissing(root, missing, onGet) {
  fill(root, missing.length ? el("div", { class: "compare-missing", id: "compare-missing" }, missing.map((m) =>
    el("p", { dataset: { model: m.model } }, `${m.text} `,
      el("button", { type: "button", id: `compare-get-${m.model}`, onclick: () => onGet(m.model), text: m.button })))) : null);
}
