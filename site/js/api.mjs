// window.chatlens: the page's API, for the UI, for embedding and for tests. It talks to the
// module worker where Python runs.
//   await chatlens.ready                        -> {source, info, pyodide} once the worker is up
//   await chatlens.preview({system, messages, window})  -> the turn record, without generating
//        (or {preset, custom} instead of system: the system text of a preset, taken now)
//   await chatlens.run({system, messages, window, maxTokens}) -> the turn record with the reply
//        (reserve, the tokens kept free for the reply, and maxTokens default to chatlens.replyLimit)
//   chatlens.replyLimit                         -> the site's reply limit, in tokens
//   chatlens.source, chatlens.build             -> the model source and build.json, once known
//   chatlens.status                             -> {state: booting|loading|ready|error, detail}
//   chatlens.onStatus(fn)                       -> fn(status) now and on every change (and once
//                                                  chatlens.source, the model source, is known)

import { resolveSource } from "./source.mjs";

/** The site's reply limit, also the reserve kept free in the window: the one place the page
 * says it (chatlens.chat.DEFAULT_MAX_TOKENS on the Python side; a test keeps them equal). */
export const REPLY_LIMIT = 96;

export function createApi() {
  const listeners = new Set();
  const pending = new Map();
  let nextId = 1;
  const api = {
    status: { state: "booting", detail: "starting" },
    replyLimit: REPLY_LIMIT,
    source: null,
    build: null, // build.json: the Pyodide version, the wheels, the pinned model revision
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

  const workerUrl = new URL("./worker.mjs", import.meta.url);
  const worker = new Worker(workerUrl, { type: "module" });
  worker.onmessage = ({ data }) => {
    if (data.type === "status") return setStatus(data.state, data.detail);
    const p = pending.get(data.id);
    if (!p) return;
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
  const call = (type, args) =>
    new Promise((resolve, reject) => {
      if (dead) return reject(dead);
      const id = nextId++;
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, type, args });
    });

  api.ready = Promise.race([
    died,
    (async () => {
      api.build = await getBuild();
      api.source = await resolveSource({ build: api.build });
      setStatus(api.status.state, api.status.detail); // listeners see the source at once
      return call("init", { source: api.source, build: api.build });
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
    return call("preview", plain(args));
  };
  api.run = async (args) => {
    checkMessages(args);
    await api.ready;
    const a = plain(args);
    return call("run", { ...a, maxTokens: a.maxTokens ?? a.reserve });
  };
  return api;
}

async function getBuild() {
  const url = new URL("../build.json", import.meta.url);
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

// Structured-clone-safe copy with only the fields the worker reads; reserve always set.
function plain(args) {
  const out = { messages: args.messages.map((m) => ({ role: String(m.role), content: String(m.content) })) };
  for (const k of ["system", "preset", "custom", "window", "maxTokens"]) {
    if (args[k] !== undefined) out[k] = args[k];
  }
  out.reserve = args.reserve ?? REPLY_LIMIT;
  return out;
}
