// The comparison's panel: one message, read by the base model and the instruct model, each in two
// layouts (the text as it is, and the chat template around it). Above the 2x2, once, the exact
// text and ids both read; in each cell the reply as it streams (tokens appended, not redrawn),
// why it stopped, and the first step's candidates beside the lesson's figures.
//
// The pure parts (the sentences, the lesson's figures against this copy's) hold no DOM: node
// tests play them (tests/page/compare.test.mjs).

import { count, el, fill } from "./dom.mjs";
import { LESSON_SHARES } from "./plain.mjs";
import { chips } from "./tokens.mjs";
import { percent } from "./why.mjs";

export const MODEL_NAMES = { instruct: "Instruct", base: "Base" };
export const LAYOUT_NAMES = { plain: "plain text", template: "the chat template" };
const LESSON_SIDE = { plain: "plain", template: "chat" }; // views/plain.mjs's LESSON_SHARES keys
const TOP_SHOWN = 5;

/** Why one of the four stopped, in words. cell: the answer's ({reply_ids, stop_reason}); limit:
 * the cap the run had (the answer's max_tokens). */
export function stopSentence(model, cell, limit) {
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
  if (cell.stop_reason === "stopped") return `Stopped after ${n}, before the model ended it.`;
  return "Still writing…";
}

/** The first step's best candidates: [{id, token, p, percent}], best first (at most `n`). A
 * cell's top_k holds each step's rows (a Reply's); the first step's say why it starts as it does. */
export function firstStep(cell, n = TOP_SHOWN) {
  const rows = cell?.top_k?.[0];
  if (!rows?.length) return [];
  return rows.slice(0, n).map(([id, , p], i) => ({ id, token: cell.top_k_tokens?.[0]?.[i] ?? "", p, percent: percent(p) }));
}

/**
 * Which weights a model's replies come from, for the sentence where this copy's figures differ
 * from the lesson's: {kind: "copy" | "original" | "stand-in" | "other", says}. instruct: weightsOf
 * the page's source (page/weights.mjs); base: the base's source (downloads.base()'s source), or
 * null when unknown.
 */
export function whoseWeights(model, { instruct = null, base = null } = {}) {
  if (model === "base") {
    if (!base) return { kind: "other", says: "the base model's weights here are not known to be the lesson's" };
    if (base.manifest?.stand_in) return { kind: "stand-in", says: `the base here is a stand-in (${base.label}), not SmolLM2-135M's weights, so its figures say nothing about the real base model` };
    if (base.origin === "hub") return { kind: "original", says: "the weights are the same original ones, and only the arithmetic's rounding differs" };
    return { kind: "other", says: `the base here comes from ${base.label || "another copy"}, which may not be the original weights` };
  }
  const w = instruct || { kind: "unknown" };
  if (w.kind === "copy") return { kind: "copy", says: `this copy runs ${w.bits ? `a ${w.bits}-bit` : "a quantized"} copy of the weights (${w.quant || w.name}), and rounding the weights shifts every probability` };
  if (w.kind === "original") return { kind: "original", says: "the weights are the same original ones, and only the arithmetic's rounding differs" };
  return { kind: "other", says: "other weights give other probabilities" };
}

/**
 * The lesson's figure for one of the four beside this copy's, when the message is the lesson's
 * (`lesson` true; else null): {lesson, here, differs} sentences (differs null when they agree).
 * weights: whoseWeights's answer for the model; cap: the lab's cap (build.json's compare_limit,
 * the lesson's 48).
 */
