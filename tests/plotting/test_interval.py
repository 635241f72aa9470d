"""IntervalDisplay: rows, order, subsampling, colours and input checks."""

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression

from skfedcp import FedConformalRegressor, PrivateConformalClassifier
from skfedcp.plotting import IntervalDisplay


@pytest.fixture
def rows():
    rng = np.random.default_rng(0)
    y_pred = rng.normal(size=10)
    half = rng.uniform(0.5, 2.0, size=10)
    intervals = np.c_[y_pred - half, y_pred + half]
    y = y_pred + rng.normal(scale=1.5, size=10)
    ids = np.array([0, 1] * 5)
    return y, intervals, y_pred, ids


def _segments(disp):
    return np.array([seg[:, 1] for seg in disp.intervals_.get_segments()])


def test_rows_sorted_by_prediction(rows):
    y, intervals, y_pred, _ = rows
    disp = IntervalDisplay.from_predictions(y, intervals, y_pred=y_pred, max_rows=None)
    order = np.argsort(y_pred)
    np.testing.assert_array_equal(disp.rows_, order)
    np.testing.assert_allclose(_segments(disp), intervals[order])
    np.testing.assert_allclose(disp.prediction_line_.get_ydata(), y_pred[order])
    hit = (intervals[:, 0] <= y) & (y <= intervals[:, 1])
    assert len(disp.covered_scatter_.get_offsets()) == hit.sum()
    assert len(disp.missed_scatter_.get_offsets()) == (~hit).sum()
    np.testing.assert_allclose(
        np.sort(disp.missed_scatter_.get_offsets()[:, 1]), np.sort(y[~hit])
    )
    assert disp.ax_.get_xlabel() == "test rows sorted by prediction (10 rows)"
    assert disp.ax_.get_ylabel() == "target"
    assert disp.figure_ is disp.ax_.figure


def test_subsampling_keeps_evenly_spaced_ranks(rows):
    y, intervals, y_pred, _ = rows
    disp = IntervalDisplay.from_predictions(y, intervals, y_pred=y_pred, max_rows=4)
    np.testing.assert_array_equal(disp.rows_, np.argsort(y_pred)[[0, 3, 6, 9]])
    assert len(disp.intervals_.get_segments()) == 4
    assert "(4 of 10 rows)" in disp.ax_.get_xlabel()


@pytest.mark.parametrize("sort_by", ["width", "true", "client", "key"])
def test_sort_keys(rows, sort_by):
    y, intervals, y_pred, ids = rows
    key = np.arange(10)[::-1]
    disp = IntervalDisplay.from_predictions(
        y,
        intervals,
        y_pred=y_pred,
        client_ids=ids,
        sort_by=key if sort_by == "key" else sort_by,
    )
    expected = {
        "width": np.argsort(intervals[:, 1] - intervals[:, 0], kind="stable"),
        "true": np.argsort(y, kind="stable"),
        "client": np.lexsort((y_pred, ids)),
        "key": np.arange(10)[::-1],  # the key decreases along the rows
    }[sort_by]
    np.testing.assert_array_equal(disp.rows_, expected)


def test_colours_by_client_and_midpoints(rows):
    y, intervals, _, ids = rows
    disp = IntervalDisplay.from_predictions(
        y, intervals, client_ids=ids, sort_by="client"
    )
    colors = disp.intervals_.get_colors()
    assert np.allclose(colors[:5], colors[0]) and np.allclose(colors[5:], colors[5])
    assert not np.allclose(colors[0], colors[5])
    np.testing.assert_allclose(colors[0][:3], to_rgba("C0")[:3])
    # No y_pred: the midpoints of the intervals.
    np.testing.assert_allclose(
        disp.prediction_line_.get_ydata(), intervals[disp.rows_].mean(axis=1)
    )
    legend = [t.get_text() for t in disp.ax_.get_legend().get_texts()]
    assert "client 0" in legend and "client 1" in legend


def test_infinite_bounds_are_clipped(rows):
    y, intervals, y_pred, _ = rows
    intervals = intervals.copy()
    intervals[3] = [-np.inf, np.inf]
    disp = IntervalDisplay.from_predictions(y, intervals, y_pred=y_pred)
    segs = _segments(disp)
    assert np.all(np.isfinite(segs))
    i = np.flatnonzero(disp.rows_ == 3)[0]
    lo, hi = disp.ax_.get_ylim()
    assert segs[i, 0] == pytest.approx(lo) and segs[i, 1] < hi


def test_without_truths(rows):
    _, intervals, y_pred, _ = rows
    disp = IntervalDisplay.from_predictions(None, intervals, y_pred=y_pred)
    assert disp.covered_scatter_ is None and disp.missed_scatter_ is None


