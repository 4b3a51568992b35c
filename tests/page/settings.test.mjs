// What a link or the last visit may set (site/js/page/prefs.mjs backendPref, sourceUrlPref,
// conversationPrefs, checkWindow) and the arguments the controls make (page/controls.mjs
// callArgs), in node: a page parameter wins over a saved value, a value that is not valid is
// ignored with a note, and what a note names is what was given.
import assert from "node:assert/strict";
import { test } from "node:test";
import { callArgs } from "../../site/js/page/controls.mjs";
import { BACKENDS, BACKEND_KEY, SOURCE_URL_KEY, PREFS_KEY, backendPref, checkWindow, conversationPrefs, sourceUrlPref } from "../../site/js/page/prefs.mjs";

function memory(values = {}) {
  const items = new Map(Object.entries(values));
  return { getItem: (k) => (items.has(k) ? items.get(k) : null), setItem: (k, v) => items.set(k, String(v)), removeItem: (k) => items.delete(k) };
}
const at = (search = "") => ({ search, href: `http://localhost/${search}` });
const settings = { presets: [{ name: "none" }, { name: "pirate" }, { name: "custom" }], windows: [256, 512], reply_limit: 96 };

test("the backend: the page's parameter, else the saved one, else auto; one not offered is named", () => {
  assert.deepEqual(backendPref({ location: at(), storage: memory() }), { backend: "auto", notes: [] });
  for (const b of BACKENDS) {
    assert.equal(backendPref({ location: at(`?backend=${b}`), storage: memory({ [BACKEND_KEY]: "numpy" }) }).backend, b);
  }
  assert.equal(backendPref({ location: at(), storage: memory({ [BACKEND_KEY]: "webgpu" }) }).backend, "webgpu");
  const bad = backendPref({ location: at("?backend=cuda"), storage: memory() });
  assert.equal(bad.backend, "auto");
  assert.match(bad.notes[0], /"cuda"/);
});

test("the model source: an http(s) URL, relative ones read against the page", () => {
  assert.deepEqual(sourceUrlPref({ location: at(), storage: memory() }), { url: null, notes: [] });
  assert.equal(sourceUrlPref({ location: at("?model=/models/tiny/"), storage: memory() }).url, new URL("/models/tiny/", "http://localhost/").href);
  assert.equal(sourceUrlPref({ location: at(), storage: memory({ [SOURCE_URL_KEY]: "https://example.org/m.gguf" }) }).url, "https://example.org/m.gguf");
  const bad = sourceUrlPref({ location: at(`?model=${encodeURIComponent("javascript:alert(1)")}`), storage: memory() });
  assert.equal(bad.url, null);
  assert.match(bad.notes[0], /javascript:alert\(1\)/);
});

test("the conversation's settings: the link over the saved ones, each checked against build.json's", () => {
  const saved = memory({ [PREFS_KEY]: JSON.stringify({ mode: "plain", preset: "pirate", window: 512, custom: "Be brief.", specialInText: false, why: true }) });
  const p = conversationPrefs(settings, { location: at("?preset=none&window=256"), storage: saved });
  assert.deepEqual({ ...p, notes: p.notes.length }, { mode: "plain", preset: "none", custom: "Be brief.", specialInText: false,
                                                      why: true, guessFirst: undefined, window: 256, pendingWindow: undefined,
                                                      notes: 0 });
  const bad = conversationPrefs(settings, { location: at("?mode=chat&preset=haiku&window=-3"), storage: memory() });
  assert.deepEqual([bad.mode, bad.preset, bad.window], [undefined, undefined, undefined]);
  assert.equal(bad.notes.length, 3);
  for (const given of ['"chat"', '"haiku"', '"-3"']) assert.ok(bad.notes.some((n) => n.includes(given)), given);
  // saved settings that cannot be read: ignored, said once
  const unreadable = conversationPrefs(settings, { location: at(), storage: memory({ [PREFS_KEY]: "[1, 2]" }) });
  assert.equal(unreadable.notes.length, 1);
});

test("a window not offered waits for the model's context, and is kept only if it is that", () => {
  const p = conversationPrefs(settings, { location: at("?window=8192"), storage: memory() });
  assert.deepEqual([p.window, p.pendingWindow], [undefined, 8192]);
  assert.deepEqual(checkWindow(p.pendingWindow, 8192), [8192, null]);
  const [window, note] = checkWindow(p.pendingWindow, 2048);
  assert.equal(window, undefined);
  assert.match(note, /8192/);
  assert.deepEqual(checkWindow(undefined, 2048), [undefined, null]);
});

test("the call's arguments from a snapshot of the controls", () => {
  const messages = [{ role: "user", content: "Hi!" }];
  const snap = { preset: "custom", custom: "Be brief.", window: 512, specialInText: true, draft: "Hi!" };
  assert.deepEqual(callArgs(messages, settings, snap), { preset: "custom", custom: "Be brief.", messages, window: 512, reserve: settings.reply_limit });
  // another preset sends no custom text; special tokens as text only when asked
  assert.deepEqual(callArgs(messages, settings, { ...snap, preset: "pirate", specialInText: false }),
                   { preset: "pirate", messages, window: 512, reserve: settings.reply_limit, specialInText: false });
});
