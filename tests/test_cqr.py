"""FedCQRRegressor and the CQR scores: model forms, variants, oracles, errors."""

import pickle

import numpy as np
import pandas as pd
import pytest
from quantile_forest import RandomForestQuantileRegressor
from sklearn import config_context
from sklearn.base import clone
from sklearn.dummy import DummyRegressor
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, QuantileRegressor
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import check_random_state

from skfedcp.calibrators import (
    AveragingCalibrator,
    BaseCalibrator,
    CentralCalibrator,
    QuantileOfQuantilesCalibrator,
    stack_messages,
)
from skfedcp.datasets import make_romano_regression
from skfedcp.exceptions import (
    CrossingQuantilesWarning,
    InfiniteThresholdWarning,
    PrefitEstimatorWarning,
)
from skfedcp.metrics import coverage_score, get_interval_scorer
from skfedcp.regression import FedCQRRegressor
from skfedcp.scores import (
    AsymmetricCQRScore,
    CQRScore,
    NormalizedCQRScore,
    resolve_cqr_score,
)
from skfedcp.utils import conformal_rank

ALPHA = 0.1


@pytest.fixture(scope="module")
def romano():
    """Romano et al. data: 600 training rows, 20 clients x 40 rows, 2000 test rows."""
    X, y = make_romano_regression(3400, random_state=0)
    ids = np.repeat(np.arange(20), 40)
    return X[:600], y[:600], X[600:1400], y[600:1400], ids, X[1400:], y[1400:]


def _forest(**kw):
    return RandomForestQuantileRegressor(
        **{"n_estimators": 30, "min_samples_leaf": 10, "random_state": 0, **kw}
    )


@pytest.fixture(scope="module")
def frozen_forest(romano):
    X_train, y_train, *_ = romano
    return FrozenEstimator(_forest().fit(X_train, y_train))


@pytest.fixture(scope="module")
def frozen_pair(romano):
    X_train, y_train, *_ = romano
    lo, hi = (
        GradientBoostingRegressor(
            loss="quantile", alpha=a, n_estimators=30, max_depth=2, random_state=0
        ).fit(X_train, y_train)
        for a in (ALPHA / 2, 1 - ALPHA / 2)
    )
    return FrozenEstimator(lo), FrozenEstimator(hi)


def _romano_cqr(bounds, y, alpha):
    """Hand-written split CQR of Romano et al. (2019) on one calibration set."""
    scores = np.sort(np.maximum(bounds[:, 0] - y, y - bounds[:, 1]))
    k = int(np.ceil((len(y) + 1) * (1 - alpha) - 1e-9))
    return scores[k - 1]


# -- scores -------------------------------------------------------------------


