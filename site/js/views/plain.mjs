// Plain-text mode's panel: the text as the model reads it with no template (its tokens, special
// tokens as chips), the next-token distribution, the greedy continuation and its stop reason,
// and beside it the same words sent the other way, as a user message through the template.

import { layout, spelled } from "./bytes.mjs";
import { count, el, fill } from "./dom.mjs";
import { differenceNote, LESSON_SHARES } from "./lessonfigures.mjs";
import { replyView } from "./reply.mjs";
import { chips } from "./tokens.mjs";
import { drawSummary } from "./window.mjs";
import { candidatesTable, percent } from "./why.mjs";

export { LESSON_SHARES };

/** Where n tokens lie on the text their bytes spell (bytes.mjs), or null without their bytes. */
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

const HINT = "Point at a token (or tap it) to see the candidates the model weighed at that step.";

/** The continuation (or the reply) as the reply view draws it: its title, text, a chip a token
 * with its candidates, its stop reason. reply: a reply so far, or the answer (a Continuation, a
 * TurnRecord: the same reply_* fields). */
function continuation(reply, special, gap, what, hooks) {
  return replyView(reply, { what, className: "plain-continuation", special, why: { gap, hint: HINT }, ...hooks,
                            empty: "(no text: the first token ended it)" });
}

function nextToken(out, special, gap) {
  if (!out?.top_k?.length) return null;
  return el(
    "div",
    { class: "next-token" },
    el("div", { class: "prediction-title", text: "The next token: the model's distribution" }),
    candidatesTable(out.top_k[0], out.top_k_tokens[0], { chosen: out.reply_ids[0], special, gap, bytes: out.top_k_bytes?.[0] }),
  );
}

/** The system prompt a chat-side record read, in words, when it is not the template's default
 * (the one the lesson's run read): "the Today's date system prompt (“You are …”)"; else null. */
function otherSystem(record, presets = []) {
  if (!record || record.system === null || record.system === undefined) return null;
  const label = presets.find((p) => p.name === record.preset && p.name !== "custom")?.label;
  return `${label ? `the ${label} system prompt` : "your own system prompt"} (“${record.system}”)`;
}

/** Beside the distribution of the lesson's text: what the lesson reports, what this run gives,
 * and what is known of why they differ (lessonfigures.mjs). lesson: weightsOf(the source) or
 * null. On the chat side the lesson's run read the template's default system prompt: a run
 * under another one is another experiment, and the note says which and offers the lesson's
 * (onLesson). out: the side's answer (a Continuation, or the TurnRecord: `record`). */
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
  const same = side === "chat" && record?.system === null ? ", with the same system prompt (the template's default)" : "";
  return el("p", { class: "note lesson-note", dataset: { lesson: side } },
    `The lesson, on the original bf16 weights, reports ${want.percent}% for “${want.token}” here; ${got}${same}. ${differenceNote(lesson, side, { these: true })}`);
}

function column(title, about, body) {
  return el("section", { class: "plain-col" }, el("h3", { text: title }), el("p", { class: "term", text: about }), ...body);
}

/**
 * Draw plain-text mode into `root`. view: {tokens: tokenize's answer or null, plain, chat: each a
 * side (page/state/shapes.mjs slotOf: {streaming, answer, error}; the plain side's answer a
 * Continuation, the chat side's the TurnRecord), gap, eos, lesson, presets, onLesson, hooks};
 * lesson (weightsOf the source) when the text is the lesson's, for the note beside its numbers;
 * presets (the settings' [{name, label}]) name a system prompt; onLesson() sends the words as the
 * lesson did; hooks: the reply view's ({onStep, onCandidate}).
 */
export function renderPlain(root, view) {
  const { tokens, plain, chat, gap, hooks = {} } = view;
  const rec = chat?.answer ?? null;
  const special = new Set([...(tokens?.special_ids || []), ...(rec?.special_ids || [])]);
  if (view.eos !== undefined) special.add(view.eos);
  const left = [];
  if (tokens) {
    left.push(
      el("div", { class: "plain-count", dataset: { stat: "plain-tokens" } }, el("b", { text: tokens.prompt_ids.length }), " tokens, nothing added"),
      textWithChips(tokens.prompt_ids, tokens.prompt_tokens, tokens.prompt_bytes, special),
      tokenChips(tokens.prompt_ids, tokens.prompt_tokens, laidOut(tokens.prompt_bytes, tokens.prompt_ids.length), special, "The plain text's tokens"),
    );
  }
  left.push(...sideBody(plain, special, gap, "The continuation", lessonNote(plain?.answer, "plain", view.lesson), hooks));
  const right = [];
  if (rec?.prompt_ids) { // the record of what the template made of the words (an answer without one: its reply alone)
    right.push(
      el("div", { class: "plain-count", dataset: { stat: "chat-tokens" } }, el("b", { text: rec.used }), " tokens: the template's, around your words"),
      textWithChips(rec.prompt_ids, rec.prompt_tokens, rec.prompt_bytes, new Set(rec.special_ids)),
    );
  }
  const chatNote = lessonNote(rec, "chat", view.lesson, { record: rec, presets: view.presets, onLesson: view.onLesson });
  right.push(...sideBody(chat, special, gap, "The reply", chatNote, hooks));
  if (!asked(chat)) right.push(el("p", { class: "note", text: "“Send the same words as a chat message” puts them through the template, as a user message, and shows what the model does then." }));
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

const asked = (side) => Boolean(side && (side.streaming || side.answer || side.error));

function sideBody(side, special, gap, what, note, hooks) {
  if (!asked(side)) return [];
  if (side.error) return [el("p", { class: "error", text: side.error })];
  const reply = side.answer ?? side.streaming;
  return [nextToken(side.answer, special, gap), note, continuation(reply, special, gap, what, hooks)].filter(Boolean);
}
