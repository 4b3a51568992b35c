// The page: the chat on the left, what the model reads on the right, the controls, the "try
// this" suggestions and the challenges. It calls window.chatlens like any embedder would.
// User and model text always goes in as text (textContent, text nodes), never as HTML.

import { createApi, REPLY_LIMIT } from "./api.mjs";
import * as challenges from "./challenges.mjs";
import { el, renderMessage, renderRecord } from "./panel.mjs";
import { describe, findConversation, loadRecorded, presetsIn, userMessage } from "./recorded.mjs";
import { SETTING_KEY } from "./source.mjs";

const SUGGESTIONS = [
  { text: "Who are you?", hint: "with None, then with Pirate" },
  { text: "What year is it?", hint: "then try Today's date" },
  { text: "Hi! My name is Priya.", hint: "then ask “What is my name?”" },
  { text: "What is my name?", hint: "does it still know?" },
  { text: "Give me one tip for sleeping better.", hint: "" },
  {
    text: "Tell me about the history of the printing press, from Gutenberg's workshop in Mainz to the newspapers of the nineteenth century.",
    hint: "long: fills a 256-token window",
  },
];

const $ = (id) => document.getElementById(id);
const api = createApi();
window.chatlens = api;

const state = {
  mode: "live",
  view: "text",
  live: { turns: [] }, // each: {user, record, reply?, note?} (the messages derive from them)
  draftSeq: 0,
  recorded: null, // the recorded file, once loaded
  recordedError: null,
  step: 0,
  progress: challenges.load(),
};

// -- status ---------------------------------------------------------------------------------------
const STATUS_TEXT = { booting: "Booting Python", loading: "Loading the tokenizer", ready: "Ready", error: "Error" };
api.onStatus(({ state: s, detail }) => {
  const box = $("status");
  box.dataset.state = s;
  $("status-text").textContent = STATUS_TEXT[s] || s;
  $("status-detail").textContent = detail || "";
  drawSource();
  if (s === "error") showLive();
});
api.ready
  .then(() => {
    if (state.mode === "live") showLive();
  })
  .catch(() => {}); // the status line shows the error

/** The settings line: the model source as soon as it is known, and why it failed if it did. */
function drawSource() {
  const { state: s, detail } = api.status;
  const where = api.source ? `${api.source.label} (${api.source.url})` : s === "error" ? "not resolved" : "resolving…";
  const label = $("source-label");
  label.textContent = s === "error" ? `${where}: failed: ${detail}` : where;
  label.classList.toggle("error", s === "error");
}

// -- controls --------------------------------------------------------------------------------------
const controls = () => ({
  preset: $("preset").value,
  custom: $("preset").value === "custom" ? $("custom-system").value : undefined,
  window: Number($("window").value),
});

/** The arguments of a preview or run call for `messages`, from the controls. */
function callArgs(messages) {
  const { preset, custom, window } = controls();
  const system = preset === "custom" ? { preset: "custom", custom } : { preset };
  return { ...system, messages, window, reserve: REPLY_LIMIT };
}

$("preset").addEventListener("change", () => {
  $("custom-row").hidden = $("preset").value !== "custom";
  refresh();
});
$("custom-system").addEventListener("input", debounce(refresh, 200));
$("window").addEventListener("change", refresh);
$("new-conversation").addEventListener("click", () => {
  if (state.mode === "live") {
    state.live = { turns: [] };
    $("draft").value = "";
  } else state.step = 0;
  refresh();
});
$("mode-live").addEventListener("click", () => setMode("live"));
$("mode-recorded").addEventListener("click", () => setMode("recorded"));
$("rec-prev").addEventListener("click", () => stepTo(state.step - 1));
$("rec-next").addEventListener("click", () => stepTo(state.step + 1));

function setMode(mode) {
  state.mode = mode;
  document.body.dataset.mode = mode;
  $("mode-live").setAttribute("aria-pressed", String(mode === "live"));
  $("mode-recorded").setAttribute("aria-pressed", String(mode === "recorded"));
  $("composer").hidden = mode !== "live";
  $("suggestions-box").hidden = mode !== "live";
  $("recorded-controls").hidden = mode !== "recorded";
  $("preset").querySelector('option[value="custom"]').disabled = mode === "recorded";
  if (mode === "recorded" && $("preset").value === "custom") {
    $("preset").value = "none";
    $("custom-row").hidden = true;
  }
  refresh();
}

function refresh() {
  if (state.mode === "live") showLive();
  else showRecorded();
}

// -- live mode ---------------------------------------------------------------------------------------
$("draft").addEventListener("input", debounce(showLive, 120));
$("draft").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  send();
});

