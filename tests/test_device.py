"""Which device computes (chatlens.device): `auto` never prefers a CPU emulation of a GPU to NumPy."""

from chatlens import device
from conftest import run_cli

LAVAPIPE = {"vendor": "llvmpipe", "device": "llvmpipe (LLVM 15.0.6, 256 bits)", "adapter_type": "CPU",
            "backend_type": "Vulkan"}
SWIFTSHADER = {"vendor": "google", "architecture": "swiftshader", "fallback": True}
H200 = {"vendor": "NVIDIA", "device": "NVIDIA H200", "adapter_type": "DiscreteGPU", "backend_type": "Vulkan"}


def test_auto_takes_a_real_gpu_and_never_an_emulated_one():
    assert device.choose("auto", H200) == ("webgpu", "a GPU adapter was found")
    for fake in (LAVAPIPE, SWIFTSHADER, {**H200, "adapter_type": "CPU"}, {"device": "Microsoft Basic Render Driver"}):
        backend, why = device.choose("auto", fake)
        assert backend == "numpy" and why.startswith("NumPy is faster here"), fake
    assert device.choose("auto", None)[0] == "numpy"
    # asked for by name, any adapter computes (the GPU tests run on lavapipe and SwiftShader)
    assert device.choose("webgpu", LAVAPIPE)[0] == "webgpu"


def test_the_cli_on_lavapipe_computes_with_numpy_and_says_why(gguf_path):
    done = run_cli("generate", "--backend", "auto", "--max-new-tokens", "2", stdin="[1, 4093, 198]", model=gguf_path)
    assert done.returncode == 0, done.stderr
    assert "chatlens: computing with numpy (NumPy is faster here:" in done.stderr
