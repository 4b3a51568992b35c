// The module worker where all Python runs. It boots Pyodide, reads the tokenizer and chat
// template from the model source, then answers the page.
//
// Page -> worker:
//   requests, answered one at a time in order (Python is single-threaded):
//     {id, type: "init", args: {source, build, stop}}   stop: an Int32Array on a SharedArrayBuffer,
//                                                       or null when the page is not isolated
//     {id, type: "preview" | "run" | "weights", args}   (see py/chatlens/worker.py)
//   signals, handled at once, even while a request runs:
//     {type: "stop", args: {id}}                        stop the run with request id `id`
// Worker -> page:
//   {id, ok: true, result} | {id, ok: false, error, name}   the answer to request `id`
//   {type: "status", state, detail}                          booting | loading | ready | error
//   {type: "token", id, token, text}                         a reply id as it is chosen (run `id`)

import { mountTextFiles, textFiles } from "./files.mjs";
import { installChatlens, startPython } from "./python.mjs";

const SITE = new URL("../../", import.meta.url);

let call = null; // chatlens.worker's call(), once Python is up
let booting = null;
let stopShared = null; // Int32Array [id of the run to stop], written by the page
let stopAsked = 0; // the same, from a stop signal (seen when Python yields to the event loop)

const status = (state, detail = "") => self.postMessage({ type: "status", state, detail });

async function boot(source, build) {
  status("booting", "starting Python (Pyodide)");
  const files = textFiles(source); // the model's small files download while Python starts
  files.catch(() => {}); // reported below, once awaited
  const python = startPython(SITE, build);
  await Promise.race([python, files.then(() => python)]); // a failed download fails the boot now
  const py = await python;
  status("booting", "installing chatlens");
  call = await installChatlens(py, SITE, build);
  status("loading", `reading the tokenizer and chat template from ${source.label}`);
  const info = call("load", { path: mountTextFiles(py, source, await files) });
  status("ready", source.label);
  return { source, info, pyodide: build.pyodide.version };
}

const requests = {
  async init({ source, build, stop }) {
    stopShared = stop || null;
    booting ??= boot(source, build).catch((e) => {
      status("error", e.message);
      throw e;
    });
    return booting;
  },
  async preview(args) {
    await booting;
    return call("preview", args);
  },
  async weights(args) {
    await booting;
    return call("weights", args);
  },
  async run(args, id) {
    await booting;
    const onToken = (token, text) => self.postMessage({ type: "token", id, token, text });
    const shouldStop = () => stopAsked === id || (stopShared !== null && Atomics.load(stopShared, 0) === id);
    return call("run", args, onToken, shouldStop);
  },
};

const signals = {
  stop({ id }) {
    stopAsked = id;
  },
};

let queue = Promise.resolve();
self.onmessage = ({ data }) => {
  const { id, type, args } = data;
  if (signals[type]) return signals[type](args || {});
  queue = queue.then(async () => {
    try {
      const handler = requests[type];
      if (!handler) throw new Error(`unknown request ${type}`);
      self.postMessage({ id, ok: true, result: await handler(args || {}, id) });
    } catch (e) {
      self.postMessage({ id, ok: false, error: String(e?.message ?? e), name: e?.name });
    }
  });
};
