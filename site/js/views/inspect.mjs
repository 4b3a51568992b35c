// One step of a reply inspected (chatlens.inspect's answer), drawn for a learner: where the step's
// token read from (attention), and how the choice formed block by block (the logit lens).
//
//   where it read   the tokens the model read up to this step, tinted by attention weight; a bar
//                   a piece of the record (system prompt, each turn, the message, the header,
//                   the reply so far) with its share; the ten positions read most; the heads that
//                   read furthest back, each on the text it reads (and, on a button, tinting it)
//   which weights   all blocks or one (the mean over its heads); the first token, where much of
//                   the weight sits, left out of the shares by a switch (on at first), and said
//                   as what it is either way
//   the lens        each block's top candidates with probabilities, the last block's being the
//                   model's own choice ("why this token")
//
// Blocks and heads are counted from 1 on the page, as a learner counts the model's 30 blocks
// ("block 30" is the last); the answer counts from 0, so block b is attention[b - 1] and
// lens[b - 1]. Each label's title gives the answer's index, and the view says so once.
//
// The figures come computed with the answer (py/chatlens/inspection.py figures: every_layer, and
// each_layer for one block's heads, each with the first token in and left out); this module
// selects the ones the controls ask for and draws them. All text goes in as text nodes.

import { layout, spelled } from "./bytes.mjs";
import { count, el, fill, term } from "./dom.mjs";
import { chips, visibleToken } from "./tokens.mjs";
import { percent } from "./why.mjs";

export const ATTENTION_NOTE =
  "Attention is where the model read from at this step: each head of each block mixes the tokens before this " +
  "one (and this one) by weights that sum to 1, and the tints and shares here are those weights. It is not the " +
  "whole reason for the choice: each block also transforms what it read, and the logit lens below shows the " +
  "choice forming block by block.";

export const LENS_NOTE =
  "After each block, the model's running state put through its final norm and output layer, as if the model " +
  "stopped there: the tokens that block would choose, with their probabilities. The last block's is the model's " +
  "own distribution, the one the reply chose from.";

/** A block's label, counted from 1: "block 25" is the answer's layer 24. */
export const blockLabel = (layer) => `block ${layer + 1}`;
/** A head's label, counted from 1. */
export const headLabel = (layer, head) => `block ${layer + 1} · head ${head + 1}`;
const indexTitle = (layer, head = null) =>
  head === null ? `lens[${layer}] and attention[${layer}] in chatlens.inspect's answer` : `attention[${layer}][${head}] in chatlens.inspect's answer`;

/**
 * What the step's query read, positions 0..position, laid out for drawing: {ids, tokens, bytes,
 * special}, from `record` (a turn record, or a comparison's prompt and cell in its names) for
 * the answer's ids. Null when the record's tokens are not the answer's ids (another turn's
 * record): the view then has no text to lay the weights on.
 */
export function readOf(answer, record) {
  const step = answer.step;
  const ids = [...answer.prompt_ids, ...answer.reply_ids.slice(0, step)];
  const recIds = [...record.prompt_ids, ...(record.reply_ids ?? []).slice(0, step)];
  if (ids.length !== answer.position + 1 || recIds.length !== ids.length || recIds.some((id, i) => id !== ids[i])) return null;
  const tokens = [...record.prompt_tokens, ...(record.reply_tokens ?? []).slice(0, step)];
  const hasBytes = record.prompt_bytes && (step === 0 || record.reply_bytes?.length >= step);
  const bytes = hasBytes ? [...record.prompt_bytes, ...(record.reply_bytes ?? []).slice(0, step)] : null;
  return { ids, tokens, bytes, special: new Set(record.special_ids ?? []) };
}

/** Each id's token text that `sources` know (an inspection's lens, records, predictions,
 * branches: their ids and tokens, and their candidates'). */
