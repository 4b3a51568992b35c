// The model store as window.chatlens offers it: downloading the current source, or the base
// model beside it (in store/download-worker.mjs, with progress and an AbortSignal), listing,
// deleting, and the browser's storage estimate. Only the page can ask for persistent storage, so it asks here:
// beside the download, never in front of it (Firefox answers only once the user answers its
// prompt, and a headless or ignored prompt is never answered).

import { openModelStore, pageApi, requestPersistence } from "../store/models.mjs";
import { modelSpec } from "../store/spec.mjs";
import { resolveBaseSource } from "./source.mjs";

/** The event the page hears when the current source's model leaves the store (from the page or
 * an API caller): the weights a worker read from it are no longer there to read again, so the
 * page starts over without them (model.mjs), and the status and chatlens.model say so.
 * detail: {id, model: "instruct" | "base"}; the base leaving changes nothing for the instruct. */
export const MODEL_DELETED = "chatlens:model-deleted";
const deletedEvent = (id, model) => globalThis.dispatchEvent?.(new CustomEvent(MODEL_DELETED, { detail: { id, model } }));

/** The event the page hears when persistent storage is asked for and when the browser answers
 * (detail: {persisted: true | false | null, undefined while unanswered}), so the model box can say
 * what the answer means. */
export const PERSISTENCE = "chatlens:persistence";
const persistenceEvent = (persisted) => globalThis.dispatchEvent?.(new CustomEvent(PERSISTENCE, { detail: { persisted } }));

/**
 * currentSource(): the page's source (the instruct); build(): a promise of build.json, read when
 * the base model is first asked for (its source is resolved once, on that first ask; by default
 * the site's build.json, which the browser has cached by then).
 */
export function createDownloads(currentSource, build = siteBuild) {
  const store = openModelStore();
  const manage = store.then((s) => pageApi(s, currentSource));
  const running = new Map(); // model -> its download in progress: one at a time for each
  let base = null;
  /** The base model's source (resolved once; a failure is not kept, so a later ask tries again). */
  function baseSource() {
    base ??= build().then((b) => resolveBaseSource({ build: b }));
    base.catch(() => (base = null));
    return base;
  }
  // The page's two models, by their keys (build.json's settings.model_keys, Python's
  // protocol.MODELS): "instruct" is the current source (the default, or a URL given), "base" the
  // base model the comparison reads beside it (source.mjs's resolveBaseSource).
  const keys = async () => (await build()).settings.model_keys;
  const sourceOf = async (key = "instruct") => {
    if (key === "instruct") return currentSource();
    if (key === "base") return baseSource();
    throw new TypeError(`the model is one of ${(await keys()).map((k) => JSON.stringify(k)).join(", ")}, not ${JSON.stringify(key)}`);
  };
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

  /** Resolves with the stored model's summary once `model` (a model key: "instruct", the current
   * source, or "base") is stored and verified. A download cut before (cancelled, a reload) goes on
   * from the last whole chunk: the store resumes by Range. A failure rejects with the store's
   * error (its name and its fields: url, offset) for downloadFailure to put in words. */
  async function downloadModel({ model: key = "instruct", onProgress, signal } = {}) {
    if (running.has(key)) throw new Error(`a download of the ${key} model is already running`);
    if (signal?.aborted) throw new DOMException("the download was cancelled", "AbortError");
    const pending = sourceOf(key);
    running.set(key, pending);
    let source;
    try {
      source = await pending;
    } catch (e) {
      running.delete(key);
      throw e;
    }
    const download = new Promise((resolve, reject) => {
      const worker = new Worker(new URL("../store/download-worker.mjs", import.meta.url), { type: "module" });
      const finish = (settle, value) => {
        signal?.removeEventListener("abort", cancel);
        worker.terminate();
        running.delete(key);
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
          if (data.fields) Object.assign(e, data.fields); // the store error's own: url, offset, needed, ...
          finish(reject, e);
        }
      };
      worker.onerror = (e) => finish(reject, new Error(`the download worker failed: ${e.message || "it could not start"}`));
      worker.postMessage({ type: "download", source });
      askPersistence(); // beside the download: its answer may never come
    });
    running.set(key, download);
    return download;
  }

  /** The ids the store keeps the page's models under, where they are stored: {instruct, base}. */
  async function storedIds() {
    const ids = {};
    for (const key of await keys()) {
      try {
        const st = await (await store).status(await sourceOf(key));
        ids[key] = st && st.bytes > 0 ? st.id : null;
      } catch {
        ids[key] = null; // no base in this build, or the store cannot say
      }
    }
    return ids;
  }
  const deleted = (ids, gone) => {
    for (const key of Object.keys(ids)) if (ids[key] && gone(ids[key])) deletedEvent(ids[key], key);
  };

  return {
    downloadModel,
    /** What this source needs: [{name, size (null when unknown)}] and where it comes from. */
    spec: () => modelSpec(currentSource()),
    status: async () => (await store).status(currentSource()),
    baseSource,
    /** The base model as the download box shows it: {source, spec, status} (status.complete false
     * while half of it is stored: it is then resumed, never read), or {error} when this page cannot
     * offer it. */
    base: async () => {
      try {
        const source = await baseSource();
        return { source, spec: modelSpec(source), status: await (await store).status(source) };
      } catch (e) {
        return { error: e.message };
      }
    },
    /** Every stored model, each saying which of the page's it is (source.model: "instruct", "base"
     * or null: a model given by URL), also where it was stored before the store kept that. */
    storedModels: async () => {
      const [models, ids] = await Promise.all([(await manage).storedModels(), storedIds()]);
      const roles = { instruct: currentSource()?.model ?? null, base: "base" }; // a URL's model is neither
      const which = (id) => roles[Object.keys(ids).find((k) => ids[k] === id)] ?? null;
      return models.map((s) => ({ ...s, source: { ...s.source, model: s.source?.model ?? which(s.id) } }));
    },
    deleteModel: async (id) => {
      const ids = await storedIds();
      await (await manage).deleteModel(id);
      deleted(ids, (x) => x === id);
    },
    deleteAllModels: async () => {
      const ids = await storedIds();
      await (await manage).deleteAllModels();
      deleted(ids, () => true);
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

async function siteBuild() {
  const url = new URL("../../build.json", import.meta.url);
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}
