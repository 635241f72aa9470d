"""PrivacyTradeoffDisplay: curves, reference lines, refits and input checks."""

import warnings

import numpy as np
import pytest
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression

from skfedcp import FedConformalRegressor, PrivateConformalClassifier
from skfedcp.exceptions import InfiniteThresholdWarning
from skfedcp.metrics import set_coverage_score, set_size_score
from skfedcp.plotting import PrivacyTradeoffDisplay


def test_from_predictions_draws_curves_and_lines():
    eps = [0.5, 1.0, 4.0]
    disp = PrivacyTradeoffDisplay.from_predictions(
        eps, [0.97, 0.93, 0.91], [3.1, 2.2, 1.9], non_private=(0.90, 1.8), alpha=0.1
    )
    ax_cov, ax_size = disp.ax_
    line, _, _ = disp.coverage_line_.lines
    np.testing.assert_allclose(line.get_xdata(), eps)
    np.testing.assert_allclose(line.get_ydata(), [0.97, 0.93, 0.91])
    np.testing.assert_allclose(disp.size_line_.lines[0].get_ydata(), [3.1, 2.2, 1.9])
    np.testing.assert_allclose(disp.target_line_.get_ydata(), [0.9, 0.9])
    np.testing.assert_allclose(disp.non_private_coverage_line_.get_ydata(), [0.9, 0.9])
    np.testing.assert_allclose(disp.non_private_size_line_.get_ydata(), [1.8, 1.8])
    assert ax_cov.get_xscale() == ax_size.get_xscale() == "log"
    assert ax_cov.get_ylabel() == "coverage"
    assert ax_size.get_ylabel() == "mean set size"
    assert ax_cov.get_xlabel().startswith("epsilon")
    assert disp.infinite_size_scatter_ is None
    assert disp.figure_ is ax_cov.figure


def test_repeats_give_means_and_error_bars():
    cov = np.array([[0.9, 0.8], [1.0, 0.9]])
    size = np.array([[2.0, 1.0], [4.0, 1.0]])
    disp = PrivacyTradeoffDisplay.from_predictions([1, 10], cov, size)
    np.testing.assert_allclose(disp.coverage_line_.lines[0].get_ydata(), [0.95, 0.85])
    np.testing.assert_allclose(disp.size_line_.lines[0].get_ydata(), [3.0, 1.0])
    # One error bar per epsilon, one standard error (std / sqrt(2)) each side.
    (bars,) = disp.coverage_line_.lines[2]
    segs = bars.get_segments()
    assert len(segs) == 2
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in segs], [0.1, 0.1])
    assert disp.target_line_ is None and disp.non_private_coverage_line_ is None


def test_infinite_widths_are_marked():
    disp = PrivacyTradeoffDisplay.from_predictions(
        [0.1, 1, 10], [1.0, 0.95, 0.9], [np.inf, 5.0, 3.0], size_label="width"
    )
    assert len(disp.infinite_size_scatter_.get_offsets()) == 1
    assert disp.infinite_size_scatter_.get_offsets()[0, 0] == pytest.approx(0.1)
    np.testing.assert_allclose(disp.size_line_.lines[0].get_xdata(), [1, 10])
    lo, hi = disp.ax_[1].get_xlim()
    assert lo < 0.1 and hi > 10  # the marker lies inside its panel


def test_given_axes():
    import matplotlib.pyplot as plt

    _, axes = plt.subplots(2, 1)
    disp = PrivacyTradeoffDisplay.from_predictions([1, 2], [0.9, 0.9], [1, 1], ax=axes)
    assert disp.ax_[0] is axes[0] and disp.ax_[1] is axes[1]
    with pytest.raises(ValueError, match="two matplotlib Axes"):
        PrivacyTradeoffDisplay.from_predictions([1, 2], [0.9, 0.9], [1, 1], ax=axes[0])


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (([0, 1], [0.9, 0.9], [1, 1]), {}, "positive"),
        (([1, 2], [0.9], [1, 1]), {}, "coverage must have shape"),
        (([1, 2], [0.9, 1.2], [1, 1]), {}, r"\[0, 1\]"),
        (([1, 2], [0.9, 0.9], [1, np.nan]), {}, "NaN"),
        (([1, 2], [0.9, 0.9], [1, -1]), {}, "non-negative"),
        (([1, 2], [0.9, 0.9], [1, 1]), {"non_private": (0.9,)}, "non_private"),
        (([1, 2], [0.9, 0.9], [1, 1]), {"alpha": 0}, "alpha"),
        (([], [], []), {}, "non-empty"),
    ],
)
def test_input_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        PrivacyTradeoffDisplay.from_predictions(*args, **kwargs)


