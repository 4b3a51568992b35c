// Which turn each reply needed (chatlens.needs's answer, `Needed`): a matrix with a row for each
// assistant reply of the conversation and a column for each piece a reply read (the system
// prompt, each message of the conversation, the header, the groups: every earlier reply, every
// earlier turn), each cell the change in that reply's log-probability with the piece removed (and
// not read, when asked), in all and a token. A dropped turn is put back, in its messages' columns.
// A cell opens that turn's token strip (views/strip.mjs) for its piece.
//
// Python computes every figure; this module only places and words them (a difference of two of
// the answer's log-probabilities, and its share a token). The pure parts (columnsOf, cellOf,
// rowSentence) are played in node (tests/page/needs.test.mjs).

import { change, likelier, percent } from "../lesson/terms.mjs";
import { count, el, term } from "./dom.mjs";
import { band, factorWords } from "./strip.mjs";

/** Which column a piece of a turn falls in: "system", "m<i>" (message i of the conversation),
 * "header", "replies", "history", or its own name (two together). A dropped turn: each of its
 * messages' columns. */
export function columnKeys(piece) {
  if (piece.kind === "system" || piece.kind === "default_system") return ["system"];
  if (piece.kind === "header" || piece.kind === "replies" || piece.kind === "history") return [piece.kind];
  if (piece.kind === "together" || !piece.messages?.length) return [piece.name];
  return piece.messages.map((i) => `m${i}`);
}

/** The matrix's columns, in order: [{key, label}], from the answer and the conversation's messages. */
export function columnsOf(needed, messages) {
  const keys = new Set(needed.turns.flatMap((t) => t.pieces.flatMap(columnKeys)));
  const turnOf = (i) => messages.slice(0, i + 1).filter((m) => m.role === "user").length;
  const cols = [];
  if (keys.has("system")) cols.push({ key: "system", label: "system prompt" });
  messages.forEach((m, i) => {
    if (keys.has(`m${i}`)) cols.push({ key: `m${i}`, label: `turn ${turnOf(i)} · ${m.role === "user" ? "your message" : m.role}` });
  });
  for (const [key, label] of [["header", "generation header"], ["replies", "every earlier reply"], ["history", "every earlier turn"]]) {
    if (keys.has(key)) cols.push({ key, label });
  }
  for (const p of needed.turns.flatMap((t) => t.pieces)) { // two together, or a piece of no message: a column of its own
    for (const key of columnKeys(p)) if (keys.has(key) && !cols.some((c) => c.key === key)) cols.push({ key, label: p.label });
  }
  return cols;
}

/** One turn's figures under one piece: {piece, removed, knocked}, each {delta, perToken, ratio,
 * how, band} (delta: the reply's log-probability under it minus with every piece read) or null
 * with the piece's why. */
export function cellOf(turn, piece) {
  const n = turn.reply_ids.length;
  const one = (m) => {
    if (!m) return null;
    const delta = m.reply_logprob - turn.reply_logprob;
    return { delta, perToken: delta / n, ratio: Math.exp(delta), how: change(Math.exp(delta)), band: band(Math.exp(delta / n)) };
  };
  return { piece, removed: one(piece.removed), knocked: one(piece.knocked) };
}

const signed = (x, digits = 1) => `${x < 0 ? "−" : "+"}${Math.abs(x).toFixed(digits)}`;

/** A measure's figures as a cell reads them: "−10.9 (−0.42 a token)". */
export const deltaWords = (f) => `${signed(f.delta)} (${signed(f.perToken, 2)} a token)`;

/** The reply named in a row: "reply 3, “I'm Sarah. I'm here…” (26 tokens)". */
export function replyName(turn) {
  const text = turn.reply_tokens.join("").replace(/<\|im_end\|>$/, "").trim();
  return `reply ${turn.turn + 1}, “${text.length > 40 ? `${text.slice(0, 39)}…` : text}” (${count(turn.reply_ids.length, "token")})`;
}

/** A cell in a sentence, for its button's name: "reply 3 without turn 1 · assistant: 53,000 times
 * less likely (−10.9 in log-probability, −0.42 a token)". */
export function cellWords(turn, cell, measure) {
  const f = cell[measure];
  const what = measure === "knocked" ? `with ${cell.piece.label} not read` : cell.piece.kind === "dropped" ? `with ${cell.piece.label} put back`
    : `without ${cell.piece.label}`;
  if (!f) return `${replyName(turn)} ${what}: ${cell.piece[`${measure}_why`] ?? "not computed"}`;
  return `${replyName(turn)} ${what}: ${likelier(turn.reply_logprob + f.delta, turn.reply_logprob)} (${signed(f.delta)} in log-probability, ` +
    `${signed(f.perToken, 2)} a token)`;
}

/**
 * Where attention and need disagree, for a turn's row: the piece the reply's last step read most
 * (attention_share, the first token left out) against the one whose removal moved the reply most,
 * when they differ and the most read one's removal moves the reply a hundred times less: one
 * sentence with both figures, or null.
 */
export function rowSentence(turn) {
  const read = turn.pieces.filter((p) => p.attention_share !== null && p.removed);
  if (read.length < 2) return null;
  const most = read.reduce((a, b) => (b.attention_share > a.attention_share ? b : a));
  const needed = read.reduce((a, b) => (b.removed.reply_logprob < a.removed.reply_logprob ? b : a));
  if (most === needed) return null;
  const dMost = most.removed.reply_logprob - turn.reply_logprob;
  const dNeeded = needed.removed.reply_logprob - turn.reply_logprob;
  if (dNeeded > dMost - Math.log(100)) return null; // not a hundred times apart: no disagreement worth a line
  return `The step that wrote this reply's last token read ${most.label} most (${percent(most.attention_share)} of its attention, ` +
    `the first token left out), yet without it the reply is ${likelier(most.removed.reply_logprob, turn.reply_logprob)}; ` +
    `without ${needed.label}, read ${percent(needed.attention_share)}, it is ${likelier(needed.removed.reply_logprob, turn.reply_logprob)}.`;
}

