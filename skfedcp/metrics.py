"""Metrics for prediction intervals, overall and per client, and their scorers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from .federated import ClientPartition
from .utils._validation import check_alpha
from .utils._warnings import warn_user

__all__ = [
    "PerClientCoverage",
    "coverage_score",
    "get_interval_scorer",
    "interval_score",
    "make_budget_refit",
    "max_coverage_gap",
    "mean_width_score",
    "per_client_coverage",
]


#: ``scorer(estimator, X, y) -> float``, as ``GridSearchCV(scoring=...)`` calls it.
Scorer = Callable[[Any, ArrayLike, ArrayLike], float]


def _as_float_array(value: ArrayLike, name: str) -> NDArray[np.float64]:
    """``value`` as a float64 array, or a TypeError naming the argument."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be an array of numbers; got {type(value).__name__} "
            "that cannot be converted to float."
        ) from None


def _check_y_intervals(y_intervals: ArrayLike) -> NDArray[np.float64]:
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


def _check_y_true_numeric(y_true: ArrayLike) -> NDArray[np.float64]:
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


def _check_intervals(
    y_true: ArrayLike, y_intervals: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    y_true = _check_y_true_numeric(y_true)
    y_intervals = _check_y_intervals(y_intervals)
    if y_true.shape[0] != y_intervals.shape[0]:
        raise ValueError(
            f"y_true and y_intervals must have the same number of rows; got "
            f"{y_true.shape[0]} and {y_intervals.shape[0]}."
        )
    return y_true, y_intervals


def _covered(
    y_true: NDArray[np.float64], y_intervals: NDArray[np.float64]
) -> NDArray[np.bool_]:
    return (y_intervals[:, 0] <= y_true) & (y_true <= y_intervals[:, 1])


def _widths(y_intervals: NDArray[np.float64]) -> NDArray[np.float64]:
    """``|upper - lower|`` per row: a crossed interval has a positive width."""
    return np.abs(y_intervals[:, 1] - y_intervals[:, 0])


def coverage_score(y_true: ArrayLike, y_intervals: ArrayLike) -> float:
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


def mean_width_score(y_intervals: ArrayLike) -> float:
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


def interval_score(y_true: ArrayLike, y_intervals: ArrayLike, *, alpha: float) -> float:
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
    """Coverage of each client: ``clients``, ``coverage``, ``n_samples``.

    A named tuple, so ``clients, coverage, n = result`` unpacks it. It prints
    as a short table (the first and last few clients when there are many) and
    :meth:`to_frame` gives every client as a :class:`pandas.DataFrame`.

    Examples
    --------
    >>> res = PerClientCoverage(["a", "b"], [0.5, 1.0], [2, 1])
    >>> res
    PerClientCoverage: 2 clients, coverage min 0.5 / mean 0.75 / max 1
    client  coverage  n_samples
         a    0.5000          2
         b    1.0000          1
    >>> res.to_frame()["coverage"].tolist()
    [0.5, 1.0]
    """

    clients: np.ndarray
    coverage: np.ndarray
    n_samples: np.ndarray

    def to_frame(self) -> pd.DataFrame:
        """Every client as a DataFrame indexed by client.

        Returns
        -------
        frame : pandas.DataFrame
            Columns ``coverage`` and ``n_samples``, index ``client``.
        """
        return pd.DataFrame(
            {
                "coverage": np.asarray(self.coverage, dtype=np.float64),
                "n_samples": np.asarray(self.n_samples),
            },
            index=pd.Index(np.asarray(self.clients), name="client"),
        )

    def __repr__(self) -> str:
        cov = np.asarray(self.coverage, dtype=np.float64)
        n = cov.shape[0]
        head = f"PerClientCoverage: {n} client{'s' if n != 1 else ''}"
        if n == 0:
            return head
        head += (
            f", coverage min {cov.min():.4g} / mean {cov.mean():.4g} / "
            f"max {cov.max():.4g}"
        )
        clients = [str(c) for c in np.asarray(self.clients)]
        sizes = [str(int(k)) for k in np.asarray(self.n_samples)]
        rows = (
            list(range(n))
            if n <= _REPR_ROWS
            else [
                *range(_REPR_ROWS // 2),
                None,
                *range(n - _REPR_ROWS // 2, n),
            ]
        )
        w_c = max(len("client"), *(len(clients[i]) for i in rows if i is not None))
        w_n = max(len("n_samples"), *(len(sizes[i]) for i in rows if i is not None))
        lines = [head, f"{'client':>{w_c}}  coverage  {'n_samples':>{w_n}}"]
        for i in rows:
            if i is None:
                lines.append(f"{'...':>{w_c}}  {'...':>8}  {'...':>{w_n}}")
            else:
                lines.append(f"{clients[i]:>{w_c}}  {cov[i]:8.4f}  {sizes[i]:>{w_n}}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.__repr__()


_REPR_ROWS = 10  # clients shown by PerClientCoverage's printout (half each end)


def per_client_coverage(
    y_true: ArrayLike, y_intervals: ArrayLike, client_ids: ArrayLike
) -> PerClientCoverage:
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
        Sorted client labels, their coverage and their number of rows; a
        named tuple that prints as a short table and has ``to_frame()``.

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


def max_coverage_gap(
    y_true: ArrayLike,
    y_intervals: ArrayLike,
    client_ids: ArrayLike,
    *,
    alpha: float | None = None,
) -> float:
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


def _final_step(estimator: Any, X: Any, method: str) -> tuple[Any, Any]:
    """The estimator that has ``method`` and ``X`` as that estimator sees it.

    A :class:`~sklearn.pipeline.Pipeline` (nested ones too) is unrolled: its
    steps before the last transform ``X`` and its last step answers. Anything
    else must have ``method`` itself.
    """
    from sklearn.pipeline import Pipeline

    outer = estimator
    while isinstance(estimator, Pipeline) and not hasattr(estimator, method):
        for _, step in estimator.steps[:-1]:
            if step is None or step == "passthrough":
                continue
            X = step.transform(X)
        estimator = estimator.steps[-1][1]
    if not hasattr(estimator, method):
        where = (
            type(estimator).__name__
            if estimator is outer
            else f"{type(estimator).__name__} (last step of {type(outer).__name__})"
        )
        raise TypeError(
            f"{where} has no {method}(); this scorer needs a skfedcp conformal "
            "wrapper, alone or as the last step of a Pipeline (e.g. "
            "FedConformalRegressor(model) or make_pipeline(scaler, "
            "FedConformalRegressor(model)))."
        )
    return estimator, X


class _IntervalScorer:
    """Scorer ``(estimator, X, y) -> float`` built on ``predict_interval``.

    Works on a wrapper or on a Pipeline ending in one. The interval score
    remembers the ``alpha`` values it has seen (its only state) to warn when
    it is asked to compare intervals at different ``alpha``.
    """

    def __init__(
        self, name: str, metric: Callable[..., float], sign: float, needs_alpha: bool
    ) -> None:
        self.name = name
        self._metric = metric
        self._sign = sign
        self._needs_alpha = needs_alpha
        self._alphas_seen: set[float] = set()

    def __call__(self, estimator: Any, X: Any, y: ArrayLike, **kwargs: Any) -> float:
        final, Xt = _final_step(estimator, X, "predict_interval")
        intervals = final.predict_interval(Xt)
        if self._needs_alpha:
            alpha = final.alpha
            if alpha not in self._alphas_seen:
                self._alphas_seen.add(alpha)
                if len(self._alphas_seen) > 1:
                    warn_user(
                        "neg_interval_score scores each estimator at its own "
                        f"alpha, and this scorer has now seen alpha="
                        f"{sorted(self._alphas_seen)}: interval scores at "
                        "different alpha are not comparable (a larger alpha "
                        "usually looks better). To choose alpha, use "
                        "make_budget_refit (the smallest alpha whose intervals "
                        "meet a width budget); see the user guide on tuning.",
                        UserWarning,
                    )
            value = self._metric(y, intervals, alpha=alpha)
        elif self._metric is mean_width_score:
            value = self._metric(intervals)
        else:
            value = self._metric(y, intervals)
        return self._sign * value

    def __repr__(self) -> str:
        return f"get_interval_scorer({self.name!r})"


_SCORERS: dict[str, tuple[Callable[..., float], float, bool]] = {
    "coverage": (coverage_score, 1.0, False),
    "neg_mean_width": (mean_width_score, -1.0, False),
    "neg_interval_score": (interval_score, -1.0, True),
}


def get_interval_scorer(
    name: Literal["coverage", "neg_mean_width", "neg_interval_score"],
) -> Scorer:
    """Return a scorer for ``GridSearchCV(scoring=...)`` by name.

    Scikit-learn only resolves its own scorer names, and its ``make_scorer``
    only calls ``predict`` on regressors, so interval scorers are built here:
    pass one as ``scoring=get_interval_scorer("neg_interval_score")`` or
    several as ``scoring={n: get_interval_scorer(n) for n in names}``.

    Parameters
    ----------
    name : {"coverage", "neg_mean_width", "neg_interval_score"}
        ``"neg_interval_score"`` uses the estimator's own ``alpha``, so it
        compares estimators at one ``alpha`` only; it warns (once per new
        value) when it sees a second ``alpha``, as in a grid over ``alpha``.
        Greater is better for the ``neg_`` forms; coverage is reported as is.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y) -> float``. ``estimator`` is a wrapper
        with ``predict_interval`` or a :class:`~sklearn.pipeline.Pipeline`
        whose last step is one (the earlier steps transform ``X``); anything
        else raises a TypeError naming it.

    See Also
    --------
    make_budget_refit : Choose ``alpha`` or ``epsilon`` for a stated goal.

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

    Returns
    -------
    result : PerClientCoverage
        Sorted client labels, their coverage and their number of rows; a
        named tuple that prints as a short table and has ``to_frame()``.

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

    def __init__(self, name: str, sign: float) -> None:
        self.name = name
        self._sign = sign

    def __call__(self, estimator: Any, X: Any, y: ArrayLike, **kwargs: Any) -> float:
        final, Xt = _final_step(estimator, X, "predict_set")
        sets = final.predict_set(Xt)
        if self.name == "coverage":
            return set_coverage_score(y, sets, classes=final.classes_)
        return self._sign * set_size_score(sets)

    def __repr__(self) -> str:
        return f"get_set_scorer({self.name!r})"


_SET_SCORERS = {"coverage": 1.0, "neg_mean_set_size": -1.0}


def get_set_scorer(name: Literal["coverage", "neg_mean_set_size"]) -> Scorer:
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
        and ``estimator.classes_``; ``estimator`` may also be a
        :class:`~sklearn.pipeline.Pipeline` whose last step has them.

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


# --------------------------------------------------------------------------
# Tuning alpha and epsilon for a stated goal

_BUDGET_METRICS = ("neg_mean_width", "neg_mean_set_size")


class _BudgetRefit:
    """``refit=`` callable: smallest ``param`` whose mean width/size fits."""

    def __init__(self, budget: float, param: str, metric: str) -> None:
        self.budget = budget
        self.param = param
        self.metric = metric

    def __call__(self, cv_results: Mapping[str, Any]) -> int:
        key = f"mean_test_{self.metric}"
        if key not in cv_results:
            raise ValueError(
                f"make_budget_refit needs the {self.metric!r} scorer: pass "
                f"scoring={{{self.metric!r}: "
                f"{'get_set_scorer' if 'set' in self.metric else 'get_interval_scorer'}"
                f"({self.metric!r}), ...}} to the search; cv_results_ has "
                f"{sorted(k for k in cv_results if k.startswith('mean_test_'))}."
            )
        values = -np.asarray(cv_results[key], dtype=np.float64)  # mean width/size
        params = cv_results.get(f"param_{self.param}")
        if params is None:
            raise ValueError(
                f"param={self.param!r} is not a searched parameter; the search "
                f"varies {sorted(k[6:] for k in cv_results if k.startswith('param_'))}."
            )
        # A candidate without the parameter (masked) or with None is not ranked
        # on it; a nested parameter such as "reg__alpha" works the same way.
        raw = np.ma.getdata(params)
        mask = np.ma.getmaskarray(params)
        order = np.array(
            [
                np.inf if m or v is None else float(v)
                for v, m in zip(raw, mask, strict=True)
            ]
        )
        feasible = np.isfinite(values) & (values <= self.budget)
        if not feasible.any():
            best = int(np.nanargmin(np.where(np.isfinite(values), values, np.inf)))
            warn_user(
                f"No candidate meets the budget: the smallest mean "
                f"{self._what()} is {values[best]:.4g} > {self.budget:.4g}; "
                "refitting the candidate closest to the budget.",
                UserWarning,
            )
            return best
        candidates = np.flatnonzero(feasible)
        # Smallest parameter; ties broken by the smaller mean width/size.
        return int(candidates[np.lexsort((values[candidates], order[candidates]))[0]])

    def _what(self) -> str:
        return "set size" if self.metric == "neg_mean_set_size" else "width"

    def __repr__(self) -> str:
        return (
            f"make_budget_refit({self.budget!r}, param={self.param!r}, "
            f"metric={self.metric!r})"
        )


def make_budget_refit(
    budget: float,
    *,
    param: str,
    metric: Literal["neg_mean_width", "neg_mean_set_size"] = "neg_mean_width",
) -> Callable[[Mapping[str, Any]], int]:
    """A ``refit=`` rule: the smallest ``param`` whose mean width fits a budget.

    Scoring each candidate by its own interval score ranks by miscoverage: a
    grid over ``alpha`` then picks the largest ``alpha``. A goal states what
    is traded: the smallest ``alpha`` (highest coverage) whose mean interval
    width stays within ``budget``, or the smallest ``epsilon`` (most privacy)
    whose mean set size stays within a tolerance of the non-private one
    (``budget = (1 + tolerance) * reference``, the reference measured with a
    non-private calibrator on the same data). Pass the result as
    ``GridSearchCV(..., refit=make_budget_refit(...))`` together with the
    matching scorer in ``scoring``; scikit-learn then refits the chosen
    candidate as ``best_estimator_``.

    The budget applies to the mean over the cross-validation folds
    (``cv_results_["mean_test_<metric>"]``), a refit rule rather than a
    scorer because a scorer sees one fold at a time.

    Parameters
    ----------
    budget : float
        Largest acceptable mean interval width (or mean set size), > 0.
    param : str
        Searched parameter to minimise, e.g. ``"alpha"``, ``"epsilon"`` or
        ``"reg__alpha"`` for a wrapper inside a pipeline. Candidates with the
        parameter unset or ``None`` are chosen only if no other fits.
    metric : {"neg_mean_width", "neg_mean_set_size"}, default="neg_mean_width"
        Key of the scorer in ``scoring``: :func:`get_interval_scorer`
        ``("neg_mean_width")`` or :func:`get_set_scorer`
        ``("neg_mean_set_size")``.

    Returns
    -------
    refit : callable
        ``refit(cv_results) -> int``, the index of the chosen candidate: the
        smallest ``param`` among those whose mean width (size) is at most
        ``budget`` (ties: the smaller width). When none fits it warns and
        returns the candidate with the smallest mean width (size).

    See Also
    --------
    get_interval_scorer, get_set_scorer

    Examples
    --------
    >>> refit = make_budget_refit(2.0, param="alpha")
    >>> results = {"param_alpha": [0.05, 0.1, 0.2],
    ...            "mean_test_neg_mean_width": [-2.6, -1.9, -1.2]}
    >>> refit(results)  # alpha=0.1: the smallest alpha with width <= 2
    1
    """
    if isinstance(budget, bool) or not isinstance(budget, (int, float, np.number)):
        raise TypeError(f"budget must be a number; got {type(budget).__name__}.")
    if not (np.isfinite(budget) and budget > 0):
        raise ValueError(f"budget must be a finite number > 0; got {budget!r}.")
    if not isinstance(param, str) or not param:
        raise TypeError(f"param must be a parameter name (str); got {param!r}.")
    if metric not in _BUDGET_METRICS:
        raise ValueError(
            f"metric must be one of {sorted(_BUDGET_METRICS)}; got {metric!r}."
        )
    return _BudgetRefit(float(budget), param, metric)
