#!/usr/bin/env python3
"""Compact summary of `nmkit bench linear --json FILE`: for each weight dtype, one row per layer shape
and nmkit kernel family (dense, 2:4, 6:8) and one column per token count M, each cell the median
same-round speedup over the fastest dense kernel of that dtype and M (oneDNN, OpenBLAS and nmkit's
own dense kernel all compete), then the issue-12 targets checked against those cells.

Where a shape has two nmkit kernels of one family at one M (e.g. bf16 weights with f32 and with bf16
activations) the cell shows the better one, since a user picks the activation type.

Usage: scripts/bench_by_m.py BENCH.json
"""
import sys

from bench_table import load_runs

FAMILIES = ("dense", "2:4", "6:8")


def family(record):
    return "dense" if record["dense"] else record["pattern"]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    ours = [r for r in load_runs(sys.argv[1]) if r["kernel"].startswith("nmkit")]
    ms = sorted({r["M"] for r in ours})
    shapes = sorted({(r["rows"], r["K"]) for r in ours}, key=lambda s: (-s[0] * s[1], s))
    cells = {}  # (dtype, shape, family, M) -> (speedup, kernel)
    for r in ours:
        key = (r["weight_dtype"], (r["rows"], r["K"]), family(r), r["M"])
        if key not in cells or r["speedup_vs_best_dense"] > cells[key][0]:
            cells[key] = (r["speedup_vs_best_dense"], r["kernel"])
    for dtype in ("f32", "bf16", "int8"):
        print(f"**{dtype} weights**: speedup over the fastest dense kernel of the same dtype and M\n")
        print("| shape (rows x K) | nmkit kernel | " + " | ".join(f"M={m}" for m in ms) + " |")
        print("|---|---|" + "---:|" * len(ms))
        for shape in shapes:
            for fam in FAMILIES:
                row = [cells.get((dtype, shape, fam, m)) for m in ms]
                if not any(row):
                    continue
                text = " | ".join(f"{c[0]:.2f}x" if c else "-" for c in row)
                print(f"| {shape[0]} x {shape[1]} | {fam} | {text} |")
        print()

    # Issue 12's targets, cell by cell.
    def check(label, keys, floor):
        got = [(k, cells[k][0]) for k in keys if k in cells]
        misses = [(k, s) for k, s in got if s < floor]
        worst = min((s for _, s in got), default=float("nan"))
        state = "met" if got and not misses else "MISSED"
        print(f"- {label} >= {floor:.2f}x: {state} ({len(got) - len(misses)}/{len(got)} cells; worst {worst:.2f}x)")
        for (dtype, shape, fam, m), s in misses[:12]:
            print(f"    {dtype} {shape[0]}x{shape[1]} {fam} M={m}: {s:.2f}x")
        if len(misses) > 12:
            print(f"    ... {len(misses) - 12} more")

    print("Targets (issue 12):")
    every = [(d, s, f, m) for d in ("f32", "bf16", "int8") for s in shapes for f in FAMILIES for m in ms]
    check("every form, every dtype and M", every, 0.95)
    check("2:4 f32 at M=16", [("f32", s, "2:4", 16) for s in shapes], 1.3)
    check("2:4 f32 at M=256", [("f32", s, "2:4", 256) for s in shapes], 1.2)
    for d in ("bf16", "int8"):
        check(f"2:4 {d} at M=16 and 256", [(d, s, "2:4", m) for s in shapes for m in (16, 256)], 1.15)
    check("6:8 every dtype and M", [(d, s, "6:8", m) for d in ("f32", "bf16", "int8") for s in shapes for m in ms], 1.0)
    for d in ("f32", "bf16"):
        check(f"6:8 {d} at M=1", [(d, s, "6:8", 1) for s in shapes], 1.15)
    check("6:8 int8 at M=1", [("int8", s, "6:8", 1) for s in shapes], 1.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
