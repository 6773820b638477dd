#!/usr/bin/env python3
"""What a SparseLinear call costs from Python next to the C++ call (issue 26: within 5% at 4096 x 4096,
one token). Measured, never asserted: each form is timed both ways in the same process, call after
call in pairs on the same weight and input; the C++ side is SparseLinear::apply timed in C++ with its
output buffer allocated once (SparseLinear._time_apply), the Python side lin(x) timed with perf_counter
around each call (argument parsing, reading x in place, the output array, the GIL release). Reported:
median microseconds per call of each, their ratio, and the median of the pairs' differences (the
overhead, which pairing keeps apart from the drift of a shared machine); run it twice and quote the
spread.

Usage: python3 bench/python_overhead.py [--rows 4096] [--K 4096] [--m 1] [--calls 500]
(PYTHONPATH=build/python after `make build`, or after `pip install .`)
"""
import argparse
import statistics
import time

import numpy as np

import nmkit

FORMS = [("dense", "f32", None), ("sparse24", "f32", "2:4"), ("sparse24", "bf16", "2:4"),
         ("sparse24", "int8", "2:4"), ("dense", "int8", None)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--K", type=int, default=4096)
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--calls", type=int, default=500, help="pairs of calls per form")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    w = rng.standard_normal((args.rows, args.K), dtype=np.float32)
    x = rng.standard_normal((args.m, args.K), dtype=np.float32)
    print(f"{args.rows} x {args.K}, M = {args.m}, {nmkit.thread_count()} threads; medians of {args.calls} pairs "
          f"of calls")
    print(f"{'form':28} {'C++ us':>9} {'Python us':>10} {'ratio':>7} {'overhead us':>12}")
    for fmt, dtype, pattern in FORMS:
        weight = nmkit.prune(w, pattern).weight if pattern else w
        lin = nmkit.SparseLinear(weight, format=fmt, dtype=dtype)
        lin(x)  # builds any form made on first use, warms the caches
        cxx, py = [], []
        for _ in range(args.calls):
            cxx += lin._time_apply(x, 1)
            t0 = time.perf_counter()
            lin(x)
            py.append(time.perf_counter() - t0)
        c, p = statistics.median(cxx) * 1e6, statistics.median(py) * 1e6
        overhead = statistics.median(b - a for a, b in zip(cxx, py)) * 1e6
        print(f"{lin.kernel_name(args.m):28} {c:9.1f} {p:10.1f} {p / c:7.3f} {overhead:12.2f}")


if __name__ == "__main__":
    main()
