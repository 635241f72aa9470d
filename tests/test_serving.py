"""Serving and randomness of the wrappers (issue 11, items 4, 5 and 7).

* every random stream of a wrapper fit comes from one SeedSequence, never from
  NumPy's global state; ``random_state="secure"`` works with private
  calibrators;
* training an unfitted model inside a wrapper with a private calibrator warns;
* randomized APS served one row at a time covers as a batch does;
* the frozen model + frozen scale model path works;
* no estimator returns a crossed interval.
"""

# These tests seed and read NumPy's legacy global state on purpose: they check
# that skfedcp never uses it.
# ruff: noqa: NPY002

import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression, QuantileRegressor
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from skfedcp import FedConformalRegressor, FedCQRRegressor
from skfedcp.classification import PrivateConformalClassifier
from skfedcp.exceptions import PrivacyLeakWarning
from skfedcp.metrics import coverage_score, mean_width_score, set_coverage_score
from skfedcp.scores import APSScore, NormalizedResidualScore
from skfedcp.two_students import TwoStudentsRegressor
from skfedcp.utils._sklearn_compat import InvalidParameterError


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    model = LogisticRegression(max_iter=500).fit(X[:500], y[:500])
    return FrozenEstimator(model), X[500:], y[500:]


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(800, 3))
    y = X @ [1.0, -2.0, 0.5] + (0.5 + np.abs(X[:, 0])) * rng.normal(size=800)
    return X, y, np.repeat(np.arange(8), 100)


# -- randomness: one SeedSequence, never NumPy's global state ---------------


def _ldp_labels(clf):
    return np.concatenate(list(clf.messages_["noisy_labels"]))


def _same_state(a, b):
    return a[0] == b[0] and np.array_equal(a[1], b[1]) and a[2:] == b[2:]


class TestGlobalStateUnused:
    def test_private_classifier(self, digits):
        model, X, y = digits
        np.random.seed(123)
        before = np.random.get_state()
        fits = [
            PrivateConformalClassifier(model, calibrator="ldp-l", epsilon=1.0).fit(
                X[:600], y[:600]
            )
            for _ in range(2)
        ]
        after = np.random.get_state()
        # The global state is neither read (the two fits differ although it
        # was seeded) nor advanced.
        assert not np.array_equal(_ldp_labels(fits[0]), _ldp_labels(fits[1]))
        assert _same_state(before, after)

    def test_dp_qq_regressor(self, regression):
        X, y, _ = regression
        ids = np.repeat(np.arange(4), 200)
        state = np.random.get_state()
        releases = []
        # Five fits: fresh OS entropy makes all five releases equal with a
        # negligible probability (two can coincide: the values live on a grid).
        for _ in range(5):
            np.random.seed(123)  # identical global state before each fit
            reg = FedConformalRegressor(
                FrozenEstimator(LinearRegression().fit(X, y)),
                calibrator="dp-qq",
                epsilon=8.0,
                score_bounds=(0, 10),
            ).fit(X, y, client_ids=ids)
            releases.append(reg.messages_["quantile"])
            assert not np.any(np.isnan(releases[-1]))  # +inf is a valid release
        np.random.set_state(state)
        assert any(not np.array_equal(releases[0], r) for r in releases[1:])

    def test_split_of_unfitted_model(self, regression):
        X, y, ids = regression
        state = np.random.get_state()
        coefs = []
        for _ in range(2):
            np.random.seed(7)
            reg = FedConformalRegressor(LinearRegression()).fit(X, y, client_ids=ids)
            coefs.append(reg.estimator_.coef_)
        np.random.set_state(state)
        assert not np.allclose(coefs[0], coefs[1])

    def test_two_students(self, regression):
        X, y, ids = regression
        preds = []
        for _ in range(2):
            np.random.seed(3)
            model = TwoStudentsRegressor(
                KNeighborsRegressor(5), mean_student=KNeighborsRegressor(5)
            )
            # single holder: the shards are dealt at random
            preds.append(model.fit(X[:200], y[:200]).teachers_[0].predict(X[:5]))
        assert not np.allclose(preds[0], preds[1])


