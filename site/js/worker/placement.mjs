// Where each model's weights are: the instruct model's (the page's source) and, for the
// comparison, the base model's beside it, each with its own weights in Python and, on the GPU,
// its own program and executor (weights.mjs puts them there). What can go wrong, and what happens:
//   a model not stored whole     -> attach (attachBase) refuses with a sentence: download it first
//   neither GPU nor NumPy works  -> attach refuses with weights.mjs's sentence, and the page is
//                                   told (a "model" event: the error and a backend to offer, if any)
//   a base whose tokenizer       -> Python refuses it, with TokenizerMismatchError's sentence
//   differs
//   a window past the program's  -> the instruct's program is built again for the model's whole
//                                   context (`fit`), before the reply that asked for it
//   a GPU device lost (a driver  -> the instruct's weights go to a new device, in turn with the
//   reset, lose_gpu)                requests (a reply pulling on it has done so itself, and is
//                                   pulled again: jobs.mjs); the base's on the next comparison
//   no room on the GPU for both  -> one model on the GPU at a time, said in a status note and in
//                                   the base's ModelInfo: `onDevice` lets the other's executor go
//                                   and puts this one's back (the instruct's before a job of its
//                                   own, the comparison's between its replies)
// In every case a job's runs go to the executor of the model whose weights Python planned them
// with, and an executor let go on purpose (`destroyed`) is never taken for a lost one.

import { mountTextFiles, textFiles } from "./files.mjs";
import { attachWeights, gpuExecutor } from "./weights.mjs";
import { probe } from "../gpu/executor.mjs";

/**
 * The models' placement for a booted worker. m: {py, call (chatlens.worker's), session ({source,
 * build, backend, device, path, info, store}: worker.mjs's boot), site (the site's root URL),
 * status(state, detail), inTurn(task) (runs `task` in turn with the requests that need the model),
 * roomForOne (tests: a second model's weights on the GPU fail as on a small GPU)}.
 */
