// What the page saves of its settings (site/js/page/prefs.mjs conversationToSave), played in node
// through the store's transitions, and read back as the next visit reads it (conversationPrefs).
import assert from "node:assert/strict";
import { test } from "node:test";
import { readFileSync } from "node:fs";
import { MODES, conversationPrefs, conversationToSave, saveConversationPrefs } from "../../site/js/page/prefs.mjs";
import { createStore } from "../../site/js/page/state.mjs";

function memory() {
  const items = new Map();
  return { getItem: (k) => (items.has(k) ? items.get(k) : null), setItem: (k, v) => items.set(k, String(v)), removeItem: (k) => items.delete(k) };
}

const settings = { presets: [{ name: "none" }, { name: "pirate" }, { name: "custom" }], windows: [256, 512] };
const nowhere = { search: "", href: "http://localhost/" };

test("a save made in Recorded mode keeps Live's custom preset", () => {
  const storage = memory();
  const store = createStore();
  store.modeChosen("recorded", { chosen: true });
  store.customKept(true); // app.mjs showMode: the recording shows its own preset in the control
  const controls = { preset: "none", custom: "Speak in haiku.", window: 512, specialInText: false };
  saveConversationPrefs(conversationToSave(store.state, controls), storage);
  const back = conversationPrefs(settings, { location: nowhere, storage });
  assert.equal(back.mode, "recorded");
  assert.equal(back.preset, "custom");
  assert.equal(back.custom, "Speak in haiku.");
});

test("in Live the control's preset is saved, and the mode only once chosen", () => {
  const store = createStore();
  const controls = { preset: "pirate", custom: "", window: 256, specialInText: true };
  assert.deepEqual(conversationToSave(store.state, controls),
                   { mode: undefined, preset: "pirate", custom: "", window: 256, specialInText: true, why: false, guessFirst: false });
  store.modeChosen("live", { chosen: true });
  assert.equal(conversationToSave(store.state, controls).mode, "live");
});

test("“Why this token” survives a reload: it was once off at every visit", () => {
  const storage = memory();
  const store = createStore();
  const controls = { preset: "none", custom: "", window: 256, specialInText: true };
  store.whyChosen(true);
  saveConversationPrefs(conversationToSave(store.state, controls), storage);
  assert.equal(conversationPrefs(settings, { location: nowhere, storage }).why, true);
  store.guessFirstChosen(true); // "Guess first" too
  saveConversationPrefs(conversationToSave(store.state, controls), storage);
  assert.equal(conversationPrefs(settings, { location: nowhere, storage }).guessFirst, true);
  store.whyChosen(false);
  saveConversationPrefs(conversationToSave(store.state, controls), storage);
  assert.equal(conversationPrefs(settings, { location: nowhere, storage }).why, false);
  assert.equal(conversationPrefs(settings, { location: nowhere, storage: memory() }).why, undefined); // never chosen: off, the default
});

test("every mode the page has a tab for survives a reload once chosen", () => {
  const html = readFileSync(new URL("../../site/index.html", import.meta.url), "utf8");
  const tabs = [...html.matchAll(/id="mode-([a-z]+)"/g)].map((m) => m[1]);
  assert.deepEqual(tabs, MODES); // app.mjs wires each tab from MODES
  for (const mode of tabs) {
    const storage = memory();
    const store = createStore();
    store.modeChosen(mode, { chosen: true });
    const controls = { preset: "none", custom: "", window: 256, specialInText: true };
    saveConversationPrefs(conversationToSave(store.state, controls), storage);
    assert.equal(conversationPrefs(settings, { location: nowhere, storage }).mode, mode);
  }
});
