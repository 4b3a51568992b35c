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
// The models' weights, where they are and how they move (the base beside the instruct, a lost
// device, one model at a time on a small GPU), are placement.mjs's; a comparison's step answer
// names the model whose runs it plans, and they go to that model's executor.

import { openModelStore } from "../store/models.mjs";
import { mountTextFiles, textFiles } from "./files.mjs";
import { installChatlens, startPython } from "./python.mjs";
import { chooseBackend } from "./device.mjs";
import { createPlacement } from "./placement.mjs";
import { probe } from "../gpu/executor.mjs";

const SITE = new URL("../../", import.meta.url);

let py = null;
let python = null; // chatlens.worker's {call}, once Python is up
let booting = null;
let models = null; // where the models' weights are (placement.mjs), once Python is up
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
  const session = { source, build, backend, device, path, info, store };
  models = createPlacement({ py, call: python.call, session, site: SITE, status, inTurn: enqueue, roomForOne });
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
    return models.attach();
  },
  async attach_base({ source }) {
    await booting;
    return models.attachBase(source);
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
    await models.fit(args.window);
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
  let used = models.instruct;
  const streamed = { posted: 0, skip: 0, recorded: false }; // what was posted to the page
  try {
    // One model on the GPU at a time: the instruct's put back before a job of its own starts (a
    // comparison swaps its models between its replies, in `pull`).
    if (kind !== "count" && kind !== "compare") {
      await models.onDevice("instruct", { starting: true });
      used = models.instruct;
    }
    const woken = new Promise((resolve) => (me.wake = resolve)); // a count waiting: an end comes at once
    while (kind === "count" && job && job.kind !== "count" && !me.ended) await Promise.race([job.finished, woken]);
    if (kind === "count" && me.ended) throw abortError(me.ended);
    try {
      return await pull(me, args, streamed);
    } catch (e) {
      if (kind === "count" || !(await models.wasLost(used?.executor, e))) throw e;
      await models.attach(used.n_ctx);
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

const ENDED = Symbol("ended");

/** The one loop that drives a job: `start`, then `step` (or `stop`) until its answer is done. */
async function pull(me, args, streamed) {
  const { id, kind } = me;
  let gpu = kind !== "count" && models.instruct?.kind === "webgpu" ? models.instruct.executor : null;
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
      if (gpu && !out.done) gpu = await models.onDevice(out.model);
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
    models?.loseGpu();
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