class TestScores:
    @pytest.mark.parametrize("score", [CQRScore(), NormalizedCQRScore(min_width=0.1)])
    @pytest.mark.parametrize("q", [-0.3, 0.0, 0.7])
    def test_interval_is_the_score_sublevel_set(self, score, q):
        rng = np.random.default_rng(0)
        bounds = np.sort(rng.normal(size=(500, 2)), axis=1)
        bounds[:50] = bounds[:50, ::-1]  # some crossing rows
        y = rng.normal(scale=2, size=500)
        inside = score.conformity_score(y, bounds) <= q
        iv = score.interval(bounds, q)
        covered = (iv[:, 0] <= y) & (y <= iv[:, 1])
        # Issue 11: intervals never cross. Where the set {score <= q} is empty
        # (crossed bounds), the span of the bounds is returned: a superset.
        assert np.all(iv[:, 0] <= iv[:, 1])
        assert np.all(covered[inside])
        width = score._width(*bounds.T) if hasattr(score, "_width") else 1.0
        empty = bounds[:, 0] - q * width > bounds[:, 1] + q * width
        np.testing.assert_array_equal(inside[~empty], covered[~empty])
        assert not inside[empty].any()

    def test_asymmetric_sides(self):
        rng = np.random.default_rng(1)
        bounds = np.sort(rng.normal(size=(300, 2)), axis=1)
        y = rng.normal(scale=2, size=300)
        s = AsymmetricCQRScore().conformity_score(y, bounds)
        iv = AsymmetricCQRScore().interval(bounds, [0.2, -0.1])
        np.testing.assert_array_equal(s[:, 0] <= 0.2, iv[:, 0] <= y)
        np.testing.assert_array_equal(s[:, 1] <= -0.1, y <= iv[:, 1])
        # The symmetric score is the larger of the two sides.
        np.testing.assert_array_equal(
            CQRScore().conformity_score(y, bounds), s.max(axis=1)
        )

    def test_normalized_floor_and_scale(self):
        bounds = np.array([[0.0, 2.0], [1.0, 1.0], [3.0, 1.0]])
        score = NormalizedCQRScore(min_width=0.5)
        np.testing.assert_allclose(
            score.conformity_score([3.0, 2.0, 2.0], bounds), [0.5, 2.0, 2.0]
        )
        np.testing.assert_allclose(
            score.interval(bounds, 1.0), [[-2.0, 4.0], [0.5, 1.5], [1.5, 2.5]]
        )

    def test_infinite_threshold(self):
        bounds = np.array([[0.0, 1.0], [2.0, 1.0]])
        for score in (CQRScore(), NormalizedCQRScore()):
            iv = score.interval(bounds, np.inf)
            assert np.all(iv[:, 0] == -np.inf) and np.all(iv[:, 1] == np.inf)
        iv = AsymmetricCQRScore().interval(bounds, [np.inf, 0.0])
        assert np.all(iv[:, 0] == -np.inf)
        np.testing.assert_array_equal(iv[:, 1], [1.0, 1.0])

    def test_bad_shapes(self):
        with pytest.raises(ValueError, match="y_pred"):
            CQRScore().conformity_score([1.0], [1.0])
        with pytest.raises(ValueError, match="threshold"):
            AsymmetricCQRScore().interval([[0.0, 1.0]], 0.5)

    def test_resolve(self):
        assert isinstance(resolve_cqr_score("asymmetric"), AsymmetricCQRScore)
        score = NormalizedCQRScore(min_width=2.0)
        resolved = resolve_cqr_score(score)
        assert resolved is not score and resolved.min_width == 2.0
        with pytest.raises(ValueError, match="conformity_score"):
            resolve_cqr_score("nope")
        with pytest.raises(TypeError, match="conformity_score"):
            resolve_cqr_score(3)


# -- oracles ------------------------------------------------------------------


