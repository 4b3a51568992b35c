// wllama (llama.cpp in WebAssembly) on one GGUF, for scripts/bench_browser.py: load the model,
// then run the same prompt `repeats` times, greedy, exactly `nNew` new tokens each (end of turn
// ignored), with no prompt cache between runs, so every run prefills the whole prompt.
// wllama's files come from npm (scripts/bench/package.json), copied beside this page; nothing is
// fetched from a CDN: the wasm path below is local.

import { Wllama } from "./wllama/esm/index.js";

const WASM = new URL("./wllama/esm/wasm/wllama.wasm", import.meta.url).href;

window.benchWllama = async ({ url, prompt, nNew, repeats, threads, gpuLayers, nCtx }) => {
  const logs = [];
  const keep = (level) => (...a) => logs.push(`${level}: ${a.map(String).join(" ")}`);
  const logger = { debug: () => {}, log: () => {}, warn: keep("warn"), error: keep("error") };
  const wllama = new Wllama({ default: WASM }, { logger });
  try {
    const t0 = performance.now();
    const blob = await (await fetch(url)).blob();
    const t1 = performance.now();
    await wllama.loadModel([blob], { n_ctx: nCtx, n_threads: threads, n_gpu_layers: gpuLayers, n_parallel: 1 });
    const t2 = performance.now();
    const runs = [];
    for (let i = 0; i < repeats; i++) {
      const start = performance.now();
      let first = null;
      let text = "";
      let timings = null;
      let usage = null;
      await wllama.createCompletion({
        prompt, max_tokens: nNew, temperature: 0, top_k: 1, ignore_eos: true, cache_prompt: false, stream: true,
        onData: (chunk) => {
          const piece = chunk.choices?.[0]?.text;
          if (first === null && piece !== undefined) first = performance.now();
          text += piece ?? "";
          if (chunk.timings) timings = chunk.timings;
          if (chunk.usage) usage = chunk.usage;
        },
      });
      runs.push({ wall_ms: performance.now() - start, first_ms: first === null ? null : first - start, text, timings, usage });
    }
    const ctx = wllama.getLoadedContextInfo();
    return {
      fetch_ms: t1 - t0, load_ms: t2 - t1, bytes: blob.size, runs, logs: logs.slice(-20),
      info: {
        multithread: wllama.isMultithread(), threads: wllama.getNumThreads(), webgpu: wllama.isSupportWebGPU(),
        libllama: Wllama.getLibllamaVersion?.() ?? null, n_ctx: ctx.n_ctx, n_batch: ctx.n_batch, n_ubatch: ctx.n_ubatch,
        add_bos_token: ctx.add_bos_token, isolated: globalThis.crossOriginIsolated,
      },
    };
  } catch (e) {
    throw new Error(`${e?.message ?? e}\n${logs.slice(-20).join("\n")}`);
  } finally {
    await wllama.exit().catch(() => {});
  }
};
document.getElementById("state").textContent = "ready";
