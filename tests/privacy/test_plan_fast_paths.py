"""The fast plan searches make the reference searches' decisions (issue 21).

* ``private_conformal_n_bins`` ranks the grid with run-compressed values and
  re-ranks near ties with the reference values: the same choice as ranking
  every grid value with the reference :func:`_expected_threshold`;
* the tight dp-qq search replays the bisection of the reference search
  (one ``_tight_lower_bound`` call per level and k) with fewer evaluations:
  the same level and k.
"""

from collections import Counter

import numpy as np
import pytest
from _n_bins_reference import materialised_n_bins

from skfedcp.calibrators._dp import _tight
from skfedcp.privacy import _n_bins, _quantile


@pytest.mark.parametrize("seed", range(4))
def test_n_bins_fast_ranking_is_the_reference_one(seed):
    rng = np.random.default_rng(seed)
    grid = _n_bins._default_grid()
    for _ in range(5):
        n = int(rng.integers(1, 60_000))
        alpha = float(rng.choice([0.01, 0.05, 0.1, 0.2, 0.5]))
        epsilon = float(rng.choice([0.1, 0.5, 1.0, 5.0, 50.0]))
        fast = _n_bins._n_bins_expected.__wrapped__(n, alpha, epsilon, grid)
        assert fast == materialised_n_bins(n, alpha, epsilon, grid)


@pytest.mark.parametrize("n", [1, 30, 1000, 5000, 48_410])
def test_run_values_match_the_reference(n):
    scores = np.arange(1, n + 1) / (n + 1.0)
    gamma = _quantile._gamma(n, 0.1, 1.0)
    for m in (100, 999, 10**4, 10**6):
        level = _quantile._level(n, 0.1, 1.0, m, gamma)
        ref = _n_bins._expected_threshold(scores, level, 1.0, m)
        fast = _n_bins._expected_threshold_runs(scores, level, 1.0, m)
        assert abs(fast - ref) <= 1e-14


@pytest.mark.parametrize("n", [5000, 48_410, 10**6 + 7000, 10**9 + 7000, 3 * 10**12])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
def test_windowed_bins_match_every_bin(n, epsilon, monkeypatch):
    # With fewer bins than scores, the bins within _RUN_DROP logits of the
    # best (read at the window's edges only) give the value of every bin to
    # the rounding of the sum; the window is taken where it is narrower than
    # the grid (every case here at m >= 10^4).
    scores = _n_bins._UniformScores(n)
    gamma = _quantile._gamma(n, 0.1, epsilon)
    taken = 0
    for m in (100, 999, 10**4, 10**5, 10**6):
        if m >= n:
            continue
        level = _quantile._level(n, 0.1, epsilon, m, gamma)
        if level >= 1.0:
            continue
        edges = np.linspace(0.0, 1.0, m + 1)
        taken += _n_bins._windowed_bins(scores, level, epsilon, edges) is not None
        fast = _n_bins._expected_threshold_runs(scores, level, epsilon, m)
        with monkeypatch.context() as patch:
            patch.setattr(_n_bins, "_windowed_bins", lambda *args: None)
            full = _n_bins._expected_threshold_runs(scores, level, epsilon, m)
        reference = _n_bins._expected_threshold(scores, level, epsilon, m)
        assert abs(fast - full) <= 1e-15
        assert abs(fast - reference) <= 1e-14
    assert taken >= 1


@pytest.mark.parametrize("n", [10**6 + 7000, 10**9 + 7000, 3 * 10**12])
def test_n_bins_for_huge_n_is_the_reference_ranking(n):
    # The choice (with its single-candidate shortcut) is the first strict
    # minimum of the reference values over the whole grid.
    for epsilon in (0.5, 5.0):
        grid = _n_bins._default_grid()
        scores = _n_bins._UniformScores(n)
        gamma = _quantile._gamma(n, 0.1, epsilon)
        values = [
            _n_bins._expected_threshold(
                scores, _quantile._level(n, 0.1, epsilon, m, gamma), epsilon, m
            )
            for m in grid
        ]
        expected = grid[int(np.argmin(values))]
        assert _n_bins._n_bins_expected.__wrapped__(n, 0.1, epsilon, grid) == expected


