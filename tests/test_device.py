"""Which device computes (chatlens.device): `auto` never prefers a CPU emulation of a GPU to NumPy.

The rule is tested on adapters described as data, the way wgpu-py (adapter.info) and browsers
(GPUAdapterInfo, isFallbackAdapter) describe them; the machine's own adapter, whatever it is (a
real GPU, lavapipe, none), only for the command line applying that rule to it.
"""

import pytest

from chatlens import device
from chatlens.host.native_gpu import best_adapter_info
from conftest import run_cli

# wgpu-py's adapter.info
LAVAPIPE = {"vendor": "llvmpipe", "device": "llvmpipe (LLVM 15.0.6, 256 bits)", "adapter_type": "CPU",
            "backend_type": "Vulkan", "description": "Mesa 22.3.6 (LLVM 15.0.6)"}
H200 = {"vendor": "NVIDIA", "device": "NVIDIA H200", "adapter_type": "DiscreteGPU", "backend_type": "Vulkan",
        "description": "550.54.15"}
IRIS = {"vendor": "Intel", "device": "Intel(R) Iris(R) Xe Graphics (TGL GT2)", "adapter_type": "IntegratedGPU",
        "backend_type": "Vulkan"}
# the browser's GPUAdapterInfo (site/js/gpu/executor.mjs probe()'s info)
SWIFTSHADER = {"vendor": "google", "architecture": "swiftshader", "device": "", "description": "", "fallback": True}
APPLE = {"vendor": "apple", "architecture": "metal-3", "device": "", "description": "", "fallback": False}
NVIDIA_IN_CHROME = {"vendor": "nvidia", "architecture": "ampere", "device": "", "description": "", "fallback": False}

REAL = {"H200 (wgpu-py)": H200, "Iris Xe (wgpu-py)": IRIS, "Apple M2 (browser)": APPLE,
        "NVIDIA (browser)": NVIDIA_IN_CHROME}
EMULATED = {
    "lavapipe (wgpu-py)": (LAVAPIPE, "the driver reports a CPU adapter"),
    "SwiftShader (browser)": (SWIFTSHADER, "the browser calls this adapter a fallback"),
    "SwiftShader without the fallback flag": ({**SWIFTSHADER, "fallback": False}, "swiftshader is a software GPU"),
    "llvmpipe by name only": ({"vendor": "Mesa", "device": "llvmpipe (LLVM 17)"}, "llvmpipe is a software GPU"),
    "a real name on a CPU adapter": ({**H200, "adapter_type": "CPU"}, "the driver reports a CPU adapter"),
    "Windows' WARP": ({"description": "Microsoft Basic Render Driver"}, "microsoft basic render is a software GPU"),
    "a fallback adapter by WebGPU's own name": ({"vendor": "x", "isFallbackAdapter": True}, "calls this adapter a fallback"),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_auto_takes_a_real_gpu(name):
    assert device.emulated(REAL[name]) is None
    assert device.choose("auto", REAL[name]) == ("webgpu", "a GPU adapter was found")


@pytest.mark.parametrize("name", sorted(EMULATED))
def test_auto_never_takes_an_emulated_gpu_and_says_why(name):
    info, why = EMULATED[name]
    assert why in device.emulated(info)
    backend, said = device.choose("auto", info)
    assert backend == "numpy" and said == f"NumPy is faster here: {device.emulated(info)}"


def test_no_adapter_means_numpy_and_a_backend_asked_for_by_name_is_taken():
    assert device.choose("auto", None) == ("numpy", "no GPU adapter was found")
    # asked for by name, any adapter computes (the GPU tests run on lavapipe and SwiftShader)
    for info in (LAVAPIPE, SWIFTSHADER, H200):
        assert device.choose("webgpu", info) == ("webgpu", "asked for WebGPU")
        assert device.choose("numpy", info) == ("numpy", "asked for NumPy")
    assert device.choose("webgpu", None) == ("webgpu", "asked for WebGPU, but there is no adapter")


def test_the_cli_applies_the_rule_to_this_machine_s_adapter(gguf_path):
    """Whatever this machine has (lavapipe here: NumPy; a real GPU: webgpu; none: NumPy), `auto`
    computes with what the rule says of it, and says so on stderr."""
    kind, why = device.choose("auto", best_adapter_info())
    done = run_cli("generate", "--backend", "auto", "--max-new-tokens", "2", stdin="[1, 4093, 198]", model=gguf_path)
    assert done.returncode == 0, done.stderr
    assert f"chatlens: computing with {kind} ({why})" in done.stderr