@pytest.fixture(scope="module")
def classification():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 4))
    y = np.argmax(X[:, :3] + rng.normal(scale=0.8, size=(900, 3)), axis=1)
    model = LogisticRegression().fit(X[:300], y[:300])
    ids = np.arange(300) % 3
    return FrozenEstimator(model), X[300:600], y[300:600], ids, X[600:], y[600:]


def test_from_estimator_classifier(classification):
    frozen, X_cal, y_cal, ids, X_test, y_test = classification
    clf = PrivateConformalClassifier(frozen, alpha=0.1, calibrator="dp-central")
    kwargs = {"client_ids": ids, "epsilons": [1.0, 10.0], "n_repeats": 2}
    disp = PrivacyTradeoffDisplay.from_estimator(
        clf, X_cal, y_cal, X_test, y_test, random_state=0, **kwargs
    )
    assert disp.coverage.shape == disp.size.shape == (2, 2)
    assert disp.ax_[1].get_ylabel() == "mean set size"
    np.testing.assert_allclose(disp.target_line_.get_ydata(), [0.9, 0.9])
    # The non-private reference is the central calibrator on the same rows.
    ref = PrivateConformalClassifier(frozen, alpha=0.1, calibrator="central")
    sets = ref.fit(X_cal, y_cal, client_ids=ids).predict_set(X_test)
    assert disp.non_private == (
        set_coverage_score(y_test, sets, classes=ref.classes_),
        set_size_score(sets),
    )
    # Reproducible from random_state; another seed draws other mechanisms.
    again = PrivacyTradeoffDisplay.from_estimator(
        clf, X_cal, y_cal, X_test, y_test, random_state=0, **kwargs
    )
    np.testing.assert_array_equal(again.size, disp.size)
    other = PrivacyTradeoffDisplay.from_estimator(
        clf, X_cal, y_cal, X_test, y_test, random_state=1, non_private=None, **kwargs
    )
    assert other.non_private is None and other.non_private_size_line_ is None
    assert disp.estimator_name == "PrivateConformalClassifier (dp-central)"


def test_from_estimator_regressor_infinite_widths(linear_data):
    X_train, y_train, X, y, _ = linear_data
    ids = np.arange(400) % 4  # four equal clients keep dp-qq's plan quick
    frozen = FrozenEstimator(LinearRegression().fit(X_train, y_train))
    reg = FedConformalRegressor(frozen, calibrator="dp-qq", score_bounds=(0.0, 10.0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        disp = PrivacyTradeoffDisplay.from_estimator(
            reg,
            X[:400],
            y[:400],
            X[400:],
            y[400:],
            client_ids=ids,
            epsilons=[0.01, 100.0],
            random_state=0,
        )
    infinite = [w for w in caught if issubclass(w.category, InfiniteThresholdWarning)]
    assert len(infinite) == 1  # one summary, not one warning per fit
    assert "epsilon in {0.01}" in str(infinite[0].message)
    assert np.isinf(disp.size[0, 0]) and np.isfinite(disp.size[0, 1])
    assert disp.ax_[1].get_ylabel() == "mean interval width"
    assert len(disp.infinite_size_scatter_.get_offsets()) == 1
    assert disp.non_private is not None  # the "qq" counterpart


def test_from_estimator_errors(classification):
    frozen, X_cal, y_cal, ids, X_test, y_test = classification
    clf = PrivateConformalClassifier(frozen)
    data = (X_cal, y_cal, X_test, y_test)
    with pytest.raises(ValueError, match="no unique 'epsilon'"):
        PrivacyTradeoffDisplay.from_estimator(LogisticRegression(), *data)
    with pytest.raises(ValueError, match="positive"):
        PrivacyTradeoffDisplay.from_estimator(clf, *data, epsilons=[0.0, 1.0])
    with pytest.raises(ValueError, match="n_repeats"):
        PrivacyTradeoffDisplay.from_estimator(clf, *data, n_repeats=0)
    with pytest.raises(TypeError, match="random_state"):
        PrivacyTradeoffDisplay.from_estimator(clf, *data, random_state="secure")


def test_missing_matplotlib(hide_matplotlib):
    with pytest.raises(ImportError, match=r'pip install "skfedcp\[plot\]"'):
        PrivacyTradeoffDisplay.from_predictions([1, 2], [0.9, 0.9], [1, 1])
