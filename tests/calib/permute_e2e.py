#!/usr/bin/env python3
"""`nmkit prune MODEL --permute` writes a standard llama (docs/design.md 12.2), checked with numpy.

A tiny random llama GGUF (tests/model/tiny_llama.py) is pruned by magnitude 2:4 with --permute and
read back with the PyPI gguf package. Independently of nmkit: every tensor but the block linears is
unchanged; q and k are the magnitude pruning of the originals; the rows of gate give the ffn order p
(matched against numpy's pruning of the original rows), and up's rows and down's columns follow the
same p (down pruned after its columns moved); v's rows give each kv head's order, and attn_output's
columns follow it for every query head reading that kv head; the mask of down keeps at least the
magnitude that the unpermuted mask keeps.

Usage: permute_e2e.py --nmkit PATH/TO/nmkit
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from tiny_llama import P, read_gguf, write_model  # noqa: E402

KEEP, GROUP = 2, 4


def magnitude(w):
    """docs/design.md 2 for |w| without ties (random floats): the KEEP largest of each group."""
    out = np.zeros_like(w)
    rows, K = w.shape
    for g0 in range(0, K, GROUP):
        block = w[:, g0:g0 + GROUP]
        idx = np.argsort(-np.abs(block), axis=1, kind="stable")[:, :KEEP]
        for r in range(rows):
            out[r, g0 + idx[r]] = block[r, idx[r]]
    return out


def row_order(got, pruned_rows):
    """For each row of `got`, the row of `pruned_rows` equal to it (an order), or None."""
    index = {pruned_rows[j].tobytes(): j for j in range(pruned_rows.shape[0])}
    order = [index.get(got[i].tobytes()) for i in range(got.shape[0])]
    return None if None in order or sorted(order) != list(range(len(order))) else np.array(order)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmkit", required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(5)
    failures = []
    d, hd = P["n_embd"], P["n_embd"] // P["n_head"]
    per_kv = P["n_head"] // P["n_head_kv"]
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny.gguf")
        src = write_model(model, rng)
        out = os.path.join(tmp, "out.gguf")
        p = subprocess.run([args.nmkit, "prune", model, "-o", out, "--pattern", f"{KEEP}:{GROUP}", "--method",
                            "magnitude", "--permute"], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"FAIL: nmkit prune --permute: exit {p.returncode}\n{p.stderr}")
        _, got, _ = read_gguf(out)
        moved = 0
        for name, value in src.items():
            parts = name.split(".")
            linear = parts[2] if name.startswith("blk.") else None
            if linear not in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
                if not np.array_equal(got[name], value):
                    failures.append(f"{name} changed")
        for b in range(P["n_layer"]):
            t = {k: src[f"blk.{b}.{k}.weight"] for k in ("attn_q", "attn_k", "attn_v", "attn_output",
                                                          "ffn_gate", "ffn_up", "ffn_down")}
            g = {k: got[f"blk.{b}.{k}.weight"] for k in t}
            for k in ("attn_q", "attn_k"):
                if not np.array_equal(g[k], magnitude(t[k])):
                    failures.append(f"blk.{b}.{k}: not the unpermuted magnitude pruning")
            ffn = row_order(g["ffn_gate"], magnitude(t["ffn_gate"]))
            if ffn is None:
                failures.append(f"blk.{b}.ffn_gate: rows are no order of the pruned original's")
                continue
            moved += int(np.any(ffn != np.arange(len(ffn))))
            if not np.array_equal(g["ffn_up"], magnitude(t["ffn_up"])[ffn]):
                failures.append(f"blk.{b}.ffn_up: rows not in gate's order")
            if not np.array_equal(g["ffn_down"], magnitude(t["ffn_down"][:, ffn])):
                failures.append(f"blk.{b}.ffn_down: not the pruning of its columns in gate's order")
            if np.abs(g["ffn_down"]).sum() < np.abs(magnitude(t["ffn_down"])).sum() * (1 - 1e-6):
                failures.append(f"blk.{b}.ffn_down: the permuted mask keeps less than the original's")
            value = row_order(g["attn_v"], magnitude(t["attn_v"]))
            if value is None or any(value[i] // hd != i // hd for i in range(len(value))):
                failures.append(f"blk.{b}.attn_v: rows are no order within each kv head")
                continue
            moved += int(np.any(value != np.arange(len(value))))
            cols = np.array([h * hd + value[(h // per_kv) * hd + i] - (h // per_kv) * hd
                             for h in range(P["n_head"]) for i in range(hd)])
            if not np.array_equal(g["attn_output"], magnitude(t["attn_output"][:, cols])):
                failures.append(f"blk.{b}.attn_output: columns not in the values' order per query head")
        if moved == 0:
            failures.append("no block's order moved: the test checks nothing")
        if d % GROUP:
            failures.append("n_embd not whole groups")
    for f in failures:
        print("FAIL:", f)
    print("permute_e2e:", "FAIL" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
