"""``make bench`` runs every ``benchmarks/bench_*.py`` with ``--quick``.

A script without that option makes ``make bench`` fail (``run_all.py``
reports it); this static check catches it without running the benchmarks.
"""

import ast
from pathlib import Path

import pytest

SCRIPTS = sorted(
    (Path(__file__).resolve().parents[1] / "benchmarks").glob("bench_*.py")
)


def _calls(tree, name):
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == name
    ]


def _options(path):
    """Options a script declares, including those of ``_peers.size_parser``."""
    tree = ast.parse(path.read_text())
    options = {
        node.args[0].value
        for node in _calls(tree, "add_argument")
        if node.args and isinstance(node.args[0], ast.Constant)
    }
    if _calls(tree, "size_parser"):
        options |= _options(path.parent / "_peers.py")
    return options


def test_scripts_found():
    assert len(SCRIPTS) >= 10


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_script_takes_quick(path):
    assert "--quick" in _options(path), f"{path.name} has no --quick option"