class TestOracles:
    def test_one_client_central_is_romano_cqr(self, romano, frozen_forest):
        _, _, X, y, _, X_test, _ = romano
        reg = FedCQRRegressor(frozen_forest, calibrator="central").fit(X, y)
        bounds = frozen_forest.predict(X, quantiles=[ALPHA / 2, 1 - ALPHA / 2])
        q = _romano_cqr(bounds, y, ALPHA)
        assert reg.threshold_ == q
        test_bounds = frozen_forest.predict(X_test, quantiles=[0.05, 0.95])
        np.testing.assert_array_equal(
            reg.predict_interval(X_test),
            np.column_stack([test_bounds[:, 0] - q, test_bounds[:, 1] + q]),
        )

    @pytest.mark.parametrize("score", ["symmetric", "asymmetric", "normalized"])
    def test_one_client_qq_equals_central(self, romano, frozen_forest, score):
        _, _, X, y, *_ = romano
        qq = FedCQRRegressor(frozen_forest, conformity_score=score).fit(X, y)
        central = FedCQRRegressor(
            frozen_forest, conformity_score=score, calibrator="central"
        ).fit(X, y)
        np.testing.assert_array_equal(qq.threshold_, central.threshold_)

    def test_asymmetric_is_two_calibrations_at_half_alpha(self, romano, frozen_pair):
        _, _, X, y, ids, *_ = romano
        lo, hi = frozen_pair
        reg = FedCQRRegressor(
            estimator_lower=lo, estimator_upper=hi, conformity_score="asymmetric"
        ).fit(X, y, client_ids=ids)
        for j, side in enumerate([lo.predict(X) - y, y - hi.predict(X)]):
            cal = QuantileOfQuantilesCalibrator().fit(side, ids, alpha=ALPHA / 2)
            assert reg.threshold_[j] == cal.threshold_
            info = reg.calibrator_[j].calibration_info_
            assert info["k"] == cal.calibration_info_["k"]
            assert info["coverage"] >= 1 - ALPHA / 2
        assert reg.threshold_.shape == (2,)
        assert set(reg.messages_) == {
            "client",
            "lower_n",
            "lower_quantile",
            "upper_n",
            "upper_quantile",
        }
        assert reg.calibrator_[0] is not reg.calibrator_[1]

    def test_qq_matches_calibrator_on_cqr_scores(self, romano, frozen_forest):
        _, _, X, y, ids, *_ = romano
        reg = FedCQRRegressor(frozen_forest).fit(X, y, client_ids=ids)
        bounds = frozen_forest.predict(X, quantiles=[0.05, 0.95])
        scores = CQRScore().conformity_score(y, bounds)
        cal = QuantileOfQuantilesCalibrator().fit(scores, ids, alpha=ALPHA)
        assert reg.threshold_ == cal.threshold_
        assert reg.n_clients_ == 20 and reg.messages_["n"].tolist() == [40] * 20
        # The selected ranks hold the calibrator's exact guarantee.
        assert reg.calibrator_.calibration_info_["coverage"] >= 1 - ALPHA

    def test_central_rank(self, romano, frozen_forest):
        _, _, X, y, ids, *_ = romano
        reg = FedCQRRegressor(frozen_forest, calibrator="central")
        reg.fit(X, y, client_ids=ids)
        assert reg.calibrator_.calibration_info_["rank"] == conformal_rank(
            len(y), ALPHA
        )


# -- model forms --------------------------------------------------------------


class TestQuantileForest:
    def test_frozen_every_row_calibrates(self, romano, frozen_forest):
        _, _, X, y, ids, X_test, _ = romano
        reg = FedCQRRegressor(frozen_forest).fit(X, y, client_ids=ids)
        assert reg.estimator_ is frozen_forest
        assert reg.messages_["n"].sum() == len(y)
        np.testing.assert_array_equal(
            reg.predict_quantiles(X_test),
            frozen_forest.estimator.predict(X_test, quantiles=[0.05, 0.95]),
        )

    def test_frozen_levels_follow_alpha(self, romano, frozen_forest):
        _, _, X, y, ids, X_test, _ = romano
        reg = FedCQRRegressor(frozen_forest, alpha=0.2).fit(X, y, client_ids=ids)
        np.testing.assert_allclose(reg.quantile_levels_, [0.1, 0.9])
        np.testing.assert_array_equal(
            reg.predict_quantiles(X_test[:5]),
            frozen_forest.estimator.predict(X_test[:5], quantiles=[0.1, 0.9]),
        )

    def test_unfrozen_fits_on_a_split_within_clients(self, romano):
        _, _, X, y, ids, *_ = romano
        forest = _forest()
        reg = FedCQRRegressor(forest, calibration_size=0.25, random_state=0)
        reg.fit(X, y, client_ids=ids)
        assert reg.messages_["n"].tolist() == [10] * 20
        assert reg.estimator_ is not forest
        assert not hasattr(forest, "forest_")  # the user's object is untouched

    def test_default_model_is_a_seeded_forest(self, romano):
        _, _, X, y, ids, X_test, _ = romano
        a = FedCQRRegressor(random_state=3).fit(X, y, client_ids=ids)
        b = FedCQRRegressor(random_state=3).fit(X, y, client_ids=ids)
        assert isinstance(a.estimator_, RandomForestQuantileRegressor)
        assert a.threshold_ == b.threshold_
        np.testing.assert_array_equal(
            a.predict_interval(X_test), b.predict_interval(X_test)
        )

    def test_plain_fitted_model_warns(self, romano, frozen_forest):
        _, _, X, y, ids, *_ = romano
        model = frozen_forest.estimator
        with pytest.warns(PrefitEstimatorWarning, match="FrozenEstimator"):
            reg = FedCQRRegressor(model).fit(X, y, client_ids=ids)
        assert reg.estimator_ is model

    def test_frozen_pipeline_forwards_quantiles(self, romano):
        X_train, y_train, X, y, ids, X_test, _ = romano
        pipe = make_pipeline(StandardScaler(), _forest()).fit(X_train, y_train)
        reg = FedCQRRegressor(FrozenEstimator(pipe)).fit(X, y, client_ids=ids)
        np.testing.assert_array_equal(
            reg.predict_quantiles(X_test[:5]),
            pipe.predict(X_test[:5], quantiles=[0.05, 0.95]),
        )

    def test_pickle_round_trip(self, romano, frozen_forest):
        _, _, X, y, ids, X_test, _ = romano
        reg = FedCQRRegressor(frozen_forest).fit(X, y, client_ids=ids)
        again = pickle.loads(pickle.dumps(reg))
        np.testing.assert_array_equal(
            again.predict_interval(X_test), reg.predict_interval(X_test)
        )

    def test_predict_is_the_midpoint(self, romano, frozen_forest):
        _, _, X, y, ids, X_test, _ = romano
        reg = FedCQRRegressor(frozen_forest).fit(X, y, client_ids=ids)
        np.testing.assert_allclose(
            reg.predict(X_test), reg.predict_quantiles(X_test).mean(axis=1)
        )


