"""The one documented fault of a test build: a GPU program that is wrong the way a driver can be,
for the tests of the known-answer check (chatlens.check) and never otherwise.

`python -m chatlens build --gpu-fault` and `serve --gpu-fault` write it into build.json's
"check" (the page's worker then builds every GPU program faulty and says so); natively `check
--gpu-fault` or CHATLENS_GPU_FAULT=1 does. The fault: the MLP's activation silu(gate) * up
(wgsl/silu.wgsl, every layer's gate/up projection, in prefill, decode, inspect and score)
comes out larger by a factor 1 + 2**-6 (1.6%), as a driver's fast math might round it: no
crash, no NaN, replies that look like replies, figures that are wrong by about 1e-2.
"""

import os

DESCRIPTION = ("a faulty test build: the GPU program's MLP activation (silu(gate) * up, wgsl/silu.wgsl) is "
               "made 1.6% too large (a factor 1 + 2**-6), as a driver's fast math might")
ENV = "CHATLENS_GPU_FAULT"
# The epilogue's store (silu.wgsl's finish), and the same store scaled.
RIGHT = "H[t * (NV / 2u) + f] = silu(y[2u * j]) * y[2u * j + 1u];"
WRONG = "H[t * (NV / 2u) + f] = silu(y[2u * j]) * y[2u * j + 1u] * (1.0 + 1.0 / 64.0);"


def from_env() -> bool:
    """Whether CHATLENS_GPU_FAULT asks for the fault (a test's native run)."""
    return os.environ.get(ENV, "") not in ("", "0")


def perturb(program: dict) -> dict:
    """The program with the fault in every module that runs the silu epilogue (a copy; the
    modules keep their names, so pipelines and bind groups stand as they were)."""
    modules = []
    changed = 0
    for m in program["modules"]:
        if RIGHT in m["code"]:
            m = {**m, "code": m["code"].replace(RIGHT, WRONG)}
            changed += 1
        modules.append(m)
    if not changed:  # silu.wgsl changed: the fault must still be put somewhere, or the tests prove nothing
        raise RuntimeError("chatlens.gpu.fault: no module runs silu.wgsl's store; update RIGHT to its text")
    return {**program, "modules": modules, "meta": {**program["meta"], "fault": DESCRIPTION}}
