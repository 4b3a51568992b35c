// Recorded mode: the five-message conversation of site/recorded.json (written by
// `python -m chatlens record`), one conversation per system prompt preset and window.
// It needs no download and no Python: every turn record is in the file.

export async function loadRecorded(url = new URL("../recorded.json", import.meta.url)) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`no recorded conversations (${new URL(url).pathname}: HTTP ${r.status})`);
  return r.json();
}

export function findConversation(doc, preset, window) {
  return doc.conversations.find((c) => c.preset === preset && Number(c.window) === Number(window)) || null;
}

export function presetsIn(doc) {
  return [...new Set(doc.conversations.map((c) => c.preset))];
}

/** One line that says which weights recorded the file, when, and how. */
export function describe(doc) {
  const m = doc.model || {};
  const sha = m.sha256 ? ` (sha256 ${m.sha256.slice(0, 8)}…)` : "";
  const from = m.source ? `, ${m.source}` : "";
  const limit = doc.reply_limit ? `, replies up to ${doc.reply_limit} tokens` : "";
  return `Recorded ${doc.date || ""} with ${m.file || "an unnamed model"}${sha}${from}: greedy decoding${limit}.`;
}

/** The user message of turn i. */
export function userMessage(doc, conv, i) {
  const list = conv.messages || doc.messages;
  if (list && list[i] !== undefined) return typeof list[i] === "string" ? list[i] : list[i].content;
  const piece = conv.turns[i].pieces.find((p) => p.kind === "new");
  return piece ? piece.text : "";
}