class TestPairForm:
    @pytest.mark.parametrize(
        "model, key",
        [
            (GradientBoostingRegressor(loss="quantile", n_estimators=20), "alpha"),
            (
                HistGradientBoostingRegressor(loss="quantile", max_iter=20),
                "quantile",
            ),
            (QuantileRegressor(alpha=0.0), "quantile"),
            (RandomForestQuantileRegressor(n_estimators=10), "default_quantiles"),
        ],
        ids=["gbr", "hgb", "linear", "forest"],
    )
    def test_levels_are_set_on_clones(self, romano, model, key):
        _, _, X, y, ids, X_test, _ = romano
        before = model.get_params()[key]
        reg = FedCQRRegressor(
            estimator_lower=model, estimator_upper=model, alpha=0.2, random_state=0
        ).fit(X, y, client_ids=ids)
        assert reg.estimator_lower_.get_params()[key] == pytest.approx(0.1)
        assert reg.estimator_upper_.get_params()[key] == pytest.approx(0.9)
        assert model.get_params()[key] == before
        np.testing.assert_allclose(reg.quantile_levels_, [0.1, 0.9])
        assert reg.predict_interval(X_test).shape == (len(X_test), 2)

    def test_quantile_levels_override_and_pipeline_step(self, romano):
        _, _, X, y, ids, *_ = romano
        model = make_pipeline(StandardScaler(), QuantileRegressor(alpha=0.0))
        reg = FedCQRRegressor(
            estimator_lower=model,
            estimator_upper=model,
            quantile_levels=(0.2, 0.7),
            random_state=0,
        ).fit(X, y, client_ids=ids)
        assert reg.estimator_lower_[-1].quantile == 0.2
        assert reg.estimator_upper_[-1].quantile == 0.7

    def test_set_params_reaches_each_model(self):
        reg = FedCQRRegressor(
            estimator_lower=GradientBoostingRegressor(loss="quantile"),
            estimator_upper=GradientBoostingRegressor(loss="quantile"),
        )
        reg.set_params(estimator_lower__max_depth=2, estimator_upper__max_depth=5)
        assert reg.estimator_lower.max_depth == 2
        assert reg.estimator_upper.max_depth == 5

    def test_frozen_pair_is_used_as_is(self, romano, frozen_pair):
        _, _, X, y, ids, X_test, _ = romano
        lo, hi = frozen_pair
        reg = FedCQRRegressor(
            estimator_lower=lo,
            estimator_upper=hi,
            alpha=0.3,
            quantile_levels=(0.2, 0.8),
        ).fit(X, y, client_ids=ids)
        assert reg.estimator_lower_ is lo and reg.estimator_upper_ is hi
        # The levels reported are those the frozen models were built with.
        np.testing.assert_allclose(reg.quantile_levels_, [0.05, 0.95])
        np.testing.assert_array_equal(
            reg.predict_quantiles(X_test),
            np.column_stack([lo.predict(X_test), hi.predict(X_test)]),
        )

    def test_frozen_pair_levels_read_or_nan(self, romano):
        X_train, y_train, X, y, ids, *_ = romano
        lo, hi = (
            FrozenEstimator(
                DummyRegressor(strategy="quantile", quantile=q).fit(X_train, y_train)
            )
            for q in (0.05, 0.95)
        )
        reg = FedCQRRegressor(estimator_lower=lo, estimator_upper=hi)
        np.testing.assert_allclose(
            reg.fit(X, y, client_ids=ids).quantile_levels_, [0.05, 0.95]
        )
        # Shifted mean models: any band calibrates, but its levels are unknown.
        lo, hi = (
            FrozenEstimator(LinearRegression().fit(X_train, y_train + shift))
            for shift in (-1.0, 1.0)
        )
        reg = FedCQRRegressor(estimator_lower=lo, estimator_upper=hi)
        reg.fit(X, y, client_ids=ids)
        assert np.isnan(reg.quantile_levels_).all()
        assert np.isfinite(reg.threshold_)


