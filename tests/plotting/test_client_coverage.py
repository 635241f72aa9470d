"""ClientCoverageDisplay: what it draws, its bands and its input checks."""

import numpy as np
import pytest
from scipy import stats
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skfedcp import FedConformalRegressor, PrivateConformalClassifier
from skfedcp.metrics import client_coverage_test, per_client_coverage
from skfedcp.plotting import ClientCoverageDisplay
from skfedcp.plotting._client_coverage import binomial_band


@pytest.fixture
def three_clients():
    """Clients "a", "b", "c" with 5, 20 and 10 rows and known coverage."""
    ids = np.array(["a"] * 5 + ["b"] * 20 + ["c"] * 10)
    y = np.zeros(ids.size)
    intervals = np.tile([-1.0, 1.0], (ids.size, 1))
    y[:2] = 5.0  # a: 3 of 5 covered
    y[5:7] = 5.0  # b: 18 of 20
    return y, intervals, ids  # c: 10 of 10


def test_points_bars_and_lines(three_clients):
    y, intervals, ids = three_clients
    disp = ClientCoverageDisplay.from_predictions(
        y, intervals, client_ids=ids, alpha=0.1, guarantee=0.93
    )
    # Ordered by test size: a (5), c (10), b (20).
    labels = [t.get_text() for t in disp.ax_.get_xticklabels()]
    assert labels == ["a\n(5)", "c\n(10)", "b\n(20)"]
    offsets = disp.scatter_.get_offsets()
    np.testing.assert_allclose(offsets[:, 0], [0, 1, 2])
    np.testing.assert_allclose(offsets[:, 1], [0.6, 1.0, 0.9])
    assert len(disp.bands_.patches) == 3
    np.testing.assert_allclose(disp.target_line_.get_ydata(), [0.9, 0.9])
    np.testing.assert_allclose(disp.guarantee_line_.get_ydata(), [0.93, 0.93])
    assert disp.ax_.get_ylabel() == "coverage on the client's test rows"
    assert disp.ax_.get_xlabel() == "client (test rows), by size"
    assert disp.figure_ is disp.ax_.figure
    # Bars span each client's band, in display order.
    for patch, i in zip(disp.bands_.patches, disp.order_, strict=True):
        assert patch.get_y() == pytest.approx(disp.band_low_[i])
        assert patch.get_height() == pytest.approx(
            disp.band_high_[i] - disp.band_low_[i]
        )


def test_no_guarantee_line_and_given_axes(three_clients):
    import matplotlib.pyplot as plt

    y, intervals, ids = three_clients
    _, ax = plt.subplots()
    disp = ClientCoverageDisplay.from_predictions(
        y, intervals, client_ids=ids, alpha=0.2, ax=ax, name="mine", marker="s"
    )
    assert disp.ax_ is ax
    assert disp.guarantee_line_ is None
    assert disp.scatter_.get_label() == "mine"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any("guarantee" in t for t in legend)


def test_target_band_matches_binomial_quantiles():
    # Brute force: the smallest k whose binomial CDF reaches the tail level.
    n, p = np.array([7, 40]), 0.9
    low, high = binomial_band(n, [1.0, 1.0], target=p, confidence=0.9)
    for j, nj in enumerate(n):
        cdf = np.cumsum([stats.binom.pmf(k, nj, p) for k in range(nj + 1)])
        k_low = np.argmax(cdf >= 0.05 - 1e-12)
        k_high = np.argmax(cdf >= 0.95 - 1e-12)
        assert low[j] == k_low / nj
        assert high[j] == k_high / nj
        # The band holds at least the confidence under Bin(n, target).
        mass = stats.binom.cdf(k_high, nj, p) - stats.binom.cdf(k_low - 1, nj, p)
        assert mass >= 0.9


def test_clopper_pearson_band():
    n = np.array([10, 10, 10])
    cov = np.array([0.0, 0.5, 1.0])
    low, high = binomial_band(n, cov, target=0.9, band="clopper-pearson")
    ref = stats.binomtest(5, 10).proportion_ci(confidence_level=0.95, method="exact")
    assert low[1] == pytest.approx(ref.low)
    assert high[1] == pytest.approx(ref.high)
    assert low[0] == 0.0 and high[2] == 1.0
    assert high[0] == pytest.approx(1 - 0.025 ** (1 / 10))