def test_from_estimator(linear_data):
    X_train, y_train, X, y, ids = linear_data
    model = LinearRegression().fit(X_train, y_train)
    reg = FedConformalRegressor(FrozenEstimator(model)).fit(X, y, client_ids=ids)
    disp = IntervalDisplay.from_estimator(reg, X, y, client_ids=ids, max_rows=50)
    assert len(disp.intervals_.get_segments()) == 50
    pred = model.predict(X)
    np.testing.assert_allclose(disp.prediction_line_.get_ydata(), pred[disp.rows_])
    assert np.all(np.diff(pred[disp.rows_]) >= 0)
    assert disp.ax_.get_title() == "FedConformalRegressor (qq)"


def test_from_estimator_refuses_classifiers():
    X = np.array([[0.0], [1.0], [2.0], [3.0]] * 5)
    y = np.array([0, 1, 0, 1] * 5)
    model = LogisticRegression().fit(X, y)
    clf = PrivateConformalClassifier(FrozenEstimator(model), calibrator="central")
    clf.fit(X, y)
    with pytest.raises(TypeError, match="ClientCoverageDisplay"):
        IntervalDisplay.from_estimator(clf, X, y)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"sort_by": "size"}, "sort_by must be one of"),
        ({"sort_by": np.arange(3)}, r"shape \(10,\)"),
        ({"max_rows": 0}, "max_rows"),
        ({"y_pred": np.zeros(3)}, "y_pred must have shape"),
        ({"client_ids": [0, 1]}, "client_ids"),
    ],
)
def test_input_errors(rows, kwargs, match):
    y, intervals, *_ = rows
    with pytest.raises(ValueError, match=match):
        IntervalDisplay.from_predictions(y, intervals, **kwargs)


def test_more_input_errors(rows):
    y, intervals, *_ = rows
    with pytest.raises(ValueError, match="needs y_true"):
        IntervalDisplay.from_predictions(None, intervals, sort_by="true")
    with pytest.raises(ValueError, match="needs client_ids"):
        IntervalDisplay.from_predictions(y, intervals, sort_by="client")
    with pytest.raises(ValueError, match="lower <= upper"):
        IntervalDisplay.from_predictions(y, intervals[:, ::-1])
    infinite = intervals.copy()
    infinite[0, 1] = np.inf
    with pytest.raises(ValueError, match="pass y_pred"):
        IntervalDisplay.from_predictions(y, infinite)
    with pytest.raises(ValueError, match="shape"):
        IntervalDisplay.from_predictions(y, intervals[:, :1])


def test_missing_matplotlib(rows, hide_matplotlib):
    y, intervals, *_ = rows
    with pytest.raises(ImportError, match=r'pip install "skfedcp\[plot\]"'):
        IntervalDisplay.from_predictions(y, intervals)


def _legend_texts(disp):
    return [t.get_text() for t in disp.ax_.get_legend().get_texts()]


@pytest.mark.parametrize("n_clients", [3, 10])
def test_legend_names_every_client_up_to_ten(n_clients):
    rng = np.random.default_rng(1)
    ids = np.arange(40) % n_clients
    y_pred = rng.normal(size=40)
    intervals = np.c_[y_pred - 1, y_pred + 1]
    disp = IntervalDisplay.from_predictions(None, intervals, client_ids=ids)
    legend = _legend_texts(disp)
    assert [t for t in legend if t.startswith("client")] == [
        f"client {c}" for c in range(n_clients)
    ]
    assert not any("more clients" in t for t in legend)
    # Each entry has the colour of its client's bars.
    handles = disp.ax_.get_legend().legend_handles
    colours = disp.intervals_.get_colors()
    for c in range(n_clients):
        (entry,) = [h for h in handles if h.get_label() == f"client {c}"]
        bar = colours[np.flatnonzero(ids[disp.rows_] == c)[0]]
        np.testing.assert_allclose(to_rgba(entry.get_color())[:3], bar[:3])


def test_legend_is_capped_for_many_clients():
    # Bikeshare's 12 months: colours cycle every 10, so the legend names the
    # first 9 clients and counts the other 3.
    rng = np.random.default_rng(2)
    ids = np.repeat(np.arange(1, 13), 5)
    y_pred = rng.normal(size=ids.size)
    intervals = np.c_[y_pred - 1, y_pred + 1]
    disp = IntervalDisplay.from_predictions(
        y_pred, intervals, client_ids=ids, sort_by="client"
    )
    legend = _legend_texts(disp)
    assert [t for t in legend if t.startswith("client")] == [
        f"client {c}" for c in range(1, 10)
    ]
    assert "+ 3 more clients (colours repeat)" in legend
    assert len(disp.ax_.get_legend().legend_handles) <= 3 + 10


def test_labels_stay_inside_the_saved_figure(tmp_path, rows):
    y, intervals, _, ids = rows
    disp = IntervalDisplay.from_predictions(y, intervals, client_ids=ids, name="t")
    disp.figure_.savefig(tmp_path / "intervals.png")
    # Everything drawn for the axes (tick labels, axis labels, title, legend).
    drawn = disp.ax_.get_tightbbox(disp.figure_.canvas.get_renderer())
    box = disp.figure_.bbox
    assert box.x0 <= drawn.x0 and drawn.x1 <= box.x1
    assert box.y0 <= drawn.y0 and drawn.y1 <= box.y1
