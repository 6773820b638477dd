#!/usr/bin/env python3
"""nmkit's ids against llama.cpp's own (llama-tokenize, built by scripts/build_llamacpp.sh in the
bench set-up, not by `make test`), both reading the same GGUF file (nmkit through
Tokenizer::from_gguf), on the text of hf_oracle_test.py: docs/design.md section 11.3 asks for ids
equal to llama.cpp's. Two vocabularies: SmolLM2's (gpt2, pre smollm) and a SentencePiece one
("llama": the one hf_oracle_test.py trains, written here as a vocabulary-only GGUF with the PyPI
`gguf` writer). Skipped (exit 77, reason printed) when llama-tokenize or SmolLM2 is absent.
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


def write_sentencepiece_gguf(path, train_texts):
    """The SentencePiece vocabulary of hf_oracle_test.py as a GGUF llama.cpp loads (vocabulary
    only: a tiny llama header and no tensors). Scores from the merge order, types from the
    `tokenizers` JSON (added tokens control, <0xNN> byte)."""
    import gguf
    tok = json.loads(hf_oracle_test.sentencepiece_tokenizer(train_texts).to_str())
    vocab = tok["model"]["vocab"]
    added = {a["content"]: a["id"] for a in tok["added_tokens"]}
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    order = {}
    for rank, m in enumerate(tok["model"]["merges"]):
        a, b = m if isinstance(m, list) else hf_oracle_test.split_merge(m)
        order.setdefault(a + b, rank)
    scores = [-float(order[t]) if t in order else -1e9 for t in tokens]
    types = [(2 if t == "<unk>" else 3) if t in added else
             6 if (len(t) == 6 and t.startswith("<0x") and t.endswith(">")) else 1 for t in tokens]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(added["<s>"])
    w.add_eos_token_id(added["</s>"])
    w.add_unk_token_id(added["<unk>"])
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def compare(label, model_path, texts, probe, llama_tokenize, work):
    (work / "texts.json").write_text(json.dumps([{"hex": t.hex()} for t in texts]))
    r = subprocess.run([probe, str(model_path), str(work / "texts.json"), str(work / "out.json")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL %s: probe: %s" % (label, r.stderr.strip()))
        return False
    ours = json.loads((work / "out.json").read_text())
    failures = 0
    n_ids = 0
    for i, text in enumerate(texts):
        path = work / "text.txt"
        path.write_bytes(text)
        r = subprocess.run([llama_tokenize, "-m", str(model_path), "-f", str(path), "--ids",
                            "--no-escape", "--no-bos", "--log-disable"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL %s: llama-tokenize exited %d: %s" % (label, r.returncode,
                                                            r.stderr.strip()[-300:]))
            return False
        lines = [l for l in r.stdout.splitlines() if l.startswith("[")]
        want = json.loads(lines[-1])
        n_ids += len(want)
        if ours[i]["ids"] != want:
            failures += 1
            if failures <= 3:
                k = next((j for j, (a, b) in enumerate(zip(ours[i]["ids"], want)) if a != b),
                         min(len(want), len(ours[i]["ids"])))
                print("FAIL %s text %d: ids differ at %d: nmkit %s, llama.cpp %s" % (
                    label, i, k, ours[i]["ids"][max(0, k - 3):k + 5], want[max(0, k - 3):k + 5]))
    print("%s, llama.cpp ids: %d texts, %d ids, %d failures" % (label, len(texts), n_ids, failures))
    return failures == 0


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
    texts = [t.encode("utf-8") for t in texts[:-1]]  # the long concatenation is covered by its parts
    # Invalid UTF-8, where each bad byte is U+FFFD for both (tokenizer.h): lone continuation
    # bytes, truncated sequences, leads F8..FF, at the start, middle and end. (Overlong forms and
    # surrogates are not compared: llama.cpp decodes them to their code points; code points above
    # U+10FFFF, leads F5..F7, abort llama-tokenize.)
    texts += [b"\x80abc", b"ab\xc3(cd \xe2\x82 x\xff\xfe y", b"caf\xc3",
              b"\xf8\x88\x80\x80\x80 12\x9f3", b"\xf0\x9f\x98 \xe2\x80"]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        ok &= compare("SmolLM2 (gpt2, smollm)", gguf_path, texts, args.probe, args.llama_tokenize,
                      work)
        spm_path = work / "sentencepiece_vocab.gguf"
        write_sentencepiece_gguf(spm_path, [t.decode("utf-8") for t in texts[:-5:2]])
        ok &= compare("SentencePiece (llama)", spm_path, texts, args.probe, args.llama_tokenize,
                      work)
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
