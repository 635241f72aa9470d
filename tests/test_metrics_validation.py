"""Metrics: NaN is an error, not a miss; crossed intervals have |upper - lower| width.

Issue 11, item 8. Before, a NaN ``y_true`` or a NaN bound counted as a miss,
and a crossed interval entered the mean width with a negative sign (0.016
where MAPIE and puncc report 1.149 on the issue's example).
"""

import numpy as np
import pytest

from skfedcp.metrics import (
    coverage_score,
    interval_score,
    max_coverage_gap,
    mean_width_score,
    per_client_coverage,
    per_client_set_coverage,
    set_coverage_score,
    set_size_score,
    size_stratified_coverage,
)

Y = np.array([0.0, 1.0, 2.0, 3.0])
IV = np.array([[-1.0, 1.0], [0.0, 2.0], [1.5, 2.5], [4.0, 5.0]])
IDS = np.array([0, 0, 1, 1])
SETS = np.array([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=bool)
LABELS = np.array([0, 1, 1, 0])


def _nan_at(a, index):
    a = np.array(a, dtype=np.float64)
    a[index] = np.nan
    return a


@pytest.mark.parametrize(
    "metric",
    [
        coverage_score,
        lambda y, iv: interval_score(y, iv, alpha=0.1),
        lambda y, iv: per_client_coverage(y, iv, IDS),
        lambda y, iv: max_coverage_gap(y, iv, IDS, alpha=0.1),
    ],
    ids=["coverage", "interval_score", "per_client", "gap"],
)
class TestIntervalMetricsRefuseNaN:
    def test_nan_in_y_true(self, metric):
        with pytest.raises(ValueError, match=r"y_true contains NaN .*rows \[2\]"):
            metric(_nan_at(Y, 2), IV)

    @pytest.mark.parametrize("column", [0, 1])
    def test_nan_in_intervals(self, metric, column):
        with pytest.raises(
            ValueError, match=r"y_intervals contains NaN \(rows \[1\]\)"
        ):
            metric(Y, _nan_at(IV, (1, column)))


def test_mean_width_refuses_nan():
    with pytest.raises(ValueError, match="y_intervals contains NaN"):
        mean_width_score(_nan_at(IV, (3, 1)))


def test_infinite_bounds_are_allowed():
    iv = IV.copy()
    iv[0] = [-np.inf, np.inf]
    assert coverage_score(Y, iv) == 0.75
    assert mean_width_score(iv) == np.inf


@pytest.mark.parametrize(
    "metric",
    [
        lambda y, s: set_coverage_score(y, s),
        lambda y, s: size_stratified_coverage(y, s),
        lambda y, s: per_client_set_coverage(y, s, IDS),
    ],
    ids=["coverage", "stratified", "per_client"],
)
class TestSetMetricsRefuseNaN:
    def test_nan_label(self, metric):
        with pytest.raises(
            ValueError, match=r"y_true contains NaN or None \(rows \[3\]\)"
        ):
            metric(_nan_at(LABELS, 3), SETS)

    def test_nan_in_sets(self, metric):
        with pytest.raises(ValueError, match="y_sets contains NaN"):
            metric(LABELS, _nan_at(SETS, (0, 1)))


def test_none_label_with_classes():
    labels = np.array(["a", None, "b", "a"], dtype=object)
    with pytest.raises(ValueError, match=r"y_true contains NaN or None \(rows \[1\]\)"):
        set_coverage_score(labels, SETS, classes=["a", "b"])


def test_set_size_refuses_nan():
    with pytest.raises(ValueError, match="y_sets contains NaN"):
        set_size_score(_nan_at(SETS, (2, 0)))


class TestCrossedIntervals:
    def test_width_is_absolute(self):
        crossed = np.array([[0.0, 2.0], [3.0, 1.0]])
        # signed: (2 - 2) / 2 = 0; MAPIE and puncc: (2 + 2) / 2 = 2
        assert mean_width_score(crossed) == 2.0

    def test_matches_mapie_and_puncc_formula(self):
        rng = np.random.default_rng(0)
        lower, upper = rng.normal(size=(2, 500))  # about half cross
        iv = np.column_stack([lower, upper])
        # MAPIE's regression_mean_width_score and puncc's ``sharpness`` both
        # average ``abs(upper - lower)``.
        assert mean_width_score(iv) == pytest.approx(np.abs(upper - lower).mean())
        assert mean_width_score(iv) > abs(np.mean(upper - lower))

    def test_crossed_interval_covers_nothing(self):
        # a crossed pair is an empty set for coverage, as in MAPIE
        assert coverage_score([2.0], [[3.0, 1.0]]) == 0.0

    def test_interval_score_uses_absolute_width(self):
        iv = np.array([[3.0, 1.0]])
        # width 2, y = 2 is above upper = 1 by 1 and below lower = 3 by 1
        expected = 2.0 + (2 / 0.5) * (1.0 + 1.0)
        assert interval_score([2.0], iv, alpha=0.5) == pytest.approx(expected)
