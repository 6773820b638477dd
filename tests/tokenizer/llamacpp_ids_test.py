#!/usr/bin/env python3
"""nmkit's ids against llama.cpp's own (llama-tokenize, built by scripts/build_llamacpp.sh in the
bench set-up, not by `make test`) for SmolLM2's GGUF, loaded by both through the GGUF file itself
(Tokenizer::from_gguf), on the text of hf_oracle_test.py: docs/design.md section 11.3 asks for ids
equal to llama.cpp's. Skipped (exit 77, reason printed) when llama-tokenize or the model is absent.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import hf_oracle_test  # noqa: E402  (the same corpus and model lookup)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SKIP = 77


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--probe", required=True)
    parser.add_argument("--gguf")
    parser.add_argument("--llama-tokenize",
                        default=str(ROOT / ".cache/llamacpp/build/bin/llama-tokenize"))
    args = parser.parse_args()
    if not pathlib.Path(args.llama_tokenize).exists():
        print("SKIPPED: %s is not built (scripts/build_llamacpp.sh builds it)" % args.llama_tokenize)
        return SKIP
    gguf_path, reason = hf_oracle_test.find_gguf(args.gguf)
    if gguf_path is None:
        print("SKIPPED: " + reason)
        return SKIP
    texts, names = hf_oracle_test.corpus()
    texts = texts[:-1]  # the long concatenation is covered by its parts
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        (work / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
        r = subprocess.run([args.probe, gguf_path, str(work / "texts.json"), str(work / "out.json")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL: probe: " + r.stderr.strip())
            return 1
        ours = json.loads((work / "out.json").read_text())
        failures = 0
        n_ids = 0
        for i, text in enumerate(texts):
            path = work / "text.txt"
            path.write_bytes(text.encode("utf-8"))
            r = subprocess.run([args.llama_tokenize, "-m", gguf_path, "-f", str(path), "--ids",
                                "--no-escape", "--parse-special", "--no-bos", "--log-disable"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL: llama-tokenize exited %d: %s" % (r.returncode, r.stderr.strip()[-300:]))
                return 1
            lines = [l for l in r.stdout.splitlines() if l.startswith("[")]
            want = json.loads(lines[-1])
            n_ids += len(want)
            if ours[i]["ids"] != want:
                failures += 1
                if failures <= 3:
                    k = next((j for j, (a, b) in enumerate(zip(ours[i]["ids"], want)) if a != b),
                             min(len(want), len(ours[i]["ids"])))
                    print("FAIL text %d: ids differ at %d: nmkit %s, llama.cpp %s" % (
                        i, k, ours[i]["ids"][max(0, k - 3):k + 5], want[max(0, k - 3):k + 5]))
    print("llama.cpp ids: %d texts, %d ids, %d failures" % (len(texts), n_ids, failures))
    print("1 passed, 0 failed" if failures == 0 else "0 passed, 1 failed")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
