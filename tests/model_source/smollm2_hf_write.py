#!/usr/bin/env python3
"""`nmkit prune SmolLM2.gguf -o DIR/` writes a Hugging Face folder that loads back (issue 11 / 10,
docs/design.md section 11.1 "Writing a Hugging Face folder").

SmolLM2 (scripts/fetch_model.sh) cut to its first --layers blocks by gguf_to_hf.py (the gguf
package, independently of nmkit) is pruned by magnitude to 2:4 twice, to a GGUF file and to a
folder. Checks:
  - the folder holds config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
    generation_config.json; config.json agrees with gguf_to_hf.py's independent config;
  - model.safetensors (read here by hand) has exactly the HF names gguf_to_hf.py gives, the
    non-pruned tensors equal its numpy conversion bit for bit, and every pruned linear keeps 2 of
    each 4 with the kept values equal to numpy's un-permuted HF rows (so the q/k rows are in HF's
    order);
  - the written tokenizer.json gives nmkit (from_hf_json) the ids of the GGUF tokenizer
    (from_gguf) on a paragraph with digits, punctuation, whitespace runs, non-ASCII and emoji, and
    the PyPI `tokenizers` package loading the same tokenizer.json gives those ids too, and decodes
    them back to the text;
  - `nmkit eval DIR` and `nmkit generate DIR` print the perplexity and text of the pruned GGUF;
  - the folder pruned again (a Hugging Face source) into a folder keeps its weights, config.json
    and tokenizer files.
Prints "SKIP: reason" when the model cannot be fetched.

Usage: smollm2_hf_write.py --nmkit PATH --probe PATH/TO/nmkit_tokenize_probe
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import gguf_to_hf  # noqa: E402

PARAGRAPH = ("In 1891, Holmes paid £3 14s. 6d. for 221B's rent — \"quite enough!\" said he.  Naïve "
             "façades, Zürich's Straße, 東京 and 😀🚀 emoji;\ttabs,\n\nnew lines...   and 12345678 "
             "digits (3.14159, -42, 1e-5). It's what we'll do, isn't it? ¿Qué pasa? Ελληνικά.")


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(info["shape"])
    return header.get("__metadata__", {}), list(n for n in header if n != "__metadata__"), out


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    return p.stdout


def probe_ids(probe, source, text, tmp):
    texts, out = os.path.join(tmp, "texts.json"), os.path.join(tmp, "ids.json")
    with open(texts, "w") as f:
        json.dump([text], f)
    run([probe, source, texts, out])
    with open(out) as f:
        return json.load(f)[0]["ids"]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nmkit", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--layers", type=int, default=1)
    args = ap.parse_args()
    fetch = subprocess.run([os.path.join(ROOT, "scripts", "fetch_model.sh")], capture_output=True, text=True)
    if fetch.returncode != 0:
        print("SKIP: scripts/fetch_model.sh could not fetch SmolLM2:", fetch.stderr.strip().replace("\n", " | "))
        return 0
    model = os.path.join(ROOT, fetch.stdout.strip())
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        small, ref_dir = os.path.join(tmp, "small.gguf"), os.path.join(tmp, "ref")
        ref_config, _ = gguf_to_hf.convert(model, ref_dir, layers=args.layers, shards=1, gguf_out=small)
        _, ref_names, ref = read_safetensors(os.path.join(ref_dir, "model.safetensors"))
        out_dir, out_gguf = os.path.join(tmp, "pruned-hf") + "/", os.path.join(tmp, "pruned.gguf")
        for out in (out_dir, out_gguf):
            run([args.nmkit, "prune", small, "-o", out, "--pattern", "2:4", "--method", "magnitude"])
        files = sorted(os.listdir(out_dir))
        want_files = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                      "tokenizer_config.json"]
        if files != want_files:
            failures.append(f"folder holds {files}, expected {want_files}")
        if any(".tmp." in n for n in os.listdir(tmp)):
            failures.append(f"a temporary was left: {os.listdir(tmp)}")
        with open(os.path.join(out_dir, "config.json")) as f:
            config = json.load(f)
        for key, value in ref_config.items():
            if config.get(key) != value:
                failures.append(f"config.json {key}: {config.get(key)!r}, gguf_to_hf.py gives {value!r}")
        metadata, names, got = read_safetensors(os.path.join(out_dir, "model.safetensors"))
        if metadata.get("format") != "pt":
            failures.append(f"safetensors metadata {metadata}")
        if sorted(names) != sorted(ref_names):
            failures.append(f"tensor names {sorted(names)[:4]}... != gguf_to_hf.py's {sorted(ref_names)[:4]}...")
        for name in ref_names:
            if name not in got:
                continue
            g, r = got[name], ref[name]
            if g.shape != r.shape:
                failures.append(f"{name}: shape {g.shape} != {r.shape}")
                continue
            if "_proj." not in name:
                if not np.array_equal(g, r):
                    failures.append(f"{name}: differs from gguf_to_hf.py's tensor")
                continue
            kept = g != 0
            per_group = kept.reshape(g.shape[0], -1, 4).sum(axis=2)
            if per_group.max() > 2 or kept.sum() < 0.49 * g.size:
                failures.append(f"{name}: not 2:4 (max {per_group.max()} kept per group, {kept.sum()} of {g.size})")
            if not np.array_equal(g[kept], r[kept]):
                failures.append(f"{name}: kept values differ from the numpy HF rows (row order?)")

        # The folder is itself a source: pruned again to 2:4 (nothing more to prune) into a folder, it
        # comes back with the same weights, and its tokenizer files and config.json copied as they were.
        again = os.path.join(tmp, "again")
        run([args.nmkit, "prune", out_dir, "-o", again, "--pattern", "2:4", "--method", "magnitude"])
        if sorted(os.listdir(again)) != want_files:
            failures.append(f"re-pruned folder holds {sorted(os.listdir(again))}")
        for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            with open(os.path.join(out_dir, name), "rb") as a, open(os.path.join(again, name), "rb") as b:
                if json.loads(a.read()) != json.loads(b.read()):
                    failures.append(f"re-pruned folder: {name} differs")
        _, _, twice = read_safetensors(os.path.join(again, "model.safetensors"))
        if sorted(twice) != sorted(got) or any(not np.array_equal(twice[n], got[n]) for n in got):
            failures.append("re-pruned folder: weights differ")

        # Tokenizer: GGUF (nmkit) == written tokenizer.json (nmkit) == written tokenizer.json (tokenizers).
        from tokenizers import Tokenizer as HfTokenizer
        ids_gguf = probe_ids(args.probe, small, PARAGRAPH, tmp)
        ids_json = probe_ids(args.probe, os.path.join(out_dir, "tokenizer.json"), PARAGRAPH, tmp)
        hf_tok = HfTokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
        ids_hf = hf_tok.encode(PARAGRAPH, add_special_tokens=False).ids
        print(f"paragraph: {len(PARAGRAPH)} chars, {len(ids_gguf)} tokens")
        if ids_json != ids_gguf:
            failures.append(f"nmkit ids from the written tokenizer.json differ from the GGUF's: {ids_json[:20]} vs {ids_gguf[:20]}")
        if ids_hf != ids_gguf:
            failures.append(f"tokenizers' ids differ from the GGUF's: {ids_hf[:20]} vs {ids_gguf[:20]}")
        if hf_tok.decode(ids_hf, skip_special_tokens=False) != PARAGRAPH:
            failures.append("tokenizers does not decode the ids back to the paragraph")
        with open(os.path.join(out_dir, "tokenizer_config.json")) as f:
            tok_config = json.load(f)
        if tok_config.get("eos_token") != "<|im_end|>" or "<|im_start|>" not in tok_config.get("chat_template", ""):
            failures.append(f"tokenizer_config.json: eos {tok_config.get('eos_token')!r}, chat template missing")

        # The folder runs: eval and generate agree with the pruned GGUF.
        text = os.path.join(tmp, "eval.txt")
        with open(text, "w") as f:
            f.write((PARAGRAPH + "\n") * 3)
        results = {}
        for label, path in (("gguf", out_gguf), ("hf", out_dir)):
            report = os.path.join(tmp, f"eval-{label}.json")
            run([args.nmkit, "eval", path, "--text", text, "--ctx", "64", "--chunks", "2", "--json", report])
            with open(report) as f:
                ppl = json.load(f)["perplexity"]
            gen = run([args.nmkit, "generate", path, "--prompt", "The capital of France is", "-n", "8"])
            results[label] = (ppl, gen.split("\n")[0])
        print("pruned gguf:", results["gguf"], "| pruned HF folder:", results["hf"])
        if results["gguf"] != results["hf"]:
            failures.append(f"eval/generate differ: {results}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("SmolLM2 pruned to a Hugging Face folder: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
