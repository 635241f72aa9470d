"""Conformalized quantile regression (CQR) scores and the intervals they imply."""

from __future__ import annotations

from numbers import Real
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._typing import MatrixLike
from ..utils._sklearn_compat import Interval
from ._base import _IntervalScore, ordered_interval, resolve_score

__all__ = [
    "CQR_SCORES",
    "AsymmetricCQRScore",
    "BaseCQRScore",
    "CQRScore",
    "NormalizedCQRScore",
    "resolve_cqr_score",
]


def _check_bounds(y_pred):
    """Return the predicted quantiles as two float64 columns ``(lower, upper)``."""
    y_pred = np.asarray(y_pred, dtype=np.float64)
    if y_pred.ndim != 2 or y_pred.shape[1] != 2:
        raise ValueError(
            "y_pred must hold the lower and upper quantile predictions, shape "
            f"(n_samples, 2); got shape {y_pred.shape}."
        )
    return y_pred[:, 0], y_pred[:, 1]


class BaseCQRScore(_IntervalScore):
    """A conformity score built on a lower and an upper quantile prediction.

    Same interface as :class:`~skfedcp.scores.BaseRegressionScore`, except
    that ``y_pred`` has shape ``(n_samples, 2)``: the predicted lower and
    upper quantiles ``(f_lo(x), f_hi(x))``. A score with
    ``n_thresholds = 2`` returns two columns (one per side), each calibrated
    separately, and takes a pair of thresholds.
    """

    n_thresholds = 1


