// This device's speed, on the input `python -m chatlens bench` measures (chatlens.host.bench:
// its conversation, its new tokens), carried here by build.json's settings.bench with the keys
// bench's rows print and the figures docs/speed.md lists for other hardware. The reply is one
// chatlens.run: its record's timings are the figures, from where its prompt started (a prompt
// the cache held already is said so, not passed off as a prefill rate).

/**
 * Run bench's input once and resolve with bench's keys: {prefill_tok_s, decode_tok_s,
 * first_token_ms, dispatches_per_token, backend, adapter} and beside them prompt_tokens,
 * new_tokens (the reply's, which may end at its end of turn before newTokens), reused_tokens,
 * emulated (a CPU emulation of a GPU: the figures only show that it works) and others (what
 * other hardware measured). options: {newTokens} (default bench's own), {signal}.
 */
export async function benchOf(api, { newTokens, signal } = {}) {
  await api.settingsReady;
  const bench = api.settings.bench;
  if (!bench) throw new Error("this build carries no bench input (build it again)");
  await api.modelReady;
  if (!api.model?.backend) throw new Error(`the model's weights are not loaded: ${api.model?.error ?? "download the model first"}`);
  const [system, ...messages] = bench.conversation;
  const maxTokens = newTokens ?? bench.new_tokens;
  const window = Math.max(...api.settings.windows);
  const t0 = performance.now();
  let first = null;
  const record = await api.run({ system: system.content, messages, window, maxTokens },
                               { signal, onToken: () => (first ??= performance.now() - t0) });
  const t = record.timings ?? {};
  const reused = record.reused_tokens ?? 0;
  const device = (await api.ready).device ?? {};
  const out = {
    prefill_tok_s: reused ? null : t.prefill_tok_s ?? null,
    decode_tok_s: t.decode_tok_s ?? null,
    first_token_ms: first == null ? null : Math.round(first),
    dispatches_per_token: api.model?.dispatches_per_token ?? null,
    backend: record.backend,
    adapter: device.adapter ?? null,
    prompt_tokens: record.prompt_ids.length,
    new_tokens: record.reply_ids.length,
    reused_tokens: reused,
    emulated: Boolean(device.emulated) && api.model?.kind === "webgpu",
    others: bench.others,
  };
  for (const key of bench.keys) if (!(key in out)) throw new Error(`bench's figure ${key} is missing here`);
  return out;
}
