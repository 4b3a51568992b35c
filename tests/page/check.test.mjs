// The known-answer check's page and worker logic in node (site/js/page/check.mjs, worker/check.mjs,
// page/bench.mjs): results kept per key and given back; a GPU that failed on an earlier visit is
// not what `auto` boots for, while one asked for by name or overridden is still tried (and then
// refused, or labelled); the line the device box says; bench's figures with bench's keys.
import assert from "node:assert/strict";
import { test } from "node:test";
import { KEPT_KEY, checkOverride, keepCheck, keptChecks } from "../../site/js/page/check.mjs";
import { adapterKey, createChecks } from "../../site/js/worker/check.mjs";
import { benchOf } from "../../site/js/page/bench.mjs";
import { benchLine, checkLine } from "../../site/js/views/device.mjs";

function storage() {
  const items = new Map();
  return { getItem: (k) => items.get(k) ?? null, setItem: (k, v) => items.set(k, String(v)), items };
}

const PASSED = { passed: true, max_diff: 1.5e-5, tolerance: 0.001, checks: [{ what: "a run", passed: true, max_diff: 1.5e-5 }],
                 adapter: "google swiftshader", ms: 2300,
                 cached: false, sentence: "agrees with the reference within 2e-05" };
const FAILED = { ...PASSED, passed: false, max_diff: 0.0126, sentence: "computes wrong values: a prompt read ... differed" };

test("results are kept under their keys, the newest last, a cached one not written again", () => {
  const s = storage();
  assert.deepEqual(keptChecks(s), {});
  keepCheck("build|gpu", PASSED, s);
  keepCheck("build|gpu|sha", { what: "the model's own weights", passed: true, max_diff: 1e-5 }, s);
  assert.deepEqual(Object.keys(keptChecks(s)), ["build|gpu", "build|gpu|sha"]);
  assert.equal(keptChecks(s)["build|gpu"].cached, false);
  keepCheck("other|gpu", { ...PASSED, cached: true }, s); // read from what was kept: nothing new to keep
  assert.equal("other|gpu" in keptChecks(s), false);
  keepCheck("other|gpu", { ...FAILED, checks: [], sentence: "could not run the check (lost)" }, s); // tried again next visit
  assert.equal("other|gpu" in keptChecks(s), false);
  for (let i = 0; i < 40; i++) keepCheck(`b${i}|gpu`, PASSED, s);
  const kept = Object.keys(keptChecks(s));
  assert.equal(kept.length, 16);
  assert.equal(kept.at(-1), "b39|gpu");
  s.setItem(KEPT_KEY, "not json");
  assert.deepEqual(keptChecks(s), {});
});

test("the override is the page address's only", () => {
  assert.equal(checkOverride({ search: "?gpu-check=ignore" }), true);
  assert.equal(checkOverride({ search: "?backend=webgpu" }), false);
});

