#!/usr/bin/env python3
"""nmkit on the real Gemma 3 270M (Q4_K_M; scripts/fetch_model.sh gemma3), only where it is already
fetched (SKIP otherwise: CI does not download its 253 MB), against llama.cpp:
  - perplexity of the first chunk of 512 tokens of the evaluation text within 0.1% of llama.cpp's
    (llama-perplexity on the F32 file of the same weights, docs/data.md: 38.1216);
  - token ids of the evaluation and calibration texts equal to llama-tokenize's (run live when
    .cache/llamacpp holds it; else their counts, 140,464 and 100,379, recorded from it);
  - greedy generation equal to llama.cpp's (its examples/simple on the F32 file, docs/data.md).
Checks what the tiny models of family_forward.py cannot: the 262k SentencePiece vocabulary, the real
weights' scale, the 5:1 local/global layer pattern and the window over a whole chunk.

Usage: gemma3_real.py --nmkit PATH/TO/nmkit --probe PATH/TO/nmkit_tokenize_probe
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LLAMACPP_PPL_CHUNK1 = 38.1216  # llama-perplexity -c 512 --chunks 1 -nr on gemma-3-270m.F32.gguf
LLAMACPP_TOKENS = {"eval": 140464, "calib": 100379}  # llama-tokenize --ids --no-bos
PROMPT = "The meaning of life is"
# examples/simple (greedy, F32 KV cache) on gemma-3-270m.F32.gguf with -n 24: the prompt and 24 tokens.
LLAMACPP_GREEDY = ("The meaning of life is not defined by the number of years you live, but by the quality "
                   "of your life.\n\nThe meaning of life is")


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmkit", required=True)
    ap.add_argument("--probe", required=True)
    args = ap.parse_args()
    r = run(["bash", os.path.join(ROOT, "scripts", "fetch_model.sh"), "gemma3", "--cached"])
    if r.returncode != 0:
        print("SKIP: Gemma 3 is not fetched (scripts/fetch_model.sh gemma3)")
        return 0
    model = os.path.join(ROOT, r.stdout.strip())
    texts = {}
    for kind in ("eval", "calib"):
        r = run(["bash", os.path.join(ROOT, "scripts", "fetch_texts.sh"), kind])
        if r.returncode != 0:
            print("SKIP: the texts cannot be fetched")
            return 0
        texts[kind] = os.path.join(ROOT, r.stdout.strip())
    ok = True

    r = run([args.nmkit, "eval", model, "--text", texts["eval"], "--chunks", "1"])
    m = re.search(r"perplexity ([0-9.]+)", r.stdout)
    ppl = float(m.group(1)) if m else float("nan")
    good = r.returncode == 0 and abs(ppl / LLAMACPP_PPL_CHUNK1 - 1) <= 0.001
    print(f"{'ok' if good else 'FAIL':4} perplexity, chunk 1: nmkit {ppl}, llama.cpp {LLAMACPP_PPL_CHUNK1} "
          f"({100 * (ppl / LLAMACPP_PPL_CHUNK1 - 1):+.3f}%) {r.stderr.strip()[-200:]}")
    ok &= good

    llama_tokenize = os.path.join(ROOT, ".cache", "llamacpp", "build", "bin", "llama-tokenize")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, path in texts.items():
            with open(path, "rb") as f:
                data = f.read()
            with open(os.path.join(tmp, "texts.json"), "w") as f:
                json.dump([{"hex": data.hex()}], f)
            r = run([args.probe, model, os.path.join(tmp, "texts.json"), os.path.join(tmp, "ids.json")])
            ours = json.load(open(os.path.join(tmp, "ids.json")))[0]["ids"] if r.returncode == 0 else []
            if os.access(llama_tokenize, os.X_OK):
                t = run([llama_tokenize, "-m", model, "-f", path, "--ids", "--no-escape", "--no-bos", "--log-disable"])
                want = json.loads([l for l in t.stdout.splitlines() if l.startswith("[")][-1])
                good = ours == want
                print(f"{'ok' if good else 'FAIL':4} {kind} text: {len(ours)} ids, llama-tokenize's {len(want)}, equal: {good}")
            else:
                good = len(ours) == LLAMACPP_TOKENS[kind]
                print(f"{'ok' if good else 'FAIL':4} {kind} text: {len(ours)} ids, llama-tokenize gave "
                      f"{LLAMACPP_TOKENS[kind]} (not built here: counts only)")
            ok &= good

    r = run([args.nmkit, "generate", model, "--prompt", PROMPT, "-n", "24"])
    text = r.stdout.split("\n\nprefill ", 1)[0].rstrip("\n")
    good = r.returncode == 0 and text == LLAMACPP_GREEDY
    print(f"{'ok' if good else 'FAIL':4} greedy generation: {text!r}")
    ok &= good
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
