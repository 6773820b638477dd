"""nmkit.CudaSparseLinear (the module nmkit._cuda, docs/design.md 14 and 15).

The oracle is docs/design.md 6 in numpy float32 (tests/slide_cli/independent_slide.py's quantizer,
int64 sums, then the scale kernel's two f32 roundings), and it is first checked bit for bit against
nmkit.SparseLinear's int8 on the CPU, so that a GPU result equal to it equals the CPU's. The GPU
tests need torch with CUDA and a GPU of sm_80 or later, and skip elsewhere (CI); scripts/gpu_check.sh
runs them on a lent GPU machine, where nmkit._cuda is built on its own (no nmkit._nmkit there).
"""
import numpy as np
import pytest

from independent_prune import keep_mask
from independent_slide import quantize_reference

cuda_module = pytest.importorskip("nmkit._cuda", reason="built without NMKIT_CUDA")
from nmkit._errors import Error  # noqa: E402 (after the skip)

SEED = 27


def oracle(x, w, bias=None):
    """INT8 per token and per row, exact int32 sums, y = float(sum) * (scale_x * scale_w) (+ bias) in f32."""
    qx, sx = quantize_reference(x, "int8")
    qw, sw = quantize_reference(w, "int8")
    sums = qx.view(np.int8).astype(np.int64) @ qw.view(np.int8).astype(np.int64).T
    y = sums.astype(np.float32) * (sx[:, None] * sw[None, :])
    return y if bias is None else y + bias.astype(np.float32)