class TestVariants:
    def test_normalized_widths_scale_with_band(self, romano, frozen_forest):
        _, _, X, y, ids, X_test, _ = romano
        reg = FedCQRRegressor(frozen_forest, conformity_score="normalized")
        reg.fit(X, y, client_ids=ids)
        band = np.diff(reg.predict_quantiles(X_test), axis=1).ravel()
        width = np.diff(reg.predict_interval(X_test), axis=1).ravel()
        np.testing.assert_allclose(width, band * (1 + 2 * reg.threshold_))

    def test_normalized_instance_floor(self, romano, frozen_forest):
        _, _, X, y, ids, *_ = romano
        score = NormalizedCQRScore(min_width=5.0)
        reg = FedCQRRegressor(frozen_forest, conformity_score=score)
        reg.fit(X, y, client_ids=ids)
        assert reg.conformity_score_ is not score
        assert reg.conformity_score_.min_width == 5.0

    @pytest.mark.parametrize("score", ["symmetric", "asymmetric", "normalized"])
    @pytest.mark.parametrize("calibrator", ["central", "qq", "avg"])
    def test_every_variant_with_every_calibrator(
        self, romano, frozen_forest, score, calibrator
    ):
        _, _, X, y, ids, X_test, y_test = romano
        reg = FedCQRRegressor(
            frozen_forest, conformity_score=score, calibrator=calibrator
        ).fit(X, y, client_ids=ids)
        iv = reg.predict_interval(X_test)
        assert iv.shape == (len(X_test), 2) and np.isfinite(iv).all()
        # One calibration of 800 rows: coverage within a few SE of >= 0.9.
        assert coverage_score(y_test, iv) > 0.8

    def test_calibrator_instance_is_cloned_per_side(self, romano, frozen_forest):
        _, _, X, y, ids, *_ = romano
        cal = AveragingCalibrator(weights="size")
        reg = FedCQRRegressor(
            frozen_forest, conformity_score="asymmetric", calibrator=cal
        ).fit(X, y, client_ids=ids)
        assert not hasattr(cal, "threshold_")
        assert all(c.weights == "size" and c is not cal for c in reg.calibrator_)


class _NoisyMaxCalibrator(BaseCalibrator):
    """A randomized toy strategy: each client sends its max plus noise."""

    _randomized = True

    def client_step(self, scores, *, alpha, n_per_client=None, random_state=None):
        noise = check_random_state(random_state).uniform(0, 1e-3)
        return {"max": float(np.max(scores) + noise)}

    def server_step(self, messages, *, alpha, n_per_client=None, random_state=None):
        return float(np.max(stack_messages(messages)["max"]))


