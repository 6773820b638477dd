"""Fixtures of the Python package's tests (docs/design.md section 15).

The oracles are the numpy re-implementations the C++ tests already use (tests/cli/independent_prune.py,
tests/slide_cli/independent_slide.py) and the tiny random llama GGUF of tests/calib; the `nmkit`
executable (NMKIT_CLI, set by CTest) is the reference for what the Python calls must equal. numpy only:
torch tests skip without torch.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
for folder in ("cli", "slide_cli", "calib"):
    sys.path.insert(0, os.path.join(ROOT, "tests", folder))


@pytest.fixture(scope="session")
def cli():
    """The nmkit executable, or a skip."""
    path = os.environ.get("NMKIT_CLI")
    if not path or not os.path.exists(path):
        pytest.skip("NMKIT_CLI not set (CTest sets it to the built nmkit)")
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A 2-block random llama GGUF with a byte-level vocabulary (tests/calib/calibrated_prune_e2e.py)."""
    from calibrated_prune_e2e import write_model
    path = str(tmp_path_factory.mktemp("tiny") / "tiny.gguf")
    write_model(path, np.random.default_rng(7))
    return path


@pytest.fixture(scope="session")
def tiny_text(tmp_path_factory):
    """Calibration and evaluation text: bytes are tokens for the tiny model."""
    path = str(tmp_path_factory.mktemp("text") / "text.txt")
    words = ["the", "model", "prunes", "weights", "along", "K", "and", "keeps", "two", "of", "four"]
    rng = np.random.default_rng(3)
    with open(path, "w") as f:
        f.write(" ".join(words[i] for i in rng.integers(0, len(words), 400)))
    return path


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M's GGUF (scripts/fetch_model.sh), or a skip."""
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "fetch_model.sh")], capture_output=True, text=True,
                       cwd=ROOT)
    if r.returncode != 0:
        pytest.skip("SmolLM2 cannot be fetched")
    return os.path.join(ROOT, r.stdout.strip())


def run_cli(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout
