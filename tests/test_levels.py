"""Several confidence levels from one fit: shapes, nesting, equality, budget."""

import warnings

import numpy as np
import pytest
from quantile_forest import RandomForestQuantileRegressor
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.neighbors import KNeighborsRegressor

from skfedcp import FedConformalRegressor, FedCQRRegressor
from skfedcp.base._levels import (
    check_alpha_levels,
    monotone_thresholds,
    nested_intervals,
    stack_level_messages,
)
from skfedcp.calibrators import LDPLabelCalibrator
from skfedcp.classification import PrivateConformalClassifier
from skfedcp.metrics import get_interval_scorer, get_set_scorer, make_budget_refit
from skfedcp.scores import APSScore
from skfedcp.two_students import TwoStudentsRegressor

LEVELS = [0.2, 0.1, 0.05]


@pytest.fixture(scope="module")
def reg_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2400, 3))
    y = X @ [1.0, -2.0, 0.5] + rng.normal(size=2400) * (1 + np.abs(X[:, 0]))
    model = LinearRegression().fit(X[:400], y[:400])
    client_ids = np.repeat(np.arange(10), 160)
    return model, X[400:2000], y[400:2000], client_ids, X[2000:], y[2000:]


@pytest.fixture(scope="module")
def clf_data():
    X, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=2000).fit(X[:600], y[:600])
    client_ids = np.repeat(np.arange(6), 150)
    return model, X[600:1500], y[600:1500], client_ids, X[1500:], y[1500:]


def _is_nested(intervals, alphas):
    order = np.argsort(-np.asarray(alphas))
    lo, hi = intervals[:, 0, order], intervals[:, 1, order]
    return bool(np.all(np.diff(lo, axis=1) <= 0) and np.all(np.diff(hi, axis=1) >= 0))


# -- the helpers ------------------------------------------------------------


def test_check_alpha_levels_accepts_sequences_and_keeps_the_order():
    assert check_alpha_levels(0.1) is None
    np.testing.assert_array_equal(check_alpha_levels((0.05, 0.2)), [0.05, 0.2])
    np.testing.assert_array_equal(check_alpha_levels(np.array([0.3])), [0.3])


@pytest.mark.parametrize(
    "alpha, match",
    [
        ([], "empty"),
        ([0.1, 0.1], "distinct"),
        ([0.1, 1.0], "open interval"),
        ([0.0, 0.1], "open interval"),
        ([[0.1, 0.2]], "1-D"),
        ([0.1, True], "1-D"),
        (["a", 0.1], "1-D"),
    ],
)
def test_bad_alpha_sequences_are_refused_by_name(alpha, match, reg_data):
    with pytest.raises(ValueError, match="alpha") as info:
        check_alpha_levels(alpha)
    assert info.match(match)
    model, X, y, c, _, _ = reg_data
    reg = FedConformalRegressor(FrozenEstimator(model), alpha=alpha)
    with pytest.raises(ValueError, match="alpha"):
        reg.fit(X, y, client_ids=c)


def test_monotone_thresholds_is_a_running_max_from_the_largest_alpha():
    t = monotone_thresholds([0.7, 0.8, 2.0], np.array([0.1, 0.2, 0.05]))
    np.testing.assert_array_equal(t, [0.8, 0.8, 2.0])
    pairs = monotone_thresholds([[1.0, 3.0], [2.0, 1.0]], np.array([0.05, 0.1]))
    np.testing.assert_array_equal(pairs, [[2.0, 3.0], [2.0, 1.0]])


def test_nested_intervals_takes_the_hull_of_larger_alphas():
    crossed = np.array([[0.0, 1.0]])  # alpha 0.1: narrower than alpha 0.2's
    wide = np.array([[-1.0, 2.0]])
    out = nested_intervals([crossed, wide], np.array([0.1, 0.2]))
    assert out.shape == (1, 2, 2)
    np.testing.assert_array_equal(out[0, :, 0], [-1.0, 2.0])
    np.testing.assert_array_equal(out[0, :, 1], [-1.0, 2.0])


def test_stack_level_messages_adds_a_level_axis():
    m = stack_level_messages(
        [
            {
                "client": np.array([0, 1]),
                "q": np.array([1.0, 2.0]),
                "r": np.ones((2, 2)),
            },
            {
                "client": np.array([0, 1]),
                "q": np.array([3.0, 4.0]),
                "r": np.ones((2, 3)),
            },
        ]
    )
    np.testing.assert_array_equal(m["client"], [0, 1])
    np.testing.assert_array_equal(m["q"], [[1.0, 3.0], [2.0, 4.0]])
    assert m["r"].shape == (2, 2) and m["r"].dtype == object
    assert m["r"][1, 1].shape == (3,)


# -- regressors ---------------------------------------------------------------


