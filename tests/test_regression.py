"""FedConformalRegressor: frozen / unfrozen paths, pandas, pipelines, errors."""

import numpy as np
import pandas as pd
import pytest
from sklearn import config_context
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from skfedcp import FedConformalRegressor
from skfedcp.calibrators import CentralCalibrator
from skfedcp.exceptions import InfiniteThresholdWarning, PrefitEstimatorWarning
from skfedcp.metrics import coverage_score, get_interval_scorer
from skfedcp.scores import NormalizedResidualScore


@pytest.fixture(scope="module")
def frozen(linear_data):
    X_train, y_train, *_ = linear_data
    return FrozenEstimator(LinearRegression().fit(X_train, y_train))


class TestFrozenPath:
    def test_all_rows_calibrate_and_model_untouched(self, linear_data, frozen):
        _, _, X, y, ids = linear_data
        coef = frozen.estimator.coef_.copy()
        reg = FedConformalRegressor(frozen, calibrator="central").fit(
            X, y, client_ids=ids
        )
        assert reg.estimator_ is frozen
        np.testing.assert_array_equal(frozen.estimator.coef_, coef)
        residuals = np.abs(y - frozen.predict(X))
        expected = CentralCalibrator().fit(residuals, alpha=0.1).threshold_
        assert reg.threshold_ == expected
        assert reg.messages_["n"].sum() == len(y)

    def test_interval_is_prediction_plus_minus_threshold(self, linear_data, frozen):
        _, _, X, y, ids = linear_data
        reg = FedConformalRegressor(frozen).fit(X, y, client_ids=ids)
        pred = frozen.predict(X[:5])
        intervals = reg.predict_interval(X[:5])
        np.testing.assert_allclose(intervals[:, 0], pred - reg.threshold_)
        np.testing.assert_allclose(intervals[:, 1], pred + reg.threshold_)
        np.testing.assert_array_equal(reg.predict(X[:5]), pred)
        assert reg.n_clients_ == 10
        assert reg.clients_.tolist() == list(range(10))

    def test_one_client_qq_equals_central(self, linear_data, frozen):
        _, _, X, y, _ = linear_data
        qq = FedConformalRegressor(frozen, calibrator="qq").fit(X, y)
        central = FedConformalRegressor(frozen, calibrator="central").fit(X, y)
        assert qq.threshold_ == central.threshold_

    def test_clone_keeps_frozen_model(self, frozen):
        reg = FedConformalRegressor(frozen)
        assert clone(reg).estimator is frozen

    def test_plain_fitted_model_warns_and_is_used(self, linear_data):
        X_train, y_train, X, y, ids = linear_data
        model = LinearRegression().fit(X_train, y_train)
        with pytest.warns(PrefitEstimatorWarning, match="FrozenEstimator"):
            reg = FedConformalRegressor(model).fit(X, y, client_ids=ids)
        assert reg.estimator_ is model


class TestUnfrozenPath:
    def test_split_within_each_client(self, linear_data):
        _, _, X, y, ids = linear_data
        reg = FedConformalRegressor(Ridge(), calibration_size=0.25, random_state=0)
        reg.fit(X, y, client_ids=ids)
        # 60 rows per client, a quarter calibrates: 15 each.
        assert reg.messages_["n"].tolist() == [15] * 10
        assert reg.estimator_ is not reg.estimator

    def test_deterministic_given_seed(self, linear_data):
        _, _, X, y, ids = linear_data
        a = FedConformalRegressor(random_state=3).fit(X, y, client_ids=ids).threshold_
        b = FedConformalRegressor(random_state=3).fit(X, y, client_ids=ids).threshold_
        assert a == b

    def test_normalized_score(self, linear_data):
        _, _, X, y, ids = linear_data
        reg = FedConformalRegressor(
            conformity_score=NormalizedResidualScore(LinearRegression()), random_state=0
        ).fit(X, y, client_ids=ids)
        widths = np.diff(reg.predict_interval(X), axis=1).ravel()
        assert widths.std() > 0  # adaptive widths

    def test_small_client_is_visible_not_an_error(self, frozen):
        rng = np.random.default_rng(0)
        X = rng.normal(size=(23, 3))
        y = rng.normal(size=23)
        ids = np.repeat([0, 1], [20, 3])
        reg = FedConformalRegressor(frozen, calibrator="avg")
        with pytest.warns(InfiniteThresholdWarning):
            reg.fit(X, y, client_ids=ids)
        assert np.isinf(reg.messages_["quantile"][1])
        assert np.all(np.isinf(reg.predict_interval(X[:2])))


