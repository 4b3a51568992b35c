// The model store as window.chatlens offers it: downloading the current source (in
// store/download-worker.mjs, with progress and an AbortSignal), listing, deleting, and the
// browser's storage estimate. Only the page can ask for persistent storage, so it asks here:
// beside the download, never in front of it (Firefox answers only once the user answers its
// prompt, and a headless or ignored prompt is never answered).

import { openModelStore, pageApi, requestPersistence } from "../store/models.mjs";
import { modelSpec } from "../store/spec.mjs";

/** The event the page hears when the current source's model leaves the store (from the page or
 * an API caller): the weights a worker read from it are no longer there to read again, so the
 * page starts over without them (model.mjs), and the status and chatlens.model say so. */
export const MODEL_DELETED = "chatlens:model-deleted";
const deletedCurrent = (id) => globalThis.dispatchEvent?.(new CustomEvent(MODEL_DELETED, { detail: { id } }));

/** The event the page hears when persistent storage is asked for and when the browser answers
 * (detail: {persisted: true | false | null, undefined while unanswered}), so the model box can say
 * what the answer means. */
export const PERSISTENCE = "chatlens:persistence";
const persistenceEvent = (persisted) => globalThis.dispatchEvent?.(new CustomEvent(PERSISTENCE, { detail: { persisted } }));

export function createDownloads(currentSource) {
  const store = openModelStore();
  const manage = store.then((s) => pageApi(s, currentSource));
  let running = null;
  // The request for persistent storage: made once a page, at the first download; a prompt the
  // user has not answered yet leaves it pending (asked: true, answer undefined).
  const persistence = { asked: false, answer: undefined };
  function askPersistence() {
    if (persistence.asked) return;
    persistence.asked = true;
    requestPersistence().then((answer) => {
      persistence.answer = answer;
      persistenceEvent(answer);
    });
    persistenceEvent(undefined);
  }

  /** Resolves with the stored model's summary once the current source is stored and verified. */
  function downloadModel({ onProgress, signal } = {}) {
    if (running) return Promise.reject(new Error("a download is already running"));
    if (signal?.aborted) return Promise.reject(new DOMException("the download was cancelled", "AbortError"));
    running = new Promise((resolve, reject) => {
      const worker = new Worker(new URL("../store/download-worker.mjs", import.meta.url), { type: "module" });
      const finish = (settle, value) => {
        signal?.removeEventListener("abort", cancel);
        worker.terminate();
        running = null;
        settle(value);
      };
      const cancel = () => worker.postMessage({ type: "cancel" });
      signal?.addEventListener("abort", cancel);
      worker.onmessage = ({ data }) => {
        if (data.type === "progress") onProgress?.(data.progress);
        else if (data.type === "done") finish(resolve, data.summary);
        else if (data.type === "error") {
          const e = data.name === "AbortError" ? new DOMException(data.error, "AbortError") : new Error(data.error);
          if (data.name && e.name !== data.name) e.name = data.name;
          finish(reject, e);
        }
      };
      worker.onerror = (e) => finish(reject, new Error(`the download worker failed: ${e.message || "it could not start"}`));
      worker.postMessage({ type: "download", source: currentSource() });
      askPersistence(); // beside the download: its answer may never come
    });
    return running;
  }

  /** The stored model's id for the current source, or null when none is stored. */
  async function currentId() {
    try {
      const st = await (await store).status(currentSource());
      return st && st.bytes > 0 ? st.id : null;
    } catch {
      return null;
    }
  }

  return {
    downloadModel,
    /** What this source needs: [{name, size (null when unknown)}] and where it comes from. */
    spec: () => modelSpec(currentSource()),
    status: async () => (await store).status(currentSource()),
    storedModels: async () => (await manage).storedModels(),
    deleteModel: async (id) => {
      const current = await currentId();
      await (await manage).deleteModel(id);
      if (id === current) deletedCurrent(id);
    },
    deleteAllModels: async () => {
      const current = await currentId();
      await (await manage).deleteAllModels();
      if (current) deletedCurrent(current);
    },
    storageEstimate: async () => (await manage).storageEstimate(),
    /** Whether this site's storage is persistent: {persisted (true, false, or null where the
     * browser cannot say), pending (asked at a download and not answered yet)}. */
    persistence: async () => {
      const persisted = await navigator.storage?.persisted?.().catch(() => null);
      return { persisted: persisted ?? null, pending: persistence.asked && persistence.answer === undefined };
    },
  };
}