export function lessonFigure(model, layout, cell, { lesson: isLesson, weights, cap }) {
  if (!cell || !isLesson) return null;
  if (model === "instruct") {
    const want = LESSON_SHARES[LESSON_SIDE[layout]];
    const at = (cell.top_k_tokens?.[0] || []).indexOf(want.token);
    const p = at >= 0 ? cell.top_k[0][at][2] : null;
    const first = at === 0;
    const lesson = `The lesson: “${want.token}” first, at ${want.percent}%.`;
    const here = p === null ? `Here: “${want.token}” is not among the candidates shown.`
      : `Here: “${want.token}” ${first ? "first" : `ranked ${at + 1}`}, at ${percent(p)}.`;
    const same = first && Math.round(100 * p) === want.percent;
    return { lesson, here, differs: same ? null : `They differ because ${weights.says}.` };
  }
  if (layout !== "template") return null; // the lesson gives no figure for the base on plain text
  const lesson = `The lesson: the base model never writes <|im_end|> and runs to the lab's cap of ${cap} tokens.`;
  const ended = cell.stop_reason === "end_turn";
  const here = ended ? `Here: it wrote <|im_end|> after ${count(cell.reply_ids.length, "token")}.`
    : cell.stop_reason === "max_tokens" ? "Here too: no <|im_end|>, cut off at the cap." : "Here: stopped before either.";
  return { lesson, here, differs: ended ? `They differ because ${weights.says}.` : null };
}

/** What the page needs before a comparison can run, in a sentence per missing model; [] when both
 * are stored. stored: {instruct, base} (true, false, or null while the store has not said). */
export function missingModels(stored) {
  const out = [];
  if (stored.base === false) out.push({ model: "base", text: "The base model (SmolLM2-135M) is not stored in this browser: the comparison needs it beside the instruct model.", button: "Get the base model…" });
  if (stored.instruct === false) out.push({ model: "instruct", text: "The instruct model (SmolLM2-135M-Instruct) is not stored in this browser: the comparison needs it beside the base model.", button: "Get the instruct model…" });
  return out;
}

// -- the DOM -----------------------------------------------------------------------------------------

/** A text with its special tokens (the strings of `specials`) drawn as chips, the rest as it is. */
function textWithSpecials(text, specials, pre = el("pre", { class: "prompt-text compare-read", dir: "auto" })) {
  const names = [...specials].filter(Boolean).sort((a, b) => b.length - a.length);
  if (!names.length) return fill(pre, text);
  const re = new RegExp(names.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "g");
  let at = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > at) pre.append(text.slice(at, m.index));
    pre.append(el("span", { class: "special", text: m[0] }));
    at = m.index + m[0].length;
  }
  if (at < text.length) pre.append(text.slice(at));
  return pre;
}

function readBlock(layout, text, ids, tokens, special) {
  const names = new Set(ids.map((id, i) => (special.has(id) ? tokens[i] : null)));
  const box = el("div", { class: "tokens compare-ids", "aria-label": `The ids read with ${LAYOUT_NAMES[layout]}` });
  chips(box, { tokens, ids, lay: null, classOf: (i) => (special.has(ids[i]) ? "special" : "") });
  return el("div", { class: "compare-layout", dataset: { layout } },
    el("h4", {}, `With ${LAYOUT_NAMES[layout]}: `, el("b", { text: count(ids.length, "token") })),
    textWithSpecials(text, names), box);
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
      el("td", {}, el("span", { class: r.special ? "cand special" : "cand", text: r.token.replace(/\n/g, "\u21b5").replace(/ /g, "\u00b7") })),
      el("td", { class: "num", text: r.percent })))));
}

const countLine = (n) => el("p", { class: "compare-count", dataset: { n } }, count(n, "token"));

