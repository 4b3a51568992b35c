// The module worker where all Python runs. It boots Pyodide, reads the tokenizer and chat
// template from the model source (from the store when it holds the model), puts the weights on
// the GPU or into NumPy once the store holds them, then answers the page.
//
// The messages it takes and sends (requests, signals, events, the answer envelope) are
// described once, in py/chatlens/protocol.py (PAGE_REQUESTS, SIGNALS, EVENTS, Answer), and
// listed in protocol.gen.mjs; tests/page/messages.test.mjs keeps this file to that list.
//
// A job is a loop this worker pulls (`pulled` below): Python's `start(kind)` (chat, text,
// predict, count or compare), then one `step` a token (a count: a few milliseconds of counting). On the
// GPU, this side submits the runs Python plans (several in flight: the GPU never waits for the
// host) and hands Python each run's bytes; with NumPy, Python computes each step in `step`.
// Between two steps the worker reads its messages: a stop, a preview. One job at a time in
// Python: a newer start ends the one before. No JSPI, no SharedArrayBuffer.
//
// Two models: the instruct (the page's source) and, for the comparison, the base model beside it
// (attach_base), each with its own weights in Python and, on the GPU, its own executor; a
// comparison's step answer names the model whose runs it plans, and they go to that executor.

import { openModelStore } from "../store/models.mjs";
import { mountTextFiles, textFiles } from "./files.mjs";
import { installChatlens, startPython } from "./python.mjs";
import { chooseBackend } from "./device.mjs";
import { attachWeights, gpuExecutor } from "./weights.mjs";
import { probe } from "../gpu/executor.mjs";

const SITE = new URL("../../", import.meta.url);

let py = null;
let python = null; // chatlens.worker's {call}, once Python is up
let booting = null;
let session = null; // {source, build, backend, device, path, info, store}
let attached = null; // {backend, n_ctx, kind, executor?} once replies can be computed
let base = null; // the base model beside it (attach_base): {source, path, model: its ModelInfo, executor?}
let oneAtATime = null; // the sentence saying why only one model's weights fit on the GPU, once they did not
let roomForOne = false; // tests (init's one_model_on_gpu): a second model's weights on the GPU fail as on a small GPU
const jobs = new Map(); // request id -> its job (`pulled`): what a stop signal ends
const stopsAsked = new Set(); // the ids of jobs asked to stop (a stop may come before its job starts)
let lastReply = null; // where the last job's time went (the bench's "debug" request)
let job = null; // the job Python holds: the one whose `start` came last, until it ends
let counting = null; // the count asked for last, waiting or running: a preview, a newer count or a reply ends it

const status = (state, detail = "") => {
  performance.mark(`chatlens:${state}`, { detail }); // where the time goes (scripts/bench_browser.py)
  self.postMessage({ type: "status", state, detail });
};
/** A stored chunk that failed its check, said while the store fetches it again. */
const refetching = (e) => status("weights", `${e.message}: fetching that part again`);

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
  // One model on the GPU at a time: the base's weights let go first (a comparison puts them back).
  if (oneAtATime && base?.executor && !base.executor.destroyed) base.executor.destroy();
  attached = null;
  status("weights", "loading the model's weights");
  try {
    attached = await attachWeights(session.device, {
      py, call: python.call, store, source, path, nCtx, asked: session.backend,
      packages: new URL(session.build.pyodide.packages, SITE).href,
      say: (detail) => status("weights", detail),
      onCorrupt: refetching,
    });
  } catch (e) {
    self.postMessage({ type: "model", model: { error: e.message, offer: e.offer ?? null } });
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
    enqueue(() => attached?.executor === executor && attach(attached.n_ctx));
  });
  self.postMessage({ type: "model", model });
  status("ready", `${session.source.label} on ${attached.backend} (${attached.why})`);
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
  python.call("load_base", { path }); // a TokenizerMismatchError's sentence reaches the page as it is
  base?.executor?.destroy();
  base = { source, path, model: null, executor: null };
  base.model = await putBase();
  self.postMessage({ type: "model", model: base.model });
  status("ready", `${session.source.label} and the base model on ${base.model.backend}`);
  return base.model;
}