class TestSeeds:
    @pytest.mark.parametrize(
        "seed", [0, np.random.SeedSequence(5), 2**40], ids=["int", "seq", "big"]
    )
    def test_reproducible(self, digits, seed):
        model, X, y = digits
        kw = {"calibrator": "dp-qq", "epsilon": 8.0, "random_state": seed}
        ids = np.arange(900) % 3
        a = PrivateConformalClassifier(model, **kw).fit(X[:900], y[:900], ids)
        b = PrivateConformalClassifier(model, **kw).fit(X[:900], y[:900], ids)
        assert np.all(np.isfinite(a.messages_["quantile"]))
        assert a.threshold_ == b.threshold_
        np.testing.assert_array_equal(a.messages_["quantile"], b.messages_["quantile"])
        if isinstance(seed, np.random.SeedSequence):
            assert seed.n_children_spawned == 0  # the user's object is untouched

    def test_generator_advances(self, digits):
        model, X, y = digits
        rng = np.random.default_rng(0)
        fits = [
            PrivateConformalClassifier(model, calibrator="ldp-l", random_state=rng).fit(
                X[:600], y[:600]
            )
            for _ in range(2)
        ]
        assert not np.array_equal(_ldp_labels(fits[0]), _ldp_labels(fits[1]))

    def test_secure_with_private_calibrators(self, digits, regression):
        model, X, y = digits
        clf = PrivateConformalClassifier(model, epsilon=2.0, random_state="secure")
        assert clf.fit(X[:600], y[:600]).epsilon_spent_ == 2.0
        Xr, yr, ids = regression
        reg = FedCQRRegressor(
            estimator_lower=QuantileRegressor(solver="highs"),
            estimator_upper=QuantileRegressor(solver="highs"),
            calibrator="dp-central",
            epsilon=2.0,
            score_bounds=(-10, 10),
            random_state="secure",
        )
        with pytest.warns(PrivacyLeakWarning):
            reg.fit(Xr, yr, client_ids=ids)
        # The mechanism may release the top of the grid (+inf): only NaN is wrong.
        assert not np.isnan(reg.threshold_) and reg.epsilon_spent_ == 2.0

    @pytest.mark.parametrize("calibrator", ["qq", "central", "avg"])
    def test_secure_refused_without_private_calibrator(self, regression, calibrator):
        X, y, ids = regression
        reg = FedConformalRegressor(calibrator=calibrator, random_state="secure")
        with pytest.raises(ValueError, match='random_state="secure".*draws no noise'):
            reg.fit(X, y, client_ids=ids)

    def test_secure_refused_by_two_students(self, regression):
        X, y, _ = regression
        with pytest.raises(InvalidParameterError, match="random_state"):
            TwoStudentsRegressor(random_state="secure").fit(X, y)


# -- item 5: training inside a private wrapper is not private ---------------