export function knownTokens(...sources) {
  const known = new Map();
  const add = (ids, tokens) => ids?.forEach((id, i) => tokens?.[i] !== undefined && known.set(id, tokens[i]));
  for (const s of sources) {
    if (!s) continue;
    add(s.prompt_ids, s.prompt_tokens);
    add(s.reply_ids, s.reply_tokens);
    add(s.ids, s.tokens);
    s.top_k?.forEach((row, k) => add(row.map((c) => c[0]), s.top_k_tokens?.[k]));
    s.lens?.forEach((row, l) => add(row.map((c) => c[0]), s.lens_tokens?.[l]));
  }
  return known;
}

/** Which piece a position lies in: its label, from the answer's by_piece. */
const pieceAt = (pieces, j) => pieces.find((p) => j >= p.start && j < p.end);

/** A token as a learner reads it in a sentence: special tokens as they are, the rest quoted with
 * whitespace made visible. */
function tokenWords(read, j) {
  const t = read.tokens[j] ?? "";
  return read.special.has(read.ids[j]) ? t : `“${visibleToken(t)}”`;
}

/**
 * The inspection as an element that owns its node: its controls redraw it in place.
 * answer: chatlens.inspect's; read: readOf's (null: the text is not known, the figures are drawn
 * without it); options: {tokens: knownTokens's map, for the lens; onClose; title}.
 */
export function inspectView(answer, read, { tokens = new Map(), onClose = null, title = null, part = "both" } = {}) {
  const layers = answer.attention.length;
  const heads = answer.attention[0].length;
  const view = { layer: null, skipFirst: true, head: null, picked: null }; // what the controls chose
  const body = el("div", { class: "inspect-body" });

  const layerSelect = el(
    "select",
    { class: "inspect-layer", "aria-label": "Which blocks' attention", onchange: (e) => set({ layer: e.target.value === "all" ? null : Number(e.target.value), head: null }) },
    el("option", { value: "all", text: `all ${layers} blocks (the mean of ${layers * heads} heads)` }),
    Array.from({ length: layers }, (_, l) => el("option", { value: l, title: indexTitle(l), text: `${blockLabel(l)} (the mean of its ${heads} heads)` })),
  );
  const firstBox = el("input", { type: "checkbox", checked: true, onchange: (e) => set({ skipFirst: e.target.checked }) });
  const set = (change) => {
    Object.assign(view, change);
    draw();
  };

  const chosen = answer.chosen_id;
  const word = (id) => (tokens.has(id) ? `“${visibleToken(tokens.get(id))}”` : `token ${id}`);
  const stepLabel = answer.reply_ids.length === 0 && answer.step === 0
    ? "the first token of a reply to this draft"
    : `token ${answer.step + 1} of the reply`;
  const root = el(
    "section",
    { class: "inspect", "aria-label": `Inspection of ${stepLabel}`, dataset: { step: answer.step, position: answer.position } },
    el(
      "div",
      { class: "inspect-head" },
      el("h3", { text: title ?? `Inside ${stepLabel}` }),
      onClose ? el("button", { type: "button", class: "inspect-close", onclick: onClose, text: "Close" }) : null,
    ),
    el("p", { class: "inspect-chose" },
      "Reading ", el("b", { text: read ? tokenWords(read, answer.position) : word(answer.query_id) }),
      ` (position ${answer.position}), the model chose `, el("b", { text: word(chosen) }), "."),
    part !== "formed" ? term(ATTENTION_NOTE, "inspect-about") : null,
    costLine(answer),
    part === "formed" ? null : el(
      "div",
      { class: "inspect-controls" },
      el("label", {}, "Attention of ", layerSelect),
      el("label", { class: "inspect-first" }, firstBox, " leave the first token out of the shares"),
    ),
    body,
  );

  function draw() {
    const { layer, skipFirst } = view;
    const figures = layer === null ? answer.every_layer : answer.each_layer[layer];
    const weights = view.head ? answer.attention[view.head[0]][view.head[1]] : figures.mean;
    // part: "looked" (where it looked: the attention's figures), "formed" (how the choice formed:
    // the logit lens), or "both"; the step box shows them as two of its parts
    const looked = part !== "formed";
    fill(
      body,
      looked ? firstTokenLine(read, figures.mean[0], layer, skipFirst) : null,
      looked ? shareBars(skipFirst ? figures.shares_skip_first : figures.shares, skipFirst) : null,
      looked ? readBox(answer, read, weights, view, set) : null,
      looked ? topList(answer, read, skipFirst ? figures.top_skip_first : figures.top, skipFirst, set) : null,
      looked ? backHeads(read, figures.look_back, layer, answer.recent, view, set) : null,
      looked ? parkedHeads(read, figures.parked ?? [], view, set) : null,
      looked ? pieceHeads(read, answer.strongest_heads ?? [], view, set) : null,
      part !== "looked" ? lensTable(answer, tokens, layer, word) : null,
    );
  }
  draw();
  root.showHead = (layer, head) => set({ head: [layer, head] }); // a lesson line names a head: tint by it
  return root;
}

