"""Gallery examples never write files into the source tree.

sphinx-gallery runs every ``examples/*/plot_*.py`` with the example's own
directory as the working directory, so a ``savefig("x.png")`` there lands in
``examples/`` (and ``*.png`` is ignored by git, which hides it). The gallery
captures figures by itself; an example that must write a file writes it under
a temporary directory.
"""

import re
from pathlib import Path

import pytest

EXAMPLES = sorted(
    (Path(__file__).resolve().parents[1] / "examples").glob("*/plot_*.py")
)
WRITES = re.compile(
    r"\.savefig\(|\.to_csv\(|\.to_parquet\(|np\.save\w*\(|open\([^)]*['\"][wa]"
)


def test_examples_found():
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_writes_no_file(path):
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if WRITES.search(line) and "tempfile" not in line and "tmp" not in line:
            raise AssertionError(f"{path.name}:{number} writes a file: {line.strip()}")
