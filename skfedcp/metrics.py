"""Metrics for prediction intervals, overall and per client, and their scorers."""

from typing import NamedTuple

import numpy as np
from sklearn.utils.validation import check_consistent_length

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


def _check_intervals(y_true, y_intervals):
    y_true = np.asarray(y_true, dtype=np.float64)
    y_intervals = np.asarray(y_intervals, dtype=np.float64)
    if y_true.ndim != 1:
        raise ValueError(f"y_true must be 1-D; got shape {y_true.shape}.")
    if y_intervals.ndim != 2 or y_intervals.shape[1] != 2:
        raise ValueError(
            f"y_intervals must have shape (n_samples, 2); got {y_intervals.shape}."
        )
    check_consistent_length(y_true, y_intervals)
    return y_true, y_intervals


def _covered(y_true, y_intervals):
    return (y_intervals[:, 0] <= y_true) & (y_true <= y_intervals[:, 1])


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
    """Mean interval width ``upper - lower`` (``inf`` if any interval is infinite).

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
    """
    y_intervals = np.asarray(y_intervals, dtype=np.float64)
    if y_intervals.ndim != 2 or y_intervals.shape[1] != 2:
        raise ValueError(
            f"y_intervals must have shape (n_samples, 2); got {y_intervals.shape}."
        )
    return float(np.mean(y_intervals[:, 1] - y_intervals[:, 0]))


def interval_score(y_true, y_intervals, *, alpha):
    """Mean interval (Winkler) score; lower is better.

    ``width + (2/alpha)·(lower - y)·1[y < lower] + (2/alpha)·(y - upper)·1[y > upper]``,
    a proper scoring rule for the central ``1 - alpha`` interval
    (Gneiting & Raftery, 2007).

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
    return float(np.mean(upper - lower + (2.0 / alpha) * (below + above)))


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
