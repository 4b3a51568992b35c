// The reply: its text and tokens, with its stop reason, speed and backend; each token's
// candidates ("why this token"); and the prediction of the first token while the user types.

import { layout, spelled } from "./bytes.mjs";
import { stopReasonText, TERMS } from "../lesson/terms.mjs";
import { count, el, term } from "./dom.mjs";
import { chips, wholeText } from "./tokens.mjs";
import { bindWhy, candidatesTable, markNearTies, whyBox } from "./why.mjs";

/** "The reply: N tokens, ended: why · end_turn" (or ", writing…" while it streams): the title of
 * a reply or of a plain-text continuation. */
export function replyTitle(what, n, stopReason, writing) {
  return el(
    "div",
    { class: "reply-title" },
    `${what}: `,
    el("b", { text: `${n} token${n === 1 ? "" : "s"}` }),
    writing ? ", writing…" : `, ended: ${stopReasonText(stopReason)} · `,
    writing ? null : el("code", { class: `stop stop-${stopReason}`, text: stopReason }),
  );
}

// -- the reply ----------------------------------------------------------------------------------------------

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

const tokenBox = () => el("div", { class: "tokens reply-tokens", "aria-label": "The reply's tokens" });

function replyTokens(record, why) {
  const tokens = record.reply_tokens;
  const ids = record.reply_ids;
  if (!tokens || !ids || !tokens.length) return null;
  const ended = record.stop_reason === "end_turn";
  const bytes = record.reply_bytes?.length === ids.length ? record.reply_bytes : null; // none while it streams
  const lay = bytes ? layout(spelled(bytes), bytes) : null;
  const box = tokenBox();
  chips(box, { tokens, ids, lay, classOf: (i) => `kind-reply${ended && i === tokens.length - 1 ? " special" : ""}` });
  if (!why || !record.top_k?.length || record.top_k.length !== ids.length) return box;
  // "why this token": each chip shows its step's candidates
  box.querySelectorAll(".tok").forEach((chip, i) => (chip.dataset.step = i));
  const special = new Set(record.special_ids || []);
  if (ended) special.add(ids[ids.length - 1]);
  const candidates = whyBox("Point at a token of the reply (or tap it, or use the arrow keys) to see the candidates the model weighed at that step.");
  bindWhy(box, candidates, record, { tokens, ids, special, gap: why.gap });
  markNearTies(box, record.top_k, why.gap);
  return [box, candidates];
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
    { class: `prediction is-${state}`, id: "prediction", "aria-live": "polite" },
    el("div", { class: "prediction-title", text: "What the model would most likely write first" }),
    term("A prediction: the model's first step on this draft, computed now on your device. Nothing is sent; " +
      "if you send this message, greedy decoding starts the reply with the first of these."),
    body,
  );
}

export function replyBox(record, why) {
  if (record.reply_text === null || record.reply_text === undefined) return null;
  const n = record.reply_ids ? record.reply_ids.length : 0;
  const writing = !record.stop_reason;
  const box = el(
    "div",
    { class: `reply${writing ? " is-streaming" : ""}` },
    replyTitle("The reply", n, record.stop_reason, writing),
    el("div", { class: "reply-text", dir: "auto", text: record.reply_text }),
    replyTokens(record, why),
    el(
      "div",
      { class: "reply-facts" },
      speed(record),
      record.backend ? el("div", { class: "reply-backend", dataset: { stat: "backend" } }, "computed by ", el("b", { text: record.backend })) : null,
    ),
    term(`${TERMS.greedy} A reply ends with end_turn (its end-of-turn token), max_tokens (the reply limit) or stopped (you pressed Stop).`),
  );
  // What a streaming box has drawn, for appendReply: its tokens, its text, and whether its tokens
  // end on a whole character (bytes that spell the text: no group left open).
  if (writing) {
    const bytes = record.reply_bytes;
    const whole = n === 0 || (bytes?.length === n && layout(spelled(bytes), bytes) !== null);
    box._drawn = { n, length: record.reply_text.length, whole };
  }
  return box;
}

/**
 * A streaming reply box (replyBox's) brought up to `record`, the reply so far, by appending: the
 * text the new tokens add and one chip each, so a reply of N tokens draws N chips, not N²/2.
 * Returns false, drawing nothing, where appending would not draw what replyBox draws: a token
 * that holds part of a character (its chips are grouped under the character), the candidates of
 * "why this token", a reply that ended. The caller draws the box again then.
 */
export function appendReply(box, record, why) {
  const drawn = box._drawn;
  const ids = record.reply_ids;
  const bytes = record.reply_bytes;
  const text = record.reply_text;
  if (!drawn || !drawn.whole || record.stop_reason || !ids || bytes?.length !== ids.length || (why && record.top_k?.length) ||
      ids.length < drawn.n || typeof text !== "string" || text.length < drawn.length) return false;
  const n = ids.length;
  const parts = [];
  for (let i = drawn.n; i < n; i++) {
    const t = wholeText(bytes[i]);
    if (t === null) return false;
    parts[i] = t ? [{ text: t }] : []; // as bytes.mjs layout lays a token of whole characters
  }
  box.querySelector(".reply-title").replaceWith(replyTitle("The reply", n, record.stop_reason, true));
  box.querySelector(".reply-text").append(text.slice(drawn.length));
  const chipBox = box.querySelector(".reply-tokens") ?? (n > 0 ? tokenBox() : null); // the first token's: filled, then placed
  if (chipBox) chips(chipBox, { tokens: record.reply_tokens, ids, lay: { groups: [], parts }, classOf: () => "kind-reply", from: drawn.n });
  if (chipBox && !chipBox.isConnected) box.querySelector(".reply-text").after(chipBox);
  box._drawn = { n, length: text.length, whole: true };
  return true;
}
