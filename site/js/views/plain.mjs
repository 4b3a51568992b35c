// Plain-text mode's panel: the text as the model reads it with no template (its tokens, special
// tokens as chips), the next-token distribution, the greedy continuation and its stop reason,
// and beside it the same words sent the other way, as a user message through the template.

import { layout, spelled } from "./bytes.mjs";
import { count, el, fill } from "./dom.mjs";
import { replyTitle } from "./reply.mjs";
import { chips } from "./tokens.mjs";
import { drawSummary } from "./window.mjs";
import { bindWhy, candidatesTable, markNearTies, percent, whyBox } from "./why.mjs";

/** Where n tokens lie on the text their bytes spell (bytes.mjs), or null without their bytes
 * (a continuation streaming). */
const laidOut = (bytes, n) => (bytes?.length === n ? layout(spelled(bytes), bytes) : null);

/** Token chips for ids/tokens (a split character as its bytes), special ids as dark chips. */
function tokenChips(ids, tokens, lay, special, label) {
  const box = el("div", { class: "tokens plain-tokens", "aria-label": label });
  chips(box, { tokens, ids, lay, classOf: (i) => (special.has(ids[i]) ? "special" : "") });
  return box;
}

/** The text the tokens spell, its special tokens as chips (everything else as it is). */
function textWithChips(ids, tokens, bytes, special) {
  const pre = el("pre", { class: "prompt-text plain-text-view", dir: "auto" });
  const text = bytes ? spelled(bytes) : tokens.join("");
  const lay = bytes ? layout(text, bytes) : null;
  let run = "";
  const flush = () => {
    if (run) pre.append(run);
    run = "";
  };
  ids.forEach((id, i) => {
    const s = lay ? text.slice(lay.starts[i], lay.starts[i + 1]) : tokens[i];
    if (special.has(id)) {
      flush();
      pre.append(el("span", { class: "special", text: s }));
    } else run += s;
  });
  flush();
  return pre;
}

/** The continuation (or the reply): its text, its tokens with their candidates, its stop reason.
 * out: {ids, tokens, bytes, text, stop_reason, top_k, top_k_tokens, top_k_bytes} (a reply in
 * flight has no stop_reason yet). */
function continuation(out, special, gap, what) {
  if (!out) return null;
  const writing = !out.stop_reason;
  const box = el("div", { class: "tokens reply-tokens" });
  const tokens = out.ids.map((_, i) => out.tokens[i] ?? "");
  chips(box, { tokens, ids: out.ids, lay: laidOut(out.bytes, out.ids.length), classOf: (i) => `kind-reply${special.has(out.ids[i]) ? " special" : ""}` });
  box.querySelectorAll(".tok").forEach((chip, i) => (chip.dataset.step = i));
  const parts = [
    replyTitle(what, out.ids.length, out.stop_reason, writing),
    el("div", { class: "reply-text", dir: "auto", text: out.text || (writing ? "" : "(no text: the first token ended it)") }),
    box,
  ];
  if (!writing && out.top_k?.length === out.ids.length) {
    const why = whyBox("Point at a token (or tap it) to see the candidates the model weighed at that step.");
    bindWhy(box, why, out, { tokens: out.tokens, ids: out.ids, special, gap });
    markNearTies(box, out.top_k, gap);
    parts.push(why);
  }
  return el("div", { class: "reply plain-continuation" }, parts);
}

function nextToken(out, special, gap) {
  if (!out?.top_k?.length) return null;
  return el(
    "div",
    { class: "next-token" },
    el("div", { class: "prediction-title", text: "The next token: the model's distribution" }),
    candidatesTable(out.top_k[0], out.top_k_tokens[0], { chosen: out.ids[0], special, gap, bytes: out.top_k_bytes?.[0] }),
  );
}

// What the lesson reports for its France experiment, on the original bf16 weights: the first
// token's probability with no template (<|im_end|>) and inside it ("The").
export const LESSON_SHARES = { plain: { token: "<|im_end|>", percent: 73 }, chat: { token: "The", percent: 83 } };

/** The system prompt a chat-side record read, in words, when it is not the template's default
 * (the one the lesson's run read): "the Today's date system prompt (“You are …”)"; else null. */
function otherSystem(record, presets = []) {
  if (!record || record.system === null || record.system === undefined) return null;
  const label = presets.find((p) => p.name === record.preset && p.name !== "custom")?.label;
  return `${label ? `the ${label} system prompt` : "your own system prompt"} (“${record.system}”)`;
}

/** Beside the distribution of the lesson's text: what the lesson reports, what this run gives,
 * and why they differ, in one sentence. lesson: weightsOf(the source) or null. On the chat side
 * the lesson's run read the template's default system prompt: a run under another one is another
 * experiment, and the note says which and offers the lesson's (onLesson). */
