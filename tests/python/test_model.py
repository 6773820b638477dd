"""nmkit.Model, nmkit.prune_model and nmkit.pack_model: logits against the numpy forward of
tests/model, perplexity, generation and pruned or packed files equal to the nmkit executable's,
progress reaching Python, Ctrl-C leaving nothing written."""
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import nmkit
from calibrated_prune_e2e import P, read_gguf
from conftest import run_cli

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model"))
import independent_forward  # noqa: E402  (the numpy float64 forward of docs/design.md 11.2)

CALIB = ["--calib-seqs", "6", "--calib-len", "32"]


@pytest.fixture(scope="module")
def model(tiny_model):
    return nmkit.Model.load(tiny_model)


def test_tokenize_and_detokenize(model):
    assert model.n_vocab == P["n_vocab"] and model.n_layer == P["n_layer"]
    ids = model.tokenize("hello, world")
    assert ids == list(b"hello, world")  # the tiny vocabulary: one token per byte
    assert model.detokenize(ids) == "hello, world"
    with pytest.raises(nmkit.InvalidArgumentError):
        model.detokenize([P["n_vocab"]])


def test_logits_equal_the_numpy_forward(model, tiny_model):
    tokens = list(b"pruning keeps two of four")
    got = model.logits(tokens)
    p = dict(P, rope_base=10000.0)
    want = independent_forward.forward(read_gguf(tiny_model)[1], p, np.array(tokens))
    assert got.shape == (len(tokens), P["n_vocab"]) and got.dtype == np.float32
    assert np.abs(got - want).max() <= independent_forward.f32_bound(p)


def test_perplexity_equals_nmkit_eval(model, tiny_model, tiny_text, cli, tmp_path):
    stages = []
    r = model.perplexity(open(tiny_text).read(), ctx=64, chunks=3, progress=lambda *a: stages.append(a))
    out = tmp_path / "eval.json"
    run_cli(cli, "eval", tiny_model, "--text", tiny_text, "--ctx", "64", "--chunks", "3", "--json", out)
    j = json.load(open(out))
    assert (r.perplexity, r.nll_sum, r.chunks, r.predictions) == (j["perplexity"], j["nll_sum"], 3, j["predictions"])
    assert stages == [("perplexity", c, 3) for c in (1, 2, 3)]


def test_generate_equals_nmkit_generate(model, tiny_model, cli):
    text = model.generate("the model", n=12)
    # The executable prints the prompt, then the raw bytes of each token (random weights: maybe not UTF-8).
    out = subprocess.run([cli, "generate", tiny_model, "--prompt", "the model", "-n", "12"], capture_output=True,
                         check=True).stdout.decode("utf-8", errors="replace")
    assert text and out == "the model" + text + "\n"  # the timing line goes to stderr (issue 24, item 8)
    assert model.generate("the model", n=5, temperature=0.8, seed=4) == \
        model.generate("the model", n=5, temperature=0.8, seed=4)


def test_load_pruned_forms(tiny_model):
    m = nmkit.Model.load(tiny_model, weights="int8", pattern="2:4", format="sparse24")
    assert m.description == "int8 2:4 sparse24" and "sparse24" in m.kernel_name(1)
    with pytest.raises(nmkit.InvalidArgumentError):
        nmkit.Model.load(tiny_model, pattern="6:8", format="sparse24")


