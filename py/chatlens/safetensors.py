"""Read the safetensors format (F32, F16, BF16) with NumPy alone, no torch (the writer, which
only export uses, is chatlens.host.export).

Layout: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
shape and [begin, end) byte range within the data that follows, then the data.
"""

import json
import os
import struct

from .errors import ModelFormatError

_ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2}


def read_header(path) -> tuple[dict, int]:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        if size < 8:
            raise ModelFormatError(f"{path}: too short for a safetensors file")
        (n,) = struct.unpack("<Q", f.read(8))
        if n > size - 8:
            raise ModelFormatError(f"{path}: header of {n} bytes is longer than the file")
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise ModelFormatError(f"{path}: header is not JSON: {e}") from None
        except RecursionError:  # thousands of nested brackets: no real header nests deeper than two
            raise ModelFormatError(f"{path}: header is JSON nested too deeply") from None
    if not isinstance(header, dict):
        raise ModelFormatError(f"{path}: header must be a JSON object")
    data_size = size - 8 - n
    for name, t in header.items():
        if name == "__metadata__":
            continue
        _check_entry(path, name, t, data_size)
    return header, 8 + n


def _check_entry(path, name, t, data_size):
    def bad(what):
        raise ModelFormatError(f"{path}: tensor {name}: {what}")

    if not isinstance(t, dict):
        bad("entry is not an object")
    dtype, shape, offsets = t.get("dtype"), t.get("shape"), t.get("data_offsets")
    if dtype not in _ITEMSIZE:
        bad(f"unsupported dtype {dtype} (F32, F16, BF16 are)")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        bad(f"shape {shape!r} is not a list of sizes")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
        bad(f"data_offsets {offsets!r} is not a [begin, end] pair")
    begin, end = offsets
    if not 0 <= begin <= end <= data_size:
        bad("lies past the end of the file")
    count = 1
    for d in shape:
        count *= d
    if end - begin != count * _ITEMSIZE[dtype]:
        bad(f"has {end - begin} bytes but {dtype} {shape} needs {count * _ITEMSIZE[dtype]}")


def load(path) -> dict:
    """All tensors as float32 NumPy arrays."""
    import numpy as np

    header, start = read_header(path)
    out = {}
    with open(path, "rb") as f:
        for name, t in header.items():
            if name == "__metadata__":
                continue
            begin, end = t["data_offsets"]
            f.seek(start + begin)
            raw = f.read(end - begin)
            if t["dtype"] == "F32":
                a = np.frombuffer(raw, dtype="<f4").copy()
            elif t["dtype"] == "F16":
                a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
            else:
                a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            out[name] = a.reshape(t["shape"])
    return out
