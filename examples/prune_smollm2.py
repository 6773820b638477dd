#!/usr/bin/env python3
"""Prune SmolLM2-135M to 6:8 with SparseGPT from Python, print its perplexity before and after, and run
one pruned layer on a torch tensor (on a numpy array when torch is not installed).

Every step is one call of nmkit's C++ library:
  nmkit.Model.load / .perplexity   the dense model's perplexity (llama.cpp's protocol, as `nmkit eval`);
  nmkit.prune_model                SparseGPT 6:8, calibrated block by block on the project's calibration
                                   text, written as a Hugging Face folder (as `nmkit prune MODEL -o DIR/`);
  nmkit.Model.load / .perplexity   the pruned model's perplexity;
  nmkit.load_safetensors           the pruned folder's weights, viewed in place;
  nmkit.SparseLinear               one pruned MLP weight packed 6:8 (nm) for this CPU, applied to a tensor.

Usage: python3 examples/prune_smollm2.py [--chunks 8] [--out DIR]
(run from the repository root after `pip install .`; the model and texts are fetched into .cache/ by
scripts/fetch_model.sh and scripts/fetch_texts.sh, which this script calls).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import nmkit

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def fetch(script, *args):
    """Path printed by one of the project's fetch scripts (relative to the repository root)."""
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts", script), *args], check=True, capture_output=True,
                         text=True, cwd=ROOT).stdout.strip()
    return os.path.join(ROOT, out)


def progress_line(stage, done, total):
    """A progress line on a terminal; quiet when piped."""
    if sys.stderr.isatty():
        print(f"\r[{done}/{total}] {stage}   ", end="" if done < total else "\n", file=sys.stderr, flush=True)


def perplexity(path, text, chunks):
    model = nmkit.Model.load(path, progress=progress_line)
    t0 = time.perf_counter()
    result = model.perplexity(text, ctx=512, chunks=chunks, progress=progress_line)
    return result.perplexity, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=8, help="chunks of 512 tokens of the evaluation text")
    ap.add_argument("--out", help="folder for the pruned model (default: a temporary folder)")
    args = ap.parse_args()

    model = fetch("fetch_model.sh")
    eval_text = open(fetch("fetch_texts.sh", "eval"), encoding="utf-8").read()
    calib = fetch("fetch_texts.sh", "calib")
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or os.path.join(tmp, "smollm2-6of8")

        before, seconds = perplexity(model, eval_text, args.chunks)
        print(f"dense:           perplexity {before:.4f} ({args.chunks} chunks of 512, {seconds:.1f} s)")

        t0 = time.perf_counter()
        report = nmkit.prune_model(model, out, "6:8", method="sparsegpt", calib=calib, progress=progress_line)
        worst = max(report.linears, key=lambda l: l.output_error)
        print(f"sparsegpt 6:8:   {len(report.linears)} linears, sparsity {report.total.sparsity_percent:.2f}%, "
              f"weight relative error {report.total.relative_error:.4f}, worst output error "
              f"{worst.output_error:.4f} ({worst.name}), {time.perf_counter() - t0:.1f} s")

        after, seconds = perplexity(out, eval_text, args.chunks)
        print(f"pruned 6:8:      perplexity {after:.4f} ({after / before - 1:+.1%} against dense, {seconds:.1f} s)")

        # One pruned layer from the written folder, packed 6:8 for this CPU and run on a tensor.
        weights = nmkit.load_safetensors(os.path.join(out, "model.safetensors"))
        w = weights["model.layers.0.mlp.down_proj.weight"]  # [576, 1536], read-only view of the file
        w = w if w.dtype == np.float32 else w.astype(np.float32)
        layer = nmkit.SparseLinear(w, format="nm", pattern="6:8")
        try:
            import torch
            x = torch.randn(4, w.shape[1], generator=torch.Generator().manual_seed(0))
            y = layer(x)  # torch in, torch out
            reference = x.double() @ torch.tensor(w, dtype=torch.float64).T  # a copy: w is read-only
            error = ((y.double() - reference).norm() / reference.norm()).item()
            kind = f"torch {tuple(y.shape)} {y.dtype}"
        except ImportError:
            x = np.random.default_rng(0).standard_normal((4, w.shape[1]), dtype=np.float32)
            y = layer(x)
            reference = x.astype(np.float64) @ w.astype(np.float64).T
            error = float(np.linalg.norm(y - reference) / np.linalg.norm(reference))
            kind = f"numpy {y.shape} {y.dtype} (torch is not installed)"
        print(f"layer 0 down_proj as {layer.kernel_name(4)}: {kind}, relative error {error:.1e} against float64, "
              f"{layer.bytes_streamed(1)} bytes per token ({layer.byte_ratio(1):.2f}x fewer than dense)")


if __name__ == "__main__":
    main()
