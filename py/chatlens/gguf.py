"""Read GGUF files (versions 2 and 3): metadata as plain Python values, tensors as float32 NumPy.

The header is parsed with `struct` only, so the tokenizer and chat template can be read in a
browser before NumPy is there. Every count, length and offset is checked against the bytes
that remain before anything is allocated for it, so a malformed file fails with
ModelFormatError instead of a MemoryError or a silent short read.
"""

import io
import os
import struct
from dataclasses import dataclass

from .errors import ModelFormatError

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NESTING = 16  # arrays of arrays: real files nest once or twice; a deeper file is hostile

# Metadata value types: struct format, or None for the variable-length ones.
_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGMLType:
    name: str
    block_size: int  # elements per block
    block_bytes: int  # bytes per block


GGML_TYPES = {
    0: GGMLType("F32", 1, 4),
    1: GGMLType("F16", 1, 2),
    2: GGMLType("Q4_0", 32, 18),
    3: GGMLType("Q4_1", 32, 20),
    6: GGMLType("Q5_0", 32, 22),
    7: GGMLType("Q5_1", 32, 24),
    8: GGMLType("Q8_0", 32, 34),
    30: GGMLType("BF16", 1, 2),
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple  # NumPy order: outermost first (GGUF stores innermost first)
    type: GGMLType
    offset: int  # absolute file offset of the data
    nbytes: int


class _Cursor:
    """Sequential reads from a file, bounded by its size."""

    def __init__(self, f, size: int, path: str):
        self.f, self.size, self.path, self.pos = f, size, path, 0

    def fail(self, what: str):
        raise ModelFormatError(f"{self.path}: {what} (at byte {self.pos} of {self.size})")

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.size:
            self.fail(f"{what} needs {n} bytes but the file ends first")
        data = self.f.read(n)
        if len(data) != n:
            self.fail(f"short read in {what}")
        self.pos += n
        return data

    def scalar(self, fmt: str, what: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def count(self, fmt: str, what: str, min_item_bytes: int) -> int:
        n = self.scalar(fmt, what)
        # A count the remaining bytes cannot possibly hold is rejected before we loop or allocate.
        if n * min_item_bytes > self.size - self.pos:
            self.fail(f"{what} of {n} is larger than the rest of the file")
        return n

    def string(self, what: str) -> str:
        n = self.count("<Q", f"length of {what}", 1)
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            self.fail(f"{what} is not UTF-8: {e}")

    def value(self, vtype: int, what: str, depth: int = 0):
        if depth > MAX_NESTING:
            self.fail(f"{what}: arrays nested more than {MAX_NESTING} deep")
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype], what)
        if vtype == _STRING:
            return self.string(what)
        if vtype == _ARRAY:
            etype = self.scalar("<I", f"element type of {what}")
            if etype not in _SCALARS and etype not in (_STRING, _ARRAY):
                self.fail(f"{what}: unknown array element type {etype}")
            min_bytes = struct.calcsize(_SCALARS[etype]) if etype in _SCALARS else 8 if etype == _STRING else 12
            n = self.count("<Q", f"length of {what}", min_bytes)
            if etype in _SCALARS:
                fmt = _SCALARS[etype]
                raw = self.take(n * struct.calcsize(fmt), what)
                return list(struct.unpack(f"<{n}{fmt[1:]}", raw))
            return [self.value(etype, f"{what}[{i}]", depth + 1) for i in range(n)]
        self.fail(f"{what}: unknown metadata value type {vtype}")