class TestTrainingIsNotPrivate:
    def test_classifier_unfitted_model_warns(self, digits):
        _, X, y = digits
        clf = PrivateConformalClassifier(
            LogisticRegression(max_iter=300), epsilon=1.0, random_state=0
        )
        with pytest.warns(PrivacyLeakWarning, match="epsilon_spent_ covers the"):
            clf.fit(X[:600], y[:600])
        assert clf.epsilon_spent_ == 1.0  # calibration only

    def test_warning_points_at_the_caller(self, digits):
        _, X, y = digits
        clf = PrivateConformalClassifier(LogisticRegression(max_iter=300))
        with pytest.warns(PrivacyLeakWarning) as record:
            clf.fit(X[:600], y[:600])
        assert record[0].filename == __file__

    def test_frozen_model_does_not_warn(self, digits):
        model, X, y = digits
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrivacyLeakWarning)
            PrivateConformalClassifier(model, random_state=0).fit(X[:600], y[:600])

    def test_non_private_calibrator_does_not_warn(self, regression):
        X, y, ids = regression
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrivacyLeakWarning)
            FedConformalRegressor(epsilon=1.0, random_state=0).fit(X, y, ids)

    @pytest.mark.parametrize("private", [{"epsilon": 1.0}, {"calibrator": "dp-qq"}])
    def test_regressor_unfitted_model_warns(self, regression, private):
        X, y, ids = regression
        kw = {"calibrator": "dp-qq", "score_bounds": (0, 10), **private}
        with pytest.warns(PrivacyLeakWarning, match="trains the estimator"):
            FedConformalRegressor(random_state=0, **kw).fit(X, y, ids)

    def test_regressor_scale_model_warns(self, regression):
        X, y, ids = regression
        reg = FedConformalRegressor(
            FrozenEstimator(LinearRegression().fit(X, y)),
            conformity_score=NormalizedResidualScore(LinearRegression()),
            calibrator="dp-qq",
            score_bounds=(0, 10),
            random_state=0,
        )
        with pytest.warns(PrivacyLeakWarning, match="scale model"):
            reg.fit(X, y, ids)

    def test_cqr_unfitted_models_warn(self, regression):
        X, y, ids = regression
        reg = FedCQRRegressor(
            estimator_lower=QuantileRegressor(solver="highs"),
            estimator_upper=QuantileRegressor(solver="highs"),
            conformity_score="asymmetric",
            calibrator="dp-central",
            alpha=0.2,
            epsilon=5.0,
            score_bounds=(-10, 10),
            random_state=0,
        )
        with pytest.warns(PrivacyLeakWarning, match="quantile models"):
            reg.fit(X, y, ids)
        assert reg.epsilon_spent_ == 10.0  # one release per side


# -- item 7: randomized APS served one row at a time ------------------------


def test_randomized_aps_single_row_covers_like_batch(digits):
    """Coverage of single-row and batch serving over 8 seeds (issue 11, item 7).

    Before the fix every single-row request reused the same uniform (a seed
    fixed at fit), and single-row coverage over seeds 0-7 ranged 0.66-0.98.
    Now each call draws fresh uniforms, so a row's draw does not depend on the
    batch. For one seed both coverages are means of ``n_test`` Bernoulli
    hits sharing model and threshold and differing only in the uniforms, so
    their difference has standard error at most ``sqrt(2 p (1 - p) / n_test)``
    (p = 1 - alpha); each seed must agree within 4 such SE (false alarm
    < 1e-4 per seed). Over the 8 seeds the mean coverage must reach 1 - alpha
    minus 3 standard errors of a mean of 8 coverages, each with variance at
    most ``p (1 - p) (1 / n_test + 1 / (n_cal + 1))`` (test and calibration
    draws).
    """
    model, X, y = digits
    alpha, n_cal = 0.1, 600
    batch, single = [], []
    for seed in range(8):
        order = np.random.default_rng(seed).permutation(len(y))
        cal, test = order[:n_cal], order[n_cal:]
        clf = PrivateConformalClassifier(
            model,
            alpha=alpha,
            calibrator="central",
            conformity_score=APSScore(randomized=True),
            random_state=seed,
        ).fit(X[cal], y[cal])
        rng = np.random.default_rng(100 + seed)  # reproducible test draws
        sets = clf.predict_set(X[test], random_state=rng)
        batch.append(set_coverage_score(y[test], sets, classes=clf.classes_))
        rows = np.vstack([clf.predict_set(X[[i]], random_state=rng) for i in test])
        single.append(set_coverage_score(y[test], rows, classes=clf.classes_))
    batch, single = np.array(batch), np.array(single)
    n_test = len(y) - n_cal
    p = 1 - alpha
    se_diff = np.sqrt(2 * p * (1 - p) / n_test)
    assert np.all(np.abs(single - batch) <= 4 * se_diff), (single, batch)
    se_mean = np.sqrt(p * (1 - p) * (1 / n_test + 1 / (n_cal + 1)) / 8)
    assert single.mean() >= p - 3 * se_mean, single
    assert batch.mean() >= p - 3 * se_mean, batch


# -- item 7: frozen model + frozen scale model --------------------------------


