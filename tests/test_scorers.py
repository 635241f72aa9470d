"""Scorers on meta-estimators, tuning rules and the per-client printout."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn import config_context
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV, GroupKFold, cross_validate
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from skfedcp import FedConformalRegressor, PrivateConformalClassifier
from skfedcp.metrics import (
    PerClientCoverage,
    coverage_score,
    get_interval_scorer,
    get_set_scorer,
    make_budget_refit,
    mean_width_score,
    per_client_coverage,
    per_client_set_coverage,
)


@pytest.fixture(scope="module")
def data(linear_data):
    X_train, y_train, X, y, ids = linear_data
    # Unscaled features, so that the scaler in the pipeline does something.
    return X_train * 10.0 + 3.0, y_train, X * 10.0 + 3.0, y, ids


def _pipe(data, **kwargs):
    X_train, y_train, *_ = data
    # Both steps fitted on training rows and frozen: the calibration rows
    # passed to the pipeline's fit refit neither (the preferred use of this
    # layout, see the user guide on tuning).
    scaler = StandardScaler().fit(X_train)
    model = FrozenEstimator(Ridge().fit(scaler.transform(X_train), y_train))
    return Pipeline(
        [
            ("scale", FrozenEstimator(scaler)),
            ("reg", FedConformalRegressor(model, **kwargs)),
        ]
    )


class TestPipelineScorers:
    @pytest.mark.parametrize(
        "name", ["coverage", "neg_mean_width", "neg_interval_score"]
    )
    def test_equals_scoring_the_last_step_by_hand(self, data, name):
        _, _, X, y, ids = data
        pipe = _pipe(data, random_state=0).fit(X, y, reg__client_ids=ids)
        intervals = pipe[-1].predict_interval(pipe[:-1].transform(X))
        expected = {
            "coverage": coverage_score(y, intervals),
            "neg_mean_width": -mean_width_score(intervals),
        }.get(name)
        score = get_interval_scorer(name)(pipe, X, y)
        assert np.isfinite(score)
        if expected is not None:
            assert score == expected
        # The pipeline's own transform matters: untransformed X gives another value.
        raw = pipe[-1].predict_interval(X)
        assert not np.allclose(raw, intervals)

    def test_nested_pipeline(self, data):
        _, _, X, y, ids = data
        inner = _pipe(data, random_state=0)
        outer = Pipeline([("id", "passthrough"), ("inner", inner)])
        outer.fit(X, y, inner__reg__client_ids=ids)
        intervals = inner[-1].predict_interval(inner[:-1].transform(X))
        assert get_interval_scorer("coverage")(outer, X, y) == coverage_score(
            y, intervals
        )

    def test_grid_search_over_pipeline_with_routing(self, data):
        _, _, X, y, ids = data
        with config_context(enable_metadata_routing=True):
            reg = FedConformalRegressor(Ridge(), random_state=0).set_fit_request(
                client_ids=True
            )
            pipe = make_pipeline(StandardScaler(), reg)
            grid = GridSearchCV(
                pipe,
                {"fedconformalregressor__calibrator": ["qq", "central"]},
                scoring=get_interval_scorer("neg_interval_score"),
                cv=GroupKFold(n_splits=5),
            )
            grid.fit(X, y, client_ids=ids, groups=ids)
        scores = grid.cv_results_["mean_test_score"]
        assert np.isfinite(scores).all()
        assert grid.best_estimator_[-1].n_clients_ == 10
        intervals = grid.best_estimator_[-1].predict_interval(
            grid.best_estimator_[:-1].transform(X)
        )
        assert intervals.shape == (X.shape[0], 2)

    def test_grid_search_over_pipeline_with_fit_params(self, data):
        _, _, X, y, ids = data
        grid = GridSearchCV(
            _pipe(data, random_state=0),
            {"reg__alpha": [0.1, 0.2]},
            scoring={
                "coverage": get_interval_scorer("coverage"),
                "neg_mean_width": get_interval_scorer("neg_mean_width"),
            },
            refit=make_budget_refit(10.0, param="reg__alpha"),
            cv=GroupKFold(n_splits=5),
        )
        grid.fit(X, y, reg__client_ids=ids, groups=ids)
        for key in ["mean_test_coverage", "mean_test_neg_mean_width"]:
            assert np.isfinite(grid.cv_results_[key]).all()
        assert grid.best_params_ == {"reg__alpha": 0.1}

    def test_cross_validate(self, data):
        _, _, X, y, ids = data
        res = cross_validate(
            _pipe(data, random_state=0),
            X,
            y,
            groups=ids,
            cv=GroupKFold(n_splits=5),
            scoring={"cov": get_interval_scorer("coverage")},
            params={"reg__client_ids": ids},
        )
        assert np.all((res["test_cov"] > 0.5) & (res["test_cov"] <= 1.0))

    def test_set_scorer_on_pipeline(self):
        rng = np.random.default_rng(1)
        X = rng.normal(size=(600, 4)) * 50.0
        y = (X[:, 0] + 20 * rng.normal(size=600) > 0).astype(int)
        scaler = StandardScaler().fit(X[:200])
        model = FrozenEstimator(
            LogisticRegression().fit(scaler.transform(X[:200]), y[:200])
        )
        pipe = make_pipeline(
            scaler,
            PrivateConformalClassifier(
                model, calibrator="central", epsilon=None, random_state=0
            ),
        ).fit(X[200:], y[200:])
        sets = pipe[-1].predict_set(scaler.transform(X[200:]))
        size = get_set_scorer("neg_mean_set_size")(pipe, X[200:], y[200:])
        assert size == -sets.sum(axis=1).mean()
        cov = get_set_scorer("coverage")(pipe, X[200:], y[200:])
        assert 0.0 <= cov <= 1.0

    @pytest.mark.parametrize(
        "scorer", [get_interval_scorer("coverage"), get_set_scorer("coverage")]
    )
    def test_clear_error_without_the_method(self, data, scorer):
        X_train, y_train, X, y, _ = data
        pipe = make_pipeline(StandardScaler(), LinearRegression()).fit(X, y)
        with pytest.raises(
            TypeError, match=r"LinearRegression \(last step of Pipeline\)"
        ):
            scorer(pipe, X, y)
        with pytest.raises(TypeError, match="StandardScaler has no predict_"):
            scorer(StandardScaler().fit(X), X, y)


class TestIntervalScoreAlphaWarning:
    def test_warns_once_per_new_alpha_at_the_users_line(self, data):
        _, _, X, y, ids = data
        scorer = get_interval_scorer("neg_interval_score")
        fits = {
            a: _pipe(data, alpha=a, random_state=0).fit(X, y, reg__client_ids=ids)
            for a in (0.1, 0.2)
        }
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scorer(fits[0.1], X, y)
            scorer(fits[0.1], X, y)
        assert not [w for w in caught if "not comparable" in str(w.message)]
        with pytest.warns(UserWarning, match="not comparable") as record:
            scorer(fits[0.2], X, y)
        assert record[0].filename == __file__
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scorer(fits[0.2], X, y)  # alpha=0.2 already seen: no new warning
        assert not [w for w in caught if "not comparable" in str(w.message)]

    def test_grid_over_alpha_warns(self, data):
        _, _, X, y, ids = data
        grid = GridSearchCV(
            _pipe(data, random_state=0),
            {"reg__alpha": [0.1, 0.2]},
            scoring=get_interval_scorer("neg_interval_score"),
            cv=GroupKFold(n_splits=3),
        )
        with pytest.warns(UserWarning, match="make_budget_refit"):
            grid.fit(X, y, reg__client_ids=ids, groups=ids)

    def test_other_scorers_do_not_warn(self, data):
        _, _, X, y, ids = data
        scorer = get_interval_scorer("neg_mean_width")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for a in (0.1, 0.2):
                pipe = _pipe(data, alpha=a, random_state=0)
                scorer(pipe.fit(X, y, reg__client_ids=ids), X, y)


class TestBudgetRefit:
    def _results(self, alphas, widths):
        return {
            "param_alpha": np.ma.MaskedArray(alphas, dtype=object),
            "mean_test_neg_mean_width": -np.asarray(widths, dtype=float),
        }

    def test_brute_force(self):
        # Every subset of 4 candidates against every budget: the rule equals
        # "smallest alpha among those with width <= budget".
        rng = np.random.default_rng(0)
        for _ in range(200):
            alphas = rng.permutation([0.05, 0.1, 0.15, 0.2])
            widths = rng.uniform(1, 3, size=4)
            budget = rng.uniform(0.5, 3.5)
            ok = [i for i in range(4) if widths[i] <= budget]
            refit = make_budget_refit(budget, param="alpha")
            if ok:
                expected = min(ok, key=lambda i: alphas[i])
                assert refit(self._results(alphas, widths)) == expected
            else:
                with pytest.warns(UserWarning, match="No candidate meets"):
                    got = refit(self._results(alphas, widths))
                assert got == int(np.argmin(widths))

    def test_ties_and_masked(self):
        results = {
            "param_epsilon": np.ma.MaskedArray(
                [1.0, 1.0, None, 0.5], mask=[False, False, False, True]
            ),
            "mean_test_neg_mean_set_size": -np.array([1.4, 1.2, 1.0, 1.0]),
        }
        refit = make_budget_refit(1.5, param="epsilon", metric="neg_mean_set_size")
        assert refit(results) == 1  # epsilon=1 with the smaller size
        refit = make_budget_refit(1.1, param="epsilon", metric="neg_mean_set_size")
        assert refit(results) in (2, 3)  # only unranked candidates fit

    def test_selects_smallest_alpha_in_a_real_search(self, data):
        _, _, X, y, ids = data
        alphas = [0.05, 0.1, 0.2, 0.3]
        scoring = {"neg_mean_width": get_interval_scorer("neg_mean_width")}
        grid = GridSearchCV(
            _pipe(data, random_state=0),
            {"reg__alpha": alphas},
            scoring=scoring,
            refit=False,
            cv=GroupKFold(n_splits=5),
        )
        grid.fit(X, y, reg__client_ids=ids, groups=ids)
        widths = -grid.cv_results_["mean_test_neg_mean_width"]
        assert np.all(np.diff(widths) < 0)  # wider for smaller alpha
        budget = (widths[1] + widths[2]) / 2  # alpha=0.05, 0.1 are too wide
        grid.set_params(refit=make_budget_refit(budget, param="reg__alpha"))
        grid.fit(X, y, reg__client_ids=ids, groups=ids)
        assert grid.best_params_ == {"reg__alpha": 0.2}
        assert grid.best_estimator_[-1].alpha == 0.2

    def test_missing_scorer_or_param(self):
        refit = make_budget_refit(1.0, param="alpha")
        with pytest.raises(ValueError, match="needs the 'neg_mean_width' scorer"):
            refit({"param_alpha": [0.1], "mean_test_score": [-1.0]})
        refit = make_budget_refit(1.0, param="epsilon")
        with pytest.raises(ValueError, match="'epsilon' is not a searched"):
            refit({"param_alpha": [0.1], "mean_test_neg_mean_width": [-1.0]})

    @pytest.mark.parametrize(
        "kwargs, exc, match",
        [
            ({"budget": 0.0, "param": "alpha"}, ValueError, "budget"),
            ({"budget": np.inf, "param": "alpha"}, ValueError, "budget"),
            ({"budget": "1", "param": "alpha"}, TypeError, "budget"),
            ({"budget": True, "param": "alpha"}, TypeError, "budget"),
            ({"budget": 1.0, "param": ""}, TypeError, "param"),
            (
                {"budget": 1.0, "param": "alpha", "metric": "width"},
                ValueError,
                "metric",
            ),
        ],
    )
    def test_bad_arguments(self, kwargs, exc, match):
        with pytest.raises(exc, match=match):
            make_budget_refit(**kwargs)


class TestPerClientPrintout:
    def test_unpacks_and_prints_a_short_table(self):
        ids = np.repeat([f"site-{k}" for k in range(30)], 3)
        y = np.zeros(90)
        intervals = np.tile([[-1.0, 1.0]], (90, 1))
        intervals[::3] = [2.0, 3.0]  # one miss per client
        res = per_client_coverage(y, intervals, ids)
        clients, coverage, n = res  # still a tuple
        assert len(clients) == 30
        np.testing.assert_allclose(coverage, 2 / 3)
        text = repr(res)
        lines = text.splitlines()
        assert lines[0].startswith("PerClientCoverage: 30 clients")
        assert len(lines) == 2 + 11  # header, column names, 10 rows and "..."
        assert "site-0" in text and "site-9" in text and "..." in text
        assert str(res) == text
        frame = res.to_frame()
        assert isinstance(frame, pd.DataFrame)
        assert frame.shape == (30, 2)
        assert frame.index.name == "client"
        assert frame["n_samples"].tolist() == [3] * 30

    def test_set_coverage_has_the_same_printout(self):
        sets = [[True, False], [True, True], [False, True]]
        res = per_client_set_coverage([0, 1, 0], sets, ["a", "a", "b"])
        assert isinstance(res, PerClientCoverage)
        assert repr(res).splitlines()[1:] == [
            "client  coverage  n_samples",
            "     a    1.0000          2",
            "     b    0.0000          1",
        ]