def test_pack_model_equals_nmkit_pack_and_runs_its_form(tiny_model, cli, tmp_path):
    calls = []
    out = tmp_path / "py.gguf"
    nmkit.pack_model(tiny_model, out, weights="int8", pattern="6:8", format="nm", progress=lambda *a: calls.append(a))
    run_cli(cli, "pack", tiny_model, "-o", tmp_path / "cli.gguf", "--weights", "int8", "--pattern", "6:8",
            "--format", "nm")
    assert out.read_bytes() == (tmp_path / "cli.gguf").read_bytes()
    assert calls[-1][0] == "write" and calls[-1][1] == calls[-1][2]
    packed = nmkit.Model.load(out)  # the file's own form, run from its records
    built = nmkit.Model.load(tiny_model, weights="int8", pattern="6:8", format="nm")
    assert packed.description == built.description == "int8 6:8 nm"
    ids = built.tokenize("the packed model")
    assert np.array_equal(packed.logits(ids), built.logits(ids))
    with pytest.raises(nmkit.InvalidArgumentError):
        nmkit.Model.load(out, weights="bf16")
    with pytest.raises(nmkit.InvalidArgumentError):
        nmkit.pack_model(tiny_model, tmp_path / "x.txt", weights="int8")
    assert not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize("method,dense_targets", [("sparsegpt", 0.0), ("wanda", 0.0), ("sparsegpt", 0.3)])
def test_prune_model_equals_nmkit_prune(tiny_model, tiny_text, cli, tmp_path, method, dense_targets):
    calls = []
    out = tmp_path / "py.gguf"
    report = nmkit.prune_model(tiny_model, out, "6:8", method=method, calib=tiny_text, calib_seqs=6, calib_len=32,
                               progress=lambda *a: calls.append(a), dense_targets=dense_targets)
    run_cli(cli, "prune", tiny_model, "-o", tmp_path / "cli.gguf", "--pattern", "6:8", "--method", method,
            "--calib", tiny_text, "--dense-targets", str(dense_targets), *CALIB)
    _, mine = read_gguf(str(out))[:2]
    _, theirs = read_gguf(str(tmp_path / "cli.gguf"))[:2]
    assert list(mine) == list(theirs) and all(np.array_equal(mine[k], theirs[k]) for k in mine)
    assert len(report.linears) == 7 * P["n_layer"] and report.total.sparsity_percent > 24
    assert all(l.output_error is not None for l in report.linears)
    assert [c for c in calls if c[0] == "prune"] == [("prune", b + 1, P["n_layer"]) for b in range(P["n_layer"])]
    assert calls[-1][0] == "write" and calls[-1][1] == calls[-1][2]


def test_prune_model_refuses_before_the_work(tiny_model, tiny_text, tmp_path):
    with pytest.raises(nmkit.SameFileError):
        nmkit.prune_model(tiny_model, tiny_model, "2:4", method="magnitude")
    with pytest.raises(nmkit.InvalidArgumentError):
        nmkit.prune_model(tiny_model, tmp_path / "x.safetensors", "2:4", method="magnitude")
    with pytest.raises(nmkit.InvalidArgumentError):
        nmkit.prune_model(tiny_model, tmp_path / "x.gguf", "2:4", method="sparsegpt")  # no calibration text
    with pytest.raises(nmkit.InvalidArgumentError, match="dense targets is 1.5, outside 0..1"):
        nmkit.prune_model(tiny_model, tmp_path / "x.gguf", "2:4", method="sparsegpt", calib=tiny_text,
                          dense_targets=1.5)
    assert os.listdir(tmp_path) == []


def test_ctrl_c_stops_with_nothing_written(tiny_model, tiny_text, tmp_path):
    # A signal that arrives while the library computes (GIL released, no Python running, no progress
    # callback): its handler raises KeyboardInterrupt as Ctrl-C's does, and Python can only run it when
    # the library's next block checks for signals. The job (SparseGPT on 32 x 64 calibration tokens)
    # lasts far longer than the 10 ms timer.
    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        with pytest.raises(KeyboardInterrupt):
            nmkit.prune_model(tiny_model, tmp_path / "out.gguf", "2:4", method="sparsegpt", calib=tiny_text,
                              calib_seqs=32, calib_len=64)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert os.listdir(tmp_path) == []

    def interrupt_writing(stage, done, total):
        if stage == "write" and done == 3:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        nmkit.prune_model(tiny_model, tmp_path / "folder", "2:4", method="magnitude", progress=interrupt_writing)
    assert os.listdir(tmp_path) == []
