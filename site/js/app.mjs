// The page: the chat on the left, what the model reads on the right, the controls, the "try
// this" suggestions and the challenges. It calls window.chatlens like any embedder would.
// User and model text always goes in as text (views/dom.mjs), never as HTML.

import { createApi } from "./api.mjs";
import * as challenges from "./challenges.mjs";
import { addFullContext, buildControls } from "./controls.mjs";
import { send, showLive } from "./live.mjs";
import { showRecorded } from "./recorded.mjs";
import { SETTING_KEY } from "./source.mjs";
import { createState } from "./state.mjs";
import { drawChallenges, drawSuggestions } from "./views/challenges.mjs";
import { $, debounce } from "./views/dom.mjs";
import { renderRecord } from "./views/reads.mjs";
import { drawStatus } from "./views/status.mjs";

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

const api = createApi();
window.chatlens = api;
const state = createState();

// What the mode modules share: the API, the state, and the panel and challenges to update.
const page = {
  api,
  state,
  draw(record, caption) {
    page.drawn = [record, caption];
    renderRecord($("reads"), record, {
      caption,
      view: state.view,
      onView: (v) => {
        state.view = v;
        page.draw(...page.drawn);
      },
    });
  },
  see(record) {
    const next = challenges.observe(state.progress, record);
    if (next !== state.progress) {
      state.progress = next;
      challenges.save(next);
      drawChallenges(state.progress);
    }
  },
};

const refresh = () => (state.mode === "live" ? showLive(page) : showRecorded(page));

function setMode(mode) {
  state.mode = mode;
  document.body.dataset.mode = mode;
  $("mode-live").setAttribute("aria-pressed", String(mode === "live"));
  $("mode-recorded").setAttribute("aria-pressed", String(mode === "recorded"));
  $("composer").hidden = mode !== "live";
  $("suggestions-box").hidden = mode !== "live";
  $("recorded-controls").hidden = mode !== "recorded";
  const custom = $("preset").querySelector('option[value="custom"]');
  if (custom) custom.disabled = mode === "recorded";
  if (mode === "recorded" && $("preset").value === "custom") {
    $("preset").value = api.settings.default_preset;
    $("custom-row").hidden = true;
  }
  refresh();
}

// -- status ---------------------------------------------------------------------------------------
api.onStatus(({ state: s }) => {
  drawStatus(api);
  if (s === "error") showLive(page);
});
api.ready
  .then(({ info }) => {
    addFullContext(info.n_ctx);
    if (state.mode === "live") showLive(page);
  })
  .catch(() => {}); // the status line shows the error

// -- controls --------------------------------------------------------------------------------------
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

$("challenges-reset").addEventListener("click", () => {
  state.progress = {};
  challenges.save(state.progress);
  drawChallenges(state.progress);
});

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

// -- start ---------------------------------------------------------------------------------------------
drawSuggestions(SUGGESTIONS, (text) => {
  $("draft").value = text;
  $("draft").focus();
  showLive(page);
});
drawChallenges(state.progress);
api.settingsReady.then(() => {
  buildControls(api.settings);
  setMode(new URLSearchParams(location.search).get("mode") === "recorded" ? "recorded" : "live");
}, () => drawStatus(api)); // the status line says why build.json could not be read
