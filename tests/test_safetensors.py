"""Our safetensors reader and writer against the `safetensors` package."""

import json
import struct

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file as np_save
from safetensors.torch import load_file as torch_load, save_file as torch_save

from chatlens import safetensors as st
from chatlens.host.export import save_safetensors
from chatlens.errors import ModelFormatError


def sample():
    rng = np.random.default_rng(1)
    return {"a": rng.standard_normal((3, 5)).astype(np.float32), "b.c": rng.standard_normal(7).astype(np.float32) * 100,
            "scalar_row": np.array([[1e-8, -0.0, 65504.0]], dtype=np.float32)}


@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16"])
def test_read_files_written_by_safetensors(tmp_path, dtype):
    tensors = {k: torch.from_numpy(v).to({"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dtype])
               for k, v in sample().items()}
    torch_save(tensors, tmp_path / "m.safetensors")
    ours = st.load(tmp_path / "m.safetensors")
    for name, t in tensors.items():
        assert ours[name].dtype == np.float32
        np.testing.assert_array_equal(ours[name], t.float().numpy())


@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16"])
def test_files_we_write_load_in_safetensors(tmp_path, dtype):
    data = sample()
    save_safetensors(data, tmp_path / "m.safetensors", dtype=dtype, metadata={"format": "pt"})
    loaded = torch_load(tmp_path / "m.safetensors")
    torch_dtype = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dtype]
    for name, a in data.items():
        assert loaded[name].dtype == torch_dtype
        # our float32 -> bf16/f16 rounding must be torch's (round to nearest even)
        np.testing.assert_array_equal(loaded[name].float().numpy(), torch.from_numpy(a).to(torch_dtype).float().numpy())


def test_numpy_written_file(tmp_path):
    np_save(sample(), tmp_path / "n.safetensors")
    for name, a in sample().items():
        np.testing.assert_array_equal(st.load(tmp_path / "n.safetensors")[name], a)


def write_raw(path, header, data=b""):
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + data)
    return path


@pytest.mark.parametrize("header, data, message", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "past the end"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "needs 12"),
    ({"a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8, "unsupported dtype"),
    ([1, 2, 3], b"", "JSON object"),
    ({"a": [1, 2]}, b"", "not an object"),
    ({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, b"\0" * 4, "not a list of sizes"),
    ({"a": {"dtype": "F32", "shape": [-1, -1], "data_offsets": [0, 4]}}, b"\0" * 4, "not a list of sizes"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}}, b"\0" * 4, "begin, end"),
])
def test_malformed(tmp_path, header, data, message):
    with pytest.raises(ModelFormatError, match=message):
        st.load(write_raw(tmp_path / "bad.safetensors", header, data))


def test_header_longer_than_file(tmp_path):
    (tmp_path / "bad.safetensors").write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(ModelFormatError, match="longer than the file"):
        st.load(tmp_path / "bad.safetensors")
