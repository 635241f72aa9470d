"""Metrics for prediction intervals, overall and per client, and their scorers."""

from typing import NamedTuple

import numpy as np
import pandas as pd

from .federated import ClientPartition
from .utils._validation import check_alpha

__all__ = [
    "PerClientCoverage",
    "coverage_score",
    "get_interval_scorer",
    "interval_score",
    "max_coverage_gap",
    "mean_width_score",
    "per_client_coverage",
]


def _as_float_array(value, name):
    """``value`` as a float64 array, or a TypeError naming the argument."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be an array of numbers; got {type(value).__name__} "
            "that cannot be converted to float."
        ) from None


def _check_y_intervals(y_intervals):
    y_intervals = _as_float_array(y_intervals, "y_intervals")
    if y_intervals.ndim != 2 or y_intervals.shape[1] != 2:
        raise ValueError(
            f"y_intervals must have shape (n_samples, 2); got {y_intervals.shape}."
        )
    if y_intervals.shape[0] == 0:
        raise ValueError("y_intervals is empty: at least one interval is needed.")
    if np.isnan(y_intervals).any():
        rows = np.flatnonzero(np.isnan(y_intervals).any(axis=1))
        raise ValueError(
            f"y_intervals contains NaN (rows {rows[:5].tolist()}); a NaN bound "
            "is neither a hit nor a miss. Infinite bounds are allowed."
        )
    return y_intervals


def _check_y_true_numeric(y_true):
    y_true = _as_float_array(y_true, "y_true")
    if y_true.ndim != 1:
        raise ValueError(f"y_true must be 1-D; got shape {y_true.shape}.")
    if not np.isfinite(y_true).all():
        rows = np.flatnonzero(~np.isfinite(y_true))
        raise ValueError(
            f"y_true contains NaN or infinity (rows {rows[:5].tolist()}); true "
            "targets must be finite."
        )
    return y_true


def _check_intervals(y_true, y_intervals):
    y_true = _check_y_true_numeric(y_true)
    y_intervals = _check_y_intervals(y_intervals)
    if y_true.shape[0] != y_intervals.shape[0]:
        raise ValueError(
            f"y_true and y_intervals must have the same number of rows; got "
            f"{y_true.shape[0]} and {y_intervals.shape[0]}."
        )
    return y_true, y_intervals


def _covered(y_true, y_intervals):
    return (y_intervals[:, 0] <= y_true) & (y_true <= y_intervals[:, 1])


def _widths(y_intervals):
    """``|upper - lower|`` per row: a crossed interval has a positive width."""
    return np.abs(y_intervals[:, 1] - y_intervals[:, 0])


def coverage_score(y_true, y_intervals):
    """Fraction of targets inside their interval (bounds included).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True targets.
    y_intervals : array-like of shape (n_samples, 2)
        Lower and upper bounds, as returned by ``predict_interval``.

    Returns
    -------
    coverage : float

    Examples
    --------
    >>> coverage_score([1.0, 5.0], [[0.0, 2.0], [0.0, 2.0]])
    0.5
    """
    y_true, y_intervals = _check_intervals(y_true, y_intervals)
    return float(np.mean(_covered(y_true, y_intervals)))


def mean_width_score(y_intervals):
    """Mean interval width ``|upper - lower|`` (``inf`` if any is infinite).

    A crossed interval (lower above upper) counts with its absolute width,
    as in MAPIE and puncc; skfedcp's estimators never return one.

    Parameters
    ----------
    y_intervals : array-like of shape (n_samples, 2)
        Lower and upper bounds.

    Returns
    -------
    width : float

    Examples
    --------
    >>> mean_width_score([[0.0, 2.0], [1.0, 2.0]])
    1.5
    >>> mean_width_score([[2.0, 0.0]])
    2.0
    """
    return float(np.mean(_widths(_check_y_intervals(y_intervals))))


def interval_score(y_true, y_intervals, *, alpha):
    """Mean interval (Winkler) score; lower is better.

    ``width + (2/alpha)·(lower - y)·1[y < lower] + (2/alpha)·(y - upper)·1[y > upper]``,
    a proper scoring rule for the central ``1 - alpha`` interval
    (Gneiting & Raftery, 2007). ``width`` is ``|upper - lower|`` (see
    :func:`mean_width_score`).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True targets.
    y_intervals : array-like of shape (n_samples, 2)
        Lower and upper bounds.
    alpha : float
        Miscoverage level the intervals target.

    Returns
    -------
    score : float

    Examples
    --------
    >>> interval_score([1.0, 3.0], [[0.0, 2.0], [0.0, 2.0]], alpha=0.5)
    4.0
    """
    y_true, y_intervals = _check_intervals(y_true, y_intervals)
    alpha = check_alpha(alpha)
    lower, upper = y_intervals[:, 0], y_intervals[:, 1]
    below = np.maximum(lower - y_true, 0.0)
    above = np.maximum(y_true - upper, 0.0)
    return float(np.mean(_widths(y_intervals) + (2.0 / alpha) * (below + above)))


class PerClientCoverage(NamedTuple):
    """Coverage of each client: ``clients``, ``coverage``, ``n_samples``."""

    clients: np.ndarray
    coverage: np.ndarray
    n_samples: np.ndarray


def per_client_coverage(y_true, y_intervals, client_ids):
    """Coverage within each client's rows.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True targets.
    y_intervals : array-like of shape (n_samples, 2)
        Lower and upper bounds.
    client_ids : array-like of shape (n_samples,)
        Client of each row.

    Returns
    -------
    result : PerClientCoverage
        Sorted client labels, their coverage and their number of rows.

    Examples
    --------
    >>> res = per_client_coverage([1, 5, 1], [[0, 2]] * 3, ["a", "a", "b"])
    >>> res.clients.tolist(), res.coverage.tolist()
    (['a', 'b'], [0.5, 1.0])
    """
    y_true, y_intervals = _check_intervals(y_true, y_intervals)
    part = ClientPartition(client_ids, y_true.shape[0])
    hits = np.bincount(
        part.client_codes(),
        weights=_covered(y_true, y_intervals),
        minlength=part.n_clients,
    )
    return PerClientCoverage(part.clients, hits / part.sizes, part.sizes)


def max_coverage_gap(y_true, y_intervals, client_ids, *, alpha=None):
    """Largest shortfall of a client's coverage below the target.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True targets.
    y_intervals : array-like of shape (n_samples, 2)
        Lower and upper bounds.
    client_ids : array-like of shape (n_samples,)
        Client of each row.
    alpha : float, default=None
        Target is ``1 - alpha``; ``None`` uses the overall coverage instead.

    Returns
    -------
    gap : float
        ``max_c(target - coverage_c)``, floored at 0: 0 means every client
        reaches the target.

    Examples
    --------
    >>> max_coverage_gap([1, 5, 1], [[0, 2]] * 3, ["a", "a", "b"], alpha=0.1)
    0.4
    """
    res = per_client_coverage(y_true, y_intervals, client_ids)
    if alpha is None:
        target = coverage_score(y_true, y_intervals)
    else:
        target = 1.0 - check_alpha(alpha)
    return float(max(np.max(target - res.coverage), 0.0))


class _IntervalScorer:
    """Scorer ``(estimator, X, y) -> float`` built on ``predict_interval``."""

    def __init__(self, name, metric, sign, needs_alpha):
        self.name = name
        self._metric = metric
        self._sign = sign
        self._needs_alpha = needs_alpha

    def __call__(self, estimator, X, y, **kwargs):
        intervals = estimator.predict_interval(X)
        if self._needs_alpha:
            value = self._metric(y, intervals, alpha=estimator.alpha)
        elif self._metric is mean_width_score:
            value = self._metric(intervals)
        else:
            value = self._metric(y, intervals)
        return self._sign * value

    def __repr__(self):
        return f"get_interval_scorer({self.name!r})"


_SCORERS = {
    "coverage": (coverage_score, 1.0, False),
    "neg_mean_width": (mean_width_score, -1.0, False),
    "neg_interval_score": (interval_score, -1.0, True),
}


def get_interval_scorer(name):
    """Return a scorer for ``GridSearchCV(scoring=...)`` by name.

    Scikit-learn only resolves its own scorer names, and its ``make_scorer``
    only calls ``predict`` on regressors, so interval scorers are built here:
    pass one as ``scoring=get_interval_scorer("neg_interval_score")`` or
    several as ``scoring={n: get_interval_scorer(n) for n in names}``.

    Parameters
    ----------
    name : {"coverage", "neg_mean_width", "neg_interval_score"}
        ``"neg_interval_score"`` uses the estimator's own ``alpha``. Greater
        is better for the ``neg_`` forms; coverage is reported as is.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``.

    Examples
    --------
    >>> get_interval_scorer("neg_mean_width")
    get_interval_scorer('neg_mean_width')
    """
    try:
        metric, sign, needs_alpha = _SCORERS[name]
    except KeyError:
        raise ValueError(
            f"name must be one of {sorted(_SCORERS)}; got {name!r}."
        ) from None
    return _IntervalScorer(name, metric, sign, needs_alpha)


# --------------------------------------------------------------------------
# Prediction sets (classification): boolean (n_samples, n_classes) arrays


def _check_sets(y_sets):
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


def _set_hits(y_true, y_sets, classes):
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


def set_coverage_score(y_true, y_sets, *, classes=None):
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


def set_size_score(y_sets):
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


def size_stratified_coverage(y_true, y_sets, *, classes=None):
    """Coverage among the rows whose set has each observed size.

    A method that covers well on average by giving easy rows large sets and
    hard rows small ones shows low coverage in some strata (Angelopoulos et
    al., 2021).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels (see :func:`set_coverage_score`).
    y_sets : array-like of bool, shape (n_samples, n_classes)
        Prediction sets.
    classes : array-like of shape (n_classes,), default=None
        Label of each column.

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


