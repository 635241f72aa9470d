"""Shared docstring sections: a ``%(name)s`` line is replaced by ``docdict[name]``.

Several calibrators, metrics and privacy functions document the same
parameter, attribute or reference with the same words. Such a block is
written once in :data:`docdict` and a docstring names it on a line of its
own::

    @fill_doc
    def plan(self, n_per_client, alpha):
        \"\"\"Return the public plan.

        Parameters
        ----------
        %(n_per_client)s
        %(alpha)s
        \"\"\"

The block is indented like the placeholder line, so numpydoc, Sphinx and
:func:`inspect.getdoc` see an ordinary docstring (doctests included). Only
whole-line placeholders are replaced: a ``%`` elsewhere in a docstring is
left alone. The same idea as MNE's ``fill_doc`` and SciPy's ``doccer``; a
module may fill from its own blocks with :func:`docfiller`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from types import FunctionType
from typing import Any, TypeVar

__all__ = ["docdict", "docfiller", "fill_doc", "fill_docstring"]

_T = TypeVar("_T")


def fill_docstring(docstring: str, blocks: Mapping[str, str]) -> str:
    """Replace each ``%(name)s`` line of ``docstring`` by ``blocks[name]``.

    The block is indented with the placeholder line's leading whitespace
    (blank lines stay empty). Raises ``KeyError`` naming an unknown block.
    """
    if "%(" not in docstring:
        return docstring
    lines = docstring.split("\n")
    for i, line in enumerate(lines):
        key = line.strip()
        if not (key.startswith("%(") and key.endswith(")s")):
            continue
        name = key[2:-2]
        if name not in blocks:
            raise KeyError(
                f"docstring placeholder %({name})s names no shared block; "
                f"known blocks: {sorted(blocks)}."
            )
        indent = line[: len(line) - len(line.lstrip())]
        lines[i] = textwrap.indent(blocks[name], indent)
    return "\n".join(lines)


def docfiller(blocks: Mapping[str, str]) -> Callable[[_T], _T]:
    """A decorator filling a docstring from ``blocks`` (see :func:`fill_docstring`).

    On a class it fills the class's docstring and those of the methods the
    class body defines (plain, class and static methods).
    """

    def fill(obj: Any) -> None:
        if obj.__doc__:  # None under ``python -OO``
            obj.__doc__ = fill_docstring(obj.__doc__, blocks)

    def decorator(obj: _T) -> _T:
        fill(obj)
        if isinstance(obj, type):
            for member in vars(obj).values():
                if isinstance(member, classmethod | staticmethod):
                    member = member.__func__
                if isinstance(member, FunctionType):
                    fill(member)
        return obj

    return decorator


# Each entry is dedented, without a trailing newline. Keys name the
# parameter, attribute or section they document.
docdict: dict[str, str] = {}

# -- calibrators --------------------------------------------------------------

docdict["scores"] = """\
scores : array-like of shape (n_samples,)
    Conformity scores of all calibration rows."""

docdict["client_ids"] = """\
client_ids : array-like of shape (n_samples,) or None, default=None
    Client label of each row; ``None`` means one client."""

docdict["alpha"] = """\
alpha : float
    Miscoverage level in (0, 1)."""

docdict["n_per_client"] = """\
n_per_client : array-like of int
    Calibration size of each client."""

docdict["fitted_clients"] = """\
clients_ : ndarray of shape (n_clients,)
    Sorted client labels.
n_clients_ : int
    Number of clients.
n_per_client_ : ndarray of shape (n_clients,)
    Calibration size of each client."""

docdict["references_humbert"] = """\
References
----------
.. [1] P. Humbert, B. Le Bars, A. Bellet, S. Arlot. One-Shot Federated
   Conformal Prediction. ICML 2023."""

# -- metrics ------------------------------------------------------------------

docdict["returns_per_client_coverage"] = """\
Returns
-------
result : PerClientCoverage
    Sorted client labels, their coverage and their number of rows; a
    named tuple that prints as a short table and has ``to_frame()``."""

fill_doc = docfiller(docdict)
