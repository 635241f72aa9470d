"""FedConformalRegressor: prediction intervals calibrated across clients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression

from .._typing import SecureRandomStateLike
from ..base import BaseFedConformal, ConformalIntervalMixin
from ..calibrators import BaseCalibrator
from ..scores import REGRESSION_SCORES, BaseRegressionScore, resolve_regression_score
from ..utils._docstrings import fill_doc
from ..utils._sklearn_compat import HasMethods, StrOptions

__all__ = ["FedConformalRegressor"]


@fill_doc
class FedConformalRegressor(RegressorMixin, ConformalIntervalMixin, BaseFedConformal):
    """Conformal prediction intervals for any regressor, calibrated across clients.

    The model predicts; each client turns its calibration rows into
    conformity scores; a calibration strategy (``calibrator``) combines the
    clients' messages into one threshold ``q``; the interval is the set of
    ``y`` whose score is at most ``q`` (``y_pred ± q`` for the absolute
    residual).

    Parameters
    ----------
    estimator : regressor, default=None
        The point model. A fitted model wrapped in
        :class:`~sklearn.frozen.FrozenEstimator` is used as is and every row
        calibrates; ``clone`` and ``GridSearchCV`` keep it fixed. A plain
        fitted model is also used as is (with a
        :class:`~skfedcp.exceptions.PrefitEstimatorWarning`), but a clone of
        it is unfitted, so ``GridSearchCV`` would refit it. An unfitted model
        is cloned and fitted on a random split made within each client (see
        ``calibration_size``). ``None`` means
        :class:`~sklearn.linear_model.LinearRegression`.
    %(wrapper_alpha)s
    calibrator : str or BaseCalibrator, default="qq"
        Calibration strategy: ``"qq"`` (quantile of quantiles, exact
        coverage), ``"central"`` (pooled split CP, the reference; clients send
        raw scores), ``"avg"`` (mean of local quantiles, no guarantee),
        ``"dp-qq"`` (FedCP²-QQ: each client releases an ``epsilon``-DP
        quantile), ``"dp-central"`` (``epsilon``-DP split CP by a trusted
        curator), or a calibrator instance (cloned, never mutated).
    conformity_score : {"absolute", "normalized", "two_students", \
            "two_students_offset"} or BaseRegressionScore, default="absolute"
        Conformity score: ``|y - y_pred|``, or the residual divided by a
        fitted scale model (``NormalizedResidualScore``), or by the model's
        own ``predict_std`` (``TwoStudentsScore``, for
        :class:`~skfedcp.two_students.TwoStudentsRegressor`). (Named so as
        not to shadow the ``score(X, y)`` method of scikit-learn regressors.)
    epsilon : float, default=None
        Privacy parameter passed to a private calibrator (``"dp-qq"``,
        ``"dp-central"``), overriding its own; ``None`` keeps the
        calibrator's. Ignored by non-private calibrators.
    score_bounds : tuple of two floats, default=None
        Public bounds ``(low, high)`` of the conformity scores, required by
        the private calibrators and fixed without looking at the data (e.g.
        ``(0, B)`` for the absolute residual). Scores outside are clipped
        (with a :class:`~skfedcp.exceptions.ClippedScoresWarning`); scores
        above ``high`` fall in the top bin, whose release gives infinite
        intervals, so coverage holds for the raw scores. Ignored by
        non-private calibrators.
    calibration_size : float, default=0.5
        Fraction of each client's rows used for calibration when something
        must be fitted (an unfrozen estimator or score); the rest trains.
    random_state : None, int, SeedSequence, Generator, RandomState or \
            "secure", default=None
        Root of all randomness of ``fit``: one
        :class:`~numpy.random.SeedSequence` whose independent children seed
        the per-client split and the calibrator. ``None`` draws fresh
        operating-system entropy (NumPy's global state is never used); an
        int makes fits reproducible (simulations). ``"secure"`` (private
        calibrators only) draws the mechanism's noise from the operating
        system's secure generator; the split then uses fresh OS entropy.
        All randomness is consumed in ``fit``.
    n_jobs : int, default=None
        Reserved for parallel client simulation; the built-in strategies are
        vectorised and ignore it.
    %(wrapper_group_by)s

    Attributes
    ----------
    estimator_ : regressor
        The fitted point model (the user's object itself when prefit).
    conformity_score_ : BaseRegressionScore
        The fitted conformity score.
    calibrator_ : BaseCalibrator
        The fitted calibration strategy (a clone of ``calibrator``).
    threshold_ : float or ndarray of shape (n_levels,)
        The calibrated score threshold; ``+inf`` means infinite intervals.
        One per level for a sequence ``alpha``, non-increasing in ``alpha``.
    messages_ : dict of ndarray
        What the server received from each client (one entry per client).
    %(wrapper_clients_attrs)s
    epsilon_spent_ : float
        Privacy loss of the calibration rows from this fit (per client for
        ``"dp-qq"``); ``inf`` for non-private calibrators. It covers the
        calibration only: rows that train an unfitted model or scale model
        are not protected (fit then warns with
        :class:`~skfedcp.exceptions.PrivacyLeakWarning`).
    %(wrapper_level_attrs)s
    %(wrapper_group_attrs)s

    See Also
    --------
    skfedcp.calibrators.QuantileOfQuantilesCalibrator : the default strategy.

    Notes
    -----
    The guarantee is the calibrator's: for ``"qq"`` and ``"central"``, if the
    calibration scores and the test score are i.i.d. given the fitted model
    (clients may differ in their raw data as long as their score laws do
    not), then ``P(y in interval) >= 1 - alpha``. It is marginal, over the
    calibration data and the test point, not per client. Calibration rows
    must not have trained the model: a frozen model must have been fitted on
    other data. The private calibrators (``"dp-qq"``, ``"dp-central"``) keep
    ``>= 1 - alpha`` and make the released threshold ``epsilon``-DP with
    respect to the calibration scores (per client for ``"dp-qq"``); see
    :ref:`privacy`.

    **Several levels.** With ``alpha`` a sequence, one calibrator per level runs on the
    same calibration scores (one round, each client sending one message per level). The
    sets are nested by construction: going from the largest ``alpha`` to the smallest,
    each threshold is raised to the largest of its own and those of every larger
    ``alpha`` (a running maximum), and each interval is widened to the hull of those of
    every larger ``alpha``. Raising a threshold or widening a set only adds coverage, so
    each level keeps its guarantee. For a private calibrator ``epsilon`` stays the
    budget of the whole fit: each of the ``n_levels`` releases gets ``epsilon /
    n_levels``, and by sequential composition ``epsilon_spent_`` (the sum of
    ``epsilon_spent_per_level_``) is what one fit at a single level would spend. For the
    LDP calibrators each level's ``delta`` holds separately (all levels at once:
    ``n_levels * delta``, by the union bound).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from sklearn.frozen import FrozenEstimator
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 3))
    >>> y = X @ [1.0, -2.0, 0.5] + rng.normal(size=600)
    >>> model = LinearRegression().fit(X[:200], y[:200])
    >>> client_ids = np.repeat(np.arange(10), 40)
    >>> reg = FedConformalRegressor(FrozenEstimator(model), alpha=0.1)
    >>> reg = reg.fit(X[200:], y[200:], client_ids=client_ids)
    >>> reg.predict_interval(X[:2]).shape
    (2, 2)
    >>> reg.n_clients_, reg.calibrator_.calibration_info_["k"]
    (10, 7)
    >>> round(reg.calibrator_.calibration_info_["coverage"], 4)
    0.9011
    """

    _parameter_constraints = {
        **BaseFedConformal._parameter_constraints,
        "estimator": [HasMethods(["fit", "predict"]), None],
        "conformity_score": [StrOptions(set(REGRESSION_SCORES)), BaseRegressionScore],
    }
    _score_resolver = staticmethod(resolve_regression_score)

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        *,
        alpha: float = 0.1,
        calibrator: str | BaseCalibrator = "qq",
        conformity_score: Literal[
            "absolute", "normalized", "two_students", "two_students_offset"
        ]
        | BaseRegressionScore = "absolute",
        epsilon: float | None = None,
        score_bounds: tuple[float, float] | None = None,
        calibration_size: float = 0.5,
        random_state: SecureRandomStateLike = None,
        n_jobs: int | None = None,
        group_by: str | int | Callable[[Any], ArrayLike] | None = None,
        min_group_size: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.alpha = alpha
        self.calibrator = calibrator
        self.conformity_score = conformity_score
        self.epsilon = epsilon
        self.score_bounds = score_bounds
        self.calibration_size = calibration_size
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.group_by = group_by
        self.min_group_size = min_group_size

    def _default_estimator(self):
        return LinearRegression()

    def _input_models(self):
        # The scale model of a normalized score reads X too (its tags count).
        name = self.conformity_score
        cls = REGRESSION_SCORES.get(name) if isinstance(name, str) else None
        score = name if cls is None else cls()
        extra = score.input_models() if isinstance(score, BaseRegressionScore) else []
        return [*super()._input_models(), *extra]

    def _needs_training_rows(self, score):
        # A scale model learns from training rows, even next to a prefit model.
        return score.requires_fit and not _score_is_frozen(score)

    def _fit_models(self, prefit, train, score, streams):
        super()._fit_models(prefit, train, score, streams)
        if self._needs_training_rows(score):
            if prefit["estimator"]:
                self._warn_training_not_private("the conformity score's scale model")
            score.fit(train.X, train.y, self.estimator_.predict(train.X))
        elif score.requires_fit:  # frozen scale model: nothing to learn
            score.fit(None, None, None)
        if getattr(score, "requires_estimator", False):
            score.set_estimator(self.estimator_)  # scores reading the model's std


def _score_is_frozen(score):
    return isinstance(getattr(score, "scale_estimator", None), FrozenEstimator)
