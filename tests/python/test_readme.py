"""README.md's Python example runs as quoted (on SmolLM2; skipped when it cannot be fetched), and its
printed output is the one README.md shows, up to the figures that vary between machines."""
import os
import re
import subprocess
import sys

from conftest import ROOT


def readme_blocks():
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index("## Python\n"):text.index("## Performance\n")]
    code = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    shown = re.findall(r"Its output on the benchmark machine:\n\n```\n(.*?)```", section, flags=re.S)
    assert len(code) == 1 and len(shown) == 1, "README.md's Python section: one example and its output"
    return code[0], shown[0]


def shape(text):
    """The output with its numbers and the kernel tier blanked (they depend on the machine)."""
    return re.sub(r"\d+(\.\d+)?", "N", re.sub(r"avx512|avx2|scalar", "TIER", text))


def test_readme_example_runs(smollm2):
    code, shown = readme_blocks()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=240)
    assert r.returncode == 0, r.stderr
    assert shape(r.stdout).splitlines()[:2] == shape(shown).splitlines()[:2], r.stdout
    generated = r.stdout.splitlines()[2]
    assert generated.startswith("int8 dense ' Paris."), generated  # greedy: the model knows its capitals
