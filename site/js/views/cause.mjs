// Which piece a step needed (chatlens.cause's answer, `Caused`), drawn beside the step's
// attention: for each piece of what the model read, the chosen token's probability when the
// reply may not read the piece ("not read": knocked out) and when the turn is rendered without
// it ("without it": removed; a dropped turn is put back instead), and what the model would write
// then. A switch shows the same for the whole reply so far: its log-probability under each.
//
// Python computes every figure (chatlens/cause.py); this module only words and draws them. The
// sentences are pure functions, played in node (tests/page/cause.test.mjs). All text goes in as
// text nodes.

import { change, likelier, moved, percent, visibleToken } from "../lesson/terms.mjs";
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
 * Where attention and need disagree at a step (or over the whole reply, `whole`): the piece the
 * step read most (attention_share, the first token left out) against the one whose knockout (the
 * measure of what reading a piece directly did; else its removal) moved the chosen token or the
 * reply most, when they differ and the most read one's moves it little: one sentence with both
 * figures, or null.
 */
export function readVsNeeded(answer, whole = false) {
  const measure = (p) => p.knocked ?? p.removed;
  const effect = (p) => (whole ? Math.exp(measure(p).reply_logprob - answer.reply_logprob) : measure(p).p / answer.p);
  const read = answer.pieces.filter((p) => p.attention_share !== null && measure(p) && p.kind !== "together");
  if (read.length < 2) return null;
  const most = read.reduce((a, b) => (b.attention_share > a.attention_share ? b : a));
  const needed = read.reduce((a, b) => (effect(b) < effect(a) ? b : a));
  if (most === needed || change(effect(most)) !== "little" || change(effect(needed)) !== "falls") return null;
  const how = (p) => (measure(p) === p.knocked ? "not read" : "without it");
  const fig = (p) => (whole ? `the reply so far is ${likelier(measure(p).reply_logprob, answer.reply_logprob)}`
    : `${quoted(answer.chosen_token)} ${moved(measure(p).p, answer.p)}`);
  return `${most.label} holds ${percent(most.attention_share)} of the step's attention and, ${how(most)}, ${fig(most)}; ` +
    `${needed.label}, with ${percent(needed.attention_share)} of the attention, ${how(needed)}: ${fig(needed)}. ` +
    "Where a step looks is not what it needs.";
}

/**
 * The figures as an element. answer: chatlens.cause's (Caused) at the step inspected; whole: its
 * answer at the reply's last step (the whole reply so far), or null until asked; options:
 * {wholeState: "none" | "computing" | "shown" | an error sentence, onWhole(show), replyTokens,
 * pairs (two pieces taken away together: each a CausePiece of its own answer), onPair(name),
 * guessFirst, guess (a piece's name, or null: not yet), onGuess(name), onGuessFirst(on)}.
 */
export function causeView(answer, whole, { wholeState = "none", onWhole = null, replyTokens = [], pairs = [], onPair = null,
                                            guessFirst = false, guess = null, onGuess = null, onGuessFirst = null } = {}) {
  const showWhole = wholeState === "shown" && whole;
  const a = showWhole ? whole : answer;
  const heading = showWhole
    ? `With every piece read, the reply so far (${replySpan(a, replyTokens)}) has log-probability ${a.reply_logprob.toFixed(2)}.`
    : `With every piece read, the model gives ${quoted(a.chosen_token)} ${percent(a.p)}` +
      (a.top_id === a.chosen_id ? "." : `, and ${quoted(a.top_token ?? "")} leads.`);
  const guessSwitch = onGuessFirst ? el("label", { class: "cause-guess-first" },
    el("input", { type: "checkbox", id: "guess-first", checked: guessFirst, onchange: (e) => onGuessFirst(e.target.checked) }),
    " Guess first") : null;
  if (guessFirst && guess === null) {
    return el("section", { class: "cause", "aria-label": "Which piece the step needed", dataset: { step: answer.step } },
      el("p", { class: "cause-with", text: heading }), guessSwitch, guessForm(a, showWhole, onGuess));
  }
  const dropped = a.pieces.some((p) => p.kind === "dropped");
  const rows = [...a.pieces, ...pairs].map((p) => el(
    "tr",
    { class: `cause-row kind-${p.kind}${guess === p.name ? " guessed" : ""}`, dataset: { piece: p.name } },
    el("th", { scope: "row", class: "cause-piece" }, p.label,
      p.start !== null ? el("span", { class: "cause-count", text: ` (${count(p.count ?? p.end - p.start, "token")})` }) : null,
      guess === p.name ? el("span", { class: "cause-guess", text: " your guess" }) : null),
    el("td", { class: "cause-share" }, el("span", { class: "cause-label", text: "attention: " }),
      p.attention_share === null ? "not read" : percent(p.attention_share)),
    cell(a, p, "knocked", showWhole),
    cell(a, p, "removed", showWhole),
  ));
  const said = readVsNeeded(a, Boolean(showWhole));
  return el(
    "section",
    { class: "cause", "aria-label": "Which piece the step needed", dataset: { step: answer.step } },
    el("p", { class: "cause-with", text: heading }),
    guessSwitch,
    term(MEASURES.attention), term(MEASURES.knocked), term(MEASURES.removed),
    el("div", { class: "cause-scroll" }, el(
      "table",
      { class: "cause-table" },
      el("thead", {}, el("tr", {}, el("th", { text: "piece" }), el("th", { text: "attention (the first token left out)" }),
        el("th", { text: "not read" }), el("th", { text: dropped ? "without it (a dropped turn: put back)" : "without it" }))),
      el("tbody", {}, rows),
    )),
    said ? el("p", { class: "cause-disagree", text: said }) : null,
    onPair ? pairForm(a, onPair) : null,
    wholeSwitch(answer, wholeState, onWhole),
    el("p", { class: "cause-cost term", text: costWords(a) }),
  );
}

/** Before the figures (Guess first): which piece the learner thinks the token, or the reply, needed most. */
function guessForm(answer, whole, onGuess) {
  const pieces = answer.pieces.filter((p) => p.removed || p.knocked);
  return el("form", { class: "cause-guess-form", onsubmit: (e) => {
    e.preventDefault();
    const chosen = e.currentTarget.querySelector("input:checked");
    if (chosen) onGuess?.(chosen.value);
  } },
  el("p", { text: whole ? "Guess first: without which piece would the reply so far be least likely?"
    : `Guess first: without which piece would ${quoted(answer.chosen_token)} be least likely?` }),
  pieces.map((p) => el("label", { class: "cause-guess-choice" }, el("input", { type: "radio", name: "cause-guess", value: p.name }), ` ${p.label}`)),
  el("button", { type: "submit", text: "Show the figures" }));
}

/** Two pieces taken away together, on request: a single knockout can understate a piece when
 * another carries the same thing (self-repair). */
function pairForm(answer, onPair) {
  const pieces = answer.pieces.filter((p) => p.kind !== "dropped" && p.kind !== "together" && (p.knocked || p.removed));
  if (pieces.length < 2) return null;
  const pick = (id, at) => el("select", { id, "aria-label": at ? "The second piece" : "The first piece" },
    pieces.map((p, i) => el("option", { value: p.name, selected: i === at, text: p.label })));
  const a = pick("pair-a", 0);
  const b = pick("pair-b", 1);
  return el("p", { class: "cause-pair" }, "Two pieces together: ", a, " and ", b, " ",
    el("button", { type: "button", id: "pair-ask", onclick: () => a.value !== b.value && onPair(`${a.value}+${b.value}`),
                   text: "Take both away" }),
    el("span", { class: "term", text: " (a piece knocked out alone can seem not needed when another carries the same thing)" }));
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