/** The base model's weights on the device the instruct's are on (NumPy: loaded beside them). */
async function putBase() {
  const one = (m) => attachWeights(session.device, {
    py, call: python.call, store: session.store, source: base.source, path: base.path, model: "base",
    nCtx: attached?.n_ctx ?? Math.max(...session.build.settings.windows), asked: attached?.kind ?? session.backend,
    packages: new URL(session.build.pyodide.packages, SITE).href,
    say: (detail) => status("weights", `base model: ${detail}`),
    onCorrupt: refetching, ...m,
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
 * (the other's let go first). `starting`: before a job of the instruct's starts, through attach,
 * whose use_gpu empties Python's cache over them too (what it held went with the device). During
 * a comparison only the executor is made anew: use_gpu would end the job under way, and the
 * reply about to start was given an empty cache already (chatlens.worker's _Compare). */
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
    py, call: python.call, store: session.store, ...which, model,
    say: (detail) => status("weights", `${model} model: ${detail}`),
    onCorrupt: refetching,
  });
  status("ready", `${session.source.label} and the base model on webgpu, one at a time`);
  return mine.executor;
}

const requests = {
  /** For scripts/bench_browser.py: the size of Python's wasm memory, in bytes, and where the
   * last job's time went in this thread (`pull`'s figures). */
  debug: () => ({ wasm_heap: py?._module.HEAP8.length ?? null, last_reply: lastReply }),
  async init(args) {
    if (args.hide_jspi) { // tests: a browser without JavaScript Promise Integration (older Firefox, Safari)
      delete WebAssembly.Suspending;
      delete WebAssembly.promising;
    }
    roomForOne = Boolean(args.one_model_on_gpu);
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
  async attach_base({ source }) {
    await booting;
    return attachBase(source);
  },
  async compare(args, id) {
    await booting;
    return pulled("compare", args, id);
  },
  async preview(args) {
    await booting;
    counting?.end("a newer preview ended the count"); // it counted what the page showed before
    return python.call("preview", args);
  },
  async count(args, id) {
    if (!booting) throw new Error("the worker has not started: init comes first");
    await booting;
    return pulled("count", args, id);
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
 * One job (chatlens.worker's `start` kinds: chat | text | predict | count), pulled to its end:
 * a chat's record, the tokens and the progress posted as they come, a stop signal answered at
 * the next pull. A count is background work: it waits for a reply pulled meanwhile; a reply, a
 * newer count or a preview ends it, and it rejects with an AbortError (as a stop makes it). A
 * GPU lost during a reply (a driver reset) puts the weights on a new device and starts it again.
 */
async function pulled(kind, args, id) {
  if (kind === "count") counting?.end("a newer count replaced this one");
  else counting?.end("a reply replaced the count");
  let finish;
  const me = { id, kind, ended: null, wake: () => {}, finished: new Promise((resolve) => (finish = resolve)) };
  me.end = (why) => {
    me.ended ??= why;
    me.wake();
  };
  if (stopsAsked.has(id)) me.ended = kind === "count" ? "the count was stopped" : "stopped";
  jobs.set(id, me);
  if (kind === "count") counting = me;
  let used = attached;
  const streamed = { posted: 0, skip: 0, recorded: false }; // what was posted to the page
  try {
    // One model on the GPU at a time: the instruct's put back before a job of its own starts (a
    // comparison swaps its models between its replies, in `pull`).
    if (kind !== "count" && kind !== "compare" && attached?.kind === "webgpu" && attached.executor.destroyed) {
      await onDevice("instruct", { starting: true });
      used = attached;
    }
    const woken = new Promise((resolve) => (me.wake = resolve)); // a count waiting: an end comes at once
    while (kind === "count" && job && job.kind !== "count" && !me.ended) await Promise.race([job.finished, woken]);
    if (kind === "count" && me.ended) throw abortError(me.ended);
    try {
      return await pull(me, args, streamed);
    } catch (e) {
      if (kind === "count" || !(await gpuLost(used?.executor, e))) throw e;
      await attach(used.n_ctx);
      // Computed again from the start, the reply's first tokens are the ones the page has already.
      return await pull(me, args, { posted: 0, skip: streamed.posted, recorded: streamed.recorded });
    }
  } finally {
    if (job === me) job = null;
    if (counting === me) counting = null;
    jobs.delete(id);
    stopsAsked.delete(id);
    finish();
  }
}

/** Whether `executor`'s device is lost. Work pending on a device that goes fails (a DOMException:
 * "Buffer was unmapped before mapping was resolved") before `device.lost` settles, so after such
 * a failure the device is given a moment to say it is lost. */
async function gpuLost(executor, error) {
  if (executor?.destroyed) return false; // let go on purpose (one model on the GPU at a time): not lost
  if (!executor || executor.lost || !(error instanceof DOMException)) return Boolean(executor?.lost);
  const moment = new Promise((resolve) => setTimeout(() => resolve(false), 1000));
  return Promise.race([executor.device.lost.then(() => true), moment]);
}

const ENDED = Symbol("ended");

/** The one loop that drives a job: `start`, then `step` (or `stop`) until its answer is done. */
async function pull(me, args, streamed) {
  const { id, kind } = me;
  let gpu = kind !== "count" && attached?.kind === "webgpu" ? attached.executor : null;
  const woken = new Promise((resolve) => (me.wake = () => resolve(ENDED)));
  if (me.ended) me.wake();
  const t0 = performance.now();
  // Python's Pull books the runs in flight (it plans up to `depth` of them and reads their bytes
  // in order); this queue only holds the promises of those bytes, oldest first.
  const flight = [];
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
  /** The answer to a job asked to end: a reply's, stopped; a count rejects. A job a newer start
   * replaced in Python is gone there already. */
  const ended = () => {
    if (job !== me) throw abortError(me.ended);
    const out = ask("stop", {});
    if (kind === "count") throw abortError(me.ended);
    return out;
  };
  // The prompt's progress, posted at each pull and, on the GPU, after each part of a step that
  // reads it (a chunk of 128 tokens on a slow GPU is one step of minutes).
  let progress = null; // {read, of, parts}, while the prompt is read
  const tellProgress = () => {
    if (progress) self.postMessage({ type: "progress", id, ...progress, ms: performance.now() - t0 });
  };
  const partDone = () => {
    if (progress) (progress.parts += 1), tellProgress();
    return Boolean(me.ended);
  };
  try {
    return await pullLoop();
  } finally {
    for (const f of flight) f.catch(() => {}); // steps computed past the end: their bytes are not needed
  }

  async function pullLoop() {
    job = me; // Python's start ends the job before
    let out = ask("start", { kind, args, depth: gpu ? gpu.depth() : 1 });
    if (kind !== "count") lastReply = spent;
    let cell = out.cell;
    for (;;) {
      if (out.record && !streamed.recorded) {
        streamed.recorded = true;
        self.postMessage({ type: "record", id, record: out.record });
      }
      if (out.prompt && !streamed.recorded) { // a comparison's: what both models read, before any token
        streamed.recorded = true;
        self.postMessage({ type: "prompt", id, prompt: out.prompt });
      }
      if (out.cell !== cell) { // a comparison's next reply: the runs still in flight were the last one's
        for (const f of flight.splice(0)) f.catch(() => {});
        cell = out.cell;
      }
      // A comparison's runs go to the executor of the model whose reply it is.
      if (gpu && !out.done) gpu = await onDevice(out.model);
      for (const t of out.tokens) {
        if (streamed.skip > 0) streamed.skip -= 1;
        else (streamed.posted += 1), self.postMessage({ type: "token", id, token: t });
      }
      if (out.done) return out.done;
      progress = out.read < out.of ? { read: out.read, of: out.of, parts: 0 } : null;
      tellProgress();
      if (me.ended) {
        out = ended();
        continue;
      }
      if (gpu) {
        for (const r of out.runs) {
          const params = new Uint8Array(new Uint32Array(r.params).buffer); // the step buffer's words
          flight.push(timed("submit_ms", () => gpu.submit(r.sequences, params, r.readback, { stopped: partDone })));
        }
        spent.most_in_flight = Math.max(spent.most_in_flight, out.in_flight);
        const oldest = flight.shift();
        const t = performance.now();
        const raw = await Promise.race([oldest, woken]);
        spent.wait_ms += performance.now() - t;
        if (raw === ENDED || raw === null || me.ended) { // a stop came before this step's bytes: none of them count
          oldest.catch(() => {});
          out = ended();
          continue;
        }
        out = ask("step", { depth: gpu.depth() }, raw);
      } else {
        await Promise.race([nextTask(), woken]); // a stop or a preview between two steps
        out = me.ended ? ended() : ask("step", {});
      }
    }
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
    const stopped = jobs.get(id);
    stopped?.end(stopped.kind === "count" ? "the count was stopped" : "stopped");
  },
  /** For tests: the GPU devices go (each model's), as they do when a driver resets. */
  lose_gpu() {
    attached?.executor?.device.destroy();
    if (base?.executor && !base.executor.destroyed) base.executor.device.destroy();
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
  // A count is background work: it waits for no request but a reply being pulled (Python pulls one
  // job at a time), and none waits for it (a reply's start ends it).
  if (type === "count") return answer();
  enqueue(answer);
};
