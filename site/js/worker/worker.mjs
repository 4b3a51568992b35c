// The module worker where all Python runs. It boots Pyodide, reads the tokenizer and chat
// template from the model source (from the store when it holds the model), puts the weights on
// the GPU or into NumPy once the store holds them, then answers the page.
//
// Page -> worker:
//   requests, answered in order one at a time when they need the model's steps, at once when
//   they need only the tokenizer and template (even while a reply is being written):
//     {id, type: "init", args: {source, build, backend, lock, hideJspi}}  backend: auto|webgpu|numpy;
//          lock: a Web Lock the worker holds while it lives (site/js/page/connection.mjs); hideJspi
//          (tests): hide JSPI before Python starts, as a browser without it would be
//     {id, type: "attach"}                              load the weights (the store holds the model now)
//     {id, type: "preview" | "render" | "tokenize" | "chat_template" | "lab_source" | "run_python", args}
//                                                       the text side's requests (py/chatlens/worker.py)
//     {id, type: "run" | "complete" | "predict", args}  a chat reply, a plain-text continuation, the
//                                                       reply's likely first tokens: steps of the model,
//                                                       pulled here (`pulled` below)
//     {id, type: "count", args}                         the exact figures of a Turn's overflow, which a preview
//                                                       answered from a bound ("at least"): pulled from Python a
//                                                       step at a time (`counted` below), other requests
//                                                       answered between steps; a newer count or a preview ends it
//     {id, type: "debug"}                               {wasm_heap}: Python's wasm memory in bytes (benchmarks)
//   signals, handled at once, even while a request runs:
//     {type: "stop", args: {id}}                        stop the reply of request `id`: it ends at the
//                                                       next pull (within a part of a GPU step); a count
//                                                       ends unanswered (an AbortError)
// Worker -> page:
//   {id, ok: true, result} | {id, ok: false, error, name, data}   the answer to request `id` (data: the
//                                      error's numbers where it has them, chatlens.protocol)
//   {type: "status", state, detail}    booting | loading | text (previews work; replies need the
//                                      weights) | weights (loading them) | ready | error
//   {type: "model", model}             what computes replies: {backend, n_ctx, kind, why} or {error, offer}
//                                      (offer: "webgpu" when a software GPU passed over could compute them)
//   {type: "token", id, token}         a reply id as it is chosen (request `id`): token is
//                                      {id, text, token, bytes}: the id, the text it adds, and its
//                                      token as the record's reply_tokens and reply_bytes write it
//   {type: "progress", id, read, of, ms, parts}  the prompt of request `id` read so far: tokens of
//                                      all, ms since the reply started, and on the GPU the parts of the
//                                      step reading the next chunk done so far (a long step is split
//                                      into parts: see gpu/executor.mjs); a count: characters of all
//
// A reply is a loop this worker pulls: Python's `start`, then one `step` a token. On the GPU,
// this side submits the runs Python plans (several in flight: the GPU never waits for the host)
// and hands Python each run's bytes; with NumPy, Python computes each step in `step`. Between
// two pulls the worker reads its messages: a stop, a preview. No JSPI, no SharedArrayBuffer.

import { openModelStore } from "../store/models.mjs";
import { mountTextFiles, textFiles } from "./files.mjs";
import { installChatlens, startPython } from "./python.mjs";
import { chooseBackend } from "./device.mjs";
import { attachWeights } from "./weights.mjs";
import { probe } from "../gpu/executor.mjs";

const SITE = new URL("../../", import.meta.url);

let py = null;
let python = null; // chatlens.worker's {call}, once Python is up
let booting = null;
let session = null; // {source, build, backend, device, path, info, store}
let attached = null; // {backend, n_ctx, kind, executor?} once replies can be computed
const stops = new Map(); // request id -> resolve(): a stop signal for that reply
const stopsAsked = new Set(); // the ids of replies asked to stop
let lastReply = null; // where the last reply's time went (the bench's "debug" request)
let counting = null; // the count Python holds: {ended: why it must end, or null}

const status = (state, detail = "") => {
  performance.mark(`chatlens:${state}`, { detail }); // where the time goes (scripts/bench_browser.py)
  self.postMessage({ type: "status", state, detail });
};

