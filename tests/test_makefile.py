"""The Makefile: ``make help`` lists every target a user can run."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

MAKEFILE = Path(__file__).resolve().parents[1] / "Makefile"

pytestmark = pytest.mark.skipif(
    not MAKEFILE.is_file(), reason="runs from a source checkout only"
)


def _phony_targets(text):
    """The targets of the ``.PHONY`` line(s), backslash continuations joined."""
    text = text.replace("\\\n", " ")
    targets = []
    for line in text.splitlines():
        if line.startswith(".PHONY:"):
            targets += line.split(":", 1)[1].split()
    return targets


def _help_text():
    """``make help``'s output, or its recipe's echoed lines without make."""
    make = shutil.which("make")
    if make is not None:
        return subprocess.run(
            [make, "-s", "-C", str(MAKEFILE.parent), "help"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    recipe = MAKEFILE.read_text().split("\nhelp:\n", 1)[1]
    lines = []
    for line in recipe.splitlines():
        if not line.startswith("\t"):
            break
        lines.append(re.sub(r'^\t@echo "(.*)"$', r"\1", line))
    return "\n".join(lines)


def test_phony_line_is_parsed():
    targets = _phony_targets(MAKEFILE.read_text())
    assert {"help", "install", "demo", "test", "docs", "clean"} <= set(targets)
    assert len(targets) == len(set(targets))


def test_make_help_lists_every_phony_target():
    text = MAKEFILE.read_text()
    listed = re.findall(r"^make (\S+)\s", _help_text(), flags=re.MULTILINE)
    missing = [t for t in _phony_targets(text) if t not in listed]
    assert not missing, f"make help does not list: {missing}"
    # ... and lists only real targets, each once.
    rules = set(re.findall(r"^([\w-]+):", text, flags=re.MULTILINE))
    assert set(listed) <= rules
    assert len(listed) == len(set(listed))


def test_make_help_starts_with_the_readme_set_up_commands():
    # A new user runs the first lines of 'make help' and of the README.
    listed = re.findall(r"^make (\S+)\s", _help_text(), flags=re.MULTILINE)
    assert listed[:2] == ["demo", "test"]