def test_flagged_clients():
    # 50 of 100 covered at target 0.9 is far outside both bands; 90 of 100 is not.
    disp = ClientCoverageDisplay(
        clients=np.array([0, 1]),
        coverage=np.array([0.5, 0.9]),
        n_samples=np.array([100, 100]),
        alpha=0.1,
    ).plot()
    assert disp.flagged_.tolist() == [True, False]
    colors = disp.scatter_.get_facecolors()
    assert not np.allclose(colors[0], colors[1])
    disp = ClientCoverageDisplay(
        clients=np.array([0, 1]),
        coverage=np.array([0.5, 0.9]),
        n_samples=np.array([100, 100]),
        alpha=0.1,
        band="clopper-pearson",
    ).plot()
    assert disp.flagged_.tolist() == [True, False]


def test_prediction_sets():
    sets = np.array([[True, False], [True, True], [False, True], [False, True]])
    disp = ClientCoverageDisplay.from_predictions(
        ["x", "y", "x", "y"],
        sets,
        client_ids=[0, 0, 1, 1],
        classes=["x", "y"],
        alpha=0.1,
    )
    np.testing.assert_allclose(disp.coverage, [1.0, 0.5])


def test_from_estimator_regressor(linear_data):
    X_train, y_train, X, y, ids = linear_data
    frozen = FrozenEstimator(LinearRegression().fit(X_train, y_train))
    reg = FedConformalRegressor(frozen, calibrator="qq").fit(
        X[:300], y[:300], client_ids=ids[:300]
    )
    disp = ClientCoverageDisplay.from_estimator(
        reg, X[300:], y[300:], client_ids=ids[300:]
    )
    res = per_client_coverage(y[300:], reg.predict_interval(X[300:]), ids[300:])
    np.testing.assert_array_equal(disp.coverage, res.coverage)
    cal = reg.calibrator_
    bound = cal.coverage_bounds(cal.n_per_client_, 0.1).lower
    assert disp.guarantee == bound
    np.testing.assert_allclose(disp.guarantee_line_.get_ydata(), [bound, bound])
    assert disp.scatter_.get_label() == "FedConformalRegressor (qq)"

    avg = FedConformalRegressor(frozen, calibrator="avg").fit(
        X[:300], y[:300], client_ids=ids[:300]
    )
    disp = ClientCoverageDisplay.from_estimator(
        avg, X[300:], y[300:], client_ids=ids[300:]
    )
    assert disp.guarantee is None and disp.guarantee_line_ is None
    disp = ClientCoverageDisplay.from_estimator(
        reg, X[300:], y[300:], client_ids=ids[300:], guarantee=None
    )
    assert disp.guarantee_line_ is None


def test_from_estimator_pipeline(linear_data):
    X_train, y_train, X, y, ids = linear_data
    pipe = make_pipeline(
        StandardScaler(),
        FedConformalRegressor(LinearRegression(), calibrator="central"),
    )
    pipe.fit(X, y, fedconformalregressor__client_ids=ids)
    disp = ClientCoverageDisplay.from_estimator(
        pipe, X_train, y_train, client_ids=np.arange(300) % 3
    )
    assert disp.coverage.shape == (3,)
    assert disp.guarantee is not None


def test_from_estimator_classifier():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + rng.normal(size=600) > 0).astype(int)
    model = LogisticRegression().fit(X[:200], y[:200])
    clf = PrivateConformalClassifier(
        FrozenEstimator(model), alpha=0.2, calibrator="central"
    ).fit(X[200:400], y[200:400], client_ids=np.arange(200) % 2)
    ids = np.arange(200) % 4
    disp = ClientCoverageDisplay.from_estimator(clf, X[400:], y[400:], client_ids=ids)
    sets = clf.predict_set(X[400:])
    hits = sets[np.arange(200), y[400:]]
    expected = [hits[ids == c].mean() for c in range(4)]
    np.testing.assert_allclose(disp.coverage, expected)
    np.testing.assert_allclose(disp.target_line_.get_ydata(), [0.8, 0.8])


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"alpha": 1.5}, ValueError, "alpha"),
        ({"client_ids": None}, ValueError, "client_ids is required"),
        ({"band": "wald"}, ValueError, "band must be one of"),
        ({"confidence": 1.0}, ValueError, "confidence"),
        ({"guarantee": 1.5}, ValueError, "guarantee"),
        ({"guarantee": "auto"}, TypeError, "guarantee"),
        ({"client_ids": [0, 1]}, ValueError, "client_ids has 2 entries"),
        ({"significance": 1.5}, ValueError, "significance"),
        ({"significance": True}, TypeError, "significance"),
        ({"correction": "bonferroni"}, ValueError, "correction must be one of"),
    ],
)
def test_input_errors(three_clients, kwargs, error, match):
    y, intervals, ids = three_clients
    params = {"client_ids": ids, "alpha": 0.1, **kwargs}
    with pytest.raises(error, match=match):
        ClientCoverageDisplay.from_predictions(y, intervals, **params)


