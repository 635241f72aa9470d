"""The frozen-model fast path: no copy of X, one scan of its values, same results."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sklearn.utils.validation as sk_validation
from sklearn import get_config
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression

import skfedcp
from skfedcp import FedConformalRegressor, FedCQRRegressor, PrivateConformalClassifier
from skfedcp.base import fit_streams
from skfedcp.calibrators import get_calibrator
from skfedcp.scores import (
    AbsoluteResidualScore,
    AsymmetricCQRScore,
    BaseClassificationScore,
    CQRScore,
    LACScore,
    NormalizedCQRScore,
)
from skfedcp.scores._base import ordered_interval


class RecordingRegressor(RegressorMixin, BaseEstimator):
    """A fitted model, ``x_0 + offset``, that keeps the inputs predict receives."""

    def __init__(self, offset=0.0):
        self.offset = offset

    def fit(self, X, y):
        self.n_features_in_ = np.asarray(X).shape[1]
        self.seen_ = []
        return self

    def predict(self, X):
        self.seen_.append(X)
        return np.asarray(X, dtype=np.float64)[:, 0] + self.offset


class RecordingClassifier(ClassifierMixin, BaseEstimator):
    """A fitted three-class model that keeps the inputs predict_proba receives."""

    def fit(self, X, y):
        self.classes_ = np.array([0, 1, 2])
        self.n_features_in_ = np.asarray(X).shape[1]
        self.seen_ = []
        return self

    def predict_proba(self, X):
        self.seen_.append(X)
        logits = np.asarray(X, dtype=np.float64)[:, :3]
        proba = np.exp(logits - logits.max(axis=1, keepdims=True))
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = X[:, 0] + rng.normal(size=400)
    labels = rng.integers(3, size=400)
    ids = np.repeat(np.arange(8), 50)
    return X, y, labels, ids


def _frozen(model, X, y):
    return FrozenEstimator(model.fit(X, y))


class TestNoCopy:
    """With a prefit model every row calibrates on X itself, never a copy."""

    def test_regressor(self, data):
        X, y, _, ids = data
        model = RecordingRegressor()
        FedConformalRegressor(_frozen(model, X, y)).fit(X, y, client_ids=ids)
        (seen,) = model.seen_
        assert seen is X

    def test_cqr_pair(self, data):
        X, y, _, ids = data
        lower, upper = RecordingRegressor(-1.0), RecordingRegressor(1.0)
        FedCQRRegressor(
            estimator_lower=_frozen(lower, X, y), estimator_upper=_frozen(upper, X, y)
        ).fit(X, y, client_ids=ids)
        assert lower.seen_[0] is X and upper.seen_[0] is X

    def test_classifier(self, data):
        X, _, labels, ids = data
        model = RecordingClassifier()
        PrivateConformalClassifier(_frozen(model, X, labels), calibrator="qq").fit(
            X, labels, client_ids=ids
        )
        (seen,) = model.seen_
        assert seen is X

    def test_dataframe_is_passed_as_given(self, data):
        X, y, _, ids = data
        frame = pd.DataFrame(X, columns=list("abcd"))
        model = RecordingRegressor()
        FedConformalRegressor(_frozen(model, frame, y)).fit(frame, y, client_ids=ids)
        assert model.seen_[0] is frame

    def test_training_split_still_indexes(self, data):
        # An unfitted scale model needs training rows: calibration is a subset.
        X, y, _, ids = data
        model = RecordingRegressor()
        FedConformalRegressor(
            _frozen(model, X, y), conformity_score="normalized", random_state=0
        ).fit(X, y, client_ids=ids)
        assert all(seen.shape[0] < X.shape[0] for seen in model.seen_)


@pytest.fixture
def scans(monkeypatch):
    """The arrays scanned for finiteness (scans skipped by assume_finite omitted)."""
    counts = []
    inside_ours = []
    original = sk_validation._assert_all_finite
    ours = skfedcp.base._wrapper._assert_finite

    def counting(X, *args, **kwargs):
        if not get_config()["assume_finite"] and not inside_ours:
            counts.append(X)
        return original(X, *args, **kwargs)

    def counting_ours(X, *args, **kwargs):
        # skfedcp's own first pass (scikit-learn's element-wise check only
        # runs after it, on a non-finite sum: the same scan, counted once).
        if not get_config()["assume_finite"]:
            counts.append(X)
        inside_ours.append(True)
        try:
            return ours(X, *args, **kwargs)
        finally:
            inside_ours.pop()

    monkeypatch.setattr(sk_validation, "_assert_all_finite", counting)
    monkeypatch.setattr(skfedcp.base._wrapper, "_assert_finite", counting_ours)
    return counts


class TestOneScan:
    def test_regressor_scans_X_once(self, data, scans):
        X, y, _, ids = data
        frozen = FrozenEstimator(LinearRegression().fit(X, y))
        scans.clear()
        FedConformalRegressor(frozen).fit(X, y, client_ids=ids)
        # By shape, so that a scan of a copy of X counts too.
        assert sum(np.shape(a) == X.shape for a in scans) == 1
        assert sum(np.shape(a) == y.shape for a in scans) == 1

    def test_classifier_scans_X_once(self, data, scans):
        X, _, labels, ids = data
        frozen = FrozenEstimator(LogisticRegression().fit(X, labels))
        scans.clear()
        PrivateConformalClassifier(frozen, calibrator="central").fit(
            X, labels, client_ids=ids
        )
        assert sum(np.shape(a) == X.shape for a in scans) == 1

    def test_predict_interval_leaves_the_scan_to_the_model(self, data, scans):
        X, y, _, ids = data
        frozen = FrozenEstimator(LinearRegression().fit(X, y))
        reg = FedConformalRegressor(frozen).fit(X, y, client_ids=ids)
        scans.clear()
        reg.predict_interval(X)
        assert sum(np.shape(a) == X.shape for a in scans) == 1

    @pytest.mark.parametrize("where", ["X", "y"])
    @pytest.mark.parametrize("bad", [np.nan, np.inf])
    @pytest.mark.parametrize("as_list", [False, True], ids=["ndarray", "list"])
    def test_non_finite_is_a_clear_early_error(self, data, where, bad, as_list):
        # The plain-array path and validate_data give the same message.
        X, y, _, ids = data
        X, y = X.copy(), y.copy()
        (X if where == "X" else y)[3, ...] = bad
        frozen = FrozenEstimator(LinearRegression().fit(X[4:], y[4:]))
        reg = FedConformalRegressor(frozen, calibrator="central")
        what = "NaN" if np.isnan(bad) else "infinity"
        if as_list:
            X, y = X.tolist(), y.tolist()
        with pytest.raises(ValueError, match=f"Input {where} contains {what}"):
            reg.fit(X, y, client_ids=ids)

    def test_continuous_labels_still_refused(self, data):
        X, y, labels, _ = data
        frozen = FrozenEstimator(LogisticRegression().fit(X, labels))
        with pytest.raises(ValueError, match="y must hold class labels"):
            PrivateConformalClassifier(frozen, calibrator="central").fit(X, y)


class TestSameResults:
    """The fast path gives the calibrator's threshold on every row, bit for bit."""

    @pytest.mark.parametrize("calibrator", ["central", "qq", "avg", "dp-central"])
    def test_regressor(self, data, calibrator):
        X, y, _, ids = data
        model = LinearRegression().fit(X, y)
        reg = FedConformalRegressor(
            FrozenEstimator(model),
            calibrator=calibrator,
            epsilon=2.0,
            score_bounds=(0, 5),
            random_state=3,
        ).fit(X, y, client_ids=ids)
        scores = np.abs(y - model.predict(X))
        expected = get_calibrator(calibrator)
        if calibrator == "dp-central":
            expected.set_params(epsilon=2.0, score_bounds=(0, 5))
        expected.fit(scores, ids, alpha=0.1, random_state=fit_streams(3)[0])
        assert reg.threshold_ == expected.threshold_
        pred = model.predict(X)
        q = expected.threshold_
        np.testing.assert_array_equal(
            reg.predict_interval(X), np.column_stack([pred - q, pred + q])
        )

    def test_dataframe_and_array_agree(self, data):
        X, y, _, ids = data
        frozen = FrozenEstimator(LinearRegression().fit(X, y))
        a = FedConformalRegressor(frozen).fit(X, y, client_ids=ids)
        b = FedConformalRegressor(frozen).fit(pd.DataFrame(X), y, client_ids=ids)
        assert a.threshold_ == b.threshold_

    def test_lac_matches_the_generic_score(self, data):
        rng = np.random.default_rng(1)
        proba = rng.dirichlet(np.ones(5), size=300)
        labels = rng.integers(5, size=300)
        lac = LACScore()
        generic = BaseClassificationScore.conformity_score(lac, labels, proba)
        np.testing.assert_array_equal(lac.conformity_score(labels, proba), generic)
        generic_sets = BaseClassificationScore.predict_set(lac, proba, 0.6)
        np.testing.assert_array_equal(lac.predict_set(proba, 0.6), generic_sets)

    @pytest.mark.parametrize("score", [CQRScore(), NormalizedCQRScore()])
    def test_cqr_interval_is_min_max(self, score):
        rng = np.random.default_rng(2)
        bounds = rng.normal(size=(200, 2))  # about half the rows crossed
        iv = score.interval(bounds, -0.1)
        half = -0.1 * (
            np.maximum(bounds[:, 1] - bounds[:, 0], 1e-6)
            if isinstance(score, NormalizedCQRScore)
            else 1.0
        )
        lo, hi = bounds[:, 0] - half, bounds[:, 1] + half
        np.testing.assert_array_equal(
            iv, np.column_stack([np.minimum(lo, hi), np.maximum(lo, hi)])
        )


