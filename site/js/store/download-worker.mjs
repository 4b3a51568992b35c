// The store's downloads run here, in a worker of their own: hashing hundreds of megabytes would
// stall the page, and the Python worker may be busy answering for seconds at a time.
//
// Page -> worker: {type: "download", source} | {type: "cancel"}
// Worker -> page: {type: "progress", progress} | {type: "done", summary} | {type: "error", error, name, fields}

import { openModelStore } from "./models.mjs";

let controller = null;

self.onmessage = async ({ data }) => {
  if (data.type === "cancel") return controller?.abort();
  if (data.type !== "download" || controller) return;
  controller = new AbortController();
  try {
    const store = await openModelStore();
    const summary = await store.download(data.source, {
      signal: controller.signal,
      onProgress: (progress) => self.postMessage({ type: "progress", progress }),
    });
    self.postMessage({ type: "done", summary });
  } catch (e) {
    // the store error's fields too (url, offset, needed, ...): the page puts them in words
    const fields = e && typeof e === "object" ? Object.fromEntries(Object.entries(e).filter(([, v]) => v === null || ["string", "number", "boolean"].includes(typeof v))) : null;
    self.postMessage({ type: "error", error: String(e?.message ?? e), name: e?.name, fields });
  } finally {
    controller = null;
  }
};
