"""prune, compress/decompress, slide, lift, quantize against the numpy oracles of the C++ tests, bit for
bit (docs/design.md sections 2-6), and arrays read in place."""
import numpy as np
import pytest

import nmkit
from independent_prune import keep_mask, metrics_of, pack_nm, pack_sparse24, sums_of
from independent_slide import lift_map, pruned_weight, quantize_reference, slide_reference

SEED = 20261126
SHAPES = [(1, 1), (3, 15), (16, 17), (5, 100)]  # awkward sizes: tails of every length


def weights(shape, seed=SEED, dtype=np.float32):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(shape).astype(np.float32)
    w[rng.random(shape) < 0.1] = 0  # zeros and ties in the scores
    return w.astype(dtype)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("pattern", ["2:4", "6:8", "1:4", "4:6"])
@pytest.mark.parametrize("method", ["magnitude", "gradient", "wanda"])
def test_prune_equals_oracle(shape, pattern, method):
    keep, group = map(int, pattern.split(":"))
    w = weights(shape)
    grad = weights(shape, SEED + 1) if method == "gradient" else None
    norms = np.abs(weights((shape[1],), SEED + 2)) if method == "wanda" else None
    r = nmkit.prune(w, pattern, method=method, grad=grad, act_norms=norms)
    kept = keep_mask(w, keep, group, method, grad, norms)
    assert r.weight.dtype == np.float32 and r.weight.shape == w.shape
    assert np.array_equal(r.weight.view(np.uint32), np.where(kept, w, np.float32(0)).view(np.uint32))
    want = metrics_of(sums_of(w, kept), 0)
    for field in ("pruned_count", "total_count"):
        assert getattr(r.metrics, field) == want[field]
    for field in ("sparsity_percent", "relative_error", "approximation_error", "kept_magnitude_mean",
                  "pruned_magnitude_mean", "retained_l1"):
        assert getattr(r.metrics, field) == pytest.approx(want[field], rel=1e-12, abs=1e-15), field


@pytest.mark.parametrize("dtype", [np.float16])
def test_prune_float16_keeps_bits(dtype):
    w = weights((7, 24), dtype=dtype)
    r = nmkit.prune(w, "2:4")
    kept = keep_mask(w.astype(np.float32), 2, 4, "magnitude")
    assert r.weight.dtype == dtype
    assert np.array_equal(r.weight.view(np.uint16), np.where(kept, w, dtype(0)).view(np.uint16))


@pytest.mark.parametrize("shape", SHAPES)
def test_compress_sparse24_and_back(shape):
    w = nmkit.prune(weights(shape), "2:4").weight
    c = nmkit.compress(w, "sparse24")
    values, meta = pack_sparse24(w.view(np.uint32), w != 0)
    assert c.format == "sparse24" and c.K == shape[1] and c.pattern == "2:4"
    assert np.array_equal(c.values.view(np.uint32), values) and np.array_equal(c.meta, meta)
    assert c.memory_bytes == values.nbytes + meta.nbytes
    assert np.array_equal(nmkit.decompress(c).view(np.uint32), w.view(np.uint32))


@pytest.mark.parametrize("pattern", ["6:8", "2:4", "3:16"])
def test_compress_nm_and_back(pattern):
    keep, group = map(int, pattern.split(":"))
    w = nmkit.prune(weights((9, 37)), pattern).weight
    c = nmkit.compress(w, "nm", pattern=pattern)
    values, mask = pack_nm(w.view(np.uint32), w != 0, keep, group)
    assert np.array_equal(c.values.view(np.uint32), values) and np.array_equal(c.meta, mask)
    assert np.array_equal(nmkit.decompress(c), w)


def test_compressed_parts_are_read_only_views_kept_alive_by_their_owner():
    c = nmkit.compress(nmkit.prune(weights((4, 16)), "2:4").weight, "sparse24")
    values = c.values
    assert not values.flags.writeable and not values.flags.owndata
    assert values.ctypes.data == c.values.ctypes.data  # the same memory each time: a view, not a copy
    del c
    assert values.sum() == values.sum()  # still readable: the view keeps the Compressed alive


@pytest.mark.parametrize("pattern,K", [("6:8", 37), ("4:6", 100), ("8:10", 64), ("2:4", 17)])
def test_slide_and_lift_equal_oracle(pattern, K):
    keep, group = map(int, pattern.split(":"))
    w = pruned_weight(np.random.default_rng(SEED), 6, K, keep, group)
    s = nmkit.slide(w, pattern)
    want, geometry = slide_reference(w, keep, group, 32)
    assert np.array_equal(s.weight, want)
    assert s.geometry.K_prime == geometry["K_prime"] and s.geometry.K_pad == geometry["K_pad"]
    assert np.array_equal(s.geometry.lift_index_map(), lift_map(K, group, 32))
    x = weights((3, K))
    mapping = lift_map(K, group, 32)
    lifted = np.where(mapping >= 0, x[:, np.maximum(mapping, 0)], np.float32(0))
    assert np.array_equal(nmkit.lift(x, s.geometry), lifted)
    # Lifting keeps the product: sum_j W'[r,j] X'[m,j] = sum_k W[r,k] X[m,k] (float64 here).
    np.testing.assert_allclose(lifted.astype(np.float64) @ s.weight.T.astype(np.float64),
                               x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["int8", "e4m3"])
@pytest.mark.parametrize("lift", [None, "6:8", "4:6"])
def test_quantize_equals_oracle(kind, lift):
    x = weights((5, 45)) * 3
    x[2] = 0  # an all-zero row: scale 1, codes 0
    codes, scales = nmkit.quantize(x, kind, lift=lift)
    mapping = None
    if lift:
        mapping = lift_map(45, int(lift.split(":")[1]), 32)
    want_codes, want_scales = quantize_reference(x, kind, mapping)
    assert codes.dtype == (np.int8 if kind == "int8" else np.uint8)
    assert np.array_equal(codes.view(np.uint8), want_codes)
    assert np.array_equal(scales, want_scales) and scales[2] == 1


def test_inputs_are_read_in_place():
    for x in (weights((4, 8)), weights((4, 8), dtype=np.float16), np.arange(8, dtype=np.int8).reshape(2, 4)):
        assert nmkit._nmkit._address_of(x) == x.ctypes.data
    view = weights((6, 8))[2:5]  # a C-contiguous slice: read where it lies, offset included
    assert nmkit._nmkit._address_of(view) == view.ctypes.data


def test_results_own_their_memory():
    w = weights((4, 8))
    r = nmkit.prune(w, "2:4")
    assert not np.shares_memory(r.weight, w) and r.weight.flags.writeable
