// The known-answer check in the worker: a GPU computes nothing a learner reads before it has
// agreed with CPython on a fixed check model (py/chatlens/check.py says what runs and what is
// compared), and, once the model's own weights are on it, on the model's first step after a
// fixed text where a reference for those weights is published (the mirror's manifest).
// Results are kept by the page (page/check.mjs) per adapter, build and weights, and given back
// at init: a kept one is used, not run again. What can happen, and what does:
//   a result kept for this adapter    -> used as it is (cached: true): no GPU work; a failed one
//   and build                            is known before Python starts, so `auto` boots for NumPy
//   none kept, the GPU chosen         -> the check runs as the worker boots, beside the previews:
//                                        Python builds the check model's program, its weights are
//                                        made here (gpu/checkmodel.mjs), Python compares the bytes
//   the check fails (or cannot run:   -> `auto` computes with NumPy, never with this GPU; a GPU asked
//   a WGSL error, a lost device)         for by name refuses, in a sentence naming the check and what
//                                        differed, and what to try
//   ?gpu-check=ignore (developers)    -> the GPU computes anyway; its backend's name says it failed
//                                        the check, on every reply, inspection and cause
//   the weights on the GPU, with a    -> their first step against it; failing is failing, as above
//   reference for their sha256           (the executor let go); no reference: said, not checked
// No GPU chosen (NumPy), the check runs only when chatlens.check() asks for it.

import { createExecutor, probe } from "../gpu/executor.mjs";
import { checkReader } from "../gpu/checkmodel.mjs";

/** Refused GPU work: what a learner can do about it. */
const TRY = "Try another browser, or turn the browser's hardware acceleration on (or off), or choose NumPy in " +
  "“What computes replies”.";

/** What identifies an adapter (and the browser driving it) for kept results. */
export function adapterKey(gpu, agent = globalThis.navigator?.userAgent ?? "") {
  const info = gpu?.info ?? {};
  const text = JSON.stringify([gpu?.name, info.vendor, info.architecture, info.device, info.description, info.fallback,
    gpu?.features, agent]);
  let h = 0x811c9dc5; // FNV-1a: a short key, not a secret
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}

/**
 * The check for a booted worker. c: {build (build.json), site (its root URL), kept ({key:
 * result} the page kept), override (?gpu-check=ignore), post(key, result) (tells the page: a
 * "check" event), status(state, detail)}.
 */
