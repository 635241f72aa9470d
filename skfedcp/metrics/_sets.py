"""Metrics of prediction sets (boolean ``(n_samples, n_classes)`` arrays)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ..utils._docstrings import fill_doc
from ._intervals import PerClientCoverage, _per_client

__all__ = [
    "SizeStratifiedCoverage",
    "per_client_set_coverage",
    "set_coverage_score",
    "set_size_score",
    "size_stratified_coverage",
]


def _check_sets(y_sets: ArrayLike) -> NDArray[np.bool_]:
    y_sets = np.asarray(y_sets)
    if y_sets.ndim != 2 or y_sets.shape[1] == 0:
        raise ValueError(
            f"y_sets must have shape (n_samples, n_classes); got {y_sets.shape}."
        )
    if y_sets.shape[0] == 0:
        raise ValueError("y_sets is empty: at least one prediction set is needed.")
    if y_sets.dtype != bool:
        if y_sets.dtype.kind == "f" and np.isnan(y_sets).any():
            raise ValueError(
                "y_sets contains NaN; sets must be boolean (or 0/1) membership "
                "indicators."
            )
        if y_sets.dtype.kind not in "biuf" or not np.isin(y_sets, (0, 1)).all():
            raise ValueError(
                "y_sets must be boolean (or 0/1) membership indicators; got "
                f"dtype {y_sets.dtype} with other values."
            )
        y_sets = y_sets.astype(bool)
    return y_sets


def _set_hits(
    y_true: ArrayLike, y_sets: ArrayLike, classes: ArrayLike | None
) -> NDArray[np.bool_]:
    """Whether each row's label is in its set (columns aligned with classes)."""
    y_sets = _check_sets(y_sets)
    y_true = np.asarray(y_true)
    if y_true.ndim != 1:
        raise ValueError(f"y_true must be 1-D; got shape {y_true.shape}.")
    if y_true.shape[0] != y_sets.shape[0]:
        raise ValueError(
            f"y_true and y_sets must have the same number of rows; got "
            f"{y_true.shape[0]} and {y_sets.shape[0]}."
        )
    if y_true.dtype.kind in "fcO" and pd.isna(y_true).any():
        rows = np.flatnonzero(pd.isna(y_true))
        raise ValueError(
            f"y_true contains NaN or None (rows {rows[:5].tolist()}); every row "
            "needs a true label."
        )
    n_classes = y_sets.shape[1]
    if classes is None:
        if y_true.dtype.kind not in "iu":
            raise ValueError(
                "y_true must hold column indices 0..n_classes-1 when classes is "
                "None; pass classes=estimator.classes_ for other labels."
            )
        index = y_true
    else:
        classes = np.asarray(classes)
        if classes.ndim != 1 or classes.shape[0] != n_classes:
            raise ValueError(
                f"classes must list the {n_classes} labels of the columns of y_sets; "
                f"got shape {classes.shape}."
            )
        order = np.argsort(classes, kind="stable")
        pos = np.searchsorted(classes, y_true, sorter=order)
        pos = np.minimum(pos, n_classes - 1)
        index = order[pos]
        if not np.array_equal(classes[index], y_true):
            unknown = np.setdiff1d(np.unique(y_true), classes)
            raise ValueError(f"y_true holds labels not in classes: {unknown[:5]}.")
    if index.size and (index.min() < 0 or index.max() >= n_classes):
        raise ValueError(f"y_true must lie in 0..{n_classes - 1} when classes is None.")
    return y_sets[np.arange(y_sets.shape[0]), index]


def set_coverage_score(
    y_true: ArrayLike, y_sets: ArrayLike, *, classes: ArrayLike | None = None
) -> float:
    """Fraction of labels inside their prediction set.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels: values of ``classes``, or column indices when
        ``classes`` is None.
    y_sets : array-like of bool, shape (n_samples, n_classes)
        Prediction sets, as returned by ``predict_set``.
    classes : array-like of shape (n_classes,), default=None
        Label of each column (e.g. ``estimator.classes_``).

    Returns
    -------
    coverage : float

    Examples
    --------
    >>> sets = [[True, False], [True, True], [False, False]]
    >>> set_coverage_score(["a", "b", "a"], sets, classes=["a", "b"])
    0.6666666666666666
    """
    return float(np.mean(_set_hits(y_true, y_sets, classes)))


def set_size_score(y_sets: ArrayLike) -> float:
    """Mean number of labels per prediction set.

    Parameters
    ----------
    y_sets : array-like of bool, shape (n_samples, n_classes)
        Prediction sets.

    Returns
    -------
    size : float

    Examples
    --------
    >>> set_size_score([[True, False], [True, True], [False, False]])
    1.0
    """
    return float(np.mean(_check_sets(y_sets).sum(axis=1)))


class SizeStratifiedCoverage(NamedTuple):
    """Coverage by set size: ``sizes``, ``coverage``, ``n_samples``."""

    sizes: np.ndarray
    coverage: np.ndarray
    n_samples: np.ndarray


def size_stratified_coverage(
    y_true: ArrayLike, y_sets: ArrayLike, *, classes: ArrayLike | None = None
) -> SizeStratifiedCoverage:
    """Coverage among the rows whose set has each observed size.

    A method that covers well on average by giving easy rows large sets and
    hard rows small ones shows low coverage in some strata (Angelopoulos et
    al., 2021).

    Parameters
    ----------
    y_true, y_sets, classes
        As in :func:`set_coverage_score`.

    Returns
    -------
    result : SizeStratifiedCoverage
        The observed set sizes (sorted), the coverage among rows of each
        size and the number of such rows.

    Examples
    --------
    >>> sets = [[True, False], [True, True], [False, True]]
    >>> res = size_stratified_coverage([0, 1, 0], sets)
    >>> res.sizes.tolist(), res.coverage.tolist(), res.n_samples.tolist()
    ([1, 2], [0.5, 1.0], [2, 1])
    """
    hits = _set_hits(y_true, y_sets, classes)
    sizes = _check_sets(y_sets).sum(axis=1)
    values, codes, counts = np.unique(sizes, return_inverse=True, return_counts=True)
    covered = np.bincount(codes, weights=hits, minlength=values.shape[0])
    return SizeStratifiedCoverage(values, covered / counts, counts)


@fill_doc
def per_client_set_coverage(
    y_true: ArrayLike,
    y_sets: ArrayLike,
    client_ids: ArrayLike,
    *,
    classes: ArrayLike | None = None,
) -> PerClientCoverage:
    """Coverage of prediction sets within each client's rows.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels (see :func:`set_coverage_score`).
    y_sets : array-like of bool, shape (n_samples, n_classes)
        Prediction sets.
    client_ids : array-like of shape (n_samples,)
        Client of each row.
    classes : array-like of shape (n_classes,), default=None
        Label of each column.

    %(returns_per_client_coverage)s

    Examples
    --------
    >>> sets = [[True, False], [True, True], [False, True]]
    >>> res = per_client_set_coverage([0, 1, 0], sets, ["a", "a", "b"])
    >>> res.clients.tolist(), res.coverage.tolist()
    (['a', 'b'], [1.0, 0.0])
    """
    return _per_client(_set_hits(y_true, y_sets, classes), client_ids)
