// The page: the chat on the left, what the model reads on the right, the controls, the "try
// this" suggestions and the challenges. It calls window.chatlens like any embedder would.
// User and model text always goes in as text (views/dom.mjs), never as HTML.

import { createApi } from "./api.mjs";
import * as challenges from "../lesson/challenges.mjs";
import { addFullContext, buildControls } from "./controls.mjs";
import { setUpByHand } from "../modes/byhand.mjs";
import { send, showLive, stop, whyOf } from "../modes/live.mjs";
import { createModelBox } from "./model.mjs";
import { registerOffline } from "./offline.mjs";
import { drawPlain, setUpPlain, tokenizePlain } from "../modes/plain.mjs";
import { showRecorded } from "../modes/recorded.mjs";
import * as prefs from "./prefs.mjs";
import { createState } from "./state.mjs";
import { drawChallenges, drawSuggestions } from "../views/challenges.mjs";
import { $, debounce } from "../views/dom.mjs";
import { renderRecord } from "../views/reads.mjs";
import { drawStatus } from "../views/status.mjs";
import { setUpWorkbench } from "../modes/workbench.mjs";

const api = createApi();
window.chatlens = api;
const state = createState();
const modelBox = createModelBox(api);

// What the mode modules share: the API, the state, and the panel and challenges to update.
const page = {
  api,
  state,
  changed: () => remember(), // the live conversation changed: keep it for the next visit
  /** Draw a record in the panel; extra: {prediction} (live previews). */
  draw(record, caption, extra = {}) {
    page.drawn = [record, caption, extra];
    renderRecord($("reads"), record, {
      caption,
      view: state.view,
      why: whyOf(state),
      ...extra,
      onView: (v) => {
        state.view = v;
        page.draw(...page.drawn);
      },
    });
  },
  /** A turn the learner sent and the model answered (live) completes what it shows. */
  see(record) {
    const next = challenges.observe(state.progress, record, new Date(), { live: true });
    if (next !== state.progress) {
      state.progress = next;
      challenges.save(next);
      drawChallenges(state.progress);
    }
  },
};

const refresh = () => {
  remember();
  if (state.mode === "plain") return tokenizePlain(page);
  return state.mode === "live" ? showLive(page) : showRecorded(page);
};

/** Save what survives a reload: the mode, the system prompt, the window, the live conversation. */
function remember() {
  if (!api.settings) return;
  // The mode is saved only once the learner picks one: until then the landing mode follows the
  // store (landingMode), so downloading the model makes Live the default of the next visit.
  prefs.saveConversationPrefs({ mode: state.modeChosen ? state.mode : undefined,
                                preset: state.customChosen ? "custom" : $("preset").value,
                                custom: $("custom-system").value, window: Number($("window").value),
                                specialInText: $("special-in-text").checked });
  prefs.saveLive(state.live.turns);
}

function showNotes(notes) {
  const box = $("settings-note");
  box.textContent = notes.join(" ");
  box.hidden = notes.length === 0;
}

function setMode(mode, { chosen = false } = {}) {
  if (chosen) state.modeChosen = true;
  state.mode = mode;
  document.body.dataset.mode = mode;
  $("mode-live").setAttribute("aria-pressed", String(mode === "live"));
  $("mode-recorded").setAttribute("aria-pressed", String(mode === "recorded"));
  $("mode-plain").setAttribute("aria-pressed", String(mode === "plain"));
  $("composer").hidden = mode !== "live";
  $("suggestions-box").hidden = mode !== "live";
  $("recorded-controls").hidden = mode !== "recorded";
  const custom = $("preset").querySelector('option[value="custom"]');
  if (custom) custom.disabled = mode === "recorded";
  $("special-in-text").disabled = mode !== "live"; // the recording reads them as tokens; plain text always does
  if (mode === "recorded" && $("preset").value === "custom") {
    state.customChosen = true; // the recordings have no custom prompt; Live gets it back
    $("preset").value = api.settings.default_preset;
    $("custom-row").hidden = true;
  } else if (mode === "live" && state.customChosen) {
    state.customChosen = false;
    $("preset").value = "custom";
    $("custom-row").hidden = false;
  }
  refresh();
}

// -- status ---------------------------------------------------------------------------------------
api.onStatus(({ state: s }) => {
  drawStatus(api);
  if (!api.writing) $("next-message-note").hidden = true; // the next message is read under them
  // The chat's banner when replies cannot be had (views/chat.mjs liveBanner).
  const before = state.replies.state;
  if (api.model?.backend) state.replies = { state: "ready", why: "" };
  else if (api.model?.error) state.replies = { state: "none", why: api.model.error };
  else if (s === "text") state.replies = { state: "none", why: "replies need the model's weights: the box above downloads them" };
  else state.replies = { state: "unknown", why: "" };
  if (s === "error" || state.replies.state !== before) showLive(page);
  if (state.mode === "plain" && !state.plain?.tokens) tokenizePlain(page); // Python is up: the text's tokens
  // The model came in (downloaded now) on a visit that landed in Recorded mode: Live has replies.
  if (api.model?.backend && !state.modeChosen && state.mode === "recorded" && landed) setMode("live");
});
api.ready
  .then(({ info }) => {
    addFullContext(info.n_ctx);
    const [window, note] = prefs.checkWindow(pendingWindow, info.n_ctx);
    if (window !== undefined) $("window").value = String(window);
    if (note) showNotes([...api.notes, ...startNotes, note]);
    if (state.mode === "live") showLive(page);
    modelBox.refresh();
  })
  .catch(() => modelBox.refresh()); // the status line shows the error

