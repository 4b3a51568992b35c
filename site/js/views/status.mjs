// The status line (is Python up, is the model read) and the model-source line in the settings.

import { elideUrls, shortened } from "../lesson/terms.mjs";
import { $ } from "./dom.mjs";

// Each state's headline; the worker's detail follows it only where it adds something.
const STATUS_TEXT = {
  booting: "Starting Python",
  loading: "Reading the tokenizer",
  text: "Previews work; replies need the model",
  weights: "Loading the model",
  ready: "Ready",
  error: "Error",
};

const words = (s) => new Set(s.toLowerCase().replace(/'s\b/g, "").match(/[a-z0-9]+/g) || []);
const FILLER = new Set(["the", "a", "an", "and", "of", "is", "are", "to", "its", "s"]);

/** Whether `detail` says nothing its headline does not (the worker says "the tokenizer and chat
 * template are ready; replies need the model's weights" where the headline already does). */
export function restates(headline, detail) {
  const head = words(headline);
  // what every headline takes as known: the text side being read is its tokenizer and chat
  // template, and the model is its weights
  const known = new Set([...head, "tokenizer", "template", "chat", "ready", "weights", "loading", "model"]);
  const rest = [...words(detail)].filter((w) => !FILLER.has(w));
  return rest.length > 0 && rest.every((w) => known.has(w)) && rest.some((w) => head.has(w));
}

/**
 * What the status pill and the settings' source line say, with no DOM: {state, headline, shown
 * (the pill's detail, "" for none), title, label, error}. A URL in the worker's detail is
 * shortened as the labels shorten it (a ?model= of thousands of characters would fill the pill
 * and the line). What the page knows of the source (app.mjs): note, the reason it cannot be read
 * (page/hosts.mjs hostNote; null: none); weights, which weights it holds, in a sentence
 * (page/weights.mjs weightsSentence; null before the source is known).
 */
export function statusView(api, { note = null, weights = null } = {}) {
  const { state } = api.status;
  const detail = api.status.detail ? elideUrls(api.status.detail) : api.status.detail;
  // A reply being written is what the page is doing, whatever the worker last said.
  const headline = api.writing && state === "ready" ? "Writing a reply" : STATUS_TEXT[state] || state;
  const unreadable = state === "error" && note;
  const shown = unreadable ? `this page cannot read ${new URL(api.source.url).host} (the model box says why)`
    : detail && !restates(headline, detail) ? detail : "";
  const where = api.source ? `${api.source.label} (${shortened(api.source.url)})` : state === "error" ? "not resolved" : "resolving…";
  return {
    state: api.writing && state === "ready" ? "writing" : state,
    headline,
    shown,
    title: detail ? `${headline}: ${detail}` : headline,
    label: state === "error" ? `${where}: failed: ${detail}` : api.source && weights ? `${where}. ${weights}` : where,
    error: state === "error",
  };
}

/** The status line drawn; known: statusView's {note, weights}. */
export function drawStatus(api, known) {
  const v = statusView(api, known);
  $("status").dataset.state = v.state;
  $("status-text").textContent = v.headline;
  $("status-detail").textContent = v.shown;
  $("status-detail").hidden = !v.shown;
  $("status").title = v.title;
  // the settings line: the model source as soon as it is known, and why it failed if it did
  const label = $("source-label");
  label.textContent = v.label;
  label.classList.toggle("error", v.error);
}
