// The reply view: one reply drawn in a node the view owns, whatever the mode (Live's panel, a
// plain-text side, each of the comparison's four). A reply is a chatlens.protocol.Reply's fields:
// a reply so far while it is written (page/state.mjs replySoFar: stop_reason null), then the
// answer's (a TurnRecord, a Continuation, a Compared cell). The view draws its title, its text
// (special tokens as chips), a chip a token, and, with "why this token" on and the reply's
// candidates known, each step's candidates beside the chips.
//
// A token grows the reply in the store (page/state/growing.mjs tokenArrived); replyGrew(reply)
// then appends to the view drawn for that reply, if one is on the page: one chip and the text the
// token adds, so a reply of N tokens draws N chips, not N²/2. Where appending cannot draw what a
// whole draw draws (a character split across tokens: its chips are grouped under it; a special
// token in the text; the reply ended), the view draws itself again in its own node. What it drew
// is kept in one place, the view's own record of it (`views` below).
//
// Hooks, for views that act on a step (where it looked, another candidate taken), where the
// reply's candidates are shown ("why this token" on, the reply ended: its chips then carry
// data-step, the step's index): the node is the reply's, and
//   opts.onStep(step, reply)   a chip was picked (pointed at, tapped, reached with the arrow
//                              keys), its step's candidates shown
//   node "chatlens:candidate"  CustomEvent, bubbles, detail {reply, step, id}: a candidate row of
//                              the step shown was clicked (or Enter on it), heard by the step
//                              box (modes/steps.mjs); opts.onCandidate(step, id, reply) the same
// (A chip clicked names its step by the click itself: modes/steps.mjs listens for it.) An ended
// reply's chips are a toolbar of buttons whatever "why this token" says (views/tokens.mjs
// steppable): Tab reaches them, the arrow keys move, Enter or Space clicks the one focused.
// replyOf(node) is the reply a node (or an element inside it) draws.

import { layout, spelled } from "./bytes.mjs";
import { stopReasonText, TERMS } from "../lesson/terms.mjs";
import { count, el, fill, term } from "./dom.mjs";
import { chips, steppable, wholeText } from "./tokens.mjs";
import { bindWhy, candidatesTable, markNearTies, whyBox } from "./why.mjs";

/** "The reply: N tokens, ended: why · end_turn" (or ", writing…" while it streams): the title of
 * a reply or of a plain-text continuation. */
export function replyTitle(what, n, stopReason, writing) {
  return el(
    "div",
    { class: "reply-title", dataset: { n } },
    `${what}: `,
    el("b", { text: `${n} token${n === 1 ? "" : "s"}` }),
    writing ? ", writing…" : `, ended: ${stopReasonText(stopReason)} · `,
    writing ? null : el("code", { class: `stop stop-${stopReason}`, text: stopReason }),
  );
}

// -- the view -------------------------------------------------------------------------------------------

const views = new WeakMap(); // reply -> its view {node, opts, n, length, whole}: what it drew
const drawnBy = new WeakMap(); // node -> the reply it draws

/** The reply an element of a reply view draws (its node, or anything inside it), or null. */
export function replyOf(element) {
  const node = element?.closest?.(".reply");
  return (node && drawnBy.get(node)) ?? null;
}

const HINT = "Point at a token of the reply (or tap it, or use the arrow keys) to see the candidates the model weighed at that step.";

/**
 * The view of `reply`: its node (a div.reply). opts:
 *   what       the title's word ("The reply"); title(reply, writing) replaces the whole title line
 *   why        {gap, hint?}: each chip shows its step's candidates once the reply has them all
 *              (`gap`: the near-tie gap, build.json's); null: none
 *   special    the special ids (a Set or an array): their chips and their text drawn as special
 *   className  more classes for the node; textClass: for the text's element
 *   empty      what the text says when an ended reply wrote none (default: nothing)
 *   lead(reply) a node before the reply's text, in its line (a branch's: the token taken by hand)
 *   extra(reply) nodes after the chips (the speed, the backend, a term)
 *   onStep(step, reply), onCandidate(step, id, reply): the hooks above
 *   steps      false: its tokens are no steps to act on (a branch's own reply), so no buttons
 * Drawing a reply again (another view of it) makes the new node the one replyGrew appends to.
 */
export function replyView(reply, opts = {}) {
  const node = el("div");
  const view = { node, opts, n: 0, length: 0, whole: false };
  draw(view, reply);
  views.set(reply, view);
  drawnBy.set(node, reply);
  return node;
}

/**
 * `reply` grew (a token came) or ended: the view drawn for it, if one is on the page, shows it
 * now (appended, or drawn again in its own node). False when no view of `reply` is on the page
 * (the caller draws its panel then, which draws one).
 */
export function replyGrew(reply) {
  const view = views.get(reply);
  if (!view?.node.isConnected) return false;
  if (!append(view, reply)) draw(view, reply);
  return true;
}