def test_bad_shapes_and_estimators(three_clients):
    y, intervals, ids = three_clients
    with pytest.raises(ValueError, match="shape"):
        ClientCoverageDisplay.from_predictions(
            y, np.c_[intervals, intervals[:, :1]], client_ids=ids, alpha=0.1
        )
    with pytest.raises(TypeError, match="predict_interval"):
        ClientCoverageDisplay.from_estimator(
            LinearRegression().fit([[0.0], [1.0]], [0.0, 1.0]),
            [[0.0]],
            [0.0],
            client_ids=[0],
        )
    with pytest.raises(ValueError, match="n_samples"):
        ClientCoverageDisplay(
            clients=[0], coverage=[0.5], n_samples=[0], alpha=0.1
        ).plot()


def test_missing_matplotlib(three_clients, hide_matplotlib):
    y, intervals, ids = three_clients
    with pytest.raises(ImportError, match=r'pip install "skfedcp\[plot\]"'):
        ClientCoverageDisplay.from_predictions(y, intervals, client_ids=ids, alpha=0.1)


def _outside_figure(fig, artists):
    """Texts of ``artists`` whose extent, once drawn, leaves the figure."""
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    return [
        a.get_text()
        for a in artists
        if a.get_text()
        and not (
            box.x0 <= a.get_window_extent(renderer).x0
            and a.get_window_extent(renderer).x1 <= box.x1
            and box.y0 <= a.get_window_extent(renderer).y0
            and a.get_window_extent(renderer).y1 <= box.y1
        )
    ]


def test_twelve_clients_labels_stay_inside_the_saved_figure(tmp_path):
    # Issue 24: 12 clients (Bikeshare's months) get upright "label (n)" ticks,
    # which the default figure size used to clip at the bottom when saved.
    rng = np.random.default_rng(0)
    disp = ClientCoverageDisplay(
        clients=np.arange(1, 13),
        coverage=rng.uniform(0.85, 0.95, 12),
        n_samples=rng.integers(600, 750, 12),
        alpha=0.1,
        guarantee=0.89,
    ).plot()
    ticks = disp.ax_.get_xticklabels()
    assert all(t.get_rotation() == 90 for t in ticks)
    disp.figure_.savefig(tmp_path / "coverage.png")  # default size and dpi
    texts = [*ticks, disp.ax_.xaxis.label, disp.ax_.yaxis.label]
    assert _outside_figure(disp.figure_, texts) == []
    drawn = disp.ax_.get_tightbbox(disp.figure_.canvas.get_renderer())
    box = disp.figure_.bbox
    assert box.x0 <= drawn.x0 and drawn.x1 <= box.x1
    assert box.y0 <= drawn.y0 and drawn.y1 <= box.y1


def test_flagged_clients_are_listed():
    disp = ClientCoverageDisplay(
        clients=np.array(["north", "south", "west"]),
        coverage=np.array([0.5, 0.9, 1.0]),
        n_samples=np.array([100, 100, 100]),
        alpha=0.1,
    ).plot()
    # 50 of 100 and 100 of 100 lie outside Bin(100, 0.9) / 100's band.
    assert disp.flagged_.tolist() == [True, False, True]
    assert disp.flagged_clients_.tolist() == ["north", "west"]
    disp = ClientCoverageDisplay(
        clients=np.array([3, 7]),
        coverage=np.array([0.9, 0.91]),
        n_samples=np.array([100, 100]),
        alpha=0.1,
    ).plot()
    assert disp.flagged_clients_.shape == (0,)


