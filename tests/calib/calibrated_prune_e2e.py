#!/usr/bin/env python3
"""End-to-end calibrated pruning of a tiny generated llama model (issue 11, docs/design.md 12).

A random llama (2 blocks, GQA, K not a multiple of 8 in the MLP so tail groups occur) with a
byte-level GPT-2 vocabulary is written with the PyPI `gguf` package, then:
  - `nmkit prune MODEL -o OUT.gguf --method sparsegpt|wanda|magnitude --calib TEXT`: the output,
    read back with gguf.GGUFReader, keeps the metadata and tensor order, leaves every non-linear
    tensor unchanged, and every block linear complies with the pattern; the report holds one entry
    per linear with the output error (sparsegpt, wanda) and seconds;
  - Wanda on block 0's q/k/v, whose inputs need no pruned block before them, equals the mask that
    numpy computes independently: tokens (the vocabulary has no merges that the text can use, so a
    token is a byte), the evenly spaced calibration windows, embedding, RMSNorm, a[k] = ||x_k||, and
    the design section 2 selection;
  - a calibration text shorter than one sequence is a one-line error, exit 1, and no output file;
  - a GGUF model written as a lone .safetensors file is refused (it takes a folder, -o DIR/);
  - bad input of issue 11 (a model without the blocks its metadata names, NaN reaching the Hessian,
    an infinite weight, patterns no method or format can do): a one-line error naming the layer
    and value, exit 1, and neither a GGUF nor a folder written;
  - `nmkit bench accuracy` on the tiny model prints every row with its pruning split and the decode
    tokens/s of each pattern's form;
  - a Hugging Face folder of the same model (HF names, q/k rows in HF's rotate-half order) pruned by
    magnitude comes back as safetensors under the HF names and row order, equal to numpy's section 2
    pruning of the HF tensors (so the q/k rows went back where they came from).

Usage: calibrated_prune_e2e.py --nmkit PATH/TO/nmkit
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
from tiny_llama import P, read_gguf, read_safetensors, write_hf, write_model  # noqa: E402

SEQS, LEN = 6, 32


def wanda_mask(w, a, keep, group):
    """docs/design.md 2: score fabsf(w) * a in float32; ties by |w|, then the lower index; tails padded."""
    rows, K = w.shape
    score = (np.abs(w).astype(np.float32) * a.astype(np.float32)[None, :]).astype(np.float32)
    kept = np.zeros_like(w, dtype=bool)
    for r in range(rows):
        for g0 in range(0, K, group):
            idx = list(range(g0, min(K, g0 + group)))
            idx.sort(key=lambda k: (-score[r, k], -abs(w[r, k]), k))
            for k in idx[:keep]:
                kept[r, k] = True
    return kept


def calib_tokens(text_bytes):
    n = len(text_bytes)
    n_seq = min(SEQS, n // LEN)
    stride = n // n_seq
    return np.array([list(text_bytes[i * stride:i * stride + LEN]) for i in range(n_seq)]).reshape(-1)


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if expect_ok and p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmkit", required=True)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    print(f"seed={args.seed}")
    rng = np.random.default_rng(args.seed)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "tiny.gguf")
        src = write_model(model, rng)
        words = ["the", "boy", "fence", "paint", "Tom", "aunt", "Polly", "river", "cave", "gold"]
        text = " ".join(words[i] for i in rng.integers(0, len(words), 600)) + ".\n"
        calib = os.path.join(tmp, "calib.txt")
        with open(calib, "w") as f:
            f.write(text)
        _, _, src_keys = read_gguf(model)
        src_order = list(src.keys())
        # The last: Wanda with dense targets (docs/design.md 12.4), whose retarget moves the kept weights.
        for run_i, (method, pattern, extra) in enumerate((("sparsegpt", "2:4", []), ("wanda", "6:8", []),
                                                          ("magnitude", "3:7", []), ("sparsegpt", "3:7", []),
                                                          ("wanda", "2:4", ["--dense-targets", "0.5"]))):
            keep, group = map(int, pattern.split(":"))
            out = os.path.join(tmp, f"out-{method}-{run_i}.gguf")
            report = os.path.join(tmp, f"r-{method}-{run_i}.json")
            moves = method == "sparsegpt" or bool(extra)
            run([args.nmkit, "prune", model, "-o", out, "--pattern", pattern, "--method", method,
                 "--calib", calib, "--calib-seqs", str(SEQS), "--calib-len", str(LEN),
                 "--report", report] + extra)
            _, got, keys = read_gguf(out)
            if list(got.keys()) != src_order:
                failures.append(f"{method}: tensor order {list(got.keys())} != {src_order}")
            # The source's metadata in its order; general.file_type (llama.cpp's F32 file type, 0) added
            # when the source has none.
            if keys != src_keys + ["general.file_type"]:
                failures.append(f"{method}: metadata keys {keys} != {src_keys} + general.file_type")
            linears = [n for n in src_order if n.startswith("blk.") and
                       n.split(".")[2] in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate",
                                           "ffn_up", "ffn_down")]
            for name, value in src.items():
                g = got[name]
                if name not in linears:
                    if not np.array_equal(g, value):
                        failures.append(f"{method}: {name} changed")
                    continue
                K = g.shape[1]
                for g0 in range(0, K, group):
                    nz = (g[:, g0:g0 + group] != 0).sum(axis=1)
                    if nz.max() > keep:
                        failures.append(f"{method}: {name} group at {g0} has {nz.max()} non-zeros")
                        break
                kept = g != 0
                # Dense targets: block 0's two streams are one, so its weights move by rounding at most.
                moved_here = moves and not (extra and name.startswith("blk.0."))
                if not moves and not np.array_equal(g[kept], value[kept]):
                    failures.append(f"{method}: {name} kept weights changed")
                if moved_here and np.array_equal(g[kept], value[kept]):
                    failures.append(f"{method}: {name} kept weights did not move")
            with open(report) as f:
                rep = json.load(f)
            entries = {e["name"]: e for e in rep["linears"]}
            if sorted(entries) != sorted(linears):
                failures.append(f"{method}: report names {sorted(entries)}")
            for name, e in entries.items():
                if method != "magnitude" and not (0 <= e["output_error"] < 1.0):
                    failures.append(f"{method}: {name} output_error {e['output_error']}")
                if e["seconds"] < 0 or abs(e["sparsity_percent"] - 100 * e["pruned_count"] / e["total_count"]) > 1e-9:
                    failures.append(f"{method}: {name} report entry {e}")
            if method == "wanda" and not extra:  # block 0 against numpy (dense targets move it by rounding)
                tokens = calib_tokens(text.encode())
                x = src["token_embd.weight"][tokens].astype(np.float64)
                xn = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + P["rms_eps"]) \
                    * src["blk.0.attn_norm.weight"]
                a = np.sqrt((xn * xn).sum(axis=0)).astype(np.float32)
                for name in ("blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"):
                    want = wanda_mask(src[name], a, keep, group)
                    # a[k] in float32 from nmkit's float32 activations: a score tie broken by a
                    # last-bit difference would be a legitimate disagreement; count, allow none here.
                    diff = int((want != (got[name] != 0)).sum())
                    if diff:
                        failures.append(f"wanda: {name} mask differs from numpy in {diff} places")
        # Bad input: a calibration text shorter than one sequence.
        short = os.path.join(tmp, "short.txt")
        with open(short, "w") as f:
            f.write("too short")
        out = os.path.join(tmp, "never.gguf")
        p = run([args.nmkit, "prune", model, "-o", out, "--pattern", "2:4", "--method", "sparsegpt",
                 "--calib", short, "--calib-len", str(LEN)], expect_ok=False)
        if p.returncode != 1 or os.path.exists(out) or p.stderr.count("\n") != 1 or \
                "fewer than one sequence" not in p.stderr:
            failures.append(f"short calibration text: exit {p.returncode}, stderr {p.stderr!r}, "
                            f"output exists {os.path.exists(out)}")
        # Bad input of issue 11: each a one-line error naming the layer (or tensor) and the value,
        # exit 1, nothing written (neither the GGUF nor a Hugging Face folder).
        def poison(name, value):
            def edit(t):
                t[name][0, 3] = value
            return edit
        def overflow(t):
            for name in ("blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"):
                t[name] *= np.float32(1e25)
        bad_models = {
            "missing-block.gguf": (None, 3, ["blk.2.attn_norm.weight", "missing", "block_count = 3"]),
            "nan-embd.gguf": (poison("token_embd.weight", np.nan), None, ["token_embd.weight", "nan"]),
            # finite weights whose activations overflow: ffn_down's input, so its Hessian, is not finite
            "overflow.gguf": (overflow, None, ["layer 'blk.0.ffn_down.weight'", "calibration input at token", "feature"]),
            "inf-weight.gguf": (poison("blk.1.ffn_up.weight", np.inf), None,
                                ["blk.1.ffn_up.weight", "inf"]),
        }
        cases = []
        for name, (edit, blocks, wanted) in bad_models.items():
            path = os.path.join(tmp, name)
            write_model(path, np.random.default_rng(3), edit=edit, block_count=blocks)
            cases.append(([path, "--pattern", "2:4", "--method", "sparsegpt"], wanted))
        # A pattern no method can do, and one the run-time format cannot hold.
        cases.append(([model, "--pattern", "8:4", "--method", "sparsegpt"], ["--pattern", "'8:4'", "keep < group"]))
        cases.append(([model, "--pattern", "70:128", "--method", "wanda"], ["--pattern", "'70:128'", "group <= 64"]))
        cases.append(([model, "--pattern", "2:4", "--method", "wanda", "--dense-targets", "1.5"],
                      ["--dense-targets 1.5", "outside 0..1"]))
        for i, (argv, wanted) in enumerate(cases):
            for out in (os.path.join(tmp, f"bad{i}.gguf"), os.path.join(tmp, f"bad{i}-hf") + "/"):
                p = run([args.nmkit, "prune", argv[0], "-o", out] + argv[1:] +
                        ["--calib", calib, "--calib-seqs", str(SEQS), "--calib-len", str(LEN)], expect_ok=False)
                left = [n for n in os.listdir(tmp) if n.startswith(f"bad{i}")]
                if p.returncode != 1 or left or p.stderr.count("\n") != 1 or \
                        not all(w in p.stderr for w in wanted):
                    failures.append(f"bad input {argv} -> {out}: exit {p.returncode}, stderr {p.stderr!r}, "
                                    f"left {left}, wanted {wanted}")
        p = run([args.nmkit, "eval", model, "--text", calib, "--ctx", "32", "--pattern", "6:8", "--format", "sparse24",
                 "--method", "sparsegpt", "--calib", calib, "--calib-seqs", str(SEQS), "--calib-len", str(LEN)],
                expect_ok=False)
        if p.returncode != 1 or p.stderr.count("\n") != 1 or "sparse24 needs pattern 2:4, not 6:8" not in p.stderr:
            failures.append(f"eval 6:8 as sparse24: exit {p.returncode}, stderr {p.stderr!r}")
        # The accuracy table runs end to end on the tiny model: every row has its perplexity, each
        # calibrated row its pruning split, each pattern its form's decode speed.
        acc = os.path.join(tmp, "accuracy.json")
        p = run([args.nmkit, "bench", "accuracy", model, "--text", calib, "--calib", calib, "--ctx", "32",
                 "--chunks", "1", "--calib-seqs", str(SEQS), "--calib-len", str(LEN), "--patterns", "2:4,6:8",
                 "--methods", "magnitude,sparsegpt", "--admm", "2:4", "--decode", "4", "--rounds", "1", "--json", acc])
        with open(acc) as f:
            doc = json.load(f)
        rows = doc["rows"]
        if [(r["pattern"], r["method"]) for r in rows] != [("dense", "-"), ("2:4", "magnitude"), ("2:4", "sparsegpt"),
                                                           ("2:4", "admm"), ("6:8", "magnitude"), ("6:8", "sparsegpt")]:
            failures.append(f"bench accuracy rows {rows}")
        forms = {"dense": ["f32 dense", "int8 dense"], "2:4": ["f32 sparse24", "int8 sparse24"],
                 "6:8": ["f32 nm", "int8 slid"]}
        for r in rows:
            speeds = r.get("decode_tps", {})
            if not (r["perplexity"] > 1 and sorted(speeds) == sorted(forms[r["pattern"]]) and
                    all(v > 0 for v in speeds.values())):
                failures.append(f"bench accuracy row {r}")
            if r["method"] == "sparsegpt" and not (r["prune_times"]["cholesky"] >= 0 and r["prune_times"]["total"] > 0):
                failures.append(f"bench accuracy pruning split {r}")
        if "decode tok/s" not in p.stdout or "f32 sparse24" not in p.stdout or "f32 nm" not in p.stdout:
            failures.append(f"bench accuracy table: {p.stdout}")
        # The chart's points: every form of every row evaluated as itself (the int8 perplexity of the
        # int8 form, not the f32 one's), with its decode speed and weight bytes.
        points = {pt["name"]: pt for pt in doc["points"]}
        wanted = ["f32 dense", "bf16 dense", "int8 dense"] + [
            f"{m} {w}" for m, w in [("magnitude", "f32 2:4 sparse24"), ("magnitude", "int8 2:4 sparse24"),
                                    ("sparsegpt", "f32 2:4 sparse24"), ("sparsegpt", "int8 2:4 sparse24"),
                                    ("admm", "f32 2:4 sparse24"), ("admm", "int8 2:4 sparse24"),
                                    ("magnitude", "f32 6:8 nm"), ("magnitude", "int8 6:8 slid"),
                                    ("sparsegpt", "f32 6:8 nm"), ("sparsegpt", "int8 6:8 slid")]]
        if [pt["name"] for pt in doc["points"]] != wanted:
            failures.append(f"bench accuracy points {list(points)}")
        elif not all(pt["perplexity"] > 1 and pt["decode_tps"] > 0 and pt["weight_bytes"] > 0 for pt in points.values()):
            failures.append(f"bench accuracy points {doc['points']}")
        else:
            for row in rows:
                f32 = points["f32 dense" if row["method"] == "-" else
                             f"{row['method']} f32 {row['pattern']} {'sparse24' if row['pattern'] == '2:4' else 'nm'}"]
                i8 = points["int8 dense" if row["method"] == "-" else
                            f"{row['method']} int8 {row['pattern']} {'sparse24' if row['pattern'] == '2:4' else 'slid'}"]
                if f32["perplexity"] != row["perplexity"] or i8["perplexity"] == f32["perplexity"] or \
                        not i8["weight_bytes"] < f32["weight_bytes"]:
                    failures.append(f"bench accuracy f32/int8 points of {row}: {f32}, {i8}")
            # --resume takes every row of the earlier JSON as it was (nothing run again; here no
            # decode pass either) and refuses a JSON of other settings, naming the key.
            acc_args = [args.nmkit, "bench", "accuracy", model, "--text", calib, "--calib", calib, "--ctx", "32",
                        "--calib-seqs", str(SEQS), "--calib-len", str(LEN), "--patterns", "2:4,6:8",
                        "--methods", "magnitude,sparsegpt", "--admm", "2:4", "--decode", "0"]
            acc2 = os.path.join(tmp, "accuracy2.json")
            p = run(acc_args + ["--chunks", "1", "--resume", acc, "--json", acc2])
            with open(acc2) as f:
                doc2 = json.load(f)
            def strip(rs):
                return [{k: v for k, v in r.items() if k != "decode_tps"} for r in rs]
            if not doc2["complete"] or strip(doc2["rows"]) != strip(rows) or \
                    [(q["name"], q["perplexity"]) for q in doc2["points"]] != [(q["name"], q["perplexity"]) for q in doc["points"]] or \
                    p.stderr.count("from " + acc) != len(rows):
                failures.append(f"bench accuracy --resume: {doc2}, stderr {p.stderr!r}")
            p = run(acc_args + ["--chunks", "2", "--resume", acc], expect_ok=False)
            if p.returncode != 1 or p.stderr.count("\n") != 1 or "chunks is 1, this run's 2" not in p.stderr:
                failures.append(f"bench accuracy --resume of other chunks: exit {p.returncode}, stderr {p.stderr!r}")
            # Options later runs added: absent from an older JSON means off, present must match.
            for extra, wanted in ((["--permute"], "permute is false, this run's true"),
                                  (["--dense-targets", "0.5"], "dense_targets is 0.0, this run's 0.5")):
                p = run(acc_args + ["--chunks", "1", "--resume", acc] + extra, expect_ok=False)
                if p.returncode != 1 or p.stderr.count("\n") != 1 or wanted not in p.stderr:
                    failures.append(f"bench accuracy --resume with {extra}: exit {p.returncode}, stderr {p.stderr!r}")
            older = os.path.join(tmp, "accuracy-older.json")
            with open(older, "w") as f:
                json.dump({k: v for k, v in doc.items() if k not in ("swaps", "dense_targets")}, f)
            p = run(acc_args + ["--chunks", "1", "--resume", older], expect_ok=False)
            if p.returncode != 0:
                failures.append(f"bench accuracy --resume of a JSON without swaps/dense_targets: stderr {p.stderr!r}")
            size = {name: pt["weight_bytes"] for name, pt in points.items()}
            if not (size["f32 dense"] > size["bf16 dense"] > size["int8 dense"] and
                    size["f32 dense"] > size["magnitude f32 6:8 nm"] > size["magnitude f32 2:4 sparse24"]):
                failures.append(f"bench accuracy weight bytes {size}")
        # A GGUF model as a lone safetensors file would have no config.json or tokenizer: refused
        # before any work, with the folder form named.
        lone = os.path.join(tmp, "lone.safetensors")
        p = run([args.nmkit, "prune", model, "-o", lone, "--pattern", "2:4"], expect_ok=False)
        if (p.returncode != 1 or os.path.exists(lone) or p.stderr.count("\n") != 1 or "-o " + lone not in p.stderr
                or "give a folder, DIR/" not in p.stderr):
            failures.append(f"gguf to .safetensors: exit {p.returncode}, stderr {p.stderr!r}")
        # A Hugging Face folder in, safetensors out under the HF names and row order.
        hf_dir = os.path.join(tmp, "hf")
        hf = write_hf(hf_dir, src)
        out = os.path.join(tmp, "hf-out.safetensors")
        run([args.nmkit, "prune", hf_dir, "-o", out, "--pattern", "2:4", "--method", "magnitude"])
        got = read_safetensors(out)
        if sorted(got) != sorted(hf):
            failures.append(f"hf: names {sorted(got)}")
        for name, value in hf.items():
            if value.ndim == 2 and ".layers." in name:
                ones = np.ones(value.shape[1], dtype=np.float32)
                want = np.where(wanda_mask(value, ones, 2, 4), value, 0)  # a = 1: magnitude
            else:
                want = value
            if name in got and not np.array_equal(got[name], want):
                failures.append(f"hf: {name} differs from numpy magnitude 2:4 of the HF tensor")
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("calibrated prune end to end: ok")


if __name__ == "__main__":
    main()