// -- controls --------------------------------------------------------------------------------------
/** A setting changed: the panel reads the turn again; a reply being written keeps the settings it
 * was sent with, and the page says so. */
function settingChanged() {
  if (api.writing) $("next-message-note").hidden = false;
  refresh();
}

/** Stop the reply being written (if any), wait for it to end, then do `then`. */
async function stopFirst(then) {
  if (api.writing) await api.stop();
  then();
}

$("preset").addEventListener("change", () => {
  $("custom-row").hidden = $("preset").value !== "custom";
  settingChanged();
});
$("custom-system").addEventListener("input", debounce(settingChanged, 200));
$("window").addEventListener("change", settingChanged);
$("new-conversation").addEventListener("click", () => stopFirst(() => {
  if (state.mode === "live") {
    state.live = { turns: [] };
    $("draft").value = "";
  } else state.step = 0;
  refresh();
}));
$("mode-live").addEventListener("click", () => stopFirst(() => setMode("live", { chosen: true })));
$("mode-recorded").addEventListener("click", () => stopFirst(() => setMode("recorded", { chosen: true })));
$("mode-plain").addEventListener("click", () => stopFirst(() => setMode("plain", { chosen: true })));
$("special-in-text").addEventListener("change", settingChanged);
$("why").checked = state.why; // off at every visit: a form the browser restores would say otherwise
$("why").addEventListener("change", () => {
  state.why = $("why").checked;
  state.prediction = null;
  if (state.mode === "live") showLive(page);
  else if (state.mode === "plain") drawPlain(page);
  else if (page.drawn) page.draw(...page.drawn);
});
$("rec-prev").addEventListener("click", () => stepTo(state.step - 1));
$("rec-next").addEventListener("click", () => stepTo(state.step + 1));

function stepTo(i) {
  state.step = i;
  showRecorded(page);
}

$("draft").addEventListener("input", debounce(() => showLive(page), 120));
$("draft").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send(page);
  }
});
$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  send(page);
});
$("stop").addEventListener("click", () => stop(page));

$("challenges-reset").addEventListener("click", () => {
  state.progress = {};
  challenges.save(state.progress);
  drawChallenges(state.progress);
});

// -- model source setting ------------------------------------------------------------------------------
$("source-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = $("source-url").value.trim();
  stopFirst(() => {
    prefs.saveChoice(prefs.MODEL_KEY, v || null);
    location.reload();
  });
});
$("source-reset").addEventListener("click", () => stopFirst(() => {
  prefs.saveChoice(prefs.MODEL_KEY, null);
  location.search = ""; // a ?model= in the address would choose the same source again
}));
$("source-url").value = prefs.modelPref().url || "";
$("backend").value = api.backend;
$("backend").addEventListener("change", () => stopFirst(() => {
  prefs.saveChoice(prefs.BACKEND_KEY, $("backend").value);
  location.reload(); // the worker loads the weights once, for one backend
}));

// -- offline ------------------------------------------------------------------------------------------
registerOffline((activate) => {
  $("update").hidden = false;
  $("update-reload").onclick = activate;
});

// -- start ---------------------------------------------------------------------------------------------
drawSuggestions((text) => {
  $("draft").value = text;
  $("draft").focus();
  showLive(page);
});
drawChallenges(state.progress);
let pendingWindow;
let startNotes = [];
let landed = false; // the landing mode was chosen by landingMode()
setUpWorkbench(api);
setUpByHand(api);
api.settingsReady.then(() => {
  buildControls(api.settings);
  state.nearTieGap = api.settings.near_tie_gap ?? state.nearTieGap;
  setUpPlain(page);
  const p = prefs.conversationPrefs(api.settings);
  if (p.preset) $("preset").value = p.preset;
  if (p.custom !== undefined) $("custom-system").value = p.custom;
  $("custom-row").hidden = $("preset").value !== "custom";
  if (p.window) $("window").value = String(p.window);
  pendingWindow = p.pendingWindow;
  startNotes = p.notes;
  showNotes([...api.notes, ...startNotes]);
  if (p.specialInText !== undefined) $("special-in-text").checked = p.specialInText;
  state.live.turns = prefs.loadLive();
  state.modeChosen = Boolean(p.mode);
  if (p.mode) return setMode(p.mode);
  return landingMode().then((mode) => {
    landed = true;
    setMode(mode);
  });
}, () => drawStatus(api)); // the status line says why build.json could not be read

/** Where a visit with no mode of its own lands: Live once the model is stored (it can answer),
 * else Recorded, which has real replies, with the download offered beside it. */
async function landingMode() {
  try {
    await api.sourceReady;
    return (await api.downloads.status())?.complete ? "live" : "recorded";
  } catch {
    return "recorded"; // no source or no store: the recording still works
  }
}