class GGUFFile:
    """A parsed GGUF header: `metadata` (dict), `tensors` (name -> TensorInfo), `version`."""

    def __init__(self, path):
        self.path = str(path)
        size = os.path.getsize(self.path)
        # a large read buffer for the real header (megabytes of vocabulary), none bigger than the file
        with open(self.path, "rb", buffering=min(1 << 20, max(size, io.DEFAULT_BUFFER_SIZE))) as f:
            self._parse(_Cursor(f, size, self.path))

    def _parse(self, c: _Cursor):
        if c.size < 8 or c.take(4, "magic") != MAGIC:
            raise ModelFormatError(f"{self.path}: not a GGUF file (bad magic)")
        self.version = c.scalar("<I", "version")
        if self.version not in (2, 3):
            c.fail(f"GGUF version {self.version} is not supported (2 and 3 are)")
        n_tensors = c.count("<Q", "tensor count", 8 + 4 + 4 + 8)
        n_kv = c.count("<Q", "metadata count", 8 + 4)
        self.metadata = {}
        for i in range(n_kv):
            key = c.string(f"metadata key {i}")
            self.metadata[key] = c.value(c.scalar("<I", f"type of {key}"), key)

        infos = []
        for i in range(n_tensors):
            name = c.string(f"name of tensor {i}")
            n_dims = c.scalar("<I", f"dimension count of {name}")
            if not 1 <= n_dims <= MAX_DIMS:
                c.fail(f"tensor {name} has {n_dims} dimensions")
            dims = struct.unpack(f"<{n_dims}Q", c.take(8 * n_dims, f"shape of {name}"))
            type_id = c.scalar("<I", f"type of {name}")
            if type_id not in GGML_TYPES:
                c.fail(f"tensor {name} has unsupported GGML type {type_id}")
            offset = c.scalar("<Q", f"offset of {name}")
            infos.append((name, tuple(reversed(dims)), GGML_TYPES[type_id], offset))

        alignment = self.metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            c.fail(f"general.alignment {alignment!r} is not a power of two")
        data_start = -(-c.pos // alignment) * alignment
        self.tensors = {}
        for name, shape, gtype, offset in infos:
            n = 1
            for d in shape:
                n *= d
            if shape[-1] % gtype.block_size:
                c.fail(f"tensor {name}: row length {shape[-1]} is not a multiple of {gtype.name}'s block of {gtype.block_size}")
            nbytes = n // gtype.block_size * gtype.block_bytes
            start = data_start + offset
            if offset % alignment or start + nbytes > c.size:
                c.fail(f"tensor {name} ({gtype.name} {list(shape)}, {nbytes} bytes at offset {offset}) lies past the end of the file")
            if name in self.tensors:
                c.fail(f"tensor {name} appears twice")
            self.tensors[name] = TensorInfo(name, shape, gtype, start, nbytes)

    def raw(self, name: str) -> bytes:
        info = self.tensors[name]
        with open(self.path, "rb") as f:
            f.seek(info.offset)
            data = f.read(info.nbytes)
        if len(data) != info.nbytes:
            raise ModelFormatError(f"{self.path}: tensor {name} is truncated")
        return data

    def tensor(self, name: str):
        """The tensor dequantized to float32, in GGUF's own layout (NumPy order of its shape)."""
        from .quants import dequantize  # NumPy: only when weights are wanted

        info = self.tensors[name]
        return dequantize(self.raw(name), info.type, info.shape)


def read_metadata(path) -> dict:
    """Only the metadata: what the tokenizer, the template and the config need."""
    return GGUFFile(path).metadata


def unpermute_qk(w, n_heads: int):
    """Undo llama.cpp's row permutation of Q/K projections (its RoPE pairs adjacent dims; HF's
    pairs dim i with i + head_dim/2)."""
    rows = w.shape[0]
    return w.reshape(n_heads, rows // n_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# GGUF tensor names -> Hugging Face Llama names ("{i}" is the layer).
HF_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{i}.attn_norm.weight": "model.layers.{i}.input_layernorm.weight",
    "blk.{i}.attn_q.weight": "model.layers.{i}.self_attn.q_proj.weight",
    "blk.{i}.attn_k.weight": "model.layers.{i}.self_attn.k_proj.weight",
    "blk.{i}.attn_v.weight": "model.layers.{i}.self_attn.v_proj.weight",
    "blk.{i}.attn_output.weight": "model.layers.{i}.self_attn.o_proj.weight",
    "blk.{i}.ffn_norm.weight": "model.layers.{i}.post_attention_layernorm.weight",
    "blk.{i}.ffn_gate.weight": "model.layers.{i}.mlp.gate_proj.weight",
    "blk.{i}.ffn_up.weight": "model.layers.{i}.mlp.up_proj.weight",
    "blk.{i}.ffn_down.weight": "model.layers.{i}.mlp.down_proj.weight",
}


def hf_name(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] == "blk" and len(parts) > 2 and parts[1].isdigit():
        key = HF_NAMES.get(".".join(["blk", "{i}", *parts[2:]]))
        return key.format(i=parts[1]) if key else None
    return HF_NAMES.get(name)


def hf_tensors(gguf: GGUFFile, n_heads: int, n_kv_heads: int):
    """(Hugging Face name, float32 array in Hugging Face's layout) for each tensor, one at a time."""
    for name in gguf.tensors:
        target = hf_name(name)
        if target is None:
            raise ModelFormatError(f"{gguf.path}: tensor {name} has no place in a Llama model")
        w = gguf.tensor(name)
        if name.endswith("attn_q.weight"):
            w = unpermute_qk(w, n_heads)
        elif name.endswith("attn_k.weight"):
            w = unpermute_qk(w, n_kv_heads)
        yield target, w


def hf_state_dict(gguf: GGUFFile, n_heads: int, n_kv_heads: int) -> dict:
    return dict(hf_tensors(gguf, n_heads, n_kv_heads))
