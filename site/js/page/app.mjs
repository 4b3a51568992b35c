// The page: the chat on the left, what the model reads on the right, the controls, the "try
// this" suggestions and the challenges. It calls window.chatlens like any embedder would.
// User and model text always goes in as text (views/dom.mjs), never as HTML.

import { createApi } from "./api.mjs";
import * as challenges from "../lesson/challenges.mjs";
import * as inside from "../lesson/inside.mjs";
import { addFullContext, buildControls, readControls } from "./controls.mjs";
import { setUpByHand } from "../modes/byhand.mjs";
import { compareChanged, drawAsk, drawCompare, setUpCompare, showCompare, stopCompare } from "../modes/compare.mjs";
import { liveChanged, restoreRecords, send, showLive, stop, whyOf } from "../modes/live.mjs";
import { hostNote } from "./hosts.mjs";
import { createModelBox } from "./model.mjs";
import { createDeviceBox } from "../views/device.mjs";
import { registerOffline } from "./offline.mjs";
import { drawPlain, setUpPlain, stopPlain, tokenizePlain } from "../modes/plain.mjs";
import { drawLookInside } from "../modes/inside.mjs";
import { setUpRecorded, showRecorded } from "../modes/recorded.mjs";
import { needsChanged, setUpNeeds } from "../modes/needs.mjs";
import { openLink, setUpShare } from "../modes/shared.mjs";
import { setUpStepActions, stepsChanged } from "../modes/steps.mjs";
import * as prefs from "./prefs.mjs";
import * as saved from "./saved.mjs";
import { createStore } from "./state.mjs";
import { drawChallenges, drawSuggestions } from "../views/challenges.mjs";
import { $, debounce, keepFocus } from "../views/dom.mjs";
import { renderRecord } from "../views/reads.mjs";
import { replyGrew } from "../views/reply.mjs";
import { drawStatus } from "../views/status.mjs";
import { setUpWorkbench } from "../modes/workbench.mjs";
import { weightsSentence } from "./weights.mjs";

const api = createApi();
window.chatlens = api;
const store = createStore(challenges.load(), inside.load());
const { state } = store;
api.pageState = state; // for tests: the page's state (page/state.mjs), to read, never to change
const modelBox = createModelBox(api);
createDeviceBox(api); // the GPU's known-answer check and "Measure this device", under the model box

// What the mode modules share: the API, the store (its state and transitions), and the panel.
const page = {
  api,
  store,
  state,
  /** The reply views' hooks, {onStep(step, reply), onCandidate(step, id, reply)} (views/reply.mjs):
   * what a view acting on one step of a reply sets, for every reply the modes draw. */
  replyHooks: {},
  /** What the step box's "Copy a link" or "Copy as a command" copied last (modes/shared.mjs): shown
   * again as the box is drawn again. */
  shareCopied: null,
  /** Draw a record in the panel; extra: {prediction} (live previews). */
  draw(record, caption, extra = {}) {
    store.panelDrawn([record, caption, extra]);
    renderRecord($("reads"), record, {
      caption,
      view: state.view,
      why: whyOf(state),
      hooks: page.replyHooks,
      ...extra,
      onView: (v) => store.viewChosen(v),
    });
  },
  /** Compute replies with `backend` from now on (a banner's offer): saved, then the page reloads,
   * as choosing it in "What computes replies" does (the worker loads the weights once). */
  useBackend(backend) {
    $("backend").value = backend;
    stopFirst(() => {
      prefs.saveChoice(prefs.BACKEND_KEY, backend);
      location.reload();
    });
  },
};

const refresh = (controls) => {
  remember(controls);
  if (state.mode === "plain") return tokenizePlain(page);
  if (state.mode === "compare") return showCompare(page);
  return state.mode === "live" ? showLive(page, controls) : showRecorded(page, controls);
};

// What survives a reload is written as it changes; a reply being written only by what its tokens
// add, at most once a second, and at once when the page is hidden (a reload hides it first) or
// Stop is pressed (saved.mjs createSaver).
const liveSaved = saved.createSaver({ whole: (turns) => saved.saveLive(turns), grown: (turns) => saved.saveGrowing(turns) });
const compareSaved = saved.createSaver({ whole: (run) => saved.saveCompare(run), grown: (run) => saved.saveCompare(run) });
const flushSaves = () => {
  liveSaved.flush();
  compareSaved.flush();
};
addEventListener("pagehide", flushSaves);
document.addEventListener("visibilitychange", () => document.visibilityState === "hidden" && flushSaves());

