// The weights, for replies: on the GPU (the program chatlens.gpu builds for this source, its
// tensors uploaded from the store by site/js/gpu/executor.mjs, never through Python), or in
// NumPy (Pyodide's numpy package; the files copied whole into Python's file system, read into
// arrays once, then removed). Both read the model from the store: it must be complete there.

import { createExecutor, probe } from "../gpu/executor.mjs";
import { WEIGHTS_FILE, mountWeightsHeader, storedReader } from "./files.mjs";

/** JSPI: Python awaits each GPU step through pyodide.ffi.run_sync, which needs it (Chromium has it). */
export const canSuspend = typeof WebAssembly.Suspending === "function" && typeof WebAssembly.promising === "function";

export const BACKENDS = ["auto", "webgpu", "numpy"];

/**
 * Put the model's weights where `choice` says ("auto": the GPU when there is one, else NumPy).
 * m: {py, call, store, source, path (the text side's mount), nCtx (the GPU program's context),
 * packages (where Pyodide's packages come from), say(detail), onCorrupt(error)}. Returns {backend, n_ctx, kind, executor?}; throws an Error
 * saying why neither could be had.
 */
export async function attachWeights(choice, m) {
  if (!BACKENDS.includes(choice)) throw new Error(`unknown backend ${choice}: one of ${BACKENDS.join(", ")}`);
  const why = [];
  if (choice !== "numpy") {
    try {
      return await attachGpu(m);
    } catch (e) {
      if (choice === "webgpu") throw e;
      why.push(`WebGPU: ${e.message}`);
    }
  }
  try {
    return await attachNumpy(m);
  } catch (e) {
    if (choice === "numpy") throw e;
    why.push(`NumPy: ${e.message}`);
  }
  throw new Error(`replies cannot be computed in this browser (${why.join("; ")}). Previews and recorded mode still work.`);
}

async function attachGpu({ py, call, store, source, path, nCtx, say, onCorrupt }) {
  if (!canSuspend) throw new Error("this browser lacks JavaScript Promise Integration (JSPI), which the GPU path needs");
  const gpu = await probe();
  say(`building the GPU program on ${gpu.name}`);
  if (source.kind === "hf") await mountWeightsHeader(py, store, source, path);
  const program = call("gpu_program", { n_ctx: nCtx, features: gpu.features, limits: gpu.limits });
  say(`uploading the weights to ${gpu.name}`);
  const executor = await createExecutor(gpu.adapter, program, storedReader(store, source, { onCorrupt }), { name: gpu.name });
  return { ...call("use_gpu", {}, executor), kind: "webgpu", executor };
}

async function attachNumpy({ py, call, store, source, path, say, packages }) {
  say("loading NumPy for Python");
  try {
    await py.loadPackage("numpy", { messageCallback: () => {}, errorCallback: () => {} });
    py.pyimport("numpy");
  } catch (e) {
    const lines = String(e.message || e).trim().split("\n"); // a Python traceback ends with what went wrong
    throw new Error(`NumPy could not be loaded from ${packages}: ${lines[lines.length - 1]}`);
  }
  say("reading the weights into Python");
  const file = source.kind === "hf" ? `${path}/${WEIGHTS_FILE}` : path;
  const name = source.kind === "hf" ? WEIGHTS_FILE : (await store.status(source)).files[0].name;
  try {
    py.FS.unlink(file); // the header-only mount, if any: the whole file replaces it
  } catch {}
  py.FS.writeFile(file, await store.read(source, name));
  try {
    return { ...call("use_numpy", {}), kind: "numpy" };
  } finally {
    py.FS.unlink(file); // Python holds the arrays now (the text side was read at boot)
  }
}
