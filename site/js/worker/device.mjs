// Which device computes replies, decided before Python starts (so Python boots from its memory
// snapshot only on the GPU path it was made for). The rule is chatlens.device's (py/chatlens/
// device.py): `auto` never takes a CPU emulation of a GPU (SwiftShader, llvmpipe, ...) while
// NumPy can compute; `webgpu` asked for by name takes any adapter. build.json's settings carry
// its list of emulated adapters' names.

/** Why `info` (the probe's adapter info) is a CPU emulation, or null for a real GPU. */
export function emulated(info, names) {
  if (!info) return null;
  if (info.fallback) return "the browser calls this adapter a fallback (a software one)";
  const name = [info.vendor, info.architecture, info.device, info.description].join(" ").toLowerCase();
  const word = names.find((w) => name.includes(w));
  return word ? `${word} is a software GPU that runs on the CPU` : null;
}

/** {backend: "webgpu" | "numpy", why} for the backend asked for and the adapter found (null: none). */
export function chooseBackend(asked, info, names) {
  if (asked === "numpy") return { backend: "numpy", why: "asked for NumPy" };
  if (asked === "webgpu") return { backend: "webgpu", why: info ? "asked for WebGPU" : "asked for WebGPU, but there is no adapter" };
  if (!info) return { backend: "numpy", why: "no GPU adapter was found" };
  const why = emulated(info, names);
  return why ? { backend: "numpy", why: `NumPy is faster here: ${why}` } : { backend: "webgpu", why: "a GPU adapter was found" };
}
