// A token drawn for a learner: its text made visible, and chips with their ids (a character
// split across tokens shown as its bytes, grouped under the character). The prompt, the reply,
// the workbench and plain text draw tokens with these, from the bytes the records carry.

import { fromHex, hex } from "./bytes.mjs";
import { el } from "./dom.mjs";
import { visibleToken } from "../lesson/terms.mjs";

/** Which prompt positions hold special tokens, from the record's special_ids. */
export function specialPositions(record) {
  const ids = new Set(record.special_ids);
  return record.prompt_ids.map((id) => ids.has(id));
}

// A token's text made visible (lesson/terms.mjs, where the lesson's sentences write it too).
export { visibleToken };

/** A chip's visible text: whole characters as they are, parts of a character as hex bytes. */
function chipText(parts, token) {
  const t = el("span", { class: "t" });
  if (!parts) {
    if (token.includes("\ufffd")) t.append(el("span", { class: "hex unknown", text: "part" }));
    else t.append(visibleToken(token));
    return t;
  }
  for (const part of parts) {
    if (part.text !== undefined) t.append(visibleToken(part.text));
    else t.append(el("span", { class: "hex", text: hex(part.bytes) }));
  }
  return t;
}

function chipTitle(i, id, parts, token) {
  let s = `token ${i} · id ${id}`;
  for (const part of parts || []) if (part.bytes) s += ` · bytes ${hex(part.bytes)} of “${part.char}”`;
  if (!parts && token.includes("\ufffd")) s += " · which bytes of a character it holds: not known yet (the reply is still streaming)";
  return s;
}

/** Token chips for `tokens` (their texts; `ids` their ids), laid out by `lay` (bytes.mjs's
 * layout of their bytes, or null), with the groups of chips that spell a split character under
 * it. classOf(i): the chip's classes; titleOf(i): more for its title; cutNode goes before token
 * `cut`; from: the first token to draw (the ones before it are drawn already: a reply that
 * streams, with no group open at `from`). */
export function chips(box, { tokens, ids, lay, classOf, titleOf = null, cut = -1, cutNode = null, from = 0 }) {
  const groupAt = new Map((lay?.groups || []).map((g) => [g[0], g]));
  let target = box;
  let groupEnd = -1;
  for (let i = from; i < tokens.length; i++) {
    const g = groupAt.get(i);
    if (cutNode && target === box && (i === cut || (g && cut > g[0] && cut <= g[1]))) box.append(cutNode);
    if (g) {
      const label = g[2].trim() || g[2];
      const inner = el("span", { class: "group-tokens" });
      box.append(el(
        "span",
        { class: "char-group", title: `${g[1] - g[0] + 1} tokens that together spell “${label}”` },
        el("span", { class: "char", dir: "auto", text: label }),
        inner,
      ));
      target = inner;
      groupEnd = g[1];
    }
    const parts = lay ? lay.parts[i] : null;
    target.append(el(
      "span",
      { class: `tok ${classOf(i)}`, title: chipTitle(i, ids[i], parts, tokens[i]) + (titleOf?.(i) ?? ""), dataset: { id: ids[i] } },
      chipText(parts, tokens[i]),
      el("span", { class: "id", text: ids[i] }),
    ));
    if (i === groupEnd) target = box;
  }
}

const strict = new TextDecoder("utf-8", { fatal: true });

/** The text a token's hex bytes spell when they hold whole characters only, else null (a part of
 * a character, shared with a neighbour: bytes.mjs layout groups those). */
export function wholeText(h) {
  try {
    return strict.decode(fromHex(h));
  } catch {
    return null;
  }
}

/**
 * The chips under `box` made reachable from the keyboard as one stop in the tab order, a toolbar
 * of buttons (a reply's tokens, whose steps can be acted on): Tab reaches the chip last focused
 * (the first at first); the arrow keys, Home and End move between them; Enter or Space presses
 * the one focused, as a click does (what a pointer does with it: modes/steps.mjs names its step).
 */
export function steppable(box, label) {
  const all = () => [...box.querySelectorAll(".tok")];
  box.setAttribute("role", "toolbar");
  box.setAttribute("aria-label", label);
  all().forEach((chip, i) => {
    chip.setAttribute("role", "button");
    chip.tabIndex = i === 0 ? 0 : -1;
  });
  box.addEventListener("focusin", (e) => {
    const chip = e.target.closest?.(".tok");
    if (chip) for (const c of all()) c.tabIndex = c === chip ? 0 : -1; // Tab comes back to it
  });
  box.addEventListener("keydown", (e) => {
    const chips = all();
    const at = chips.indexOf(e.target.closest?.(".tok"));
    if (at < 0 || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      return chips[at].click();
    }
    const to = { ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1, Home: 0, End: chips.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    chips[Math.max(0, Math.min(chips.length - 1, to))].focus();
  });
}