async function boot({ source, build, backend }) {
  status("booting", "starting Python (Pyodide)");
  const store = await openModelStore().catch(() => null); // no IndexedDB (a private window): HTTP only
  const stored = store ? await store.status(source).catch(() => null) : null;
  const files = textFiles(source, store, stored?.complete ? stored : null) // while Python starts
    .catch((e) => { throw unreachable(source, e); });
  files.catch(() => {}); // reported below, once awaited
  // The device first: Python starts from its memory snapshot only where the weights will go to
  // the GPU (NumPy for Pyodide is a binary package loaded after the boot, not tried on a Python
  // started from a snapshot).
  const device = await chooseDevice(backend, build.settings.emulated_adapters);
  const starting = startPython(SITE, build, { snapshot: device.backend === "webgpu" });
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
  session = { source, build, backend, device, path, info, store };
  if (stored?.complete) status("weights", "the tokenizer and chat template are ready; the weights are next");
  else status("text", "the tokenizer and chat template are ready; replies need the model's weights");
  // how Python started: from a saved snapshot, or booted (and a snapshot saved for the next visit)
  const snapshot = py.chatlensSnapshot?.restored ? "restored" : py.chatlensSnapshot?.key ? "saved" : "none";
  const computes = { backend: device.backend, why: device.why, adapter: device.gpu?.name ?? null };
  return { source, info, pyodide: build.pyodide.version, stored, snapshot, device: computes };
}

/** A network failure reading the text side ("URL: Failed to fetch") as a sentence a learner can
 * act on (the page offers Recorded mode and a retry); another error as it is. */
function unreachable(source, e) {
  // The default source only: a URL the learner gave is named as it is (its host may be a typo).
  if (source.origin !== "hub" || !/Failed to fetch|NetworkError|Load failed|network/i.test(e?.message ?? "")) return e;
  const host = new URL(source.url).host;
  const where = host === self.location.host ? "this site" : host;
  return new Error(`This page cannot reach ${where}, where the model's tokenizer and chat template are: the network ` +
    `may be off, or ${where} blocked from here, and no copy of them was kept from an earlier visit.`);
}

/** The backend `auto` (or the one asked for) takes here, with the adapter probed for it. */
async function chooseDevice(asked, emulatedNames) {
  let gpu = null;
  let missing = null;
  if (asked !== "numpy") {
    try {
      gpu = await probe();
    } catch (e) {
      missing = e.message;
    }
  }
  const choice = chooseBackend(asked, gpu?.info ?? null, emulatedNames);
  return { ...choice, gpu: choice.backend === "webgpu" ? gpu : null, why: missing && !gpu ? `${choice.why} (${missing})` : choice.why,
           passedOver: choice.backend === "numpy" && gpu ? gpu.name : null }; // a software GPU NumPy was preferred to
}

/** Put the weights to work (the store holds the whole model); `nCtx` for the GPU program. */
async function attach(nCtx = Math.max(...session.build.settings.windows)) {
  const { source, store, path } = session;
  if (!store || !(await store.status(source)).complete) throw new Error("the model is not stored yet: download it first");
  attached?.executor?.destroy();
  attached = null;
  status("weights", "loading the model's weights");
  try {
    attached = await attachWeights(session.device, {
      py, call: python.call, store, source, path, nCtx, asked: session.backend,
      packages: new URL(session.build.pyodide.packages, SITE).href,
      say: (detail) => status("weights", detail),
      onCorrupt: (e) => status("weights", `${e.message}: fetching that part again`),
    });
  } catch (e) {
    self.postMessage({ type: "model", model: { error: e.message, offer: e.offer ?? null } });
    status("text", e.message);
    throw e;
  }
  const { executor, ...model } = attached;
  // A lost GPU (a driver reset, a test's device.destroy()) loses the weights and the cache with
  // it: put them on a new device, and the next run (or the one in flight, retried) goes on there.
  executor?.device.lost.then(() => {
    if (attached?.executor !== executor || executor.destroyed) return; // let go on purpose
    status("weights", "the GPU device was lost: putting the weights on a new one");
    // In turn with the requests: a reply may be pulling on the lost device right now (it puts
    // the weights on a new device itself, and this then has nothing to do).
    enqueue(() => attached?.executor === executor && attach(attached.n_ctx));
  });
  self.postMessage({ type: "model", model });
  status("ready", `${session.source.label} on ${attached.backend} (${attached.why})`);
  return model;
}