export function createPlacement({ py, call, session, site, status, inTurn, roomForOne = false }) {
  let attached = null; // the instruct's {backend, n_ctx, kind, why, executor?} once replies can be computed
  let base = null; // the base model beside it: {source, path, model: its ModelInfo, executor?}
  let oneAtATime = null; // the sentence saying why only one model's weights fit on the GPU, once they did not
  const packages = new URL(session.build.pyodide.packages, site).href;
  /** A stored chunk that failed its check, said while the store fetches it again. */
  const refetching = (e) => status("weights", `${e.message}: fetching that part again`);

  /** Put the instruct's weights to work (the store holds the whole model); `nCtx` for the GPU program. */
  async function attach(nCtx = Math.max(...session.build.settings.windows)) {
    const { source, store, path } = session;
    if (!store || !(await store.status(source)).complete) throw new Error("the model is not stored yet: download it first");
    attached?.executor?.destroy();
    // One model on the GPU at a time: the base's weights let go first (a comparison puts them back).
    if (oneAtATime && base?.executor && !base.executor.destroyed) base.executor.destroy();
    attached = null;
    status("weights", "loading the model's weights");
    try {
      attached = await attachWeights(session.device, {
        py, call, store, source, path, nCtx, asked: session.backend, packages, check: session.checks,
        say: (detail) => status("weights", detail),
        onCorrupt: refetching,
      });
    } catch (e) {
      self.postMessage({ type: "model", computes: { error: e.message, offer: e.offer ?? null } });
      status("text", e.message);
      throw e;
    }
    const { executor, ...rest } = attached;
    const model = { ...rest, model: "instruct" };
    // A lost GPU (a driver reset, a test's device.destroy()) loses the weights and the cache with
    // it: put them on a new device, and the next run (or the one in flight, retried) goes on there.
    executor?.device.lost.then(() => {
      if (attached?.executor !== executor || executor.destroyed) return; // let go on purpose
      status("weights", "the GPU device was lost: putting the weights on a new one");
      // In turn with the requests: a reply may be pulling on the lost device right now (it puts
      // the weights on a new device itself, and this then has nothing to do).
      inTurn(() => attached?.executor === executor && attach(attached.n_ctx));
    });
    self.postMessage({ type: "model", computes: model });
    status("ready", `${session.source.label} on ${attached.backend} (${attached.why})${checkWords(attached.check)}`);
    return model;
  }

  /** The base model beside the instruct (the comparison's): its text side read from the store
   * (only a complete copy: a half-downloaded base is resumed by the page, never read here) and
   * refused by Python when its tokenizer differs, then its weights on the same device as the
   * instruct's. On the GPU a second program and executor, both models at once; when the device
   * has no room for both, one at a time (`onDevice` swaps them), said in a status note. */
  async function attachBase(source) {
    const { store } = session;
    // A device lost under it (a driver reset; not one let go on purpose, one model at a time): put again.
    const gone = base?.executor?.lost && !base.executor.destroyed;
    if (base && base.source.id === source.id && base.model && !gone) return base.model;
    const stored = store ? await store.status(source).catch(() => null) : null;
    if (!stored?.complete) {
      throw new Error(`the base model (${source.label}) is not stored ${stored?.bytes ? "whole yet" : "yet"}: ` +
        "download it first; a download cut short goes on where it stopped");
    }
    status("weights", `reading the base model's tokenizer from ${source.label}`);
    const path = mountTextFiles(py, source, await textFiles(source, store, stored), "/models/base");
    call("load_base", { path }); // a TokenizerMismatchError's sentence reaches the page as it is
    base?.executor?.destroy();
    base = { source, path, model: null, executor: null };
    base.model = await putBase();
    self.postMessage({ type: "model", computes: base.model });
    // the base named by its source's label, which says what its files are (a stand-in says so)
    status("ready", `${session.source.label} and, as the base model, ${source.label} on ${base.model.backend}`);
    return base.model;
  }

  /** The base model's weights on the device the instruct's are on (NumPy: loaded beside them). */
  async function putBase() {
    const one = (m) => attachWeights(session.device, {
      py, call, store: session.store, source: base.source, path: base.path, model: "base",
      nCtx: attached?.n_ctx ?? Math.max(...session.build.settings.windows), asked: attached?.kind ?? session.backend,
      packages, check: session.checks, say: (detail) => status("weights", `base model: ${detail}`), onCorrupt: refetching, ...m,
    });
    status("weights", "loading the base model's weights beside the instruct model's");
    let got;
    try {
      if (roomForOne && attached?.kind === "webgpu" && !attached.executor.destroyed) {
        throw new Error("the test asked for room for one model only"); // before anything is allocated
      }
      got = await one();
    } catch (e) {
      if (attached?.kind !== "webgpu") throw e;
      // No room for a second program beside the first: one model on the GPU at a time.
      oneAtATime = `the GPU has no room for both models at once (${e.message}): the comparison puts one on it at ` +
        "a time, which takes longer";
      status("weights", oneAtATime);
      attached.executor.destroy();
      got = await one({ asked: "webgpu" });
    }
    const { executor, ...model } = got;
    base.executor = executor ?? null;
    return { ...model, model: "base", note: oneAtATime };
  }

  /** The executor of `model`'s weights, put back on the GPU first when only one fits at a time
   * (the other's let go first); null on NumPy. `starting`: before a job of the instruct's starts,
   * through attach, whose use_gpu empties Python's cache over them too (what it held went with
   * the device). During a comparison only the executor is made anew: use_gpu would end the job
   * under way, and the reply about to start was given an empty cache already (chatlens.worker's
   * _Compare). */
  async function onDevice(model, { starting = false } = {}) {
    const mine = model === "base" ? base : attached;
    if (!mine?.executor || !mine.executor.destroyed) return mine?.executor ?? null;
    const other = model === "base" ? attached : base;
    if (other?.executor && !other.executor.destroyed) other.executor.destroy();
    status("weights", `putting the ${model} model on the GPU (${oneAtATime})`);
    if (starting && model === "instruct") {
      await attach(attached.n_ctx);
      return attached.executor;
    }
    // The same program Python plans this model's runs with (its n_ctx kept), on a new device (an
    // adapter makes one device).
    const which = model === "base" ? { source: base.source, path: base.path, nCtx: base.model.n_ctx }
      : { source: session.source, path: session.path, nCtx: attached.n_ctx };
    mine.executor = await gpuExecutor(await probe(), {
      py, call, store: session.store, ...which, model, check: session.checks,
      say: (detail) => status("weights", `${model} model: ${detail}`),
      onCorrupt: refetching,
    });
    status("ready", `${session.source.label} and, as the base model, ${base.source.label} on webgpu, one at a time`);
    return mine.executor;
  }

  /** Whether `executor`'s device is lost. Work pending on a device that goes fails (a DOMException:
   * "Buffer was unmapped before mapping was resolved") before `device.lost` settles, so after such
   * a failure the device is given a moment to say it is lost. */
  async function wasLost(executor, error) {
    if (executor?.destroyed) return false; // let go on purpose (one model on the GPU at a time): not lost
    if (!executor || executor.lost || !(error instanceof DOMException)) return Boolean(executor?.lost);
    const moment = new Promise((resolve) => setTimeout(() => resolve(false), 1000));
    return Promise.race([executor.device.lost.then(() => true), moment]);
  }

  return {
    /** The instruct's weights: {backend, n_ctx, kind: "webgpu" | "numpy", why, check?, executor?}, or null. */
    get instruct() {
      return attached;
    },
    attach,
    attachBase,
    onDevice,
    wasLost,
    /** Before a reply read in `window` tokens: the GPU program holds the largest window offered,
     * so a larger one needs the program built again for the model's whole context. */
    async fit(window) {
      if (attached?.kind === "webgpu" && window > attached.n_ctx) await attach(session.info.n_ctx);
    },
    /** For tests: the GPU devices go (each model's), as they do when a driver resets. */
    loseGpu() {
      attached?.executor?.device.destroy();
      if (base?.executor && !base.executor.destroyed) base.executor.device.destroy();
    },
  };
}

/** The known-answer check, for the status line: what let the GPU compute (nothing on NumPy). */
function checkWords(check) {
  if (!check) return "";
  if (!check.passed) return `; unchecked: it failed its known-answer check (${check.sentence})`;
  const within = `its known-answer check agrees with the reference within ${check.max_diff.toExponential(0)}`;
  return `; ${within}${check.cached ? " (kept from an earlier visit)" : ""}`;
}
