// Where the device is named (under the model box's "Replies are computed on ..."): the GPU's
// known-answer check in a line (page/check.mjs), a faulty test build said so, and "Measure this
// device": bench's input run here (page/bench.mjs), its figures beside what docs/speed.md lists
// for other hardware. It patches its own element (#device-body) at each status change.

import { $, el, refill } from "./dom.mjs";

/** The check in a line for where the device is named: "checked on this device: agrees with the
 * reference within 2e-5, 0.3 s" (kept: "checked on an earlier visit"), or why it refused. */
export function checkLine(result) {
  if (!result) return null;
  const when = result.cached ? "checked on this device on an earlier visit" : "checked on this device";
  const took = result.ms == null || result.cached ? "" : `, ${(result.ms / 1000).toFixed(1)} s`;
  if (!result.passed) return `${when}: it ${result.sentence}${took}. No figure on this page comes from it.`;
  const weights = result.weights === "checked" ? ", the model's own weights included" : "";
  return `${when}: agrees with the reference within ${Number(result.max_diff).toExponential(0)} ` +
    `(the tolerance is ${result.tolerance})${weights}${took}.`;
}

/** A bench's figures in words, for the device box: what was measured, and how far to trust it. */
export function benchLine(r) {
  const rate = (x) => (x == null ? "not measured" : `${x.toFixed(1)} tokens/s`);
  const prefill = r.reused_tokens ? `the prompt was read from the cache (${r.reused_tokens} tokens)` : `prefill ${rate(r.prefill_tok_s)}`;
  const gpu = r.dispatches_per_token ? `, ${r.dispatches_per_token} dispatches a token` : "";
  const text = `This device, ${r.backend}: ${prefill}, decode ${rate(r.decode_tok_s)} ` +
    `(a ${r.prompt_tokens}-token prompt, ${r.new_tokens} new tokens${gpu}).`;
  return r.emulated ? `${text} Its GPU is a CPU emulation: these figures only show that it works (a function check), ` +
    "not how fast a GPU is." : text;
}

/** The device box for `api` (window.chatlens): drawn now and at each status change. */
export function createDeviceBox(api) {
  const box = { measuring: false, measured: null, error: null };
  const draw = () => drawDevice({ ...box, api }, { measure });

  async function measure() {
    Object.assign(box, { measuring: true, measured: null, error: null });
    draw();
    try {
      box.measured = await api.bench();
    } catch (e) {
      box.error = `The measurement did not finish: ${e.message}`;
    } finally {
      box.measuring = false;
      draw();
    }
  }
  api.onStatus(draw);
  return { draw };
}

let drawn = null; // what #device-body shows now: redrawn only when it changes (its live regions speak once)

/** m: {api, measuring, measured (page/bench.mjs's figures), error}; on: {measure}. */
export function drawDevice(m, on) {
  const body = $("device-body");
  if (!body) return;
  const { api } = m;
  const fault = api.build?.check?.fault;
  const check = api.model?.check ?? api.checked;
  const shows = JSON.stringify([fault, check, api.model?.backend, api.model?.kind, api.writing, m.measuring, m.measured,
                                m.error]);
  if (shows === drawn && body.childNodes.length) return;
  drawn = shows;
  const parts = [];
  if (fault) {
    parts.push(el("p", { class: "error", id: "faulty-build", role: "alert",
                         text: `This is ${fault}. Its GPU program must fail the known-answer check below.` }));
  }
  if (check && (api.model?.kind === "webgpu" || !api.model?.backend)) {
    const line = checkLine(check);
    const overridden = !check.passed && api.model?.kind === "webgpu";
    parts.push(el("p", { class: `about-download ${check.passed ? "" : "error"}`.trim(), id: "device-check",
                         dataset: { passed: String(check.passed), cached: String(Boolean(check.cached)) },
                         text: `${check.adapter}: ${line}${overridden ? " It computes anyway (?gpu-check=ignore, for " +
                           "developers): every figure names it unchecked." : ""}` }));
  }
  if (api.model?.backend) {
    parts.push(el("button", { type: "button", id: "measure-device", disabled: m.measuring || api.writing,
                              onclick: on.measure, text: m.measuring ? "Measuring this device…" : "Measure this device" }));
  }
  if (m.measuring) parts.push(el("p", { class: "about-download", role: "status", text: "Writing bench's reply here; the figures follow." }));
  if (m.error) parts.push(el("p", { class: "error", id: "measure-error", role: "alert", text: m.error }));
  if (m.measured) parts.push(measuredView(m.measured));
  refill(body, ...parts);
}

function measuredView(r) {
  const row = (cells, cls) => el("tr", { class: cls }, ...cells.map((c) => el("td", { text: c ?? "" })));
  const rate = (x) => (x == null ? "" : x.toFixed(1));
  return el("div", { id: "device-measured", role: "status" },
    el("p", { class: "about-download", text: benchLine(r) }),
    el("table", { class: "device-figures" },
      el("thead", {}, el("tr", {}, ...["device", "prefill tokens/s", "decode tokens/s", "measured by"].map((t) => el("th", { text: t })))),
      el("tbody", {},
        row([`this device (${r.backend})`, r.reused_tokens ? "" : rate(r.prefill_tok_s), rate(r.decode_tok_s), "this page, now"], "this-device"),
        ...r.others.map((o) => row([o.device, o.prefill, o.decode, o.source], "other-device")))));
}
