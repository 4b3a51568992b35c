// window.chatlens: the page's API, for the UI, for embedding and for tests. It talks to the
// module worker where Python runs.
//   await chatlens.ready                        -> {source, info, pyodide} once the worker is up
//   await chatlens.preview({system, messages, window})  -> the turn record, without generating
//        (or {preset, custom} instead of system: the system text of a preset, taken now)
//   await chatlens.run({system, messages, window, maxTokens}, {onToken}) -> the turn record with
//        the reply; onToken({token, text}) streams each reply id as it is chosen
//   chatlens.stop()                             -> stop the reply being written (stop_reason "stopped")
//   chatlens.settings                           -> the site's settings (build.json, from chatlens.defaults):
//                                                  reply_limit, windows, default_window, presets
//                                                  (await chatlens.settingsReady first)
//   chatlens.source, chatlens.build             -> the model source and build.json, once known
//   chatlens.status                             -> {state: booting|loading|ready|error, detail}
//   chatlens.onStatus(fn)                       -> fn(status) now and on every change (and once
//                                                  chatlens.source, the model source, is known)
// The record's fields are documented once, in py/chatlens/record.py (TurnRecord).

import { resolveSource } from "./source.mjs";

export function createApi() {
  const listeners = new Set();
  const pending = new Map(); // request id -> {resolve, reject, onToken}
  let nextId = 1;
  let running = 0; // the request id of the run in progress, 0 when none
  const api = {
    status: { state: "booting", detail: "starting" },
    settings: null,
    source: null,
    build: null, // build.json: the Pyodide version, the wheels, the pinned model revision, the settings
    onStatus(fn) {
      listeners.add(fn);
      fn(api.status);
      return () => listeners.delete(fn);
    },
  };
  const setStatus = (state, detail = "") => {
    api.status = { state, detail };
    for (const fn of listeners) fn(api.status);
  };

  // Once the worker has failed (its script did not load, or it threw outside a request), it is
  // dead: every call, `ready` included, rejects with this error at once instead of waiting for
  // an answer that cannot come.
  let dead = null;
  let die;
  const died = new Promise((_, reject) => (die = reject));
  died.catch(() => {});

  // Stop requests reach a busy worker through shared memory (cross-origin isolated pages) or,
  // failing that, as a message it reads whenever Python yields.
  const stopFlag = globalThis.crossOriginIsolated ? new Int32Array(new SharedArrayBuffer(4)) : null;

  const workerUrl = new URL("./worker/worker.mjs", import.meta.url);
  const worker = new Worker(workerUrl, { type: "module" });
  worker.onmessage = ({ data }) => {
    if (data.type === "status") return setStatus(data.state, data.detail);
    const p = pending.get(data.id);
    if (!p) return;
    if (data.type === "token") return p.onToken?.({ token: data.token, text: data.text });
    pending.delete(data.id);
    if (data.ok) p.resolve(data.result);
    else {
      const e = new Error(data.error);
      if (data.name) e.name = data.name;
      p.reject(e);
    }
  };
  worker.onerror = (e) => {
    e.preventDefault?.();
    // A script that fails to load gives a plain Event, with no message.
    dead = new Error(e.message
      ? `the worker failed: ${e.message}`
      : `the worker failed to start: ${workerUrl.pathname} could not be loaded`);
    worker.terminate();
    setStatus("error", dead.message);
    for (const p of pending.values()) p.reject(dead);
    pending.clear();
    die(dead);
  };
  const call = (type, args, onToken) => {
    const id = nextId++;
    const answer = new Promise((resolve, reject) => {
      if (dead) return reject(dead);
      pending.set(id, { resolve, reject, onToken });
      worker.postMessage({ id, type, args });
    });
    return { id, answer };
  };

  // build.json first: the page builds its controls from its settings while Python boots.
  api.settingsReady = getBuild().then((build) => {
    api.build = build;
    api.settings = build.settings;
    return build.settings;
  });
  api.ready = Promise.race([
    died,
    (async () => {
      await api.settingsReady;
      api.source = await resolveSource({ build: api.build });
      setStatus(api.status.state, api.status.detail); // listeners see the source at once
      return call("init", { source: api.source, build: api.build, stop: stopFlag }).answer;
    })(),
  ]);
  api.ready.catch((e) => setStatus("error", e.message));

  const checkMessages = (args) => {
    if (!args || !Array.isArray(args.messages) || args.messages.length === 0) {
      throw new TypeError("chatlens: messages must be a non-empty array of {role, content}");
    }
  };
  api.preview = async (args) => {
    checkMessages(args);
    await api.ready;
    return call("preview", plain(args, api.settings)).answer;
  };
  api.run = async (args, { onToken } = {}) => {
    checkMessages(args);
    await api.ready;
    const { id, answer } = call("run", plain(args, api.settings), onToken);
    running = id;
    try {
      return await answer;
    } finally {
      if (running === id) running = 0;
    }
  };
  api.stop = () => {
    if (!running) return false;
    if (stopFlag) Atomics.store(stopFlag, 0, running);
    worker.postMessage({ type: "stop", args: { id: running } });
    return true;
  };
  return api;
}

async function getBuild() {
  const url = new URL("../build.json", import.meta.url);
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

/** The request the worker gets (py/chatlens/worker.py): a structured-clone-safe copy with only
 * the fields it reads. The reply limit (maxTokens) defaults to the site's; the reserve kept free
 * in the window for the reply defaults to the reply limit. */
export function plain(args, settings) {
  const out = { messages: args.messages.map((m) => ({ role: String(m.role), content: String(m.content) })) };
  for (const k of ["system", "preset", "custom", "window", "maxTokens"]) {
    if (args[k] !== undefined) out[k] = args[k];
  }
  out.maxTokens = args.maxTokens ?? args.reserve ?? settings.reply_limit;
  out.reserve = args.reserve ?? out.maxTokens;
  return out;
}
