"""Normalized scores that read the model's own uncertainty (Two Students)."""

from __future__ import annotations

from numbers import Real
from typing import Any, Literal

import numpy as np

from ..utils._sklearn_compat import Interval, StrOptions
from ._base import _ScaledResidualScore

__all__ = ["TwoStudentsOffsetScore", "TwoStudentsScore"]


class TwoStudentsScore(_ScaledResidualScore):
    """Residual divided by the model's own uncertainty, ``|y - mu(x)| / sigma(x)``.

    ``mu`` is the model's ``predict`` and ``sigma`` its ``predict_std``: for
    :class:`~skfedcp.two_students.TwoStudentsRegressor`, the mean and the
    uncertainty student. With a threshold ``q`` the interval is
    ``mu(x) ± q · (sigma(x) + beta)``. The offset ``beta`` (``0`` by default)
    trades adaptivity for width: when the model's disagreement does not track
    the noise of ``y`` (e.g. homoscedastic noise), ``sigma`` alone inflates the
    intervals where the teachers happen to agree least.

    The score reads no label and learns nothing (``requires_fit`` is false):
    :class:`~skfedcp.FedConformalRegressor` hands it the fitted model
    (:meth:`set_estimator`), so a model wrapped in
    :class:`~sklearn.frozen.FrozenEstimator` keeps every row for
    calibration. This conformal step is skfedcp's extension of the Two
    Students paper, which gives no coverage guarantee.

    Parameters
    ----------
    offset : None, "median" or float, default=None
        ``beta``. ``None`` is ``0``; ``"median"`` is the model's
        ``sigma_offset_`` (for Two Students, the median of ``sigma`` over the
        unlabelled server inputs, fixed at fit time); a float is used as is.

    Attributes
    ----------
    estimator_ : estimator
        The fitted model whose ``predict_std`` gives ``sigma``.
    offset_ : float
        The resolved ``beta``.

    Notes
    -----
    Any ``sigma`` fitted without the calibration rows keeps the calibration
    and test scores exchangeable, so the calibrator's guarantee holds
    unchanged: ``P(Y ∈ C(X)) >= 1 - alpha`` when the scores are i.i.d. given
    the fitted model.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedcp import FedConformalRegressor
    >>> from skfedcp.two_students import TwoStudentsRegressor
    >>> from sklearn.neighbors import KNeighborsRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(800, 1))
    >>> y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=800)
    >>> client_ids = np.repeat(np.arange(8), 100)
    >>> X_unlabeled = np.linspace(-3, 3, 300).reshape(-1, 1)
    >>> model = TwoStudentsRegressor(KNeighborsRegressor(10), random_state=0)
    >>> reg = FedConformalRegressor(
    ...     model, conformity_score="two_students", random_state=0
    ... )
    >>> reg = reg.fit(X, y, client_ids=client_ids, X_unlabeled=X_unlabeled)
    >>> reg.predict_interval([[0.0], [2.0]]).shape
    (2, 2)
    >>> reg.conformity_score_
    TwoStudentsScore()
    """

    requires_fit = False
    # FedConformalRegressor calls set_estimator with the fitted model.
    requires_estimator = True

    _parameter_constraints = {
        "offset": [
            None,
            StrOptions({"median"}),
            Interval(Real, 0, None, closed="left"),
        ],
    }

    def __init__(self, *, offset: Literal["median"] | float | None = None) -> None:
        self.offset = offset

    def set_estimator(self, estimator: Any) -> TwoStudentsScore:
        """Attach the fitted model whose ``predict_std`` gives the scale.

        Parameters
        ----------
        estimator : estimator
            A fitted model with ``predict`` and ``predict_std`` (also through
            :class:`~sklearn.frozen.FrozenEstimator`).

        Returns
        -------
        self : TwoStudentsScore
        """
        self._validate_params()
        if not callable(getattr(estimator, "predict_std", None)):
            raise TypeError(
                f"{type(self).__name__} needs a model with a predict_std method "
                f"(e.g. TwoStudentsRegressor); got {type(estimator).__name__}."
            )
        if self.offset is None:
            offset = 0.0
        elif self.offset == "median":
            median = getattr(estimator, "sigma_offset_", None)
            if median is None:
                raise TypeError(
                    "offset='median' needs a model with a sigma_offset_ attribute "
                    f"(e.g. TwoStudentsRegressor); got {type(estimator).__name__}."
                )
            offset = median
        else:
            offset = self.offset
        self.estimator_ = estimator
        self.offset_ = float(offset)
        return self

    def _scale(self, X):
        """``sigma(X) + beta``."""
        if X is None:
            raise ValueError(f"{type(self).__name__} needs X to predict the scale.")
        if not hasattr(self, "estimator_"):
            raise ValueError(
                f"{type(self).__name__} has no model: call set_estimator(model) "
                "first (FedConformalRegressor does it in fit)."
            )
        sigma = np.asarray(self.estimator_.predict_std(X), dtype=np.float64)
        return sigma + self.offset_


class TwoStudentsOffsetScore(TwoStudentsScore):
    """:class:`TwoStudentsScore` with the median offset, ``|y - mu| / (sigma + beta)``.

    The registry's ``"two_students_offset"``: ``beta`` defaults to the
    model's ``sigma_offset_``, the median of ``sigma`` over the unlabelled
    server inputs. Same guarantee as :class:`TwoStudentsScore`.

    Parameters
    ----------
    offset : None, "median" or float, default="median"
        ``beta``; see :class:`TwoStudentsScore`.

    Attributes
    ----------
    estimator_, offset_
        See :class:`TwoStudentsScore`.

    Examples
    --------
    >>> TwoStudentsOffsetScore()
    TwoStudentsOffsetScore()
    >>> TwoStudentsOffsetScore().offset
    'median'
    """

    def __init__(self, *, offset: Literal["median"] | float | None = "median") -> None:
        super().__init__(offset=offset)
