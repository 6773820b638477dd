#!/usr/bin/env python3
"""Smoke test of the two benchmarks on tiny shapes: both must exit 0 (bench linear exits 1 when any
timed kernel, nmkit's or a baseline's, disagrees with the float64 reference), and bench linear's
JSON must hold the records the issue names, for every kernel family, with sane numbers.
Usage: bench_smoke.py --nmkit PATH"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

KEYS = ["kernel", "weight_dtype", "pattern", "M", "rows", "K", "threads", "median_ms", "weight_gbs", "gflops",
        "speedup_vs_best_dense", "byte_ratio_ceiling"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nmkit", required=True)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "linear.json")
        linear = subprocess.run([args.nmkit, "bench", "linear", "--rows", "64", "--k", "200", "--m", "1,17",
                                 "--min-seconds", "0.01", "--json", path], capture_output=True, text=True)
        if linear.returncode != 0:
            print(linear.stdout, linear.stderr, sep="\n")
            print("bench linear failed", file=sys.stderr)
            return 1
        with open(path) as f:
            records = json.load(f)
    runs = [r for r in records if r.get("kernel") != "memcpy"]
    problems = []
    if not any(r.get("kernel") == "memcpy" and r.get("copy_gbs", 0) > 0 for r in records):
        problems.append("no copy bandwidth record")
    for r in runs:
        missing = [k for k in KEYS if k not in r]
        if missing:
            problems.append(f"{r.get('kernel')}: missing {missing}")
        elif not (r["median_ms"] > 0 and r["speedup_vs_best_dense"] > 0 and r["M"] in (1, 17)):
            problems.append(f"{r['kernel']} M={r['M']}: implausible {r}")
    names = {r["kernel"] for r in runs}
    for family in ("dense f32", "sparse24 f32", "nm6:8 f32", "sparse24 bf16", "sparse24 int8", "slid6:8 int8"):
        if not any(family in n for n in names):
            problems.append(f"no '{family}' kernel in {sorted(names)}")
    quant = subprocess.run([args.nmkit, "bench", "quant", "--m", "1,5", "--k", "100", "--min-seconds", "0.01"],
                           capture_output=True, text=True)
    if quant.returncode != 0 or " int8 " not in quant.stdout:
        problems.append(f"bench quant failed: {quant.returncode} {quant.stderr}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