/**
 * The matrix as an element. needed: chatlens.needs's answer; messages: the conversation it
 * measured; options: {open: {turn, piece, measure} (the cell whose strip is shown), onOpen(open),
 * guessFirst, guess {turn: piece name}, onGuess(turn, name)}.
 */
export function needsView(needed, messages, { open = null, onOpen = null, guessFirst = false, guess = {}, onGuess = null } = {}) {
  const cols = columnsOf(needed, messages);
  const measures = needed.knocked ? ["removed", "knocked"] : ["removed"];
  const head = el("tr", {}, el("th", { scope: "col", text: "reply" }), cols.map((c) => el("th", { scope: "col", text: c.label })));
  const rows = needed.turns.map((turn) => {
    const hidden = guessFirst && guess[turn.turn] === undefined;
    const cells = cols.map((c) => {
      const pieces = turn.pieces.filter((p) => columnKeys(p).includes(c.key));
      if (!pieces.length) return el("td", { class: "needs-none", text: "", title: "not in what this reply read" });
      if (hidden) return el("td", { class: "needs-hidden", text: "?" });
      return el("td", { class: "needs-cell" }, pieces.map((piece) => cellButtons(turn, cellOf(turn, piece), measures, open, onOpen, guess[turn.turn])));
    });
    const said = hidden ? null : rowSentence(turn);
    return [
      el("tr", { class: "needs-row", dataset: { turn: turn.turn } },
        el("th", { scope: "row", class: "needs-reply" }, replyName(turn),
          el("span", { class: "needs-lp", text: ` log-probability ${turn.reply_logprob.toFixed(2)}` })),
        cells),
      hidden ? el("tr", { class: "needs-guess-row" }, el("td", { colspan: cols.length + 1 }, guessForm(turn, onGuess))) : null,
      said ? el("tr", { class: "needs-said" }, el("td", { colspan: cols.length + 1, class: "term", text: said })) : null,
    ];
  });
  return el(
    "div",
    { class: "needs-matrix" },
    term("Each cell: the reply's log-probability with the piece removed (the conversation written again without it; a dropped turn put back), " +
      "minus with every piece read, in all and a token. Below −2.3 the reply is ten times less likely without the piece." +
      (needed.knocked ? " The second figure: the reply's positions may not read the piece (not read)." : "")),
    el("div", { class: "needs-scroll" }, el("table", { class: "needs-table" }, el("thead", {}, head), el("tbody", {}, rows.flat()))),
    el("p", { class: "term", text: `Computed now (${needed.backend}): ${count(needed.computed_tokens, "token")} run through, turn after turn; ` +
      "the cache holds the conversation's last turn, as it did." }),
  );
}

function cellButtons(turn, cell, measures, open, onOpen, guessed) {
  return el("div", { class: "needs-piece", dataset: { piece: cell.piece.name } },
    cell.piece.kind === "dropped" ? el("span", { class: "needs-tag", text: "put back: " }) : null,
    cell.piece.kind === "new" ? el("span", { class: "needs-tag", text: "its own: " }) : null,
    guessed === cell.piece.name ? el("span", { class: "needs-tag guess", text: "your guess: " }) : null,
    measures.map((m) => {
      const f = cell[m];
      const isOpen = open && open.turn === turn.turn && open.piece === cell.piece.name && open.measure === m;
      if (!f) {
        const why = cell.piece[`${m}_why`] ?? "not computed";
        return el("span", { class: "needs-why", tabindex: "0", title: why, "aria-label": `${cell.piece.label}, ${m === "knocked" ? "not read" : "removed"}: ${why}`,
                            text: m === "knocked" ? "not read: —" : "—" });
      }
      const shown = `${m === "knocked" ? "not read " : ""}${deltaWords(f)} `;
      return el("button", {
        type: "button", class: `needs-fig needs-${f.how} strip-${f.how} strip-band-${f.band}${isOpen ? " open" : ""}`,
        // the name begins with what the button shows, then says it in words
        "aria-label": `${shown}${factorWords(f.ratio)}: ${cellWords(turn, cell, m)}`, title: cellWords(turn, cell, m),
        "aria-pressed": isOpen ? "true" : "false", dataset: { measure: m, delta: f.delta },
        onclick: onOpen ? () => onOpen(isOpen ? null : { turn: turn.turn, piece: cell.piece.name, measure: m }) : null,
      }, shown, el("span", { class: "strip-factor", text: factorWords(f.ratio) }));
    }));
}

function guessForm(turn, onGuess) {
  const name = `guess-${turn.turn}`;
  const choices = turn.pieces.filter((p) => p.removed).map((p) => el("label", { class: "needs-guess" },
    el("input", { type: "radio", name, value: p.name }), ` ${p.label}`));
  return el("form", { class: "needs-guess-form", onsubmit: (e) => {
    e.preventDefault();
    const chosen = e.currentTarget.querySelector("input:checked");
    if (chosen) onGuess?.(turn.turn, chosen.value);
  } },
  el("p", { text: `Guess first: without which piece would ${replyName(turn)} be least likely?` }), choices,
  el("button", { type: "submit", text: "Show the figures" }));
}