/** The live chat; messages the shown record no longer reads (by index) are marked dropped. */
function renderLiveChat(dropped = new Set()) {
  const chat = $("chat");
  chat.replaceChildren();
  if (!state.live.turns.length) {
    chat.append(el("p", { class: "empty", text: "Type a message below. The right side shows, as you type, the exact text the model would read." }));
  }
  let index = 0;
  for (const t of state.live.turns) {
    const u = bubble("user", t.user, t.record);
    if (dropped.has(index++)) u.classList.add("is-dropped");
    chat.append(u);
    if (t.reply !== undefined) {
      const a = bubble("assistant", t.reply, t.record);
      if (dropped.has(index++)) a.classList.add("is-dropped");
      chat.append(a);
    } else if (t.note) chat.append(el("div", { class: `msg note ${t.noteClass || ""}`, text: t.note }));
  }
  chat.scrollTop = chat.scrollHeight;
}

const droppedOf = (record) => new Set(record.dropped_turns.map((d) => d.message_index));

function bubble(role, text, record) {
  return el(
    "div",
    { class: `msg ${role}` },
    el("div", { class: "who", text: role === "user" ? "You" : "SmolLM2" }),
    el("div", { class: "content", text }),
    role === "assistant" && record?.stop_reason
      ? el("div", { class: "meta" }, "stop: ", el("code", { text: record.stop_reason }), ` · ${record.reply_ids.length} tokens`)
      : null,
  );
}

function liveMessages(extra) {
  const msgs = [];
  for (const t of state.live.turns) {
    msgs.push({ role: "user", content: t.user });
    if (t.reply !== undefined) msgs.push({ role: "assistant", content: t.reply });
  }
  if (extra !== undefined) msgs.push({ role: "user", content: extra });
  return msgs;
}

async function showLive() {
  if (state.mode !== "live") return;
  const reads = $("reads");
  const draft = $("draft").value;
  const seq = ++state.draftSeq;
  const last = state.live.turns[state.live.turns.length - 1];
  if (api.status.state === "error") {
    renderLiveChat();
    return renderMessage(reads, `The worker failed: ${api.status.detail}`, "error");
  }
  if (!draft.trim()) {
    renderLiveChat(last?.record ? droppedOf(last.record) : undefined);
    if (last?.record) return drawRecord(last.record, `Turn ${state.live.turns.length}: what the model read when you sent it`);
    if (last) return renderMessage(reads, "Waiting for Python to start: the message is sent when it is ready.");
    return renderMessage(reads, api.status.state === "ready"
      ? "Start typing: this side previews the prompt that would be sent, with its token counts."
      : "Python is starting in a worker; the preview appears when it is ready. Recorded mode works right away.");
  }
  if (api.status.state !== "ready") {
    renderLiveChat();
    renderMessage(reads, "Waiting for Python to start before the preview…");
  }
  try {
    const record = await api.preview(callArgs(liveMessages(draft)));
    if (seq !== state.draftSeq || state.mode !== "live") return; // a newer preview is on its way
    renderLiveChat(droppedOf(record));
    drawRecord(record, "Preview: what the model would read if you sent this now");
  } catch (e) {
    if (seq !== state.draftSeq || state.mode !== "live") return;
    renderLiveChat();
    renderMessage(reads, `Cannot preview: ${e.message}`, "error");
  }
}

// One message at a time: a second Enter while the first waits (for Python to boot, or for its
// reply) sends nothing. The draft is cleared at once, so text typed during the wait is kept
// for the next message; the sent text lives in its turn, shown before Python has read it.
let sending = false;
async function send() {
  const text = $("draft").value;
  if (sending || !text.trim() || state.mode !== "live") return;
  sending = true;
  $("send").disabled = true;
  const args = callArgs(liveMessages(text));
  const turn = { user: text, record: null };
  const live = state.live;
  live.turns.push(turn);
  $("draft").value = "";
  showLive();
  try {
    try {
      turn.record = await api.preview(args);
    } catch (e) {
      const i = live.turns.indexOf(turn);
      if (i >= 0) live.turns.splice(i, 1);
      if (!$("draft").value.trim()) $("draft").value = text; // nothing new typed: give it back
      if (state.mode === "live" && live === state.live) {
        renderLiveChat();
        renderMessage($("reads"), `Cannot send: ${e.message}`, "error");
      }
      return;
    }
    if (live !== state.live) return; // a new conversation started meanwhile
    see(turn.record);
    showLive();
    try {
      const full = await api.run({ ...args, maxTokens: REPLY_LIMIT });
      turn.record = full;
      turn.reply = full.reply_text;
      see(full);
    } catch (e) {
      turn.note = `No reply: ${e.message}`;
      turn.noteClass = "no-reply";
    }
    showLive();
  } finally {
    sending = false;
    $("send").disabled = false;
  }
}

