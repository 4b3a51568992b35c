"""A GPU program as plain data: buffers, shader modules, pipelines, bind groups, and named
sequences of dispatches, plus the byte ranges a host may read back. JSON-serialisable, made
once per model and context size; the executors (chatlens/host/native_gpu.py, site/js/gpu/executor.mjs) only
create what it lists and replay its sequences.

The shape of `ProgramBuilder.to_dict()`:
    buffers:     [{name, size, usage: ["storage", "copy_dst", "copy_src"...],
                   fill?: [{weight: plan tensor name, offset: byte offset in the buffer,
                            layout?: {block, group, fields: [[offset, size], ...]}}],
                   data?: base64 bytes written at offset 0}]
    weights:     {plan tensor name: {file, offset, nbytes, dtype, shape}}  (byte ranges of the source)
    modules:     [{name, code}]
    pipelines:   [{name, module, entry, constants: {}, bindings: ["read-only-storage" | "storage", ...]}]
    bind_groups: [{name, pipeline, buffers: [buffer name per binding, whole buffers]}]
    sequences:   {name: [{pipeline, bind_group, workgroups: [x, y, z]}]}
    readbacks:   {name: {buffer, offset, size}}
    requires:    {features: [...], limits: {WebGPU limit name: value}}
    meta:        what the host-side code needs to drive it (see program.py)

A fill with a layout writes the tensor's bytes regrouped: they are blocks of `block` bytes,
and each `group` of blocks (the last padded with zero blocks) is written as field 0 of each of
its blocks, then field 1 of each, and so on (a field: [offset, size] in a block; the fields
cover the block). An executor does this one tensor at a time as it uploads it, knowing nothing
of what the blocks mean (native_gpu.regroup, executor.mjs's regroup).
"""

import base64
import hashlib

from .wgsl import module_code

ACCESS = {"read": "read-only-storage", "read_write": "storage"}
ALIGN = 16  # every buffer and fused segment is a whole number of vec4s


def align(n: int, to: int = ALIGN) -> int:
    return -(-n // to) * to


def _fill(weight: str, offset: int, layout: dict | None = None) -> dict:
    entry = {"weight": weight, "offset": offset}
    if layout:
        sizes = sorted((o, n) for o, n in layout["fields"])
        if [o for o, _ in sizes] != [sum(n for _, n in sizes[:i]) for i in range(len(sizes))] or \
                sum(n for _, n in sizes) != layout["block"]:
            raise ValueError(f"{weight}: a layout's fields must cover its {layout['block']}-byte block once")
        entry["layout"] = {"block": layout["block"], "group": layout["group"], "fields": [list(f) for f in layout["fields"]]}
    return entry


class ProgramBuilder:
    def __init__(self):
        self.buffers, self.weights, self.modules, self.pipelines = {}, {}, {}, {}
        self.bind_groups, self.sequences, self.readbacks = {}, {}, {}
        self.features, self.limits, self.meta = [], {}, {}

    def buffer(self, name: str, size: int, fill=None, data: bytes | None = None) -> str:
        if name in self.buffers:
            raise ValueError(f"buffer {name} defined twice")
        entry = {"name": name, "size": align(max(size, len(data or b""), 1)), "usage": ["storage", "copy_dst"]}
        if fill:
            entry["fill"] = [_fill(*f) for f in fill]
        if data is not None:
            entry["data"] = base64.b64encode(data).decode("ascii")
        self.buffers[name] = entry
        return name

    def weight(self, name: str, entry: dict):
        self.weights[name] = dict(entry)

    def kernel(self, sequence: str, label: str, bindings, consts: dict, files, workgroups,
               entry: str = "main", enable=()):
        """One dispatch appended to `sequence`. bindings: (WGSL name, WGSL type, access, buffer)."""
        code = module_code([(n, t, a) for n, t, a, _ in bindings], consts, files, enable)
        digest = hashlib.sha256(code.encode()).hexdigest()[:12]
        module = f"{label}-{digest}"
        self.modules.setdefault(module, {"name": module, "code": code})
        layout = [ACCESS[a] for _, _, a, _ in bindings]
        pipeline = f"{module}:{entry}"
        self.pipelines.setdefault(pipeline, {"name": pipeline, "module": module, "entry": entry,
                                             "constants": {}, "bindings": layout})
        buffers = [b for *_, b in bindings]
        for b in buffers:
            if b not in self.buffers:
                raise ValueError(f"{label}: no buffer named {b}")
        group = f"{pipeline}({','.join(buffers)})"
        self.bind_groups.setdefault(group, {"name": group, "pipeline": pipeline, "buffers": buffers})
        x, y, z = (list(workgroups) + [1, 1])[:3]
        self.sequences.setdefault(sequence, []).append(
            {"pipeline": pipeline, "bind_group": group, "workgroups": [x, y, z], "label": label})

    def readback(self, name: str, buffer: str, offset: int = 0, size: int | None = None):
        entry = self.buffers[buffer]
        if "copy_src" not in entry["usage"]:
            entry["usage"].append("copy_src")
        self.readbacks[name] = {"buffer": buffer, "offset": offset, "size": size or entry["size"]}

    def to_dict(self) -> dict:
        return {
            "format": "chatlens-gpu-program", "version": 1,
            "buffers": list(self.buffers.values()), "weights": self.weights,
            "modules": list(self.modules.values()), "pipelines": list(self.pipelines.values()),
            "bind_groups": list(self.bind_groups.values()), "sequences": self.sequences,
            "readbacks": self.readbacks, "requires": {"features": self.features, "limits": self.limits},
            "meta": self.meta,
        }
