// "Why this token": the candidates the model weighed at one step of a reply (a record's top_k:
// [id, logit, probability] best first, with top_k_tokens their text and top_k_bytes their bytes),
// drawn as a table, and the
// reply's tokens made into things to point at: hover, tap or click a token (or focus the row and
// use the arrow keys) and its step's candidates show in the box beside them.
//
// A near-tie: the step's two best logits are closer than the site's near_tie_gap (build.json, from
// chatlens.defaults), the gap at which another device's rounding can choose the other token.

import { fromHex, hex } from "./bytes.mjs";
import { visibleToken } from "./tokens.mjs";
import { el, fill } from "./dom.mjs";
import { percent } from "../lesson/terms.mjs";

export const NEAR_TIE_NOTE =
  "The two best candidates are nearly tied: another device (another browser, GPU or CPU) rounds the numbers " +
  "a little differently and could choose the other one, and the reply would go on from there.";

/** Whether a step's two best candidates are closer than `gap` logits. */
export const isNearTie = (step, gap) => Boolean(step && step.length > 1 && step[0][1] - step[1][1] < gap);

// A probability as a percentage (lesson/terms.mjs, where the lesson's sentences write it too).
export { percent };

/** A candidate as the table shows it: a special token as a chip, a token that holds part of a
 * character as its bytes (hex, from the record), any other as its visible text. */
function candidate(id, text, bytes, special) {
  if (special.has(id)) return el("span", { class: "cand special", text });
  if (bytes && text.includes("\ufffd")) return el("span", { class: "cand", title: text }, el("span", { class: "hex", text: hex(fromHex(bytes)) }));
  return el("span", { class: "cand", text: visibleToken(text) });
}

/** The table of one step's candidates. chosen: the id the model took (marked); special: ids of
 * special tokens (drawn as chips); bytes: each candidate's bytes (the step's top_k_bytes). */
export function candidatesTable(step, tokens, { chosen, special = new Set(), gap, caption, bytes = null } = {}) {
  const body = el("tbody");
  step.forEach(([id, logit, p], rank) => {
    const text = tokens?.[rank] ?? "";
    body.append(el(
      "tr",
      { class: id === chosen ? "chosen" : null, dataset: { id, p, logit } },
      el("td", { class: "num", text: rank + 1 }),
      el("td", {}, candidate(id, text, bytes?.[rank], special)),
      el("td", { class: "num prob" }, el("span", { class: "bar", style: `width:${Math.max(1, Math.round(60 * p))}px` }), percent(p)),
      el("td", { class: "num", text: logit.toFixed(2) }),
      el("td", { class: "num id", text: id }),
    ));
  });
  const tie = isNearTie(step, gap);
  return el(
    "div",
    { class: `candidates${tie ? " is-near-tie" : ""}` },
    caption ? el("p", { class: "why-caption", text: caption }) : null,
    el(
      "table",
      { class: "why-table" },
      el("thead", {}, el("tr", {}, ["#", "token", "probability", "logit", "id"].map((h) => el("th", { text: h })))),
      body,
    ),
    tie ? el("p", { class: "near-tie-note" },
      el("b", { text: `Near-tie: the two best are ${(step[0][1] - step[1][1]).toFixed(4)} logits apart (less than ${gap}). ` }),
      NEAR_TIE_NOTE) : null,
  );
}

/** The box a reply's candidates show in, with a hint until a token is chosen. */
export function whyBox(hint) {
  return el("div", { class: "why" }, el("p", { class: "why-hint", text: hint }));
}

/**
 * Make the tokens under `container` (elements with data-step = the reply token's index) show
 * their step's candidates in `box`: on hover, tap, click or focus, and with the arrow keys while
 * the container has the focus. reply: a reply's fields with top_k and top_k_tokens (a turn
 * record, a continuation, a comparison's cell); tokens: the reply's tokens as text (for the
 * caption); onShow(step): a step's candidates are shown (views/reply.mjs's hooks). roving: the
 * tokens are focused one by one (views/tokens.mjs steppable moves the focus): the one focused
 * shows its candidates, and the container is no stop of its own.
 */
export function bindWhy(container, box, { top_k: topK, top_k_tokens: topTokens, top_k_bytes: topBytes }, { tokens = [], ids = [], special, gap, label = "", onShow = null, roving = false }) {
  const steps = () => [...container.querySelectorAll("[data-step]")];
  let picked = -1;
  const show = (i) => {
    if (!(i >= 0 && i < topK.length) || i === picked) return;
    picked = i;
    for (const n of steps()) n.classList.toggle("picked", Number(n.dataset.step) === i);
    const token = tokens[i] ?? "";
    const caption = `${label}token ${i + 1}, ${special?.has(ids[i]) ? token : `“${visibleToken(token)}”`}: the candidates the model weighed` +
      " (it took the most likely: greedy decoding)";
    fill(box, candidatesTable(topK[i], topTokens?.[i], { chosen: ids[i], special, gap, caption, bytes: topBytes?.[i] }));
    onShow?.(i);
  };
  const from = (e) => e.target.closest?.("[data-step]");
  container.addEventListener("mouseover", (e) => from(e) && show(Number(from(e).dataset.step)));
  container.addEventListener("click", (e) => from(e) && show(Number(from(e).dataset.step)));
  if (roving) {
    container.addEventListener("focusin", (e) => from(e) && show(Number(from(e).dataset.step)));
    return show;
  }
  container.addEventListener("focusin", () => show(picked < 0 ? 0 : picked));
  container.addEventListener("keydown", (e) => {
    const to = { ArrowRight: picked + 1, ArrowDown: picked + 1, ArrowLeft: picked - 1, ArrowUp: picked - 1, Home: 0, End: topK.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    show(Math.max(0, Math.min(topK.length - 1, to)));
  });
  container.tabIndex = 0;
  container.setAttribute("aria-label", `${label}the reply's tokens: point at one, or use the arrow keys, to see the candidates the model weighed`);
  return show;
}

/** Mark each token element of `container` that stands for a near-tie step. */
export function markNearTies(container, topK, gap) {
  for (const n of container.querySelectorAll("[data-step]")) {
    const tie = isNearTie(topK[Number(n.dataset.step)], gap);
    n.classList.toggle("near-tie", tie);
    if (tie) n.title = `${n.title ? `${n.title} · ` : ""}near-tie: the two best candidates are within ${gap} logits`;
  }
}