test("the device box's line states the figure, when it was checked, or why the GPU is refused", () => {
  assert.equal(checkLine(PASSED), "checked on this device: agrees with the reference within 2e-5 (the tolerance is 0.001), 2.3 s.");
  assert.match(checkLine({ ...PASSED, cached: true }), /^checked on this device on an earlier visit: agrees .* within 2e-5 \(the tolerance is 0\.001\)\.$/);
  assert.match(checkLine({ ...PASSED, weights: "checked" }), /the model's own weights included/);
  assert.match(checkLine(FAILED), /^checked on this device: it computes wrong values: .* No figure on this page comes from it\.$/);
  assert.equal(checkLine(null), null);
});

const GPU = { name: "google swiftshader", features: ["subgroups"], info: { vendor: "google", architecture: "swiftshader",
  device: "", description: "", fallback: false } };
const BUILD = { check: { key: "k1", file: "check.json", tolerance: 0.001, fault: null } };
const keyOf = (gpu) => `k1|${adapterKey(gpu)}`;

test("an adapter's key changes with the adapter and the browser, not between probes", () => {
  assert.equal(adapterKey(GPU, "agent"), adapterKey({ ...GPU }, "agent"));
  assert.notEqual(adapterKey(GPU, "agent"), adapterKey({ ...GPU, name: "nvidia" }, "agent"));
  assert.notEqual(adapterKey(GPU, "agent"), adapterKey(GPU, "another browser"));
});

test("a GPU that failed its check on an earlier visit: auto boots for NumPy; by name, or overridden, it is tried", () => {
  const device = { backend: "webgpu", why: "a GPU adapter was found", gpu: GPU, passedOver: null };
  const kept = { [keyOf(GPU)]: FAILED };
  const auto = createChecks({ build: BUILD, kept, post() {} }).prior(device, "auto");
  assert.equal(auto.backend, "numpy");
  assert.equal(auto.gpu, null);
  assert.match(auto.why, /failed its known-answer check on an earlier visit: computes wrong values/);
  assert.equal(createChecks({ build: BUILD, kept, post() {} }).prior(device, "webgpu"), device);
  assert.equal(createChecks({ build: BUILD, kept, override: true, post() {} }).prior(device, "auto"), device);
  // one that passed, or one kept for another build: as chosen
  assert.equal(createChecks({ build: BUILD, kept: { [keyOf(GPU)]: PASSED }, post() {} }).prior(device, "auto"), device);
  assert.equal(createChecks({ build: { check: { ...BUILD.check, key: "k2" } }, kept, post() {} }).prior(device, "auto"), device);
  // Python from the GPU path's snapshot only where NumPy will not be needed on it
  const sure = (k, asked, override = false) => createChecks({ build: BUILD, kept: k, override, post() {} }).sureOf(device, asked);
  assert.equal(sure({}, "auto"), false);
  assert.equal(sure({ [keyOf(GPU)]: PASSED }, "auto"), true);
  assert.equal(sure({}, "webgpu"), true);
  assert.equal(sure({}, "auto", true), true);
});

test("a kept result is used without running anything; gate refuses a failed one unless overridden", async () => {
  const posted = [];
  const call = () => assert.fail("a kept result runs nothing in Python");
  const passed = createChecks({ build: BUILD, kept: { [keyOf(GPU)]: PASSED }, post: (k, r) => posted.push([k, r]) });
  const trust = await passed.gate({ ...GPU }, call);
  assert.equal(trust.label, "");
  assert.equal(trust.result.cached, true);
  assert.deepEqual(posted.map(([k, r]) => [k, r.cached]), [[keyOf(GPU), true]]);

  const failed = createChecks({ build: BUILD, kept: { [keyOf(GPU)]: FAILED }, post() {} });
  await assert.rejects(failed.gate({ ...GPU }, call), (e) => {
    assert.match(e.message, /^This GPU \(google swiftshader\) failed its known-answer check, so its figures would be wrong: it computes wrong values/);
    assert.match(e.message, /Try another browser/);
    assert.equal(e.check.passed, false);
    return true;
  });
  const overridden = createChecks({ build: BUILD, kept: { [keyOf(GPU)]: FAILED }, override: true, post() {} });
  assert.match((await overridden.gate({ ...GPU }, call)).label, /unchecked: it failed its known-answer check/);
});

test("a weights check kept for the file is used; one that failed refuses the weights", async () => {
  const sha = "ab".repeat(32);
  const entry = { what: "the model's own weights: ...", passed: false, max_diff: 0.2, differed: "the logit of id 2: 1 against 1.2" };
  const checks = createChecks({ build: BUILD, kept: { [keyOf(GPU)]: PASSED, [`${keyOf(GPU)}|${sha}`]: entry }, post() {} });
  await checks.gate({ ...GPU }, () => assert.fail());
  const call = () => assert.fail("a kept weights check runs nothing");
  await assert.rejects(checks.weights({ call, executor: { name: "x" }, model: "instruct", reference: { ids: [1] }, sha256: sha }),
                       /The model's weights on this GPU \(x\) failed their check.*the logit of id 2/);
  // no reference published for these weights: said, not checked
  const none = await checks.weights({ call, executor: { name: "x" }, model: "instruct", reference: null, sha256: sha });
  assert.equal(none.weights, "no reference for these weights");
  assert.equal(none.passed, true);
});

test("bench's figures come from one run of bench's input, with bench's keys, an emulated GPU said so", async () => {
  const settings = { windows: [256, 1024], bench: { conversation: [{ role: "system", content: "S" }, { role: "user", content: "U" }],
    new_tokens: 96, keys: ["prefill_tok_s", "decode_tok_s", "first_token_ms", "backend", "dispatches_per_token", "adapter"],
    others: [{ device: "elsewhere", prefill: "about 180", decode: "about 11", source: "docs/speed.md" }] } };
  let asked = null;
  const api = {
    settingsReady: Promise.resolve(settings), settings, modelReady: Promise.resolve(), ready: Promise.resolve({
      device: { adapter: "google swiftshader", emulated: true } }),
    model: { backend: "webgpu: google swiftshader", kind: "webgpu", dispatches_per_token: 153 },
    run: async (args, { onToken }) => {
      asked = args;
      onToken({ id: 5 });
      return { backend: "webgpu: google swiftshader", prompt_ids: new Array(300).fill(1), reply_ids: [5, 6, 7], reused_tokens: 0,
               timings: { prefill_tok_s: 20.5, decode_tok_s: 3.25 } };
    },
  };
  const r = await benchOf(api, { newTokens: 3 });
  assert.deepEqual(asked, { system: "S", messages: [{ role: "user", content: "U" }], window: 1024, maxTokens: 3 });
  for (const key of settings.bench.keys) assert.ok(key in r, key);
  assert.equal(r.prefill_tok_s, 20.5);
  assert.equal(r.dispatches_per_token, 153);
  assert.equal(r.adapter, "google swiftshader");
  assert.equal(r.emulated, true);
  assert.match(benchLine(r), /prefill 20\.5 tokens\/s, decode 3\.3 tokens\/s .*a function check/);
  const reused = await benchOf({ ...api, run: async (...a) => ({ ...(await api.run(...a)), reused_tokens: 300 }) });
  assert.equal(reused.prefill_tok_s, null);
  assert.match(benchLine(reused), /read from the cache \(300 tokens\)/);
});