def test_frozen_model_and_frozen_scale(regression):
    # Used to crash in fit: the scale's fit predicted on 0 training rows.
    X, y, ids = regression
    model = LinearRegression().fit(X[:300], y[:300])
    residual = np.abs(y[:300] - model.predict(X[:300]))
    scale = make_pipeline(FunctionTransformer(np.abs), LinearRegression())
    scale.fit(X[:300], residual)
    reg = FedConformalRegressor(
        FrozenEstimator(model),
        conformity_score=NormalizedResidualScore(FrozenEstimator(scale)),
        random_state=0,
    ).fit(X[300:], y[300:], client_ids=ids[300:])
    assert reg.calibrator_.n_per_client_.sum() == 500  # every row calibrates
    iv = reg.predict_interval(X[:5])
    half = reg.threshold_ * np.maximum(scale.predict(X[:5]), 1e-6)
    np.testing.assert_allclose(iv[:, 0], model.predict(X[:5]) - half)
    np.testing.assert_allclose(iv[:, 1], model.predict(X[:5]) + half)


# -- item 7: intervals never cross --------------------------------------------


class _Shift(RegressorMixin, BaseEstimator):
    """A fitted 'quantile model': a fitted line plus a constant."""

    def __init__(self, model, shift):
        self.model, self.shift = model, shift

    def fit(self, X, y):
        return self

    def predict(self, X):
        return self.model.predict(X) + self.shift

    def __sklearn_is_fitted__(self):
        return True


@pytest.mark.parametrize("score", ["symmetric", "asymmetric", "normalized"])
@pytest.mark.parametrize("case", ["crossing_models", "negative_threshold"])
def test_cqr_intervals_never_cross(regression, score, case):
    X, y, ids = regression
    line = LinearRegression().fit(X[:300], y[:300])
    if case == "crossing_models":  # the lower model predicts above the upper
        lower, upper = _Shift(line, 1.0), _Shift(line, -1.0)
        kw = {}
    else:  # a band far too wide: the correction q is negative
        lower, upper = _Shift(line, -30.0), _Shift(line, 30.0)
        kw = {"alpha": 0.5}
    reg = FedCQRRegressor(
        estimator_lower=FrozenEstimator(lower),
        estimator_upper=FrozenEstimator(upper),
        conformity_score=score,
        random_state=0,
        **kw,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.fit(X[300:], y[300:], client_ids=ids[300:])
    if case == "negative_threshold":
        assert np.all(np.asarray(reg.threshold_) < 0)
    iv = reg.predict_interval(X)
    assert np.all(iv[:, 0] <= iv[:, 1])
    # the returned interval contains the conformal set: coverage is kept
    assert (
        coverage_score(y[300:], reg.predict_interval(X[300:])) >= 1 - reg.alpha - 0.05
    )
    assert mean_width_score(iv) == pytest.approx(np.mean(iv[:, 1] - iv[:, 0]))


@pytest.mark.parametrize("conformity_score", ["absolute", "normalized"])
def test_regressor_intervals_never_cross(regression, conformity_score):
    X, y, ids = regression
    reg = FedConformalRegressor(conformity_score=conformity_score, random_state=0).fit(
        X, y, client_ids=ids
    )
    iv = reg.predict_interval(X)
    assert np.all(iv[:, 0] <= iv[:, 1])
    # a negative threshold (e.g. released by a private calibrator whose
    # public bounds go below 0) gives the span of the bounds, never a crossing
    iv = reg.conformity_score_.interval(reg.predict(X), -0.5, X)
    assert np.all(iv[:, 0] <= iv[:, 1])


def test_two_students_intervals_never_cross(regression):
    X, y, ids = regression
    reg = FedConformalRegressor(
        TwoStudentsRegressor(
            KNeighborsRegressor(10),
            mean_student=KNeighborsRegressor(10),
            random_state=0,
        ),
        conformity_score="two_students",
        random_state=0,
    ).fit(X, y, client_ids=ids, X_unlabeled=X[:200])
    for q in (reg.threshold_, -reg.threshold_):
        iv = reg.conformity_score_.interval(reg.predict(X), q, X)
        assert np.all(iv[:, 0] <= iv[:, 1])
