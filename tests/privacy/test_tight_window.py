"""The windowed rank tail and tight central plan equal the full O(n) ones."""

import tracemalloc

import numpy as np
import pytest

from skfedcp.privacy import _tight
from skfedcp.privacy._tight import (
    _rank_law,
    _rank_tail,
    _tail_coverage,
    _TailWindow,
    _tight_central,
    _window_coverage,
)


def _full_law(n, level, epsilon, n_bins, cut=1e-17, utility="quantile"):
    """The law of _rank_law as the O(n) code built it."""
    tail = _rank_tail(n, level, epsilon, n_bins, utility)
    lo = int(np.searchsorted(tail, cut, side="right")) - 1
    hi = int(np.searchsorted(tail, 1.0 - cut, side="left"))
    lo, hi = max(lo, 0), min(max(hi, lo + 1), n + 1)
    ranks = np.r_[0, np.arange(max(lo, 1), hi)]
    cdf = np.r_[tail[max(lo, 1)], tail[max(lo, 1) + 1 : hi], 1.0]
    return ranks, np.diff(np.r_[0.0, cdf])


def _full_central(n, alpha, epsilon, n_bins):
    """The O(n) bisection of _tight_central."""

    def coverage(t):
        return _tail_coverage(_rank_tail(n, max(t / n, 0.5), epsilon, n_bins), n)

    target = 1.0 - alpha + 1e-12
    if coverage(n) < target:
        return None
    lo, hi = 0, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if coverage(mid) >= target else (mid, hi)
    return max(hi / n, 0.5), coverage(hi)


def _random_case(rng):
    utility = str(rng.choice(["quantile", "rank"]))
    n = int(rng.choice([1, 2, 3, 10, 200, int(rng.integers(1, 3000)), 5000]))
    low = 0.5 if utility == "quantile" else 0.01
    level = float(rng.choice([0.5, 1.0, rng.uniform(low, 1.0)]))
    epsilon = float(rng.choice([0.1, 1.0, 5.0, rng.uniform(0.05, 30.0)]))
    n_bins = int(rng.choice([2, 10, 100, 1000, int(rng.integers(2, 10**5))]))
    return n, level, epsilon, n_bins, utility


def test_window_values_are_the_full_tail():
    rng = np.random.default_rng(0)
    for _ in range(600):
        n, level, epsilon, n_bins, utility = _random_case(rng)
        full = _rank_tail(n, level, epsilon, n_bins, utility)
        window = _TailWindow(n, level, epsilon, n_bins, utility)
        assert np.array_equal(window.values(0, n + 1), full)
        first, last = sorted(rng.integers(0, n + 2, size=2).tolist())
        assert np.array_equal(window.values(first, last), full[first : last + 1])


@pytest.mark.parametrize("window_from", [2048, 0])
def test_rank_law_is_the_full_law(monkeypatch, window_from):
    # window_from=0: the window path for every size, not only above 2048.
    monkeypatch.setattr(_tight, "_FULL_TAIL_MAX_N", window_from)
    rng = np.random.default_rng(1)
    for _ in range(400):
        n, level, epsilon, n_bins, utility = _random_case(rng)
        ranks, pmf = _rank_law(n, level, epsilon, n_bins, utility=utility)
        full_ranks, full_pmf = _full_law(n, level, epsilon, n_bins, utility=utility)
        assert np.array_equal(ranks, full_ranks)
        assert np.array_equal(pmf, full_pmf)


def test_tight_central_same_level_as_the_full_bisection():
    rng = np.random.default_rng(2)
    for _ in range(200):
        n = int(
            rng.choice([int(rng.integers(1, 3000)), int(rng.integers(2049, 5 * 10**4))])
        )
        alpha = float(rng.choice([0.05, 0.1, 0.2, rng.uniform(0.01, 0.5)]))
        epsilon = float(rng.choice([0.1, 1.0, 5.0, rng.uniform(0.05, 20.0)]))
        n_bins = int(rng.choice([10, 100, 1000, int(rng.integers(2, 10**5))]))
        new, old = (
            _tight_central(n, alpha, epsilon, n_bins),
            _full_central(n, alpha, epsilon, n_bins),
        )
        assert (new is None) == (old is None)
        if new is not None:
            assert new[0] == old[0]  # the level: bit-identical
            assert new[1] == pytest.approx(old[1], abs=1e-15)
            assert new[1] >= 1.0 - alpha


def test_window_coverage_is_the_full_sum():
    for n, level in [(5000, 0.93), (30000, 0.9001), (10**5, 0.5), (4000, 1.0)]:
        full = _tail_coverage(_rank_tail(n, level, 1.0, 100), n)
        assert _window_coverage(n, level, 1.0, 100) == pytest.approx(full, abs=1e-15)


def test_cost_does_not_grow_with_n():
    # 10^9 scores: the O(n) arrays would take 8 GB each; the window is
    # O(log(1e17) / epsilon) ranks, below 400 here: a peak of a few arrays of
    # 400 floats (3.2 kB each), far below 10 MB (no clock: memory is the
    # measure that does not depend on the machine's load).
    tracemalloc.start()
    try:
        ranks, pmf = _rank_law(10**9, 0.91, 1.0, 100)
        found = _tight_central(10**9, 0.1, 1.0, 1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20
    assert ranks.size < 400 and pmf.sum() == pytest.approx(1.0)
    assert found is not None and 0.9 <= found[1] <= 0.9 + 1e-6
