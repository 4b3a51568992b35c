// What the page remembers between visits, and what a link may set: the mode, the system prompt,
// the window, the backend, the model source (page parameters win over saved values) and the
// drafts. A value that is not valid is ignored, with a note the page shows: a bad setting never
// stops the page. What a reload brings back of the page's work (the live conversation, a branch,
// the comparison) is saved.mjs's.

export const PREFS_KEY = "chatlens.prefs"; // {mode, preset, custom, window, specialInText, why, guessFirst}
export const SOURCE_URL_KEY = "chatlens.model"; // the model source's URL (source.mjs): the key's name is the saved one
export const BACKEND_KEY = "chatlens.backend";
export const BACKENDS = ["auto", "webgpu", "numpy"];
export const MODES = ["live", "recorded", "plain", "compare"]; // the page's tabs, #mode-<name> (app.mjs)

export function read(storage, key, json = true) {
  try {
    const v = storage?.getItem(key);
    return v == null ? null : json ? JSON.parse(v) : v;
  } catch {
    return undefined; // unreadable: treated as not valid
  }
}

/** Whether it was written: storage full or disabled, the setting lasts for this page only. */
export function write(storage, key, value) {
  try {
    if (value == null) storage?.removeItem(key);
    else storage?.setItem(key, typeof value === "string" ? value : JSON.stringify(value));
    return true;
  } catch {
    return false;
  }
}

/** The backend asked for (?backend=, else saved, else auto), and a note when one was not valid. */
export function backendPref({ location = globalThis.location, storage = globalThis.localStorage } = {}) {
  const fromUrl = new URLSearchParams(location.search).get("backend");
  const saved = read(storage, BACKEND_KEY, false);
  for (const [value, where] of [[fromUrl, "the page's backend parameter"], [saved, "the saved backend"]]) {
    if (value == null) continue;
    if (BACKENDS.includes(value)) return { backend: value, notes: [] };
    return { backend: "auto", notes: [`Ignored ${where} ${JSON.stringify(value)}: it is not one of ${BACKENDS.join(", ")}.`] };
  }
  return { backend: "auto", notes: [] };
}

/** The model source's URL asked for (?model=, else saved), or null; a note when it is not an http(s)
 * URL. ("model" in the parameter's and the saved key's names, kept as links and saves have them.) */
export function sourceUrlPref({ location = globalThis.location, storage = globalThis.localStorage } = {}) {
  const fromUrl = new URLSearchParams(location.search).get("model");
  const saved = read(storage, SOURCE_URL_KEY, false);
  const value = fromUrl || saved;
  if (!value) return { url: null, notes: [] };
  let url = null;
  try {
    url = new URL(value, location.href);
  } catch {}
  if (url && (url.protocol === "http:" || url.protocol === "https:")) return { url: url.href, notes: [] };
  const where = fromUrl ? "the page's model parameter" : "the saved model source";
  return { url: null, notes: [`Ignored ${where} ${JSON.stringify(value)}: a model source is an http or https URL. The default model is used.`] };
}

/**
 * The conversation settings to start with: {mode, preset, custom, window, specialInText, why} (undefined where the
 * default applies) and notes for what was ignored. `settings` is build.json's; a window that is
 * not offered yet (the model's whole context, offered once the model is read) is kept as
 * `pendingWindow` for checkWindow().
 */
export function conversationPrefs(settings, { location = globalThis.location, storage = globalThis.localStorage } = {}) {
  const params = new URLSearchParams(location.search);
  const saved = read(storage, PREFS_KEY);
  const notes = [];
  const stored = saved && typeof saved === "object" && !Array.isArray(saved) ? saved : {};
  if (saved !== null && stored !== saved) notes.push("Ignored the saved settings: they could not be read.");
  const pick = (name, valid, describe) => {
    const fromUrl = params.get(name);
    for (const [value, where] of [[fromUrl, `the page's ${name} parameter`], [stored[name], `the saved ${name}`]]) {
      if (value == null) continue;
      const v = valid(value);
      if (v !== undefined) return v;
      notes.push(`Ignored ${where} ${JSON.stringify(value)}: ${describe}.`);
      return undefined;
    }
    return undefined;
  };
  const names = settings.presets.map((p) => p.name);
  const out = {
    mode: pick("mode", (v) => (MODES.includes(v) ? v : undefined), `the modes are ${MODES.slice(0, -1).join(", ")} and ${MODES.at(-1)}`),
    preset: pick("preset", (v) => (names.includes(v) ? v : undefined), `the system prompts are ${names.join(", ")}`),
    custom: typeof stored.custom === "string" ? stored.custom : undefined,
    specialInText: typeof stored.specialInText === "boolean" ? stored.specialInText : undefined,
    why: typeof stored.why === "boolean" ? stored.why : undefined, // "why this token"
    guessFirst: typeof stored.guessFirst === "boolean" ? stored.guessFirst : undefined, // "guess first"
    window: undefined,
    pendingWindow: undefined,
    notes,
  };
  const w = pick("window", (v) => {
    const n = Number(v);
    return Number.isInteger(n) && n > 0 ? n : undefined;
  }, "a window is a whole number of tokens");
  if (w !== undefined) {
    if (settings.windows.includes(w)) out.window = w;
    else out.pendingWindow = w; // perhaps the model's whole context: checked once it is known
  }
  return out;
}

/** The pending window once the model's context is known: [window or undefined, note or null]. */
export function checkWindow(pending, nCtx) {
  if (pending === undefined) return [undefined, null];
  if (pending === nCtx) return [pending, null];
  return [undefined, `Ignored the window ${pending}: the windows offered are the lab's and the model's whole context (${nCtx} tokens).`];
}

/** What saveConversationPrefs keeps, from the page's state and its controls ({preset, custom,
 * window, specialInText}), and "why this token" (state.why): the mode only once the learner picked one (until then the landing mode
 * follows the store: app.mjs landingMode), and the custom preset while Recorded mode has set it
 * aside (`customKept`), though the control shows the recording's preset. */
export function conversationToSave(state, controls) {
  return { mode: state.modeChosen ? state.mode : undefined,
           preset: state.customKept ? "custom" : controls.preset,
           custom: controls.custom, window: controls.window, specialInText: controls.specialInText, why: state.why,
           guessFirst: state.guessFirst };
}

export function saveConversationPrefs(prefs, storage = globalThis.localStorage) {
  write(storage, PREFS_KEY, prefs);
}

export function saveChoice(key, value, storage = globalThis.localStorage) {
  write(storage, key, value);
}

// -- the drafts -----------------------------------------------------------------------------------

export const DRAFTS_KEY = "chatlens.drafts"; // {live, compare}: what was typed in each box and not sent

/** The drafts kept from the last visit: {live, compare}, each a string or undefined. */
export function loadDrafts(storage = globalThis.localStorage) {
  const v = read(storage, DRAFTS_KEY);
  const text = (x) => (typeof x === "string" ? x : undefined);
  return v && typeof v === "object" ? { live: text(v.live), compare: text(v.compare) } : { live: undefined, compare: undefined };
}

/** Keep what is typed in `box` ("live" or "compare") for the next visit ("" forgets it). */
export function saveDraft(box, text, storage = globalThis.localStorage) {
  const v = read(storage, DRAFTS_KEY);
  const drafts = v && typeof v === "object" && !Array.isArray(v) ? v : {};
  drafts[box] = text || undefined;
  write(storage, DRAFTS_KEY, drafts);
}
