"""The Byzantine dp-qq paper plan's Riemann score bounds against the scores."""

import math

import numpy as np
import pytest

from skfedcp.calibrators._dp import _byzantine as _byz
from skfedcp.calibrators._dp import _byzantine_bounds
from skfedcp.calibrators._dp._byzantine_bounds import CoarseBounds
from skfedcp.calibrators._dp._plan import GAMMA_GRID, _qq_score
from skfedcp.calibrators._qq._byzantine import fixed_certified_pair, fixed_k_floor
from skfedcp.privacy import dp_qq_local_correction


def _score(sizes, tau, correction, c):
    """The gamma's all-honest coverage as the plan computes it, or None."""
    found = fixed_certified_pair(sizes, 1.0 - tau, c)
    if found is None:
        return None
    ranks, k, _ = found
    shifted = tuple(r + correction for r in ranks)
    if sum(r <= n for r, n in zip(shifted, sizes, strict=True)) < k + c:
        return None
    return _qq_score(sizes, shifted, k)


@pytest.mark.parametrize(
    ("m", "c", "seed", "epsilon"),
    [(12, 1, 0, 10.0), (30, 2, 1, 10.0), (40, 3, 2, 3.0), (60, 5, 3, 10.0)],
)
def test_coarse_bounds_are_below_every_score(m, c, seed, epsilon):
    sizes = tuple(int(n) for n in np.random.default_rng(seed).integers(20, 400, m))
    alpha, n_bins = 0.1, 100
    grid = GAMMA_GRID[::4]
    taus = [(1.0 - alpha) / (1.0 - g * alpha) for g in grid]
    corrections = [dp_qq_local_correction(epsilon, n_bins, g, alpha, m) for g in grid]
    bounds = CoarseBounds(sizes, c)
    checked = 0
    for i, (tau, correction) in enumerate(zip(taus, corrections, strict=True)):
        if correction >= max(sizes):
            continue
        score = _score(sizes, tau, correction, c)
        coarse = bounds.bound(i, taus, corrections, math.inf)
        fine = bounds._bounds([(tau, correction)], 64)[0]
        if score is None:
            continue
        checked += 1
        assert coarse <= score + 1e-12
        assert fine <= score + 1e-12
        # The skip before the pair: never taken for a gamma that has a score.
        floor = fixed_k_floor(sizes, 1.0 - tau, c)
        assert floor is not None
    assert checked


@pytest.mark.parametrize("seed", range(3))
def test_plan_is_the_plan_without_the_shortcuts(seed, monkeypatch):
    sizes = tuple(int(n) for n in np.random.default_rng(seed).integers(20, 300, 25))
    args = (sizes, 0.1, 10.0, 100, "auto", 2)
    fast = _byz._paper_plan(*args)
    monkeypatch.setattr(_byz, "_USE_BOUNDS", False)
    fixed_certified_pair.cache_clear()
    slow = _byz._paper_plan(*args)
    assert fast == slow


@pytest.mark.parametrize(("m", "c", "seed"), [(30, 2, 1), (60, 5, 3)])
def test_quarter_node_bounds_of_the_tree_are_below_every_score(m, c, seed):
    # Past _BOUND_DP_MAX_CLIENTS clients (forced here: batched off) a gamma
    # is bounded on a quarter of the nodes first; with best = -inf that
    # value is returned as it is.
    sizes = tuple(int(n) for n in np.random.default_rng(seed).integers(20, 400, m))
    alpha, epsilon, n_bins = 0.1, 10.0, 100
    grid = GAMMA_GRID[::4]
    taus = [(1.0 - alpha) / (1.0 - g * alpha) for g in grid]
    corrections = [dp_qq_local_correction(epsilon, n_bins, g, alpha, m) for g in grid]
    bounds = CoarseBounds(sizes, c)
    bounds.batched = False
    checked = 0
    for i, (tau, correction) in enumerate(zip(taus, corrections, strict=True)):
        if correction >= max(sizes):
            continue
        score = _score(sizes, tau, correction, c)
        quarter = bounds.bound(i, taus, corrections, -math.inf)
        assert quarter == bounds._bounds([(tau, correction)], 4)[0]
        assert i not in bounds.known  # returned, not kept
        if score is None:
            continue
        checked += 1
        assert quarter <= score + 1e-12
    assert checked


@pytest.mark.parametrize("seed", range(2))
def test_plan_by_the_tree_bounds_is_the_plan_without_the_shortcuts(seed, monkeypatch):
    # The product tree's one-gamma-at-a-time bounds (quarter nodes first),
    # forced on a small federation, against the search without any bound.
    sizes = tuple(int(n) for n in np.random.default_rng(seed).integers(20, 300, 40))
    args = (sizes, 0.1, 10.0, 100, "auto", 2)
    monkeypatch.setattr(_byzantine_bounds, "_BOUND_DP_MAX_CLIENTS", 0)
    nodes = []
    original = CoarseBounds._bounds

    def spy(self, rows, n_nodes):
        nodes.append(n_nodes)
        return original(self, rows, n_nodes)

    monkeypatch.setattr(CoarseBounds, "_bounds", spy)
    fast = _byz._paper_plan(*args)
    assert 4 in nodes  # the quarter-node bounds decided some gammas
    monkeypatch.setattr(_byz, "_USE_BOUNDS", False)
    fixed_certified_pair.cache_clear()
    slow = _byz._paper_plan(*args)
    assert fast == slow
