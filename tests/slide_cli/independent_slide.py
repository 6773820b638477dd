#!/usr/bin/env python3
"""End-to-end check of `nmkit slide` and `nmkit quantize` against an independent numpy reading of
docs/design.md sections 5 and 6: random pruned weights and activations of awkward shapes in F32, F16 and
BF16 are written as safetensors, run through the nmkit executable, and every output byte is compared
with what this script computes on its own. Also checks the promised errors (one stderr line, exit 1,
no output file). Usage: independent_slide.py --nmkit PATH [--seed S]."""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I8": np.int8, "U8": np.uint8, "I32": np.int32}


def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        out[name] = (info["dtype"], np.frombuffer(raw[8 + n + begin:8 + n + end], DTYPES[info["dtype"]]).reshape(info["shape"]))
    return out, metadata


def to_f32(dtype, array):
    if dtype == "BF16":
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float32)


def from_f32(dtype, values):
    if dtype == "BF16":  # values are chosen exactly representable: truncation is exact
        bits = values.astype(np.float32).view(np.uint32)
        assert np.all(bits & 0xFFFF == 0)
        return (bits >> 16).astype(np.uint16)
    return values.astype(DTYPES[dtype])


def pruned_weight(rng, rows, K, keep, group):
    """Small integers and halves (exact in every dtype), at most `keep` non-zeros per group."""
    w = np.zeros((rows, K), np.float32)
    for r in range(rows):
        for begin in range(0, K, group):
            real = min(group, K - begin)
            count = rng.integers(0, min(keep, real) + 1)
            positions = rng.permutation(real)[:count]
            w[r, begin + positions] = rng.integers(-64, 65, size=count) / 2 + 0.5
    return w


