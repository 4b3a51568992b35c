// The browser's executor of a chatlens GPU program (the plain data chatlens/gpu/program.py
// builds; its shape is documented in chatlens/gpu/builder.py). It creates what the program
// lists, once, and replays its named sequences: one compute pass and one submit per run (a
// long run split into parts where the GPU is slow, so a stop falls between them), several runs
// in flight, each reading back its own bytes. What the dispatches mean lives in program.py;
// chatlens/host/native_gpu.py is the same executor for wgpu-py. Plain ES module, for a Web Worker or
// a page.

const USAGE = { storage: 0x80, copy_dst: 0x08, copy_src: 0x04 }; // GPUBufferUsage, also where that global is missing

// What program.py needs to know about the adapter: {name, features, limits}, and what it says of
// itself (info: vendor, architecture, device, description, fallback), for chatlens.device's rule.
export async function probe(gpu = navigator.gpu) {
  if (!gpu) throw new Error("this browser has no WebGPU (navigator.gpu is missing)");
  const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw new Error("WebGPU found no adapter");
  const info = adapter.info || {};
  const limits = {};
  for (const key in adapter.limits) limits[key] = adapter.limits[key];
  return {
    adapter,
    // Firefox gives no adapter info at all: said so, not passed off as a name
    name: [info.vendor, info.architecture, info.description || info.device].filter(Boolean).join(" ") || "an adapter the browser does not name",
    features: [...adapter.features].sort(),
    limits,
    info: {
      vendor: info.vendor || "", architecture: info.architecture || "", device: info.device || "",
      description: info.description || "", fallback: Boolean(info.isFallbackAdapter ?? adapter.isFallbackAdapter),
    },
  };
}