def _reference_tight_search(sizes, alpha, epsilon, n_bins, utility):
    """The search before issue 21: one exact bound per (level, k)."""
    m = len(sizes)
    groups = tuple(sorted(Counter(sizes).items()))
    target = 1.0 - alpha + _tight._BOUND_MARGIN

    def bound(q, k):
        return _tight._tight_lower_bound(groups, q, k, epsilon, n_bins, utility)

    candidates, q_hi = [], 1.0
    for k in range(1, m + 1):
        if bound(q_hi, k) < target:
            continue
        lo, hi = 0.5, q_hi
        if bound(lo, k) >= target:
            hi = lo
        else:
            for _ in range(_tight._TIGHT_LEVEL_STEPS):
                mid = 0.5 * (lo + hi)
                lo, hi = (lo, mid) if bound(mid, k) >= target else (mid, hi)
        candidates.append((hi, k))
        q_hi = hi
    best = None
    for q, k in candidates:
        expected = _tight._simulated_coverage(groups, q, k, epsilon, n_bins, utility)
        if best is None or expected < best[0] - 1e-9:
            best = (expected, q, k)
    return None if best is None else best[1:]


@pytest.mark.parametrize(
    "sizes, alpha, epsilon, n_bins, utility",
    [
        ((40, 60, 55), 0.1, 5.0, 50, "quantile"),
        ((30, 80, 120, 45), 0.1, 3.0, 64, "rank"),
        ((25, 25, 40), 0.2, 10.0, 20, "quantile"),
    ],
)
def test_tight_search_replays_the_reference(sizes, alpha, epsilon, n_bins, utility):
    plan = dict(
        _tight._dpqq_tight_search_chained.__wrapped__(
            sizes, alpha, epsilon, n_bins, utility
        )
    )
    ref = _reference_tight_search(sizes, alpha, epsilon, n_bins, utility)
    assert plan["feasible"] == (ref is not None)
    if ref is not None:
        assert (plan["levels"][0], plan["k"]) == ref


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_tight_search_replays_the_reference_random(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 6))
    sizes = tuple(int(x) for x in rng.integers(20, 150, m))
    alpha = float(rng.choice([0.05, 0.1, 0.2]))
    epsilon = float(rng.choice([2.0, 5.0, 10.0]))
    utility = str(rng.choice(["quantile", "rank"]))
    test_tight_search_replays_the_reference(sizes, alpha, epsilon, 100, utility)


def test_tight_bounds_engine_matches_the_single_k_bound():
    groups = ((30, 2), (70, 1), (120, 1))
    bounds = _tight._TightBounds(groups, 5.0, 100, "quantile")
    for q in (0.8, 0.93, 0.99):
        for k in (1, 2, 4):
            ref = _tight._tight_lower_bound(groups, q, k, 5.0, 100)
            assert abs(bounds(q, k) - ref) <= 1e-14


@pytest.mark.parametrize(
    "groups, utility",
    [
        (((1500, 1), (1800, 1), (2000, 1)), "quantile"),  # composite rule
        (((300, 3), (450, 2), (600, 1)), "rank"),
        (((40, 2), (60, 1), (55, 1)), "quantile"),  # exact nodes
    ],
)
def test_aimed_replay_is_the_plain_bisection(groups, utility):
    # The replay aims its evaluations with one-pass estimates but decides
    # every midpoint with a fully evaluated level: the level of a plain
    # 30-step bisection of the engine's bound, for every feasible k.
    target = 1.0 - 0.1 + _tight._BOUND_MARGIN
    fast = _tight._TightBounds(groups, 5.0, 100, utility)
    plain = _tight._TightBounds(groups, 5.0, 100, utility)
    m = sum(c for _, c in groups)
    checked = 0
    for k in range(1, m + 1):
        if plain(1.0, k) < target or plain(0.5, k) >= target:
            continue
        lo, hi = 0.5, 1.0
        for _ in range(_tight._TIGHT_LEVEL_STEPS):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if plain(mid, k) >= target else (mid, hi)
        assert fast(1.0, k) >= target > fast(0.5, k)
        assert _tight._replayed_bisection(fast, k, 1.0, target) == hi
        checked += 1
    assert checked >= 1
    assert fast.evaluations < plain.evaluations
