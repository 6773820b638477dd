#!/usr/bin/env python3
"""Independent check of `nmkit prune` against docs/design.md sections 2-4.

Written from the design text only (not from nmkit's sources): a numpy re-implementation of N:M pruning
(magnitude, gradient |w*g|, Wanda |w|*a[k]; tail groups, float32 scores, ties by larger |w| then lower
index), of the metrics (float64 sums), and of the sparse24 / nm packings. It reads and writes
safetensors by hand (struct + json).

Driver: generates random checkpoints (patterns 2:4, 4:8, 6:8, 1:4, 3:7; f32, f16, bf16; K not a
multiple of the group; values drawn from a small set so that ties are everywhere, -0.0 included), runs
`nmkit prune` with --report in every format the pattern allows and with every method, and asserts that
every output tensor equals the expected one bit for bit, that the metadata holds the input's entries
plus one record per pruned weight, and that every metric of the report is within 1e-6 relative.

Usage: independent_prune.py --nmkit PATH/TO/nmkit [--seed N] [--workdir DIR]
"""

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

# ---------------------------------------------------------------------------------------------------
# safetensors by hand

DTYPE_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
              "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
PRUNABLE = ("F32", "F16", "BF16")
DEFAULT_EXCLUDE = "embed|norm|lm_head|wte|wpe"


