// The weights, for replies: on the GPU (the program chatlens.gpu builds for this source, its
// tensors uploaded from the store by site/js/gpu/executor.mjs, never through Python), or in
// NumPy (Pyodide's numpy package; the files copied whole into Python's file system, read into
// arrays once, then removed). Both read the model from the store: it must be complete there.

import { createExecutor, probe } from "../gpu/executor.mjs";
import { WEIGHTS_FILE, mountWeightsHeader, storedReader } from "./files.mjs";

/**
 * Put the model's weights where `device` says (worker/device.mjs's choice, made before Python
 * started: {backend: "webgpu" | "numpy", why, gpu: the probed adapter when webgpu}). `auto` that
 * chose the GPU falls back to NumPy when the GPU fails.
 * m: {py, call, store, source, path (the text side's mount), nCtx (the GPU program's context),
 * packages (where Pyodide's packages come from), asked (the backend asked for), say(detail),
 * onCorrupt(error), model ("instruct" or "base": whose weights, each its own backend in Python)}. Returns {backend, n_ctx, kind, why, executor?}; throws an Error saying why
 * no backend could be had.
 */
export async function attachWeights(device, m) {
  const why = [];
  if (device.backend === "webgpu") {
    try {
      if (!device.gpu) throw new Error(device.why);
      // An adapter makes one device: a second attach (a larger context, a lost device) asks anew.
      const gpu = device.gpu.used ? await probe() : device.gpu;
      gpu.used = true;
      return { ...(await attachGpu(gpu, m)), why: device.why };
    } catch (e) {
      if (m.asked === "webgpu") throw e;
      why.push(`the GPU failed (${e.message})`);
    }
  }
  try {
    return { ...(await attachNumpy(m)), why: why.length ? why[0] : device.why };
  } catch (e) {
    if (m.asked === "numpy") throw e;
    why.push(e.message);
  }
  // NumPy's message is a sentence of its own; `auto` passed over a software GPU because NumPy is
  // faster, and that GPU is what can compute replies here now: say so, and the page offers it.
  const other = device.passedOver;
  const e = new Error(`${why.length > 1 ? `Replies cannot be computed in this browser: ${why[0]}. ` : ""}${why.at(-1)} ` +
    (other ? `This browser's software GPU (${other}) can compute replies instead, slowly: choose “The GPU (WebGPU)” ` +
      "in “What computes replies”." : "Previews and Recorded mode still work."));
  if (other) e.offer = "webgpu";
  throw e;
}

/** The model on the GPU, once the GPU passed its known-answer check (worker/check.mjs: a GPU that
 * failed it throws the check's sentence here, which `auto` answers with NumPy), and then its
 * weights' own check where a reference for them is published. */
async function attachGpu(gpu, m) {
  const trust = m.check ? await m.check.gate(gpu, m.call) : { label: "", result: null };
  const executor = await gpuExecutor(gpu, m);
  const model = m.model ?? "instruct";
  const answer = m.call("use_gpu", { name: `${gpu.name}${trust.label}`, model });
  let check = trust.result;
  try {
    if (m.check) check = await m.check.weights({ call: m.call, executor, model, ...(await weightsReference(m)) });
  } catch (e) {
    executor.destroy(); // figures from these weights on this GPU would be wrong
    throw e;
  }
  return { ...answer, kind: "webgpu", executor, check, dispatches_per_token: executor.dispatchesPerToken };
}

/** The weights file's sha256 as stored, and the reference published for those bytes (the mirror's
 * manifest, chatlens.host.check.weights_reference: a mirror source's own, or, for a URL's, the
 * site's mirror's: they are keyed by the file's sha256, so they hold for the same bytes wherever
 * they came from), or none. */
async function weightsReference({ store, source }) {
  const references = source.manifest?.check ?? (await siteReferences());
  if (!references) return {};
  const name = source.kind === "hf" ? WEIGHTS_FILE : (await store.status(source)).files[0]?.name;
  const sha256 = name ? (await store.file(source, name))?.sha256 : null;
  return { sha256, reference: sha256 ? references[sha256] ?? null : null };
}

/** The site's mirror's weights references (models/manifest.json's `check`), or null: none there. */
async function siteReferences() {
  try {
    const r = await fetch(new URL("../../models/manifest.json", import.meta.url), { cache: "no-cache" });
    return r.ok ? (await r.json())?.check ?? null : null;
  } catch {
    return null;
  }
}

/**
 * The model's GPU program built on `gpu` (a probed adapter) and its weights uploaded from the
 * store: an executor, Python's side untouched (attachGpu then points Python's backend at it; a
 * comparison swapping one model at a time only makes the executor anew). m: attachWeights's.
 */
export async function gpuExecutor(gpu, { py, call, store, source, path, nCtx, say, onCorrupt, model = "instruct", check }) {
  say(`building the GPU program on ${gpu.name}`);
  if (source.kind === "hf") await mountWeightsHeader(py, store, source, path);
  const program = call("gpu_program", { n_ctx: nCtx, features: gpu.features, limits: gpu.limits, model, info: gpu.info,
                                        fault: Boolean(check?.fault) });
  say(`uploading the weights to ${gpu.name}`);
  const executor = await createExecutor(gpu.adapter, program, storedReader(store, source, { onCorrupt }), { name: gpu.name });
  executor.dispatchesPerToken = program.meta.dispatches.decode + program.meta.dispatches.head;
  return executor;
}

async function attachNumpy({ py, call, store, source, path, say, packages, model = "instruct" }) {
  say("loading NumPy for Python");
  try {
    await py.loadPackage("numpy", { messageCallback: () => {}, errorCallback: () => {} });
    py.pyimport("numpy");
  } catch (e) {
    // Pyodide's own message points to its documentation; a learner needs where and why.
    const remote = /^https?:/.test(packages) && new URL(packages).origin !== self.location.origin;
    const where = remote ? `Pyodide's site (${new URL(packages).host})` : "this site";
    throw new Error(`NumPy, which computes replies in this browser, could not be fetched from ${where}: ` +
      (remote ? "the network may be off, or that address blocked. " : "the site may be missing it. ") +
      "Once fetched it is kept for offline use.");
  }
  say("reading the weights into Python");
  const file = source.kind === "hf" ? `${path}/${WEIGHTS_FILE}` : path;
  const name = source.kind === "hf" ? WEIGHTS_FILE : (await store.status(source)).files[0].name;
  try {
    py.FS.unlink(file); // the header-only mount, if any: the whole file replaces it
  } catch {}
  py.FS.writeFile(file, await store.read(source, name));
  try {
    return { ...call("use_numpy", { model }), kind: "numpy" };
  } finally {
    py.FS.unlink(file); // Python holds the arrays now (the text side was read at boot)
  }
}