/** What the inspection cost: the answer's own figures. */
function costLine(answer) {
  return el(
    "p",
    { class: "inspect-cost" },
    `Computed now${answer.backend ? ` (${answer.backend})` : ""}: ${count(answer.computed_tokens, "token")}; ` +
      (answer.reused_tokens ? `the ${count(answer.reused_tokens, "token")} before came from the cache.` : "nothing came from the cache."),
    answer.note ? el("span", { class: "inspect-note", text: ` ${answer.note}` }) : null,
  );
}

/** What the first token holds (w: its mean weight), said as what it is. */
function firstTokenLine(read, w, layer, skipFirst) {
  const what = read ? tokenWords(read, 0) : "position 0";
  const whose = layer === null ? "the mean weight of all blocks" : `the mean weight of ${blockLabel(layer)}`;
  return el(
    "p",
    { class: "inspect-first-line" },
    "The first token, ", el("span", { class: "first-token", text: what }), `, holds ${percent(w)} of ${whose}. `,
    skipFirst ? `The shares below leave it out: they are of the other ${percent(1 - w)}.` : "The shares below include it.",
  );
}

/** A bar a piece: its share of the weight (of what the switch leaves in). */
function shareBars(pieces, skipFirst) {
  return el(
    "div",
    { class: "inspect-shares" },
    el("h4", { text: `Share of the attention, piece by piece${skipFirst ? " (the first token left out)" : ""}` }),
    el("ul", { class: "share-list" }, pieces.map((p) => el(
      "li",
      { class: `share-row kind-${p.kind}`, dataset: { kind: p.kind, share: p.share } },
      el("span", { class: "share-label", text: `${p.label} (${count(p.end - p.start, "token")})` }),
      el("span", { class: "share-track" }, el("span", { class: `share-bar kind-${p.kind}`, style: `width:${(100 * p.share).toFixed(2)}%` })),
      el("span", { class: "share-value", text: percent(p.share) }),
    ))),
  );
}

/** The tokens read, tinted by `weights` (the mean of the blocks chosen, or one head's): the tint
 * is each weight over the largest shown, so the first token, left out, cannot wash the rest out. */
