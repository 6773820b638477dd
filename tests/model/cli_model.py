#!/usr/bin/env python3
"""`nmkit eval` and `nmkit generate` on SmolLM2 (scripts/fetch_model.sh; SKIP when it cannot be fetched):
a small perplexity run with its JSON, greedy generation (reproducible), and the bad inputs of issue 10
(a text shorter than 2 x ctx tokens, a non-UTF-8 text, ctx above the model's context length, a prompt
longer than the context, an impossible format): exit 1, one line on stderr naming the file and value,
no JSON written.

Usage: cli_model.py --nmkit PATH/TO/nmkit
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
failures = []


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace")


def expect_error(label, cmd, *needles, json_path=None):
    r = run(cmd)
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == 1 and len(lines) == 1 and all(n in lines[0] for n in needles)
    if json_path is not None and os.path.exists(json_path):
        ok = False
        lines.append(f"(and {json_path} was written)")
    print(f"{'ok' if ok else 'FAIL':4} {label}: exit {r.returncode}: {' | '.join(lines)}")
    if not ok:
        failures.append(label)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmkit", required=True)
    nmkit = ap.parse_args().nmkit
    r = run(["bash", os.path.join(ROOT, "scripts", "fetch_model.sh")])
    if r.returncode != 0:
        print("SKIP: SmolLM2 cannot be fetched")
        return 0
    model = os.path.join(ROOT, r.stdout.strip())
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        # Real prose repeated: ~2.3k tokens, enough for 2 chunks of 64 and far below 2 x 2048.
        with open(text, "w") as f:
            f.write(("It was a bright cold day in April, and the clocks were striking thirteen. "
                     "Winston Smith, his chin nuzzled into his breast in an effort to escape the vile wind, "
                     "slipped quickly through the glass doors of Victory Mansions. ") * 50)
        out = os.path.join(tmp, "ppl.json")

        r = run([nmkit, "eval", model, "--text", text, "--ctx", "64", "--chunks", "2", "--json", out])
        ok = r.returncode == 0 and os.path.exists(out)
        if ok:
            j = json.load(open(out))
            ok = (j["chunks"] == 2 and j["predictions"] == 2 * (64 - 1 - 32) and math.isfinite(j["perplexity"])
                  and 1.0 < j["perplexity"] < 50.0 and j["tokens"] == 128)
        print(f"{'ok' if ok else 'FAIL':4} eval --ctx 64 --chunks 2: {r.stdout.strip()} {r.stderr.strip()}")
        if not ok:
            failures.append("eval")

        gen = [nmkit, "generate", model, "--prompt", "The capital of France is", "-n", "8"]
        a, b = run(gen), run(gen)
        # stdout is the text alone (issue 24, item 8): scripts use it as is; the timing is on stderr.
        text_a, text_b = a.stdout, b.stdout
        ok = (a.returncode == 0 and text_a == text_b and text_a.startswith("The capital of France is")
              and len(text_a) > len("The capital of France is\n") and text_a.endswith("\n")
              and "tokens/s" not in text_a and "decode" in a.stderr and "tokens/s" in a.stderr)
        print(f"{'ok' if ok else 'FAIL':4} generate greedy twice, same text on stdout, timing on stderr: "
              f"{text_a!r} | {a.stderr.strip()!r}")
        if not ok:
            failures.append("generate")

        short = os.path.join(tmp, "short.txt")
        open(short, "w").write("Too short to evaluate.")
        bad = os.path.join(tmp, "latin1.txt")
        open(bad, "wb").write(b"caf\xe9 au lait\n" * 100)
        nojson = os.path.join(tmp, "none.json")
        expect_error("text shorter than 2 x ctx", [nmkit, "eval", model, "--text", short, "--json", nojson],
                     short, "fewer than 2 x ctx = 1024", json_path=nojson)
        expect_error("non-UTF-8 text", [nmkit, "eval", model, "--text", bad, "--json", nojson], bad, "UTF-8",
                     "offset 3", json_path=nojson)
        expect_error("ctx above the context length", [nmkit, "eval", model, "--text", text, "--ctx", "9000",
                                                      "--json", nojson], "9000", "8192", json_path=nojson)
        expect_error("prompt longer than the context", [nmkit, "generate", model, "--prompt", "hello " * 9000],
                     "--prompt", "8192")
        expect_error("sparse24 needs 2:4", [nmkit, "eval", model, "--text", text, "--pattern", "6:8",
                                            "--format", "sparse24", "--json", nojson], "sparse24", "6:8",
                     json_path=nojson)
        expect_error("missing model", [nmkit, "generate", os.path.join(tmp, "absent.gguf"), "--prompt", "x"],
                     "absent.gguf")
    print("PASS" if not failures else f"FAILED: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
