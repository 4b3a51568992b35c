// The browser's executor of a chatlens GPU program (the plain data chatlens/gpu/program.py
// builds; its shape is documented in chatlens/gpu/builder.py). It creates what the program
// lists, once, and replays its named sequences: one compute pass and one submit per run.
// What the dispatches mean lives in program.py; chatlens/gpu/native.py is the same executor
// for wgpu-py. Plain ES module, for a Web Worker or a page.

const USAGE = { storage: 0x80, copy_dst: 0x08, copy_src: 0x04 }; // GPUBufferUsage, also where that global is missing

// What program.py needs to know about the adapter: {name, features, limits}.
export async function probe(gpu = navigator.gpu) {
  if (!gpu) throw new Error("this browser has no WebGPU (navigator.gpu is missing)");
  const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw new Error("WebGPU found no adapter");
  const info = adapter.info || {};
  const limits = {};
  for (const key in adapter.limits) limits[key] = adapter.limits[key];
  return {
    adapter,
    name: [info.vendor, info.architecture, info.description || info.device].filter(Boolean).join(" ") || "adapter",
    features: [...adapter.features].sort(),
    limits,
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

// One tensor's bytes in a fill's layout (chatlens/gpu/builder.py; native.py's regroup): each
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
  // compiling is the slowest step of the setup (about 10 s of 14 on SwiftShader, one pipeline
  // after another), and the browser compiles them on its own threads.
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
  const staging = {};
  for (const [rbName, r] of Object.entries(program.readbacks)) {
    staging[rbName] = device.createBuffer({ label: `read ${rbName}`, size: r.size, usage: 0x01 | 0x08 /* MAP_READ | COPY_DST */ });
  }
  const failed = await device.popErrorScope();
  if (failed) throw new Error(`WebGPU setup failed: ${failed.message}`);
  const stepBuffer = buffers[program.meta.step_buffer];

  // Write the step parameters, run the named sequences in one compute pass, return one
  // readback's bytes (an empty Uint8Array for none).
  async function run(sequenceNames, params, readback = null) {
    if (params && params.byteLength) writeWords(device.queue, stepBuffer, 0, params);
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    for (const seqName of sequenceNames) {
      for (const [pipeline, group, [x, y, z]] of sequences[seqName]) {
        pass.setPipeline(pipeline);
        pass.setBindGroup(0, group);
        pass.dispatchWorkgroups(x, y, z);
      }
    }
    pass.end();
    let r = null;
    if (readback !== null && readback !== undefined) {
      r = program.readbacks[readback];
      encoder.copyBufferToBuffer(buffers[r.buffer], r.offset, staging[readback], 0, r.size);
    }
    device.queue.submit([encoder.finish()]);
    if (r === null) return new Uint8Array(0);
    const target = staging[readback];
    await target.mapAsync(1 /* GPUMapMode.READ */);
    const out = new Uint8Array(target.getMappedRange(0, r.size).slice(0));
    target.unmap();
    return out;
  }

  const executor = { name, device, run, destroy, destroyed: false, lost: false };
  device.lost.then(() => (executor.lost = true));

  function destroy() {
    executor.destroyed = true;
    for (const b of Object.values(buffers)) b.destroy();
    for (const s of Object.values(staging)) s.destroy();
    device.destroy();
  }

  return executor;
}