function readBox(answer, read, weights, view, set) {
  if (!read) return el("p", { class: "note", text: "The text of this step is not at hand: the figures below are by position." });
  const first = view.skipFirst ? 1 : 0;
  const top = Math.max(...weights.slice(first)) || 1;
  const box = el("div", { class: "tokens inspect-read", tabindex: "0", "aria-label": "The tokens the model read, tinted by attention weight" });
  const lay = read.bytes ? layout(spelled(read.bytes), read.bytes) : null;
  const kinds = [];
  for (const p of answer.by_piece) for (let i = p.start; i < p.end; i++) kinds[i] = p.kind;
  chips(box, {
    tokens: read.tokens,
    ids: read.ids,
    lay,
    classOf: (i) => `kind-${kinds[i] ?? "none"}${read.special.has(read.ids[i]) ? " special" : ""}` +
      `${i === 0 ? ` first-token${view.skipFirst ? " left-out" : ""}` : ""}${i === answer.position ? " query" : ""}`,
    titleOf: (i) => ` · weight ${percent(weights[i])}`,
  });
  box.querySelectorAll(".tok").forEach((chip, j) => {
    chip.dataset.pos = j;
    chip.dataset.weight = weights[j];
    if (j >= first) chip.style.setProperty("--w", Math.min(1, weights[j] / top).toFixed(3));
    if (j === view.picked) chip.classList.add("picked");
  });
  box.addEventListener("click", (e) => {
    const chip = e.target.closest?.(".tok");
    if (chip) set({ picked: Number(chip.dataset.pos) });
  });
  const source = view.head ? headLabel(...view.head) : view.layer === null ? "the mean of all blocks" : `the mean of ${blockLabel(view.layer)}`;
  return el(
    "div",
    { class: "inspect-text" },
    el("h4", {}, "On the text: tinted by ", el("span", { class: "tint-source", text: source }),
      view.head ? el("button", { type: "button", class: "link", onclick: () => set({ head: null }), text: "back to the mean" }) : null),
    box,
    pickedLine(answer, read, weights, view.picked),
  );
}

function pickedLine(answer, read, weights, j) {
  if (j === null || j === undefined) return el("p", { class: "inspect-picked term", text: "Tap a token for its weight." });
  const piece = pieceAt(answer.by_piece, j);
  return el("p", { class: "inspect-picked" }, el("b", { text: tokenWords(read, j) }),
    ` at position ${j}${piece ? `, in ${piece.label}` : ""}: ${percent(weights[j])} of the weight tinted here.`);
}

function topList(answer, read, top, skipFirst, set) {
  return el(
    "div",
    { class: "inspect-top" },
    el("h4", { text: `The ${top.length} positions read most${skipFirst ? " (the first token left out)" : ""}` }),
    el("ol", { class: "top-list" }, top.map(([j, w]) => {
      const piece = pieceAt(answer.by_piece, j);
      return el(
        "li",
        { dataset: { pos: j, weight: w } },
        el("button", { type: "button", class: "top-token", onclick: () => set({ picked: j }), text: read ? tokenWords(read, j) : `position ${j}` }),
        el("span", { class: "top-where", text: ` position ${j}${piece ? ` · ${piece.label}` : ""}` }),
        el("span", { class: "top-weight", text: percent(w) }),
      );
    })),
  );
}

/** The tokens around position j, j's own marked: where a head reads, on the text. */
function around(read, j, span = 4) {
  const from = Math.max(0, j - span);
  const to = Math.min(read.tokens.length, j + span + 1);
  const out = [];
  for (let i = from; i < to; i++) {
    const t = read.special.has(read.ids[i]) ? read.tokens[i] : visibleToken(read.tokens[i]);
    out.push(el("span", { class: `ctx${i === j ? " ctx-read" : ""}${read.special.has(read.ids[i]) ? " ctx-special" : ""}`, text: t }));
  }
  return el("span", { class: "ctx-line" }, from > 0 ? "…" : null, out, to < read.tokens.length ? "…" : null);
}

