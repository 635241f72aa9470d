"""Scorers for ``GridSearchCV(scoring=...)`` and the budget ``refit=`` rule."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from ..utils._warnings import warn_user
from ._intervals import coverage_score, interval_score, mean_width_score
from ._sets import set_coverage_score, set_size_score

__all__ = ["get_interval_scorer", "get_set_scorer", "make_budget_refit"]


#: ``scorer(estimator, X, y) -> float``, as ``GridSearchCV(scoring=...)`` calls it.
Scorer = Callable[[Any, ArrayLike, ArrayLike], float]


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


def _check_one_level(final: Any, scorer: str) -> None:
    """Refuse a wrapper fitted with several levels: a scorer scores one."""
    levels = getattr(final, "alphas_", None)
    if levels is not None:
        raise ValueError(
            f"{scorer} scores one confidence level, but {type(final).__name__} "
            f"was fitted with alpha={np.asarray(levels).tolist()} "
            f"({len(levels)} levels). Search over single alpha values "
            "(param_grid={'alpha': [0.2, 0.1, 0.05]}), or score each level "
            "yourself on predict_interval(X)[:, :, j] / predict_set(X)[:, :, j]."
        )


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
        _check_one_level(final, repr(self))
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
        else raises a TypeError naming it. A scorer scores one confidence
        level: a wrapper fitted with a sequence ``alpha`` raises a
        ValueError (search over single values of ``alpha`` instead).

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


class _SetScorer:
    """Scorer ``(estimator, X, y) -> float`` built on ``predict_set``."""

    def __init__(self, name: str, sign: float) -> None:
        self.name = name
        self._sign = sign

    def __call__(self, estimator: Any, X: Any, y: ArrayLike, **kwargs: Any) -> float:
        final, Xt = _final_step(estimator, X, "predict_set")
        _check_one_level(final, repr(self))
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
        :class:`~sklearn.pipeline.Pipeline` whose last step has them. A
        wrapper fitted with a sequence ``alpha`` raises a ValueError: a
        scorer scores one confidence level.

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
        several = [v for v, m in zip(raw, mask, strict=True) if not m and np.ndim(v)]
        if several:
            raise ValueError(
                f"make_budget_refit ranks candidates by one value of "
                f"{self.param!r}, but the search has {self.param}={several[0]!r}, "
                "a sequence of levels. Search over single values instead."
            )
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
        returns the candidate with the smallest mean width (size). A
        candidate whose ``param`` is a sequence (several ``alpha`` levels)
        cannot be ranked: a ValueError says so.

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
