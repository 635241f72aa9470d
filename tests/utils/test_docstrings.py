"""Tests of the shared docstring sections (skfedcp.utils._docstrings)."""

import importlib
import inspect
import pkgutil

import pytest

import skfedcp
from skfedcp.utils._docstrings import docdict, docfiller, fill_doc, fill_docstring

BLOCKS = {"alpha": "alpha : float\n    Miscoverage level.", "empty": "a\n\nb"}


def test_fill_docstring_indents_like_the_placeholder():
    doc = "Summary.\n\n    Parameters\n    ----------\n    %(alpha)s\n    "
    assert fill_docstring(doc, BLOCKS) == (
        "Summary.\n\n    Parameters\n    ----------\n"
        "    alpha : float\n        Miscoverage level.\n    "
    )


def test_fill_docstring_keeps_blank_lines_empty():
    assert fill_docstring("x\n        %(empty)s", BLOCKS) == "x\n        a\n\n        b"


def test_fill_docstring_leaves_other_percent_signs_alone():
    doc = "Coverage of 95%; %(alpha)s is not on a line of its own.\n"
    assert fill_docstring(doc, BLOCKS) == doc


def test_fill_docstring_unknown_block():
    with pytest.raises(KeyError, match=r"%\(nope\)s names no shared block"):
        fill_docstring("x\n    %(nope)s\n", BLOCKS)


def test_docfiller_fills_a_class_and_its_methods():
    @docfiller(BLOCKS)
    class Thing:
        """Thing.

        %(alpha)s
        """

        def method(self):
            """Method.

            %(alpha)s
            """

        @classmethod
        def build(cls):
            """Build.

            %(alpha)s
            """

        def undocumented(self):
            pass

    for obj in (Thing, Thing.method, Thing.build):
        doc = inspect.getdoc(obj)
        assert "%(" not in doc
        assert "alpha : float\n    Miscoverage level." in doc
    assert Thing.undocumented.__doc__ is None


def test_fill_doc_uses_docdict_and_keeps_doctests():
    @fill_doc
    def f():
        """Function.

        Parameters
        ----------
        %(alpha)s

        Examples
        --------
        >>> 1 + 1
        2
        """

    doc = inspect.getdoc(f)
    assert docdict["alpha"] in doc
    assert doc.endswith("Examples\n--------\n>>> 1 + 1\n2")


def _documented_objects():
    """Public and private classes, functions and methods of every module."""
    for info in pkgutil.walk_packages(skfedcp.__path__, "skfedcp."):
        if ".flower" in info.name:
            continue  # needs the optional flwr dependency
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            yield obj
            if isinstance(obj, type):
                for member in vars(obj).values():
                    yield getattr(member, "__func__", member)


def _has_placeholder(doc):
    return any(
        line.strip().startswith("%(") and line.strip().endswith(")s")
        for line in doc.splitlines()
    )


def test_no_placeholder_is_left_unfilled():
    left = [
        getattr(obj, "__qualname__", repr(obj))
        for obj in _documented_objects()
        if isinstance(getattr(obj, "__doc__", None), str)
        and _has_placeholder(obj.__doc__)
    ]
    assert left == []
