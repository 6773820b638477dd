#!/usr/bin/env python3
"""GGUF dequantization and writing against the PyPI gguf package (docs/design.md section 11.1).

Random blocks of every type nmkit dequantizes (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
Q5_K, Q6_K; random bytes, so scales include subnormals, infinities and NaNs) are written into a GGUF
with gguf.GGUFWriter, together with metadata of all 13 value types and a nested array. nmkit's
test driver (tests/gguf/tool) dequantizes every tensor and writes the result with write_gguf as
F32, F16 and BF16. This script then checks, reading nmkit's output with gguf.GGUFReader:
  - values bit for bit equal to gguf.quants.dequantize (NaN only has to be NaN: numpy's float16
    conversion may quiet a signalling NaN's payload), converted to F16 by numpy's rounding and to
    BF16 by gguf.quants.quantize (ggml's rounding);
  - the metadata (keys in order, value types and values) and the tensor order, names and shapes.
Exit status 0 when everything matches; the first mismatches are printed with their seed and index.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

TYPES = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q4_K, Q.Q5_K, Q.Q6_K]
# (rows, blocks per row): awkward sizes, and one tensor large enough (>= 2 x 16384 elements for
# every type) to be split over the thread pool.
SHAPES = [(1, 1), (3, 3), (2, 17), (64, 1024)]


def write_input(path, rng):
    w = gguf.GGUFWriter(path, arch="llama")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -300)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -70000)
    w.add_float32("t.f32", 1.5)
    w.add_bool("t.bool", True)
    w.add_string("t.string", "héllo\nwörld")
    w.add_uint64("t.u64", 1 << 40)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float64("t.f64", 0.1)
    w.add_array("t.strings", ["a", "", "ünïcode"])
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.floats", [0.5, -2.25])
    w.add_array("t.nested", [[1, 2], [3]])
    expected = []
    for qtype in TYPES:
        block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        for rows, blocks in SHAPES:
            if qtype in (Q.F32, Q.F16, Q.BF16) and blocks == 1024:
                blocks = 1000  # elements, not blocks, for plain types
            raw = rng.integers(0, 256, size=(rows, blocks * type_size), dtype=np.uint8)
            name = f"{qtype.name.lower()}.{rows}x{blocks}"
            w.add_tensor(name, raw, raw_dtype=qtype)
            expected.append((name, qtype, raw))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expected


def same_bits(got, want):
    """Indices where float32 arrays differ in bits, NaN matching any NaN."""
    g = got.reshape(-1).view(np.uint32)
    e = want.reshape(-1).view(np.uint32)
    both_nan = np.isnan(got.reshape(-1)) & np.isnan(want.reshape(-1))
    return np.nonzero((g != e) & ~both_nan)[0]


def field_value(field):
    if field.types[0] == V.ARRAY:
        return [field_value_item(field, i) for i in range(len(field.data))]
    return field.contents()


def field_value_item(field, i):
    return field.contents(i) if hasattr(field, "contents") else field.parts[field.data[i]].tolist()


def compare_metadata(src, out, failures):
    src_fields = [(k, f) for k, f in src.fields.items() if not k.startswith("GGUF.")]
    out_fields = [(k, f) for k, f in out.fields.items() if not k.startswith("GGUF.")]
    if [k for k, _ in src_fields] != [k for k, _ in out_fields]:
        failures.append(f"metadata keys differ: {[k for k, _ in src_fields]} vs {[k for k, _ in out_fields]}")
        return
    for (key, a), (_, b) in zip(src_fields, out_fields):
        if list(a.types) != list(b.types):
            failures.append(f"metadata {key}: types {a.types} vs {b.types}")
        # Raw bytes of every part after the key: type, counts and payload must be identical.
        a_parts = [bytes(p) for p in a.parts[2:]]
        b_parts = [bytes(p) for p in b.parts[2:]]
        if a_parts != b_parts:
            failures.append(f"metadata {key}: value bytes differ")


def check(tool, tmp, seed):
    rng = np.random.default_rng(seed)
    src_path = os.path.join(tmp, "random.gguf")
    expected = write_input(src_path, rng)
    src = gguf.GGUFReader(src_path)
    failures = []
    for dtype in ("F32", "F16", "BF16"):
        out_path = os.path.join(tmp, f"dequantized.{dtype}.gguf")
        run = subprocess.run([tool, "dequantize", src_path, out_path, "--as", dtype],
                             capture_output=True, text=True)
        if run.returncode != 0:
            failures.append(f"gguf_tool dequantize --as {dtype} failed: {run.stderr.strip()}")
            continue
        out = gguf.GGUFReader(out_path)
        compare_metadata(src, out, failures)
        if [t.name for t in out.tensors] != [name for name, _, _ in expected]:
            failures.append(f"{dtype}: tensor order differs")
            continue
        for t, (name, qtype, raw) in zip(out.tensors, expected):
            want = gguf.quants.dequantize(raw, qtype).astype(np.float32, copy=False)
            if dtype == "F16":
                want = want.astype(np.float16)
            elif dtype == "BF16":
                want = gguf.quants.quantize(want, Q.BF16)
            if t.tensor_type.name != dtype:
                failures.append(f"{dtype} {name}: written as {t.tensor_type.name}")
                continue
            got = np.asarray(t.data).reshape(want.shape[0], -1)
            if dtype == "F32":
                got_f32, want_f32 = got.astype(np.float32), want
            elif dtype == "F16":
                got_f32, want_f32 = got.view(np.float16).astype(np.float32), want.astype(np.float32)
            else:  # BF16: gguf stores it as raw bytes
                got_f32 = (got.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(want.shape[0], -1)
                want_f32 = (want.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(want.shape[0], -1)
            if got_f32.shape != want_f32.shape:
                failures.append(f"{dtype} {name}: shape {got_f32.shape}, expected {want_f32.shape}")
                continue
            bad = same_bits(got_f32, want_f32)
            if bad.size:
                i = bad[0]
                failures.append(f"{dtype} {name} ({qtype.name}): {bad.size} values differ, first at {i}: "
                                f"nmkit {got_f32.reshape(-1)[i]!r} gguf {want_f32.reshape(-1)[i]!r}")
        print(f"{dtype}: {len(expected)} tensors of {len(TYPES)} types compared")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tool", required=True, help="the gguf_tool test driver")
    parser.add_argument("--seed", type=int, default=20261123)
    args = parser.parse_args()
    print(f"seed {args.seed}, gguf {gguf.__version__ if hasattr(gguf, '__version__') else '?'}, numpy {np.__version__}")
    # Random scales include infinities and NaNs: numpy's warnings about them are expected.
    with tempfile.TemporaryDirectory() as tmp, np.errstate(all="ignore"):
        failures = check(args.tool, tmp, args.seed)
    for f in failures[:20]:
        print("FAIL:", f)
    if failures:
        print(f"{len(failures)} failures (seed {args.seed})")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