/** One of the four. c: the run's cell ({ids, tokens, text, cell}); ctx: {limit, cap, lesson, weights, special, writing}. */
function cellView(model, layout, c, ctx) {
  const done = c?.cell;
  // the reply with the special tokens it wrote as chips (the base writes <|im_start|> as a word)
  const ids = done ? done.reply_ids : c?.ids ?? [];
  const tokens = done ? done.reply_tokens ?? [] : c?.tokens ?? [];
  const names = new Set(ids.map((id, i) => (ctx.special.has(id) ? tokens[i] : null)));
  const reply = textWithSpecials(done ? done.reply_text : c?.text ?? "", names, el("pre", { class: "compare-reply", dir: "auto" }));
  const parts = [
    el("h3", {}, el("span", { class: `compare-model model-${model}`, text: MODEL_NAMES[model] }), ` · ${LAYOUT_NAMES[layout]}`),
    reply,
    countLine(done ? done.reply_ids.length : c?.ids.length ?? 0),
  ];
  if (done) {
    parts.push(el("p", { class: `compare-stop stop-${done.stop_reason}`, dataset: { stop: done.stop_reason } }, stopSentence(model, done, ctx.limit)));
    if (!done.reply_text && done.stop_reason === "end_turn") reply.textContent = "(no text: the first token ended it)";
    parts.push(candidates(firstStep(done).map((r) => ({ ...r, special: ctx.special.has(r.id) }))));
    const f = lessonFigure(model, layout, done, { lesson: ctx.lesson, weights: ctx.weights[model], cap: ctx.cap });
    if (f) parts.push(el("p", { class: "note lesson-note compare-lesson", dataset: { lesson: `${model}-${layout}` } }, [f.lesson, f.here, f.differs].filter(Boolean).join(" ")));
  } else if (ctx.writing) parts.push(el("p", { class: "compare-stop", text: "Writing…" }));
  return el("article", { class: "compare-cell", dataset: { model, layout } }, parts);
}

/**
 * Draw the comparison into `root`. view: {run (the store's compare.run, or null), limit (build.json's compare_limit), lesson (the message is the
 * lesson's), weights: {instruct, base} (whoseWeights), eosId}.
 */
export function renderCompare(root, view) {
  const { run } = view;
  const parts = [el("p", { class: "about compare-about", text: "One message, two models, two layouts: the base model (pretraining only) and the instruct model read exactly the same ids, first the text as it is, then inside the chat template. Each writes greedily (the most likely token at every step), " +
    `and stops at <|im_end|> or at the cap of ${view.limit ?? "the site's"} tokens.` })];
  if (run?.error) parts.push(el("p", { class: "error", id: "compare-error", role: "alert", text: `No comparison: ${run.error}` }));
  if (run?.prompt) parts.push(bothRead(run.prompt));
  if (run && !run.error) {
    const special = new Set([...(run.prompt?.special_ids || []), ...(view.eosId !== undefined ? [view.eosId] : [])]);
    const ctx = { limit: run.answer?.max_tokens ?? view.limit, cap: view.limit, lesson: view.lesson, weights: view.weights, special, writing: !run.answer };
    parts.push(el("div", { class: "compare-grid", id: "compare-grid" },
      ["plain", "template"].flatMap((layout) => ["base", "instruct"].map((model) => cellView(model, layout, run.cells[model][layout], ctx)))));
  }
  fill(root, ...parts);
}

/** Beside the message: the models the comparison still needs (missingModels), each with a
 * button to where it is downloaded (onGet(model)); nothing when both are there. */
export function renderMissing(root, missing, onGet) {
  fill(root, missing.length ? el("div", { class: "compare-missing", id: "compare-missing" }, missing.map((m) =>
    el("p", { dataset: { model: m.model } }, `${m.text} `,
      el("button", { type: "button", id: `compare-get-${m.model}`, onclick: () => onGet(m.model), text: m.button })))) : null);
}

/** A token of one cell arrived: its text appended to the reply (a special token's as a chip),
 * its count raised (no redraw). special: the special ids (the prompt's). */
export function appendToken(root, { model, layout, token }, n, special = new Set()) {
  const cell = root.querySelector(`.compare-cell[data-model="${model}"][data-layout="${layout}"]`);
  if (!cell) return false;
  cell.querySelector(".compare-reply").append(special.has(token.id) ? el("span", { class: "special", text: token.text }) : token.text);
  cell.querySelector(".compare-count").replaceWith(countLine(n));
  return true;
}