class CQRScore(BaseCQRScore):
    """Symmetric CQR score ``max(f_lo(x) - y, y - f_hi(x))`` (Romano et al.).

    The prediction set for a threshold ``q`` is the interval
    ``[f_lo(x) - q, f_hi(x) + q]``. The score is negative inside the
    predicted band, so ``q`` may be negative (the band shrinks).

    Examples
    --------
    >>> score = CQRScore()
    >>> score.conformity_score([0.0, 3.0], [[1.0, 2.0], [1.0, 2.0]])
    array([1., 1.])
    >>> score.interval([[1.0, 2.0]], 0.5)
    array([[0.5, 2.5]])
    """

    def conformity_score(
        self, y: ArrayLike, y_pred: ArrayLike, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return ``max(f_lo - y, y - f_hi)``."""
        lower, upper = _check_bounds(y_pred)
        y = np.asarray(y, dtype=np.float64)
        return np.maximum(lower - y, y - upper)

    def interval(
        self, y_pred: ArrayLike, threshold: ArrayLike, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return ``[f_lo - threshold, f_hi + threshold]``, never crossed.

        Where the bounds cross (a negative ``threshold`` larger than half the
        band, or crossing quantile models) the conformal set is empty; the
        interval between the two bounds is returned instead, a superset of
        the set, so coverage can only increase.
        """
        lower, upper = _check_bounds(y_pred)
        return ordered_interval(lower - threshold, upper + threshold)


class AsymmetricCQRScore(BaseCQRScore):
    """Asymmetric CQR: one score and one threshold per side.

    The two columns ``(f_lo(x) - y, y - f_hi(x))`` are calibrated separately,
    each at level ``alpha / 2``; the interval for thresholds
    ``(q_lo, q_hi)`` is ``[f_lo(x) - q_lo, f_hi(x) + q_hi]``. By the union
    bound it misses with probability at most ``alpha / 2 + alpha / 2``, and
    each side's miss rate is controlled on its own (Romano et al., 2019,
    Theorem 2).

    Examples
    --------
    >>> score = AsymmetricCQRScore()
    >>> score.conformity_score([0.0, 3.0], [[1.0, 2.0], [1.0, 2.0]])
    array([[ 1., -2.],
           [-2.,  1.]])
    >>> score.interval([[1.0, 2.0]], [0.5, -0.25])
    array([[0.5 , 1.75]])
    """

    n_thresholds = 2

    def conformity_score(
        self, y: ArrayLike, y_pred: ArrayLike, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return the columns ``(f_lo - y, y - f_hi)``, shape (n_samples, 2)."""
        lower, upper = _check_bounds(y_pred)
        y = np.asarray(y, dtype=np.float64)
        # Column-major: each side's scores are contiguous for its calibrator.
        scores = np.empty((2, y.shape[0]))
        np.subtract(lower, y, out=scores[0])
        np.subtract(y, upper, out=scores[1])
        return scores.T

    def interval(
        self, y_pred: ArrayLike, threshold: ArrayLike, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return ``[f_lo - threshold[0], f_hi + threshold[1]]``, never crossed."""
        lower, upper = _check_bounds(y_pred)
        q_lo, q_hi = _check_pair(threshold)
        return ordered_interval(lower - q_lo, upper + q_hi)


def _check_pair(threshold):
    """``(lower, upper)`` of a pair, or of one pair per row (shape (n, 2))."""
    threshold = np.asarray(threshold, dtype=np.float64)
    if threshold.ndim not in (1, 2) or threshold.shape[-1] != 2:
        raise ValueError(
            "threshold must be a pair (lower, upper) for the asymmetric CQR "
            f"score, or one pair per row; got shape {threshold.shape}."
        )
    return threshold[..., 0], threshold[..., 1]


class NormalizedCQRScore(BaseCQRScore):
    """CQR score divided by the predicted band width, floored.

    ``max(f_lo(x) - y, y - f_hi(x)) / w(x)`` with
    ``w(x) = max(f_hi(x) - f_lo(x), min_width)``; the interval for a threshold
    ``q`` is ``[f_lo(x) - q w(x), f_hi(x) + q w(x)]``. The correction scales
    with the model's own uncertainty: wide bands move more than narrow ones.
    The floor keeps the score finite when the band is empty or inverted
    (crossing quantiles). Coverage is as valid as with :class:`CQRScore`:
    ``w`` is a fixed function of ``x`` once the models are fitted.

    Parameters
    ----------
    min_width : float, default=1e-6
        Floor of the band width, in units of ``y``.

    Examples
    --------
    >>> score = NormalizedCQRScore()
    >>> score.conformity_score([0.0, 5.0], [[1.0, 3.0], [1.0, 3.0]])
    array([0.5, 1. ])
    >>> score.interval([[1.0, 3.0]], 0.5)
    array([[0., 4.]])
    """

    _parameter_constraints = {
        "min_width": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, *, min_width: float = 1e-6) -> None:
        self.min_width = min_width

    def _width(self, lower, upper):
        return np.maximum(upper - lower, self.min_width)

    def conformity_score(
        self, y: ArrayLike, y_pred: ArrayLike, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return ``max(f_lo - y, y - f_hi) / max(f_hi - f_lo, min_width)``."""
        lower, upper = _check_bounds(y_pred)
        y = np.asarray(y, dtype=np.float64)
        return np.maximum(lower - y, y - upper) / self._width(lower, upper)

    def interval(
        self, y_pred: ArrayLike, threshold: ArrayLike, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return ``[f_lo - threshold * w, f_hi + threshold * w]``, never crossed."""
        lower, upper = _check_bounds(y_pred)
        half = threshold * self._width(lower, upper)
        return ordered_interval(lower - half, upper + half)


#: Registry name -> CQR score class (the ``conformity_score`` options of
#: :class:`~skfedcp.FedCQRRegressor`).
CQR_SCORES = {
    "symmetric": CQRScore,
    "asymmetric": AsymmetricCQRScore,
    "normalized": NormalizedCQRScore,
}


def resolve_cqr_score(
    score: Literal["symmetric", "asymmetric", "normalized"] | BaseCQRScore,
) -> BaseCQRScore:
    """Return a fresh CQR score from a registry name or a score instance.

    Parameters
    ----------
    score : {"symmetric", "asymmetric", "normalized"} or BaseCQRScore
        A name from ``CQR_SCORES`` or an instance (cloned, never mutated).

    Returns
    -------
    score : BaseCQRScore

    Examples
    --------
    >>> resolve_cqr_score("normalized")
    NormalizedCQRScore()
    """
    return resolve_score(score, CQR_SCORES, BaseCQRScore)