function base64Bytes(text) {
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

// writeBuffer moves whole words: a tail that is not one pads with zeros.
function writeWords(queue, buffer, offset, bytes) {
  let data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  if (data.byteLength % 4) {
    const padded = new Uint8Array(data.byteLength + 4 - (data.byteLength % 4));
    padded.set(data);
    data = padded;
  }
  queue.writeBuffer(buffer, offset, data.buffer, data.byteOffset, data.byteLength);
}

// One tensor's bytes in a fill's layout (chatlens/gpu/builder.py; native_gpu.py's regroup): each
// `group` of `block`-byte blocks, the last padded with zero blocks, as field 0 of each block,
// then field 1 of each, ... Made as the tensor is uploaded: one tensor's copy at a time.
function regroup(bytes, layout) {
  if (!layout) return bytes;
  const src = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const { block, group, fields } = layout;
  const groups = Math.ceil(src.byteLength / (block * group));
  const out = new Uint8Array(groups * group * block);
  let at = 0;
  for (let g = 0; g < groups; g++) {
    for (const [offset, size] of fields) {
      for (let b = 0; b < group; b++) {
        const from = (g * group + b) * block + offset;
        if (from < src.byteLength) out.set(src.subarray(from, Math.min(from + size, src.byteLength)), at);
        at += size;
      }
    }
  }
  return out;
}

// read(file, offset, nbytes) -> Uint8Array (or a promise of one): the model source's bytes,
// the ranges the program's `weights` name. Returns {name, device, run, destroy}.
export async function createExecutor(adapter, program, read, { name = "webgpu" } = {}) {
  const need = program.requires;
  const device = await adapter.requestDevice({ requiredFeatures: need.features, requiredLimits: need.limits });
  device.pushErrorScope("validation");
  const buffers = {};
  const fills = []; // [buffer, offset in it, weight, layout]
  for (const b of program.buffers) {
    let usage = 0;
    for (const u of b.usage) usage |= USAGE[u];
    const buffer = device.createBuffer({ label: b.name, size: b.size, usage });
    buffers[b.name] = buffer;
    for (const fill of b.fill || []) fills.push([buffer, fill.offset, program.weights[fill.weight], fill.layout]);
    if (b.data !== undefined) writeWords(device.queue, buffer, 0, base64Bytes(b.data));
  }
  const modules = {};
  for (const m of program.modules) {
    const module = device.createShaderModule({ label: m.name, code: m.code });
    const info = await module.getCompilationInfo();
    const errors = info.messages.filter((msg) => msg.type === "error");
    if (errors.length) {
      throw new Error(`WGSL module ${m.name}: ` + errors.map((e) => `${e.lineNum}:${e.linePos} ${e.message}`).join("; "));
    }
    modules[m.name] = module;
  }
  // Every pipeline is asked for at once and compiled while the weights are read and written:
  // compiling is the slowest step of the setup on a CPU emulation (SwiftShader, the tiny test
  // model: 10 s with matmul's 64 x 64 tiles, most of it the four GEMMs, one pipeline after
  // another; far less with kernels.EMULATED_GEMM's, which it gets there: kernels.py has the
  // figures), and the browser compiles them on its own threads.
  const pipelines = {};
  const compiled = Promise.all(program.pipelines.map(async (p) => {
    const layout = device.createBindGroupLayout({
      entries: p.bindings.map((type, binding) => ({ binding, visibility: 4 /* COMPUTE */, buffer: { type } })),
    });
    const compute = { module: modules[p.module], entryPoint: p.entry };
    if (Object.keys(p.constants).length) compute.constants = p.constants;
    const pipeline = await device.createComputePipelineAsync({
      label: p.name, layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }), compute,
    });
    pipelines[p.name] = { pipeline, layout };
  }));
  compiled.catch(() => {}); // awaited below, after the weights: its error is thrown there
  // Weights are read in the order the source file holds them: a reader that caches the chunk it
  // last read (a store, a download) then reads each byte once.
  fills.sort(([, , a], [, , b]) => (a.file < b.file ? -1 : a.file > b.file ? 1 : a.offset - b.offset));
  for (const [buffer, offset, w, layout] of fills) {
    writeWords(device.queue, buffer, offset, regroup(await read(w.file, w.offset, w.nbytes), layout));
  }
  await compiled;
  const groups = {};
  for (const g of program.bind_groups) {
    groups[g.name] = device.createBindGroup({
      layout: pipelines[g.pipeline].layout,
      entries: g.buffers.map((b, binding) => ({ binding, resource: { buffer: buffers[b] } })),
    });
  }
  const sequences = {};
  for (const [seqName, seq] of Object.entries(program.sequences)) {
    sequences[seqName] = seq.map((d) => [pipelines[d.pipeline].pipeline, groups[d.bind_group], d.workgroups]);
  }
  const free = {}; // readback name -> staging buffers not in use: one per step in flight, made once
  for (const rbName of Object.keys(program.readbacks)) free[rbName] = [];
  const failed = await device.popErrorScope();
  if (failed) throw new Error(`WebGPU setup failed: ${failed.message}`);
  const stepBuffer = buffers[program.meta.step_buffer];

  // How long the GPU takes: ms a dispatch (from the parts that finished), and how long the host
  // hears of a finished submit (Firefox resolves completions on a ~100 ms timer; Chrome in well
  // under 1 ms). The first sets how finely a long run is split, the second how many steps go
  // ahead of a readback.
  let msPerDispatch = null;
  const latencyMs = await measureLatency(device);
  const PART_MS = 400; // a stop falls between two parts: it answers within about this

  // Runs go to the queue one after another (a run split into parts is submitted whole before
  // the next writes the step buffer).
  let queued = Promise.resolve();

  /**
   * Submit one run of the program: write its step parameters, run its sequences, read back one
   * readback. Returns a promise of the readback's bytes (an empty Uint8Array for none), or null
   * when `stopped({part, of})` said yes between two parts (the rest of the run is not
   * submitted; part: the parts done, of: the run's parts, known once it is submitted). Runs may
   * be in flight together; each reads back into a staging buffer of its own.
   */
  function submit(sequenceNames, params, readback = null, { stopped = () => false } = {}) {
    const done = queued.then(() => submitNow(sequenceNames, params, readback, stopped));
    queued = done.then((r) => r.submitted, () => {});
    return done.then((r) => r.bytes);
  }

  async function submitNow(sequenceNames, params, readback, stopped) {
    if (params && params.byteLength) writeWords(device.queue, stepBuffer, 0, params);
    const dispatches = sequenceNames.flatMap((n) => sequences[n]);
    // Parts: unmeasured, a long run goes 4 dispatches a part (the first prompt chunk on a slow
    // device can take minutes); measured, as few as keep each under PART_MS.
    const parts = msPerDispatch === null ? (dispatches.length > 64 ? Math.ceil(dispatches.length / 4) : 1)
      : Math.ceil((dispatches.length * msPerDispatch) / PART_MS);
    const size = Math.max(1, Math.ceil(dispatches.length / Math.max(1, Math.min(parts, dispatches.length))));
    const of = Math.max(1, Math.ceil(dispatches.length / size));
    const r = readback === null || readback === undefined ? null : program.readbacks[readback];
    for (let at = 0; at < Math.max(dispatches.length, 1); at += size) {
      const last = at + size >= dispatches.length;
      const encoder = device.createCommandEncoder();
      if (dispatches.length) {
        const pass = encoder.beginComputePass();
        for (const [pipeline, group, [x, y, z]] of dispatches.slice(at, at + size)) {
          pass.setPipeline(pipeline);
          pass.setBindGroup(0, group);
          pass.dispatchWorkgroups(x, y, z);
        }
        pass.end();
      }
      let target = null;
      if (last && r) {
        target = free[readback].pop() || device.createBuffer({ label: `read ${readback}`, size: r.size, usage: 0x01 | 0x08 /* MAP_READ | COPY_DST */ });
        encoder.copyBufferToBuffer(buffers[r.buffer], r.offset, target, 0, r.size);
      }
      const t0 = performance.now();
      device.queue.submit([encoder.finish()]);
      if (last) {
        const submitted = Promise.resolve();
        // No readback (a prompt chunk that chooses nothing): done once the GPU has done it.
        if (!target) return { submitted, bytes: finished(t0, size).then(() => new Uint8Array(0)) };
        return { submitted, bytes: target.mapAsync(1 /* GPUMapMode.READ */).then(() => {
          measured(t0, size);
          const out = new Uint8Array(target.getMappedRange(0, r.size).slice(0));
          target.unmap();
          free[readback].push(target);
          return out;
        }) };
      }
      await finished(t0, size);
      if (stopped({ part: at / size + 1, of })) return { submitted: Promise.resolve(), bytes: Promise.resolve(null) };
    }
  }

  // A part's time, once the GPU has done it: how finely the next long run is split.
  async function finished(t0, count) {
    await device.queue.onSubmittedWorkDone();
    measured(t0, count);
  }

  function measured(t0, count) {
    const ms = Math.max(performance.now() - t0 - latencyMs, 0) / Math.max(count, 1);
    msPerDispatch = msPerDispatch === null ? ms : 0.7 * msPerDispatch + 0.3 * ms;
  }

  /** Steps to keep in flight: enough to cover the host's completion latency with GPU work, and at
   * least the program's floor (chatlens.defaults.IN_FLIGHT). */
  function depth(stepDispatches = program.meta.dispatches?.decode ?? 1) {
    const stepMs = Math.max((msPerDispatch ?? 0.01) * stepDispatches, 0.05);
    return Math.min(16, Math.max(program.meta.in_flight, 1 + Math.ceil(latencyMs / stepMs)));
  }

  // One run, waited for (tests, and anything that needs one step's bytes).
  const run = (sequenceNames, params, readback = null) => submit(sequenceNames, params, readback);

  const executor = { name, device, run, submit, depth, latencyMs, destroy, destroyed: false, lost: false };
  device.lost.then(() => (executor.lost = true));

  function destroy() {
    executor.destroyed = true;
    for (const b of Object.values(buffers)) b.destroy();
    device.destroy();
  }

  return executor;
}

/** The median time, in ms, between an empty submit and the host hearing it is done. */
async function measureLatency(device) {
  const times = [];
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    device.queue.submit([]);
    await device.queue.onSubmittedWorkDone();
    times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b)[1];
}
