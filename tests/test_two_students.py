"""TwoStudentsRegressor, its filter and its conformity scores."""

import pickle
import warnings

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.neighbors import KNeighborsRegressor
from sklearn.neural_network import MLPRegressor

from skfedcp import FedConformalRegressor
from skfedcp.calibrators import CentralCalibrator, select_qq_ranks
from skfedcp.exceptions import DistillationWarning, TeacherFilterWarning
from skfedcp.metrics import coverage_score, get_interval_scorer
from skfedcp.scores import (
    REGRESSION_SCORES,
    TwoStudentsOffsetScore,
    TwoStudentsScore,
)
from skfedcp.two_students import (
    TwoStudentsRegressor,
    credible_band,
    ensemble_stats,
    truncation_filter,
)
from skfedcp.utils._sklearn_compat import InvalidParameterError

U_GRID = np.arange(-5, 9.0001, 0.02).reshape(-1, 1)  # the paper's 701 inputs


def cosine_clients(rng, kinds, n=50):
    """The spec's cosine task: y = cos(x) + N(0, 0.1) per client, with drift kinds.

    ``"iid"``: x ~ U(-5, 9); ``"range"``: x ~ U(-5, 2); ``"noise"``: extra
    0.5 N(0, 1) on y; ``"mixed"``: x ~ U(-5, 2), extra 0.1 N(0, 1) and +0.15.
    """
    X, y, ids = [], [], []
    for c, kind in enumerate(kinds):
        hi = 2.0 if kind in ("range", "mixed") else 9.0
        x = rng.uniform(-5, hi, n)
        yc = np.cos(x) + 0.1 * rng.normal(size=n)
        if kind == "noise":
            yc += 0.5 * rng.normal(size=n)
        if kind == "mixed":
            yc += 0.1 * rng.normal(size=n) + 0.15
        X.append(x)
        y.append(yc)
        ids.append(np.full(n, c))
    return np.concatenate(X)[:, None], np.concatenate(y), np.concatenate(ids)


def _fast(**params):
    """A quick 2S: kNN teachers and students."""
    return TwoStudentsRegressor(
        KNeighborsRegressor(7),
        mean_student=KNeighborsRegressor(5),
        **{"random_state": 0, **params},
    )


@pytest.fixture(scope="module")
def cosine():
    """30 i.i.d. cosine clients of 50 rows and a held-out set."""
    rng = np.random.default_rng(0)
    X, y, ids = cosine_clients(rng, ["iid"] * 30)
    X_test = rng.uniform(-5, 9, size=(3000, 1))
    return X, y, ids, X_test


@pytest.fixture(scope="module")
def gbr_teachers(cosine):
    """GBR teachers of the 30 i.i.d. clients plus corrupted variants of client 0."""
    X, y, ids, _ = cosine
    rng = np.random.default_rng(1)

    def fit(Xc, yc, seed):
        return GradientBoostingRegressor(max_depth=2, random_state=seed).fit(Xc, yc)

    models = {c: fit(X[ids == c], y[ids == c], c) for c in range(30)}
    X0, y0 = X[ids == 0], y[ids == 0]
    shifted = fit(X0, y0 + 1.0, 0)
    permuted = fit(X0, rng.permutation(y0), 0)
    return models, shifted, permuted