export function createChecks({ build, site, kept = {}, override = false, post, status = () => {} }) {
  const fault = build.check?.fault ?? null;
  const buildKey = build.check?.key ?? "none";
  let running = null; // the program check's result (a promise), once started
  let gpuKey = null;
  const keyOf = (gpu) => `${buildKey}|${adapterKey(gpu)}`;
  const weightsKeys = new Map(); // model -> the key of its weights' entry, once checked
  const weightsEntries = {}; // key -> Checked, this visit's and the kept ones used

  /** The device as the kept result leaves it, before Python starts: `auto` with a GPU that failed
   * its check on an earlier visit boots for NumPy (from no snapshot, so NumPy can load). */
  function prior(device, asked) {
    if (device.backend !== "webgpu" || !device.gpu) return device;
    const old = kept[keyOf(device.gpu)];
    if (!old || old.passed || override || asked === "webgpu") return device;
    return { ...device, backend: "numpy", gpu: null, passedOver: null,
             why: `the GPU (${device.gpu.name}) failed its known-answer check on an earlier visit: ${old.sentence}` };
  }

  /** Whether the GPU path is settled before Python starts: asked for by name (a failure refuses),
   * overridden, or passed on an earlier visit. Else (`auto`, no result kept) a failure now would
   * have NumPy compute, which loads only into a Python not started from the GPU path's snapshot. */
  function sureOf(device, asked) {
    return asked === "webgpu" || override || Boolean(device.gpu && kept[keyOf(device.gpu)]?.passed);
  }

  /** The program check on `gpu` (a probed adapter), or the kept result; the adapter is used up
   * (an adapter makes one device: the weights ask for a new one). */
  function start(call, gpu) {
    if (running) return running;
    gpuKey = keyOf(gpu);
    const old = kept[gpuKey];
    if (old) {
      running = Promise.resolve({ ...old, cached: true });
      post(gpuKey, { ...old, cached: true });
      return running;
    }
    running = run(call, gpu).then((result) => {
      post(gpuKey, result);
      return result;
    });
    return running;
  }

  async function run(call, gpu) {
    const t0 = performance.now();
    performance.mark("chatlens:check", { detail: gpu.name }); // where the time goes (scripts/bench_check.py)
    gpu.used = true; // at once: an adapter makes one device, so the model's weights ask for a new one
    let executor = null;
    try {
      const reference = await fetch(new URL(build.check.file, site)).then((r) => {
        if (!r.ok) throw new Error(`${build.check.file}: HTTP ${r.status}`);
        return r.json();
      });
      const { program, runs, spec } = call("check_program", { features: gpu.features, limits: gpu.limits, info: gpu.info,
                                                              fault: Boolean(fault) });
      executor = await createExecutor(gpu.adapter, program, checkReader(spec), { name: gpu.name });
      const setup = performance.now() - t0;
      const raws = [];
      for (const r of runs) {
        const params = new Uint8Array(new Uint32Array(r.params).buffer);
        raws.push(await executor.submit(r.sequences, params, r.readback));
      }
      const result = call("check_read", { reference, adapter: gpu.name }, raws);
      return { ...result, ms: Math.round(performance.now() - t0), setup_ms: Math.round(setup), cached: false };
    } catch (e) {
      // It could not run: nothing says this GPU computes right, so it is not trusted either (this
      // visit: with no checks in it, the page does not keep it, page/check.mjs).
      const sentence = `could not run the check (${e.message})`;
      return { passed: false, max_diff: 1e9, tolerance: build.check?.tolerance ?? null, checks: [], adapter: gpu.name,
               backend: "webgpu", ms: Math.round(performance.now() - t0), setup_ms: null, cached: false, fault, sentence };
    } finally {
      executor?.destroy();
    }
  }

  /** Before a GPU computes for a model: resolves {label} (the backend's name suffix: "" when it
   * passed, "unchecked" words under the override), or throws the sentence that refuses it. */
  async function gate(gpu, call) {
    let settled = false;
    const checking = start(call, gpu).finally(() => (settled = true));
    await Promise.resolve();
    if (!settled) status("weights", `checking the GPU (${gpu.name}) against known answers before it computes anything`);
    const result = await checking;
    if (result.passed) return { label: "", result };
    if (override) return { label: " (unchecked: it failed its known-answer check)", result };
    const e = new Error(`This GPU (${gpu.name}) failed its known-answer check, so its figures would be wrong: it ` +
      `${result.sentence}. ${fault ? "(This is a faulty test build: its GPU program is wrong on purpose.) " : ""}${TRY}`);
    e.check = result;
    throw e;
  }

  /** Once a model's weights are on the GPU (executor): their first step against the reference
   * published for the file (sha256), run now or kept. Resolves with the combined result; throws
   * the sentence that refuses them when they disagree (the override aside). */
  async function weights({ call, executor, model, reference, sha256 }) {
    const base = await running;
    if (!reference || !sha256) return combined(base, model, null);
    const key = `${gpuKey}|${sha256}`;
    weightsKeys.set(model, key);
    let entry = kept[key] ?? weightsEntries[key];
    if (!entry) {
      status("weights", `checking the model's weights on ${executor.name} against CPython's first step`);
      const { runs } = call("check_weights", { reference, model });
      let raw = null;
      for (const r of runs) raw = await executor.submit(r.sequences, new Uint8Array(new Uint32Array(r.params).buffer), r.readback);
      entry = call("check_weights_read", { reference }, raw);
      post(key, entry);
    }
    weightsEntries[key] = entry;
    const result = combined(base, model, entry);
    if (!entry.passed && !override) {
      const e = new Error(`The model's weights on this GPU (${executor.name}) failed their check, so its figures would ` +
        `be wrong: ${entry.what} differed (${entry.differed}). ${TRY}`);
      e.check = result;
      throw e;
    }
    return result;
  }

  /** The program check's result with a model's weights entry among its checks (or none). */
  function combined(base, model, entry) {
    if (!base) return null;
    const checks = [...base.checks, ...(entry ? [entry] : [])];
    const passed = base.passed && (!entry || entry.passed);
    const max = Math.max(base.max_diff, entry?.max_diff ?? 0);
    const sentence = entry && !entry.passed ? `${entry.what} differed (${entry.differed})` : base.sentence;
    return { ...base, checks, passed, max_diff: max, sentence, weights: entry ? "checked" : "no reference for these weights" };
  }

  return {
    fault,
    prior,
    sureOf,
    start,
    gate,
    weights,
    /** The result for chatlens.check(): this visit's (the instruct's weights entry with it), or a
     * check run now on a probed adapter where none ran (NumPy computes). */
    async current(call) {
      if (!running) start(call, await probe());
      const base = await running;
      const key = weightsKeys.get("instruct");
      return combined(base, "instruct", key ? weightsEntries[key] : null);
    },
  };
}
