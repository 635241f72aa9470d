"""PrivateConformalClassifier, the regressor's private path, and set metrics."""

import math
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.svm import LinearSVC

from skfedcp import FedConformalRegressor
from skfedcp.calibrators import (
    CentralCalibrator,
    PrivateCentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
)
from skfedcp.classification import PrivateConformalClassifier
from skfedcp.exceptions import (
    ClippedScoresWarning,
    InfiniteThresholdWarning,
    SmallCalibrationSetWarning,
)
from skfedcp.metrics import (
    get_set_scorer,
    per_client_set_coverage,
    set_coverage_score,
    set_size_score,
    size_stratified_coverage,
)
from skfedcp.scores import APSScore
from skfedcp.utils._sklearn_compat import InvalidParameterError


@pytest.fixture(scope="module")
def digits():
    """Digits: a model trained on 500 rows, 1000 calibration rows, the rest test."""
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    model = LogisticRegression(max_iter=500).fit(X[:500], y[:500])
    client_ids = np.repeat(np.arange(5), 200)
    return (
        FrozenEstimator(model),
        X[500:1500],
        y[500:1500],
        client_ids,
        X[1500:],
        y[1500:],
    )


class TestFrozenPath:
    def test_threshold_is_the_calibrators(self, digits):
        model, X, y, _, _, _ = digits
        clf = PrivateConformalClassifier(model, epsilon=5.0, random_state=0).fit(X, y)
        scores = 1.0 - model.predict_proba(X)[np.arange(len(y)), y]
        cal = PrivateCentralCalibrator(epsilon=5.0, score_bounds=(0, 1))
        cal.fit(scores, alpha=0.1, random_state=0)
        assert clf.threshold_ == cal.threshold_
        assert clf.estimator_ is model
        assert clf.epsilon_spent_ == 5.0
        assert clf.messages_["n"].sum() == len(y)

    def test_sets_are_labels_below_threshold(self, digits):
        model, X, y, ids, X_test, _ = digits
        clf = PrivateConformalClassifier(
            model, calibrator="dp-qq", epsilon=10.0, random_state=0
        ).fit(X, y, client_ids=ids)
        sets = clf.predict_set(X_test)
        proba = model.predict_proba(X_test)
        np.testing.assert_array_equal(sets, 1.0 - proba <= clf.threshold_)
        np.testing.assert_array_equal(clf.predict_proba(X_test), proba)
        np.testing.assert_array_equal(clf.predict(X_test), model.predict(X_test))
        np.testing.assert_array_equal(clf.classes_, np.arange(10))
        assert clf.n_clients_ == 5
        assert sorted(clf.messages_) == ["client", "n", "quantile"]

    def test_string_labels_align_with_classes(self, digits):
        _, X, y, _, X_test, _ = digits
        names = np.array(list("abcdefghij"))
        inner = LogisticRegression(max_iter=500).fit(X[:500], names[y[:500]])
        clf = PrivateConformalClassifier(
            FrozenEstimator(inner), epsilon=8.0, random_state=0
        ).fit(X[500:], names[y[500:]])
        assert clf.classes_.tolist() == list("abcdefghij")
        sets = clf.predict_set(X_test)
        expected = 1.0 - inner.predict_proba(X_test) <= clf.threshold_
        np.testing.assert_array_equal(sets, expected)

    def test_randomized_predict_set_draws_per_call(self, digits):
        # Issue 11 item 7: fresh uniforms at every call (OS entropy by
        # default), reproducible when predict_set gets a random_state.
        model, X, y, _, X_test, _ = digits
        clf = PrivateConformalClassifier(
            model,
            conformity_score=APSScore(randomized=True),
            epsilon=5.0,
            random_state=0,
        ).fit(X, y)
        assert not hasattr(clf, "tie_break_seed_")
        np.testing.assert_array_equal(
            clf.predict_set(X_test, random_state=1),
            clf.predict_set(X_test, random_state=1),
        )
        a, b = clf.predict_set(X_test), clf.predict_set(X_test)
        assert (a != b).any()

    def test_deterministic_predict_set(self, digits):
        model, X, y, _, X_test, _ = digits
        clf = PrivateConformalClassifier(model, epsilon=5.0, random_state=0).fit(X, y)
        np.testing.assert_array_equal(clf.predict_set(X_test), clf.predict_set(X_test))

    def test_refit_is_reproducible(self, digits):
        model, X, y, ids, _, _ = digits
        clf = PrivateConformalClassifier(model, calibrator="dp-qq", random_state=3)
        a = clf.fit(X, y, client_ids=ids).threshold_
        assert clone(clf).fit(X, y, client_ids=ids).threshold_ == a

    def test_pandas_and_pickle(self, digits):
        model, X, y, _, X_test, _ = digits
        frame = pd.DataFrame(X, columns=[f"px{i}" for i in range(X.shape[1])])
        pipe_model = FrozenEstimator(
            LogisticRegression(max_iter=500).fit(frame.iloc[:300], y[:300])
        )
        clf = PrivateConformalClassifier(pipe_model, epsilon=8.0, random_state=0)
        clf.fit(frame.iloc[300:], y[300:])
        assert clf.feature_names_in_.tolist() == frame.columns.tolist()
        clone_ = pickle.loads(pickle.dumps(clf))
        test = pd.DataFrame(X_test, columns=frame.columns)
        np.testing.assert_array_equal(clone_.predict_set(test), clf.predict_set(test))


