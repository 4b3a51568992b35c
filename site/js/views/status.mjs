// The status line (is Python up, is the model read) and the model-source line in the settings.

import { weightsSentence } from "../weights.mjs";
import { $ } from "./dom.mjs";

const STATUS_TEXT = {
  booting: "Booting Python",
  loading: "Loading the tokenizer",
  text: "Tokenizer and template ready; replies need the model",
  weights: "Loading the model",
  ready: "Ready",
  error: "Error",
};

export function drawStatus(api) {
  const { state, detail } = api.status;
  $("status").dataset.state = state;
  $("status-text").textContent = STATUS_TEXT[state] || state;
  $("status-detail").textContent = detail || "";
  drawSource(api);
}

/** The settings line: the model source as soon as it is known, and why it failed if it did. */
function drawSource(api) {
  const { state, detail } = api.status;
  const where = api.source ? `${api.source.label} (${api.source.url})` : state === "error" ? "not resolved" : "resolving…";
  const label = $("source-label");
  label.textContent = state === "error" ? `${where}: failed: ${detail}`
    : api.source ? `${where}. ${weightsSentence(api.source)}` : where;
  label.classList.toggle("error", state === "error");
}