def slide_reference(w, keep, group, align):
    """docs/design.md 5: windows w = 0..N-2, lanes 0..3 in order; a slot takes W[i] when non-zero, not yet
    placed and the window holds fewer than two values."""
    rows, K = w.shape
    N = group // 2
    K_pad = -(-K // group) * group
    K_raw = K_pad // group * 4 * (N - 1)
    K_prime = -(-K_raw // align) * align
    out = np.zeros((rows, K_prime), w.dtype)
    for r in range(rows):
        for q in range(K_pad // group):
            placed = set()
            for win in range(N - 1):
                held = 0
                for lane in range(4):
                    i = 2 * win + lane
                    k = q * group + i
                    if k < K and w[r, k] != 0 and i not in placed and held < 2:
                        out[r, q * 4 * (N - 1) + 4 * win + lane] = w[r, k]
                        placed.add(i)
                        held += 1
            nonzero = {i for i in range(group) if q * group + i < K and w[r, q * group + i] != 0}
            assert nonzero == placed, "greedy placement dropped a value"
    return out, {"pattern": f"{keep}:{group}", "N": N, "window": 4, "stride": 2, "windows_per_group": N - 1,
                 "K": K, "K_pad": K_pad, "K_prime": K_prime, "align": align}


def lift_map(K, group, align):
    N = group // 2
    K_pad = -(-K // group) * group
    K_raw = K_pad // group * 4 * (N - 1)
    K_prime = -(-K_raw // align) * align
    j = np.arange(K_prime)
    o = 4 * (N - 1)
    i = (j // o) * group + 2 * ((j % o) // 4) + (j % 4)
    i[(j >= K_raw) | (i >= K)] = -1
    return i


def e4m3_table():
    """Magnitudes of codes 0x00..0x7E (the finite non-negative e4m3fn values)."""
    values = []
    for code in range(0x7F):
        e, m = code >> 3, code & 7
        values.append(m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(values, np.float64)


def encode_e4m3(values):
    """Nearest finite code (ties to the even code), saturating; the sign bit of the input kept."""
    table = e4m3_table()
    a = np.minimum(np.abs(values.astype(np.float64)), 1e6)[..., None]  # infinity saturates like 1e6
    d = np.abs(a - table)
    best = d.min(axis=-1, keepdims=True)
    candidates = np.where(d == best, np.arange(0x7F), 10**6)
    even = np.where((candidates % 2 == 0) & (candidates < 10**6), candidates, 10**6)
    code = np.where(even.min(axis=-1) < 10**6, even.min(axis=-1), candidates.min(axis=-1)).astype(np.uint8)
    return code | np.where(np.signbit(values), 0x80, 0).astype(np.uint8)


def quantize_reference(x, kind, mapping=None):
    """docs/design.md 6 in float32, value by value."""
    x = x.astype(np.float32)
    qmax = np.float32(127.0 if kind == "int8" else 448.0)
    absmax = np.abs(x).max(axis=1)
    scales = np.where(absmax == 0, np.float32(1), absmax / qmax).astype(np.float32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = (qmax / absmax).astype(np.float32)
        products = (x * inv[:, None]).astype(np.float32)
    products[np.isnan(products)] = 0  # 0 * inf (absmax below 2^-121)
    if kind == "int8":
        codes = np.clip(np.rint(np.clip(products, -127, 127)), -127, 127).astype(np.int8).view(np.uint8)
    else:
        codes = encode_e4m3(products)
    codes[absmax == 0, :] = 0
    if mapping is not None:
        lifted = np.zeros((x.shape[0], len(mapping)), np.uint8)
        valid = mapping >= 0
        lifted[:, valid] = codes[:, mapping[valid]]
        codes = lifted
    return codes, scales


def run(nmkit, *args):
    return subprocess.run([nmkit, *args], capture_output=True, text=True)


def check(condition, message):
    if not condition:
        print("FAIL:", message)
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nmkit", required=True)
    parser.add_argument("--seed", type=int, default=20260522)
    args = parser.parse_args()
    print("seed", args.seed)
    rng = np.random.default_rng(args.seed)
    tmp = tempfile.mkdtemp(prefix="nmkit_slide_cli_")
    checks = 0

    # Weights: every pattern family member up to 14:16, awkward K, each dtype, both formats.
    for keep, group in [(2, 4), (4, 6), (6, 8), (8, 10), (3, 8), (14, 16)]:
        for dtype in ["F32", "F16", "BF16"]:
            for align in [4, 16, 32, 64]:
                tensors, expected = {}, {}
                for index, K in enumerate([1, 7, 100, 1000 if align == 32 else 130]):
                    rows = int(rng.integers(1, 6))
                    w = pruned_weight(rng, rows, K, keep, group)
                    name = f"layers.{index}.mlp.up_proj.weight"
                    tensors[name] = (dtype, from_f32(dtype, w))
                    expected[name] = slide_reference(w, keep, group, align)
                tensors["model.norm.weight"] = ("F32", np.ones(7, np.float32))
                src = os.path.join(tmp, "w.safetensors")
                write_safetensors(src, tensors)
                for fmt in ["dense", "sparse24"]:
                    dst = os.path.join(tmp, f"slid_{fmt}.safetensors")
                    result = run(args.nmkit, "slide", src, "-o", dst, "--pattern", f"{keep}:{group}",
                                 "--align", str(align), "--format", fmt)
                    check(result.returncode == 0, f"slide {keep}:{group} {dtype}: {result.stderr}")
                    out, metadata = read_safetensors(dst)
                    check(np.array_equal(out["model.norm.weight"][1], np.ones(7, np.float32)), "norm copied")
                    for name, (w_slid, geometry) in expected.items():
                        record = json.loads(metadata["nmkit." + name])
                        check(record["slide"] == geometry, f"{name}: slide record {record['slide']} != {geometry}")
                        check(record["format"] == fmt and record["pattern"] == "2:4" and record["dtype"] == dtype,
                              f"{name}: record {record}")
                        check(record["shape"] == [w_slid.shape[0], geometry["K_prime"]], f"{name}: shape")
                        if fmt == "dense":
                            got = to_f32(dtype, out[name][1])
                        else:
                            values = to_f32(dtype, out[name + ".values"][1])
                            meta = out[name + ".meta"][1]
                            got = np.zeros(w_slid.shape, np.float32)
                            for g in range(w_slid.shape[1] // 4):
                                nibble = ((meta[:, g // 2] >> (4 * (g % 2))) & 0xF).astype(np.int64)
                                for s, idx in enumerate([nibble & 3, nibble >> 2]):
                                    got[np.arange(len(idx)), 4 * g + idx] += values[:, 2 * g + s]
                        check(np.array_equal(got, w_slid), f"{name} {keep}:{group} {dtype} align {align} {fmt}")
                        checks += 1
    print("slide outputs checked:", checks)

    # Activations: quantize plain and lifted, int8 and e4m3, each dtype; ties, zero and tiny rows.
    for dtype in ["F32", "F16", "BF16"]:
        tensors, values = {}, {}
        for index, (M, K) in enumerate([(1, 1), (3, 7), (17, 100), (5, 1000), (2, 4097)]):
            x = (rng.integers(-254, 255, size=(M, K)) / (4 if index % 2 else 1)).astype(np.float32)
            if M > 2:
                x[1] = 0
                x[2] *= np.float32(2.0 ** -10)
            if M > 3 and dtype != "F16":
                x[3] *= np.float32(2.0 ** -130)  # absmax below 2^-121: inv overflows to infinity
            name = f"act.{index}"
            tensors[name] = (dtype, from_f32(dtype, x))
            values[name] = to_f32(dtype, tensors[name][1])
        tensors["ids"] = ("I32", np.arange(3, dtype=np.int32))
        src = os.path.join(tmp, "act.safetensors")
        write_safetensors(src, tensors)
        for kind in ["int8", "e4m3"]:
            for lift in [None, (2, 4), (4, 6), (6, 8), (8, 10)]:
                dst = os.path.join(tmp, "q.safetensors")
                extra = ["--lift", f"{lift[0]}:{lift[1]}", "--align", "32"] if lift else []
                result = run(args.nmkit, "quantize", src, "-o", dst, "--dtype", kind, *extra)
                check(result.returncode == 0, f"quantize {dtype} {kind} {lift}: {result.stderr}")
                out, _ = read_safetensors(dst)
                check("ids.codes" not in out, "integer tensors are not quantized")
                inspected = run(args.nmkit, "inspect", dst)
                check(inspected.returncode == 0, f"nmkit inspect reads what quantize wrote: {inspected.stderr}")
                for name, x in values.items():
                    mapping = lift_map(x.shape[1], lift[1], 32) if lift else None
                    codes, scales = quantize_reference(x, kind, mapping)
                    got_dtype, got_codes = out[name + ".codes"]
                    check(got_dtype == ("I8" if kind == "int8" else "U8"), f"{name}.codes dtype {got_dtype}")
                    check(np.array_equal(got_codes.view(np.uint8), codes),
                          f"{name} {dtype} {kind} lift {lift}: codes differ at "
                          f"{np.argwhere(got_codes.view(np.uint8) != codes)[:5].tolist()}")
                    check(np.array_equal(out[name + ".scales"][1].view(np.uint32), scales.view(np.uint32)),
                          f"{name} {dtype} {kind}: scales differ")
                    checks += 1
    print("slide + quantize outputs checked:", checks)

    # Errors: one line on stderr, exit 1, no output file.
    bad = pruned_weight(rng, 4, 40, 6, 8)
    bad[2, 16:23] = 1.0  # 7 non-zeros in group 2 of row 2
    src = os.path.join(tmp, "bad.safetensors")
    write_safetensors(src, {"layers.0.self_attn.q_proj.weight": ("F32", bad)})
    dst = os.path.join(tmp, "bad_out.safetensors")
    result = run(args.nmkit, "slide", src, "-o", dst, "--pattern", "6:8")
    lines = result.stderr.strip().splitlines()
    check(result.returncode == 1 and len(lines) == 1, f"non-compliant: rc {result.returncode}, {result.stderr!r}")
    for needle in [src, "layers.0.self_attn.q_proj.weight", "row 2", "group 2", "nmkit prune"]:
        check(needle in lines[0], f"non-compliant message lacks {needle!r}: {lines[0]}")
    check(not os.path.exists(dst), "no output after an error")
    for pattern in ["7:8", "3:5"]:
        result = run(args.nmkit, "slide", src, "-o", dst, "--pattern", pattern)
        check(result.returncode == 1 and pattern in result.stderr and not os.path.exists(dst), f"pattern {pattern}")
    x = np.ones((3, 9), np.float32)
    x[1, 4] = np.inf
    write_safetensors(src, {"hidden": ("F32", x)})
    result = run(args.nmkit, "quantize", src, "-o", dst, "--dtype", "int8")
    lines = result.stderr.strip().splitlines()
    check(result.returncode == 1 and len(lines) == 1 and "hidden" in lines[0] and "row 1, column 4" in lines[0]
          and "inf" in lines[0] and src in lines[0], f"non-finite activation: {result.stderr!r}")
    check(not os.path.exists(dst), "no output after an error")
    print("errors checked; all", checks, "outputs agree with docs/design.md")


if __name__ == "__main__":
    main()