/** Save what survives a reload: the mode, the system prompt, the window, the live conversation.
 * (The custom prompt is saved even when another preset is chosen: it is there to come back to.) */
function remember(controls) {
  if (!api.settings) return;
  prefs.saveConversationPrefs(prefs.conversationToSave(state, { ...controls, custom: $("custom-system").value }));
  liveSaved.changed(state.live.turns);
}

/** The send and stop buttons say whether a reply is being written (the store's `writing`): Stop
 * once the reply has begun (its record read, or its first token). */
function drawWriting() {
  keepFocus($("send"), state.writing, $("draft"), "disabled");
  keepFocus($("stop"), !(state.writing && state.live.turns.at(-1)?.streaming), $("draft")); // Stop pressed: back to the draft
  if (!state.writing) $("next-message-note").hidden = true; // the next message is read under them
}

function showNotes(notes) {
  const box = $("settings-note");
  box.textContent = notes.join(" ");
  box.hidden = notes.length === 0;
}

function setMode(mode, { chosen = false } = {}) {
  store.modeChosen(mode, { chosen });
}

/** The controls a mode shows (the subscriber calls it when a mode is chosen). */
function showMode(mode) {
  document.body.dataset.mode = mode;
  for (const m of prefs.MODES) $(`mode-${m}`).setAttribute("aria-pressed", String(mode === m));
  $("composer").hidden = mode !== "live";
  $("suggestions-box").hidden = mode !== "live";
  $("recorded-controls").hidden = mode !== "recorded";
  const custom = $("preset").querySelector('option[value="custom"]');
  if (custom) custom.disabled = mode === "recorded";
  $("special-in-text").disabled = mode !== "live"; // the recording reads them as tokens; plain text always does
  if (mode === "recorded" && $("preset").value === "custom") {
    store.customKept(true); // the recordings have no custom prompt; Live gets it back
    $("preset").value = api.settings.default_preset;
    $("custom-row").hidden = true;
  } else if (mode === "live" && state.customKept) {
    store.customKept(false);
    $("preset").value = "custom";
    $("custom-row").hidden = false;
  }
}

// -- what each change redraws -----------------------------------------------------------------------
// The one subscriber: a transition of the store (page/state.mjs) names what changed, and this
// draws it; what survives a reload is saved when it changes. The step box draws last: with
// nothing open it follows the reply the panel drew.
store.subscribe((change) => {
  if (change.type === "sent" && change.current) $("draft").value = ""; // text typed while it waits is the next message
  if (change.type === "unsent" && change.current && !$("draft").value.trim()) $("draft").value = change.turn.user; // nothing new typed: given back
  if (change.type === "cleared" && change.mode === "live") $("draft").value = "";
  drawWriting();
  drawChange(change, readControls()); // the snapshot of the controls this change is drawn from
  stepsChanged(page, change);
  needsChanged(page, change);
});

function drawChange(change, controls) {
  switch (change.type) {
    case "mode":
      showMode(change.mode);
      return refresh(controls);
    case "setting":
      $("custom-row").hidden = $("preset").value !== "custom";
      if (state.writing) $("next-message-note").hidden = false; // a reply keeps the settings it was sent with
      return refresh(controls);
    case "cleared":
      return refresh(controls);
    case "view":
      return state.drawn && page.draw(...state.drawn);
    case "guess-first":
      return remember(controls); // survives a reload, as the other settings do; the views redraw on their own changes
    case "why":
      remember(controls); // "why this token" survives a reload, as the other settings do
      if (state.mode === "live") return showLive(page, controls);
      if (state.mode === "plain") return drawPlain(page);
      if (state.mode === "compare") return drawCompare(page);
      return state.drawn && page.draw(...state.drawn);
    case "step":
      return showRecorded(page, controls);
    case "plain":
      return drawPlain(page);
    case "compare":
      if (change.current) compareSaved.changed(state.compare.run); // a reload shows it again, as far as it got
      return compareChanged(page, change);
    case "compare-stored":
      return drawAsk(page);
    case "challenges":
      challenges.save(state.progress);
      return drawChallenges(state.progress);
    case "inside":
      inside.save(state.insideProgress);
      return drawLookInside(page);
    case "step-box":
      return; // drawn by the step box's own (stepsChanged)
    case "token":
    case "progress":
      // A token of a reply, whatever the mode: the one reply view drawn for it appends it
      // (views/reply.mjs); Live also grows the chat's bubble (liveChanged, below).
      if (change.mode === "branch") return; // the step box's branch: its reply view (stepsChanged)
      if (change.mode === "plain") return change.type === "token" && !replyGrew(change.reply) && drawPlain(page);
      if (change.mode === "compare") {
        if (change.type === "token") compareSaved.grew(state.compare.run);
        return compareChanged(page, change);
      }
      if (change.mode === "live" && change.type === "token") liveSaved.grew(state.live.turns);
      break;
    case "stopping":
      flushSaves(); // the reply as far as it got, before its end is saved
      break;
    case "sent":
      prefs.saveDraft("live", "");
    // falls through: the live conversation changed
    case "unsent":
    case "read":
    case "replied":
    case "failed":
      // The live conversation changed: keep it for the next visit at once (its tokens are kept
      // as they come: "token" above), so a reload in the middle of a reply loses nothing.
      if (change.current !== false) liveSaved.changed(state.live.turns);
      break;
  }
  liveChanged(page, change, controls);
}

// -- status ---------------------------------------------------------------------------------------
/** The status line, with what the page knows of the model source: why it cannot be read, its weights. */
const showStatus = () => drawStatus(api, { note: hostNote(api.source), weights: api.source ? weightsSentence(api.source) : null });
api.onStatus(({ state: s }) => {
  showStatus();
  // The chat's banner when replies cannot be had (views/chat.mjs liveBanner).
  if (api.model?.backend) store.repliesKnown({ state: "ready", why: "" });
  else if (api.model?.error) store.repliesKnown({ state: "none", why: api.model.error, offer: api.model.offer ?? null });
  else if (s === "text") store.repliesKnown({ state: "none", why: "replies need the model's weights: the box above downloads them" });
  else store.repliesKnown({ state: "unknown", why: "" });
  if (s === "error") showLive(page, readControls());
  restoreRecords(page); // a conversation a reload brought back: its replies' records, once Python can read
  if (state.mode === "plain" && !state.plain?.tokens) tokenizePlain(page); // Python is up: the text's tokens
  // The model came in (downloaded now) on a visit that landed in Recorded mode: Live has replies.
  if (api.model?.backend && !state.modeChosen && state.mode === "recorded" && state.start.landed) setMode("live");
});
api.ready
  .then(({ info }) => {
    addFullContext(info.n_ctx);
    const [window, note] = prefs.checkWindow(state.start.pendingWindow, info.n_ctx);
    if (window !== undefined) $("window").value = String(window);
    if (note) showNotes([...api.notes, ...state.start.notes, note]);
    if (state.mode === "live") showLive(page, readControls());
    modelBox.refresh();
  })
  .catch(() => {
    modelBox.refresh(); // the status line shows the error
    // the model's context stays unknown, so a window beyond the lab's cannot be offered
    const { pendingWindow } = state.start;
    if (pendingWindow !== undefined) {
      showNotes([...api.notes, ...state.start.notes, `Ignored the window ${pendingWindow}: the model could not be read, so only the lab's windows are offered.`]);
    }
  });

// -- controls --------------------------------------------------------------------------------------
/** A setting changed: the panel reads the turn again; a reply being written keeps the settings it
 * was sent with, and the page says so. */
const settingChanged = () => store.settingChanged();

/** Stop the reply being written (if any), wait for it to end, then do `then`. The mode that
 * started it holds its AbortController, and its stop resolves once the reply has ended; `why`
 * (a sentence) is what the comparison says of its stop. */
async function stopFirst(then, why = "the page's settings changed while it ran") {
  if (api.writing) await Promise.all([stop(page), stopPlain(page), stopCompare(page, why)]);
  then();
}

