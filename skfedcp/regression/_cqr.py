"""FedCQRRegressor: conformalized quantile regression calibrated across clients."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import issparse
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import Pipeline
from sklearn.utils import assert_all_finite

from .._typing import MatrixLike, SecureRandomStateLike
from ..base import BaseFedConformal, ConformalIntervalMixin
from ..base._levels import spawn_seeds
from ..base._streams import _MODEL
from ..calibrators import BaseCalibrator
from ..exceptions import CrossingQuantilesWarning
from ..scores import CQR_SCORES, BaseCQRScore, resolve_cqr_score
from ..utils._docstrings import fill_doc
from ..utils._sklearn_compat import HasMethods, StrOptions
from ..utils._warnings import warn_user

__all__ = ["FedCQRRegressor"]

# Share of calibration rows with f_lo(x) > f_hi(x) above which fit warns.
_CROSSING_WARN_FRACTION = 0.05

# Names under which common quantile models store their level, in the order
# tried: QuantileRegressor and HistGradientBoostingRegressor (``quantile``),
# XGBoost (``quantile_alpha``), GradientBoostingRegressor and LightGBM
# (``alpha``, only with a quantile loss), quantile-forest
# (``default_quantiles``).
_LEVEL_PARAMS = ("quantile", "quantile_alpha", "alpha", "default_quantiles")
_QUANTILE_LOSSES = ("quantile", "reg:quantileerror")


def _is_quantile_forest(model):
    """Whether ``model`` (unwrapped) is a quantile-forest model.

    quantile-forest is imported only when its default model is built: a model
    of that package cannot exist unless the package was imported already, so
    when it is not in ``sys.modules`` the answer is no, without importing it.
    """
    package = sys.modules.get("quantile_forest")
    if package is None:
        return False
    forests = (
        package.RandomForestQuantileRegressor,
        package.ExtraTreesQuantileRegressor,
    )
    return isinstance(_final_step(model)[1], forests)


def _default_forest(**params):
    """The default single model, ``RandomForestQuantileRegressor(**params)``."""
    from quantile_forest import RandomForestQuantileRegressor

    return RandomForestQuantileRegressor(**params)


def _final_step(estimator):
    """Unwrap FrozenEstimator and Pipeline down to the model that predicts."""
    prefix = ""
    while True:
        if isinstance(estimator, FrozenEstimator):
            estimator = estimator.estimator
        elif isinstance(estimator, Pipeline):
            name, estimator = estimator.steps[-1]
            prefix += f"{name}__"
        else:
            return prefix, estimator


def _level_param(estimator):
    """Name of the parameter holding the quantile level, or None."""
    prefix, model = _final_step(estimator)
    if not hasattr(model, "get_params"):
        return None
    params = model.get_params(deep=False)
    loss = params.get("loss", params.get("objective", "quantile"))
    if loss not in _QUANTILE_LOSSES:
        return None
    for key in _LEVEL_PARAMS:
        if key in params:
            return prefix + key
    return None


def _read_level(estimator):
    """The quantile level a (possibly frozen) model was built with, or nan."""
    key = _level_param(estimator)
    if key is None:
        return np.nan
    _, model = _final_step(estimator)
    value = model.get_params(deep=False)[key.rsplit("__", 1)[-1]]
    try:
        return float(value)
    except (TypeError, ValueError):
        return np.nan


def _accepts_quantiles(estimator):
    """Whether ``estimator.predict`` takes a ``quantiles=`` argument."""
    _, model = _final_step(estimator)
    try:
        params = inspect.signature(model.predict).parameters
    except (TypeError, ValueError):  # builtins, C extensions: cannot tell
        return True
    return "quantiles" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
    )


@fill_doc
class FedCQRRegressor(RegressorMixin, ConformalIntervalMixin, BaseFedConformal):
    """Conformalized quantile regression (CQR) calibrated across clients.

    Quantile models predict a lower and an upper bound ``f_lo(x)``,
    ``f_hi(x)``; each client turns its calibration rows into CQR scores
    ``max(f_lo(x) - y, y - f_hi(x))``; a calibration strategy
    (``calibrator``) combines the clients' messages into one threshold ``q``;
    the interval is ``[f_lo(x) - q, f_hi(x) + q]``. ``q`` may be negative,
    which shrinks a band the models drew too wide. The interval adapts to
    ``x`` through the quantile models, and the calibration makes it valid.

    The quantile models come in one of two forms:

    * ``estimator``: one model whose ``predict`` accepts ``quantiles=[lo,
      hi]`` and returns two columns, such as
      :class:`quantile_forest.RandomForestQuantileRegressor` (the default);
    * ``estimator_lower`` and ``estimator_upper``: one model per bound, such
      as ``GradientBoostingRegressor(loss="quantile")``,
      ``HistGradientBoostingRegressor(loss="quantile")`` or
      :class:`~sklearn.linear_model.QuantileRegressor`, each addressable with
      ``set_params(estimator_lower__...)``.

    Unfitted models are cloned, given the levels ``quantile_levels`` (their
    ``quantile``, ``alpha`` or ``default_quantiles`` parameter) and fitted on
    a random split made within each client (``calibration_size``). Fitted
    models wrapped in :class:`~sklearn.frozen.FrozenEstimator` are used as
    they are and every row calibrates; a frozen single model still receives
    ``quantile_levels`` at prediction time, a frozen pair keeps the levels
    it was fitted with.

    Parameters
    ----------
    estimator : regressor, default=None
        Single-model form: a model whose ``predict(X, quantiles=[lo, hi])``
        returns shape ``(n_samples, 2)``. ``None`` (with no
        ``estimator_lower``/``estimator_upper``) means
        ``RandomForestQuantileRegressor()``, seeded from ``random_state``.
    estimator_lower : regressor, default=None
        Model of the lower quantile (pair form, with ``estimator_upper``).
    estimator_upper : regressor, default=None
        Model of the upper quantile (pair form, with ``estimator_lower``).
    %(wrapper_alpha)s
    quantile_levels : array-like of shape (2,), default=None
        Levels ``(lo, hi)`` of the quantile models, ``0 < lo < hi < 1``.
        ``None`` means ``(alpha / 2, 1 - alpha / 2)``, with the median level
        when ``alpha`` is a sequence (one pair of models serves every
        level). Any levels give valid
        intervals; levels near the target make the correction ``q`` small.
    conformity_score : {"symmetric", "asymmetric", "normalized"} or \
            BaseCQRScore, default="symmetric"
        The CQR variant (see Notes): one threshold on
        ``max(f_lo - y, y - f_hi)`` (:class:`~skfedcp.scores.CQRScore`), one
        threshold per side, each calibrated at ``alpha / 2``
        (:class:`~skfedcp.scores.AsymmetricCQRScore`), or the score divided
        by the band width ``f_hi - f_lo``
        (:class:`~skfedcp.scores.NormalizedCQRScore`; pass an instance to
        set its floor ``min_width``).
    calibrator : str or BaseCalibrator, default="qq"
        Calibration strategy: an alias of
        :data:`skfedcp.calibrators.CALIBRATORS` (``"qq"``, ``"central"``,
        ``"avg"``, the private ``"dp-qq"`` and ``"dp-central"``, ...) or a
        calibrator instance (cloned, never mutated). The asymmetric variant
        fits two fresh copies, one per side.
    epsilon : float, default=None
        Privacy parameter passed to a private calibrator, overriding its own;
        ``None`` keeps the calibrator's. Ignored by non-private calibrators.
    score_bounds : tuple of two floats, default=None
        Public bounds ``(low, high)`` of the CQR scores, required by the
        private calibrators and fixed without looking at the data. CQR
        scores are negative inside the band: use e.g. ``(-B, B)`` (in units
        of the band width for the normalized score). The asymmetric variant
        uses them for both sides. Ignored by non-private calibrators.
    calibration_size : float, default=0.5
        Fraction of each client's rows that calibrate when a model must be
        fitted; the rest trains.
    random_state : None, int, SeedSequence, Generator, RandomState or \
            "secure", default=None
        Root of all randomness of ``fit``: one
        :class:`~numpy.random.SeedSequence` whose independent children seed
        the per-client split, the default forest and the calibrator(s).
        ``None`` draws fresh operating-system entropy (NumPy's global state
        is never used); an int makes fits reproducible (simulations).
        ``"secure"`` (private calibrators only) draws the mechanism's noise
        from the operating system's secure generator; the split and the
        forest then use fresh OS entropy. All randomness is consumed in
        ``fit``.
    n_jobs : int, default=None
        Passed to the default quantile forest and to the calibrator (which
        may use it to simulate clients in parallel).
    %(wrapper_group_by)s

    Attributes
    ----------
    estimator_ : regressor
        The fitted single quantile model (single-model form only; the user's
        object itself when prefit).
    estimator_lower_, estimator_upper_ : regressor
        The fitted lower and upper models (pair form only).
    quantile_levels_ : ndarray of shape (2,)
        Levels of the quantile models: those requested, or for a frozen pair
        those read from the models (``nan`` where they cannot be read).
    conformity_score_ : BaseCQRScore
        The CQR score used.
    calibrator_ : BaseCalibrator or tuple of two BaseCalibrator
        The fitted calibration strategy; ``(lower, upper)`` for the
        asymmetric variant.
    threshold_ : float or ndarray of shape (2,), (n_levels,) or (n_levels, 2)
        The calibrated threshold ``q``; ``(q_lo, q_hi)`` for the asymmetric
        variant. ``+inf`` gives infinite intervals. One (pair) per level for
        a sequence ``alpha``, non-increasing in ``alpha`` (each side).
    messages_ : dict of ndarray
        What the server received from each client (one entry per client);
        the asymmetric variant prefixes each field with ``lower_`` or
        ``upper_``.
    %(wrapper_clients_attrs)s
    epsilon_spent_ : float
        Privacy loss of the calibration rows from this fit, ``2 * epsilon``
        for the asymmetric variant; ``inf`` for non-private calibrators. It
        covers the calibration only: rows that train unfitted quantile
        models are not protected (``fit`` then warns with
        :class:`~skfedcp.exceptions.PrivacyLeakWarning`).
    alphas_ : ndarray of shape (n_levels,)
        The levels of a sequence ``alpha``, as given (absent for a float).
    calibrators_ : list of BaseCalibrator or of (lower, upper) pairs
        One fitted calibrator per level (sequence ``alpha`` only; a float
        ``alpha`` sets ``calibrator_`` instead).
    raw_thresholds_ : ndarray of shape (n_levels or (n_levels, 2))
        The calibrators' own thresholds, before the running maximum that
        makes ``threshold_`` monotone (sequence ``alpha`` only).
    epsilon_spent_per_level_ : ndarray of shape (n_levels,)
        Privacy loss of each level's release (sequence ``alpha`` only); its
        sum is ``epsilon_spent_``.
    crossing_fraction_ : float
        Share of calibration rows where ``f_lo(x) > f_hi(x)``; above 5% fit
        warns with :class:`~skfedcp.exceptions.CrossingQuantilesWarning` (a
        diagnostic of the simulation; in a deployment each client would
        compute its own share).
    %(wrapper_group_attrs)s

    See Also
    --------
    FedConformalRegressor : intervals around a point model.
    skfedcp.scores.CQRScore : the symmetric score and its interval.

    Notes
    -----
    **Guarantee.** If, given the fitted quantile models, the calibration
    scores and the test score are i.i.d. (clients may hold different raw
    data as long as their score laws agree, and the calibration rows did not
    train the models), then for the ``"central"`` and ``"qq"`` calibrators

    * symmetric and normalized: ``P(f_lo(X) - q w(X) <= Y <= f_hi(X) + q
      w(X)) >= 1 - alpha`` (``w = 1`` for the symmetric score); with QQ it
      equals the exact coverage ``M(l*, k*)`` when the scores are continuous;
    * asymmetric: each side misses with probability at most ``alpha / 2``,
      hence coverage ``>= 1 - alpha`` by the union bound; the two tails are
      controlled separately, usually at the price of wider intervals.

    The private calibrators keep ``>= 1 - alpha`` and make each client's
    message ``epsilon``-DP; the asymmetric variant releases two messages per
    client, so its privacy loss is ``2 * epsilon`` (sequential composition).

    The guarantee is marginal, over calibration data and test point, and
    holds whatever the quantile models predict: bad models give wide
    intervals, not invalid ones. ``predict`` returns the midpoint
    ``(f_lo + f_hi) / 2``, a point prediction for ``score`` and pipelines,
    not part of the guarantee.

    **Several levels.** With ``alpha`` a sequence, one calibrator per level runs on the
    same calibration scores (one round, each client sending one message per level). The
    sets are nested by construction: going from the largest ``alpha`` to the smallest,
    each threshold is raised to the largest of its own and those of every larger
    ``alpha`` (a running maximum), and each interval is widened to the hull of those of
    every larger ``alpha`` (crossed bounds, returned as the span between them, could
    otherwise shrink as ``q`` grows). Raising a threshold or widening a set only adds
    coverage, so each level keeps its guarantee. For a private calibrator ``epsilon``
    stays the budget of the whole fit: each of the ``n_levels`` releases gets ``epsilon
    / n_levels``, and by sequential composition ``epsilon_spent_`` (the sum of
    ``epsilon_spent_per_level_``) is what one fit at a single level would spend. For the
    LDP calibrators each level's ``delta`` holds separately (all levels at once:
    ``n_levels * delta``, by the union bound).

    **Intervals never cross.** The conformal set ``[f_lo(x) - q, f_hi(x) +
    q]`` is empty where the models' quantiles cross (``f_lo(x) > f_hi(x)``)
    or where a negative ``q`` exceeds half the band. Such a row is returned
    as the interval between the two computed bounds, ``[min, max]``: a
    superset of the empty set, so the guarantee above still holds (coverage
    can only increase), ``lower <= upper`` on every row, and the width is
    ``|f_hi(x) - f_lo(x) + 2q|``, as MAPIE and puncc measure it. The
    normalized score floors the width at ``min_width``, so inverted bands
    give large scores.

    References
    ----------
    .. [1] Y. Romano, E. Patterson and E. Candès, "Conformalized Quantile
       Regression", NeurIPS 2019.
    .. [2] P. Humbert, B. Le Bars, A. Bellet and S. Arlot, "One-Shot
       Federated Conformal Prediction", ICML 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from quantile_forest import RandomForestQuantileRegressor
    >>> from skfedcp.datasets import make_romano_regression
    >>> X, y = make_romano_regression(2000, random_state=0)
    >>> client_ids = np.repeat(np.arange(50), 40)
    >>> forest = RandomForestQuantileRegressor(
    ...     n_estimators=50, min_samples_leaf=20, random_state=0
    ... )
    >>> reg = FedCQRRegressor(forest, alpha=0.1, random_state=0)
    >>> reg = reg.fit(X, y, client_ids=client_ids)
    >>> reg.predict_interval(X[:3]).shape
    (3, 2)
    >>> reg.n_clients_, reg.calibrator_.calibration_info_["k"]
    (50, 35)
    """

    _parameter_constraints = {
        **BaseFedConformal._parameter_constraints,
        "estimator": [HasMethods(["fit", "predict"]), None],
        "estimator_lower": [HasMethods(["fit", "predict"]), None],
        "estimator_upper": [HasMethods(["fit", "predict"]), None],
        "quantile_levels": ["array-like", None],
        "conformity_score": [StrOptions(set(CQR_SCORES)), BaseCQRScore],
    }
    _score_resolver = staticmethod(resolve_cqr_score)
    _trained = "the quantile models"

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        *,
        estimator_lower: BaseEstimator | None = None,
        estimator_upper: BaseEstimator | None = None,
        alpha: float = 0.1,
        quantile_levels: ArrayLike | None = None,
        conformity_score: Literal["symmetric", "asymmetric", "normalized"]
        | BaseCQRScore = "symmetric",
        calibrator: str | BaseCalibrator = "qq",
        epsilon: float | None = None,
        score_bounds: tuple[float, float] | None = None,
        calibration_size: float = 0.5,
        random_state: SecureRandomStateLike = None,
        n_jobs: int | None = None,
        group_by: str | int | Callable[[Any], ArrayLike] | None = None,
        min_group_size: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.estimator_lower = estimator_lower
        self.estimator_upper = estimator_upper
        self.alpha = alpha
        self.quantile_levels = quantile_levels
        self.conformity_score = conformity_score
        self.calibrator = calibrator
        self.epsilon = epsilon
        self.score_bounds = score_bounds
        self.calibration_size = calibration_size
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.group_by = group_by
        self.min_group_size = min_group_size

    # -- model resolution --------------------------------------------------

    def _is_pair(self):
        return self.estimator_lower is not None or self.estimator_upper is not None

    def _given_models(self):
        """The models passed by the user (empty: the default quantile forest)."""
        return [
            m
            for m in (self.estimator, self.estimator_lower, self.estimator_upper)
            if m is not None
        ]

    def _uses_quantile_forest(self):
        models = self._given_models()
        return not models or any(_is_quantile_forest(m) for m in models)

    def _models(self):
        if self._is_pair():
            return {
                "estimator_lower": self.estimator_lower,
                "estimator_upper": self.estimator_upper,
            }
        return {"estimator": self.estimator}  # None: the default forest

    def _input_models(self):
        return self._given_models()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self._uses_quantile_forest():
            # quantile-forest 1.4 inherits both tags from scikit-learn's
            # forests, but its fit rejects NaN and its predict fails on
            # sparse input (it calls len(X)). The default model is such a
            # forest; its tags are known without importing the package.
            tags.input_tags.allow_nan = False
            tags.input_tags.sparse = False
        return tags

    def _check_params(self):
        self._check_models()
        self._resolve_levels()

    def _check_y(self, y):
        return np.asarray(y, dtype=np.float64)

    def _check_models(self):
        """Cross-parameter checks on the model form (data-independent)."""
        if self._is_pair():
            if self.estimator is not None:
                raise ValueError(
                    "Pass either estimator (one model predicting both quantiles) "
                    "or estimator_lower and estimator_upper, not both."
                )
            if self.estimator_lower is None or self.estimator_upper is None:
                missing = (
                    "estimator_upper"
                    if self.estimator_upper is None
                    else "estimator_lower"
                )
                raise ValueError(
                    f"{missing} is None: the pair form needs both "
                    "estimator_lower and estimator_upper."
                )
        elif self.estimator is not None and not _accepts_quantiles(self.estimator):
            _, model = _final_step(self.estimator)
            raise TypeError(
                f"estimator: {type(model).__name__}.predict does not accept "
                "quantiles=, so it cannot predict both bounds. Pass a model "
                "such as quantile_forest.RandomForestQuantileRegressor, or two "
                "quantile models as estimator_lower and estimator_upper."
            )

    def _resolve_levels(self):
        if self.quantile_levels is None:
            levels = self._alpha_levels()
            # Several levels share one pair of models: the median level's.
            alpha = self.alpha if levels is None else float(np.median(levels))
            return np.array([alpha / 2, 1 - alpha / 2])
        try:
            levels = np.asarray(self.quantile_levels, dtype=np.float64)
        except (TypeError, ValueError):
            levels = None
        if levels is None or levels.shape != (2,):
            raise ValueError(
                "quantile_levels must be a pair (lower, upper) of floats; got "
                f"{self.quantile_levels!r}."
            )
        lo, hi = levels
        if not (0 < lo < hi < 1):
            raise ValueError(
                f"quantile_levels must satisfy 0 < lower < upper < 1; got ({lo}, {hi})."
            )
        return levels

    def _fit_model(self, model, name, level, train):
        """Clone ``model``, set its quantile level, fit it."""
        key = _level_param(model)
        if key is None:
            raise ValueError(
                f"{name}: cannot set the quantile level of "
                f"{type(_final_step(model)[1]).__name__} (no quantile, "
                "quantile_alpha, alpha (with a quantile loss) or "
                "default_quantiles parameter). Use a quantile model, or "
                "fit it yourself and pass it as FrozenEstimator."
            )
        return self._fit_clone(model, train, **{key: float(level)})

    # -- fit ---------------------------------------------------------------

    def _fit_models(self, prefit, train, score, streams):
        """Set the fitted models and ``quantile_levels_``; prefit ones as is.

        ``streams[_MODEL]`` seeds the default forest.
        """
        levels = self._resolve_levels()
        models = self._models()
        if "estimator" in models:
            if prefit["estimator"]:
                self.estimator_ = self.estimator
            else:
                model = self.estimator
                if model is None:
                    seed = streams[_MODEL].generate_state(1)[0]
                    model = _default_forest(random_state=int(seed), n_jobs=self.n_jobs)
                self.estimator_ = self._fit_clone(model, train)
            self.quantile_levels_ = levels  # passed at prediction time
            return
        fitted, used_levels = [], []
        for (name, model), level in zip(models.items(), levels, strict=True):
            if prefit[name]:  # used as is: report the level it was built with
                fitted.append(model)
                used_levels.append(_read_level(model))
            else:
                fitted.append(self._fit_model(model, name, level, train))
                used_levels.append(level)
        self.estimator_lower_, self.estimator_upper_ = fitted
        self.quantile_levels_ = np.array(used_levels)

    def _calibrate(self, score, bounds, X, y, client_ids, seed, streams):
        self._warn_crossing(bounds)
        if score.n_thresholds == 1:
            super()._calibrate(score, bounds, X, y, client_ids, seed, streams)
        else:
            scores = score.conformity_score(y, bounds, X)
            self._fit_two_calibrators(scores, client_ids, seed)

    def _fit_two_calibrators(self, scores, client_ids, seed):
        """One fresh calibrator per side (and per level), each at ``alpha / 2``.

        The two sides draw from independent children of ``seed`` (both
        ``"secure"``, or both None, fresh entropy each, when it is).
        """
        seeds = spawn_seeds(seed, 2)
        lower, upper = (
            self._fit_level_calibrators(
                scores[:, j], client_ids, seeds[j], alpha_divisor=2
            )
            for j in range(2)
        )
        self._set_calibration(list(zip(lower, upper, strict=True)))

    def _warn_crossing(self, bounds):
        crossing = bounds[:, 0] > bounds[:, 1]
        self.crossing_fraction_ = float(crossing.mean()) if crossing.size else 0.0
        if self.crossing_fraction_ > _CROSSING_WARN_FRACTION:
            warn_user(
                f"The lower quantile model predicts above the upper one on "
                f"{self.crossing_fraction_:.1%} of the calibration rows. Coverage "
                "stays valid (the calibration sees these rows' scores), but some "
                "intervals may be narrow or returned as the span of crossed "
                "bounds: check the quantile models and quantile_levels.",
                CrossingQuantilesWarning,
            )

    # -- prediction --------------------------------------------------------

    def _check_predict_X(self, X):
        super()._check_predict_X(X)
        if not issparse(X) and self._uses_quantile_forest():
            # Quantile forests do not validate X at predict time (NaN would
            # pass silently); one scan is cheap next to a forest's prediction.
            # Other models validate X themselves.
            assert_all_finite(X, input_name="X")

    def _model_output(self, X):
        return self._predict_bounds(X)

    def _point_prediction(self, X):
        """The midpoint ``(f_lo(x) + f_hi(x)) / 2`` of the predicted quantiles."""
        bounds = self._predict_bounds(X)
        return 0.5 * (bounds[:, 0] + bounds[:, 1])

    def _predict_bounds(self, X):
        """Predicted ``(f_lo, f_hi)``, shape (n_samples, 2), float64."""
        if hasattr(self, "estimator_lower_"):
            lower = self.estimator_lower_.predict(X)
            upper = self.estimator_upper_.predict(X)
            return np.column_stack([lower, upper]).astype(np.float64, copy=False)
        bounds = np.asarray(
            self.estimator_.predict(X, quantiles=self.quantile_levels_.tolist()),
            dtype=np.float64,
        )
        if bounds.ndim != 2 or bounds.shape[1] != 2:
            _, model = _final_step(self.estimator_)
            raise ValueError(
                f"estimator: {type(model).__name__}.predict(X, quantiles=[lo, "
                f"hi]) must return shape (n_samples, 2); got {bounds.shape}."
            )
        return bounds

    def predict_quantiles(self, X: MatrixLike) -> NDArray[np.float64]:
        """Return the quantile models' raw bounds, before calibration.

        %(predict_params)s

        Returns
        -------
        bounds : ndarray of shape (n_samples, 2)
            ``f_lo(x)`` and ``f_hi(x)`` at ``quantile_levels_``.
        """
        return self._checked_output(X)
