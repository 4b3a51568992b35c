// The model store as window.chatlens offers it: downloading the current source (in
// store/download-worker.mjs, with progress and an AbortSignal), listing, deleting, and the
// browser's storage estimate. Only the page can ask for persistent storage, so it asks here.

import { openModelStore, pageApi, requestPersistence } from "./store/models.mjs";
import { modelSpec } from "./store/spec.mjs";

export function createDownloads(currentSource) {
  const store = openModelStore();
  const manage = store.then((s) => pageApi(s, currentSource));
  let running = null;

  /** Resolves with the stored model's summary once the current source is stored and verified. */
  function downloadModel({ onProgress, signal } = {}) {
    if (running) return Promise.reject(new Error("a download is already running"));
    if (signal?.aborted) return Promise.reject(new DOMException("the download was cancelled", "AbortError"));
    running = new Promise((resolve, reject) => {
      const worker = new Worker(new URL("./store/download-worker.mjs", import.meta.url), { type: "module" });
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
      requestPersistence().finally(() => worker.postMessage({ type: "download", source: currentSource() }));
    });
    return running;
  }

  return {
    downloadModel,
    /** What this source needs: [{name, size (null when unknown)}] and where it comes from. */
    spec: () => modelSpec(currentSource()),
    status: async () => (await store).status(currentSource()),
    storedModels: async () => (await manage).storedModels(),
    deleteModel: async (id) => (await manage).deleteModel(id),
    deleteAllModels: async () => (await manage).deleteAllModels(),
    storageEstimate: async () => (await manage).storageEstimate(),
  };
}