const requests = {
  /** For scripts/bench_browser.py: the size of Python's wasm memory, in bytes, and where the
   * last reply's time went in this thread (`pull`'s figures). */
  debug: () => ({ wasm_heap: py?._module.HEAP8.length ?? null, last_reply: lastReply }),
  async init(args) {
    if (args.hideJspi) { // tests: a browser without JavaScript Promise Integration (older Firefox, Safari)
      delete WebAssembly.Suspending;
      delete WebAssembly.promising;
    }
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
    if (counting) counting.ended ??= "a newer preview ended the count"; // it counted what the page showed before
    return python.call("preview", args);
  },
  async count(args, id) {
    if (!booting) throw new Error("the worker has not started: init comes first");
    await booting;
    return counted(args, id);
  },
  async run(args, id) {
    await booting;
    // The GPU program holds the largest window offered; a larger one needs the model's whole context.
    if (attached?.kind === "webgpu" && args.window > attached.n_ctx) await attach(session.info.n_ctx);
    return pulled("chat", args, id);
  },
  async predict(args, id) {
    await booting;
    return pulled("predict", args, id);
  },
  async complete(args, id) {
    await booting;
    return pulled("text", args, id);
  },
};

/**
 * One reply (kind: chat | text | predict, chatlens.worker's `start`), pulled to its end: the
 * tokens and the prompt's progress posted as they come, a stop signal answered at the next pull.
 * A GPU lost during it (a driver reset) puts the weights on a new device and starts it again.
 */
async function pulled(kind, args, id) {
  const used = attached;
  const streamed = { posted: 0, skip: 0 }; // the tokens posted to the page
  try {
    return await pull(kind, args, id, streamed);
  } catch (e) {
    if (!(await gpuLost(used?.executor, e))) throw e;
    await attach(used.n_ctx);
    // Computed again from the start, the reply's first tokens are the ones the page has already.
    return pull(kind, args, id, { posted: 0, skip: streamed.posted });
  } finally {
    stops.delete(id);
    stopsAsked.delete(id);
  }
}

/** Whether `executor`'s device is lost. Work pending on a device that goes fails (a DOMException:
 * "Buffer was unmapped before mapping was resolved") before `device.lost` settles, so after such
 * a failure the device is given a moment to say it is lost. */
async function gpuLost(executor, error) {
  if (!executor || executor.lost || !(error instanceof DOMException)) return Boolean(executor?.lost);
  const moment = new Promise((resolve) => setTimeout(() => resolve(false), 1000));
  return Promise.race([executor.device.lost.then(() => true), moment]);
}

const STOPPED = Symbol("stopped");

async function pull(kind, args, id, streamed = { posted: 0, skip: 0 }) {
  const gpu = attached?.kind === "webgpu" ? attached.executor : null;
  let asked = stopsAsked.has(id); // a stop may come before its reply starts
  const stopped = new Promise((resolve) => stops.set(id, () => resolve(STOPPED))).then((v) => ((asked = true), v));
  const t0 = performance.now();
  const flight = []; // the GPU runs submitted, oldest first: promises of their bytes
  // Where the time goes, for the bench: in Python, submitting runs, waiting for their bytes.
  const spent = { python_ms: 0, submit_ms: 0, wait_ms: 0, pulls: 0, most_in_flight: 0 };
  const timed = (what, f) => {
    const t = performance.now();
    try {
      return f();
    } finally {
      spent[what] += performance.now() - t;
    }
  };
  const ask = (name, a, ...extra) => {
    spent.pulls += 1;
    return timed("python_ms", () => python.call(name, a, ...extra));
  };
  // The prompt's progress, posted at each pull and, on the GPU, after each part of a step that
  // reads it (a chunk of 128 tokens on a slow GPU is one step of minutes).
  let progress = null; // {read, of, parts}, while the prompt is read
  const tellProgress = () => {
    if (progress) self.postMessage({ type: "progress", id, ...progress, ms: performance.now() - t0 });
  };
  const partDone = () => {
    if (progress) (progress.parts += 1), tellProgress();
    return asked;
  };
  try {
    return await pullLoop();
  } finally {
    for (const f of flight) f.catch(() => {}); // steps computed past the end: their bytes are not needed
  }

  async function pullLoop() {
    let out = ask("start", { kind, args, depth: gpu ? gpu.depth() : 1 });
    lastReply = spent;
    for (;;) {
      for (const t of out.tokens) {
        if (streamed.skip > 0) streamed.skip -= 1;
        else (streamed.posted += 1), self.postMessage({ type: "token", id, token: t });
      }
      if (out.done) return out.done;
      progress = out.read < out.prompt ? { read: out.read, of: out.prompt, parts: 0 } : null;
      tellProgress();
      if (asked) {
        out = ask("stop", {});
        continue;
      }
      if (gpu) {
        for (const r of out.runs) {
          const params = new Uint8Array(new Uint32Array(r.params).buffer); // the step buffer's words
          flight.push(timed("submit_ms", () => gpu.submit(r.sequences, params, r.readback, { stopped: partDone })));
        }
        spent.most_in_flight = Math.max(spent.most_in_flight, flight.length);
        const oldest = flight.shift();
        const t = performance.now();
        const raw = await Promise.race([oldest, stopped]);
        spent.wait_ms += performance.now() - t;
        if (raw === STOPPED || raw === null || asked) { // a stop came before this step's bytes: none of them count
          oldest.catch(() => {});
          out = ask("stop", {});
          continue;
        }
        out = ask("step", { depth: gpu.depth() }, raw);
      } else {
        await Promise.race([nextTask(), stopped]); // a stop or a preview between two steps of NumPy
        out = ask(asked ? "stop" : "step", {});
      }
    }
  }
}

