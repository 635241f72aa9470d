"""The fit / predict skeleton shared by the conformal wrappers (skfedcp.base)."""

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.compose import make_column_transformer
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import (
    LinearRegression,
    LogisticRegression,
    QuantileRegressor,
    Ridge,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from skfedcp import FedConformalRegressor, FedCQRRegressor, PrivateConformalClassifier
from skfedcp.calibrators import CentralCalibrator

N = 240
IDS = np.repeat(np.arange(4), N // 4)


def _frame(kind):
    """A DataFrame with a ``kind`` text column, a category column and a number."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "cat": rng.choice(["a", "b", "c"], N),
            "cat2": pd.Categorical(rng.choice(["x", "y"], N)),
            "num": rng.normal(size=N),
        }
    )
    df["cat"] = df["cat"].astype(kind)
    y = df["num"] * 2.0 + (df["cat"] == "a") + rng.normal(scale=0.3, size=N)
    return df, y.to_numpy()


def _encoder():
    return make_column_transformer(
        (OneHotEncoder(), ["cat", "cat2"]), remainder="passthrough"
    )


KINDS = ["object", "category", "string"]


class TestMixedDataFrames:
    """Issue 22: text and category columns reach the model as passed."""

    @pytest.mark.parametrize("kind", KINDS)
    def test_frozen_regressor(self, kind):
        df, y = _frame(kind)
        model = make_pipeline(_encoder(), Ridge()).fit(df, y)
        reg = FedConformalRegressor(FrozenEstimator(model), calibrator="central")
        reg.fit(df, y, client_ids=IDS)
        intervals = reg.predict_interval(df)
        assert intervals.shape == (N, 2)
        np.testing.assert_array_equal(reg.predict(df), model.predict(df))
        np.testing.assert_allclose(
            intervals.mean(axis=1), model.predict(df), rtol=1e-12, atol=1e-12
        )
        assert list(reg.feature_names_in_) == ["cat", "cat2", "num"]

    @pytest.mark.parametrize("kind", KINDS)
    def test_unfrozen_regressor(self, kind):
        df, y = _frame(kind)
        reg = FedConformalRegressor(make_pipeline(_encoder(), Ridge()), random_state=0)
        reg.fit(df, y, client_ids=IDS)
        assert reg.predict_interval(df).shape == (N, 2)

    @pytest.mark.parametrize("kind", KINDS)
    def test_cqr_regressor(self, kind):
        df, y = _frame(kind)

        def quantile_model(level):
            return make_pipeline(
                _encoder(), QuantileRegressor(quantile=level, alpha=0.0)
            )

        reg = FedCQRRegressor(
            estimator_lower=quantile_model(0.05),
            estimator_upper=quantile_model(0.95),
            random_state=0,
        ).fit(df, y, client_ids=IDS)
        intervals = reg.predict_interval(df)
        assert intervals.shape == (N, 2)
        assert (intervals[:, 0] <= intervals[:, 1]).all()

    @pytest.mark.parametrize("kind", KINDS)
    def test_classifier(self, kind):
        df, y = _frame(kind)
        labels = (y > 0).astype(int)
        model = make_pipeline(_encoder(), LogisticRegression()).fit(df, labels)
        clf = PrivateConformalClassifier(FrozenEstimator(model), calibrator="central")
        clf.fit(df, labels, client_ids=IDS)
        assert clf.predict_set(df).shape == (N, 2)
        np.testing.assert_array_equal(clf.predict_proba(df), model.predict_proba(df))


class RaisingCalibrator(CentralCalibrator):
    """Split conformal that fails (or is interrupted) in the middle of fit."""

    error = RuntimeError

    def fit(self, *args, **kwargs):
        raise self.error("calibrator failed")


class Interrupted(RaisingCalibrator):
    error = KeyboardInterrupt


def _regression_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(N, 3))
    y = X @ [1.0, -1.0, 0.5] + rng.normal(size=N)
    return X, y


def _wrappers():
    X, y = _regression_data()
    labels = (y > 0).astype(int)
    return [
        (FedConformalRegressor(LinearRegression(), random_state=0), X, y),
        (
            FedCQRRegressor(
                estimator_lower=QuantileRegressor(quantile=0.05, alpha=0.0),
                estimator_upper=QuantileRegressor(quantile=0.95, alpha=0.0),
                random_state=0,
            ),
            X,
            y,
        ),
        (
            PrivateConformalClassifier(
                LogisticRegression(), calibrator="central", random_state=0
            ),
            X,
            labels,
        ),
    ]


def _fitted_state(est):
    return {k: v for k, v in vars(est).items() if k.endswith("_")}


class TestAtomicFit:
    """Fitted attributes change only when a fit completes (issue 22)."""

    @pytest.mark.parametrize("error", [RaisingCalibrator, Interrupted])
    @pytest.mark.parametrize("case", range(3))
    def test_failed_refit_keeps_the_previous_fit(self, case, error):
        est, X, y = _wrappers()[case]
        est.fit(X, y, client_ids=IDS)
        before = _fitted_state(est)
        intervals = (
            est.predict_set(X)
            if hasattr(est, "predict_set")
            else est.predict_interval(X)
        )
        est.set_params(calibrator=error())
        with pytest.raises(error.error, match="calibrator failed"):
            est.fit(X[::2], y[::2], client_ids=IDS[::2])
        after = _fitted_state(est)
        assert after.keys() == before.keys()
        for key, value in before.items():
            assert after[key] is value, key  # the same objects, untouched
        again = (
            est.predict_set(X)
            if hasattr(est, "predict_set")
            else est.predict_interval(X)
        )
        np.testing.assert_array_equal(again, intervals)

    def test_failed_first_fit_leaves_the_wrapper_unfitted(self):
        X, y = _regression_data()
        reg = FedConformalRegressor(LinearRegression(), calibrator=RaisingCalibrator())
        with pytest.raises(RuntimeError, match="calibrator failed"):
            reg.fit(X, y, client_ids=IDS)
        assert _fitted_state(reg) == {}
        assert not hasattr(reg, "_fit_X_scanned")
        reg.set_params(calibrator="central").fit(X, y, client_ids=IDS)
        assert not hasattr(reg, "_fit_X_scanned")  # fit scratch: only fit reads it
        assert not hasattr(reg, "_cal_groups")  # fit scratch, not kept (nor pickled)

    @pytest.mark.parametrize("case", range(3))
    def test_a_fit_keeps_only_parameters_and_fitted_attributes(self, case):
        # Nothing private outlives fit on the wrapper, nor goes into its pickle.
        est, X, y = _wrappers()[case]
        est.fit(X, y, client_ids=IDS)
        params = set(est.get_params(deep=False))
        extra = {k for k in vars(est) if k not in params and not k.endswith("_")}
        assert extra == set()
        copy = pickle.loads(pickle.dumps(est))
        assert vars(copy).keys() == vars(est).keys()

    def test_refit_starts_from_scratch(self):
        X, y = _regression_data()
        pair = FedCQRRegressor(
            estimator_lower=QuantileRegressor(quantile=0.05, alpha=0.0),
            estimator_upper=QuantileRegressor(quantile=0.95, alpha=0.0),
            random_state=0,
        ).fit(pd.DataFrame(X, columns=["a", "b", "c"]), y, client_ids=IDS)
        frozen = FrozenEstimator(QuantileRegressor(quantile=0.5, alpha=0.0).fit(X, y))
        reg = FedConformalRegressor(frozen, calibrator="central").fit(X, y)
        # The pair form's models and the frame's names do not survive a refit.
        pair.set_params(
            estimator_lower=None,
            estimator_upper=None,
            estimator=FrozenEstimator(_TwoQuantiles(reg.estimator_)),
        )
        pair.fit(X, y, client_ids=IDS)
        assert not hasattr(pair, "estimator_lower_")
        assert not hasattr(pair, "feature_names_in_")
        np.testing.assert_array_equal(
            pair.predict_quantiles(X[:3]),
            np.column_stack([frozen.predict(X[:3])] * 2),
        )


class _TwoQuantiles(RegressorMixin, BaseEstimator):
    """A fitted model predicting the same value for every quantile."""

    def __init__(self, model=None):
        self.model = model

    def fit(self, X, y):
        return self

    def predict(self, X, quantiles=None):
        pred = self.model.predict(X)
        return pred if quantiles is None else np.column_stack([pred] * len(quantiles))

    def __sklearn_is_fitted__(self):
        return True


class RecordingRegressor(RegressorMixin, BaseEstimator):
    """Records what its fit received."""

    def fit(self, X, y, sample_weight=None, extra=None):
        self.X_fit_ = np.asarray(X)
        self.sample_weight_ = sample_weight
        self.extra_ = extra
        self.mean_ = float(np.mean(y))
        return self

    def predict(self, X):
        return np.full(len(X), self.mean_)


class TestFitParams:
    def test_sample_weight_is_split_with_the_rows(self):
        X, y = _regression_data()
        weights = X[:, 0].copy()  # one distinct value per row: traceable
        extra = np.arange(N)  # not per-row by name: passed unchanged
        reg = FedConformalRegressor(RecordingRegressor(), random_state=0)
        reg.fit(X, y, client_ids=IDS, sample_weight=weights, extra=extra)
        model = reg.estimator_
        assert model.X_fit_.shape[0] == N // 2
        np.testing.assert_array_equal(model.sample_weight_, model.X_fit_[:, 0])
        assert model.extra_ is extra

    def test_pipeline_step_sample_weight_is_split(self):
        X, y = _regression_data()
        pipe = make_pipeline(RecordingRegressor())
        reg = FedConformalRegressor(pipe, random_state=0)
        reg.fit(X, y, client_ids=IDS, recordingregressor__sample_weight=X[:, 0])
        model = reg.estimator_[-1]
        np.testing.assert_array_equal(model.sample_weight_, model.X_fit_[:, 0])

    @pytest.mark.parametrize("case", range(3))
    def test_sample_weight_sized_for_the_split_is_refused(self, case):
        est, X, y = _wrappers()[case]
        with pytest.raises(ValueError, match=r"sample_weight has 120 entries.*240"):
            est.fit(X, y, client_ids=IDS, sample_weight=np.ones(N // 2))
        assert _fitted_state(est) == {}

    def test_classifier_and_cqr_pass_fit_params(self):
        X, y = _regression_data()
        weights = np.ones(N)
        for est, X_, y_ in _wrappers()[1:]:
            est.fit(X_, y_, client_ids=IDS, sample_weight=weights)
            assert est.threshold_ is not None

    def test_prefit_model_refuses_fit_params(self):
        X, y = _regression_data()
        frozen = FrozenEstimator(LinearRegression().fit(X, y))
        with pytest.raises(ValueError, match="prefit"):
            FedConformalRegressor(frozen).fit(
                X, y, client_ids=IDS, sample_weight=np.ones(N)
            )