class TestCalibrators:
    def test_non_private_one_client_is_split_conformal(self, digits):
        model, X, y, _, _, _ = digits
        clf = PrivateConformalClassifier(model, calibrator="central").fit(X, y)
        scores = 1.0 - model.predict_proba(X)[np.arange(len(y)), y]
        assert clf.threshold_ == CentralCalibrator().fit(scores, alpha=0.1).threshold_
        assert clf.epsilon_spent_ == math.inf
        qq = PrivateConformalClassifier(model, calibrator="qq").fit(X, y)
        assert qq.threshold_ == clf.threshold_

    def test_wrapper_epsilon_overrides_the_instance(self, digits):
        model, X, y, _, _, _ = digits
        cal = PrivateCentralCalibrator(epsilon=2.0)
        clf = PrivateConformalClassifier(model, calibrator=cal, epsilon=7.0)
        clf.fit(X, y)
        assert clf.calibrator_.epsilon == 7.0
        assert clf.calibrator_.score_bounds == (0.0, 1.0)  # natural bounds
        assert cal.epsilon == 2.0 and cal.score_bounds is None  # not mutated
        kept = PrivateConformalClassifier(model, calibrator=cal, epsilon=None).fit(X, y)
        assert kept.calibrator_.epsilon == 2.0 and kept.epsilon_spent_ in (0.0, 2.0)

    def test_calibrator_instance_settings(self, digits):
        model, X, y, ids, _, _ = digits
        cal = PrivateQuantileOfQuantilesCalibrator(n_bins=40, gamma=0.05)
        clf = PrivateConformalClassifier(model, calibrator=cal, epsilon=10.0)
        clf.fit(X, y, client_ids=ids)
        info = clf.calibrator_.calibration_info_
        assert info["n_bins"] == 40 and info["gamma"] == 0.05

    def test_too_little_data_gives_every_label(self, digits):
        model, X, y, _, X_test, _ = digits
        clf = PrivateConformalClassifier(model, epsilon=1.0, random_state=0)
        # 80 rows: the default tight rule needs 97 at epsilon = 1 (the paper's 213).
        with pytest.warns(SmallCalibrationSetWarning, match="too few"):
            clf.fit(X[:80], y[:80])
        assert clf.threshold_ == math.inf
        assert clf.epsilon_spent_ == 0.0
        assert clf.predict_set(X_test).all()

    def test_grid_search_over_alpha_epsilon_calibrator(self, digits):
        model, X, y, ids, _, _ = digits
        grid = GridSearchCV(
            PrivateConformalClassifier(model, random_state=0),
            {
                "alpha": [0.1, 0.2],
                "epsilon": [1.0, 8.0],
                "calibrator": ["dp-central", "central"],
            },
            scoring={
                "coverage": get_set_scorer("coverage"),
                "size": get_set_scorer("neg_mean_set_size"),
            },
            refit="size",
            cv=2,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            grid.fit(X, y, client_ids=ids)
        results = pd.DataFrame(grid.cv_results_)
        assert len(results) == 8
        assert grid.best_estimator_.estimator_ is model  # never refitted
        private = results[results["param_calibrator"] == "dp-central"]
        central = results[results["param_calibrator"] == "central"]
        # Privacy never shrinks the sets on average at equal alpha.
        for alpha in (0.1, 0.2):
            p = private[private["param_alpha"] == alpha]["mean_test_size"].min()
            c = central[central["param_alpha"] == alpha]["mean_test_size"].max()
            assert p <= c + 1e-12


class TestUnfrozenPath:
    def test_split_within_clients(self, digits):
        _, X, y, ids, X_test, _ = digits
        clf = PrivateConformalClassifier(
            LogisticRegression(max_iter=300),
            calibrator="qq",
            random_state=0,
            calibration_size=0.5,
        ).fit(X, y, client_ids=ids)
        assert clf.messages_["n"].tolist() == [100] * 5
        assert clf.predict_set(X_test).shape == (len(X_test), 10)

    def test_default_estimator(self, digits):
        _, X, y, _, _, _ = digits
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence of the default model
            clf = PrivateConformalClassifier(epsilon=10.0, random_state=0).fit(X, y)
        assert isinstance(clf.estimator_, LogisticRegression)


class TestBadInput:
    @pytest.mark.parametrize("epsilon", [0.0, -1.0, np.inf, np.nan])
    def test_bad_epsilon(self, digits, epsilon):
        model, X, y, _, _, _ = digits
        with pytest.raises(InvalidParameterError, match="epsilon"):
            PrivateConformalClassifier(model, epsilon=epsilon).fit(X, y)

    def test_missing_predict_proba(self, digits):
        _, X, y, _, _, _ = digits
        with pytest.raises(InvalidParameterError, match="predict_proba"):
            PrivateConformalClassifier(LinearSVC()).fit(X, y)

    def test_unseen_labels(self, digits):
        model, X, y, _, _, _ = digits
        with pytest.raises(ValueError, match=r"labels the model has not seen: \[11\]"):
            PrivateConformalClassifier(model).fit(X, np.where(y == 3, 11, y))

    @pytest.mark.parametrize(
        "bounds, match",
        [((1.0, 0.0), "increasing"), ((0.0, np.inf), "finite"), ((0.0,), "pair")],
    )
    def test_bad_score_bounds(self, digits, bounds, match):
        model, X, y, _, _, _ = digits
        with pytest.raises((ValueError, TypeError), match=f"score_bounds.*{match}"):
            PrivateConformalClassifier(model, score_bounds=bounds).fit(X, y)

    def test_alpha_above_half_with_dp_central(self, digits):
        model, X, y, _, _, _ = digits
        with pytest.raises(ValueError, match=r"alpha must be in \(0, 0.5\]"):
            PrivateConformalClassifier(model, alpha=0.6).fit(X, y)

    @pytest.mark.parametrize("params", [{"n_bins": 1}, {"gamma": 1.5}])
    def test_bad_calibrator_parameters(self, digits, params):
        model, X, y, _, _, _ = digits
        cal = PrivateCentralCalibrator(**params)
        with pytest.raises(InvalidParameterError, match=next(iter(params))):
            PrivateConformalClassifier(model, calibrator=cal).fit(X, y)

    def test_not_fitted(self, digits):
        model, *_ = digits
        from sklearn.exceptions import NotFittedError

        with pytest.raises(NotFittedError):
            PrivateConformalClassifier(model).predict_set(np.zeros((1, 64)))


@pytest.fixture(scope="module")
def data(linear_data):
    X_train, y_train, X, y, ids = linear_data
    return FrozenEstimator(LinearRegression().fit(X_train, y_train)), X, y, ids


class TestPrivateRegression:
    @pytest.mark.parametrize("calibrator", ["dp-qq", "dp-central"])
    def test_private_intervals(self, data, calibrator):
        model, X, y, ids = data
        reg = FedConformalRegressor(
            model,
            calibrator=calibrator,
            epsilon=10.0,
            score_bounds=(0, 6),
            random_state=0,
        ).fit(X, y, client_ids=ids)
        assert reg.calibrator_.epsilon == 10.0
        assert reg.calibrator_.epsilon_spent_ == 10.0
        n_bins = reg.calibrator_.calibration_info_["n_bins"]
        assert reg.threshold_ in np.linspace(0, 6, n_bins + 1)[1:-1]
        pred = model.predict(X[:3])
        np.testing.assert_allclose(
            reg.predict_interval(X[:3]),
            np.c_[pred - reg.threshold_, pred + reg.threshold_],
        )

    def test_bounds_are_required(self, data):
        model, X, y, ids = data
        with pytest.raises(ValueError, match="needs score_bounds"):
            FedConformalRegressor(model, calibrator="dp-qq").fit(X, y, client_ids=ids)

    def test_clipped_scores_warn_and_stay_valid(self, data):
        model, X, y, ids = data
        reg = FedConformalRegressor(
            model,
            calibrator="dp-central",
            epsilon=10.0,
            score_bounds=(0, 0.1),
            random_state=0,
        )
        with pytest.warns(ClippedScoresWarning, match="above"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", InfiniteThresholdWarning)
                reg.fit(X, y, client_ids=ids)
        # Most residuals exceed 0.1: the top bin, i.e. infinite intervals.
        assert np.isinf(reg.predict_interval(X[:2])).all()

    def test_epsilon_ignored_by_non_private(self, data):
        model, X, y, ids = data
        a = FedConformalRegressor(model, epsilon=1.0).fit(X, y, client_ids=ids)
        b = FedConformalRegressor(model).fit(X, y, client_ids=ids)
        assert a.threshold_ == b.threshold_


class TestSetMetrics:
    SETS = np.array([[True, False, False], [True, True, False], [False, False, True]])

    def test_coverage_and_size(self):
        assert set_coverage_score([0, 2, 2], self.SETS) == pytest.approx(2 / 3)
        assert (
            set_coverage_score(["a", "b", "c"], self.SETS, classes=["a", "b", "c"])
            == 1.0
        )
        assert set_size_score(self.SETS) == pytest.approx(4 / 3)

    def test_size_stratified(self):
        res = size_stratified_coverage([0, 0, 0], self.SETS)
        assert res.sizes.tolist() == [1, 2]
        assert res.coverage.tolist() == [0.5, 1.0]
        assert res.n_samples.tolist() == [2, 1]

    def test_per_client(self):
        res = per_client_set_coverage([0, 2, 2], self.SETS, ["x", "x", "y"])
        assert res.clients.tolist() == ["x", "y"]
        assert res.coverage.tolist() == [0.5, 1.0]

    def test_errors(self):
        with pytest.raises(ValueError, match="not in classes"):
            set_coverage_score(["a", "z", "a"], self.SETS, classes=["a", "b", "c"])
        with pytest.raises(ValueError, match="column indices"):
            set_coverage_score(["a", "b", "c"], self.SETS)
        with pytest.raises(ValueError, match="shape"):
            set_size_score([True, False])
        with pytest.raises(ValueError, match="name must be one of"):
            get_set_scorer("accuracy")

    def test_scorer(self, digits):
        model, X, y, _, X_test, y_test = digits
        clf = PrivateConformalClassifier(model, epsilon=8.0, random_state=0).fit(X, y)
        sets = clf.predict_set(X_test)
        assert get_set_scorer("coverage")(clf, X_test, y_test) == set_coverage_score(
            y_test, sets
        )
        assert get_set_scorer("neg_mean_set_size")(
            clf, X_test, y_test
        ) == -set_size_score(sets)
