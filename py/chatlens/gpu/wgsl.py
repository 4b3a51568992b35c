"""WGSL sources (package data in chatlens/gpu/wgsl/) and how a shader module is assembled:
its storage bindings, its constants, then the files it is made of.

Pure Python: Pyodide reads the same files from the installed wheel.
"""

import struct
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def source(name: str) -> str:
    """The text of wgsl/<name>.wgsl."""
    return resources.files(__package__).joinpath("wgsl", f"{name}.wgsl").read_text(encoding="utf-8")


def f32(x: float) -> float:
    """x rounded to float32, as NumPy's float32 arithmetic would hold it."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def literal(value) -> tuple[str, str]:
    """(WGSL type, literal) of a Python constant: bool, int (u32) or float (f32)."""
    if isinstance(value, bool):
        return "bool", "true" if value else "false"
    if isinstance(value, int):
        if not 0 <= value < 2**32:
            raise ValueError(f"constant {value} does not fit a u32")
        return "u32", f"{value}u"
    return "f32", repr(f32(value))  # the exact float32 value, so the shader rounds nothing


def module_code(bindings, consts: dict, files, enable=()) -> str:
    """bindings: (WGSL name, type, access) in binding order; consts: name -> value; files: names."""
    lines = [f"enable {e};" for e in enable]
    for i, (name, wtype, access) in enumerate(bindings):
        lines.append(f"@group(0) @binding({i}) var<storage, {access}> {name}: {wtype};")
    for name, value in consts.items():
        wtype, text = literal(value)
        lines.append(f"const {name}: {wtype} = {text};")
    return "\n".join(lines) + "\n\n" + "\n".join(source(f) for f in files)


def pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p