def read_safetensors(path):
    """Returns ([(name, dtype, shape, raw bytes)] in data order, metadata dict)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = []
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        shape = list(entry["shape"])
        assert end - begin == int(np.prod(shape, dtype=np.int64)) * DTYPE_SIZE[entry["dtype"]], name
        tensors.append((begin, name, entry["dtype"], shape, data[begin:end]))
    tensors.sort()
    return [(name, dt, shape, raw) for _, name, dt, shape, raw in tensors], metadata


def write_safetensors(path, tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)]."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, raw in tensors:
            f.write(raw)


# ---------------------------------------------------------------------------------------------------
# dtypes: exact conversions to float32; raw element bits as unsigned integers

UINT = {4: np.uint32, 2: np.uint16, 1: np.uint8}


def raw_bits(dt, shape, raw):
    return np.frombuffer(raw, dtype=UINT[DTYPE_SIZE[dt]]).reshape(shape)


def to_f32(dt, shape, raw):
    bits = raw_bits(dt, shape, raw)
    if dt == "F32":
        return bits.view(np.float32)
    if dt == "F16":
        return bits.view(np.float16).astype(np.float32)  # exact
    if dt == "BF16":
        return (bits.astype(np.uint32) << 16).view(np.float32)  # bf16 is the top half of an f32
    raise ValueError(dt)


def from_f32_exact(dt, values):
    """Bits of float32 values in dtype dt; the values must be representable (checked)."""
    values = np.asarray(values, dtype=np.float32)
    if dt == "F32":
        bits = values.view(np.uint32)
    elif dt == "F16":
        bits = values.astype(np.float16).view(np.uint16)
    else:
        u = values.view(np.uint32)
        bits = (u >> 16).astype(np.uint16)
    back = to_f32(dt, values.shape, bits.tobytes())
    assert np.array_equal(back.view(np.uint32), values.view(np.uint32)), "value not representable in " + dt
    return bits


# ---------------------------------------------------------------------------------------------------
# docs/design.md section 2: selection

def keep_mask(w, keep, group, method, grad=None, norms=None):
    """Boolean [rows, K]: True where the element is kept."""
    rows, K = w.shape
    groups = -(-K // group)
    Kp = groups * group
    if method == "magnitude":
        score = np.abs(w)
    elif method == "gradient":
        score = np.abs(w * grad)  # one float32 rounding for the product, abs is exact
    elif method == "wanda":
        score = np.abs(w) * norms[None, :]  # one float32 rounding
    else:
        raise ValueError(method)
    assert score.dtype == np.float32
    # The tail is padded to a full group with elements that rank below every real one, so the tail keeps
    # its min(keep, t) best real elements and padding is never kept.
    s = np.full((rows, Kp), -np.inf, dtype=np.float64)
    a = np.full((rows, Kp), -np.inf, dtype=np.float64)
    s[:, :K] = score  # float32 -> float64 is exact: the order is the float32 order
    a[:, :K] = np.abs(w)
    s = s.reshape(rows, groups, group)
    a = a.reshape(rows, groups, group)
    idx = np.broadcast_to(np.arange(group), s.shape)
    # Highest score first; ties: larger |w| first, then lower index (lexsort: last key is primary).
    order = np.lexsort((idx, -a, -s), axis=-1)
    kept = np.zeros((rows, groups, group), dtype=bool)
    np.put_along_axis(kept, order[..., :keep], True, axis=-1)
    kept = kept.reshape(rows, Kp)[:, :K]
    return kept


# docs/design.md section 3: metrics, float64 sums over the real elements

def sums_of(w, kept):
    w64 = np.abs(w.astype(np.float64))
    return {
        "total": w.size,
        "pruned": int(w.size - np.count_nonzero(kept)),
        "abs_kept": float(w64[kept].sum()),
        "abs_pruned": float(w64[~kept].sum()),
        "sq_total": float((w64 * w64).sum()),
        "sq_pruned": float((w64[~kept] ** 2).sum()),
    }


def add_sums(a, b):
    return {k: a[k] + b[k] for k in a}


def metrics_of(s, memory_bytes):
    total, pruned = s["total"], s["pruned"]
    kept = total - pruned
    return {
        "total_count": total,
        "pruned_count": pruned,
        "sparsity_percent": 100.0 * pruned / total if total else 0.0,
        "approximation_error": s["abs_pruned"] / total if total else 0.0,
        "kept_magnitude_mean": s["abs_kept"] / kept if kept else 0.0,
        "pruned_magnitude_mean": s["abs_pruned"] / pruned if pruned else 0.0,
        "relative_error": float(np.sqrt(s["sq_pruned"]) / np.sqrt(s["sq_total"])) if s["sq_total"] > 0 else 0.0,
        "retained_l1": s["abs_kept"] / (s["abs_kept"] + s["abs_pruned"]) if s["abs_kept"] + s["abs_pruned"] > 0
        else 1.0,
        "memory_bytes": memory_bytes,
    }


# docs/design.md section 4: packings of the dense-masked tensor

def slot_positions(nonzero, slots):
    """Per group: its non-zero positions, then the lowest-index zero positions, `slots` of them, in
    increasing index order. nonzero: bool [rows, groups, group]."""
    idx = np.broadcast_to(np.arange(nonzero.shape[-1]), nonzero.shape)
    order = np.lexsort((idx, ~nonzero), axis=-1)  # non-zeros first, each part by index
    chosen = order[..., :slots]
    assert np.all(np.take_along_axis(nonzero, order[..., slots:], axis=-1) == False), "not compliant"  # noqa: E712
    return np.sort(chosen, axis=-1)


def padded_groups(bits, nonzero, group):
    rows, K = bits.shape
    groups = -(-K // group)
    Kp = groups * group
    b = np.zeros((rows, Kp), dtype=bits.dtype)
    nz = np.zeros((rows, Kp), dtype=bool)
    b[:, :K] = bits
    nz[:, :K] = nonzero
    return b.reshape(rows, groups, group), nz.reshape(rows, groups, group), groups, Kp


def pack_sparse24(bits, nonzero):
    rows = bits.shape[0]
    b, nz, groups, Kp = padded_groups(bits, nonzero, 4)
    pos = slot_positions(nz, 2)
    values = np.take_along_axis(b, pos, axis=-1).reshape(rows, groups * 2)
    nibble = (pos[..., 0] | (pos[..., 1] << 2)).astype(np.uint8)  # [rows, groups]
    stride = -(-Kp // 8)
    nib = np.zeros((rows, stride * 2), dtype=np.uint8)
    nib[:, :groups] = nibble
    meta = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)
    return values, meta


def pack_nm(bits, nonzero, keep, group):
    rows = bits.shape[0]
    b, nz, groups, Kp = padded_groups(bits, nonzero, group)
    pos = slot_positions(nz, keep)
    values = np.take_along_axis(b, pos, axis=-1).reshape(rows, groups * keep)
    maskbits = np.zeros((rows, groups, group), dtype=np.uint8)
    np.put_along_axis(maskbits, pos, 1, axis=-1)
    mask = np.packbits(maskbits.reshape(rows, Kp), axis=-1, bitorder="little")
    assert mask.shape[1] == -(-Kp // 8)
    return values, mask


# ---------------------------------------------------------------------------------------------------
# Expected output of `nmkit prune`

def expected_prune(inp, grad, norms, keep, group, method, fmt, include, exclude):
    tensors, metadata = inp
    out = []
    meta = dict(metadata)
    report = {}
    total = None
    total_bytes = 0
    for name, dt, shape, raw in tensors:
        selected = (dt in PRUNABLE and len(shape) == 2 and shape[0] * shape[1] > 0
                    and (not include or re.search(include, name)) and not (exclude and re.search(exclude, name)))
        if not selected:
            out.append((name, dt, shape, raw))
            continue
        w = to_f32(dt, shape, raw)
        g = a = None
        if method == "gradient":
            gdt, gshape, graw = grad[name]
            g = to_f32(gdt, gshape, graw)
        if method == "wanda":
            ndt, nshape, nraw = norms[name]
            a = to_f32(ndt, nshape, nraw)
        kept = keep_mask(w, keep, group, method, g, a)
        bits = raw_bits(dt, shape, raw)
        dense_bits = np.where(kept, bits, 0).astype(bits.dtype)  # pruned elements become +0
        nonzero = to_f32(dt, shape, dense_bits.tobytes()) != 0
        size = DTYPE_SIZE[dt]
        if fmt == "dense":
            out.append((name, dt, shape, dense_bits.tobytes()))
            memory = w.size * size
        else:
            if fmt == "sparse24":
                values, side = pack_sparse24(dense_bits, nonzero)
                side_name = name + ".meta"
            else:
                values, side = pack_nm(dense_bits, nonzero, keep, group)
                side_name = name + ".mask"
            out.append((name + ".values", dt, list(values.shape), values.tobytes()))
            out.append((side_name, "U8", list(side.shape), side.tobytes()))
            memory = values.size * size + side.size
        # A sparse24 record names the format's own pattern, 2:4 (a 1:4-pruned weight complies with it).
        recorded = "2:4" if fmt == "sparse24" else f"{keep}:{group}"
        meta["nmkit." + name] = {"format": fmt, "pattern": recorded, "dtype": dt, "shape": list(shape)}
        s = sums_of(w, kept)
        report[name] = metrics_of(s, memory)
        total = s if total is None else add_sums(total, s)
        total_bytes += memory
    return out, meta, report, (metrics_of(total, total_bytes) if total else None)


# ---------------------------------------------------------------------------------------------------
# Random checkpoints

TIE_VALUES = np.array([-3, -2, -1, -0.0, 0.0, 0.0, 1, 2, 3, 0.5, -0.5], dtype=np.float32)


def tensor(rng, dt, shape, kind):
    n = int(np.prod(shape))
    if kind == "ties":
        values = rng.choice(TIE_VALUES, size=n).astype(np.float32)
    elif kind == "zeros":
        values = rng.choice(np.array([0.0, -0.0], dtype=np.float32), size=n).astype(np.float32)
    else:  # normal values, rounded to what the dtype holds
        values = rng.standard_normal(n).astype(np.float32)
        if dt == "F16":
            values = values.astype(np.float16).astype(np.float32)
        elif dt == "BF16":
            values = ((values.view(np.uint32) >> 16) << 16).astype(np.uint32).view(np.float32)
    return dt, list(shape), from_f32_exact(dt, values.reshape(shape)).tobytes()


def make_checkpoint(rng, group):
    # K values around the group size and not multiples of it: tails of every length show up.
    k_odd = 3 * group + 1
    specs = [
        ("model.layers.0.self_attn.q_proj.weight", "F32", [7, k_odd], "ties"),
        ("model.layers.0.mlp.up_proj.weight", "F16", [5, 2 * group + group - 1], "ties"),
        ("model.layers.1.mlp.down_proj.weight", "BF16", [3, 50], "ties"),
        ("model.layers.1.self_attn.o_proj.weight", "F32", [16, 8 * group], "normal"),
        ("model.layers.1.self_attn.k_proj.weight", "BF16", [9, 37], "normal"),
        ("model.layers.1.self_attn.v_proj.weight", "F16", [6, 29], "normal"),
        ("model.layers.2.tiny.weight", "BF16", [1, 1], "ties"),
        ("model.layers.2.short.weight", "F16", [4, 3], "ties"),
        ("model.layers.3.zero.weight", "F32", [2, 9], "zeros"),
        # Large enough that nmkit splits the rows over several threads and blocks.
        ("model.layers.4.mlp.gate_proj.weight", "BF16", [130, 1001], "ties"),
        ("model.layers.4.mlp.up_proj.weight", "F32", [67, 2053], "normal"),
        ("model.embed_tokens.weight", "F32", [10, 8], "normal"),
        ("model.layers.0.input_layernorm.weight", "F32", [29], "normal"),
        ("model.layers.0.scale.weight", "F16", [3, 5, 2], "ties"),
    ]
    tensors = [(name,) + tensor(rng, dt, shape, kind) for name, dt, shape, kind in specs]
    counts = rng.integers(-5, 5, size=(3, 4)).astype(np.int32)
    tensors.append(("model.layers.0.counts", "I32", [3, 4], counts.tobytes()))
    wide = rng.standard_normal((2, 8))
    tensors.append(("model.layers.0.f64.weight", "F64", [2, 8], wide.tobytes()))
    metadata = {"format": "pt", "source": "independent_prune.py"}
    return tensors, metadata


def score_inputs(rng, tensors):
    """Gradients (same shape, a dtype of their own) and norms (1-D [K]) for every prunable 2-D tensor."""
    grads, norms = [], []
    for name, dt, shape, _ in tensors:
        if dt not in PRUNABLE or len(shape) != 2:
            continue
        gdt = PRUNABLE[rng.integers(0, 3)]
        grads.append((name,) + tensor(rng, gdt, shape, "ties" if rng.random() < 0.6 else "normal"))
        ndt = PRUNABLE[rng.integers(0, 3)]
        a = rng.choice(np.array([0.0, 0.5, 1.0, 2.0, 4.0], dtype=np.float32), size=shape[1])
        if rng.random() < 0.4:
            a = np.abs(rng.standard_normal(shape[1])).astype(np.float32)
            a = to_f32(ndt, [shape[1]], from_f32_rounded(ndt, a).tobytes())
        norms.append((name, ndt, [shape[1]], from_f32_exact(ndt, a).tobytes()))
    grads.append(("unrelated.extra", "F32", [2], np.ones(2, np.float32).tobytes()))
    return grads, norms


def from_f32_rounded(dt, values):
    if dt == "F32":
        return values.astype(np.float32).view(np.uint32)
    if dt == "F16":
        return values.astype(np.float16).view(np.uint16)
    return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


# ---------------------------------------------------------------------------------------------------
# Comparison

def close(a, b, rel=1e-6):
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return abs(a - b) <= rel * max(abs(a), abs(b)) or abs(a - b) <= 1e-300


def first_difference(dt, shape, want, got):
    size = DTYPE_SIZE[dt]
    w = np.frombuffer(want, dtype=UINT[size])
    g = np.frombuffer(got, dtype=UINT[size])
    i = int(np.nonzero(w != g)[0][0])
    cols = shape[-1] if shape else 1
    return f"element {i} (row {i // cols}, col {i % cols}): expected 0x{int(w[i]):x}, got 0x{int(g[i]):x}"


def compare(case, expected, got_path, report_path):
    want_tensors, want_meta, want_report, want_total = expected
    got_tensors, got_meta = read_safetensors(got_path)
    errors = []
    got_by_name = {t[0]: t for t in got_tensors}
    if sorted(got_by_name) != sorted(t[0] for t in want_tensors):
        errors.append(f"tensor names differ: expected {sorted(t[0] for t in want_tensors)}, got {sorted(got_by_name)}")
    for name, dt, shape, raw in want_tensors:
        if name not in got_by_name:
            continue
        _, gdt, gshape, graw = got_by_name[name]
        if (gdt, gshape) != (dt, shape):
            errors.append(f"{name}: expected {dt} {shape}, got {gdt} {gshape}")
        elif graw != raw:
            errors.append(f"{name}: bytes differ, first at {first_difference(dt, shape, raw, graw)}")
    for key, value in want_meta.items():
        if key not in got_meta:
            errors.append(f"metadata: missing {key}")
        elif isinstance(value, dict):
            record = json.loads(got_meta[key])
            for field, v in value.items():
                if record.get(field) != v:
                    errors.append(f"metadata {key}: {field} expected {v}, got {record.get(field)}")
        elif got_meta[key] != value:
            errors.append(f"metadata {key}: expected {value!r}, got {got_meta[key]!r}")
    extra = set(got_meta) - set(want_meta)
    if extra:
        errors.append(f"metadata: unexpected keys {sorted(extra)}")

    with open(report_path) as f:
        report = json.load(f)
    if report.get("pattern") != case["pattern"] or report.get("method") != case["method"]:
        errors.append(f"report: pattern/method {report.get('pattern')}/{report.get('method')}")
    if sorted(report.get("tensors", {})) != sorted(want_report):
        errors.append(f"report: tensors {sorted(report.get('tensors', {}))}, expected {sorted(want_report)}")
    for name, metrics in list(want_report.items()) + [("total", want_total)]:
        got = report["total"] if name == "total" else report.get("tensors", {}).get(name)
        if got is None or metrics is None:
            continue
        for metric, value in metrics.items():
            if metric not in got:
                errors.append(f"report {name}: missing {metric}")
            elif not close(value, got[metric]):
                errors.append(f"report {name}: {metric} expected {value!r}, got {got[metric]!r}")
    return errors


# ---------------------------------------------------------------------------------------------------

PATTERNS = [(2, 4), (4, 8), (6, 8), (1, 4), (3, 7)]
METHODS = ["magnitude", "gradient", "wanda"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nmkit", required=True)
    parser.add_argument("--seed", type=int, default=20240607)
    parser.add_argument("--workdir", help="keep the files here instead of a temporary folder")
    args = parser.parse_args()
    print(f"independent_prune: seed {args.seed}", flush=True)
    rng = np.random.default_rng(args.seed)
    work = args.workdir or tempfile.mkdtemp(prefix="nmkit_independent_")
    os.makedirs(work, exist_ok=True)
    failures = 0
    cases = 0
    try:
        for keep, group in PATTERNS:
            tensors, metadata = make_checkpoint(rng, group)
            grads, norms = score_inputs(rng, tensors)
            tag = f"{keep}_{group}"
            inp = os.path.join(work, f"in_{tag}.safetensors")
            gpath = os.path.join(work, f"grad_{tag}.safetensors")
            npath = os.path.join(work, f"norms_{tag}.safetensors")
            write_safetensors(inp, tensors, metadata)
            write_safetensors(gpath, grads)
            write_safetensors(npath, norms)
            grad_map = {n: (d, s, r) for n, d, s, r in grads}
            norm_map = {n: (d, s, r) for n, d, s, r in norms}
            formats = ["dense", "nm"] + (["sparse24"] if group == 4 and keep <= 2 else [])
            runs = [(m, f, "", DEFAULT_EXCLUDE) for m in METHODS for f in formats]
            runs.append(("magnitude", "nm", "layers\\.[01]", "down|embed"))  # selection by regex
            for method, fmt, include, exclude in runs:
                cases += 1
                out = os.path.join(work, f"out_{tag}_{method}_{fmt}.safetensors")
                rep = os.path.join(work, f"rep_{tag}_{method}_{fmt}.json")
                cmd = [args.nmkit, "prune", inp, "-o", out, "--pattern", f"{keep}:{group}", "--method", method,
                       "--format", fmt, "--report", rep]
                if method == "gradient":
                    cmd += ["--grad", gpath]
                if method == "wanda":
                    cmd += ["--act-norms", npath]
                if include:
                    cmd += ["--include", include]
                if exclude != DEFAULT_EXCLUDE:
                    cmd += ["--exclude", exclude]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                case = {"pattern": f"{keep}:{group}", "method": method}
                label = f"{keep}:{group} {method} {fmt} include={include!r} exclude={exclude!r}"
                if proc.returncode != 0:
                    failures += 1
                    print(f"FAIL {label}: exit {proc.returncode}: {proc.stderr.strip()}")
                    continue
                expected = expected_prune((tensors, metadata), grad_map, norm_map, keep, group, method, fmt,
                                          include, exclude)
                errors = compare(case, expected, out, rep)
                if errors:
                    failures += 1
                    print(f"FAIL {label}: {len(errors)} difference(s)")
                    for e in errors[:12]:
                        print("   ", e)
                    print("    reproduce: " + " ".join(cmd))
                else:
                    print(f"ok   {label}: {len(expected[2])} pruned tensors equal bit for bit, metrics within 1e-6")
    finally:
        if not args.workdir and failures == 0:
            shutil.rmtree(work, ignore_errors=True)
        elif failures:
            print(f"files kept in {work}")
    print(f"independent_prune: {cases - failures}/{cases} cases agree (seed {args.seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