class TestEnsembleStatsAndBand:
    def test_stats_match_numpy(self):
        P = np.random.default_rng(0).normal(size=(40, 7))
        stats = ensemble_stats(P)
        np.testing.assert_allclose(stats.mean, P.mean(0))
        np.testing.assert_allclose(stats.std, P.std(0, ddof=1))
        lower, upper = np.quantile(P, [0.025, 0.975], axis=0)
        np.testing.assert_allclose(stats.lower, lower, rtol=1e-12)
        np.testing.assert_allclose(stats.upper, upper, rtol=1e-12)

    def test_one_model(self):
        stats = ensemble_stats([[1.0, 2.0, 3.0]])
        for part in (stats.lower, stats.upper, stats.mean):
            np.testing.assert_array_equal(part, [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(stats.std, 0.0)

    def test_mad_band_formula(self):
        P = np.random.default_rng(1).normal(size=(25, 5))
        lower, upper = credible_band(P, method="mad", credible_level=0.9)
        med = np.median(P, axis=0)
        mad = np.median(np.abs(P - med), axis=0)
        half = norm.ppf(0.95) * 1.4826 * mad
        np.testing.assert_allclose(lower, med - half, rtol=1e-4)
        np.testing.assert_allclose(upper, med + half, rtol=1e-4)

    def test_mad_band_resists_a_coherent_group(self):
        # 30 % of the models agree on a drifted value: the percentile band
        # stretches to include them, the MAD band (50 % breakdown) does not.
        P = np.concatenate([np.zeros((70, 1)), np.full((30, 1), 5.0)])
        P[:70] += np.random.default_rng(2).normal(scale=0.1, size=(70, 1))
        assert credible_band(P, method="percentile")[1][0] == pytest.approx(5.0)
        assert credible_band(P, method="mad")[1][0] < 1.0


class TestTruncationFilter:
    def test_in_band_fraction_inclusive_and_gamma_kept(self):
        reference = np.zeros((51, 10))  # MAD 0: the band is exactly [0, 0]
        candidates = np.zeros((3, 10))
        candidates[1] += 10.0  # never inside
        candidates[2, :2] = 1.0  # inside on 8 of 10 points: delta == gamma
        result = truncation_filter(candidates, reference=reference, gamma=0.8)
        np.testing.assert_array_equal(result.in_band_fraction, [1.0, 0.0, 0.8])
        np.testing.assert_array_equal(result.accepted, [True, False, True])

    def test_median_candidate_is_inside(self):
        P = np.random.default_rng(0).normal(size=(41, 30))
        P[0] = np.median(P[1:], axis=0)  # the per-point median of the others
        for method in ("mad", "percentile"):
            result = truncation_filter(P, method=method)
            assert result.in_band_fraction[0] == 1.0

    def test_leave_one_out_needs_another_model(self):
        with pytest.raises(ValueError, match="at least one other model"):
            truncation_filter([[0.0, 1.0]])

    @pytest.mark.parametrize("gamma", [0.0, 1.0, 1.5])
    def test_gamma_outside_unit_interval(self, gamma):
        with pytest.raises(ValueError, match="gamma"):
            truncation_filter(np.zeros((3, 2)), gamma=gamma)

    @pytest.mark.parametrize("filt", ["mad", "percentile"])
    @pytest.mark.parametrize("corruption", ["shifted", "permuted"])
    def test_single_corrupted_client_among_30(
        self, cosine, gbr_teachers, filt, corruption
    ):
        # Spec test 11: one corrupted client is dropped, >= 90 % i.i.d. kept.
        X, y, ids, _ = cosine
        models, shifted, permuted = gbr_teachers
        models = {**models, 0: shifted if corruption == "shifted" else permuted}
        model = TwoStudentsRegressor(
            mean_student=KNeighborsRegressor(5), filter=filt, random_state=0
        )
        model.fit(X, y, ids, X_unlabeled=U_GRID, client_models=models)
        delta0 = model.in_band_fraction_[0]
        assert delta0 <= (0.1 if corruption == "shifted" else 0.5)
        assert not model.accepted_[0]
        assert model.accepted_[1:].mean() >= 0.9


class TestTwoStudentsRegressor:
    def test_fitted_attributes(self, cosine):
        X, y, ids, X_test = cosine
        model = _fast().fit(X, y, ids, X_unlabeled=U_GRID)
        assert model.clients_.tolist() == list(range(30))
        assert model.n_teachers_ == len(model.teachers_) == model.accepted_.sum()
        assert set(model.accepted_clients_) | set(model.rejected_clients_) == set(
            range(30)
        )
        assert model.predict(X_test).shape == (3000,)
        assert np.all(model.predict_std(X_test) >= model.sigma_floor_)
        assert model.predict_teachers(X_test).shape == (model.n_teachers_, 3000)
        assert model.sigma_offset_ == pytest.approx(
            np.median(model.predict_std(U_GRID))
        )
        assert len(model.history_) == 1 and model.history_[0]["filtered"]
        stats = ensemble_stats(model.predict_teachers(U_GRID))
        assert model.ensemble_band_width_ == pytest.approx(
            np.mean(stats.upper - stats.lower)
        )
        rmse = np.sqrt(np.mean((model.predict(U_GRID) - stats.mean) ** 2))
        assert model.distill_rmse_ == pytest.approx(rmse)

    def test_interrupted_refit_keeps_the_previous_fit(self, cosine, monkeypatch):
        # fit is atomic: n_features_in_ and clients_ of an interrupted refit
        # must not sit beside the previous fit's students.
        X, y, ids, X_test = cosine
        model = _fast().fit(X, y, ids, X_unlabeled=U_GRID)
        before = {k: v for k, v in vars(model).items() if k.endswith("_")}
        z_level, pred = model._z_level, model.predict_std(X_test)

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        monkeypatch.setattr(TwoStudentsRegressor, "_distil", interrupted)
        model.set_params(credible_level=0.5)
        with pytest.raises(KeyboardInterrupt):
            model.fit(X[::2], y[::-1][::2], ids[::2] % 3, X_unlabeled=U_GRID)
        after = {k: v for k, v in vars(model).items() if k.endswith("_")}
        assert after.keys() == before.keys()
        for key, value in before.items():
            assert after[key] is value, key
        assert model._z_level == z_level
        np.testing.assert_array_equal(model.predict_std(X_test), pred)

    def test_mean_student_fidelity_on_held_out_inputs(self, cosine):
        # Spec test 9: RMSE(mu_hat, teacher mean) on 3000 held-out inputs is
        # at most 0.03 and at most 0.2 x the mean teacher std (prototype:
        # 0.006-0.014 and 0.04-0.09; a bound, not a tuned value).
        X, y, ids, X_test = cosine
        model = _fast().fit(X, y, ids, X_unlabeled=U_GRID)
        stats = ensemble_stats(model.predict_teachers(X_test))
        rmse = np.sqrt(np.mean((model.predict(X_test) - stats.mean) ** 2))
        assert rmse <= 0.03
        assert rmse <= 0.2 * stats.std.mean()

    @pytest.mark.parametrize("target, bound", [("log_std", 0.15), ("quantiles", 0.2)])
    def test_uncertainty_student_fidelity(self, cosine, target, bound):
        # Spec test 10: median relative error of sigma_hat against the teachers'
        # std on held-out inputs (prototype 0.01 and 0.04-0.12).
        X, y, ids, X_test = cosine
        model = _fast(uq_target=target).fit(X, y, ids, X_unlabeled=U_GRID)
        stats = ensemble_stats(model.predict_teachers(X_test))
        if target == "quantiles":  # the student learns the band, not the std
            s = (stats.upper - stats.lower) / (2 * norm.ppf(0.975))
        else:
            s = stats.std
        rel = np.abs(model.predict_std(X_test) - s) / s
        assert np.median(rel) <= bound

    def test_quantile_target_sorted_and_sigma(self, cosine):
        X, y, ids, X_test = cosine
        model = _fast(uq_target="quantiles").fit(X, y, ids, X_unlabeled=U_GRID)
        raw = model.uq_student_.predict(X_test)
        lo, hi = np.sort(raw, axis=1).T
        np.testing.assert_allclose(
            model.predict_std(X_test),
            np.maximum((hi - lo) / (2 * 1.959964), model.sigma_floor_),
            rtol=1e-6,
        )
        # 1 - alpha == credible_level: the student's band itself (the paper).
        band = model.predict_raw_interval(X_test, alpha=0.05)
        np.testing.assert_array_equal(band, np.column_stack([lo, hi]))
        assert np.all(band[:, 0] <= band[:, 1])

    def test_multi_output_wrapper_for_single_output_student(self, cosine):
        X, y, ids, X_test = cosine
        model = TwoStudentsRegressor(
            KNeighborsRegressor(7),
            mean_student=GradientBoostingRegressor(n_estimators=20),
            uq_target="quantiles",
            random_state=0,
        )
        with pytest.warns(DistillationWarning):  # 20 shallow trees underfit
            model.fit(X, y, ids, X_unlabeled=U_GRID[::5])
        assert type(model.uq_student_).__name__ == "MultiOutputRegressor"
        assert model.predict_std(X_test[:5]).shape == (5,)

    def test_identical_teachers_floor(self):
        X = np.linspace(0, 1, 40).reshape(-1, 1)
        y = 2.0 * X[:, 0]
        ids = np.repeat([0, 1, 2, 3], 10)
        teacher = LinearRegression().fit(X, y)
        model = TwoStudentsRegressor(mean_student=LinearRegression(), filter="none")
        model.fit(X, y, ids, client_models=dict.fromkeys(range(4), teacher))
        sigma = model.predict_std(X)
        assert np.all(np.isfinite(sigma))
        assert np.allclose(sigma, model.sigma_floor_)
        assert model.sigma_floor_ > 0

    def test_raw_interval_is_gaussian_reading(self, cosine):
        X, y, ids, X_test = cosine
        model = _fast().fit(X, y, ids, X_unlabeled=U_GRID)
        raw = model.predict_raw_interval(X_test, alpha=0.2)
        mu, sigma = model.predict(X_test), model.predict_std(X_test)
        np.testing.assert_allclose(raw[:, 0], mu - norm.ppf(0.9) * sigma)
        np.testing.assert_allclose(raw[:, 1], mu + norm.ppf(0.9) * sigma)

    def test_filter_none_keeps_everyone(self, cosine):
        X, y, ids, _ = cosine
        y = y.copy()
        y[ids == 3] += 5.0
        model = _fast(filter="none").fit(X, y, ids, X_unlabeled=U_GRID)
        assert model.accepted_.all()
        assert np.isnan(model.in_band_fraction_).all()

    def test_filter_drops_drifted_clients(self):
        # Reduced version of spec test 12 (the full one is in statistical/).
        rng = np.random.default_rng(3)
        kinds = ["iid"] * 30 + ["range"] * 2 + ["mixed"] * 6
        X, y, ids = cosine_clients(rng, kinds)
        model = TwoStudentsRegressor(
            GradientBoostingRegressor(max_depth=2, n_estimators=50),
            mean_student=KNeighborsRegressor(5),
            random_state=0,
        ).fit(X, y, ids, X_unlabeled=U_GRID)
        kinds = np.array(kinds)
        assert model.accepted_[kinds == "iid"].mean() >= 0.9
        assert model.accepted_[kinds != "iid"].mean() <= 0.2

    def test_min_teachers_fallback_warns(self):
        rng = np.random.default_rng(0)
        X = rng.uniform(-5, 9, size=(150, 1))
        ids = np.repeat([0, 1, 2], 50)
        y = np.cos(X[:, 0]) + 3.0 * ids  # three mutually inconsistent clients
        model = _fast(min_teachers=2, gamma=0.99)
        with pytest.warns(TeacherFilterWarning, match="largest in-band"):
            model.fit(X, y, ids, X_unlabeled=U_GRID)
        assert model.n_teachers_ == 2
        best = np.argsort(-model.in_band_fraction_, kind="stable")[:2]
        assert set(model.accepted_clients_) == set(best)

    def test_single_client_is_sharded(self, cosine):
        X, y, _, _ = cosine
        model = _fast(min_teachers=4).fit(X, y)  # no client_ids
        assert model.clients_.tolist() == [0, 1, 2, 3]
        assert model.n_teachers_ == 4 and model.accepted_.all()

    def test_trusted_models_are_members(self, cosine):
        X, y, ids, _ = cosine
        trusted = [Ridge().fit(X, y)]
        model = _fast(filter="none").fit(
            X, y, ids, X_unlabeled=U_GRID, trusted_models=trusted
        )
        assert model.teachers_[0] is trusted[0]
        assert model.n_teachers_ == 31

    def test_deterministic_and_clone(self, cosine):
        X, y, ids, X_test = cosine
        model = TwoStudentsRegressor(
            GradientBoostingRegressor(max_depth=2, n_estimators=20, subsample=0.7),
            mean_student=KNeighborsRegressor(5),
            random_state=7,
        )
        a = clone(model).fit(X, y, ids, X_unlabeled=U_GRID)
        b = clone(model).fit(X, y, ids, X_unlabeled=U_GRID)
        np.testing.assert_array_equal(a.predict(X_test), b.predict(X_test))
        np.testing.assert_array_equal(a.predict_std(X_test), b.predict_std(X_test))
        assert repr(clone(model)) == repr(model)
        restored = pickle.loads(pickle.dumps(a))
        np.testing.assert_array_equal(restored.predict(X_test), a.predict(X_test))

    @pytest.mark.slow  # starting joblib workers takes seconds
    def test_n_jobs_gives_the_same_model(self, cosine):
        X, y, ids, X_test = cosine
        a = _fast().fit(X, y, ids, X_unlabeled=U_GRID)
        b = _fast(n_jobs=2).fit(X, y, ids, X_unlabeled=U_GRID)
        np.testing.assert_array_equal(a.predict(X_test), b.predict(X_test))


class SpyRegressor(RegressorMixin, BaseEstimator):
    """Records what every fit call received (class-level log)."""

    log = []

    def __init__(self, role="teacher"):
        self.role = role

    def fit(self, X, y):
        SpyRegressor.log.append((self.role, np.asarray(X).copy(), np.asarray(y)))
        self.model_ = KNeighborsRegressor(3).fit(X, y)
        return self

    def predict(self, X):
        return self.model_.predict(X)


class SpyScore(TwoStudentsScore):
    """Records the rows the wrapper scores for calibration."""

    log = []

    def conformity_score(self, y, y_pred, X=None):
        SpyScore.log.append(np.asarray(X).copy())
        return super().conformity_score(y, y_pred, X)


class TestInformationFlow:
    def test_students_see_only_unlabeled_inputs_and_teacher_targets(self):
        # Spec test 5. Column 0 of X is a row id, so every fit can be traced.
        rng = np.random.default_rng(0)
        n, m = 40, 6
        X = np.column_stack([np.arange(n * m), rng.normal(size=n * m)])
        y = rng.normal(size=n * m)
        ids = np.repeat(np.arange(m), n)
        U = np.column_stack([-1.0 - np.arange(50), rng.normal(size=50)])
        SpyRegressor.log, SpyScore.log = [], []
        reg = FedConformalRegressor(
            TwoStudentsRegressor(
                SpyRegressor("teacher"),
                mean_student=SpyRegressor("student"),
                filter="none",
                random_state=0,
            ),
            conformity_score=SpyScore(),
            random_state=0,
        )
        reg.fit(X, y, client_ids=ids, X_unlabeled=U)
        teachers = [e for e in SpyRegressor.log if e[0] == "teacher"]
        students = [e for e in SpyRegressor.log if e[0] == "student"]
        assert len(teachers) == m and len(students) == 2
        # Students: only U, and targets computed from the teachers alone.
        for _, Xs, _ in students:
            np.testing.assert_array_equal(Xs, U)
        stats = ensemble_stats(reg.estimator_.predict_teachers(U))
        np.testing.assert_allclose(students[0][2], stats.mean)
        floor = reg.estimator_.sigma_floor_
        np.testing.assert_allclose(students[1][2], np.log(np.maximum(stats.std, floor)))
        trained = []
        for _, Xs, ys in teachers:  # one client's rows and labels each
            rows = Xs[:, 0].astype(int)
            assert len(set(ids[rows])) == 1
            np.testing.assert_array_equal(ys, y[rows])
            trained.extend(rows.tolist())
        (X_cal,) = SpyScore.log
        calibrated = X_cal[:, 0].astype(int).tolist()
        # Calibration rows never trained a teacher; together they are all rows.
        assert set(trained).isdisjoint(calibrated)
        assert sorted(trained + calibrated) == list(range(n * m))
        assert reg.messages_["n"].tolist() == [n // 2] * m


class TestConformalStep:
    def test_registry_aliases(self):
        assert REGRESSION_SCORES["two_students"] is TwoStudentsScore
        assert REGRESSION_SCORES["two_students_offset"] is TwoStudentsOffsetScore

    def test_one_line_and_interval_formula(self, cosine):
        X, y, ids, X_test = cosine
        reg = FedConformalRegressor(
            _fast(), conformity_score="two_students", random_state=0
        ).fit(X, y, client_ids=ids, X_unlabeled=U_GRID)
        model = reg.estimator_
        assert reg.conformity_score_.estimator_ is model
        mu, sigma = model.predict(X_test), model.predict_std(X_test)
        intervals = reg.predict_interval(X_test)
        np.testing.assert_allclose(intervals[:, 0], mu - reg.threshold_ * sigma)
        np.testing.assert_allclose(intervals[:, 1], mu + reg.threshold_ * sigma)
        np.testing.assert_array_equal(reg.predict(X_test), mu)

    def test_offset_score(self, cosine):
        X, y, ids, X_test = cosine
        reg = FedConformalRegressor(
            _fast(), conformity_score="two_students_offset", random_state=0
        ).fit(X, y, client_ids=ids, X_unlabeled=U_GRID)
        model = reg.estimator_
        assert reg.conformity_score_.offset_ == model.sigma_offset_
        half = np.diff(reg.predict_interval(X_test), axis=1).ravel() / 2
        expected = reg.threshold_ * (model.predict_std(X_test) + model.sigma_offset_)
        np.testing.assert_allclose(half, expected)
        fixed = TwoStudentsScore(offset=0.5).set_estimator(model)
        assert fixed.offset_ == 0.5

    def test_frozen_model_every_row_calibrates(self, cosine):
        X, y, ids, _ = cosine
        model = _fast().fit(X[ids < 15], y[ids < 15], ids[ids < 15], X_unlabeled=U_GRID)
        cal = ids >= 15
        reg = FedConformalRegressor(
            FrozenEstimator(model),
            conformity_score="two_students",
            calibrator="central",
        ).fit(X[cal], y[cal], client_ids=ids[cal])
        assert reg.messages_["n"].sum() == cal.sum()
        scores = np.abs(y[cal] - model.predict(X[cal])) / model.predict_std(X[cal])
        expected = CentralCalibrator().fit(scores, alpha=0.1).threshold_
        assert reg.threshold_ == expected

    def test_qq_ranks_for_spec_sizes(self, cosine):
        # Spec test 7: m=20 clients of n=30 give (l, k, M) = (28, 9, 0.9013).
        X, y, ids, _ = cosine
        model = _fast().fit(X[ids < 10], y[ids < 10], ids[ids < 10], X_unlabeled=U_GRID)
        rng = np.random.default_rng(0)
        X_cal, y_cal, ids_cal = cosine_clients(rng, ["iid"] * 20, n=30)
        reg = FedConformalRegressor(
            FrozenEstimator(model), conformity_score="two_students"
        )
        reg.fit(X_cal, y_cal, client_ids=ids_cal)
        info = reg.calibrator_.calibration_info_
        sel = select_qq_ranks([30] * 20, 0.1)
        assert info["local_ranks"].tolist() == [28] * 20 and info["k"] == 9
        assert (int(sel.local_ranks[0]), sel.k) == (28, 9)
        assert info["coverage"] == pytest.approx(0.9013, abs=1e-3)

    def test_fit_params_with_prefit_model_raise(self, cosine):
        X, y, ids, _ = cosine
        model = _fast().fit(X, y, ids, X_unlabeled=U_GRID)
        reg = FedConformalRegressor(
            FrozenEstimator(model), conformity_score="two_students"
        )
        with pytest.raises(ValueError, match="prefit"):
            reg.fit(X, y, client_ids=ids, X_unlabeled=U_GRID)

    def test_score_needs_predict_std(self, linear_data):
        X_train, y_train, X, y, ids = linear_data
        reg = FedConformalRegressor(LinearRegression(), conformity_score="two_students")
        with pytest.raises(TypeError, match="predict_std"):
            reg.fit(X, y, client_ids=ids)
        with pytest.raises(ValueError, match="set_estimator"):
            TwoStudentsScore().conformity_score([1.0], [0.0], X=[[0.0]])

    def test_grid_search_over_alpha(self, cosine):
        X, y, ids, _ = cosine
        grid = GridSearchCV(
            FedConformalRegressor(
                _fast(), conformity_score="two_students", random_state=0
            ),
            {"alpha": [0.1, 0.3]},
            scoring=get_interval_scorer("coverage"),
            cv=GroupKFold(n_splits=3),
        )
        grid.fit(X, y, client_ids=ids, groups=ids, X_unlabeled=U_GRID)
        cov = grid.cv_results_["mean_test_score"]
        assert cov[0] > cov[1]  # smaller alpha, larger coverage
        assert grid.best_estimator_.n_clients_ == 30

    def test_grid_search_over_alpha_frozen(self, cosine):
        X, y, ids, _ = cosine
        model = _fast().fit(X[ids < 10], y[ids < 10], ids[ids < 10], X_unlabeled=U_GRID)
        cal = ids >= 10
        grid = GridSearchCV(
            FedConformalRegressor(
                FrozenEstimator(model), conformity_score="two_students"
            ),
            {"alpha": [0.05, 0.1, 0.2]},
            scoring=get_interval_scorer("neg_interval_score"),
            cv=GroupKFold(n_splits=4),
        )
        grid.fit(X[cal], y[cal], client_ids=ids[cal], groups=ids[cal])
        assert grid.best_estimator_.estimator.estimator is model

    def test_conformal_coverage_sanity(self, cosine):
        X, y, ids, _ = cosine
        rng = np.random.default_rng(5)
        X_test, y_test, _ = cosine_clients(rng, ["iid"] * 20)
        reg = FedConformalRegressor(
            _fast(), conformity_score="two_students", random_state=0
        ).fit(X, y, client_ids=ids, X_unlabeled=U_GRID)
        assert coverage_score(y_test, reg.predict_interval(X_test)) > 0.85


@pytest.fixture(scope="module")
def rounds():
    rng = np.random.default_rng(0)
    X, y, ids = cosine_clients(rng, ["iid"] * 8 + ["mixed"] * 2, n=40)
    mlp = MLPRegressor(
        hidden_layer_sizes=(10,), solver="lbfgs", max_iter=200, random_state=0
    )
    model = TwoStudentsRegressor(
        mean_student=mlp,
        uq_target="quantiles",
        filter="percentile",
        filter_reference="previous",
        n_rounds=3,
        filter_start_round=2,
        random_state=0,
    )
    with warnings.catch_warnings():  # small MLPs: convergence is not the point
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", DistillationWarning)
        trusted = [
            clone(mlp).set_params(random_state=s).fit(X[:80], y[:80]) for s in range(3)
        ]
        model.fit(X, y, ids, X_unlabeled=U_GRID[::10], trusted_models=trusted)
    return model, X


class TestMultiRound:
    def test_history_and_cumulative_ensemble(self, rounds):
        model, X = rounds
        assert [h["round"] for h in model.history_] == [0, 1, 2, 3]
        assert model.history_[0]["n_teachers"] == 3
        assert model.history_[1]["n_teachers"] == 13  # round 1 is not filtered
        assert model.history_[1]["accepted"].all()
        assert not model.history_[1]["filtered"]
        assert model.history_[2]["filtered"] and model.history_[3]["filtered"]
        sizes = [h["n_teachers"] for h in model.history_]
        assert sizes == sorted(sizes)
        assert model.n_teachers_ == sizes[-1]
        staged = list(model.staged_predict(X[:5]))
        assert len(staged) == 4
        np.testing.assert_array_equal(staged[-1], model.predict(X[:5]))
        raw = list(model.staged_predict_raw_interval(X[:5], alpha=0.05))
        np.testing.assert_array_equal(
            raw[-1], model.predict_raw_interval(X[:5], alpha=0.05)
        )

    def test_needs_warm_startable_student(self, cosine):
        X, y, ids, _ = cosine
        with pytest.raises(ValueError, match="warm_start"):
            _fast(n_rounds=2).fit(X, y, ids, X_unlabeled=U_GRID)

    def test_client_recipe_must_match_student_class(self, cosine):
        X, y, ids, _ = cosine
        model = TwoStudentsRegressor(
            KNeighborsRegressor(), mean_student=MLPRegressor(), n_rounds=2
        )
        with pytest.raises(ValueError, match="same class"):
            model.fit(X, y, ids)

    def test_previous_reference_needs_rounds(self, cosine):
        X, y, ids, _ = cosine
        with pytest.raises(ValueError, match="n_rounds > 1"):
            _fast(filter_reference="previous").fit(X, y, ids)

    def test_client_models_not_with_rounds(self, cosine, gbr_teachers):
        X, y, ids, _ = cosine
        model = TwoStudentsRegressor(mean_student=MLPRegressor(), n_rounds=2)
        with pytest.raises(ValueError, match="client_models"):
            model.fit(X, y, ids, client_models=gbr_teachers[0])


class TestBadInput:
    def test_predict_before_fit(self):
        with pytest.raises(NotFittedError):
            TwoStudentsRegressor().predict([[0.0]])
        with pytest.raises(NotFittedError):
            TwoStudentsRegressor().predict_std([[0.0]])

    def test_x_unlabeled_wrong_features(self, cosine):
        X, y, ids, _ = cosine
        with pytest.raises(ValueError, match="X_unlabeled.*features"):
            _fast().fit(X, y, ids, X_unlabeled=np.zeros((10, 2)))
        with pytest.raises(ValueError, match="X_ref"):
            _fast().fit(X, y, ids, X_unlabeled=U_GRID, X_ref=np.zeros((10, 3)))

    def test_x_unlabeled_empty_or_nan(self, cosine):
        X, y, ids, _ = cosine
        with pytest.raises(ValueError, match="X_unlabeled"):
            _fast().fit(X, y, ids, X_unlabeled=np.zeros((0, 1)))
        with pytest.raises(ValueError, match="X_unlabeled.*NaN"):
            _fast().fit(X, y, ids, X_unlabeled=[[np.nan]])

    def test_two_dimensional_y(self, cosine):
        X, y, ids, _ = cosine
        with pytest.raises(ValueError, match="y"):
            _fast().fit(X, np.column_stack([y, y]), ids)

    def test_client_ids_length(self, cosine):
        X, y, ids, _ = cosine
        with pytest.raises(ValueError, match="client_ids"):
            _fast().fit(X, y, ids[:-1])

    def test_client_models_keys(self, cosine, gbr_teachers):
        X, y, ids, _ = cosine
        models = dict(gbr_teachers[0])
        del models[3]
        models["x"] = gbr_teachers[1]
        with pytest.raises(ValueError, match=r"missing \['3'\], unexpected \['x'\]"):
            _fast().fit(X, y, ids, client_models=models)
        with pytest.raises(TypeError, match="client_models must be a dict"):
            _fast().fit(X, y, ids, client_models=list(gbr_teachers[0].values()))

    def test_one_teacher_raises(self, cosine, gbr_teachers):
        X, y, ids, _ = cosine
        one = ids == 0
        with pytest.raises(ValueError, match="at least two teachers"):
            _fast().fit(X[one], y[one], ids[one], client_models={0: gbr_teachers[0][0]})

    def test_too_few_rows_for_shards(self):
        with pytest.raises(ValueError, match="n_samples = 1"):
            _fast().fit([[0.0]], [1.0])

    @pytest.mark.parametrize("name", ["gamma", "credible_level"])
    @pytest.mark.parametrize("value", [0.0, 1.0, -0.5, 2.0])
    def test_levels_outside_unit_interval(self, cosine, name, value):
        X, y, ids, _ = cosine
        with pytest.raises(InvalidParameterError, match=name):
            _fast(**{name: value}).fit(X, y, ids)

    def test_trusted_models_type(self, cosine):
        X, y, ids, _ = cosine
        with pytest.raises(TypeError, match="trusted_models"):
            _fast().fit(X, y, ids, trusted_models=[object()])


def test_missing_x_unlabeled_warns_that_the_server_sees_client_inputs():
    from skfedcp.exceptions import PrivacyLeakWarning
    from skfedcp.two_students import TwoStudentsRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(-5, 9, size=(120, 1))
    y = np.cos(X[:, 0]) + 0.1 * rng.normal(size=120)
    ids = np.repeat(np.arange(4), 30)
    with pytest.warns(PrivacyLeakWarning, match="X_unlabeled"):
        TwoStudentsRegressor(random_state=0).fit(X, y, client_ids=ids)
