// The module worker where all Python runs. It boots Pyodide, reads the tokenizer and chat
// template from the model source (from the store when it holds the model), puts the weights on
// the GPU or into NumPy once the store holds them, then answers the page.
//
// Page -> worker:
//   requests, answered one at a time in order (Python is single-threaded), except the text side's,
//   answered at once unless a run is computing:
//     {id, type: "init", args: {source, build, stop, backend, lock}}  stop: an Int32Array on a
//          SharedArrayBuffer, or null when the page is not isolated; backend: auto|webgpu|numpy;
//          lock: a Web Lock the worker holds while it lives (site/js/connection.mjs)
//     {id, type: "attach"}                              load the weights (the store holds the model now)
//     {id, type: "preview" | "run", args}               (see py/chatlens/worker.py)
//     {id, type: "render" | "tokenize" | "chat_template" | "lab_source" | "run_python", args}
//                                                       the text side's requests (no weights needed)
//     {id, type: "predict" | "complete", args}          steps of the model, as run's (complete streams
//                                                       tokens and stops as run does)
//     {id, type: "debug"}                               {wasm_heap}: Python's wasm memory in bytes (benchmarks)
//   signals, handled at once, even while a request runs:
//     {type: "stop", args: {id}}                        stop the run with request id `id`
// Worker -> page:
//   {id, ok: true, result} | {id, ok: false, error, name}   the answer to request `id`
//   {type: "status", state, detail}    booting | loading | text (previews work; replies need the
//                                      weights) | weights (loading them) | ready | error
//   {type: "model", model}             what computes replies: {backend, n_ctx, kind} or {error}
//   {type: "token", id, token, text, piece}  a reply id as it is chosen (run `id`): the text it adds,
//                                      and its token as the vocabulary writes it

import { openModelStore } from "../store/models.mjs";
import { mountTextFiles, textFiles } from "./files.mjs";
import { installChatlens, startPython } from "./python.mjs";
import { attachWeights, canSuspend } from "./weights.mjs";

const SITE = new URL("../../", import.meta.url);

let py = null;
let python = null; // chatlens.worker's {call, callAsync}, once Python is up
let booting = null;
let session = null; // {source, build, backend, path, info, store}
let attached = null; // {backend, n_ctx, kind, executor?} once replies can be computed
let stopShared = null; // Int32Array [id of the run to stop], written by the page
let stopAsked = 0; // the same, from a stop signal (seen whenever Python waits for the GPU)

const status = (state, detail = "") => {
  performance.mark(`chatlens:${state}`, { detail }); // where the time goes (scripts/bench_browser.py)
  self.postMessage({ type: "status", state, detail });
};

async function boot({ source, build, backend }) {
  status("booting", "starting Python (Pyodide)");
  const store = await openModelStore().catch(() => null); // no IndexedDB (a private window): HTTP only
  const stored = store ? await store.status(source).catch(() => null) : null;
  const files = textFiles(source, store, stored?.complete ? stored : null); // while Python starts
  files.catch(() => {}); // reported below, once awaited
  // A snapshot only where the weights will go to the GPU: NumPy for Pyodide is a binary package
  // loaded after the boot, which has not been tried on a Python started from a snapshot.
  const starting = startPython(SITE, build, { snapshot: backend !== "numpy" && canSuspend && "gpu" in navigator });
  await Promise.race([starting, files.then(() => starting)]); // a failed download fails the boot now
  py = await starting;
  status("booting", "installing chatlens");
  python = await installChatlens(py, SITE, build);
  status("loading", `reading the tokenizer and chat template from ${source.label}`);
  const path = mountTextFiles(py, source, await files);
  let info;
  try {
    info = python.call("load", { path });
  } catch (e) {
    // Python names the file in the worker's file system; the user knows the URL.
    e.message = `${source.url}: ${e.message.replace(/^\/models\/[^:]*: /, "")}`;
    throw e;
  }
  session = { source, build, backend, path, info, store };
  if (stored?.complete) status("weights", "the tokenizer and chat template are ready; the weights are next");
  else status("text", "the tokenizer and chat template are ready; replies need the model's weights");
  // how Python started: from a saved snapshot, or booted (and a snapshot saved for the next visit)
  const snapshot = py.chatlensSnapshot?.restored ? "restored" : py.chatlensSnapshot?.key ? "saved" : "none";
  return { source, info, pyodide: build.pyodide.version, stored, snapshot };
}

