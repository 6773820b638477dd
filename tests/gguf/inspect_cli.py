#!/usr/bin/env python3
"""`nmkit inspect` on GGUF files (issue 10 part 5): a file written by gguf.GGUFWriter (an F32 weight
pruned to 2:4, a Q8_0 weight, a 1-D norm) is reported with its ggml types, nmkit-order shapes, zero
counts and sparsest patterns computed here with numpy; a file that is neither format, and a
truncated GGUF, fail with one line naming the file, exit status 1.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nmkit", required=True)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.gguf")
        w = gguf.GGUFWriter(path, arch="llama")
        dense = rng.standard_normal((8, 64)).astype(np.float32)
        pruned = dense.copy().reshape(8, 16, 4)
        order = np.argsort(np.abs(pruned), axis=-1)
        np.put_along_axis(pruned, order[..., :2], 0.0, axis=-1)  # keep the 2 largest of every 4
        pruned = pruned.reshape(8, 64)
        w.add_tensor("blk.0.attn_q.weight", pruned)
        q8 = gguf.quants.quantize(dense, gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor("blk.0.attn_k.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor("blk.0.attn_norm.weight", np.ones(64, dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

        run = subprocess.run([args.nmkit, "inspect", path, "--json"], capture_output=True, text=True)
        if run.returncode != 0:
            failures.append(f"inspect failed: {run.stderr}")
        else:
            report = {t["name"]: t for t in json.loads(run.stdout)["tensors"]}
            q = report["blk.0.attn_q.weight"]
            if (q["dtype"], q["shape"], q["sparsest_pattern"], q["zeros"]) != ("F32", [8, 64], "2:4", int((pruned == 0).sum())):
                failures.append(f"attn_q reported as {q}")
            k = report["blk.0.attn_k.weight"]
            k_values = gguf.quants.dequantize(q8, gguf.GGMLQuantizationType.Q8_0)
            if (k["dtype"], k["shape"], k["zeros"], k["stored_bytes"]) != ("Q8_0", [8, 64], int((k_values == 0).sum()), q8.nbytes):
                failures.append(f"attn_k reported as {k}")
            n = report["blk.0.attn_norm.weight"]
            if (n["dtype"], n["shape"], n["sparsest_pattern"]) != ("F32", [64], None):
                failures.append(f"attn_norm reported as {n}")
            table = subprocess.run([args.nmkit, "inspect", path], capture_output=True, text=True)
            if table.returncode != 0 or "Q8_0" not in table.stdout:
                failures.append(f"table: {table.stdout} {table.stderr}")

        garbage = os.path.join(tmp, "notes.txt")
        with open(garbage, "wb") as f:
            f.write(b"just some text, long enough\n")
        truncated = os.path.join(tmp, "cut.gguf")
        with open(path, "rb") as f, open(truncated, "wb") as g:
            g.write(f.read()[:100])
        for bad, needle in ((garbage, "not a safetensors or GGUF file"), (truncated, "truncated")):
            run = subprocess.run([args.nmkit, "inspect", bad], capture_output=True, text=True)
            lines = run.stderr.strip().splitlines()
            if run.returncode != 1 or len(lines) != 1 or bad not in lines[0] or needle not in lines[0] or run.stdout:
                failures.append(f"inspect {bad}: exit {run.returncode}, stdout {run.stdout!r}, stderr {run.stderr!r}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
