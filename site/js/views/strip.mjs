// Every reply token at once, under one piece taken away: the reply drawn as a strip of its tokens,
// each tinted by how far its probability moved (chatlens.cause's `tokens`: each reply position's
// {p, top_id, top_token, top_p} with every piece read, and under each piece's measure), with a
// legend, a piece and measure chosen above it, and each token's three figures on hover, focus or
// tap. The same strip draws a cause's whole reply (the step box) and a turn of the conversation's
// matrix (views/needs.mjs): both answers carry `tokens` and `pieces` in the same shape.
//
// Python computes every figure; this module only places and words them. The tint is a log-ratio
// scale in steps (BANDS), falls and rises in two colours, and every token also carries its change
// as text ("÷40", "×2.1", "·" for little), so nothing is said by colour alone. The pure parts
// (stripCells, legendBands, tokenWords) are played in node (tests/page/strip.test.mjs).

import { change, percent, times, visibleToken } from "../lesson/terms.mjs";
import { el } from "./dom.mjs";

/** The measures a strip tints by, as the table names them (a dropped turn's removal is its put-back). */
export const MEASURE_NAMES = { removed: "without it", knocked: "not read" };

// The steps of the tint: a change within lesson/terms.mjs's band is "little" (no tint); beyond
// it, the factor's steps, each a stronger tint of the fall's or the rise's colour.
export const BANDS = [3, 10, 100]; // factors: under 3, 3 to 10, 10 to 100, 100 and more

/** The factor a token's probability moved by, as text: "÷40" (fell 40 times), "×2.1", "·". */
export function factorWords(ratio) {
  const how = change(ratio);
  if (how === "little") return "·";
  return `${how === "falls" ? "÷" : "×"}${times(how === "falls" ? 1 / ratio : ratio, { short: true })}`;
}

/** The tint step (0: little, 1..4 stronger) of a ratio. */
export function band(ratio) {
  if (change(ratio) === "little") return 0;
  const f = Math.max(ratio, 1 / ratio);
  return 1 + BANDS.filter((b) => f >= b).length;
}

/** The legend: each step of each colour, in words. */
export function legendBands() {
  const edges = ["1.1", ...BANDS.map(String)];
  const steps = edges.map((lo, i) => (i < BANDS.length ? `${lo} to ${edges[i + 1]} times` : `${lo} times or more`));
  return [
    ...steps.map((w, i) => ({ how: "falls", band: i + 1, words: `falls ${w}` })),
    { how: "little", band: 0, words: "within a tenth: changes little" },
    ...steps.map((w, i) => ({ how: "rises", band: i + 1, words: `rises ${w}` })),
  ];
}

/** A piece of an answer by name, and its measure's figures (null with why when it has none). */
export function measureOf(answer, name, measure) {
  const piece = answer.pieces.find((p) => p.name === name) ?? null;
  const m = piece?.[measure] ?? null;
  return { piece, m, why: piece ? (m ? null : piece[`${measure}_why`] ?? "Not computed.") : "No such piece." };
}

/**
 * Each reply token under one piece's measure: [{k, token, p, under, top, ratio, how, band, label}]:
 * p with every piece read, under the measure's; top {token, p} what leads under it when another
 * token does (else null). answer: a cause's at the reply's last step, or a matrix turn (each with
 * `tokens`); tokens: the reply's tokens as text. Empty when the measure was not taken.
 */
export function stripCells(answer, tokens, name, measure) {
  const { m } = measureOf(answer, name, measure);
  if (!m?.tokens || !answer.tokens) return [];
  return answer.tokens.map((base, k) => {
    const row = m.tokens[k];
    const ratio = row.p / base.p;
    const own = answer.reply_ids?.[k] ?? null;
    return { k, token: tokens[k] ?? "", p: base.p, under: row.p, ratio, how: change(ratio), band: band(ratio), label: factorWords(ratio),
             top: row.top_id === own ? null : { token: row.top_token ?? "", p: row.top_p } };
  });
}

/** One token's figures in a sentence: "Token 4, “ Captain”: 29.1% with every piece read; without
 * the system prompt 0.20% (falls 150 times), “ Arr” leads (12.0%)." */
export function tokenWords(cell, pieceLabel, measure) {
  const taken = measure === "knocked" ? `with ${pieceLabel} not read` : `without ${pieceLabel}`;
  const how = cell.how === "little" ? "changes little" : `${cell.how === "falls" ? "falls" : "rises"} ${factorWords(cell.ratio).slice(1)} times`;
  const lead = cell.top ? `, “${visibleToken(cell.top.token)}” leads (${percent(cell.top.p)})` : ", still the model's choice";
  return `Token ${cell.k + 1}, “${visibleToken(cell.token)}”: ${percent(cell.p)} with every piece read; ${taken} ${percent(cell.under)} ` +
    `(${how})${lead}.`;
}