def _four_clients():
    """Clients a-d: 70/100, 84/100, 95/100 and 18/20 covered (target 0.9).

    One-sided exact p-values P(Bin(n, 0.9) <= covered): a about 1e-9, b 0.040,
    c 0.94, d 0.61. Holm multiplies the second smallest by 3 (0.12) and BH by
    2 (0.080): only a stays below 0.05; without a correction b is below too.
    """
    ids = np.repeat(["a", "b", "c", "d"], [100, 100, 100, 20])
    covered = np.concatenate(
        [
            np.arange(100) < 70,
            np.arange(100) < 84,
            np.arange(100) < 95,
            np.arange(20) < 18,
        ]
    )
    y = np.where(covered, 0.0, 5.0)
    intervals = np.tile([-1.0, 1.0], (ids.size, 1))
    return y, intervals, ids, covered


@pytest.mark.parametrize(
    "correction, below",
    [("holm", ["a"]), ("bh", ["a"]), ("none", ["a", "b"])],
)
def test_clients_below_beyond_chance_are_circled(correction, below):
    y, intervals, ids, covered = _four_clients()
    disp = ClientCoverageDisplay.from_predictions(
        y, intervals, client_ids=ids, alpha=0.1, correction=correction
    )
    assert disp.below_clients_.tolist() == below
    assert disp.below_.tolist() == [c in below for c in "abcd"]
    # The same tests as the metric on the rows.
    expected = client_coverage_test(covered, ids, alpha=0.1, correction=correction)
    np.testing.assert_array_equal(disp.below_, expected.below)
    np.testing.assert_allclose(
        disp.coverage_test_.adjusted_pvalues, expected.adjusted_pvalues, rtol=1e-12
    )
    assert disp.coverage_test_.correction == correction
    # One circle per client below, on its point (display order: by test size,
    # d (20 rows) first, then a, b, c).
    assert disp.order_.tolist() == [3, 0, 1, 2]
    circles = disp.below_scatter_.get_offsets()
    positions = {"a": 1, "b": 2}
    np.testing.assert_allclose(circles[:, 0], [positions[c] for c in below])
    np.testing.assert_allclose(circles[:, 1], [{"a": 0.7, "b": 0.84}[c] for c in below])
    legend = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    assert f"below 0.9 beyond chance ({correction}, 0.05)" in legend


def test_no_circle_when_no_client_is_below():
    disp = ClientCoverageDisplay(
        clients=np.array([3, 7]),
        coverage=np.array([0.9, 0.91]),
        n_samples=np.array([100, 100]),
        alpha=0.1,
    ).plot()
    assert disp.below_scatter_ is None
    assert disp.below_clients_.shape == (0,)
    assert not disp.below_.any()


def test_plot_takes_the_test_options():
    # The counts of _four_clients, drawn from the constructor.
    disp = ClientCoverageDisplay(
        clients=np.array(["a", "b", "c", "d"]),
        coverage=np.array([0.7, 0.84, 0.95, 0.9]),
        n_samples=np.array([100, 100, 100, 20]),
        alpha=0.1,
    )
    assert disp.plot().below_clients_.tolist() == ["a"]
    assert disp.plot(correction="none").below_clients_.tolist() == ["a", "b"]
    with pytest.raises(ValueError, match="significance"):
        disp.plot(significance=0.0)


def test_significance_sets_the_level_of_the_test():
    # b's Holm-adjusted p-value is about 0.12: below at 0.2, not at 0.05.
    y, intervals, ids, _ = _four_clients()
    disp = ClientCoverageDisplay.from_predictions(
        y, intervals, client_ids=ids, alpha=0.1, significance=0.2
    )
    assert disp.below_clients_.tolist() == ["a", "b"]
    assert disp.coverage_test_.significance == 0.2


def test_from_estimator_passes_the_test_options(linear_data):
    X_train, y_train, X, y, ids = linear_data
    frozen = FrozenEstimator(LinearRegression().fit(X_train, y_train))
    reg = FedConformalRegressor(frozen, calibrator="qq").fit(
        X[:300], y[:300], client_ids=ids[:300]
    )
    disp = ClientCoverageDisplay.from_estimator(
        reg, X[300:], y[300:], client_ids=ids[300:], correction="bh", significance=0.1
    )
    intervals = reg.predict_interval(X[300:])
    covered = (intervals[:, 0] <= y[300:]) & (y[300:] <= intervals[:, 1])
    expected = client_coverage_test(
        covered, ids[300:], alpha=0.1, correction="bh", significance=0.1
    )
    np.testing.assert_array_equal(disp.below_, expected.below)
    np.testing.assert_allclose(
        disp.coverage_test_.pvalues, expected.pvalues, rtol=1e-12
    )
    assert disp.coverage_test_.correction == "bh"
    assert disp.coverage_test_.significance == 0.1
