// The page's choice of device (site/js/worker/device.mjs), in node: chatlens.device's rule, with
// its list of emulated adapters read from Python as the build writes it into build.json.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { chooseBackend, emulated } from "../../site/js/worker/device.mjs";

const root = fileURLToPath(new URL("../../", import.meta.url));
const settings = JSON.parse(execFileSync(process.env.PYTHON || "python3", ["-c",
  "import json, sys; sys.path.insert(0, 'py'); from chatlens import defaults; print(json.dumps(defaults.for_page()))"],
  { cwd: root }));
const NAMES = settings.emulated_adapters;

// What Chromium's SwiftShader adapter says of itself here, and a real GPU's info.
const SWIFTSHADER = { vendor: "google", architecture: "swiftshader", device: "", description: "", fallback: true };
const LLVMPIPE = { vendor: "mesa", architecture: "", device: "llvmpipe (LLVM 15.0.6, 256 bits)", description: "", fallback: false };
const M2 = { vendor: "apple", architecture: "metal-3", device: "", description: "", fallback: false };

test("auto never takes a CPU emulation of a GPU while NumPy can compute", () => {
  for (const info of [SWIFTSHADER, LLVMPIPE, { ...M2, fallback: true }]) {
    const choice = chooseBackend("auto", info, NAMES);
    assert.equal(choice.backend, "numpy", JSON.stringify(info));
    assert.match(choice.why, /^NumPy is faster here: /);
  }
  assert.match(emulated(LLVMPIPE, NAMES), /llvmpipe is a software GPU/);
});

test("auto takes a real GPU, and NumPy where there is none", () => {
  assert.deepEqual(chooseBackend("auto", M2, NAMES), { backend: "webgpu", why: "a GPU adapter was found" });
  assert.equal(chooseBackend("auto", null, NAMES).backend, "numpy");
  assert.equal(emulated(M2, NAMES), null);
});

test("asking for a backend by name gets it, an emulated GPU included (the tests run on one)", () => {
  assert.equal(chooseBackend("webgpu", SWIFTSHADER, NAMES).backend, "webgpu");
  assert.equal(chooseBackend("numpy", M2, NAMES).backend, "numpy");
});
