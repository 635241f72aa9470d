"""What the conformity scores share: base classes, resolution, intervals.

Kept apart so that :mod:`._regression` (the registry) and :mod:`._two_students`
both import it without importing each other in a circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone

from .._typing import MatrixLike
from ..utils._sklearn_compat import ParamNamesCacheMixin

__all__ = ["BaseRegressionScore", "ordered_interval", "resolve_score"]


def resolve_score(score: Any, registry: Mapping[str, type], base: type) -> Any:
    """Return a fresh score from a name of ``registry`` or a ``base`` instance.

    An instance is cloned (never mutated); the score's own parameters are
    validated here, since the wrappers' validation does not reach them.

    Examples
    --------
    >>> resolve_score("absolute", {"absolute": BaseRegressionScore},
    ...               BaseRegressionScore)
    BaseRegressionScore()
    """
    if isinstance(score, str):
        try:
            score = registry[score]()
        except KeyError:
            raise ValueError(
                f"conformity_score must be one of {sorted(registry)} or a "
                f"{base.__name__} instance; got {score!r}."
            ) from None
    elif isinstance(score, base):
        score = clone(score)
    else:
        raise TypeError(
            f"conformity_score must be a string or a {base.__name__} instance; "
            f"got {type(score).__name__}."
        )
    score._validate_params()
    return score


def ordered_interval(
    lower: NDArray[np.float64], upper: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Stack ``(lower, upper)`` into ``(n_samples, 2)`` bounds that never cross.

    A conformal set ``{y : score <= q}`` is empty where a negative correction
    ``q`` (or crossing quantile models) puts the computed lower bound above the
    upper one. Such rows are returned as the interval between the two bounds,
    ``[min, max]``: a superset of the (empty) conformal set, so coverage can
    only increase, and the width is ``|upper - lower|``, the convention of
    MAPIE and puncc.

    Examples
    --------
    >>> ordered_interval(np.array([0.0, 3.0]), np.array([1.0, 2.0]))
    array([[0., 1.],
           [2., 3.]])
    """
    out = np.empty((lower.shape[0], 2))  # C-ordered: row i is (lower_i, upper_i)
    np.minimum(lower, upper, out=out[:, 0])
    np.maximum(lower, upper, out=out[:, 1])
    return out


class _IntervalScore(ParamNamesCacheMixin, BaseEstimator):
    """A conformity score of a regression prediction and the interval it implies.

    A score maps ``(y, y_pred)`` to a number, larger meaning a worse fit; the
    prediction set for a threshold ``q`` is ``{y : score(y, y_pred) <= q}``,
    which :meth:`interval` returns as ``(n_samples, 2)`` bounds.
    """

    _parameter_constraints: dict[str, list[Any]] = {}

    def conformity_score(
        self, y: ArrayLike, y_pred: ArrayLike, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return one score per row (larger = worse fit)."""
        raise NotImplementedError

    def interval(
        self, y_pred: ArrayLike, threshold: Any, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return the ``(n_samples, 2)`` interval ``{y : score <= threshold}``."""
        raise NotImplementedError


class BaseRegressionScore(_IntervalScore):
    """A regression conformity score and the interval it implies.

    A score maps ``(y, y_pred)`` to a number, larger meaning a worse fit; the
    prediction set for a threshold ``q`` is ``{y : score(y, y_pred) <= q}``,
    which :meth:`interval` returns as ``(n_samples, 2)`` bounds.
    Subclasses that learn something (e.g. a scale model) set
    ``requires_fit = True`` and implement :meth:`fit`.
    """

    requires_fit = False

    def input_models(self) -> list[Any]:
        """The models of the score that read ``X`` (default: none).

        A wrapper accepts NaN or sparse ``X`` only if these models do too.
        """
        return []

    def fit(
        self, X: MatrixLike | None, y: ArrayLike | None, y_pred: ArrayLike | None
    ) -> BaseRegressionScore:
        """Learn what the score needs from training rows (default: nothing).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or None
            Training inputs (None for a score that reads nothing, e.g. one
            whose scale model is frozen).
        y : array-like of shape (n_samples,) or None
            Training targets.
        y_pred : array-like of shape (n_samples,) or None
            The fitted model's predictions on ``X``.

        Returns
        -------
        self : BaseRegressionScore
        """
        return self


class _ScaledResidualScore(BaseRegressionScore):
    """Residual divided by a scale of the input, ``|y - y_pred| / s(x)``.

    Subclasses give the scale ``s`` (``_scale(X)``, at least positive); the
    interval for a threshold ``q`` is ``y_pred ± q · s(x)``.
    """

    def _scale(self, X):
        raise NotImplementedError

    def conformity_score(
        self, y: ArrayLike, y_pred: ArrayLike, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return ``|y - y_pred| / s(X)``."""
        residual = np.abs(np.asarray(y, dtype=np.float64) - np.asarray(y_pred))
        return residual / self._scale(X)

    def interval(
        self, y_pred: ArrayLike, threshold: float, X: MatrixLike | None = None
    ) -> NDArray[np.float64]:
        """Return ``y_pred ± threshold * s(X)``, lower bound first."""
        y_pred = np.asarray(y_pred, dtype=np.float64)
        half = threshold * self._scale(X)
        return ordered_interval(y_pred - half, y_pred + half)