$("preset").addEventListener("change", settingChanged);
$("custom-system").addEventListener("input", debounce(settingChanged, 200));
$("window").addEventListener("change", settingChanged);
$("new-conversation").addEventListener("click", () => stopFirst(() => store.cleared()));
const MODE_NAMES = { live: "Live", recorded: "Recorded", plain: "Plain text", compare: "Base vs instruct" };
for (const m of prefs.MODES) {
  $(`mode-${m}`).addEventListener("click", () => stopFirst(() => {
    const was = state.mode;
    setMode(m, { chosen: true });
    // On a phone the mode's own controls sit screens below the tabs: brought into view.
    if (m !== was && m === "compare" && $("compare-box").getBoundingClientRect().top > innerHeight) $("compare-box").scrollIntoView({ block: "start" });
  }, m === state.mode ? `you pressed ${MODE_NAMES[m]} again while it ran` : `you left ${MODE_NAMES[state.mode]} while it ran`));
}
$("special-in-text").addEventListener("change", settingChanged);
$("why").checked = state.why; // as saved (set again once the settings are read), not as a form the browser restores says
$("why").addEventListener("change", () => store.whyChosen($("why").checked));
$("rec-prev").addEventListener("click", () => store.stepped(state.step - 1));
$("rec-next").addEventListener("click", () => store.stepped(state.step + 1));

$("draft").addEventListener("input", debounce(() => showLive(page, readControls()), 120));
$("draft").addEventListener("input", debounce(() => prefs.saveDraft("live", $("draft").value), 300)); // kept across a reload
$("draft").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send(page, readControls());
  }
});
$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  send(page, readControls());
});
$("stop").addEventListener("click", () => stop(page));

$("challenges-reset").addEventListener("click", () => store.progressReset());

// -- model source setting ------------------------------------------------------------------------------
$("source-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const v = $("source-url").value.trim();
  stopFirst(() => {
    prefs.saveChoice(prefs.SOURCE_URL_KEY, v || null);
    location.reload();
  });
});
$("source-reset").addEventListener("click", () => stopFirst(() => {
  prefs.saveChoice(prefs.SOURCE_URL_KEY, null);
  location.search = ""; // a ?model= in the address would choose the same source again
}));
$("source-url").value = prefs.sourceUrlPref().url || "";
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
drawSuggestions((text, suggestion) => stopFirst(() => {
  // a fresh suggestion is asked first in a new conversation: its answer echoes no earlier reply
  if (suggestion?.fresh && state.live.turns.length) store.cleared();
  $("draft").value = text;
  $("draft").focus();
  showLive(page, readControls());
}));
drawChallenges(state.progress);
setUpWorkbench(page);
setUpByHand(page);
setUpRecorded(page);
setUpStepActions(page); // a reply's step: inspected, branched
setUpNeeds(page); // the conversation's matrix, under the step box
setUpShare(page); // a turn or a step copied as a link or a command
drawLookInside(page); // the lesson's cases, which open a step
api.settingsReady.then(() => {
  buildControls(api.settings);
  store.settingsRead(api.settings);
  setUpPlain(page);
  const drafts = prefs.loadDrafts();
  const comparison = saved.loadCompare(); // the last comparison, shown again as it ended (or stopped by the reload)
  if (comparison) store.compareRestored(comparison);
  setUpCompare(page, { draft: drafts.compare, onDraft: (text) => prefs.saveDraft("compare", text) });
  const p = prefs.conversationPrefs(api.settings);
  if (p.preset) $("preset").value = p.preset;
  if (p.custom !== undefined) $("custom-system").value = p.custom;
  $("custom-row").hidden = $("preset").value !== "custom";
  if (p.window) $("window").value = String(p.window);
  store.startRead(p);
  showNotes([...api.notes, ...state.start.notes]);
  if (p.specialInText !== undefined) $("special-in-text").checked = p.specialInText;
  store.restored(saved.loadLive());
  restoreRecords(page);
  if (p.why !== undefined) $("why").checked = p.why;
  if (p.why) store.whyChosen(true); // after the conversation is back: a setting changed saves it
  if (p.guessFirst) store.guessFirstChosen(true);
  // A message a reload cut off before its reply began: back in the box, to send again.
  const cut = state.live.turns.at(-1);
  if (cut?.reloaded?.cut && cut.reply === undefined && !$("draft").value) $("draft").value = cut.user;
  else if (drafts.live && !$("draft").value) $("draft").value = drafts.live; // typed, not sent, before the reload
  // a shared case in the address (#case=...) is set up once the page is: it takes Live mode
  const landed = p.mode ? Promise.resolve(setMode(p.mode, { chosen: true })) : landingMode().then((mode) => {
    store.landed();
    setMode(mode);
  });
  return landed.then(() => openLink(page, location.hash));
}, showStatus); // the status line says why build.json could not be read

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