function lessonNote(out, side, lesson, { record = null, presets = [], onLesson = null } = {}) {
  if (!lesson || !out?.top_k?.length) return null;
  const want = LESSON_SHARES[side];
  const at = out.top_k_tokens[0].indexOf(want.token);
  const share = at >= 0 ? percent(out.top_k[0][at][2]) : null;
  const other = side === "chat" ? otherSystem(record, presets) : null;
  if (other) {
    const got = share ? `this reply gives it ${share}` : "in this reply it is not among the candidates shown";
    return el("p", { class: "note lesson-note", dataset: { lesson: side, system: "other" } },
      `The lesson's ${want.percent}% for “${want.token}” is with the template's default system prompt; this reply read ${other} instead, ` +
      `so it is another experiment (${got}). `,
      onLesson ? el("button", { type: "button", class: "lesson-run", onclick: onLesson, text: "Send it as the lesson did" }) : null);
  }
  const got = share ? `this model gives it ${share}` : "here it is not among the candidates shown";
  const why = lesson.kind === "copy"
    ? `: these are ${lesson.bits ? `${lesson.bits}-bit` : "quantized"} weights (${lesson.quant || lesson.name}), and rounding the weights shifts every probability`
    : lesson.kind === "original"
      ? ", on the same original weights: what differs is only the arithmetic's rounding"
      : ": other weights give other probabilities";
  const same = side === "chat" && record ? ", with the same system prompt (the template's default)" : "";
  return el("p", { class: "note lesson-note", dataset: { lesson: side } },
    `The lesson, on the original bf16 weights, reports ${want.percent}% for “${want.token}” here; ${got}${same}${why}.`);
}

function column(title, about, body) {
  return el("section", { class: "plain-col" }, el("h3", { text: title }), el("p", { class: "term", text: about }), ...body);
}

/**
 * Draw plain-text mode into `root`. view: {tokens: tokenize's answer or null, plain: {result |
 * streaming | error}, chat: {record | streaming | error}, gap, eos, lesson, presets, onLesson}; lesson
 * (weightsOf the source) when the text is the lesson's, for the note beside its numbers; presets
 * (the settings' [{name, label}]) name a system prompt; onLesson() sends the words as the lesson did.
 * Each side's `result` holds ids, tokens, text, stop_reason, top_k, top_k_tokens.
 */
export function renderPlain(root, view) {
  const { tokens, plain, chat, gap } = view;
  const special = new Set([...(tokens?.special_ids || []), ...(chat?.record?.special_ids || [])]);
  if (view.eos !== undefined) special.add(view.eos);
  const left = [];
  if (tokens) {
    left.push(
      el("div", { class: "plain-count", dataset: { stat: "plain-tokens" } }, el("b", { text: tokens.prompt_ids.length }), " tokens, nothing added"),
      textWithChips(tokens.prompt_ids, tokens.prompt_tokens, tokens.prompt_bytes, special),
      tokenChips(tokens.prompt_ids, tokens.prompt_tokens, laidOut(tokens.prompt_bytes, tokens.prompt_ids.length), special, "The plain text's tokens"),
    );
  }
  left.push(...sideBody(plain, special, gap, "The continuation", lessonNote(plain?.result, "plain", view.lesson)));
  const right = [];
  const rec = chat?.record;
  if (rec) {
    right.push(
      el("div", { class: "plain-count", dataset: { stat: "chat-tokens" } }, el("b", { text: rec.used }), " tokens: the template's, around your words"),
      textWithChips(rec.prompt_ids, rec.prompt_tokens, rec.prompt_bytes, new Set(rec.special_ids)),
    );
  }
  // the reply's bytes are the record's (reply_bytes, top_k_bytes)
  const reply = chat?.reply && { bytes: rec?.reply_bytes, top_k_bytes: rec?.top_k_bytes, ...chat.reply };
  const chatNote = lessonNote(reply, "chat", view.lesson, { record: rec, presets: view.presets, onLesson: view.onLesson });
  right.push(...sideBody(chat && { ...chat, result: reply }, special, gap, "The reply", chatNote));
  if (!chat) right.push(el("p", { class: "note", text: "“Send the same words as a chat message” puts them through the template, as a user message, and shows what the model does then." }));
  drawSummary(null, tokens ? `${count(tokens.prompt_ids.length, "token")}, no template` : "");
  fill(root, 
    el("p", { class: "caption", id: "reads-caption", text: "Plain text: what the model reads with no template around it" }),
    el(
      "div",
      { class: "plain-compare" },
      column("As plain text", "Your text is all the model reads: no system prompt, no <|im_start|>, no header for a reply.", left),
      column("As a chat message", "The same words through the chat template: a user message, then the header of the reply the model is to write.", right),
    ),
  );
}

function sideBody(side, special, gap, what, note = null) {
  if (!side) return [];
  if (side.error) return [el("p", { class: "error", text: side.error })];
  const out = side.result || side.streaming;
  if (!out) return [el("p", { class: "note", text: "Computing…" })];
  return [nextToken(side.result, special, gap), note, continuation(out, special, gap, what)].filter(Boolean);
}
