#!/usr/bin/env python3
"""Peak memory of `nmkit prune` against the model's own sizes (docs/design.md 12 and 11.7, issue 25).

A random-weight llama of the `test` shape (scripts/make_scale_model.py: hidden 1024, 4 blocks, ffn
4096, SmolLM2's vocabulary; 220 MB in BF16) is pruned 6:8 by Wanda (bf16 output) in a child
process whose peak RSS the kernel reports (wait4's ru_maxrss). The calibration model runs on the
file's bf16 weights in place and the writer takes each block as it is pruned, so the run must stay
within

    1.10 x the model's tensor bytes + the output + one block's statistics + the fixed cost + 32 MiB

where the output counts because a file under 1 GiB is mapped whole while it is written
(io::kPopulateLimit), one block's statistics are what Wanda holds while it prunes a block: the
f64 Hessians of the first calibration tokens of its four inputs for the output error (q/k/v, o,
gate/up: hidden^2 each; down: ffn^2) and a copy of the largest, the block's pruned f32 weights
waiting for the writer, one linear's f32 weight with its pruned copy, and the hidden states of the
calibration tokens (twice); the fixed cost is the peak RSS of the same command on the `tiny`
shape (code, libraries, the tokenizer, the text). The earlier keep_dense_weights path (an f32
model and a dense f32 copy of the block linears: 348 MB more here) does not fit in it. SparseGPT
holds the same plus its inverse Cholesky factor. To keep the test short only the attention linears
are pruned (--include attn_): the output error, rows x K^2 per linear, is most of the time, and the
feed-forward's would take 10 times longer; the model, its passes, the statistics of all four inputs
and the writer are those of a whole run.

Usage: prune_memory_bound.py --nmkit PATH/TO/nmkit
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "model"))
from scale_fixture import ROOT, fetched, make_scale_models, run_measured  # noqa: E402
HIDDEN, HEADS, KV_HEADS, FF, BLOCKS = 1024, 16, 4, 4096, 4  # the `test` shape
SEQS, LEN = 4, 128
MIB = 1 << 20


def tensor_bytes(path):
    """Bytes of the GGUF's tensor data (what the model holds when it reads them in place)."""
    import gguf
    return sum(int(t.n_bytes) for t in gguf.GGUFReader(path).tensors)


def run_prune(nmkit, model, text, out_dir):
    out = os.path.join(out_dir, "pruned.gguf")
    cmd = [nmkit, "prune", model, "-o", out, "--pattern", "6:8", "--method", "wanda", "--calib", text,
           "--calib-seqs", str(SEQS), "--calib-len", str(LEN), "--dtype", "bf16", "--include", "attn_"]
    code, stderr, rss = run_measured(cmd)
    if code not in (0, None) or not os.path.exists(out):
        sys.exit(f"FAIL {' '.join(cmd)}: exit {code}, {'output written' if os.path.exists(out) else 'no output'}: {stderr}")
    os.unlink(out)
    return rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmkit", required=True)
    args = ap.parse_args()
    tokenizer = fetched("fetch_model.sh")
    text = fetched("fetch_texts.sh", "calib")
    if not tokenizer or not text:
        print("SKIP: SmolLM2 (its tokenizer) or the calibration text could not be fetched")
        return 0
    models, error = make_scale_models(tokenizer, ("tiny", "test"))
    if error:
        sys.exit(f"FAIL {error}")
    text = os.path.join(ROOT, text)
    kv = KV_HEADS * (HIDDEN // HEADS)
    block_weights = 2 * HIDDEN * HIDDEN + 2 * kv * HIDDEN + 3 * FF * HIDDEN
    hessians = 8 * (3 * HIDDEN * HIDDEN + FF * FF)
    statistics = hessians + 8 * FF * FF + 4 * block_weights + 2 * 4 * FF * HIDDEN + 2 * 4 * SEQS * LEN * HIDDEN
    with tempfile.TemporaryDirectory() as tmp:
        fixed = run_prune(args.nmkit, models["tiny"], text, tmp)
        rss = run_prune(args.nmkit, models["test"], text, tmp)
    held = tensor_bytes(models["test"])
    output = held  # bf16 in, bf16 out
    bound = 1.10 * held + output + statistics + fixed + 32 * MIB
    ok = rss <= bound
    print(f"{'ok  ' if ok else 'FAIL'} prune wanda 6:8: peak RSS {rss / MIB:.1f} MiB, bound {bound / MIB:.1f} "
          f"(tensors {held / MIB:.1f}, output {output / MIB:.1f}, one block's statistics {statistics / MIB:.1f}, fixed {fixed / MIB:.1f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