class TestAnyCalibrator:
    @pytest.mark.parametrize("score", ["symmetric", "asymmetric"])
    def test_new_randomized_strategy_needs_no_change(
        self, romano, frozen_forest, score
    ):
        _, _, X, y, ids, *_ = romano
        reg = FedCQRRegressor(
            frozen_forest,
            conformity_score=score,
            calibrator=_NoisyMaxCalibrator(),
            random_state=0,
        ).fit(X, y, client_ids=ids)
        again = clone(reg).fit(X, y, client_ids=ids)
        np.testing.assert_array_equal(reg.threshold_, again.threshold_)
        bounds = frozen_forest.predict(X, quantiles=[0.05, 0.95])
        top = np.max(CQRScore().conformity_score(y, bounds))
        assert np.max(reg.threshold_) >= top

    @pytest.mark.parametrize("score", ["symmetric", "asymmetric"])
    def test_private_calibrator_gets_epsilon_and_bounds(
        self, romano, frozen_forest, score
    ):
        _, _, X, y, _, X_test, y_test = romano
        ids = np.repeat(np.arange(4), 200)
        reg = FedCQRRegressor(
            frozen_forest,
            conformity_score=score,
            calibrator="dp-qq",
            epsilon=3.0,
            score_bounds=(-50.0, 50.0),
            random_state=0,
        ).fit(X, y, client_ids=ids)
        cals = reg.calibrator_ if score == "asymmetric" else (reg.calibrator_,)
        for cal in cals:
            assert cal.epsilon == 3.0
            assert tuple(cal.score_bounds) == (-50.0, 50.0)
        again = clone(reg).fit(X, y, client_ids=ids)
        np.testing.assert_array_equal(reg.threshold_, again.threshold_)
        assert np.all(np.isfinite(reg.threshold_))
        assert coverage_score(y_test, reg.predict_interval(X_test)) > 0.8


# -- sklearn tooling ----------------------------------------------------------


class TestPipelineGrid:
    def test_pandas_feature_names(self, romano):
        X_train, y_train, X, y, ids, X_test, _ = romano
        df = pd.DataFrame(X, columns=["x"])
        model = FrozenEstimator(
            _forest().fit(pd.DataFrame(X_train, columns=["x"]), y_train)
        )
        reg = FedCQRRegressor(model).fit(df, pd.Series(y), client_ids=pd.Series(ids))
        assert reg.feature_names_in_.tolist() == ["x"]
        assert reg.predict_interval(df.iloc[:3]).shape == (3, 2)

    @pytest.mark.parametrize("frozen", [True, False], ids=["frozen", "unfrozen"])
    def test_pipeline_routing_by_step_name(self, romano, frozen_forest, frozen):
        _, _, X, y, ids, X_test, _ = romano
        model = frozen_forest if frozen else _forest()
        pipe = Pipeline(
            [
                ("scale", StandardScaler()),
                ("cqr", FedCQRRegressor(model, random_state=0)),
            ]
        )
        pipe.fit(X, y, cqr__client_ids=ids)
        assert pipe[-1].n_clients_ == 20
        assert pipe.predict(X_test).shape == (len(X_test),)

    def test_metadata_routing(self, romano):
        _, _, X, y, ids, *_ = romano
        with config_context(enable_metadata_routing=True):
            reg = FedCQRRegressor(_forest(), random_state=0).set_fit_request(
                client_ids=True
            )
            pipe = Pipeline([("scale", StandardScaler()), ("cqr", reg)])
            pipe.fit(X, y, client_ids=ids)
            assert pipe[-1].n_clients_ == 20

    def test_grid_search_over_alpha_frozen(self, romano, frozen_forest):
        _, _, X, y, ids, *_ = romano
        scoring = {n: get_interval_scorer(n) for n in ["coverage", "neg_mean_width"]}
        grid = GridSearchCV(
            FedCQRRegressor(frozen_forest),
            {"alpha": [0.1, 0.2], "calibrator": ["qq", "central"]},
            scoring=scoring,
            refit="neg_mean_width",
            cv=GroupKFold(n_splits=4),
        )
        grid.fit(X, y, client_ids=ids, groups=ids)
        best = grid.best_estimator_
        assert best.estimator is frozen_forest
        assert best.n_clients_ == 20  # refit on every client
        np.testing.assert_allclose(
            best.quantile_levels_, [best.alpha / 2, 1 - best.alpha / 2]
        )
        cov = grid.cv_results_["mean_test_coverage"]
        assert np.all((cov > 0.6) & (cov <= 1.0))

    def test_grid_search_over_alpha_unfrozen(self, romano):
        _, _, X, y, ids, *_ = romano
        grid = GridSearchCV(
            FedCQRRegressor(_forest(n_estimators=10), random_state=0),
            {"alpha": [0.1, 0.3]},
            scoring=get_interval_scorer("neg_interval_score"),
            cv=GroupKFold(n_splits=2),
            refit=False,
        )
        grid.fit(X, y, client_ids=ids, groups=ids)
        assert np.isfinite(grid.cv_results_["mean_test_score"]).all()


