#!/usr/bin/env python3
"""nmkit's tokenizer against the PyPI `tokenizers` package (the independent oracle of
docs/design.md section 11.3), on the same vocabulary and merges.

Byte-level BPE: SmolLM2's vocabulary and merges, read from its GGUF with the PyPI `gguf` reader,
built into a `tokenizers` Tokenizer with each pre-tokenizer nmkit supports from tokenizer.json
(smollm, gpt2, llama3, and llama.cpp's default sequence); the same tokenizer.json files are what
nmkit loads, and for smollm also the GGUF file itself (Tokenizer::from_gguf). SentencePiece-style
BPE: a vocabulary trained here with `tokenizers`, given sentencepiece scores from its merge order
and the 256 <0xNN> byte-fallback tokens. Every text must give identical ids and decode back to
itself.

Text (a few hundred KB from packages, so a fresh machine has them): Debian's
/usr/share/common-licenses, and from the pip package the vendored chardet language models
(Cyrillic, Greek, Thai, Hebrew; digits and indentation runs) and rich's emoji table, plus
tests/tokenizer/mixed_lines.txt (emoji sequences, scripts, special tokens, whitespace).
"""
import argparse
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

ROOT = pathlib.Path(__file__).resolve().parents[2]

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DEFAULT_REGEXES = [r"[\p{P}\$\+<=>\^~\|]+",
                   r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
                   r"\p{N}+", r"[0-9][0-9][0-9]"]


def find_gguf(arg):
    if arg:
        return arg, ""
    if os.environ.get("NMKIT_SMOLLM2_GGUF"):
        return os.environ["NMKIT_SMOLLM2_GGUF"], ""
    script = ROOT / "scripts" / "fetch_model.sh"
    if not script.exists():
        return None, "scripts/fetch_model.sh is missing"
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=ROOT)
    path = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    if r.returncode != 0 or not path:
        return None, "scripts/fetch_model.sh could not fetch SmolLM2: " + r.stderr.strip()[-300:]
    return (str((ROOT / path).resolve()) if not os.path.isabs(path) else path), ""


def read_gguf_vocab(path):
    from gguf import GGUFReader
    reader = GGUFReader(path)

    def array(name):
        field = reader.fields[name]
        return [field.parts[i] for i in field.data]

    tokens = [bytes(p).decode("utf-8") for p in array("tokenizer.ggml.tokens")]
    types = [int(p[0]) for p in array("tokenizer.ggml.token_type")]
    merges = [bytes(p).decode("utf-8") for p in array("tokenizer.ggml.merges")]
    return tokens, types, merges


def split_merge(merge):
    space = merge.find(" ", 1)  # as llama.cpp: a left side may start with a space
    return merge[:space], merge[space + 1:]


def byte_level_tokenizer(tokens, types, merges, pre):
    vocab = {t: i for i, t in enumerate(tokens)}
    bpe = models.BPE(vocab=vocab, merges=[split_merge(m) for m in merges],
                     ignore_merges=(pre == "llama3"))
    tok = Tokenizer(bpe)
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    elif pre == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif pre == "default":  # llama.cpp's regex sequence for a vocabulary without a pre type
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in DEFAULT_REGEXES]
            + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    elif pre == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i, t in enumerate(types) if t == 3])
    return tok


def sentencepiece_tokenizer(train_lines):
    """A SentencePiece-style BPE vocabulary: trained with `tokenizers`, then every pair (a, b)
    whose concatenation is a token becomes a merge, ranked by that token's score (its merge order),
    which is how SentencePiece merges (by the merged piece's score) and how `tokenizers` converts a
    SentencePiece model."""
    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer_tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                                   normalizers.Replace(" ", "\u2581")])
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="never")
    from tokenizers.trainers import BpeTrainer
    trainer = BpeTrainer(vocab_size=3000, min_frequency=2, show_progress=False,
                         special_tokens=["<unk>", "<s>", "</s>"])
    trainer_tok.train_from_iterator(train_lines, trainer=trainer)
    model = json.loads(trainer_tok.to_str())["model"]
    vocab = dict(model["vocab"])
    order = {}
    for rank, m in enumerate(model["merges"]):
        a, b = (m if isinstance(m, list) else split_merge(m))
        order.setdefault(a + b, rank)
    for byte in range(256):
        vocab.setdefault("<0x%02X>" % byte, len(vocab))
    pairs = []
    for token, rank in order.items():
        for k in range(1, len(token)):
            if token[:k] in vocab and token[k:] in vocab:
                pairs.append((rank, k, token[:k], token[k:]))
    pairs.sort()
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(a, b) for _, _, a, b in pairs],
                               unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                           normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t in ["<unk>", "<s>", "</s>"]])
    return tok