// -- recorded mode -----------------------------------------------------------------------------------
async function ensureRecorded() {
  if (state.recorded || state.recordedError) return;
  try {
    state.recorded = await loadRecorded();
    $("rec-about").textContent = describe(state.recorded);
  } catch (e) {
    state.recordedError = e.message;
  }
}

async function showRecorded() {
  await ensureRecorded();
  if (state.mode !== "recorded") return;
  const chat = $("chat");
  const reads = $("reads");
  if (state.recordedError) {
    chat.replaceChildren(el("p", { class: "error", text: state.recordedError }));
    return renderMessage(reads, state.recordedError, "error");
  }
  const { preset, window } = controls();
  const conv = findConversation(state.recorded, preset, window);
  if (!conv) {
    const have = presetsIn(state.recorded).join(", ");
    chat.replaceChildren(el("p", { class: "empty", text: `No recorded conversation for ${preset} at ${window} tokens (recorded: ${have}).` }));
    return renderMessage(reads, "Pick a recorded preset and window.");
  }
  const n = conv.turns.length;
  state.step = Math.max(0, Math.min(state.step, n - 1));
  $("rec-pos").textContent = `Turn ${state.step + 1} of ${n}`;
  $("rec-prev").disabled = state.step === 0;
  $("rec-next").disabled = state.step === n - 1;
  chat.replaceChildren();
  const dropped = droppedOf(conv.turns[state.step]);
  for (let i = 0; i <= state.step; i++) {
    const rec = conv.turns[i];
    const u = bubble("user", userMessage(state.recorded, conv, i), rec);
    const a = bubble("assistant", rec.reply_text ?? "", rec);
    // history the current turn no longer reads is marked as dropped
    if (dropped.has(2 * i)) u.classList.add("is-dropped");
    if (dropped.has(2 * i + 1)) a.classList.add("is-dropped");
    if (i === state.step) u.classList.add("current");
    chat.append(u, a);
  }
  chat.scrollTop = chat.scrollHeight;
  const rec = conv.turns[state.step];
  see(rec);
  drawRecord(rec, `Recorded turn ${state.step + 1} of ${n}: what the model read, and its reply`);
}

function stepTo(i) {
  state.step = i;
  showRecorded();
}

// -- the panel, suggestions and challenges ---------------------------------------------------------
let lastDrawn = null;
function drawRecord(record, caption) {
  lastDrawn = [record, caption];
  renderRecord($("reads"), record, {
    caption,
    view: state.view,
    onView: (v) => {
      state.view = v;
      drawRecord(...lastDrawn);
    },
  });
}

function see(record) {
  const next = challenges.observe(state.progress, record);
  if (next !== state.progress) {
    state.progress = next;
    challenges.save(next);
    drawChallenges();
  }
}

function drawChallenges() {
  const n = challenges.done(state.progress);
  $("challenge-count").textContent = `${n} of ${challenges.CHALLENGES.length} complete`;
  $("challenges").replaceChildren(
    ...challenges.CHALLENGES.map((c) =>
      el(
        "li",
        { class: state.progress[c.id] ? "done" : "", dataset: { challenge: c.id } },
        el("span", { class: "check", "aria-hidden": "true", text: state.progress[c.id] ? "✓" : "○" }),
        el("b", { text: c.title }),
        " ",
        el("span", { text: c.text }),
      ),
    ),
  );
}

$("challenges-reset").addEventListener("click", () => {
  state.progress = {};
  challenges.save(state.progress);
  drawChallenges();
});

function drawSuggestions() {
  $("suggestions").replaceChildren(
    ...SUGGESTIONS.map((s) =>
      el(
        "button",
        {
          type: "button",
          class: "suggestion",
          title: s.hint,
          onclick: () => {
            $("draft").value = s.text;
            $("draft").focus();
            showLive();
          },
        },
        s.text.length > 60 ? s.text.slice(0, 57) + "…" : s.text,
        s.hint ? el("small", { text: s.hint }) : null,
      ),
    ),
  );
}

// -- model source setting ------------------------------------------------------------------------------
$("source-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = $("source-url").value.trim();
  if (v) localStorage.setItem(SETTING_KEY, v);
  else localStorage.removeItem(SETTING_KEY);
  location.reload();
});
$("source-reset").addEventListener("click", () => {
  localStorage.removeItem(SETTING_KEY);
  location.reload();
});
$("source-url").value = localStorage.getItem(SETTING_KEY) || "";

function debounce(fn, ms) {
  let t = null;
  return (...a) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...a), ms);
  };
}

// -- start ---------------------------------------------------------------------------------------------
$("reply-limit").textContent = REPLY_LIMIT;
drawSuggestions();
drawChallenges();
setMode(new URLSearchParams(location.search).get("mode") === "recorded" ? "recorded" : "live");