function backHeads(read, back, layer, recent, view, set) {
  const heads = back.filter((h) => h.weight > 0);
  const scope = layer === null ? "of all blocks" : `of ${blockLabel(layer)}`;
  return el(
    "div",
    { class: "inspect-back" },
    el("h4", { text: `The heads ${scope} whose weight lies furthest back` }),
    term(`Ranked by each weight times how many tokens back it lies, summed over the positions before the last ${recent} ` +
      `(this token and the ${recent - 1} before it), the first token left out. The mean over heads hides them.`),
    heads.length ? el("ol", { class: "back-list" }, heads.map((h) => el(
      "li",
      { class: `back-head${view.head?.[0] === h.layer && view.head?.[1] === h.head ? " is-shown" : ""}`,
        dataset: { layer: h.layer, head: h.head, weight: h.weight, reach: h.reach } },
      el("div", { class: "back-title" },
        el("span", {}, el("b", { title: indexTitle(h.layer, h.head), text: headLabel(h.layer, h.head) }),
          `: ${percent(h.weight)} of its weight there, on average ${h.distance.toFixed(0)} tokens back`),
        el("button", { type: "button", class: "back-show", onclick: () => set({ head: [h.layer, h.head] }), text: "tint the text by it" })),
      el("ul", { class: "back-reads" }, h.reads.filter(([, w]) => w > 0).map(([j, w]) => el(
        "li",
        { dataset: { pos: j } },
        el("span", { class: "back-weight", text: percent(w) }),
        read ? around(read, j) : el("span", { text: `position ${j}` }),
      ))),
    ))) : el("p", { class: "note", text: `Nothing lies before the last ${recent} positions but the first token.` }),
  );
}

/** A head's title and its "tint the text by it" button (shown: its tint is on). */
function headTitle(h, view, set, words) {
  const shown = view.head?.[0] === h.layer && view.head?.[1] === h.head;
  return el("div", { class: "back-title" },
    el("span", {}, el("b", { title: indexTitle(h.layer, h.head), text: headLabel(h.layer, h.head) }), words),
    el("button", { type: "button", class: `back-show${shown ? " is-shown" : ""}`, dataset: { layer: h.layer, head: h.head },
                   onclick: () => set({ head: [h.layer, h.head] }), text: "tint the text by it" }));
}

/** The heads ranked apart: most of their weight beyond the first token and the last few rests on
 * one token that holds no word, as heads park weight on the first token. */
function parkedHeads(read, parked, view, set) {
  const heads = parked.filter((h) => h.weight > 0);
  if (!heads.length) return null;
  return el(
    "div",
    { class: "inspect-parked" },
    el("h4", { text: "Heads that rest on one token holding no word" }),
    term("Left out of the list above: each of these puts at least half of that weight on one space, punctuation mark or " +
      "special token, as most heads put weight on the first token. Where such weight lies says little about which " +
      "words the reply drew on."),
    el("ul", { class: "back-list parked-list" }, heads.map((h) => {
      const [j, w] = h.reads[0];
      return el("li", { class: "back-head", dataset: { layer: h.layer, head: h.head, pos: j } },
        headTitle(h, view, set, `: ${percent(w)} on ${read ? tokenWords(read, j) : `position ${j}`} at position ${j}`));
    })),
  );
}

/** For each piece, the single head that put the most weight on one of its tokens that holds a
 * word: what the lesson's lines cite, each tintable. */
function pieceHeads(read, strongest, view, set) {
  if (!strongest.length) return null;
  return el(
    "div",
    { class: "inspect-strongest" },
    el("h4", { text: "The head that reads each piece most" }),
    term("For each piece, the one head of all blocks that put the most weight on one of its tokens (spaces, punctuation " +
      "and special tokens left out)."),
    el("ul", { class: "back-list strongest-list" }, strongest.map((h) => el(
      "li",
      { class: "back-head", dataset: { layer: h.layer, head: h.head, pos: h.position, kind: h.kind } },
      headTitle(h, view, set, `: ${percent(h.weight)} on ${read ? tokenWords(read, h.position) : `position ${h.position}`} in ${h.label}`),
    ))),
  );
}

/** The commitment strip's kinds of cell, each in words: its legend (a phone has no hover title) and
 * each cell's title say them alike. */
export const COMMIT_KEY = {
  other: "another token first",
  first: "the chosen token first, not yet for good",
  stays: "the chosen token first, from here to the last block",
};

