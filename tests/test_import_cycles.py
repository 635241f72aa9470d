"""The package's modules import each other without a cycle.

Every ``import`` counts, the ones inside functions too (a deferred import hides
a cycle at import time but still ties the two modules together); only imports
under ``if TYPE_CHECKING:`` are left out. An edge goes to the module named, not
to the parent packages Python initialises on the way.
"""

import ast
from pathlib import Path

import pytest

import skfedcp

ROOT = Path(skfedcp.__file__).parent


def _module_name(path, root):
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node):
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree):
    """Yield every Import / ImportFrom node not guarded by TYPE_CHECKING."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            stack.append(child)


def import_graph(root=ROOT):
    """Map each module of the package to the package modules it imports."""
    modules = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        package = name if is_package else name.rpartition(".")[0]
        edges = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = []
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    targets.append(sub if sub in modules else source)
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    return graph


def find_cycle(graph):
    """Return one cycle as a list of modules, or None."""
    state = {}
    for start in sorted(graph):
        if start in state:
            continue
        path, iters = [start], [iter(sorted(graph[start]))]
        state[start] = "open"
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = "done"
                iters.pop()
            elif state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                state[nxt] = "open"
                path.append(nxt)
                iters.append(iter(sorted(graph[nxt])))
    return None


def test_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize(
    "sources, expected",
    [
        # a deferred import closes the cycle: still a cycle
        (
            {"a.py": "from . import b\n", "b.py": "def f():\n    from .a import x\n"},
            True,
        ),
        ({"a.py": "from .b import y\n", "b.py": "import os\n"}, False),
        # a TYPE_CHECKING import is not a runtime edge
        (
            {
                "a.py": "from .b import y\n",
                "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from .a import x\n",
            },
            False,
        ),
    ],
)
def test_find_cycle_detects_a_planted_cycle(tmp_path, sources, expected):
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name, text in sources.items():
        (root / name).write_text(text)
    graph = {k.replace("skfedcp", "pkg", 1): v for k, v in import_graph(root).items()}
    assert (find_cycle(graph) is not None) is expected