@pytest.mark.parametrize("calibrator", ["qq", "central", "avg"])
def test_regressor_levels_equal_separate_fits(calibrator, reg_data):
    model, X, y, c, X_test, _ = reg_data
    multi = FedConformalRegressor(
        FrozenEstimator(model), alpha=LEVELS, calibrator=calibrator
    ).fit(X, y, client_ids=c)
    intervals = multi.predict_interval(X_test)
    assert intervals.shape == (X_test.shape[0], 2, 3)
    assert multi.threshold_.shape == (3,)
    assert len(multi.calibrators_) == 3 and not hasattr(multi, "calibrator_")
    np.testing.assert_array_equal(multi.alphas_, LEVELS)
    for j, alpha in enumerate(LEVELS):
        one = FedConformalRegressor(
            FrozenEstimator(model), alpha=alpha, calibrator=calibrator
        ).fit(X, y, client_ids=c)
        assert multi.calibrators_[j].threshold_ == one.threshold_
        assert multi.raw_thresholds_[j] == one.threshold_
    if np.all(np.diff(multi.raw_thresholds_) >= 0):  # already monotone
        for j, alpha in enumerate(LEVELS):
            one = FedConformalRegressor(
                FrozenEstimator(model), alpha=alpha, calibrator=calibrator
            ).fit(X, y, client_ids=c)
            np.testing.assert_array_equal(
                intervals[:, :, j], one.predict_interval(X_test)
            )
    assert _is_nested(intervals, LEVELS)
    assert multi.messages_["n"].shape == (10, 3)


def test_scalar_alpha_keeps_todays_shapes_and_attributes(reg_data):
    model, X, y, c, X_test, _ = reg_data
    reg = FedConformalRegressor(FrozenEstimator(model), alpha=0.1).fit(
        X, y, client_ids=c
    )
    assert reg.predict_interval(X_test).shape == (X_test.shape[0], 2)
    assert np.ndim(reg.threshold_) == 0
    assert hasattr(reg, "calibrator_") and not hasattr(reg, "calibrators_")
    assert not hasattr(reg, "alphas_")


def test_qq_sends_one_message_per_level_per_client(reg_data):
    model, X, y, c, _, _ = reg_data
    reg = FedConformalRegressor(FrozenEstimator(model), alpha=LEVELS).fit(
        X, y, client_ids=c
    )
    assert reg.messages_["quantile"].shape == (10, 3)
    for j, cal in enumerate(reg.calibrators_):
        np.testing.assert_array_equal(
            reg.messages_["quantile"][:, j], cal.messages_["quantile"]
        )


def test_levels_in_any_order_give_the_same_intervals(reg_data):
    model, X, y, c, X_test, _ = reg_data
    a = FedConformalRegressor(FrozenEstimator(model), alpha=[0.05, 0.2, 0.1])
    b = FedConformalRegressor(FrozenEstimator(model), alpha=LEVELS)
    ia = a.fit(X, y, client_ids=c).predict_interval(X_test)
    ib = b.fit(X, y, client_ids=c).predict_interval(X_test)
    np.testing.assert_array_equal(ia[:, :, [1, 2, 0]], ib)


def test_unfrozen_model_is_fitted_once_for_all_levels(reg_data):
    _, X, y, c, X_test, _ = reg_data
    multi = FedConformalRegressor(
        alpha=LEVELS, conformity_score="normalized", random_state=0
    ).fit(X, y, client_ids=c)
    one = FedConformalRegressor(
        alpha=0.1, conformity_score="normalized", random_state=0
    ).fit(X, y, client_ids=c)
    np.testing.assert_array_equal(multi.predict(X_test), one.predict(X_test))
    assert multi.calibrators_[1].threshold_ == one.threshold_
    assert _is_nested(multi.predict_interval(X_test), LEVELS)


@pytest.mark.parametrize("conformity_score", ["symmetric", "asymmetric", "normalized"])
def test_cqr_levels_equal_separate_fits(conformity_score):
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 4, size=(1500, 1))
    y = np.sin(X[:, 0]) + rng.normal(size=1500) * (0.2 + 0.2 * X[:, 0])
    c = np.repeat(np.arange(10), 150)
    forest = RandomForestQuantileRegressor(
        n_estimators=20, min_samples_leaf=20, random_state=0
    )
    kw = {
        "estimator": forest,
        "quantile_levels": (0.1, 0.9),
        "conformity_score": conformity_score,
        "random_state": 0,
    }
    multi = FedCQRRegressor(alpha=LEVELS, **kw).fit(X, y, client_ids=c)
    intervals = multi.predict_interval(X[:50])
    assert intervals.shape == (50, 2, 3)
    pair = conformity_score == "asymmetric"
    assert multi.threshold_.shape == ((3, 2) if pair else (3,))
    for j, alpha in enumerate(LEVELS):
        one = FedCQRRegressor(alpha=alpha, **kw).fit(X, y, client_ids=c)
        np.testing.assert_array_equal(multi.raw_thresholds_[j], one.threshold_)
    assert _is_nested(intervals, LEVELS)
    if pair:
        assert isinstance(multi.calibrators_[0], tuple)
        assert "lower_quantile" in multi.messages_