def per_client_set_coverage(y_true, y_sets, client_ids, *, classes=None):
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

    Returns
    -------
    result : PerClientCoverage
        Sorted client labels, their coverage and their number of rows.

    Examples
    --------
    >>> sets = [[True, False], [True, True], [False, True]]
    >>> res = per_client_set_coverage([0, 1, 0], sets, ["a", "a", "b"])
    >>> res.clients.tolist(), res.coverage.tolist()
    (['a', 'b'], [1.0, 0.0])
    """
    hits = _set_hits(y_true, y_sets, classes)
    part = ClientPartition(client_ids, hits.shape[0])
    covered = np.bincount(part.client_codes(), weights=hits, minlength=part.n_clients)
    return PerClientCoverage(part.clients, covered / part.sizes, part.sizes)


class _SetScorer:
    """Scorer ``(estimator, X, y) -> float`` built on ``predict_set``."""

    def __init__(self, name, sign):
        self.name = name
        self._sign = sign

    def __call__(self, estimator, X, y, **kwargs):
        sets = estimator.predict_set(X)
        if self.name == "coverage":
            return set_coverage_score(y, sets, classes=estimator.classes_)
        return self._sign * set_size_score(sets)

    def __repr__(self):
        return f"get_set_scorer({self.name!r})"


_SET_SCORERS = {"coverage": 1.0, "neg_mean_set_size": -1.0}


def get_set_scorer(name):
    """Return a prediction-set scorer for ``GridSearchCV(scoring=...)``.

    Parameters
    ----------
    name : {"coverage", "neg_mean_set_size"}
        Set coverage (reported as is) or minus the mean set size (greater is
        better).

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``, using ``estimator.predict_set``
        and ``estimator.classes_``.

    Examples
    --------
    >>> get_set_scorer("neg_mean_set_size")
    get_set_scorer('neg_mean_set_size')
    """
    try:
        sign = _SET_SCORERS[name]
    except KeyError:
        raise ValueError(
            f"name must be one of {sorted(_SET_SCORERS)}; got {name!r}."
        ) from None
    return _SetScorer(name, sign)


__all__ += [
    "SizeStratifiedCoverage",
    "get_set_scorer",
    "per_client_set_coverage",
    "set_coverage_score",
    "set_size_score",
    "size_stratified_coverage",
]
