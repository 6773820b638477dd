"""nmkit.SparseLinear in every format and dtype against float64 numpy (integer paths from the design's
quantization rules), kernel names and streamed bytes, torch in and out."""
import numpy as np
import pytest

import nmkit
from independent_slide import quantize_reference

EPS32 = np.finfo(np.float32).eps
SEED = 11


def data(rows, K, M, pattern=None):
    rng = np.random.default_rng(SEED)
    w = rng.standard_normal((rows, K)).astype(np.float32)
    if pattern:
        w = nmkit.prune(w, pattern).weight
    return w, rng.standard_normal((M, K)).astype(np.float32)


def bf16(a):
    """Round to bfloat16 (nearest even) and back to float32."""
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def check_float(y, x, w):
    """f32 sums of exact products: |error| <= K * eps * (|x| |w|^T), c = 1 per accumulation step."""
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    bound = x.shape[1] * EPS32 * (np.abs(x).astype(np.float64) @ np.abs(w).T.astype(np.float64))
    assert y.dtype == np.float32 and np.abs(y) .sum() > 0
    assert np.all(np.abs(y - want) <= bound + 1e-30)


def int8_expected(x, w):
    """docs/design.md 6: per-token and per-row int8 codes, int32 sums, scaled (float64 here)."""
    qx, sx = quantize_reference(x, "int8")
    qw, sw = quantize_reference(w, "int8")
    sums = qx.view(np.int8).astype(np.int64) @ qw.view(np.int8).astype(np.int64).T
    return sums * sx.astype(np.float64)[:, None] * sw.astype(np.float64)[None, :]


@pytest.mark.parametrize("M", [1, 3, 17])
@pytest.mark.parametrize("fmt,pattern", [("dense", None), ("sparse24", "2:4"), ("nm", "6:8")])
def test_float_formats(M, fmt, pattern):
    w, x = data(20, 100, M, pattern)
    lin = nmkit.SparseLinear(w, format=fmt, pattern=pattern if fmt == "nm" else None)
    assert lin.rows == 20 and lin.K == 100 and lin.format == fmt and lin.dtype == "f32"
    check_float(lin(x), x, w)


@pytest.mark.parametrize("fmt,pattern", [("dense", None), ("sparse24", "2:4")])
def test_bf16_rounds_weights_and_activations(fmt, pattern):
    w, x = data(16, 64, 5, pattern)
    lin = nmkit.SparseLinear(w, format=fmt, dtype="bf16")
    check_float(lin(x), bf16(x), bf16(w))


@pytest.mark.parametrize("fmt,pattern", [("dense", None), ("sparse24", "2:4"), ("slid", "6:8")])
def test_int8_formats(fmt, pattern):
    w, x = data(24, 72, 4, pattern)
    lin = nmkit.SparseLinear(w, format=fmt, dtype="int8", pattern=pattern)
    assert lin.dtype == "int8"
    want = int8_expected(x, w)
    y = lin(x)
    np.testing.assert_allclose(y, want, rtol=4 * EPS32, atol=4 * EPS32 * np.abs(want).max())


def test_bias_input_dtypes_and_metadata():
    w, x = data(8, 32, 2, "2:4")
    bias = np.arange(8, dtype=np.float32)
    lin = nmkit.SparseLinear(w, format="sparse24", bias=bias)
    check_float(lin(x) - bias, x, w)
    check_float(lin(x.astype(np.float16)) - bias, x.astype(np.float16).astype(np.float32), w)
    assert "sparse24" in lin.kernel_name(1) and lin.tier in lin.kernel_name(1)
    w, _ = data(64, 512, 1, "2:4")  # wide enough that padding does not decide the bytes
    lin, dense = nmkit.SparseLinear(w, format="sparse24"), nmkit.SparseLinear(w)
    assert lin.bytes_streamed(1) < dense.bytes_streamed(1) and lin.byte_ratio(1) > 1.5 and lin.mac_ratio() == 2


def test_slid_needs_int8():
    w, _ = data(8, 32, 1, "6:8")
    with pytest.raises(nmkit.InvalidArgumentError):
        nmkit.SparseLinear(w, format="slid", dtype="f32", pattern="6:8")


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    w, x = data(16, 64, 3, "2:4")
    lin = nmkit.SparseLinear(torch.from_numpy(w), format="sparse24")
    xt = torch.from_numpy(x)
    y = lin(xt)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    check_float(y.numpy(), x, w)
    xb = xt.to(torch.bfloat16)
    assert nmkit._nmkit._address_of(xb) == xb.data_ptr()  # bfloat16 read in place through DLPack
    check_float(lin(xb).numpy(), bf16(x), w)
    wb = torch.from_numpy(w).to(torch.bfloat16).requires_grad_()
    r = nmkit.prune(wb, "2:4")
    assert isinstance(r.weight, torch.Tensor) and r.weight.dtype == torch.bfloat16
    codes, scales = nmkit.quantize(xt, "e4m3")
    assert codes.dtype == torch.float8_e4m3fn and isinstance(scales, torch.Tensor)
