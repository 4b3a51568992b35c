"""The GPU program (chatlens.gpu) run natively through wgpu-py: the adapter, the executor, and
WebGPU backends over a model source or NumPy arrays. Host only: the browser runs the same
program with site/js/gpu/executor.mjs, and its wheel leaves this module out.

The executor only creates what the program lists and replays its sequences; what the dispatches
mean lives in chatlens/gpu/program.py.

    open_native(path, n_ctx) -> WebGPUBackend    a .gguf file or a Hugging Face folder, on wgpu
    best_adapter_info() -> dict | None           for `--backend auto` (chatlens.device's rule)
"""

import base64
import os
import re

from ..errors import ChatlensError, ModelFormatError
from ..gpu.backend import WebGPUBackend
from ..gpu.program import CHUNK, build_program
from ..gpu.weights import checked_plan, weight_plan

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # wgpu-native's Vulkan loader warns without one


def _wgpu():
    try:
        import wgpu
    except ImportError:
        raise ChatlensError("the WebGPU backend needs the `wgpu` package (pip install wgpu)") from None
    return wgpu


def request_adapter():
    """The best adapter wgpu finds, or None."""
    wgpu = _wgpu()
    try:
        return wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except Exception:  # no driver at all: wgpu raises rather than returning None
        return None


def _camel(name: str) -> str:
    return re.sub(r"-(\w)", lambda m: m.group(1).upper(), name)


def _kebab(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "-" + m.group(0).lower(), name)


def adapter_info(adapter) -> dict:
    """{name, features, limits} with WebGPU's camelCase limit names, as program.py wants them."""
    info = adapter.info
    name = info.get("device") or info.get("description") or info.get("vendor") or "adapter"
    return {"name": name, "features": sorted(adapter.features),
            "limits": {_camel(k): v for k, v in adapter.limits.items()}}


# Limits the kernels may need beyond WebGPU's defaults (program.py's `requires` names them).
USED_LIMITS = ("maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
               "maxStorageBuffersPerShaderStage", "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX")
_shared = {}
_pipelines = {}  # id(device) -> {(code, entry, bindings, constants): (pipeline, layout)}


def shared_device():
    """(device, adapter_info) made once per process, with every used limit at the adapter's
    value and subgroups when offered, so any program built for this adapter runs on it and
    compiled pipelines are reused between backends. None when there is no adapter."""
    if "device" not in _shared:
        adapter = request_adapter()
        if adapter is None:
            return None
        info = adapter_info(adapter)
        features = [f for f in ("subgroup", "subgroups") if f in info["features"]]
        limits = {_kebab(k): info["limits"][k] for k in USED_LIMITS if k in info["limits"]}
        _shared["device"] = (adapter.request_device_sync(required_features=features, required_limits=limits), info)
    return _shared["device"]


def check_device(info: dict, program: dict):
    need = program["requires"]
    missing = [f for f in need["features"] if f not in info["features"]]
    short = [k for k, v in need["limits"].items() if info["limits"].get(k, 0) < v]
    if missing or short:
        raise ChatlensError(f"the GPU adapter lacks {', '.join(missing + short)}, which this program needs")


