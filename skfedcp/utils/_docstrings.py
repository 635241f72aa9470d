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


# -- predict methods of the wrappers and Two Students -------------------------

docdict["predict_params"] = """\
Parameters
----------
X : array-like of shape (n_samples, n_features)
    Inputs."""


# -- wrappers (regressors and the classifier) -------------------------------

docdict["wrapper_alpha"] = """\
alpha : float or array-like of float, default=0.1
    Target miscoverage: intervals cover with probability ``>= 1 - alpha``.
    A sequence of distinct levels (e.g. ``[0.2, 0.1, 0.05]``) calibrates
    them all in one fit: one split, one model, one round in which each
    client sends one message per level. ``predict_interval`` then gains a
    last axis, one entry per level in the order given, nested across
    levels (see Notes); a private calibrator splits ``epsilon`` equally
    among them."""

# The parts of ``group_by`` the regressors and the classifier share (the
# classifier adds its ``"class"`` option between them).
docdict["wrapper_group_by_intro"] = """\
Group-conditional (Mondrian) calibration: one threshold per group,
each calibrated across clients on that group's rows only, so that
coverage holds within every group, and for every client whose rows
differ from the others' only in their mix of groups (see
:ref:`heterogeneity`). ``None``: one marginal threshold."""

docdict["wrapper_group_by_rows"] = """\
A column of ``X`` (its name in a DataFrame, or its integer index) or
a callable ``X -> labels`` gives each row's group, at fit and
predict time alike (so pipelines, searches and scorers work
unchanged). Needs ``calibrator`` in ``"qq"``, ``"central"``,
``"avg"``, ``"dp-qq"``. Each client sends one message per group it
holds, which reveals its group counts to the server. A group too
small for a finite threshold gets ``+inf`` (warned); rows of a group
unseen in calibration get ``fallback_threshold_`` (warned at
predict)."""

docdict["wrapper_min_group_size"] = """\
min_group_size : int, default=None
    With ``group_by``: groups with fewer calibration rows are calibrated
    together as one merged group, whose threshold they share (as do
    unseen groups); their guarantee holds for the merged groups
    together, not each (see :ref:`heterogeneity`). ``None``: every group
    on its own."""

docdict["wrapper_group_by"] = "\n".join(
    [
        "group_by : None, str, int or callable, default=None",
        textwrap.indent(docdict["wrapper_group_by_intro"], "    "),
        textwrap.indent(docdict["wrapper_group_by_rows"], "    "),
        docdict["wrapper_min_group_size"],
    ]
)

docdict["wrapper_clients_attrs"] = """\
clients_ : ndarray of shape (n_clients,)
    Sorted client labels seen in calibration.
n_clients_ : int
    Number of calibrating clients."""

docdict["wrapper_level_attrs"] = """\
alphas_ : ndarray of shape (n_levels,)
    The levels of a sequence ``alpha``, as given (absent for a float).
calibrators_ : list of BaseCalibrator
    One fitted calibrator per level (sequence ``alpha`` only; a float
    ``alpha`` sets ``calibrator_`` instead).
raw_thresholds_ : ndarray of shape (n_levels)
    The calibrators' own thresholds, before the running maximum that
    makes ``threshold_`` monotone (sequence ``alpha`` only).
epsilon_spent_per_level_ : ndarray of shape (n_levels,)
    Privacy loss of each level's release (sequence ``alpha`` only); its
    sum is ``epsilon_spent_``."""

docdict["wrapper_group_attrs"] = """\
groups_ : ndarray of shape (n_groups,)
    The groups of ``group_by``, sorted (absent without ``group_by``);
    ``threshold_`` then has a group axis aligned with it (after the
    level axis of a sequence ``alpha``).
fallback_threshold_ : float or ndarray
    With ``group_by``: the threshold of groups unseen in calibration,
    ``+inf`` unless ``min_group_size`` merged some groups (per level for
    a sequence ``alpha``).
n_features_in_ : int
    Number of features seen in ``fit``.
feature_names_in_ : ndarray of shape (n_features,)
    Names of features seen in ``fit``, when ``X`` has string column names."""

# -- calibrators: the protocol's steps (skfedcp.calibrators._base) -----------

docdict["client_scores"] = """\
scores : array-like of shape (n_j,)
    The conformity scores of this client only."""

docdict["client_random_state"] = """\
random_state : int, Generator, RandomState, SeedSequence, "secure" \
        or None, default=None
    Randomness of this client's step, if any (``None``: fresh
    operating-system entropy; ``"secure"``: operating-system
    randomness, for deployment)."""


def _one_word_apart(block: str, old: str, new: str) -> str:
    """``block`` with its one occurrence of ``old`` replaced by ``new``.

    Raises at import if ``old`` is not in ``block`` exactly once: a silent
    no-op would document the wrong thing once the shared block changes.
    """
    if block.count(old) != 1:
        raise AssertionError(f"expected {old!r} once in the shared docstring block")
    return block.replace(old, new)


# The LDP calibrators count users, not rows: the same block, one word apart.
docdict["fitted_users"] = _one_word_apart(
    docdict["fitted_clients"],
    "Calibration size of each client.",
    "Calibration users of each client.",
)

fill_doc = docfiller(docdict)
