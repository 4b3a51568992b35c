// The module worker where all Python runs: it boots Pyodide, reads the tokenizer and chat
// template from the model source (from the store when it holds the model), then routes the
// page's messages. Its other modules each do one job: placement.mjs puts the models' weights on
// the GPU or into NumPy (and moves them: the base beside the instruct, a lost device, one model
// at a time on a small GPU); jobs.mjs pulls each job (a reply, a count, an inspection, ...) from
// Python a step at a time.
//
// The messages it takes and sends (requests, signals, events, the answer envelope) are
// described once, in py/chatlens/protocol.py (PAGE_REQUESTS, SIGNALS, EVENTS, Answer), and
// listed in protocol.gen.mjs; tests/page/messages.test.mjs keeps the worker's modules to that list.
//
// The routing: a signal is handled as it comes. Every job (protocol.gen.mjs's JOBS, as its Python
// class declares it) goes through one handler, `pullJob`. A request that needs the model (a job,
// the weights) waits its turn: one at a time, so a reply starts once the one before has ended.
// Once Python is up, a text-side request is answered at once, even between two pulls of a reply.
// A job in the background (a count) waits for nothing but a reply Python is pulling (jobs.mjs).

import { openModelStore } from "../store/models.mjs";
import { mountTextFiles, textFiles } from "./files.mjs";
import { installChatlens, startPython } from "./python.mjs";
import { chooseBackend, emulated } from "./device.mjs";
import { createJobs } from "./jobs.mjs";
import { createPlacement } from "./placement.mjs";
import { createChecks } from "./check.mjs";
import { probe } from "../gpu/executor.mjs";
import { JOBS } from "./protocol.gen.mjs";

const SITE = new URL("../../", import.meta.url);

let py = null;
let python = null; // chatlens.worker's {call}, once Python is up
let booting = null;
let models = null; // where the models' weights are (placement.mjs), once Python is up
let roomForOne = false; // tests (init's one_model_on_gpu): a second model's weights on the GPU fail as on a small GPU
let checks = null; // the known-answer check (check.mjs), once init has come
const jobs = createJobs();

const status = (state, detail = "") => {
  performance.mark(`chatlens:${state}`, { detail }); // where the time goes (scripts/bench_browser.py)
  self.postMessage({ type: "status", state, detail });
};

async function boot({ source, build, backend, kept, check_override: override }) {
  status("booting", "starting Python (Pyodide)");
  checks = createChecks({ build, site: SITE, kept: kept ?? {}, override, status,
                          post: (key, result) => self.postMessage({ type: "check", key, result }) });
  const store = await openModelStore().catch(() => null); // no IndexedDB (a private window): HTTP only
  const stored = store ? await store.status(source).catch(() => null) : null;
  const files = textFiles(source, store, stored?.complete ? stored : null) // while Python starts
    .catch((e) => { throw unreachable(source, e); });
  files.catch(() => {}); // reported below, once awaited
  // The device first: Python starts from its memory snapshot only where the weights will go to
  // the GPU (NumPy for Pyodide is a binary package loaded after the boot, not tried on a Python
  // started from a snapshot).
  // (a GPU that failed its known-answer check on an earlier visit is known now: `auto` takes NumPy)
  const device = checks.prior(await chooseDevice(backend, build.settings.emulated_adapters), backend);
  // (and only where a failed check would not leave `auto` needing NumPy on it: check.mjs's sureOf)
  const starting = startPython(SITE, build, { snapshot: device.backend === "webgpu" && checks.sureOf(device, backend) });
  await Promise.race([starting, files.then(() => starting)]); // a failed download fails the boot now
  py = await starting;
  status("booting", "installing chatlens");
  python = await installChatlens(py, SITE, build);
  // The GPU's known-answer check, beside the text side's load and the previews: the weights wait
  // for it (check.mjs).
  if (device.backend === "webgpu" && device.gpu) checks.start(python.call, device.gpu).catch(() => {});
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
  const session = { source, build, backend, device, path, info, store, checks };
  models = createPlacement({ py, call: python.call, session, site: SITE, status, inTurn: enqueue, roomForOne });
  if (stored?.complete) status("weights", "the tokenizer and chat template are ready; the weights are next");
  else status("text", "the tokenizer and chat template are ready; replies need the model's weights");
  // how Python started: from a saved snapshot, or booted (and a snapshot saved for the next visit)
  const snapshot = py.chatlensSnapshot?.restored ? "restored" : py.chatlensSnapshot?.key ? "saved" : "none";
  const computes = { backend: device.backend, why: device.why, adapter: device.gpu?.name ?? null,
                     emulated: Boolean(device.gpu && emulated(device.gpu.info, build.settings.emulated_adapters)) };
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

/** Every job (jobs.mjs's record of it, as its class declares it), pulled once Python and the
 * weights' placement are up; one over a turn (a reply, a branch, an inspection) has the weights
 * fitted to the turn's window first. */
async function pullJob(args, job) {
  if (!booting) throw new Error("the worker has not started: init comes first");
  await booting;
  if (job.window) await models.fit(args.window);
  return jobs.pull(job, args, { call: python.call, models });
}

const requests = {
  /** For scripts/bench_browser.py: the size of Python's wasm memory, in bytes, and where the
   * last reply's time went in this thread (jobs.mjs's figures). */
  debug: () => ({ wasm_heap: py?._module.HEAP8.length ?? null, last_reply: jobs.lastReply }),
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
  /** The known-answer check's result (check.mjs): this visit's or a kept one; run now where none ran. */
  async check() {
    await booting;
    return checks.current(python.call);
  },
  async attach_base({ source }) {
    await booting;
    return models.attachBase(source);
  },
  async preview(args) {
    await booting;
    jobs.endBackground((job) => `a newer preview ended the ${job.kind}`); // it counted what the page showed before
    return python.call("preview", args);
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
    jobs.stop(id);
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
  // A job's record opens as its message comes, so a stop that comes before the job starts finds it.
  const job = Object.hasOwn(JOBS, type) ? jobs.open(id, JOBS[type]) : null;
  const answer = async () => {
    try {
      const handler = job ? pullJob : requests[type];
      if (!handler) throw new Error(`unknown request ${type}`);
      self.postMessage({ id, ok: true, result: await handler(args || {}, job) });
    } catch (e) {
      self.postMessage({ id, ok: false, error: String(e?.message ?? e), name: e?.name, data: e?.data });
    } finally {
      if (job) jobs.close(job);
    }
  };
  // Python is never inside a call while JavaScript waits (a reply's pulls are separate calls), so
  // a text-side request can be answered whenever it comes once Python is up.
  if (TEXT_SIDE.has(type) && python) return answer();
  // A job in the background (a count) waits for no request but a reply being pulled (Python pulls
  // one job at a time), and none waits for it (a reply's start ends it).
  if (job?.background) return answer();
  enqueue(answer);
};
