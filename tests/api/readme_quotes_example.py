#!/usr/bin/env python3
"""README.md's library example must be tests/api/example.cc verbatim (the file `make test` builds and
runs), so the README never shows code that does not compile. Exit 1 with the first differing line."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parents[2]
example = (root / "tests/api/example.cc").read_text()
readme = (root / "README.md").read_text()
blocks = re.findall(r"```cpp\n(.*?)```", readme, flags=re.S)
if any(block == example for block in blocks):
    sys.exit(0)
if not blocks:
    sys.exit("README.md: no ```cpp block; it should quote tests/api/example.cc")
quoted = blocks[0].splitlines()
for i, line in enumerate(example.splitlines()):
    if i >= len(quoted) or quoted[i] != line:
        sys.exit(f"README.md: the ```cpp block differs from tests/api/example.cc at line {i + 1}: {line!r}")
sys.exit("README.md: the ```cpp block has extra lines after tests/api/example.cc")
