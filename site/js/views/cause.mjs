// Which piece a step needed (chatlens.cause's answer, `Caused`), drawn beside the step's
// attention: for each piece of what the model read, the chosen token's probability when the
// reply may not read the piece ("not read": knocked out) and when the turn is rendered without
// it ("without it": removed; a dropped turn is put back instead), and what the model would write
// then. A switch shows the same for the whole reply so far: its log-probability under each.
//
// Python computes every figure (chatlens/cause.py); this module only words and draws them. The
// sentences are pure functions, played in node (tests/page/cause.test.mjs). All text goes in as
// text nodes.

import { change, moved, percent, visibleToken } from "../lesson/terms.mjs";
import { count, el, term } from "./dom.mjs";

export { moved };

/** What each measure is and is not, one sentence each (the view says them once, above the table). */
export const MEASURES = {
  attention: "Attention: where the step read from, the mean weight of every block's heads on the piece. It says " +
    "where the model looked, not what its choice needed.",
  knocked: "Not read: the reply's positions may not read the piece, in any block (its first token excepted, where " +
    "most heads rest their weight); everything before the reply is read as it was. It says whether reading the piece " +
    "directly mattered.",
  removed: "Without it: the conversation written again through the template without the piece, the reply so far " +
    "kept. It says whether the piece mattered at all, directly or through the tokens written after it.",
};

/** A token in a sentence: quoted, whitespace made visible. */
export const quoted = (t) => `“${visibleToken(t ?? "")}”`;

/** The step's token under one measure, in a sentence: the chosen token's probability under it, and
 * what the model would write instead when another token leads. */
export function tokenSentence(answer, m) {
  const chosen = quoted(answer.chosen_token);
  const instead = m.top_id === answer.chosen_id ? "; it is still the model's choice"
    : `; it would write ${quoted(m.top_token)} instead (${percent(m.top_p)})`;
  return `${chosen} ${moved(m.p, answer.p)}${instead}.`;
}

/** How many times less (or more) likely the reply so far is under a measure: a factor, rounded
 * for reading ("7,000 times less likely"), from the difference of log-probabilities. */
export function likelier(logprob, base) {
  const d = logprob - base;
  const how = change(Math.exp(d));
  if (how === "little") return "about as likely";
  return `${timesWords(Math.exp(Math.abs(d)))} times ${how === "falls" ? "less" : "more"} likely`;
}

const SUPERSCRIPT = "⁰¹²³⁴⁵⁶⁷⁸⁹";

/** A factor as a reader takes it in: "2.7", "7,100", past a million "about 6 × 10¹¹". */
function timesWords(factor) {
  if (factor < 10) return factor.toFixed(1);
  if (factor < 1e6) return Number(factor.toPrecision(2)).toLocaleString("en-US");
  const power = Math.floor(Math.log10(factor));
  const lead = Math.round(factor / 10 ** power);
  const [m, p] = lead === 10 ? [1, power + 1] : [lead, power];
  return `about ${m} × 10${String(p).split("").map((d) => SUPERSCRIPT[Number(d)]).join("")}`;
}

/** The whole reply so far under one measure, in a sentence. */
export function replySentence(answer, m) {
  return `the reply so far is ${likelier(m.reply_logprob, answer.reply_logprob)} ` +
    `(log-probability ${m.reply_logprob.toFixed(2)}, from ${answer.reply_logprob.toFixed(2)}).`;
}

/** The reply so far an answer measures, in words: "“Aye,” and “ the”" for the whole reply's step. */
export function replySpan(answer, tokens) {
  const ids = [...answer.reply_ids.slice(0, answer.step), answer.chosen_id];
  const text = ids.map((id, k) => (k < answer.step ? tokens?.[k] : answer.chosen_token) ?? "").join("");
  return `${count(ids.length, "token")}, “${visibleToken(text.length > 60 ? `${text.slice(0, 59)}…` : text)}”`;
}

/** A piece's line under one measure (`what`: "knocked" or "removed"), for the token or the whole
 * reply so far: the sentence, or why it cannot be taken. */
export function pieceWords(answer, piece, what, whole = false) {
  const m = piece[what];
  if (!m) return piece[`${what}_why`] ?? "Not computed.";
  return whole ? replySentence(answer, m) : tokenSentence(answer, m);
}

/**
 * The figures as an element. answer: chatlens.cause's (Caused) at the step inspected; whole: its
 * answer at the reply's last step (the whole reply so far), or null until asked; options:
 * {wholeState: "none" | "computing" | "shown" | an error sentence, onWhole(show), replyTokens}.
 */
export function causeView(answer, whole, { wholeState = "none", onWhole = null, replyTokens = [] } = {}) {
  const showWhole = wholeState === "shown" && whole;
  const a = showWhole ? whole : answer;
  const heading = showWhole
    ? `With every piece read, the reply so far (${replySpan(a, replyTokens)}) has log-probability ${a.reply_logprob.toFixed(2)}.`
    : `With every piece read, the model gives ${quoted(a.chosen_token)} ${percent(a.p)}` +
      (a.top_id === a.chosen_id ? "." : `, and ${quoted(a.top_token ?? "")} leads.`);
  const rows = a.pieces.map((p) => el(
    "tr",
    { class: `cause-row kind-${p.kind}`, dataset: { piece: p.name } },
    el("th", { scope: "row", class: "cause-piece" }, p.label,
      p.start !== null ? el("span", { class: "cause-count", text: ` (${count(p.end - p.start, "token")})` }) : null),
    el("td", { class: "cause-share", text: p.attention_share === null ? "not read" : percent(p.attention_share) }),
    cell(a, p, "knocked", showWhole),
    cell(a, p, "removed", showWhole),
  ));
  return el(
    "section",
    { class: "cause", "aria-label": "Which piece the step needed", dataset: { step: answer.step } },
    el("p", { class: "cause-with", text: heading }),
    term(MEASURES.attention), term(MEASURES.knocked), term(MEASURES.removed),
    el("div", { class: "cause-scroll" }, el(
      "table",
      { class: "cause-table" },
      el("thead", {}, el("tr", {}, el("th", { text: "piece" }), el("th", { text: "attention" }),
        el("th", { text: "not read" }), el("th", { text: "without it (a dropped turn: put back)" }))),
      el("tbody", {}, rows),
    )),
    wholeSwitch(answer, wholeState, onWhole),
    el("p", { class: "cause-cost term", text: costWords(a) }),
  );
}

const COLUMNS = { knocked: "not read", removed: "without it" };

// A cell's colour says the change its sentence says (lesson/terms.mjs change; the words say it too).
const CELL_CLASSES = { falls: "cause-falls", rises: "cause-rises", little: "cause-stays" };

function cell(answer, piece, what, whole) {
  const m = piece[what];
  const how = !m ? null : change(whole ? Math.exp(m.reply_logprob - answer.reply_logprob) : m.p / answer.p);
  const cls = how === null ? "cause-none" : CELL_CLASSES[how];
  const column = piece.kind === "dropped" && what === "removed" ? "put back" : COLUMNS[what];
  return el("td", { class: `cause-cell ${cls}`, dataset: { what, p: m?.p ?? "", top: m?.top_id ?? "", logprob: m?.reply_logprob ?? "" } },
    el("span", { class: "cause-label", text: `${column}: ` }), // the column's name, where the table has no head (a phone)
    pieceWords(answer, piece, what, whole), m?.what ? el("span", { class: "cause-what", text: ` ${m.what}` }) : null);
}

function wholeSwitch(answer, state, onWhole) {
  if (!onWhole) return null;
  if (state === "computing") return el("p", { class: "cause-whole note", text: "Computing the whole reply so far…" });
  if (state === "shown") {
    return el("button", { type: "button", class: "cause-whole link", onclick: () => onWhole(false), text: `Back to ${quoted(answer.chosen_token)} alone` });
  }
  const why = state === "none" ? null : el("span", { class: "error", text: ` ${state}` });
  return el("p", { class: "cause-whole" },
    el("button", { type: "button", class: "link", onclick: () => onWhole(true), text: "The same for the whole reply so far" }),
    " (every reply token's probability, one pass a piece: slower)", why);
}

/** What the figures cost: the answer's own counts. */
export function costWords(answer) {
  return `Computed now${answer.backend ? ` (${answer.backend})` : ""}: ${count(answer.computed_tokens, "token")} run through ` +
    "for the step and each piece taken away; the cache holds what it held before.";
}