const specialSet = (s) => (s instanceof Set ? s : new Set(s || []));
const idsOf = (reply) => reply.reply_ids ?? [];
const laidOut = (reply) => {
  const bytes = reply.reply_bytes;
  const n = idsOf(reply).length;
  return bytes?.length === n ? layout(spelled(bytes), bytes) : null;
};

function titleOf(view, reply) {
  const writing = !reply.stop_reason;
  const title = view.opts.title ? view.opts.title(reply, writing) : replyTitle(view.opts.what ?? "The reply", idsOf(reply).length, reply.stop_reason, writing);
  if (reply.branched) title.append(" ", byHandBadge(reply.branched)); // a reply kept from a branch says so
  return title;
}

/** "chosen by hand at token N": the mark of a reply kept from a branch (TurnRecord.branched), on
 * its view's title and its bubble in the live chat (views/chat.mjs). */
export function byHandBadge(branched) {
  return el("span", { class: "by-hand", title: `token ${branched.step + 1} was chosen by hand`, dataset: { step: branched.step },
                      text: `chosen by hand at token ${branched.step + 1}` });
}

/** The reply's text with the special tokens it wrote (the base model writes <|im_start|> as a
 * word) as chips, the rest as it is. */
function textOf(view, reply) {
  const { opts } = view;
  const special = specialSet(opts.special);
  const ids = idsOf(reply);
  const writing = !reply.stop_reason;
  const node = el("div", { class: `reply-text${opts.textClass ? ` ${opts.textClass}` : ""}`, dir: "auto" });
  const text = reply.reply_text ?? "";
  if (!text && !writing && opts.empty) fill(node, opts.empty);
  else textWithSpecials(text, new Set(ids.map((id, i) => (special.has(id) ? reply.reply_tokens?.[i] : null))), node);
  if (opts.lead) node.prepend(opts.lead(reply));
  return node;
}

/** A text with its special tokens (the strings of `specials`) drawn as chips in `node`, the rest
 * as it is: a reply's, and the prompt both models read in the comparison (views/compare.mjs). */
export function textWithSpecials(text, specials, node) {
  const names = [...specials].filter(Boolean).sort((a, b) => b.length - a.length);
  if (!names.length) return fill(node, text);
  const re = new RegExp(names.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "g");
  let at = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > at) node.append(text.slice(at, m.index));
    node.append(el("span", { class: "special", text: m[0] }));
    at = m.index + m[0].length;
  }
  if (at < text.length) node.append(text.slice(at));
  return node;
}

const tokenBox = () => el("div", { class: "tokens reply-tokens", role: "group", "aria-label": "The reply's tokens" });
const STEPS_LABEL = "The reply's tokens: the arrow keys move between them, Enter opens a token's step";
const chipClass = (special, ids) => (i) => `kind-reply${special.has(ids[i]) ? " special" : ""}`;

/** The whole reply, drawn again in the view's node. */
function draw(view, reply) {
  const { node, opts } = view;
  const ids = idsOf(reply);
  const n = ids.length;
  const writing = !reply.stop_reason;
  const special = specialSet(opts.special);
  node.className = `reply${writing ? " is-streaming" : ""}${opts.className ? ` ${opts.className}` : ""}`;
  const parts = [titleOf(view, reply), textOf(view, reply)];
  const lay = laidOut(reply);
  if (n && reply.reply_tokens?.length) {
    const box = tokenBox();
    chips(box, { tokens: reply.reply_tokens, ids, lay, classOf: chipClass(special, ids) });
    parts.push(box);
    // an ended reply's tokens are steps to act on (modes/steps.mjs): reached from the keyboard too
    if (!writing && opts.steps !== false) steppable(box, STEPS_LABEL);
    if (opts.why && !writing && reply.top_k?.length === n) {
      // a chip is a step to point at only where its candidates are there to show
      box.querySelectorAll(".tok").forEach((chip, i) => (chip.dataset.step = i));
      parts.push(candidates(view, reply, box, special));
    }
  }
  parts.push(...(opts.extra?.(reply) ?? []));
  fill(node, ...parts);
  view.n = n;
  view.length = (reply.reply_text ?? "").length;
  // appending goes on only from a reply whose tokens end on a whole character (no group left
  // open) and whose text is drawn as it is
  view.whole = writing && (n === 0 || lay !== null) && !node.querySelector(".reply-text .special");
}