def test_cqr_default_levels_use_the_median_alpha():
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 4, size=(600, 1))
    y = X[:, 0] + rng.normal(size=600)
    forest = RandomForestQuantileRegressor(n_estimators=10, random_state=0)
    reg = FedCQRRegressor(forest, alpha=LEVELS, random_state=0)
    reg.fit(X, y, client_ids=np.repeat(np.arange(4), 150))
    np.testing.assert_allclose(reg.quantile_levels_, [0.05, 0.95])


def test_two_students_raw_intervals_take_a_sequence():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(400, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=400)
    c = np.repeat(np.arange(8), 50)
    model = TwoStudentsRegressor(
        mean_student=KNeighborsRegressor(5), uq_target="quantiles", random_state=0
    ).fit(X, y, c, X_unlabeled=X[:200])
    levels = [0.2, 0.05, 0.1]  # 0.05 reads the students' band itself
    out = model.predict_raw_interval(X[:30], alpha=levels)
    assert out.shape == (30, 2, 3)
    assert _is_nested(out, levels)
    np.testing.assert_array_equal(
        out[:, :, 0], model.predict_raw_interval(X[:30], alpha=0.2)
    )
    staged = list(model.staged_predict_raw_interval(X[:30], alpha=levels))
    assert staged[-1].shape == (30, 2, 3)
    with pytest.raises(ValueError, match="alpha"):
        model.predict_raw_interval(X[:3], alpha=[0.1, 0.1])


# -- classifier ---------------------------------------------------------------


@pytest.mark.parametrize("calibrator", ["central", "qq"])
def test_classifier_levels_equal_separate_fits(calibrator, clf_data):
    model, X, y, c, X_test, _ = clf_data
    multi = PrivateConformalClassifier(
        FrozenEstimator(model), alpha=LEVELS, calibrator=calibrator
    ).fit(X, y, client_ids=c)
    sets = multi.predict_set(X_test)
    assert sets.shape == (X_test.shape[0], 10, 3)
    for j, alpha in enumerate(LEVELS):
        one = PrivateConformalClassifier(
            FrozenEstimator(model), alpha=alpha, calibrator=calibrator
        ).fit(X, y, client_ids=c)
        assert multi.calibrators_[j].threshold_ == one.threshold_
        if multi.threshold_[j] == one.threshold_:
            np.testing.assert_array_equal(sets[:, :, j], one.predict_set(X_test))
    # nested: a label in the set of a larger alpha is in every smaller one
    assert np.all(sets[:, :, 0] <= sets[:, :, 1])
    assert np.all(sets[:, :, 1] <= sets[:, :, 2])


def test_randomized_aps_sets_are_nested_from_one_draw(clf_data):
    model, X, y, c, X_test, _ = clf_data
    clf = PrivateConformalClassifier(
        FrozenEstimator(model),
        alpha=LEVELS,
        calibrator="central",
        conformity_score=APSScore(randomized=True),
        random_state=0,
    ).fit(X, y, client_ids=c)
    sets = clf.predict_set(X_test, random_state=3)
    assert np.all(sets[:, :, 0] <= sets[:, :, 1])
    assert np.all(sets[:, :, 1] <= sets[:, :, 2])


# -- the privacy budget -------------------------------------------------------


@pytest.mark.parametrize("calibrator", ["dp-central", "dp-qq"])
def test_private_levels_split_epsilon_equally(calibrator, clf_data):
    model, X, y, c, _, _ = clf_data
    clf = PrivateConformalClassifier(
        FrozenEstimator(model),
        alpha=LEVELS,
        epsilon=6.0,
        calibrator=calibrator,
        random_state=0,
    ).fit(X, y, client_ids=c)
    for cal in clf.calibrators_:
        assert cal.epsilon == pytest.approx(2.0)
    spent = clf.epsilon_spent_per_level_
    assert spent.shape == (3,)
    assert clf.epsilon_spent_ == pytest.approx(spent.sum())
    assert clf.epsilon_spent_ <= 6.0 + 1e-12
    assert np.all((spent == 0) | np.isclose(spent, 2.0))
    # nested sets, whatever the noise: thresholds made monotone
    order = np.argsort(-np.asarray(LEVELS))
    assert np.all(np.diff(clf.threshold_[order]) >= 0)
    assert np.all(clf.threshold_ >= clf.raw_thresholds_)