/**
 * The exact count of a Turn (chatlens.worker's `count`), pulled a step at a time as a reply is:
 * Python never counts for long in one call, and between two steps this worker reads its
 * messages, so a preview or a tokenize sent meanwhile is answered before the count ends. Python
 * holds one count: a newer count, a preview or a stop signal for `id` ends this one, which then
 * rejects with an AbortError.
 */
async function counted(args, id) {
  if (counting) counting.ended ??= "a newer count replaced this one";
  const me = { ended: stopsAsked.has(id) ? "the count was stopped" : null };
  counting = me;
  stops.set(id, () => (me.ended ??= "the count was stopped"));
  const t0 = performance.now();
  let done = false;
  try {
    let out = python.call("count", args);
    for (;;) {
      if (out.done) {
        done = true;
        return out.done;
      }
      self.postMessage({ type: "progress", id, read: out.read, of: out.of, ms: performance.now() - t0 });
      await nextTask();
      if (me.ended) throw abortError(me.ended);
      out = python.call("count_step", {});
    }
  } finally {
    if (counting === me) {
      counting = null;
      if (!done) python.call("count_stop", {}); // not a newer count's: that one replaced it in Python already
    }
    stops.delete(id);
    stopsAsked.delete(id);
  }
}

function abortError(message) {
  const e = new Error(message);
  e.name = "AbortError";
  return e;
}

/** Resolves after the messages already queued for this worker have been handled. */
const nextTask = () => new Promise((resolve) => {
  const channel = new MessageChannel();
  channel.port1.onmessage = () => resolve();
  channel.port2.postMessage(null);
});
// The text side's requests: answered from the tokenizer and template alone.
for (const name of ["render", "tokenize", "chat_template", "lab_source", "run_python"]) {
  requests[name] = async (args) => {
    await booting;
    return python.call(name, args);
  };
}

const signals = {
  stop({ id }) {
    stopsAsked.add(id);
    stops.get(id)?.();
  },
  /** For tests: the GPU device goes, as it does when a driver resets. */
  loseGpu() {
    attached?.executor?.device.destroy();
  },
};

// Requests Python answers at once from the tokenizer and template: between two pulls of a reply,
// and without waiting behind the seconds of JavaScript that put the weights on the GPU.
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
      self.postMessage({ id, ok: false, error: String(e?.message ?? e), name: e?.name, data: e?.data });
    }
  };
  // Python is never inside a call while JavaScript waits (a reply's pulls are separate calls), so
  // a text-side request can be answered whenever it comes once Python is up.
  if (TEXT_SIDE.has(type) && python) return answer();
  // A count is background work: it waits for no request, and none waits for it.
  if (type === "count") return answer();
  enqueue(answer);
};
