"""Regression conformity scores and the intervals they imply."""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.frozen import FrozenEstimator

from .._typing import MatrixLike
from ..utils._sklearn_compat import HasMethods, Interval
from ._base import BaseRegressionScore, _ScaledResidualScore, resolve_score
from ._two_students import TwoStudentsOffsetScore, TwoStudentsScore

__all__ = [
    "AbsoluteResidualScore",
    "BaseRegressionScore",
    "NormalizedResidualScore",
    "resolve_regression_score",
]


class AbsoluteResidualScore(BaseRegressionScore):
    """Absolute residual ``|y - y_pred|``; interval ``y_pred ± q``.

    Examples
    --------
    >>> score = AbsoluteResidualScore()
    >>> score.conformity_score([1.0, 3.0], [1.5, 1.0])
    array([0.5, 2. ])
    >>> score.interval([1.0, 2.0], 0.5)
    array([[0.5, 1.5],
           [1.5, 2.5]])
    """

    def conformity_score(
        self, y: ArrayLike, y_pred: ArrayLike, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return ``|y - y_pred|``."""
        residual = np.subtract(
            np.asarray(y, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
        )
        return np.abs(residual, out=residual)  # in place: no second temporary

    def interval(
        self, y_pred: ArrayLike, threshold: float, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return ``[y_pred - |threshold|, y_pred + |threshold|]``.

        A negative threshold gives an empty conformal set; the interval
        between the two computed bounds is returned instead (never crossed,
        see :func:`ordered_interval`).
        """
        y_pred = np.asarray(y_pred, dtype=np.float64)
        half = np.abs(threshold)
        # One preallocated C-ordered (n_samples, 2) array, each column written
        # once straight from y_pred (no temporaries); the second column finds
        # the rows' cache lines still warm from the first.
        out = np.empty((y_pred.shape[0], 2))
        np.subtract(y_pred, half, out=out[:, 0])
        np.add(y_pred, half, out=out[:, 1])
        return out


class NormalizedResidualScore(_ScaledResidualScore):
    """Residual scaled by a model of its size, ``|y - y_pred| / sigma(x)``.

    The interval ``y_pred ± q·sigma(x)`` adapts its width to the input. The
    scale model ``sigma`` is fitted on the absolute training residuals (or
    used as is when passed as a :class:`~sklearn.frozen.FrozenEstimator`);
    its predictions are floored at ``min_scale`` so that the score is finite.
    Coverage is as valid as with the absolute residual: any scale fitted on
    rows disjoint from the calibration rows keeps the scores exchangeable.

    Parameters
    ----------
    scale_estimator : estimator, default=None
        Regressor of ``|y - y_pred|`` on ``X``. ``None`` uses
        ``HistGradientBoostingRegressor(max_iter=100, early_stopping=False)``.
    min_scale : float, default=1e-6
        Floor applied to the predicted scale.

    Attributes
    ----------
    scale_estimator_ : estimator
        The fitted scale model.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> X = np.arange(10.0).reshape(-1, 1)
    >>> score = NormalizedResidualScore(LinearRegression())
    >>> score = score.fit(X, X[:, 0], X[:, 0] * 0.5)
    >>> score.interval([0.0], 1.0, X=[[4.0]]).round(2)
    array([[-2.,  2.]])
    """

    requires_fit = True

    _parameter_constraints = {
        "scale_estimator": [HasMethods(["fit", "predict"]), None],
        "min_scale": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, scale_estimator: Any = None, *, min_scale: float = 1e-6) -> None:
        self.scale_estimator = scale_estimator
        self.min_scale = min_scale

    def fit(
        self, X: MatrixLike | None, y: ArrayLike | None, y_pred: ArrayLike | None
    ) -> NormalizedResidualScore:
        """Fit the scale model on ``|y - y_pred|`` (skipped if it is frozen).

        A frozen scale model reads nothing: ``X``, ``y`` and ``y_pred`` may
        then be None (as when the point model is frozen too).
        """
        est = self.scale_estimator
        if isinstance(est, FrozenEstimator):
            self.scale_estimator_ = est
            return self
        if est is None:
            est = _default_scale_model()
        residual = np.abs(np.asarray(y, dtype=np.float64) - np.asarray(y_pred))
        self.scale_estimator_ = clone(est).fit(X, residual)
        return self

    def input_models(self) -> list[Any]:
        """The scale model (or its default), which reads ``X`` like the point model.

        Something that is not a model is left out here and refused by the
        parameter validation of :meth:`fit`, with its own message.
        """
        if self.scale_estimator is None:
            return [_default_scale_model()]
        return [self.scale_estimator] if hasattr(self.scale_estimator, "fit") else []

    def _scale(self, X):
        """``max(sigma(X), min_scale)``."""
        if X is None:
            raise ValueError("NormalizedResidualScore needs X to predict the scale.")
        scale = np.asarray(self.scale_estimator_.predict(X), dtype=np.float64)
        return np.maximum(scale, self.min_scale)


def _default_scale_model():
    return HistGradientBoostingRegressor(max_iter=100, early_stopping=False)


REGRESSION_SCORES = {
    "absolute": AbsoluteResidualScore,
    "normalized": NormalizedResidualScore,
    "two_students": TwoStudentsScore,
    "two_students_offset": TwoStudentsOffsetScore,
}


def resolve_regression_score(
    score: str | BaseRegressionScore,
) -> BaseRegressionScore:
    """Return a fresh score object from a registry name or a score instance.

    Examples
    --------
    >>> resolve_regression_score("normalized")
    NormalizedResidualScore()
    """
    return resolve_score(score, REGRESSION_SCORES, BaseRegressionScore)