def test_private_levels_split_the_calibrators_own_epsilon(reg_data):
    model, X, y, c, _, _ = reg_data
    reg = FedConformalRegressor(
        FrozenEstimator(model),
        alpha=[0.2, 0.1],
        calibrator="dp-central",
        score_bounds=(0, 20),
        random_state=0,
    ).fit(X, y, client_ids=c)
    assert [cal.epsilon for cal in reg.calibrators_] == [0.5, 0.5]
    assert reg.epsilon_spent_ == pytest.approx(1.0)


def test_asymmetric_cqr_levels_spend_twice_epsilon():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 4, size=(3000, 1))
    y = X[:, 0] + rng.normal(size=3000)
    forest = RandomForestQuantileRegressor(n_estimators=10, random_state=0)
    reg = FedCQRRegressor(
        FrozenEstimator(forest.fit(X[:1000], y[:1000])),
        alpha=[0.2, 0.1],
        conformity_score="asymmetric",
        calibrator="dp-central",
        epsilon=4.0,
        score_bounds=(-10, 10),
        random_state=0,
    ).fit(X[1000:], y[1000:], client_ids=np.repeat(np.arange(4), 500))
    assert [cal.epsilon for pair in reg.calibrators_ for cal in pair] == [2.0] * 4
    assert reg.epsilon_spent_ == pytest.approx(8.0)


def test_ldp_levels_split_epsilon(clf_data):
    model, X, y, c, _, _ = clf_data
    clf = PrivateConformalClassifier(
        FrozenEstimator(model),
        alpha=[0.3, 0.2],
        epsilon=4.0,
        calibrator=LDPLabelCalibrator(),
        random_state=0,
    ).fit(X, y, client_ids=c)
    np.testing.assert_allclose(clf.epsilon_spent_per_level_, [2.0, 2.0])
    assert clf.epsilon_spent_ == pytest.approx(4.0)


# -- clone, grid search, scorers ---------------------------------------------


def test_clone_and_grid_search_over_sequences(reg_data):
    model, X, y, c, _, _ = reg_data
    reg = FedConformalRegressor(FrozenEstimator(model), alpha=LEVELS)
    assert clone(reg).get_params()["alpha"] == LEVELS
    search = GridSearchCV(
        reg, {"alpha": [[0.2, 0.1], [0.3, 0.05]], "calibrator": ["qq", "central"]}
    )
    search.fit(X, y, client_ids=c)
    assert search.best_estimator_.predict_interval(X[:4]).shape == (4, 2, 2)


def test_scorers_refuse_several_levels_clearly(reg_data, clf_data):
    model, X, y, c, _, _ = reg_data
    reg = FedConformalRegressor(FrozenEstimator(model), alpha=LEVELS).fit(
        X, y, client_ids=c
    )
    for name in ("coverage", "neg_mean_width", "neg_interval_score"):
        with pytest.raises(ValueError, match="scores one confidence level"):
            get_interval_scorer(name)(reg, X, y)
    model, X, y, c, _, _ = clf_data
    clf = PrivateConformalClassifier(
        FrozenEstimator(model), alpha=LEVELS, calibrator="central"
    ).fit(X, y, client_ids=c)
    with pytest.raises(ValueError, match="alpha=\\[0.2, 0.1, 0.05\\]"):
        get_set_scorer("coverage")(clf, X, y)
    # a scalar alpha still scores
    scalar = clone(clf).set_params(alpha=0.1).fit(X, y, client_ids=c)
    assert 0 <= get_set_scorer("coverage")(scalar, X, y) <= 1


def test_budget_refit_refuses_sequences_and_keeps_scalars():
    refit = make_budget_refit(2.0, param="alpha")
    values = np.ma.masked_array(np.empty(2, dtype=object), mask=[False, False])
    results = {"param_alpha": values, "mean_test_neg_mean_width": [-1.0, -1.5]}
    results["param_alpha"][0] = [0.1, 0.2]
    results["param_alpha"][1] = [0.05, 0.1]
    with pytest.raises(ValueError, match="a sequence of levels"):
        refit(results)
    scalar = {
        "param_alpha": [0.05, 0.1, 0.2],
        "mean_test_neg_mean_width": [-2.6, -1.9, -1.2],
    }
    assert refit(scalar) == 1


def test_scalar_alpha_grid_search_with_budget_refit_still_works(reg_data):
    model, X, y, c, _, _ = reg_data
    search = GridSearchCV(
        FedConformalRegressor(FrozenEstimator(model)),
        {"alpha": [0.05, 0.1, 0.2]},
        scoring={"neg_mean_width": get_interval_scorer("neg_mean_width")},
        refit=make_budget_refit(100.0, param="alpha"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search.fit(X, y, client_ids=c)
    assert search.best_params_ == {"alpha": 0.05}
