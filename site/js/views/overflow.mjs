// A message in the panel instead of a record, and the window drawn overflowing when the system
// prompt and the new message cannot fit (from a WindowError's data).

import { count, el, fill } from "./dom.mjs";
import { drawSummary, segmentClass, windowTitle } from "./window.mjs";

/** The overflow a WindowError's data describes (chatlens.errors.WindowError: the system prompt
 * and the new message do not fit), with what the window leaves; null for any other error. */
export function windowOverflow(error) {
  const d = error?.name === "WindowError" ? error.data : null;
  return d ? { ...d, budget: d.window - d.reserve } : null;
}

/** The overflow chatlens.count answered: the same figures, counted exactly (no "at least"); null
 * if they fit after all (then a preview shows the record). */
export function countedOverflow(counted) {
  if (!counted) return null;
  const budget = counted.window - counted.reserve;
  return counted.needed > budget ? { ...counted, at_least: false, budget } : null;
}

/** A count as figures are written in the lesson and in chatlens' messages: 222,228. */
const n = (x) => Number(x).toLocaleString("en-US");

/** A piece of the overflow in the sentence, by its kind (WindowError's data names each piece's
 * kind as the turn record does); any other kind by its label. */
const PIECE_WORDS = {
  system: "the system prompt",
  default_system: "the template's default system prompt",
  new: "your new message",
  header: "the generation header",
};
const pieceWords = (p) => PIECE_WORDS[p.kind] || p.label;

/** The window drawn overflowing: what the system prompt and the new message need against what
 * the window leaves once the reply's room is kept free. counting: a bound's figures ("at least")
 * are being counted exactly (chatlens.count), and the text says so; draw the exact ones, when they
 * come, with renderCounted. `message` is what failed ("Cannot send: ..."): the drawing states the
 * error's figures once, so only a failed send is named, in the caption. */
export function renderOverflow(root, info, message = "", { counting = false } = {}) {
  const { needed, pieces, window: w, reserve, budget, at_least: bound } = info;
  const over = needed - budget;
  const least = bound ? "at least " : ""; // counted from a bound, before tokenizing (a pasted book)
  const scale = needed + reserve;
  if (root.id === "reads") drawSummary(null, `needs ${least}${n(needed + reserve)} of ${count(n(w), "token")}: too long for the window`);
  const bar = el("div", {
    class: "window-bar overflow-bar",
    role: "img",
    "aria-label": `needs ${n(needed + reserve)} tokens with the reply's room, the window holds ${n(w)}`,
  });
  for (const p of pieces) bar.append(el("span", { class: `seg ${segmentClass(p.kind)}`, style: `flex-grow:${p.count}`, title: `${p.label}: ${count(n(p.count), "token")}` }));
  bar.append(el("span", { class: "seg seg-reserve", style: `flex-grow:${reserve}`, title: `reserved for the reply: ${count(n(reserve), "token")}` }));
  bar.append(el("span", { class: "window-edge", style: `left:${(100 * w) / scale}%`, title: `the window ends here: ${n(w)} tokens` }));
  bar.append(el("span", { class: "window-over", style: `left:${(100 * w) / scale}%` }));
  const words = pieces.map((p) => `${pieceWords(p)} (${n(p.count)})`);
  const needs = words.length > 1 ? `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}` : words.join("");
  const caption = /^Cannot send\b/.test(message) ? "Not sent: this message does not fit the window" : "This message does not fit the window";
  fill(root, 
    el("p", { class: "caption", id: "reads-caption", text: caption }),
    el(
      "div",
      { class: "window overflow" },
      windowTitle(w, info.context),
      bar,
      el(
        "ul",
        { class: "legend" },
        pieces.map((p) => el("li", { dataset: { seg: p.label, kind: p.kind, count: p.count } }, el("span", { class: `swatch ${segmentClass(p.kind)}` }), `${p.label} `, el("b", { text: n(p.count) }))),
        el("li", { dataset: { seg: "reserved for the reply", count: reserve } }, el("span", { class: "swatch seg-reserve" }), "reserved for the reply ", el("b", { text: n(reserve) })),
        el("li", { dataset: { seg: "over", count: over } }, el("span", { class: "swatch seg-over" }), "over the window by ", el("b", { text: n(over) })),
      ),
    ),
    el(
      "p",
      { class: "overflow-text" },
      `Even with every older turn dropped, ${needs} need ${least}${n(needed)} tokens, but a window of ${n(w)} keeps ${n(reserve)} free for the reply and leaves ${n(budget)}: `,
      el("b", { text: `${least}${n(over)} too many` }),
      ". Shorten the message, choose a larger window, or a shorter system prompt.",
    ),
    bound && counting ? el("p", { class: "note overflow-counting", text: "Counting the exact number of tokens…" }) : null,
  );
}

/** The exact figures chatlens.count answered, drawn in place of the bound's "at least";
 * false (nothing drawn) if they fit after all. */
export function renderCounted(root, counted, message = counted?.message ?? "") {
  const info = countedOverflow(counted);
  if (!info) return false;
  renderOverflow(root, info, message);
  return true;
}

/** A message instead of a record; `error` (the Error it reports) that is a window overflow is
 * drawn as one (options: renderOverflow's). */
export function renderMessage(root, text, cls = "note", error = null, options = {}) {
  const info = windowOverflow(error);
  if (info) return renderOverflow(root, info, text, options);
  fill(root, el("p", { class: cls, text }));
  if (root.id === "reads") drawSummary(null);
}
