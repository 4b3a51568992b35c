// The recorded conversations of site/recorded.json (written by `python -m chatlens record`): the
// lesson's five messages, one conversation per system prompt preset and window. Recorded mode
// needs no download and no Python: every turn record is in the file.

import { readControls } from "../page/controls.mjs";
import { recordedTarget } from "../lesson/suggestions.mjs";
import { drawRecordedSuggestions } from "../views/challenges.mjs";
import { drawChat, droppedOf } from "../views/chat.mjs";
import { $, el, fill } from "../views/dom.mjs";
import { renderMessage } from "../views/overflow.mjs";
import { weightsForDevelopers, weightsSentence } from "../page/weights.mjs";
import { recordedKvNote } from "../views/lessonfigures.mjs";

export async function loadRecorded(url = new URL("../../recorded.json", import.meta.url)) {
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

// -- recorded mode ----------------------------------------------------------------------------------


async function ensureRecorded(store) {
  const { state } = store;
  if (state.recorded || state.recordedError) return;
  try {
    store.recordedLoaded(await loadRecorded());
    // What the recording is and which weights speak, for a learner; the file's details and how to
    // record another, for a developer, folded away.
    fill($("rec-about"),
      el("strong", { class: "weights", text: weightsSentence(state.recorded) }),
      el("details", { class: "for-developers" }, el("summary", { text: "For developers: the file" }),
        el("span", { class: "recorded-detail", text: describe(state.recorded) }),
        el("span", { class: "rerecord", text: weightsForDevelopers(state.recorded) })),
    );
  } catch (e) {
    store.recordedFailed(e.message);
  }
}

/** The "Try this" list of recorded mode: each suggestion shows the recorded turn it is about. */
function drawTryThis(page) {
  const { state } = page;
  const jump = (s) => {
    const t = recordedTarget(s, state.recorded, readControls());
    if (!t) return;
    if (Number($("window").value) !== t.window) $("window").value = String(t.window);
    page.store.stepped(t.step);
  };
  drawRecordedSuggestions(jump, (s) => recordedTarget(s, state.recorded, readControls()) !== null);
}

// -- the windows the recording has ------------------------------------------------------------------

/** In Recorded mode the window select offers only the recorded windows; a window chosen in Live
 * (the model's whole context, say) waits (the store's windowAside), said in a line, and comes
 * back on leaving the mode. */
function offerRecordedWindows({ state, store }, doc, preset) {
  const select = $("window");
  const have = [...new Set(doc.conversations.filter((c) => c.preset === preset).map((c) => Number(c.window)))].sort((a, b) => a - b);
  if (!have.length) return;
  for (const o of select.options) o.disabled = !have.includes(Number(o.value));
  const chosen = Number(select.value);
  const note = $("rec-window-note");
  if (!have.includes(chosen)) {
    if (state.windowAside === null) store.windowAside(chosen);
    select.value = String(have.filter((w) => w <= chosen).pop() ?? have[0]);
  }
  if (state.windowAside !== null) {
    note.textContent = `The recording has windows of ${have.join(", ")} tokens; your window of ${state.windowAside} comes back in Live mode.`;
  }
  note.hidden = state.windowAside === null;
}

function leftRecorded({ state, store }) {
  const select = $("window");
  for (const o of select.options) o.disabled = false;
  $("rec-window-note").hidden = true;
  if (state.windowAside === null) return;
  const back = String(state.windowAside);
  store.windowAside(null);
  if ([...select.options].some((o) => o.value === back) && select.value !== back) {
    select.value = back;
    select.dispatchEvent(new Event("change")); // the page reads the turn again under it
  }
}

/** Watch the mode and the window select (once). */
export function setUpRecorded(page) {
  new MutationObserver(() => {
    if (document.body.dataset.mode !== "recorded") leftRecorded(page);
  }).observe(document.body, { attributes: true, attributeFilter: ["data-mode"] });
  // The model's whole context joins the select once Python has read it (and a ?window= of that
  // size is chosen then): in Recorded mode it waits like any window the recording lacks.
  new MutationObserver(() => {
    if (document.body.dataset.mode === "recorded" && page.state.recorded) offerRecordedWindows(page, page.state.recorded, readControls().preset);
  }).observe($("window"), { childList: true });
}

/** Draw Recorded mode: the recorded conversation for the preset and window of `controls` (the
 * snapshot of the controls, page/controls.mjs readControls), to the turn asked for. */
export async function showRecorded(page, controls) {
  const { state, store } = page;
  await ensureRecorded(store);
  if (state.mode !== "recorded") return;
  if (state.recorded) offerRecordedWindows(page, state.recorded, controls.preset);
  const chat = $("chat");
  const reads = $("reads");
  if (state.recordedError) {
    fill(chat, el("p", { class: "error", text: state.recordedError }));
    return renderMessage(reads, state.recordedError, "error");
  }
  const { preset, window } = readControls(); // the recorded windows offered may have changed the window
  const conv = findConversation(state.recorded, preset, window);
  if (!conv) {
    const have = presetsIn(state.recorded).join(", ");
    drawChat(chat, [], `No recorded conversation for ${preset} at ${window} tokens (recorded: ${have}).`);
    return renderMessage(reads, "Pick a recorded preset and window.");
  }
  const n = conv.turns.length;
  store.stepShown(Math.max(0, Math.min(state.step, n - 1)));
  $("rec-pos").textContent = `Turn ${state.step + 1} of ${n}`;
  $("rec-prev").disabled = state.step === 0;
  $("rec-next").disabled = state.step === n - 1;
  const dropped = droppedOf(conv.turns[state.step]); // history the current turn no longer reads
  const items = [];
  for (let i = 0; i <= state.step; i++) {
    const rec = conv.turns[i];
    items.push({ role: "user", text: userMessage(state.recorded, conv, i), record: rec, dropped: dropped.has(2 * i),
                 current: i === state.step });
    items.push({ role: "assistant", text: rec.reply_text ?? "", record: rec, dropped: dropped.has(2 * i + 1) });
  }
  drawChat(chat, items);
  drawTryThis(page);
  const rec = conv.turns[state.step];
  // challenges it shows are marked "seen in the recording", never done
  store.observed(rec, { live: false, where: `${preset} · ${window} tokens · turn ${state.step + 1}` });
  // where the lesson gives this turn's cache figures, the caption says why the recording's differ
  const kv = recordedKvNote(conv, state.step, state.recorded.conversations.map((c) => Number(c.window)));
  page.draw(rec, `Recorded turn ${state.step + 1} of ${n}: what the model read, and its reply${kv ? `. ${kv}` : ""}`);
}
