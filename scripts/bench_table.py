#!/usr/bin/env python3
"""Markdown summary of `nmkit bench linear --json FILE`: per shape, weight dtype and M, the best
dense baseline, nmkit dense and each nmkit sparse kernel with its speedup over the best dense
kernel of the same dtype (medians of one run) and the byte-ratio ceiling.

Usage: scripts/bench_table.py BENCH.json
"""
import json
import sys


def load_runs(path):
    """The kernel records of a `nmkit bench linear --json` file, after printing its machine line."""
    with open(path) as f:
        records = json.load(f)
    memcpy = next(r for r in records if r.get("kernel") == "memcpy")
    print(f"{memcpy['threads']} threads, copy bandwidth {memcpy['copy_gbs']:.1f} GB/s (read+write), read bandwidth "
          f"{memcpy['read_gbs']:.1f} GB/s, OpenBLAS core {memcpy.get('openblas_core', '?')}\n")
    return [r for r in records if r.get("kernel") != "memcpy"]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = load_runs(sys.argv[1])
    shapes = sorted({(r["rows"], r["K"]) for r in runs})
    for rows, K in shapes:
        print(f"**{rows} x {K}** (median ms of 5 interleaved rounds; speedup = median over the rounds of the fastest "
              f"dense kernel of the same weight dtype / the sparse kernel; ceiling = byte ratio)\n")
        print("| dtype | M | best dense (ms) | nmkit dense | nmkit sparse kernel | ms | weights GB/s | speedup | ceiling | Eigen CSR |")
        print("|---|---:|---|---:|---|---:|---:|---:|---:|---:|")
        for dtype in ("f32", "bf16", "int8"):
            for M in sorted({r["M"] for r in runs if r["weight_dtype"] == dtype}):
                group = [r for r in runs if (r["rows"], r["K"], r["weight_dtype"], r["M"]) == (rows, K, dtype, M)]
                dense = [r for r in group if r["dense"]]
                if not dense:
                    continue
                best = min(dense, key=lambda r: r["median_ms"])
                ours = next((r for r in dense if r["kernel"].startswith("nmkit")), None)
                eigen = {r["pattern"]: r for r in group if r["kernel"].startswith("eigen")}
                for r in group:
                    if r["dense"] or not r["kernel"].startswith("nmkit"):
                        continue
                    e = eigen.get(r["pattern"])
                    eigen_ms = f"{e['median_ms']:.2f}" if e else "-"
                    print(f"| {dtype} | {M} | {best['kernel']} {best['median_ms']:.3f} | "
                          f"{ours['median_ms']:.3f} | {r['kernel'].removeprefix('nmkit ')} | {r['median_ms']:.3f} | {r['weight_gbs']:.1f} | "
                          f"{r['speedup_vs_best_dense']:.2f}x | {r['byte_ratio_ceiling']:.2f}x | {eigen_ms} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