/** "Why this token": the chips made things to point at, their step's candidates in a box. */
function candidates(view, reply, box, special) {
  const { opts, node } = view;
  const gap = opts.why.gap;
  const ids = idsOf(reply);
  const shown = new Set(special);
  if (reply.stop_reason === "end_turn" && ids.length) shown.add(ids[ids.length - 1]);
  const why = whyBox(opts.why.hint ?? HINT);
  let step = -1;
  bindWhy(box, why, reply, {
    tokens: reply.reply_tokens, ids, special: shown, gap, roving: opts.steps !== false,
    onShow: (i) => {
      step = i;
      opts.onStep?.(i, reply);
    },
  });
  markNearTies(box, reply.top_k, gap);
  const pick = (row) => {
    if (!row || step < 0) return;
    const id = Number(row.dataset.id);
    opts.onCandidate?.(step, id, reply);
    node.dispatchEvent(new CustomEvent("chatlens:candidate", { bubbles: true, detail: { reply, step, id } }));
  };
  why.addEventListener("click", (e) => pick(e.target.closest?.("tr[data-id]")));
  why.addEventListener("keydown", (e) => e.key === "Enter" && pick(e.target.closest?.("tr[data-id]")));
  return why;
}

/** Bring the view up to `reply` by appending (true), or false where appending would not draw
 * what draw() draws: a token that holds part of a character, a special token in the text, a
 * reply that ended, one that shrank (another reply). */
function append(view, reply) {
  const ids = idsOf(reply);
  const bytes = reply.reply_bytes;
  const text = reply.reply_text;
  const n = ids.length;
  if (!view.whole || reply.stop_reason || bytes?.length !== n || n < view.n || typeof text !== "string" || text.length < view.length) return false;
  const special = specialSet(view.opts.special);
  const parts = [];
  for (let i = view.n; i < n; i++) {
    const t = wholeText(bytes[i]);
    if (t === null || (special.has(ids[i]) && t)) return false;
    parts[i] = t ? [{ text: t }] : []; // as bytes.mjs layout lays a token of whole characters
  }
  const { node } = view;
  node.firstChild.replaceWith(titleOf(view, reply));
  node.querySelector(".reply-text").append(text.slice(view.length));
  const box = node.querySelector(".reply-tokens") ?? (n > view.n ? tokenBox() : null); // the first token's: filled, then placed
  if (box) {
    const from = view.n;
    chips(box, { tokens: reply.reply_tokens, ids, lay: { groups: [], parts }, classOf: chipClass(special, ids), from });
    if (!box.isConnected) node.querySelector(".reply-text").after(box);
  }
  view.n = n;
  view.length = text.length;
  return true;
}

// -- the panel's reply: Live and Recorded ---------------------------------------------------------------

const ms = (v) => (v >= 1000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)} ms`);

function speed(record) {
  const t = record.timings;
  if (!t) return null;
  const parts = [];
  if (t.prefill_ms !== undefined) {
    parts.push(`read ${count(record.computed_tokens, "new token")} in ${ms(t.prefill_ms)}` +
      (t.prefill_tok_s ? ` (${t.prefill_tok_s} tokens/s)` : ""));
  }
  if (t.decode_ms !== undefined) {
    parts.push(`wrote in ${ms(t.decode_ms)}` + (t.decode_tok_s ? ` (${t.decode_tok_s} tokens/s)` : ""));
  }
  return el("div", { class: "reply-speed", dataset: { stat: "speed" } }, parts.join(" · "));
}

/** The panel's reply box: the turn's reply (`reply`: its reply so far while it is written, else
 * the record itself), with its speed and what computed it once it has ended. why: {gap} or null;
 * `record`: the turn record (its special ids). */
export function replyBox(record, why, reply = record, hooks = {}) {
  if (reply.reply_text === null || reply.reply_text === undefined) return null;
  return replyView(reply, {
    what: "The reply", why, special: record.special_ids, ...hooks,
    extra: (r) => [
      el("div", { class: "reply-facts" }, speed(r),
        r.backend ? el("div", { class: "reply-backend", dataset: { stat: "backend" } }, "computed by ", el("b", { text: r.backend })) : null),
      term(`${TERMS.greedy} A reply ends with end_turn (its end-of-turn token), max_tokens (the reply limit) or stopped (you pressed Stop).`),
    ],
  });
}

/** The prediction while the user types: the model's most likely first tokens for this draft.
 * prediction: {state: "pending" | "done" | "error", result?: the predict answer, message?}. */
export function predictionBox(record, prediction, why) {
  if (!prediction) return null;
  const { state, result, message } = prediction;
  const body =
    state === "done"
      ? candidatesTable(result.top_k, result.top_k_tokens, { chosen: result.top_k[0][0], special: new Set(record.special_ids), gap: why?.gap, bytes: result.top_k_bytes })
      : el("p", { class: state === "error" ? "error" : "note", text: state === "error" ? `No prediction: ${message}` : "Predicting the first token…" });
  return el(
    "div",
    { class: `prediction is-${state}`, id: "prediction" }, // no live region: it follows each pause in typing
    el("div", { class: "prediction-title", text: "What the model would most likely write first" }),
    term("A prediction: the model's first step on this draft, computed now on your device. Nothing is sent; " +
      "if you send this message, greedy decoding starts the reply with the first of these."),
    body,
  );
}
