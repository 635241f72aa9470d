"""group_by on the wrappers: every form, shapes, sklearn tooling, exactness."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from skfedcp import FedConformalRegressor, FedCQRRegressor, PrivateConformalClassifier
from skfedcp.calibrators import GroupedCalibrator
from skfedcp.exceptions import InfiniteThresholdWarning, SmallCalibrationSetWarning
from skfedcp.metrics import get_interval_scorer
from skfedcp.two_students import TwoStudentsRegressor


def _one_group(X):
    return np.zeros(np.shape(X)[0], dtype=int)


def _sign_of_first(X):
    return (np.asarray(X)[:, 0] > 0).astype(int)


@pytest.fixture(scope="module")
def reg_data():
    """Heteroscedastic by group (column 2), 10 clients."""
    rng = np.random.default_rng(0)
    n = 2400
    X = rng.normal(size=(n, 3))
    g = (X[:, 0] > 0).astype(int)
    X[:, 2] = g
    y = X @ [1.0, -2.0, 0.0] + rng.normal(size=n) * (1 + 3 * g)
    clients = rng.integers(0, 10, n)
    model = LinearRegression().fit(X[:600], y[:600])
    return FrozenEstimator(model), X[600:], y[600:], clients[600:]


@pytest.fixture(scope="module")
def clf_data():
    rng = np.random.default_rng(1)
    n = 3000
    y = rng.integers(0, 4, n)
    X = rng.normal(size=(n, 4)) + 0.7 * y[:, None]
    clients = rng.integers(0, 8, n)
    model = LogisticRegression(max_iter=500).fit(X[:800], y[:800])
    return FrozenEstimator(model), X[800:], y[800:], clients[800:]


@pytest.mark.parametrize("calibrator", ["qq", "central", "avg"])
def test_group_by_none_is_the_marginal_fit(reg_data, calibrator):
    model, X, y, c = reg_data
    plain = FedConformalRegressor(model, calibrator=calibrator).fit(X, y, client_ids=c)
    none = FedConformalRegressor(model, calibrator=calibrator, group_by=None)
    none.fit(X, y, client_ids=c)
    assert none.threshold_ == plain.threshold_
    assert not hasattr(none, "groups_")
    # One group for every row is the marginal calibration, bit for bit.
    one = FedConformalRegressor(model, calibrator=calibrator, group_by=_one_group)
    one.fit(X, y, client_ids=c)
    assert one.threshold_.tolist() == [plain.threshold_]
    np.testing.assert_array_equal(
        one.predict_interval(X[:50]), plain.predict_interval(X[:50])
    )


@pytest.mark.parametrize("form", ["index", "name", "callable"])
@pytest.mark.parametrize("alpha", [0.1, [0.2, 0.1]])
def test_regressor_group_forms(reg_data, form, alpha):
    model, X, y, c = reg_data
    group_by = {"index": 2, "name": "grp", "callable": _sign_of_first}[form]
    Xin = pd.DataFrame(X, columns=["a", "b", "grp"]) if form == "name" else X
    if form == "name":
        model = FrozenEstimator(LinearRegression().fit(Xin[:300], y[:300]))
    reg = FedConformalRegressor(model, alpha=alpha, group_by=group_by)
    reg.fit(Xin, y, client_ids=c)
    assert reg.groups_.tolist() == [0, 1]
    n_levels = 1 if np.ndim(alpha) == 0 else 2
    assert reg.threshold_.shape == ((2,) if n_levels == 1 else (2, 2))
    out = reg.predict_interval(Xin[:20])
    assert out.shape == ((20, 2) if n_levels == 1 else (20, 2, 2))
    # Each row's half-width is its group's threshold.
    half = (out[:, 1] - out[:, 0]) / 2
    groups = (X[:20, 0] > 0).astype(int)
    expected = reg.threshold_[..., groups].T if n_levels > 1 else reg.threshold_[groups]
    np.testing.assert_allclose(half, expected)
    # Each group's threshold is the strategy on that group's rows alone.
    alone = FedConformalRegressor(model, alpha=alpha)
    rows = groups_all = (X[:, 0] > 0).astype(int)
    for g in (0, 1):
        rows = groups_all == g
        alone.fit(Xin[rows] if form == "name" else X[rows], y[rows], client_ids=c[rows])
        np.testing.assert_array_equal(reg.threshold_[..., g], alone.threshold_)


def test_noisy_group_gets_wider_intervals(reg_data):
    model, X, y, c = reg_data
    reg = FedConformalRegressor(model, group_by=2).fit(X, y, client_ids=c)
    assert reg.threshold_[1] > 2 * reg.threshold_[0]
    covered = np.abs(y - model.predict(X)) <= reg.threshold_[X[:, 2].astype(int)]
    # In-sample coverage of each group's own threshold (~900 rows a group,
    # alpha=0.1): 0.88 is two binomial SEs, 2 * sqrt(0.9 * 0.1 / 900) = 0.02,
    # below the target (seed 0 gives 0.899 and 0.908).
    for g in (0, 1):
        assert covered[X[:, 2] == g].mean() >= 0.88


@pytest.mark.parametrize("score", ["symmetric", "asymmetric"])
def test_cqr_group_by(reg_data, score):
    _, X, y, c = reg_data
    gbr = GradientBoostingRegressor(loss="quantile", n_estimators=20)
    cqr = FedCQRRegressor(
        estimator_lower=gbr,
        estimator_upper=gbr,
        conformity_score=score,
        group_by=2,
        random_state=0,
    ).fit(X, y, client_ids=c)
    expected = (2,) if score == "symmetric" else (2, 2)
    assert cqr.threshold_.shape == expected
    assert cqr.predict_interval(X[:7]).shape == (7, 2)
    levels = clone(cqr).set_params(alpha=[0.2, 0.1]).fit(X, y, client_ids=c)
    assert levels.threshold_.shape == ((2,) + expected)
    assert levels.predict_interval(X[:7]).shape == (7, 2, 2)
    if score == "asymmetric":
        assert levels.fallback_threshold_.shape == (2, 2)


@pytest.mark.parametrize("alpha", [0.1, [0.2, 0.1]])
def test_class_conditional_sets(clf_data, alpha):
    model, X, y, c = clf_data
    clf = PrivateConformalClassifier(
        model, calibrator="qq", epsilon=None, group_by="class", alpha=alpha
    ).fit(X, y, client_ids=c)
    assert clf.groups_.tolist() == clf.classes_.tolist() == [0, 1, 2, 3]
    sets = clf.predict_set(X[:30])
    assert sets.shape == ((30, 4) if np.ndim(alpha) == 0 else (30, 4, 2))
    proba = model.predict_proba(X[:30])
    t = clf.threshold_ if np.ndim(alpha) == 0 else clf.threshold_[1]
    level = sets if np.ndim(alpha) == 0 else sets[:, :, 1]
    np.testing.assert_array_equal(level, 1 - proba <= t[np.newaxis, :])
    # The class thresholds are the grouped calibrator on the label scores.
    scores = 1 - model.predict_proba(X)[np.arange(len(y)), y]
    cal = GroupedCalibrator("qq").fit(
        scores, c, group_ids=y, alpha=np.atleast_1d(alpha)[-1]
    )
    np.testing.assert_array_equal(t, cal.threshold_)


def test_classifier_row_groups_and_dp_qq(clf_data):
    model, X, y, c = clf_data
    clf = PrivateConformalClassifier(
        model, calibrator="dp-qq", epsilon=5.0, group_by=_sign_of_first, random_state=0
    ).fit(np.tile(X, (3, 1)), np.tile(y, 3), client_ids=np.tile(c, 3))
    assert clf.threshold_.shape == (2,)
    assert clf.epsilon_spent_ == 5.0  # disjoint cells: parallel composition
    sets = clf.predict_set(X[:10])
    g = _sign_of_first(X[:10])
    np.testing.assert_array_equal(
        sets, 1 - model.predict_proba(X[:10]) <= clf.threshold_[g][:, None]
    )


def test_pipeline_grid_search_and_scorer(reg_data):
    model, X, y, c = reg_data
    pipe = make_pipeline(
        StandardScaler(), FedConformalRegressor(group_by=_sign_of_first)
    )
    pipe.fit(X, y, fedconformalregressor__client_ids=c)
    assert pipe.predict(X[:3]).shape == (3,)
    assert pipe[-1].predict_interval(X[:3]).shape == (3, 2)
    search = GridSearchCV(
        FedConformalRegressor(group_by=2),
        {"calibrator": ["qq", "central"]},
        cv=KFold(2),
        scoring=get_interval_scorer("neg_mean_width"),
    )
    search.fit(X, y, client_ids=c)
    assert search.best_estimator_.threshold_.shape == (2,)
    clone_ = clone(FedConformalRegressor(group_by=_sign_of_first, min_group_size=5))
    assert clone_.get_params()["group_by"] is _sign_of_first
    assert clone_.get_params()["min_group_size"] == 5


def test_sklearn_checks_with_a_grouping():
    # The check data sets are small: most groups get +inf, with a warning.
    # check_estimator reports the array-API checks it skips (SCIPY_ARRAY_API
    # unset) as SkipTestWarning; parametrize_with_checks shows them as skips.
    from sklearn.exceptions import SkipTestWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        warnings.simplefilter("ignore", SkipTestWarning)
        check_estimator(FedConformalRegressor(group_by=_one_group, random_state=0))
        check_estimator(
            PrivateConformalClassifier(
                calibrator="qq", epsilon=None, group_by="class", random_state=0
            )
        )


def test_unseen_group_at_predict(reg_data):
    model, X, y, c = reg_data
    reg = FedConformalRegressor(model, group_by=_sign_of_first).fit(
        X[X[:, 0] > 0], y[X[:, 0] > 0], client_ids=c[X[:, 0] > 0]
    )
    assert reg.groups_.tolist() == [1]
    with pytest.warns(SmallCalibrationSetWarning, match=r"\+inf"):
        out = reg.predict_interval(X[:20])
    unseen = X[:20, 0] <= 0
    assert np.isinf(out[unseen]).all() and np.isfinite(out[~unseen]).all()


def test_min_group_size_fallback(reg_data):
    model, X, y, c = reg_data

    # Groups 0..3 by quartile of column 1, and a rare group 4 (10 rows).
    def quartiles(Z):
        out = np.digitize(Z[:, 1], [-0.67, 0.0, 0.67])
        out[np.abs(Z[:, 0]) > 2.6] = 4
        return out

    reg = FedConformalRegressor(model, group_by=quartiles, min_group_size=50)
    reg.fit(X, y, client_ids=c)
    cal = reg.calibrator_
    assert cal.merged_groups_.tolist() == [4]
    assert reg.fallback_threshold_ == cal.threshold_[4]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"group_by": "class"}, "is for classifiers"),
        ({"group_by": 0, "calibrator": "dp-central"}, "got 'dp-central'"),
        ({"group_by": 0, "calibrator": "ldp-s"}, "got 'ldp-s'"),
        ({"min_group_size": 3}, "set group_by too"),
        ({"group_by": "a"}, "no column names"),
        ({"group_by": 7}, "not a column index"),
        ({"group_by": lambda X: np.zeros(3)}, "one label per row"),
    ],
)
def test_bad_group_by_is_refused_clearly(reg_data, kwargs, match):
    model, X, y, c = reg_data
    with pytest.raises(ValueError, match=match):
        FedConformalRegressor(model, **kwargs).fit(X, y, client_ids=c)


def test_bad_group_by_type_and_missing_column(reg_data):
    model, X, y, c = reg_data
    with pytest.raises(TypeError, match="group_by"):
        FedConformalRegressor(model, group_by=True).fit(X, y, client_ids=c)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    with pytest.raises(ValueError, match="not a column of X"):
        FedConformalRegressor(group_by="z").fit(df, y, client_ids=c)


def test_two_students_has_no_group_by():
    # Its intervals are not calibrated: group it through FedConformalRegressor.
    with pytest.raises(TypeError, match="group_by"):
        TwoStudentsRegressor(group_by=0)