# -- bad input ----------------------------------------------------------------


class TestBadInput:
    def test_crossing_quantiles_warn_and_stay_valid(self, romano):
        X_train, y_train, X, y, ids, X_test, y_test = romano
        # The "lower" model is a high quantile and the "upper" a low one.
        lo = FrozenEstimator(
            DummyRegressor(strategy="quantile", quantile=0.9).fit(X_train, y_train)
        )
        hi = FrozenEstimator(
            DummyRegressor(strategy="quantile", quantile=0.1).fit(X_train, y_train)
        )
        reg = FedCQRRegressor(estimator_lower=lo, estimator_upper=hi)
        with pytest.warns(CrossingQuantilesWarning, match="100.0%"):
            reg.fit(X, y, client_ids=ids)
        assert reg.crossing_fraction_ == 1.0
        assert coverage_score(y_test, reg.predict_interval(X_test)) > 0.8

    def test_no_warning_for_a_quantile_forest(self, romano, frozen_forest):
        _, _, X, y, ids, *_ = romano
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error", CrossingQuantilesWarning)
            reg = FedCQRRegressor(frozen_forest).fit(X, y, client_ids=ids)
        assert reg.crossing_fraction_ == 0.0

    @pytest.mark.parametrize(
        "levels",
        [(0.0, 0.9), (0.1, 1.0), (-0.1, 0.5), (0.9, 0.1), (0.5, 0.5), (0.1, 0.5, 0.9)],
    )
    def test_quantile_levels_values(self, romano, levels):
        _, _, X, y, ids, *_ = romano
        with pytest.raises(ValueError, match="quantile_levels"):
            FedCQRRegressor(_forest(), quantile_levels=levels).fit(X, y)

    def test_quantile_levels_type(self, romano):
        _, _, X, y, *_ = romano
        with pytest.raises(ValueError, match="quantile_levels"):
            FedCQRRegressor(_forest(), quantile_levels=["a", "b"]).fit(X, y)
        with pytest.raises(ValueError, match="quantile_levels"):
            FedCQRRegressor(_forest(), quantile_levels=0.1).fit(X, y)

    def test_single_model_without_quantiles(self, romano):
        _, _, X, y, *_ = romano
        with pytest.raises(TypeError, match="quantiles="):
            FedCQRRegressor(GradientBoostingRegressor()).fit(X, y)
        frozen = FrozenEstimator(LinearRegression().fit(X, y))
        with pytest.raises(TypeError, match="LinearRegression.predict"):
            FedCQRRegressor(frozen).fit(X, y)

    def test_single_model_with_wrong_output(self, romano):
        _, _, X, y, *_ = romano

        class PointModel(LinearRegression):
            def predict(self, X, **kwargs):
                return super().predict(X)

        with pytest.raises(ValueError, match=r"shape \(n_samples, 2\)"):
            FedCQRRegressor(PointModel()).fit(X, y)

    def test_pair_model_without_a_level(self, romano):
        _, _, X, y, *_ = romano
        with pytest.raises(ValueError, match="estimator_lower: cannot set"):
            FedCQRRegressor(
                estimator_lower=GradientBoostingRegressor(),  # squared error
                estimator_upper=GradientBoostingRegressor(loss="quantile"),
            ).fit(X, y)

    def test_model_forms_are_exclusive(self, romano):
        _, _, X, y, *_ = romano
        q = QuantileRegressor(alpha=0.0)
        with pytest.raises(ValueError, match="not both"):
            FedCQRRegressor(_forest(), estimator_lower=q, estimator_upper=q).fit(X, y)
        with pytest.raises(ValueError, match="estimator_upper is None"):
            FedCQRRegressor(estimator_lower=q).fit(X, y)
        with pytest.raises(ValueError, match="estimator_lower is None"):
            FedCQRRegressor(estimator_upper=q).fit(X, y)

    @pytest.mark.parametrize("alpha", [0.0, 1.0, -1, 2])
    def test_alpha(self, romano, alpha):
        _, _, X, y, ids, *_ = romano
        with pytest.raises(ValueError, match="alpha"):
            FedCQRRegressor(_forest(), alpha=alpha).fit(X, y, client_ids=ids)

    def test_bad_variant_and_calibrator(self, romano):
        _, _, X, y, *_ = romano
        with pytest.raises(ValueError, match="conformity_score"):
            FedCQRRegressor(_forest(), conformity_score="absolute").fit(X, y)
        with pytest.raises(ValueError, match="calibrator"):
            FedCQRRegressor(_forest(), calibrator="nope").fit(X, y)
        with pytest.raises(ValueError, match="calibrator"):
            FedCQRRegressor(_forest(), calibrator=CentralCalibrator).fit(X, y)

    def test_client_ids(self, romano):
        _, _, X, y, ids, *_ = romano
        reg = FedCQRRegressor(_forest())
        with pytest.raises(ValueError, match="client_ids"):
            reg.fit(X, y, client_ids=ids[:-1])
        with pytest.raises(ValueError, match="client_ids"):
            reg.fit(X, y, client_ids=np.where(ids == 0, np.nan, ids))
        ids = ids.copy()
        ids[0] = 99  # a client with one row
        with pytest.raises(ValueError, match="client 99 has 1 sample"):
            reg.fit(X, y, client_ids=ids)

    def test_nan_inf_length(self, romano, frozen_forest):
        _, _, X, y, ids, *_ = romano
        Xn = X.copy()
        Xn[0, 0] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            FedCQRRegressor(frozen_forest).fit(Xn, y, client_ids=ids)
        yi = y.copy()
        yi[0] = np.inf
        with pytest.raises(ValueError, match="infinity"):
            FedCQRRegressor(frozen_forest).fit(X, yi, client_ids=ids)
        with pytest.raises(ValueError, match="inconsistent numbers of samples"):
            FedCQRRegressor(frozen_forest).fit(X, y[:-1])
        reg = FedCQRRegressor(frozen_forest).fit(X, y, client_ids=ids)
        with pytest.raises(ValueError, match="NaN"):
            reg.predict_interval(Xn)

    def test_predict_before_fit_and_feature_count(self, romano, frozen_forest):
        _, _, X, y, ids, *_ = romano
        with pytest.raises(NotFittedError):
            FedCQRRegressor(frozen_forest).predict_interval(X)
        reg = FedCQRRegressor(frozen_forest).fit(X, y, client_ids=ids)
        with pytest.raises(ValueError, match="features"):
            reg.predict_interval(np.column_stack([X, X]))

    def test_small_clients_give_infinite_intervals(self, romano, frozen_forest):
        _, _, X, y, *_ = romano
        ids = np.repeat([0, 1], [40, 3])
        reg = FedCQRRegressor(frozen_forest, calibrator="avg")
        with pytest.warns(InfiniteThresholdWarning):
            reg.fit(X[:43], y[:43], client_ids=ids)
        assert np.all(np.isinf(reg.predict_interval(X[:2])))
