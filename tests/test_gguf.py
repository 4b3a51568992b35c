"""The GGUF reader against the `gguf` package: metadata, every tensor type, malformed files."""

import struct

import gguf
import numpy as np
import pytest

from chatlens.errors import ModelFormatError
from chatlens.gguf import GGUFFile, hf_state_dict, read_metadata, unpermute_qk

Q = gguf.GGMLQuantizationType


def test_real_file_metadata(gguf_path):
    meta = read_metadata(gguf_path)
    reference = gguf.GGUFReader(gguf_path)
    assert set(meta) == set(reference.fields) - {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"}
    assert meta["llama.block_count"] == 30
    assert meta["tokenizer.ggml.pre"] == "smollm"
    tokens = reference.fields["tokenizer.ggml.tokens"]
    assert meta["tokenizer.ggml.tokens"] == [bytes(tokens.parts[i]).decode() for i in tokens.data]
    merges = reference.fields["tokenizer.ggml.merges"]
    assert meta["tokenizer.ggml.merges"] == [bytes(merges.parts[i]).decode() for i in merges.data]
    assert meta["tokenizer.ggml.token_type"] == [int(reference.fields["tokenizer.ggml.token_type"].parts[i][0])
                                                 for i in reference.fields["tokenizer.ggml.token_type"].data]


def test_real_file_every_tensor_matches_gguf_dequantize(gguf_path):
    ours = GGUFFile(gguf_path)
    reference = gguf.GGUFReader(gguf_path)
    assert len(ours.tensors) == len(reference.tensors) == 272
    types = set()
    for t in reference.tensors:
        expected = gguf.quants.dequantize(t.data, t.tensor_type)
        got = ours.tensor(t.name)
        assert got.dtype == np.float32
        assert got.shape == tuple(int(d) for d in reversed(t.shape))
        np.testing.assert_array_equal(got, expected.reshape(got.shape), err_msg=t.name)
        types.add(t.tensor_type.name)
    assert types == {"Q4_1", "Q8_0", "F32"}


def test_hf_layout_matches_transformers_gguf_loader(gguf_path):
    """transformers' own GGUF loader undoes llama.cpp's Q/K permutation; our layout must equal it."""
    import torch
    from transformers import AutoModelForCausalLM

    ref = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    expected = ref.state_dict()
    ours = hf_state_dict(GGUFFile(gguf_path), 9, 3)
    for name, value in ours.items():
        np.testing.assert_array_equal(value, expected[name].numpy(), err_msg=name)
    assert set(ours) == set(expected) - {"lm_head.weight"}  # the output layer is tied


def test_unpermute_inverts_llama_cpp_permute():
    # llama.cpp's convert_hf_to_gguf.py permute(), written out here as the reference.
    def permute(w, n_head):
        return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    w = np.arange(4 * 8 * 3, dtype=np.float32).reshape(4 * 8, 3)
    np.testing.assert_array_equal(unpermute_qk(permute(w, 4), 4), w)


def write_gguf(path, tensors, metadata=(), version=3):
    writer = gguf.GGUFWriter(path, "llama")
    for key, value in metadata:
        writer.add_string(key, value)
    for name, (array, qtype) in tensors.items():
        if qtype in (Q.F32, Q.F16):
            writer.add_tensor(name, array.astype(np.float32 if qtype == Q.F32 else np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    if version != 3:
        with open(path, "r+b") as f:
            f.seek(4)
            f.write(struct.pack("<I", version))
    return path


@pytest.mark.parametrize("qtype", [Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1])
@pytest.mark.parametrize("version", [2, 3])
def test_small_file_each_type(tmp_path, qtype, version):
    rng = np.random.default_rng(int(qtype) * 10 + version)
    arrays = {"a.weight": rng.standard_normal((6, 64)).astype(np.float32) * 3,
              "b.weight": rng.standard_normal((2, 3, 32)).astype(np.float32)}
    path = write_gguf(tmp_path / "t.gguf", {k: (v, qtype) for k, v in arrays.items()}, version=version)
    ours, reference = GGUFFile(path), gguf.GGUFReader(path)
    assert ours.version == version
    for t in reference.tensors:
        expected = gguf.quants.dequantize(t.data, t.tensor_type).reshape(arrays[t.name].shape)
        np.testing.assert_array_equal(ours.tensor(t.name), expected)
        # and the quantization round trip is close to the input, so the test is not vacuous
        assert np.abs(ours.tensor(t.name) - arrays[t.name]).max() <= np.abs(arrays[t.name]).max() / 8


def test_every_metadata_value_type(tmp_path):
    V = gguf.GGUFValueType
    values = [
        ("u8", (200, V.UINT8)), ("i8", (-100, V.INT8)), ("u16", (60000, V.UINT16)), ("i16", (-30000, V.INT16)),
        ("u32", (4_000_000_000, V.UINT32)), ("i32", (-2_000_000_000, V.INT32)), ("f32", (0.5, V.FLOAT32)),
        ("bool", (True, V.BOOL)), ("str", ("héllo ✓", V.STRING)), ("u64", (2**63 + 5, V.UINT64)),
        ("i64", (-(2**62), V.INT64)), ("f64", (1e-300, V.FLOAT64)),
        ("arr_i32", ([1, -2, 3], V.ARRAY, V.INT32)), ("arr_str", (["a", "ß", ""], V.ARRAY, V.STRING)),
        ("nested", ([[1, 2], [3]], V.ARRAY, V.ARRAY)), ("arr_bool", ([True, False], V.ARRAY, V.BOOL)),
    ]
    writer = gguf.GGUFWriter(tmp_path / "m.gguf", "llama")
    for key, (value, *types) in values:
        writer.add_key_value(key, value, *types)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    meta = read_metadata(tmp_path / "m.gguf")
    for key, (value, *_) in values:
        assert meta[key] == value, key


def test_hostile_nesting_and_alignment(tmp_path):
    V = gguf.GGUFValueType
    deep = 1
    for _ in range(40):
        deep = [deep]
    writer = gguf.GGUFWriter(tmp_path / "deep.gguf", "llama")
    writer.add_key_value("deep", deep, V.ARRAY)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with pytest.raises(ModelFormatError, match="nested more than"):
        GGUFFile(tmp_path / "deep.gguf")

    writer = gguf.GGUFWriter(tmp_path / "align.gguf", "llama")
    writer.add_uint32("general.alignment", 24)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with pytest.raises(ModelFormatError, match="power of two"):
        GGUFFile(tmp_path / "align.gguf")


def good_file(tmp_path):
    rng = np.random.default_rng(0)
    return write_gguf(tmp_path / "good.gguf", {"a.weight": (rng.standard_normal((4, 64)).astype(np.float32), Q.Q4_1)},
                      metadata=[("general.name", "tiny")])


def corrupt(path, offset, data):
    raw = bytearray(path.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))
    return path


def tensor_info_offset(path):
    """Byte offset of the first tensor info record (after the header and metadata)."""
    raw = path.read_bytes()
    return raw.index(b"a.weight") - 8


@pytest.mark.parametrize("case, message", [
    ("magic", "bad magic"),
    ("version", "version 7"),
    ("truncated", "past the end"),
    ("tensor_count", "tensor count"),
    ("metadata_count", "metadata count"),
    ("string_length", "length of"),
    ("value_type", "unknown metadata value type"),
    ("ggml_type", "unsupported GGML type"),
    ("offset", "past the end"),
    ("dims", "dimensions"),
    ("row", "not a multiple"),
    ("empty", "bad magic"),
])
def test_malformed_files_raise_clear_errors(tmp_path, case, message):
    path = good_file(tmp_path)
    info = tensor_info_offset(path)  # name length (8) | name | n_dims (4) | dims (8 each) | type (4) | offset (8)
    after_name = info + 8 + len("a.weight")
    if case == "magic":
        corrupt(path, 0, b"GGML")
    elif case == "version":
        corrupt(path, 4, struct.pack("<I", 7))
    elif case == "truncated":
        path.write_bytes(path.read_bytes()[:-10])
    elif case == "tensor_count":
        corrupt(path, 8, struct.pack("<Q", 2**60))
    elif case == "metadata_count":
        corrupt(path, 16, struct.pack("<Q", 2**50))
    elif case == "string_length":
        corrupt(path, 24, struct.pack("<Q", 2**40))  # first key's length
    elif case == "value_type":
        key_len = struct.unpack("<Q", path.read_bytes()[24:32])[0]
        corrupt(path, 32 + key_len, struct.pack("<I", 99))
    elif case == "ggml_type":
        corrupt(path, after_name + 4 + 16, struct.pack("<I", 123))
    elif case == "offset":
        corrupt(path, after_name + 4 + 16 + 4, struct.pack("<Q", 2**40))
    elif case == "dims":
        corrupt(path, after_name, struct.pack("<I", 9))
    elif case == "row":
        corrupt(path, after_name + 4, struct.pack("<Q", 63))
    elif case == "empty":
        path.write_bytes(b"")
    with pytest.raises(ModelFormatError, match=message):
        GGUFFile(path)