/** The pieces a strip can tint by (a piece with a measure that has tokens), in the answer's order. */
export const stripPieces = (answer) => answer.pieces.filter((p) => p.knocked?.tokens || p.removed?.tokens);

/** The measure a piece is shown under first: removed where it was, else knocked. */
export const firstMeasure = (piece, wanted = "removed") =>
  piece?.[wanted]?.tokens ? wanted : piece?.removed?.tokens ? "removed" : "knocked";

/**
 * The strip as an element. answer, tokens: as stripCells; chosen {piece, measure}; options:
 * {onChoose({piece, measure}), onOpen(k): the token's step opened (inspect, cause, branch it),
 * label: what the strip is of (a heading)}.
 */
export function stripView(answer, tokens, chosen, { onChoose = null, onOpen = null, label = "Every token of the reply" } = {}) {
  const pieces = stripPieces(answer);
  if (!pieces.length) return el("p", { class: "note", text: "These figures came without each token's: ask again." });
  const piece = pieces.find((p) => p.name === chosen.piece) ?? pieces[0];
  const measure = firstMeasure(piece, chosen.measure);
  const cells = stripCells(answer, tokens, piece.name, measure);
  const pieceWord = piece.label;
  const detail = el("p", { class: "strip-detail", "aria-live": "off", text: "Hover, focus or tap a token for its figures." });
  let shown = null;
  const show = (cell, button) => {
    shown?.classList.remove("strip-shown");
    shown = button;
    button.classList.add("strip-shown");
    const open = onOpen ? el("button", { type: "button", class: "link strip-open", onclick: () => onOpen(cell.k), text: `Look inside token ${cell.k + 1}'s step` }) : null;
    detail.replaceChildren(tokenWords(cell, pieceWord, measure), " ", ...(open ? [open] : []));
  };
  const toks = cells.map((cell) => {
    const words = tokenWords(cell, pieceWord, measure);
    // the name begins with what the button shows (its token, its factor), then says it in words
    const shown = `${visibleToken(cell.token)}${cell.label}`;
    const b = el("button", {
      type: "button", class: `strip-tok strip-${cell.how} strip-band-${cell.band}`, "aria-label": `${shown}: ${words}`, title: words,
      dataset: { k: cell.k, p: cell.p, under: cell.under, how: cell.how },
      onmouseenter: (e) => show(cell, e.currentTarget), onfocus: (e) => show(cell, e.currentTarget), onclick: (e) => show(cell, e.currentTarget),
    }, el("span", { class: "strip-text", text: visibleToken(cell.token) }), el("span", { class: "strip-factor", text: cell.label }));
    return b;
  });
  const falls = cells.filter((c) => c.how === "falls").length;
  const rises = cells.filter((c) => c.how === "rises").length;
  const choose = onChoose ? chooser(pieces, piece, measure, onChoose) : null;
  return el(
    "section",
    { class: "strip", "aria-label": label, dataset: { piece: piece.name, measure } },
    el("h4", { text: label }),
    choose,
    el("p", { class: "strip-sum", text: `${pieceWord} ${MEASURE_NAMES[measure] === "not read" ? "not read" : piece.kind === "dropped" ? "put back" : "taken away"}: ` +
      `${falls} of ${cells.length} tokens fall, ${rises} rise, the rest change little (each token's factor under it).` }),
    el("div", { class: "strip-tokens", role: "group", "aria-label": `${label}: each token's change` }, toks),
    detail,
    legend(),
  );
}

function chooser(pieces, piece, measure, onChoose) {
  const select = el("select", { class: "strip-piece", "aria-label": "The piece taken away",
                                onchange: (e) => onChoose({ piece: e.target.value, measure: firstMeasure(pieces.find((p) => p.name === e.target.value), measure) }) },
    pieces.map((p) => el("option", { value: p.name, selected: p.name === piece.name, text: p.label })));
  const radios = ["removed", "knocked"].map((m) => el("label", { class: "strip-measure" },
    el("input", { type: "radio", name: `strip-measure-${piece.name}`, value: m, checked: m === measure, disabled: !piece[m]?.tokens,
                  onchange: () => onChoose({ piece: piece.name, measure: m }) }),
    ` ${m === "removed" && piece.kind === "dropped" ? "put back" : MEASURE_NAMES[m]}`));
  const why = !piece.knocked?.tokens && piece.knocked_why ? el("span", { class: "term", text: ` (not read: ${piece.knocked_why})` }) : null;
  return el("div", { class: "strip-choose" }, el("label", {}, "Piece: ", select), el("span", { class: "strip-measures", role: "radiogroup", "aria-label": "Measure" }, radios), why);
}

function legend() {
  return el("ul", { class: "strip-legend", "aria-label": "What a token's tint says" },
    legendBands().map((b) => el("li", { class: `strip-key strip-${b.how} strip-band-${b.band}` },
      el("span", { class: "strip-swatch", "aria-hidden": "true", text: b.how === "little" ? "·" : b.how === "falls" ? "÷" : "×" }), ` ${b.words}`)));
}
