"""Which device computes replies: the rule `auto` follows, defined once for the CLI and the page.

A GPU adapter that is a CPU in disguise (Chromium's SwiftShader, Mesa's llvmpipe/lavapipe,
Windows' WARP) runs the GPU program tens to hundreds of times slower than NumPy on the same
CPU (measured here: SwiftShader 4-7 s a token against about 0.1 s; lavapipe 7.8x slower decode
and 88x slower prefill). So `auto` takes the GPU only when it is a real one, and NumPy
otherwise; asking for `webgpu` by name still gets any adapter (the tests run on these).

The page reads EMULATED through build.json's settings (chatlens.defaults.for_page) and applies
the same rule to the browser's adapter before Python starts (site/js/worker/device.mjs).
"""

# Substrings of adapter names (vendor, device, description), lower case, that name a CPU
# implementation of a GPU API.
EMULATED = ("swiftshader", "llvmpipe", "lavapipe", "softpipe", "microsoft basic render", "warp")


def emulated(info: dict | None) -> str | None:
    """Why an adapter is a CPU emulation (a sentence), or None for a real GPU. `info`: the
    adapter's description: wgpu-py's adapter.info, or the browser's GPUAdapterInfo fields, with
    "fallback" for WebGPU's isFallbackAdapter."""
    if not info:
        return None
    if info.get("fallback") or info.get("isFallbackAdapter"):
        return "the browser calls this adapter a fallback (a software one)"
    if str(info.get("adapter_type", "")).upper() == "CPU":
        return "the driver reports a CPU adapter"
    name = " ".join(str(info.get(k, "")) for k in ("vendor", "architecture", "device", "description")).lower()
    for word in EMULATED:
        if word in name:
            return f"{word} is a software GPU that runs on the CPU"
    return None


def choose(asked: str, info: dict | None) -> tuple[str, str]:
    """("webgpu" | "numpy", why) for a backend asked for (auto, webgpu, numpy) and the adapter
    found (None: none)."""
    if asked == "numpy":
        return "numpy", "asked for NumPy"
    if asked == "webgpu":
        return "webgpu", "asked for WebGPU" if info else "asked for WebGPU, but there is no adapter"
    if info is None:
        return "numpy", "no GPU adapter was found"
    why = emulated(info)
    if why:
        return "numpy", f"NumPy is faster here: {why}"
    return "webgpu", "a GPU adapter was found"