class TestLayout:
    def test_ordered_interval_is_c_ordered(self):
        out = ordered_interval(np.array([0.0, 3.0]), np.array([1.0, 2.0]))
        assert out.flags.c_contiguous
        np.testing.assert_array_equal(out, [[0.0, 1.0], [2.0, 3.0]])

    @pytest.mark.parametrize(
        "score, threshold",
        [
            (AbsoluteResidualScore(), 0.5),
            (CQRScore(), 0.5),
            (AsymmetricCQRScore(), [0.5, -0.2]),
            (NormalizedCQRScore(), 0.5),
        ],
    )
    def test_scores_write_c_ordered_intervals(self, score, threshold):
        y_pred = np.linspace(0, 1, 7)
        if not isinstance(score, AbsoluteResidualScore):
            y_pred = np.column_stack([y_pred, y_pred + 1])
        out = score.interval(y_pred, threshold)
        assert out.shape == (7, 2) and out.flags.c_contiguous

    def test_wrappers_return_c_ordered_intervals(self, data):
        X, y, _, ids = data
        model = LinearRegression().fit(X, y)
        reg = FedConformalRegressor(FrozenEstimator(model)).fit(X, y, client_ids=ids)
        assert reg.predict_interval(X).flags.c_contiguous
        cqr = FedCQRRegressor(
            estimator_lower=FrozenEstimator(RecordingRegressor(-1.0).fit(X, y)),
            estimator_upper=FrozenEstimator(RecordingRegressor(1.0).fit(X, y)),
        ).fit(X, y, client_ids=ids)
        assert cqr.predict_interval(X).flags.c_contiguous