def corpus():
    texts = []
    sources = []
    licenses = pathlib.Path("/usr/share/common-licenses")
    for name in ["GPL-3", "Apache-2.0", "LGPL-2.1", "Artistic", "MPL-2.0"]:
        if (licenses / name).exists():
            sources.append((licenses / name, 40000))
    spec = importlib.util.find_spec("pip")
    vendor = pathlib.Path(spec.origin).parent / "_vendor" if spec and spec.origin else None
    if vendor is None or not (vendor / "chardet").exists():
        vendor = pathlib.Path("/usr/lib/python3/dist-packages/pip/_vendor")
    for rel in ["chardet/langrussianmodel.py", "chardet/langgreekmodel.py",
                "chardet/langthaimodel.py", "chardet/langhebrewmodel.py", "rich/_emoji_codes.py"]:
        if (vendor / rel).exists():
            sources.append((vendor / rel, 40000))
    sources.append((pathlib.Path(__file__).parent / "mixed_lines.txt", None))
    names = []
    for path, limit in sources:
        data = path.read_text(encoding="utf-8")
        if limit:
            data = data[:limit]
        names.append("%s (%d chars)" % (path, len(data)))
        # 4 KB chunks at line ends, so a mismatch names a small text; the last chunk keeps its
        # end without a newline.
        chunk = ""
        for line in data.splitlines(keepends=True):
            chunk += line
            if len(chunk) > 4000:
                texts.append(chunk)
                chunk = ""
        if chunk:
            texts.append(chunk)
    texts.append(" ".join(texts[:3]))  # one long text
    return texts, names


def compare(label, hf, tokenizer_json, texts, probe, workdir):
    texts_path = workdir / "texts.json"
    out_path = workdir / "out.json"
    texts_path.write_text(json.dumps(texts), encoding="utf-8")
    r = subprocess.run([probe, str(tokenizer_json), str(texts_path), str(out_path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL %s: probe exited %d: %s" % (label, r.returncode, r.stderr.strip()))
        return False
    got = json.loads(out_path.read_text())
    failures = 0
    n_ids = 0
    for i, (text, result) in enumerate(zip(texts, got)):
        want = hf.encode(text, add_special_tokens=False).ids
        n_ids += len(want)
        if result["ids"] != want:
            failures += 1
            if failures <= 3:
                k = next((j for j, (a, b) in enumerate(zip(result["ids"], want)) if a != b),
                         min(len(want), len(result["ids"])))
                print("FAIL %s text %d: ids differ at %d: nmkit %s, tokenizers %s; around %r" % (
                    label, i, k, result["ids"][max(0, k - 3):k + 5], want[max(0, k - 3):k + 5],
                    hf.decode(want[max(0, k - 3):k + 5])))
        if not result["roundtrip"]:
            failures += 1
            if failures <= 3:
                print("FAIL %s text %d: decode(encode(text)) != text" % (label, i))
    print("%s: %d texts, %d ids, %d failures" % (label, len(texts), n_ids, failures))
    return failures == 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--probe", required=True)
    parser.add_argument("--gguf")
    args = parser.parse_args()
    texts, names = corpus()
    print("text: " + "; ".join(names))
    print("%d texts, %d characters" % (len(texts), sum(len(t) for t in texts)))
    ok = True
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(tmp)
        # SentencePiece BPE needs no model file: its vocabulary is trained here.
        spm = sentencepiece_tokenizer(texts[::2])
        spm.save(str(workdir / "spm.json"))
        ok &= compare("llama (sentencepiece bpe)", spm, workdir / "spm.json", texts, args.probe, workdir)

        gguf_path, reason = find_gguf(args.gguf)
        if gguf_path is None:
            # The SentencePiece comparison above still counts; the byte-level one needs the model.
            print("SKIPPED the byte-level BPE comparisons: " + reason)
            print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
            return 0 if ok else 1
        tokens, types, merges = read_gguf_vocab(gguf_path)
        print("vocabulary: %s (%d tokens, %d merges)" % (gguf_path, len(tokens), len(merges)))
        for pre in ["smollm", "gpt2", "llama3", "default"]:
            hf = byte_level_tokenizer(tokens, types, merges, pre)
            path = workdir / ("%s.json" % pre)
            hf.save(str(path))
            ok &= compare("gpt2 bpe, pre %s" % pre, hf, path, texts, args.probe, workdir)
            if pre == "smollm":  # nmkit reading the GGUF file itself (Tokenizer::from_gguf)
                ok &= compare("SmolLM2 GGUF via from_gguf", hf, pathlib.Path(gguf_path), texts,
                              args.probe, workdir)
    print("%.1f s" % (time.time() - start))
    print("1 passed, 0 failed" if ok else "0 passed, 1 failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