def regroup(data: bytes, layout: dict | None) -> bytes:
    """One tensor's bytes in a fill's layout (builder.py): each `group` of `block`-byte blocks,
    the last padded with zero blocks, as field 0 of each block, then field 1 of each, ... Made
    as the tensor is uploaded: one tensor's copy at a time, never the whole model's."""
    if not layout:
        return data
    import numpy as np

    block, group = layout["block"], layout["group"]
    n = -(-len(data) // (block * group))
    blocks = np.zeros(n * group * block, np.uint8)
    blocks[:len(data)] = np.frombuffer(data, np.uint8)
    blocks = blocks.reshape(n, group, block)
    return np.concatenate([blocks[:, :, o:o + size].reshape(n, group * size) for o, size in layout["fields"]],
                          axis=1).tobytes()


class NativeExecutor:
    """run(sequences, params, readback) -> bytes: one compute pass, one submit, no allocation."""

    def __init__(self, device, program: dict, read_bytes, name: str = "wgpu"):
        """read_bytes(file, offset, nbytes) -> bytes of the model source (for the buffers' fills)."""
        wgpu = self.wgpu = _wgpu()
        self.device, self.name, self.program = device, name, program
        usage = {"storage": wgpu.BufferUsage.STORAGE, "copy_dst": wgpu.BufferUsage.COPY_DST,
                 "copy_src": wgpu.BufferUsage.COPY_SRC}
        self.buffers = {}
        for b in program["buffers"]:
            flags = 0
            for u in b["usage"]:
                flags |= usage[u]
            buf = self.buffers[b["name"]] = device.create_buffer(label=b["name"], size=b["size"], usage=flags)
            for fill in b.get("fill", ()):
                w = program["weights"][fill["weight"]]
                self._write(buf, fill["offset"], regroup(read_bytes(w["file"], w["offset"], w["nbytes"]), fill.get("layout")))
            if "data" in b:
                self._write(buf, 0, base64.b64decode(b["data"]))
        code = {m["name"]: m["code"] for m in program["modules"]}
        self.pipelines = {p["name"]: self._pipeline(code[p["module"]], p) for p in program["pipelines"]}
        self.bind_groups = {
            g["name"]: device.create_bind_group(layout=self.pipelines[g["pipeline"]][1], entries=[
                {"binding": i, "resource": {"buffer": self.buffers[name]}} for i, name in enumerate(g["buffers"])])
            for g in program["bind_groups"]}
        self.sequences = {name: [(self.pipelines[d["pipeline"]][0], self.bind_groups[d["bind_group"]], d["workgroups"])
                                 for d in seq] for name, seq in program["sequences"].items()}
        self.staging = {name: [] for name in program["readbacks"]}  # free staging buffers, per readback
        self.step = program["meta"].get("step_buffer")

    def _pipeline(self, code: str, p: dict):
        """(pipeline, bind group layout), compiled once per device: backends of one model share them."""
        wgpu, device = self.wgpu, self.device
        cache = _pipelines.setdefault(id(device), {})
        key = (code, p["entry"], tuple(p["bindings"]), tuple(sorted(p["constants"].items())))
        if key not in cache:
            layout = device.create_bind_group_layout(entries=[
                {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": t}}
                for i, t in enumerate(p["bindings"])])
            compute = {"module": device.create_shader_module(label=p["module"], code=code), "entry_point": p["entry"]}
            if p["constants"]:
                compute["constants"] = p["constants"]
            pipeline = device.create_compute_pipeline(
                label=p["name"], layout=device.create_pipeline_layout(bind_group_layouts=[layout]), compute=compute)
            cache[key] = (pipeline, layout)
        return cache[key]

    def _write(self, buf, offset, data):
        data = bytes(data)
        if len(data) % 4:  # writeBuffer moves whole words; the tail pads with zeros
            data += bytes(4 - len(data) % 4)
        self.device.queue.write_buffer(buf, offset, data)

    def write(self, buffer: str, data: bytes, offset: int = 0):
        """Write bytes into a named buffer (tests use this to set inputs)."""
        self._write(self.buffers[buffer], offset, data)

    def submit(self, sequences, params: bytes = b"", readback: str | None = None):
        """Write the step parameters, run the named sequences in one compute pass, copy one
        readback into a staging buffer of its own, and submit: the ticket `collect` waits on.
        Several can be in flight: the queue runs them in order, each reads back its own bytes."""
        if params:
            self._write(self.buffers[self.step], 0, params)
        encoder = self.device.create_command_encoder()
        dispatches = [d for name in sequences for d in self.sequences[name]]
        if dispatches:
            compute = encoder.begin_compute_pass()
            for pipeline, group, (x, y, z) in dispatches:
                compute.set_pipeline(pipeline)
                compute.set_bind_group(0, group)
                compute.dispatch_workgroups(x, y, z)
            compute.end()
        ticket = None
        if readback is not None:
            r = self.program["readbacks"][readback]
            free = self.staging[readback]
            # made once per step in flight, then reused: none in the token loop after the first steps
            staging = free.pop() if free else self.device.create_buffer(
                size=r["size"], usage=self.wgpu.BufferUsage.MAP_READ | self.wgpu.BufferUsage.COPY_DST)
            encoder.copy_buffer_to_buffer(self.buffers[r["buffer"]], r["offset"], staging, 0, r["size"])
            ticket = (readback, staging, r["size"])
        self.device.queue.submit([encoder.finish()])
        return ticket

    def collect(self, ticket) -> bytes:
        """The bytes a submitted run read back (b"" for none), once the GPU has written them."""
        if ticket is None:
            return b""
        readback, staging, size = ticket
        staging.map_sync(self.wgpu.MapMode.READ)
        try:
            return bytes(staging.read_mapped(0, size))
        finally:
            staging.unmap()
            self.staging[readback].append(staging)

    def run(self, sequences, params: bytes = b"", readback: str | None = None) -> bytes:
        """One step, waited for: submit, then collect."""
        return self.collect(self.submit(sequences, params, readback))


def best_adapter_info():
    """What wgpu's best adapter says of itself (wgpu-py's adapter.info: vendor, device,
    adapter_type, ...), or None when wgpu is missing or finds no adapter."""
    try:
        adapter = request_adapter()
    except Exception:
        return None
    return dict(adapter.info) if adapter is not None else None


def adapter_available() -> bool:
    """Whether wgpu is installed and finds a GPU adapter (a CPU one such as lavapipe counts)."""
    return best_adapter_info() is not None


def open_native(path, n_ctx: int | None = None, chunk: int | None = None, *, kv: str | None = None,
                gemm: str | None = None) -> WebGPUBackend:
    """A WebGPU backend over wgpu-py for a model source; its weights are read from the file's
    byte ranges and uploaded as they are stored. kv, gemm: program.build_program's (the KV
    cache's precision and the prefill GEMM; default the program's)."""
    from pathlib import Path

    path = Path(path)
    plan = weight_plan(path)
    root = path if path.is_dir() else path.parent
    return _open(plan, n_ctx or plan["config"]["n_ctx"], _file_reader(root), chunk, kv, gemm)


def open_arrays(cfg, weights: dict, n_ctx: int, dtype: str = "F32", chunk: int | None = None) -> WebGPUBackend:
    """A WebGPU backend over float32 NumPy arrays under Hugging Face names (tests, tiny models):
    uploaded as F32, or rounded to F16/BF16 first."""
    import numpy as np

    def to_bf16(a):  # round to nearest even, as torch does
        bits = a.view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")

    blobs, tensors = {}, {}
    for name, a in weights.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        raw = {"F32": a.astype("<f4"), "F16": a.astype("<f2"), "BF16": to_bf16(a)}[dtype].tobytes()
        blobs[name] = raw
        tensors[name] = {"file": name, "offset": 0, "nbytes": len(raw), "dtype": dtype, "shape": list(a.shape)}
    plan = checked_plan({"source": "arrays", "rope": "hf", "config": cfg.to_dict(), "tensors": tensors})
    return _open(plan, n_ctx, lambda file, offset, nbytes: blobs[file][offset:offset + nbytes], chunk)


def _file_reader(root):
    def read(file, offset, nbytes):
        with open(root / file, "rb") as f:
            f.seek(offset)
            data = f.read(nbytes)
        if len(data) != nbytes:
            raise ModelFormatError(f"{root / file}: {nbytes} bytes at {offset} lie past the end")
        return data
    return read


def _open(plan, n_ctx, read, chunk, kv=None, gemm=None):
    opened = shared_device()
    if opened is None:
        raise ChatlensError("no WebGPU adapter: wgpu found no GPU (install a Vulkan, Metal or D3D12 driver)")
    device, info = opened
    program = build_program(plan, n_ctx, info["features"], info["limits"], chunk or CHUNK, kv=kv, gemm=gemm)
    check_device(info, program)
    executor = NativeExecutor(device, program, read, info["name"])
    return WebGPUBackend(program, executor, name=f"webgpu: {info['name']}")
