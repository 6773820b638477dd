"""safetensors through Python: written atomically, read back as read-only views of one mapping; the
rows of inspect equal `nmkit inspect --json`'s."""
import json
import os
import struct

import numpy as np
import pytest

import nmkit
from conftest import run_cli


def header_of(path):
    """The JSON header, read independently of nmkit."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def tensors():
    rng = np.random.default_rng(5)
    return {"w": rng.standard_normal((6, 8)).astype(np.float32), "h": np.arange(10, dtype=np.float16),
            "i": np.arange(-4, 4, dtype=np.int8).reshape(2, 4), "flags": np.array([True, False])}


def test_save_then_load_views_the_mapping(tmp_path):
    path = tmp_path / "t.safetensors"
    nmkit.save_safetensors(path, tensors(), {"note": "from python"})
    header = header_of(path)
    assert header.pop("__metadata__") == {"note": "from python"} and list(header) == list(tensors())
    loaded = nmkit.load_safetensors(str(path))
    assert list(loaded) == list(tensors())
    for name, want in tensors().items():
        got = loaded[name]
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert not got.flags.writeable
        with pytest.raises(ValueError):
            got.flat[0] = got.flat[0]
    # Views of one mapping: each array lies at its data offset from the first one, as in the header.
    base = loaded["w"].ctypes.data - header["w"]["data_offsets"][0]
    for name in loaded:
        assert loaded[name].ctypes.data == base + header[name]["data_offsets"][0]
    assert os.listdir(tmp_path) == ["t.safetensors"]


def test_views_outlive_the_dict(tmp_path):
    path = tmp_path / "t.safetensors"
    nmkit.save_safetensors(path, {"w": np.ones((3, 3), np.float32)})
    w = nmkit.load_safetensors(path)["w"]
    assert w.sum() == 9


def test_bf16_from_torch(tmp_path):
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3).to(torch.bfloat16)
    path = tmp_path / "b.safetensors"
    nmkit.save_safetensors(path, {"t": t})
    bits = nmkit.load_safetensors(path)["t"]
    assert bits.dtype == np.uint16
    assert torch.equal(torch.from_numpy(bits.copy()).view(torch.bfloat16), t)


def test_inspect_equals_cli(tmp_path, cli):
    w = nmkit.prune(np.random.default_rng(2).standard_normal((8, 16)).astype(np.float32), "2:4").weight
    path = tmp_path / "c.safetensors"
    nmkit.save_safetensors(path, {"pruned": w, "dense": np.ones((4, 8), np.float32), "bias": np.ones(3, np.int8)})
    rows = nmkit.inspect(path)
    assert rows == json.loads(run_cli(cli, "inspect", path, "--json"))["tensors"]
    assert [r["sparsest_pattern"] for r in rows] == ["2:4", None, None]


def test_inspect_gguf(tiny_model, cli):
    assert nmkit.inspect(tiny_model) == json.loads(run_cli(cli, "inspect", tiny_model, "--json"))["tensors"]
