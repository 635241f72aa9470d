"""Bad user input to the estimators and the metrics: clear errors, never silence.

Issue 11, item 10 (the estimators' and the metrics' share of the bad-input
suite). Every case asserts the exception type and a message that names the
argument at fault. FedChi2Selector is exercised only through its public
``fit``; its internals have their own suite.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression, QuantileRegressor

from skfedcp import FedConformalRegressor, FedCQRRegressor
from skfedcp.classification import PrivateConformalClassifier
from skfedcp.feature_selection import FedChi2Selector
from skfedcp.metrics import (
    coverage_score,
    get_interval_scorer,
    get_set_scorer,
    interval_score,
    max_coverage_gap,
    mean_width_score,
    per_client_coverage,
    per_client_set_coverage,
    set_coverage_score,
    set_size_score,
    size_stratified_coverage,
)
from skfedcp.scores import (
    APSScore,
    CQRScore,
    NormalizedCQRScore,
    NormalizedResidualScore,
)
from skfedcp.two_students import TwoStudentsRegressor
from skfedcp.utils._sklearn_compat import InvalidParameterError

_rng = np.random.default_rng(0)
X = _rng.normal(size=(120, 3))
y = X[:, 0] + _rng.normal(size=120)
yc = (X[:, 0] > 0).astype(int)
ids = np.arange(120) % 4
Xpos = np.abs(X)
LIN = FrozenEstimator(LinearRegression().fit(X, y))
LOGIT = FrozenEstimator(LogisticRegression().fit(X, yc))
QR_PAIR = {
    "estimator_lower": QuantileRegressor(solver="highs"),
    "estimator_upper": QuantileRegressor(solver="highs"),
}
IV = np.column_stack([y - 1, y + 1])
SETS = np.ones((120, 2), dtype=bool)
P = InvalidParameterError  # a ValueError (and TypeError) subclass


def _with_nan(a, where=0):
    a = np.array(a, dtype=np.float64)
    a.flat[where] = np.nan
    return a


def R(**kw):
    return FedConformalRegressor(**{"estimator": LIN, **kw})


def C(**kw):
    return PrivateConformalClassifier(**{"estimator": LOGIT, **kw})


def Q(**kw):
    return FedCQRRegressor(**{**QR_PAIR, **kw})


def _fitted_regressor():
    return R(random_state=0).fit(X, y, client_ids=ids)


def _fitted_aps():
    score = APSScore(randomized=True)
    return C(conformity_score=score, random_state=0).fit(X, yc)


CASES = [
    # -- FedConformalRegressor ------------------------------------------------
    ("reg-alpha-0", lambda: R(alpha=0).fit(X, y), P, "alpha"),
    ("reg-alpha-1.5", lambda: R(alpha=1.5).fit(X, y), P, "alpha"),
    ("reg-alpha-str", lambda: R(alpha="0.1").fit(X, y), P, "alpha"),
    ("reg-alpha-nan", lambda: R(alpha=np.nan).fit(X, y), P, "alpha"),
    (
        "reg-calibrator-unknown",
        lambda: R(calibrator="QQ").fit(X, y),
        ValueError,
        "calibrator must be one of .* Did you mean 'qq'",
    ),
    ("reg-calibrator-int", lambda: R(calibrator=3).fit(X, y), P, "calibrator"),
    (
        "reg-score-unknown",
        lambda: R(conformity_score="abs").fit(X, y),
        P,
        "conformity_score",
    ),
    (
        "reg-score-cqr",
        lambda: R(conformity_score=CQRScore()).fit(X, y),
        P,
        "conformity_score",
    ),
    (
        "reg-score-min_scale",
        lambda: R(conformity_score=NormalizedResidualScore(min_scale=0)).fit(X, y),
        P,
        "min_scale",
    ),
    (
        "reg-score-scale_estimator",
        lambda: R(conformity_score=NormalizedResidualScore(3)).fit(X, y),
        P,
        "scale_estimator",
    ),
    (
        "reg-two-students-score-on-linear",
        lambda: R(conformity_score="two_students").fit(X, y),
        TypeError,
        "predict_std",
    ),
    ("reg-epsilon-0", lambda: R(epsilon=0).fit(X, y), P, "epsilon"),
    ("reg-epsilon-inf", lambda: R(epsilon=np.inf).fit(X, y), P, "epsilon"),
    (
        "reg-score_bounds-decreasing",
        lambda: R(calibrator="dp-qq", score_bounds=(1, 0)).fit(X, y, ids),
        ValueError,
        "score_bounds",
    ),
    (
        "reg-score_bounds-nan",
        lambda: R(calibrator="dp-qq", score_bounds=(0, np.nan)).fit(X, y, ids),
        ValueError,
        "score_bounds",
    ),
    (
        "reg-score_bounds-scalar",
        lambda: R(calibrator="dp-qq", score_bounds=3).fit(X, y, ids),
        P,
        "score_bounds",
    ),
    (
        "reg-score_bounds-triple",
        lambda: R(calibrator="dp-qq", score_bounds=(0, 1, 2)).fit(X, y, ids),
        TypeError,
        "score_bounds",
    ),
    (
        "reg-score_bounds-missing",
        lambda: R(calibrator="dp-qq").fit(X, y, ids),
        ValueError,
        "score_bounds",
    ),
    (
        "reg-calibration_size-0",
        lambda: R(calibration_size=0).fit(X, y),
        P,
        "calibration_size",
    ),
    (
        "reg-calibration_size-1",
        lambda: R(calibration_size=1).fit(X, y),
        P,
        "calibration_size",
    ),
    ("reg-random_state-neg", lambda: R(random_state=-1).fit(X, y), P, "random_state"),
    (
        "reg-random_state-float",
        lambda: R(random_state=1.5).fit(X, y),
        P,
        "random_state",
    ),
    ("reg-random_state-str", lambda: R(random_state="os").fit(X, y), P, "random_state"),
    (
        "reg-random_state-secure-qq",
        lambda: R(random_state="secure").fit(X, y),
        ValueError,
        "random_state",
    ),
    ("reg-n_jobs-str", lambda: R(n_jobs="2").fit(X, y), P, "n_jobs"),
    ("reg-estimator-int", lambda: R(estimator=3).fit(X, y), P, "estimator"),
    ("reg-X-nan", lambda: R().fit(_with_nan(X), y), ValueError, "X contains NaN"),
    ("reg-y-nan", lambda: R().fit(X, _with_nan(y)), ValueError, "y contains NaN"),
    (
        "reg-y-inf",
        lambda: R().fit(X, np.where(y > 2, np.inf, y)),
        ValueError,
        "y contains inf",
    ),
    (
        "reg-y-str",
        lambda: R().fit(X, np.array(["a"] * 120)),
        ValueError,
        "y must hold numbers",
    ),
    ("reg-y-short", lambda: R().fit(X, y[:-1]), ValueError, "y has 119"),
    ("reg-y-none", lambda: R().fit(X, None), ValueError, "target y is None"),
    ("reg-client_ids-short", lambda: R().fit(X, y, ids[:-1]), ValueError, "client_ids"),
    (
        "reg-client_ids-nan",
        lambda: R().fit(X, y, _with_nan(ids)),
        ValueError,
        "client_ids",
    ),
    (
        "reg-client_ids-2d",
        lambda: R().fit(X, y, np.c_[ids, ids]),
        ValueError,
        "client_ids",
    ),
    (
        "reg-fit_params-prefit",
        lambda: R().fit(X, y, sample_weight=np.ones(120)),
        ValueError,
        "sample_weight",
    ),
    (
        "reg-predict-n_features",
        lambda: _fitted_regressor().predict_interval(X[:, :2]),
        ValueError,
        "X has 2 features",
    ),
    (
        "reg-predict-unfitted",
        lambda: R().predict_interval(X),
        NotFittedError,
        "FedConformalRegressor",
    ),
    # -- PrivateConformalClassifier --------------------------------------------
    ("clf-alpha-0.7-private", lambda: C(alpha=0.7).fit(X, yc), ValueError, "alpha"),
    ("clf-epsilon-0", lambda: C(epsilon=0).fit(X, yc), P, "epsilon"),
    ("clf-epsilon-str", lambda: C(epsilon="1").fit(X, yc), P, "epsilon"),
    (
        "clf-estimator-no-proba",
        lambda: C(estimator=LinearRegression()).fit(X, yc),
        P,
        "estimator",
    ),
    ("clf-y-continuous", lambda: C().fit(X, y), ValueError, "y must hold class labels"),
    ("clf-y-unseen", lambda: C().fit(X, yc + 5), ValueError, "y holds labels"),
    ("clf-y-nan", lambda: C().fit(X, _with_nan(yc)), ValueError, "y contains NaN"),
    (
        "clf-y-none",
        lambda: C().fit(X, np.array([None] + ["a"] * 119, dtype=object)),
        ValueError,
        "y contains missing labels",
    ),
    (
        "clf-score-unknown",
        lambda: C(conformity_score="raps").fit(X, yc),
        P,
        "conformity_score",
    ),
    (
        "clf-score-regression",
        lambda: C(conformity_score=NormalizedResidualScore()).fit(X, yc),
        P,
        "conformity_score",
    ),
    (
        "clf-aps-randomized-str",
        lambda: C(conformity_score=APSScore(randomized="yes")).fit(X, yc),
        P,
        "randomized",
    ),
    (
        "clf-score_bounds-decreasing",
        lambda: C(score_bounds=(1, 0)).fit(X, yc),
        ValueError,
        "score_bounds",
    ),
    (
        "clf-score_bounds-single",
        lambda: C(score_bounds=(0,)).fit(X, yc),
        TypeError,
        "score_bounds",
    ),
    ("clf-client_ids-short", lambda: C().fit(X, yc, ids[:5]), ValueError, "client_ids"),
    (
        "clf-random_state-str",
        lambda: C(random_state="urandom").fit(X, yc),
        P,
        "random_state",
    ),
    (
        "clf-random_state-secure-central",
        lambda: C(calibrator="central", random_state="secure").fit(X, yc),
        ValueError,
        "random_state",
    ),
    (
        "clf-predict_set-random_state-neg",
        lambda: _fitted_aps().predict_set(X, random_state=-1),
        ValueError,
        "random_state",
    ),
    (
        "clf-predict_set-random_state-str",
        lambda: _fitted_aps().predict_set(X, random_state="secure"),
        TypeError,
        "random_state",
    ),
    (
        "clf-predict_set-n_features",
        lambda: C().fit(X, yc).predict_set(X[:, :2]),
        ValueError,
        "X has 2 features",
    ),
    # -- FedCQRRegressor -----------------------------------------------------
    (
        "cqr-levels-decreasing",
        lambda: Q(quantile_levels=(0.9, 0.1)).fit(X, y),
        ValueError,
        "quantile_levels",
    ),
    (
        "cqr-levels-0-1",
        lambda: Q(quantile_levels=(0, 1)).fit(X, y),
        ValueError,
        "quantile_levels",
    ),
    (
        "cqr-levels-scalar",
        lambda: Q(quantile_levels=0.5).fit(X, y),
        P,
        "quantile_levels",
    ),
    (
        "cqr-levels-str",
        lambda: Q(quantile_levels=("a", "b")).fit(X, y),
        ValueError,
        "quantile_levels",
    ),
    (
        "cqr-levels-nan",
        lambda: Q(quantile_levels=(np.nan, 0.9)).fit(X, y),
        ValueError,
        "quantile_levels",
    ),
    (
        "cqr-estimator-and-pair",
        lambda: Q(estimator=LinearRegression()).fit(X, y),
        ValueError,
        "estimator_lower and estimator_upper",
    ),
    (
        "cqr-lower-only",
        lambda: FedCQRRegressor(estimator_lower=QuantileRegressor()).fit(X, y),
        ValueError,
        "estimator_upper",
    ),
    (
        "cqr-estimator-no-quantiles",
        lambda: FedCQRRegressor(LinearRegression()).fit(X, y),
        TypeError,
        "estimator",
    ),
    (
        "cqr-pair-no-level",
        lambda: Q(estimator_lower=LinearRegression()).fit(X, y),
        ValueError,
        "estimator_lower",
    ),
    (
        "cqr-score-unknown",
        lambda: Q(conformity_score="cqr").fit(X, y),
        P,
        "conformity_score",
    ),
    (
        "cqr-score-min_width",
        lambda: Q(conformity_score=NormalizedCQRScore(min_width=-1)).fit(X, y),
        P,
        "min_width",
    ),
    ("cqr-epsilon-0", lambda: Q(epsilon=0).fit(X, y), P, "epsilon"),
    (
        "cqr-score_bounds-decreasing",
        lambda: Q(calibrator="dp-qq", score_bounds=(1, -1)).fit(X, y, ids),
        ValueError,
        "score_bounds",
    ),
    ("cqr-y-nan", lambda: Q().fit(X, _with_nan(y)), ValueError, "y contains NaN"),
    ("cqr-y-short", lambda: Q().fit(X, y[:-2]), ValueError, "y has 118"),
    (
        "cqr-random_state-secure-qq",
        lambda: Q(random_state="secure").fit(X, y),
        ValueError,
        "random_state",
    ),
    # -- TwoStudentsRegressor --------------------------------------------------
    (
        "2s-min_teachers-1",
        lambda: TwoStudentsRegressor(min_teachers=1).fit(X, y),
        P,
        "min_teachers",
    ),
    (
        "2s-credible_level-1",
        lambda: TwoStudentsRegressor(credible_level=1).fit(X, y),
        P,
        "credible_level",
    ),
    ("2s-gamma-0", lambda: TwoStudentsRegressor(gamma=0).fit(X, y), P, "gamma"),
    (
        "2s-n_rounds-0",
        lambda: TwoStudentsRegressor(n_rounds=0).fit(X, y),
        P,
        "n_rounds",
    ),
    (
        "2s-filter-unknown",
        lambda: TwoStudentsRegressor(filter="iqr").fit(X, y),
        P,
        "filter",
    ),
    (
        "2s-sigma_floor-0",
        lambda: TwoStudentsRegressor(sigma_floor=0).fit(X, y),
        P,
        "sigma_floor",
    ),
    (
        "2s-random_state-secure",
        lambda: TwoStudentsRegressor(random_state="secure").fit(X, y),
        P,
        "random_state",
    ),
    (
        "2s-X_unlabeled-n_features",
        lambda: TwoStudentsRegressor().fit(X, y, ids, X_unlabeled=X[:, :2]),
        ValueError,
        "X_unlabeled",
    ),
    (
        "2s-X_unlabeled-nan",
        lambda: TwoStudentsRegressor().fit(X, y, ids, X_unlabeled=_with_nan(X[:5])),
        ValueError,
        "X_unlabeled",
    ),
    (
        "2s-X_ref-n_features",
        lambda: TwoStudentsRegressor().fit(X, y, ids, X_unlabeled=X, X_ref=X[:, :1]),
        ValueError,
        "X_ref",
    ),
    (
        "2s-client_models-list",
        lambda: TwoStudentsRegressor().fit(X, y, ids, client_models=[LIN]),
        TypeError,
        "client_models",
    ),
    (
        "2s-client_models-keys",
        lambda: TwoStudentsRegressor().fit(X, y, ids, client_models={9: LIN}),
        ValueError,
        "client_models",
    ),
    (
        "2s-trusted_models-int",
        lambda: TwoStudentsRegressor().fit(X, y, ids, trusted_models=3),
        TypeError,
        "trusted_models",
    ),
    (
        "2s-y-nan",
        lambda: TwoStudentsRegressor().fit(X, _with_nan(y), ids),
        ValueError,
        "y contains NaN",
    ),
    (
        "2s-client_ids-short",
        lambda: TwoStudentsRegressor().fit(X, y, ids[:3]),
        ValueError,
        "client_ids",
    ),
    (
        "2s-one-row",
        lambda: TwoStudentsRegressor().fit(X[:1], y[:1]),
        ValueError,
        "min_teachers",
    ),
    # -- FedChi2Selector (public fit only) -------------------------------------
    (
        "chi2-k-neg",
        lambda: FedChi2Selector(k=-1).fit(Xpos, yc, client_ids=ids),
        P,
        "'k'",
    ),
    (
        "chi2-k-str",
        lambda: FedChi2Selector(k="some").fit(Xpos, yc, client_ids=ids),
        P,
        "'k'",
    ),
    (
        "chi2-method-unknown",
        lambda: FedChi2Selector(k=2, method="dp").fit(Xpos, yc, client_ids=ids),
        P,
        "method",
    ),
    (
        "chi2-X-negative",
        lambda: FedChi2Selector(k=2).fit(X, yc, client_ids=ids),
        ValueError,
        r"\(X\)",
    ),
    (
        "chi2-X-nan",
        lambda: FedChi2Selector(k=2).fit(_with_nan(Xpos), yc, client_ids=ids),
        ValueError,
        "X contains NaN",
    ),
    (
        "chi2-client_ids-short",
        lambda: FedChi2Selector(k=2).fit(Xpos, yc, client_ids=ids[:-1]),
        ValueError,
        "client_ids",
    ),
    # -- metrics ----------------------------------------------------------------
    (
        "cov-y_true-nan",
        lambda: coverage_score(_with_nan(y), IV),
        ValueError,
        "y_true contains NaN",
    ),
    (
        "cov-y_true-inf",
        lambda: coverage_score(np.r_[np.inf, y[1:]], IV),
        ValueError,
        "y_true",
    ),
    (
        "cov-intervals-nan",
        lambda: coverage_score(y, _with_nan(IV)),
        ValueError,
        "y_intervals contains NaN",
    ),
    (
        "cov-intervals-shape",
        lambda: coverage_score(y, IV[:, :1]),
        ValueError,
        "y_intervals must have shape",
    ),
    (
        "cov-intervals-str",
        lambda: coverage_score(y[:1], [["a", "b"]]),
        TypeError,
        "y_intervals",
    ),
    ("cov-y_true-str", lambda: coverage_score(["a"], [[0, 1]]), TypeError, "y_true"),
    ("cov-y_true-2d", lambda: coverage_score(IV, IV), ValueError, "y_true must be 1-D"),
    (
        "cov-length",
        lambda: coverage_score(y[:-1], IV),
        ValueError,
        "y_true and y_intervals",
    ),
    (
        "cov-empty",
        lambda: coverage_score([], np.empty((0, 2))),
        ValueError,
        "y_intervals is empty",
    ),
    (
        "width-nan",
        lambda: mean_width_score(_with_nan(IV, 1)),
        ValueError,
        "y_intervals contains NaN",
    ),
    (
        "width-shape",
        lambda: mean_width_score(y),
        ValueError,
        "y_intervals must have shape",
    ),
    ("winkler-alpha-0", lambda: interval_score(y, IV, alpha=0), ValueError, "alpha"),
    ("winkler-alpha-str", lambda: interval_score(y, IV, alpha="a"), TypeError, "alpha"),
    (
        "winkler-y_true-nan",
        lambda: interval_score(_with_nan(y), IV, alpha=0.1),
        ValueError,
        "y_true",
    ),
    (
        "per-client-ids-nan",
        lambda: per_client_coverage(y, IV, _with_nan(ids)),
        ValueError,
        "client_ids",
    ),
    (
        "per-client-ids-short",
        lambda: per_client_coverage(y, IV, ids[:3]),
        ValueError,
        "client_ids",
    ),
    (
        "per-client-intervals-nan",
        lambda: per_client_coverage(y, _with_nan(IV), ids),
        ValueError,
        "y_intervals",
    ),
    ("gap-alpha-2", lambda: max_coverage_gap(y, IV, ids, alpha=2), ValueError, "alpha"),
    ("scorer-name", lambda: get_interval_scorer("width"), ValueError, "name"),
    ("set-scorer-name", lambda: get_set_scorer("size"), ValueError, "name"),
    (
        "sets-y_true-nan",
        lambda: set_coverage_score(_with_nan(yc), SETS),
        ValueError,
        "y_true contains NaN",
    ),
    (
        "sets-y_true-none",
        lambda: set_coverage_score(
            np.array(["a", None] * 60, dtype=object), SETS, classes=["a", "b"]
        ),
        ValueError,
        "y_true contains NaN or None",
    ),
    (
        "sets-nan",
        lambda: set_coverage_score(yc, _with_nan(SETS)),
        ValueError,
        "y_sets contains NaN",
    ),
    (
        "sets-not-binary",
        lambda: set_size_score(SETS * 2),
        ValueError,
        "y_sets must be boolean",
    ),
    (
        "sets-1d",
        lambda: set_size_score(SETS[:, 0]),
        ValueError,
        "y_sets must have shape",
    ),
    (
        "sets-length",
        lambda: set_coverage_score(yc[:-1], SETS),
        ValueError,
        "y_true and y_sets",
    ),
    (
        "sets-classes-size",
        lambda: set_coverage_score(yc, SETS, classes=[0, 1, 2]),
        ValueError,
        "classes",
    ),
    (
        "sets-y_true-unknown",
        lambda: set_coverage_score(yc + 2, SETS, classes=[0, 1]),
        ValueError,
        "y_true holds labels",
    ),
    (
        "sets-y_true-index",
        lambda: set_coverage_score(yc + 2, SETS),
        ValueError,
        "y_true must lie",
    ),
    (
        "sets-y_true-str-no-classes",
        lambda: size_stratified_coverage(np.array(["a"] * 120), SETS),
        ValueError,
        "y_true must hold column indices",
    ),
    (
        "sets-per-client-ids",
        lambda: per_client_set_coverage(yc, SETS, ids[:-1]),
        ValueError,
        "client_ids",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [pytest.param(c, e, m, id=name) for name, c, e, m in CASES],
)
def test_bad_input_raises_a_clear_error(call, error, match):
    with warnings.catch_warnings():
        # Side warnings (prefit models, small sets) are not under test here.
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=match):
            call()


def test_suite_size():
    assert len(CASES) >= 60