/** Each block's kind of cell in the commitment strip (COMMIT_KEY's keys), block 1 first. */
export function commitKinds(answer) {
  const { lens, settles } = answer;
  return lens.map((row, l) => (settles !== null && l >= settles ? "stays" : row[0]?.[0] === answer.chosen_id ? "first" : "other"));
}

/** The commitment strip: a cell a block, filled where the chosen id is the lens's first choice,
 * marked from the block where it stays first (the answer's settles) on; its legend below it, the
 * kinds it shows in words. */
function commitStrip(answer) {
  const { lens, settles } = answer;
  const kinds = commitKinds(answer);
  const strip = el("div", { class: "commit-strip", role: "img",
                            "aria-label": settles === null ? "The chosen token is not the last block's first choice"
                              : `The chosen token is the lens's first choice from block ${settles + 1} on` },
    lens.map((row, l) => el("span", {
      class: `commit-cell${row[0]?.[0] === answer.chosen_id ? " is-first" : ""}${settles !== null && l >= settles ? " stays" : ""}`,
      title: `${blockLabel(l)}: ${COMMIT_KEY[kinds[l]]}`,
      dataset: { layer: l },
    })));
  const legend = el("ul", { class: "legend commit-legend" },
    el("li", { text: "A cell a block, block 1 at the left:" }),
    Object.keys(COMMIT_KEY).filter((k) => kinds.includes(k)).map((k) =>
      el("li", { dataset: { kind: k } }, el("span", { class: `swatch commit-key is-${k}`, "aria-hidden": "true" }), COMMIT_KEY[k])));
  return [strip, legend];
}

function lensTable(answer, tokens, layer, word) {
  const { lens } = answer;
  const chosen = answer.chosen_id;
  const from = answer.settles;
  const k = lens[0].length;
  const cell = ([id, p]) => el(
    "td",
    { class: `lens-cell${id === chosen ? " is-chosen" : ""}`, dataset: { id, p }, title: `id ${id} · ${percent(p)}` },
    el("span", { class: "lens-token", text: tokens.has(id) ? visibleToken(tokens.get(id)) : `#${id}` }),
    el("span", { class: "lens-p", text: percent(p) }),
  );
  const rows = lens.map((row, l) => el(
    "tr",
    { class: `${l === from ? "settles" : ""}${l === layer ? " is-picked" : ""}${l === lens.length - 1 ? " is-last" : ""}`.trim() || null, dataset: { layer: l } },
    el("th", { scope: "row", title: indexTitle(l) }, blockLabel(l), l === lens.length - 1 ? el("span", { class: "lens-why", text: "why this token" }) : null),
    row.map((c, r) => {
      const td = cell(c);
      td.style.setProperty("--p", c[1].toFixed(3));
      td.dataset.rank = r + 1;
      return td;
    }),
  ));
  const unknown = lens.some((row) => row.some(([id]) => !tokens.has(id)));
  return el(
    "div",
    { class: "inspect-lens" },
    el("h4", { text: "How the choice formed: the logit lens" }),
    term(LENS_NOTE),
    from !== null ? el("p", { class: "lens-settles" }, el("b", { text: word(chosen) }),
      ` is the lens's first choice from ${blockLabel(from)} on (${percent(lens[from][0][1])} there).`) : null,
    commitStrip(answer),
    el("div", { class: "lens-scroll" }, el(
      "table",
      { class: "lens-table" },
      el("thead", {}, el("tr", {}, el("th", { text: "after" }), Array.from({ length: k }, (_, r) => el("th", { text: r + 1 })))),
      el("tbody", {}, rows),
    )),
    term(`Blocks and heads are counted from 1 here (block 1 to ${lens.length}); chatlens.inspect's lists count from 0, ` +
      `so ${blockLabel(lens.length - 1)} is lens[${lens.length - 1}].` +
      (unknown ? " A token shown as #id is one whose text this page has not seen: the answer gives its id only." : "")),
  );
}
