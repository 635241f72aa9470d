"""group_by: the group of each row, for group-conditional (Mondrian) calibration."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import issparse

from ..calibrators._grouped import check_grouped_calibrator, lookup_groups
from ._levels import monotone_thresholds

__all__ = [
    "calibration_groups",
    "check_group_by",
    "fallback_thresholds",
    "group_thresholds",
    "row_groups",
]


def check_group_by(estimator: Any) -> None:
    """Data-free checks of ``group_by`` and ``min_group_size`` against the rest."""
    group_by = estimator.group_by
    owner = type(estimator).__name__
    if group_by is None:
        if estimator.min_group_size is not None:
            raise ValueError(
                f"{owner}: min_group_size applies to group-conditional calibration; "
                "set group_by too (or leave min_group_size=None)."
            )
        return
    if isinstance(group_by, bool):
        raise TypeError(
            f"{owner}: group_by must be None, 'class', a column of X (name or "
            f"integer index) or a callable X -> labels; got {group_by!r}."
        )
    if group_by == "class" and not estimator._groups_by_class:
        raise ValueError(
            f"{owner}: group_by='class' (class-conditional sets) is for "
            "classifiers. To group by a column named 'class', pass its integer "
            "index."
        )
    check_grouped_calibrator(estimator.calibrator, owner=owner)


def row_groups(group_by: Any, X: Any) -> NDArray[Any]:
    """The group of each row of ``X`` by a column (name or index) or a callable.

    Examples
    --------
    >>> row_groups(1, np.array([[0.5, 3], [0.1, 4]])).tolist()
    [3.0, 4.0]
    >>> row_groups(lambda X: X[:, 0] > 0.2, np.array([[0.5, 3], [0.1, 4]])).tolist()
    [True, False]
    """
    n = X.shape[0] if hasattr(X, "shape") else len(X)
    if callable(group_by):
        labels = np.asarray(group_by(X))
        if labels.shape != (n,):
            raise ValueError(
                f"group_by (a callable) must return one label per row, shape "
                f"({n},); got shape {labels.shape}."
            )
        return labels
    if isinstance(group_by, str):
        columns = getattr(X, "columns", None)
        if columns is None:
            raise ValueError(
                f"group_by={group_by!r} names a column of X, but X has no column "
                "names: pass a pandas DataFrame, or the column's integer index."
            )
        if group_by not in columns:
            raise ValueError(
                f"group_by={group_by!r} is not a column of X (columns: "
                f"{list(columns)[:10]})."
            )
        return np.asarray(X[group_by])
    n_features = X.shape[1]
    if not -n_features <= group_by < n_features:
        raise ValueError(
            f"group_by={group_by} is not a column index of X, which has "
            f"{n_features} column(s)."
        )
    if hasattr(X, "iloc"):
        return np.asarray(X.iloc[:, group_by])
    if issparse(X):
        return np.asarray(X[:, [group_by]].toarray()).ravel()
    return np.asarray(X)[:, group_by]


def calibration_groups(estimator: Any, X: Any, y: Any) -> tuple[Any, Any] | None:
    """``(group_ids, known_groups)`` of the calibration rows; None without group_by.

    With ``group_by="class"`` the group of a row is its label, and every
    class of the model is a known group (a class without calibration rows
    gets ``+inf``).
    """
    if estimator.group_by is None:
        return None
    if estimator.group_by == "class":
        return np.asarray(y), estimator.classes_
    return row_groups(estimator.group_by, X), None


def group_thresholds(estimator: Any, labels: Any) -> NDArray[np.float64]:
    """The fitted thresholds of rows whose groups are ``labels``.

    ``threshold_`` has a group axis (first, or second after the level axis
    of a sequence ``alpha``); unseen groups get ``fallback_threshold_``
    (warned). Returns ``threshold_`` with its group axis indexed by the rows.
    """
    index = lookup_groups(estimator.groups_, labels, estimator.fallback_threshold_)
    axis = 1 if hasattr(estimator, "alphas_") else 0
    fallback = np.expand_dims(estimator.fallback_threshold_, axis)
    extended = np.concatenate([estimator.threshold_, fallback], axis=axis)
    return np.take(extended, index, axis=axis)


def fallback_thresholds(fitted: list[Any], levels: Any) -> Any:
    """``fallback_threshold_`` of the wrapper: per level, per side, monotone."""
    per_level = [
        np.stack([side.fallback_threshold_ for side in entry], axis=-1)
        if isinstance(entry, tuple)
        else entry.fallback_threshold_
        for entry in fitted
    ]
    if levels is None:
        return per_level[0]
    return monotone_thresholds(per_level, levels)