def test_import_does_not_load_quantile_forest():
    root = str(Path(skfedcp.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    code = (
        "import sys, skfedcp; "
        "assert 'quantile_forest' not in sys.modules, 'quantile_forest imported'"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


class TestFixedCosts:
    """The shortcuts for plain arrays keep scikit-learn's behaviour."""

    def test_feature_names_of_a_frame_then_an_array(self, data):
        X, y, _, ids = data
        frame = pd.DataFrame(X, columns=list("abcd"))
        model = FrozenEstimator(LinearRegression().fit(frame, y))
        reg = FedConformalRegressor(model).fit(frame, y, client_ids=ids)
        assert list(reg.feature_names_in_) == list("abcd")
        with pytest.warns(UserWarning, match="X does not have valid feature names"):
            reg.predict_interval(X)
        # Refitting on an array forgets the names (as validate_data does).
        plain = FrozenEstimator(LinearRegression().fit(X, y))
        reg.set_params(estimator=plain).fit(X, y, client_ids=ids)
        assert not hasattr(reg, "feature_names_in_")

    def test_wrong_number_of_features_still_refused(self, data):
        X, y, _, ids = data
        reg = FedConformalRegressor(FrozenEstimator(LinearRegression().fit(X, y)))
        reg.fit(X, y, client_ids=ids)
        with pytest.raises(ValueError, match="features"):
            reg.predict_interval(X[:, :3])

    @pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
    def test_overflowing_sum_is_not_an_error(self, data, bad):
        # A sum that overflows to inf goes to scikit-learn's element-wise
        # check, which passes finite values and names a non-finite one.
        X, y, _, ids = data
        reg = FedConformalRegressor(
            FrozenEstimator(LinearRegression().fit(X, y)), calibrator="central"
        )
        X = X.copy()
        X[:2, 0] = [1e308, 1e308]
        with np.errstate(over="ignore", invalid="ignore"):  # the model's predictions
            reg.fit(X, y, client_ids=ids)  # finite X: accepted
        X[5, 1] = bad
        with pytest.raises(ValueError, match="Input X contains"):
            reg.fit(X, y, client_ids=ids)

    def test_integer_targets_need_no_scan(self, data):
        X, _, labels, ids = data
        model = FrozenEstimator(LinearRegression().fit(X, labels))
        reg = FedConformalRegressor(model, calibrator="central").fit(X, labels)
        assert np.isfinite(reg.threshold_)

    @pytest.mark.parametrize(
        "random_state",
        [
            0,
            2**80,
            np.random.SeedSequence(5),
            np.random.SeedSequence(5, spawn_key=(2,)),
        ],
    )
    def test_streams_are_the_spawned_children(self, random_state):
        from skfedcp.utils._random import check_seed_sequence

        seed = check_seed_sequence(random_state)
        n_spawned = seed.n_children_spawned
        expected = np.random.SeedSequence(
            seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size
        ).spawn(4)
        calibrator_seed, streams = fit_streams(random_state)
        assert len(streams) == 4 and calibrator_seed is streams[1]
        for got, want in zip([streams[i] for i in range(4)], expected, strict=True):
            assert got.spawn_key == want.spawn_key and got.entropy == want.entropy
            np.testing.assert_array_equal(got.generate_state(8), want.generate_state(8))
        keys = [s.spawn_key for s in streams[1:3]]
        assert keys == [e.spawn_key for e in expected[1:3]]
        assert streams[-1].spawn_key == expected[-1].spawn_key
        if isinstance(random_state, np.random.SeedSequence):
            assert random_state.n_children_spawned == n_spawned  # left as it was

    def test_fresh_streams_are_drawn_when_first_read(self):
        # random_state=None: the calibrator gets None (fresh entropy of its
        # own) and the root SeedSequence is drawn from the operating system
        # only when a stream is read, once per fit.
        calibrator_seed, streams = fit_streams(None)
        assert calibrator_seed is None and streams._seed is None
        first = streams[0]
        assert streams._seed is not None and streams[0] is first
        assert streams[2].entropy == first.entropy  # one root per fit
        assert fit_streams(None)[1][0].entropy != first.entropy

    def test_parameter_names_are_read_once_per_class(self):
        names = FedConformalRegressor._get_param_names()
        assert names == sorted(FedConformalRegressor().get_params(deep=False))
        names.append("changed")  # callers get a fresh list
        assert "changed" not in FedConformalRegressor._get_param_names()
        assert "estimator_lower" in FedCQRRegressor._get_param_names()

    def test_single_client_ids_are_not_allocated(self, data):
        X, y, _, _ = data
        ids = FedConformalRegressor()._check_client_ids(None, 5)
        assert ids.tolist() == [0] * 5 and not ids.flags.writeable