/** Put the weights to work (the store holds the whole model); `nCtx` for the GPU program. */
async function attach(nCtx = Math.max(...session.build.settings.windows)) {
  const { source, store, path } = session;
  if (!store || !(await store.status(source)).complete) throw new Error("the model is not stored yet: download it first");
  attached?.executor?.destroy();
  attached = null;
  status("weights", "loading the model's weights");
  try {
    attached = await attachWeights(session.backend, {
      py, call: python.call, store, source, path, nCtx, packages: new URL(session.build.pyodide.packages, SITE).href,
      say: (detail) => status("weights", detail),
      onCorrupt: (e) => status("weights", `${e.message}: fetching that part again`),
    });
  } catch (e) {
    self.postMessage({ type: "model", model: { error: e.message } });
    status("text", `replies are not available: ${e.message}`);
    throw e;
  }
  const { executor, ...model } = attached;
  // A lost GPU (a driver reset, a test's device.destroy()) loses the weights and the cache with
  // it: put them on a new device, and the next run (or the one in flight, retried) goes on there.
  executor?.device.lost.then(() => {
    if (attached?.executor !== executor || executor.destroyed) return; // let go on purpose
    status("weights", "the GPU device was lost: putting the weights on a new one");
    // In turn with the requests: Python may be waiting on the lost device in a run right now.
    enqueue(() => attached?.executor === executor && attach(attached.n_ctx));
  });
  self.postMessage({ type: "model", model });
  status("ready", `${session.source.label} on ${attached.backend}`);
  return model;
}

const requests = {
  /** For scripts/bench_browser.py: the size of Python's wasm memory, in bytes. */
  debug: () => ({ wasm_heap: py?._module.HEAP8.length ?? null }),
  async init(args) {
    stopShared = args.stop || null;
    // Held as long as this worker lives: the page learns it is gone when the lock is free.
    if (args.lock) navigator.locks?.request(args.lock, () => new Promise(() => {}));
    booting ??= boot(args).catch((e) => {
      status("error", e.message);
      throw e;
    });
    return booting;
  },
  async attach() {
    await booting;
    return attach();
  },
  async preview(args) {
    await booting;
    return python.call("preview", args);
  },
  async run(args, id) {
    await booting;
    // The GPU program holds the largest window offered; a larger one needs the model's whole context.
    if (attached?.kind === "webgpu" && args.window > attached.n_ctx) await attach(session.info.n_ctx);
    const onToken = (token, text, piece) => self.postMessage({ type: "token", id, token, text, piece });
    const shouldStop = () => stopAsked === id || (stopShared !== null && Atomics.load(stopShared, 0) === id);
    const used = attached;
    try {
      return await python.callAsync("run", args, onToken, shouldStop);
    } catch (e) {
      if (!used?.executor?.lost) throw e;
      await attach(used.n_ctx); // the device went during this run: on a new one, the turn again
      return python.callAsync("run", args, onToken, shouldStop);
    }
  },
  async predict(args) {
    await booting;
    return python.callAsync("predict", args);
  },
  async complete(args, id) {
    await booting;
    const onToken = (token, text, piece) => self.postMessage({ type: "token", id, token, text, piece });
    const shouldStop = () => stopAsked === id || (stopShared !== null && Atomics.load(stopShared, 0) === id);
    return python.callAsync("complete", args, onToken, shouldStop);
  },
};
// The text side's requests: answered from the tokenizer and template alone.
for (const name of ["render", "tokenize", "chat_template", "lab_source", "run_python"]) {
  requests[name] = async (args) => {
    await booting;
    return python.call(name, args);
  };
}

const signals = {
  stop({ id }) {
    stopAsked = id;
  },
  /** For tests: the GPU device goes, as it does when a driver resets. */
  loseGpu() {
    attached?.executor?.device.destroy();
  },
};

// Requests Python answers at once from the tokenizer and template, without waiting for JavaScript.
const TEXT_SIDE = new Set(["preview", "render", "tokenize", "chat_template", "lab_source", "run_python"]);

let queue = Promise.resolve();
const enqueue = (task) => (queue = queue.then(task).catch(() => {}));
self.onmessage = ({ data }) => {
  const { id, type, args } = data;
  if (signals[type]) return signals[type](args || {});
  const answer = async () => {
    try {
      const handler = requests[type];
      if (!handler) throw new Error(`unknown request ${type}`);
      self.postMessage({ id, ok: true, result: await handler(args || {}, id) });
    } catch (e) {
      self.postMessage({ id, ok: false, error: String(e?.message ?? e), name: e?.name });
    }
  };
  // A text-side request is one synchronous call into Python: it can be answered whenever Python
  // is not inside a call that waits for JavaScript (a run, which suspends it through JSPI). So a
  // preview need not queue behind the seconds of JavaScript that put the weights on the GPU
  // (reading the store, compiling pipelines), nor behind a queued run that has not started.
  if (TEXT_SIDE.has(type) && python && !python.suspended()) return answer();
  enqueue(answer);
};