class TestPandasPipelineGrid:
    def test_pandas_feature_names(self, linear_data, frozen):
        _, _, X, y, ids = linear_data
        df = pd.DataFrame(X, columns=["a", "b", "c"])
        model = FrozenEstimator(LinearRegression().fit(df, y))
        reg = FedConformalRegressor(model).fit(
            df, pd.Series(y), client_ids=pd.Series(ids)
        )
        assert reg.feature_names_in_.tolist() == ["a", "b", "c"]
        assert reg.predict_interval(df.iloc[:3]).shape == (3, 2)

    def test_pipeline_routing_by_step_name(self, linear_data):
        _, _, X, y, ids = linear_data
        pipe = Pipeline(
            [
                ("scale", StandardScaler()),
                ("reg", FedConformalRegressor(random_state=0)),
            ]
        )
        pipe.fit(X, y, reg__client_ids=ids)
        assert pipe[-1].n_clients_ == 10

    def test_metadata_routing(self, linear_data):
        _, _, X, y, ids = linear_data
        with config_context(enable_metadata_routing=True):
            reg = FedConformalRegressor(random_state=0).set_fit_request(client_ids=True)
            pipe = Pipeline([("scale", StandardScaler()), ("reg", reg)])
            pipe.fit(X, y, client_ids=ids)
            assert pipe[-1].n_clients_ == 10

    def test_grid_search_alpha_and_calibrator(self, linear_data, frozen):
        _, _, X, y, ids = linear_data
        scoring = {n: get_interval_scorer(n) for n in ["coverage", "neg_mean_width"]}
        grid = GridSearchCV(
            FedConformalRegressor(frozen),
            {"alpha": [0.1, 0.2], "calibrator": ["qq", "central", "avg"]},
            scoring=scoring,
            refit="neg_mean_width",
            cv=GroupKFold(n_splits=5),
        )
        grid.fit(X, y, client_ids=ids, groups=ids)
        assert grid.best_estimator_.estimator is frozen
        # 4 clients per training fold: the folds slice client_ids.
        assert grid.best_estimator_.n_clients_ == 10  # refit on all rows
        cov = grid.cv_results_["mean_test_coverage"]
        assert np.all((cov > 0.5) & (cov <= 1.0))

    def test_grid_search_slices_client_ids(self, linear_data, frozen):
        _, _, X, y, ids = linear_data
        grid = GridSearchCV(
            FedConformalRegressor(frozen),
            {"alpha": [0.1]},
            scoring=get_interval_scorer("neg_interval_score"),
            cv=GroupKFold(n_splits=5),
            refit=False,
        )
        grid.fit(X, y, client_ids=ids, groups=ids)
        assert np.isfinite(grid.cv_results_["mean_test_score"]).all()


class TestBadInput:
    @pytest.mark.parametrize("alpha", [0.0, 1.0, -1, 2])
    def test_alpha(self, linear_data, alpha):
        _, _, X, y, ids = linear_data
        with pytest.raises(ValueError, match="alpha"):
            FedConformalRegressor(alpha=alpha).fit(X, y, client_ids=ids)

    def test_client_ids_shape_and_nan(self, linear_data):
        _, _, X, y, ids = linear_data
        reg = FedConformalRegressor()
        with pytest.raises(ValueError, match="client_ids"):
            reg.fit(X, y, client_ids=ids[:-1])
        with pytest.raises(ValueError, match="client_ids"):
            reg.fit(X, y, client_ids=np.where(ids == 0, np.nan, ids))
        with pytest.raises(ValueError, match="client_ids"):
            reg.fit(X, y, client_ids=np.column_stack([ids, ids]))

    def test_client_without_calibration_rows(self, linear_data):
        _, _, X, y, ids = linear_data
        ids = ids.copy()
        ids[0] = 99  # a client with one row
        with pytest.raises(ValueError, match="client 99 has 1 sample"):
            FedConformalRegressor().fit(X, y, client_ids=ids)

    def test_nan_inf(self, linear_data):
        _, _, X, y, ids = linear_data
        Xn = X.copy()
        Xn[0, 0] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            FedConformalRegressor().fit(Xn, y, client_ids=ids)
        yi = y.copy()
        yi[0] = np.inf
        with pytest.raises(ValueError, match="infinity"):
            FedConformalRegressor().fit(X, yi, client_ids=ids)

    def test_length_mismatch(self, linear_data):
        _, _, X, y, _ = linear_data
        with pytest.raises(ValueError, match="inconsistent numbers of samples"):
            FedConformalRegressor().fit(X, y[:-1])

    def test_estimator_without_predict(self, linear_data):
        _, _, X, y, _ = linear_data
        with pytest.raises((TypeError, ValueError), match="estimator"):
            FedConformalRegressor(StandardScaler()).fit(X, y)

    def test_predict_before_fit(self, linear_data):
        with pytest.raises(NotFittedError):
            FedConformalRegressor().predict_interval(linear_data[2])

    def test_wrong_number_of_features(self, linear_data, frozen):
        _, _, X, y, ids = linear_data
        reg = FedConformalRegressor(frozen).fit(X, y, client_ids=ids)
        with pytest.raises(ValueError, match="features"):
            reg.predict_interval(X[:, :2])

    def test_bad_calibrator(self, linear_data):
        _, _, X, y, _ = linear_data
        with pytest.raises(ValueError, match="calibrator"):
            FedConformalRegressor(calibrator="nope").fit(X, y)

    def test_coverage_sanity(self, linear_data, frozen):
        _, _, X, y, ids = linear_data
        reg = FedConformalRegressor(frozen).fit(X[::2], y[::2], client_ids=ids[::2])
        assert coverage_score(y[1::2], reg.predict_interval(X[1::2])) > 0.75
