"""A fit's plan (a certified k, coverage read later) against the plan.

A fit of ``QuantileOfQuantilesCalibrator`` with Appendix A.1's ranks and
unequal sizes (``local_rank="fixed"``, and the default ``"paper"``) decides k
from certified brackets of M (``_certified._certified_k``, the exact search
when they leave it open) and computes the exact coverage only when
``calibration_info_["coverage"]`` or ``coverage_bounds_`` is read. The fitted
plans must be those of the reference path (the full selection at fit time,
``_fixed_rank_plan`` switched off), bit for bit, coverage included. A sample
runs in the fast suite, 400 profiles in the slow one.
"""

import pickle

import numpy as np
import pytest
from sklearn.utils.validation import check_is_fitted

from skfedcp.calibrators import QuantileOfQuantilesCalibrator, select_qq_ranks
from skfedcp.calibrators._qq import _calibrator, _certified, _poisbin

ALPHAS = (0.01, 0.05, 0.1, 0.2, 0.3)


def _clear_caches():
    select_qq_ranks.cache_clear()
    _calibrator._cached_selection.cache_clear()
    _calibrator._cached_fit_selection.cache_clear()
    _poisbin._PROB_CACHE.clear()
    _poisbin._LAW_CACHE.clear()
    _certified._TABLES.clear()


def _profile(rng, client_sizes):
    """Client sizes (the ``client_sizes`` fixture), rule, clipping, alpha."""
    sizes = client_sizes(rng)
    rule = str(rng.choice(["paper", "fixed"]))
    clip = bool(rule == "fixed" and rng.random() < 0.3)
    return sizes.astype(np.int64), float(rng.choice(ALPHAS)), rule, clip


def _fitted_plan(sizes, alpha, rule, clip):
    """(ranks, k, feasible, threshold, coverage, bounds) of a fit, as bits."""
    _clear_caches()
    rng = np.random.default_rng(0)
    scores = rng.random(int(sizes.sum()))
    ids = np.repeat(np.arange(sizes.shape[0]), sizes)
    cal = QuantileOfQuantilesCalibrator(local_rank=rule, clip_local_rank=clip)
    cal.fit(scores, ids, alpha=alpha)
    info = cal.calibration_info_
    return (
        info["local_ranks"].tolist(),
        info["client_ranks"].tolist(),
        info["k"],
        info["feasible"],
        float(cal.threshold_).hex(),
        float(info["coverage"]).hex(),
        tuple(float(b).hex() for b in cal.coverage_bounds_),
    )


def _check(monkeypatch, sizes, alpha, rule, clip):
    fast = _fitted_plan(sizes, alpha, rule, clip)
    with monkeypatch.context() as patch:  # the reference: the full selection
        patch.setattr(_calibrator, "_fixed_rank_plan", lambda *args: None)
        reference = _fitted_plan(sizes, alpha, rule, clip)
    assert fast == reference


@pytest.mark.parametrize("seed", range(24))
def test_fit_plan_matches_the_reference(monkeypatch, client_sizes, seed):
    _check(monkeypatch, *_profile(np.random.default_rng(seed), client_sizes))


@pytest.mark.slow
def test_fit_plan_matches_the_reference_400_profiles(monkeypatch, client_sizes):
    rng = np.random.default_rng(2027)
    for _ in range(400):
        _check(monkeypatch, *_profile(rng, client_sizes))


def test_undecided_k_falls_back(monkeypatch):
    # A margin wider than any bracket: nothing is certified, the fit runs
    # the full selection and its coverage is there at once.
    monkeypatch.setattr(_certified, "_DECISION_MARGIN", 1.0)
    sizes = np.random.default_rng(4).integers(10, 1001, size=60)
    assert _certified._fixed_rank_plan(tuple(sizes.tolist()), 0.1, False) is None
    _clear_caches()
    ids = np.repeat(np.arange(60), sizes)
    cal = QuantileOfQuantilesCalibrator().fit(
        np.random.default_rng(5).random(int(sizes.sum())), ids, alpha=0.1
    )
    assert isinstance(cal.__dict__["calibration_info_"]["coverage"], float)
    assert cal.calibration_info_["coverage"] == cal.plan(sizes, 0.1)["coverage"]


def test_coverage_is_computed_when_read():
    sizes = np.random.default_rng(6).integers(10, 1001, size=50)
    ids = np.repeat(np.arange(50), sizes)
    scores = np.random.default_rng(7).random(int(sizes.sum()))
    _clear_caches()
    cal = QuantileOfQuantilesCalibrator().fit(scores, ids, alpha=0.1)
    stored = cal.__dict__
    assert isinstance(
        stored["calibration_info_"]["coverage"], _calibrator._LazyCoverage
    )
    assert isinstance(stored["coverage_bounds_"], _calibrator._LazyCoverage)
    assert _calibrator._cached_selection.cache_info().currsize == 0
    check_is_fitted(cal)  # no read of the coverage
    # Pickled before any read, the copy computes the same bits.
    copy = pickle.loads(pickle.dumps(cal))
    expected = select_qq_ranks(sizes, 0.1, local_rank="fixed").coverage
    assert cal.calibration_info_["coverage"] == expected
    assert cal.coverage_bounds_ == (expected, expected)
    assert isinstance(stored["calibration_info_"]["coverage"], float)  # kept
    assert copy.calibration_info_["coverage"] == expected
    assert copy.coverage_bounds_.lower == expected
    assert cal.max_byzantine() == copy.max_byzantine()


def test_lazy_attributes_before_a_fit():
    cal = QuantileOfQuantilesCalibrator()
    assert not hasattr(cal, "calibration_info_")
    assert not hasattr(cal, "coverage_bounds_")
    with pytest.raises(AttributeError, match="coverage_bounds_"):
        cal.coverage_bounds_  # noqa: B018


def test_grouped_unequal_rows_are_selected_client_by_client(monkeypatch):
    # Grouped rows of unequal sizes (a grid search's folds) skip the band
    # filter (it only pays when it spares grouping shuffled rows); the
    # messages are each client's exact order statistic, and the caller's
    # scores are left as they were.
    from skfedcp.calibrators._qq import _order_statistics

    def band(*args):
        raise AssertionError("the band filter ran on grouped rows")

    monkeypatch.setattr(_order_statistics, "_banded_order_statistics", band)
    rng = np.random.default_rng(11)
    sizes = rng.integers(10, 1001, 80)
    sizes[:3] = (5, 7, 9)  # ranks past their sizes at alpha = 0.05: +inf
    ids = np.repeat(np.arange(80), sizes)
    scores = rng.exponential(size=ids.size)
    before = scores.copy()
    cal = QuantileOfQuantilesCalibrator().fit(scores, ids, alpha=0.05)
    ranks = cal.calibration_info_["client_ranks"]
    expected = [
        np.sort(scores[ids == j])[r - 1] if r <= n else np.inf
        for j, (n, r) in enumerate(zip(sizes, ranks, strict=True))
    ]
    np.testing.assert_array_equal(cal.messages_["quantile"], expected)
    assert np.isinf(expected).any() and np.isfinite(expected).any()
    np.testing.assert_array_equal(scores, before)
