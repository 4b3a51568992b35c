"""Dequantize GGML tensor data to float32 NumPy arrays.

Each block format follows ggml's reference C code; the arithmetic is written in the same
order as the `gguf` package's NumPy dequantizer, so the results are bit-identical.
"""

import numpy as np


def _blocks(data: bytes, gtype):
    return np.frombuffer(data, dtype=np.uint8).reshape(-1, gtype.block_bytes)


def _f16(blocks, start):
    return blocks[:, start:start + 2].copy().view(np.float16).astype(np.float32)


def _nibbles(qs):
    """Low nibbles are elements 0..15 of a block, high nibbles 16..31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def _high_bits(blocks, start, n):
    qh = blocks[:, start:start + 4].copy().view("<u4")
    return ((qh >> np.arange(n, dtype=np.uint32)) & 1).astype(np.uint8)


def _q4_0(b):
    d = _f16(b, 0)
    q = _nibbles(b[:, 2:]).astype(np.int8) - np.int8(8)
    return d * q.astype(np.float32)


def _q4_1(b):
    d, m = _f16(b, 0), _f16(b, 2)
    return d * _nibbles(b[:, 4:]).astype(np.float32) + m


def _q5_0(b):
    d = _f16(b, 0)
    q = (_nibbles(b[:, 6:]) | (_high_bits(b, 2, 32) << 4)).astype(np.int8) - np.int8(16)
    return d * q.astype(np.float32)


def _q5_1(b):
    d, m = _f16(b, 0), _f16(b, 2)
    q = _nibbles(b[:, 8:]) | (_high_bits(b, 4, 32) << 4)
    return d * q.astype(np.float32) + m


def _q8_0(b):
    d = _f16(b, 0)
    return d * b[:, 2:].copy().view(np.int8).astype(np.float32)


_BLOCK_FORMATS = {"Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q8_0": _q8_0}


def dequantize(data: bytes, gtype, shape):
    """Raw tensor bytes of a GGMLType -> float32 array of `shape`."""
    if gtype.name == "F32":
        out = np.frombuffer(data, dtype="<f4").copy()
    elif gtype.name == "F16":
        out = np.frombuffer(data, dtype="<f2").astype(np.float32)
    elif gtype.name == "BF16":
        out = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        out = _BLOCK_FORMATS[gtype.name](_blocks(data, gtype))
    return out.reshape(shape).astype(np.float32, copy=False)