def weight(rows, K, fmt, rng):
    """A random weight that complies with the format's pattern (magnitude, by the independent pruner)."""
    w = rng.standard_normal((rows, K)).astype(np.float32)
    keep, group = {"dense": (1, 1), "sparse24": (2, 4), "slid": (6, 8)}[fmt]
    return w if keep == group else np.where(keep_mask(w, keep, group, "magnitude"), w, np.float32(0))


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("fmt", ["dense", "sparse24", "slid"])
def test_oracle_is_the_cpu_int8_rule(fmt):
    nmkit = pytest.importorskip("nmkit")
    if not hasattr(nmkit, "SparseLinear"):
        pytest.skip("nmkit._nmkit is not built here (a GPU machine's build)")
    rng = np.random.default_rng(SEED)
    w = weight(24, 136, fmt, rng)
    x = rng.standard_normal((5, 136)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    lin = nmkit.SparseLinear(w, format=fmt, dtype="int8", pattern={"dense": None, "sparse24": "2:4", "slid": "6:8"}[fmt],
                             bias=bias)
    assert same_bits(lin(x), oracle(x, w, bias))


def test_arguments_are_checked_before_the_device():
    """What is wrong with the arguments is said with or without a GPU (CI runs this)."""
    rng = np.random.default_rng(SEED)
    w = weight(16, 40, "sparse24", rng)
    with pytest.raises(Error, match="2:4"):
        cuda_module.CudaSparseLinear(rng.standard_normal((8, 16)).astype(np.float32), format="sparse24")
    with pytest.raises(Error, match="format"):
        cuda_module.CudaSparseLinear(w, format="nm")
    with pytest.raises(Error, match="int8 or e4m3"):
        cuda_module.CudaSparseLinear(w, dtype="fp8")
    with pytest.raises(Error, match="cudnn"):
        cuda_module.CudaSparseLinear(w, backend="cudnn")
    with pytest.raises(Error, match="pattern"):
        cuda_module.CudaSparseLinear(w, format="slid", pattern="6-8")
    with pytest.raises(Error, match="w: expected 2 dimensions"):
        cuda_module.CudaSparseLinear(w[0], format="dense")
    if cuda_module.cuda_device_count() == 0:
        with pytest.raises(Error, match="no device"):
            cuda_module.CudaSparseLinear(w)


def torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or cuda_module.cuda_device_count() == 0:
        pytest.skip("no CUDA device of sm_80 or later")
    return torch


BACKENDS = [("dense", "auto"), ("sparse24", "cutlass"), ("sparse24", "cusparselt"), ("slid", "cutlass"),
            ("slid", "cusparselt")]


@pytest.mark.parametrize("fmt,backend", BACKENDS)
@pytest.mark.parametrize("M", [1, 17, 300])
def test_int8_on_cuda_tensors_equals_the_oracle(fmt, backend, M):
    torch = torch_cuda()
    rng = np.random.default_rng(SEED + M)
    w = weight(48, 200, fmt, rng)
    x = (rng.standard_normal((M, 200)) * 3).astype(np.float32)
    bias = rng.standard_normal(48).astype(np.float32)
    lin = cuda_module.CudaSparseLinear(w, format=fmt, backend=backend, bias=bias)
    assert lin.rows == 48 and lin.K == 200 and lin.format == fmt and lin.dtype == "int8"
    assert (lin.backend == "cublaslt") if fmt == "dense" else (lin.backend == backend)
    xd = torch.from_numpy(x).cuda()
    y = lin(xd)
    assert y.is_cuda and y.device == xd.device and y.dtype == torch.float32 and tuple(y.shape) == (M, 48)
    assert same_bits(y.cpu().numpy(), oracle(x, w, bias)), lin.kernel_name
    assert lin.gemm_name(M) != ""


def test_bfloat16_and_host_inputs():
    torch = torch_cuda()
    rng = np.random.default_rng(SEED)
    w = weight(32, 96, "sparse24", rng)
    x = rng.standard_normal((9, 96)).astype(np.float32)
    lin = cuda_module.CudaSparseLinear(w, format="sparse24")
    xb = torch.from_numpy(x).to(torch.bfloat16)
    want_b = oracle(xb.float().numpy(), w)  # bf16 values quantized as they are
    assert same_bits(lin(xb.cuda()).cpu().numpy(), want_b)
    y_host = lin(x)  # numpy in, numpy out, through host memory
    assert isinstance(y_host, np.ndarray) and same_bits(y_host, oracle(x, w))
    y_cpu = lin(torch.from_numpy(x))
    assert isinstance(y_cpu, torch.Tensor) and not y_cpu.is_cuda and same_bits(y_cpu.numpy(), oracle(x, w))
    xg = torch.from_numpy(x).cuda().requires_grad_(True)  # read through a detached alias
    assert same_bits(lin(xg).cpu().numpy(), oracle(x, w))


def test_e4m3_close_to_float():
    torch = torch_cuda()
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("E4M3 needs sm_89 or later")
    rng = np.random.default_rng(SEED)
    w = weight(64, 512, "sparse24", rng)
    x = rng.standard_normal((16, 512)).astype(np.float32)
    y = cuda_module.CudaSparseLinear(w, format="sparse24", dtype="e4m3")(torch.from_numpy(x).cuda()).cpu().numpy()
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    assert np.linalg.norm(y - want) <= 0.1 * np.linalg.norm(want)  # 3 mantissa bits per factor


def test_errors_name_what_is_wrong():
    torch = torch_cuda()
    rng = np.random.default_rng(SEED)
    w = weight(16, 40, "sparse24", rng)
    lin = cuda_module.CudaSparseLinear(w, format="sparse24")
    x = torch.from_numpy(rng.standard_normal((5, 40)).astype(np.float32))
    x[3, 17] = float("nan")
    with pytest.raises(Error) as raised:
        lin(x.cuda())
    assert "row 3" in str(raised.value) and "column 17" in str(raised.value)
    with pytest.raises(Error, match="40"):
        lin(torch.zeros((2, 41), device="cuda"))
    with pytest.raises(Error, match="contiguous"):
        lin(torch.zeros((40, 2), device="cuda").t())
    with pytest.raises(Error, match="not accepted"):
        lin(torch.zeros((2, 40), device="cuda", dtype=torch.float16))
