// The model in the page: what the download box shows and does. The store is the truth about
// what is downloaded; the worker says what computes replies (chatlens.model).

import { MODEL_DELETED, PERSISTENCE } from "./downloads.mjs";
import { downloadFailure, drawBaseBox, drawManage, drawModelBox } from "../views/downloads.mjs";
import { hostNote } from "./hosts.mjs";
import { SOURCE_URL_KEY, saveChoice } from "./prefs.mjs";
import { baseNameOf, weightsForDevelopers, weightsSentence } from "./weights.mjs";

/** Where NumPy comes from, said before it is needed: the NumPy path (chosen, or the fallback of
 * "automatic" without a usable GPU) fetches Pyodide's NumPy from its CDN once, and the service
 * worker keeps it. Null when NumPy cannot be what computes, or the site serves it itself. */
export function numpyNote(api) {
  const packages = api.build?.pyodide?.packages;
  if (!packages || !/^https?:/.test(packages) || new URL(packages).origin === location.origin) return null;
  if (api.model?.kind && api.model.kind !== "numpy") return null; // the GPU computes
  if (api.backend !== "numpy" && api.backend !== "auto") return null;
  const host = new URL(packages).host;
  const when = api.backend === "numpy" ? "Replies are computed by NumPy" : "Without a usable GPU, replies are computed by NumPy";
  return `${when}, which this page fetches once from Pyodide's site (${host}) when the weights load, and then keeps for offline use.`;
}

/** Download a model through the API with progress and Cancel, for a part of the box: `part`
 * ({progress, error, controller}) is updated and `draw()`n as the download goes; resolves once
 * it has ended, however it ended. model: the model key; what, offline: downloadFailure's. */
export async function downloadInto(api, part, draw, model = "instruct", { what = "the model", offline = "" } = {}) {
  part.controller = new AbortController();
  part.error = null;
  part.progress = { overall: { done: 0, total: null }, files: [] };
  draw();
  try {
    await api.downloadModel({
      model,
      signal: part.controller.signal,
      onProgress: (p) => {
        part.progress = p;
        draw();
      },
    });
  } catch (e) {
    part.error = downloadFailure(e, what, offline);
  } finally {
    part.progress = null;
    part.controller = null;
  }
}

export function createModelBox(api) {
  const box = { files: [], stored: null, persistence: null, progress: null, error: null, controller: null };
  // The base model, for the comparison: {source, spec, status} once read (or unavailable: why not).
  const base = { source: null, spec: null, status: null, unavailable: null, progress: null, error: null, controller: null };
  const drawBase = () => drawBaseBox({ ...base, name: baseNameOf(base.source, api.build?.models?.base) },
                                     { download: () => downloadBase(), cancel: () => base.controller?.abort() });

  async function refreshBase() {
    if (!api.downloads.base) return;
    const got = await api.downloads.base();
    Object.assign(base, got.error ? { unavailable: got.error } : { ...got, unavailable: null });
    drawBase();
  }

  async function downloadBase() {
    await downloadInto(api, base, drawBase, "base", { what: "the base model",
      offline: "Until then, Base vs instruct shows the comparison recorded with this site's copy of the instruct model." });
    await refreshBase();
    await refreshManage();
  }

  const draw = () =>
    drawModelBox({ ...box, source: api.source, model: api.model, status: api.status.state, detail: api.status.detail,
                   weightsSentence: api.source ? weightsSentence(api.source) : null,
                   weightsForDevelopers: api.source ? weightsForDevelopers(api.source) : null, numpyNote: numpyNote(api),
                   hostNote: hostNote(api.source) }, {
      download: () => download(),
      cancel: () => box.controller?.abort(),
      useDefault: () => {
        saveChoice(SOURCE_URL_KEY, null);
        const url = new URL(location.href);
        url.searchParams.delete("model");
        location.assign(url.href);
      },
    });

  // The browser's answer to persistent storage, read again at each refresh and each answer: the
  // newest read wins, so a refresh that began before the answer cannot draw the question again.
  let persistenceReads = 0;
  async function readPersistence() {
    const ticket = ++persistenceReads;
    const answer = await api.downloads.persistence();
    if (ticket === persistenceReads) box.persistence = answer;
  }

  async function refresh() {
    if (!api.source) return draw();
    try {
      box.files = api.downloads.spec().files;
      [box.stored] = await Promise.all([api.downloads.status(), readPersistence()]);
    } catch (e) {
      box.error = e.message;
    }
    draw();
    await Promise.all([refreshManage(), refreshBase()]);
  }

  async function refreshManage() {
    try {
      const [models, estimate] = await Promise.all([api.storedModels(), api.storageEstimate()]);
      drawManage(models, estimate, {
        // (views/downloads.mjs asks once before either)
        delete: async (id) => {
          await api.deleteModel(id);
          await refresh();
        },
        deleteAll: async () => {
          await api.deleteAllModels();
          await refresh();
        },
        inUse: (id) => Boolean(api.model?.backend) && id === box.stored?.id,
      });
    } catch (e) {
      drawManage([], null, {});
      box.error = `the browser's storage is not available: ${e.message}`;
      draw();
    }
  }

  async function download() {
    await downloadInto(api, box, draw, "instruct", { offline: "Recorded mode works without it, with real replies." });
    await refresh();
  }

  // The current source's model was deleted (here or through the API): the worker still holds
  // the weights it read, so the page starts again without them; the status then says replies
  // need the model, chatlens.model is null, and the conversation is kept (saved.mjs). The base
  // leaving changes nothing for replies: the box says it is gone.
  globalThis.addEventListener(MODEL_DELETED, (e) => {
    if (e.detail?.model === "base") refreshBase();
    else if (api.model || ["weights", "ready"].includes(api.status.state)) location.reload();
    else refresh();
  });

  // Persistent storage was asked for as a download started, or the browser answered (at once, or
  // when the user answers its prompt): the box says what the answer means.
  globalThis.addEventListener(PERSISTENCE, async () => {
    await readPersistence();
    draw();
  });

  // What the worker says computes replies changes after a download (the page's or an API
  // caller's) and a restart: read the store again then.
  let model = api.model;
  api.onStatus(() => {
    if (api.model === model) return draw();
    model = api.model;
    refresh();
  });
  return { refresh, draw, refreshBase };
}
