"""The dp-qq paper plan's bounded search gives the plan of the plain search."""

import math
from collections import Counter

import numpy as np
import pytest

from skfedcp.calibrators._dp import _paper_bounds, _paper_search, _plan
from skfedcp.calibrators._qq._selection import select_qq_ranks
from skfedcp.privacy import dp_qq_local_correction
from skfedcp.utils._quantile import conformal_rank


def _profiles(seed, count, clients):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        m = int(rng.choice(clients))
        low, high = [(10, 1000), (20, 400), (10, 200), (50, 80)][rng.integers(4)]
        sizes = rng.integers(low, high + 1, size=m)
        if rng.random() < 0.3:  # repeated sizes: groups of several clients
            sizes = rng.choice(sizes[: max(m // 3, 30)], size=m)
        alpha = float(rng.choice([0.05, 0.1]))
        epsilon = float(rng.choice([0.5, 1.0, 5.0]))
        yield tuple(int(x) for x in sizes), alpha, epsilon, 100


def _bench_sizes(seed, m, low, high):
    # The sizes of benchmarks/bench_plans.py's dp-qq paper cells.
    rng = np.random.default_rng(seed)
    return tuple(int(x) for x in rng.integers(low, high + 1, size=m))


@pytest.mark.parametrize("seed", [0, 1])
def test_bounded_search_gives_the_reference_plan(seed, gamma_search):
    # The reference: every gamma of the grid with its rank selection and
    # exact score, in grid order, no bound at all. Every plan field, bit for
    # bit (benchmarks: 320 profiles of 2-1000 clients against main too).
    profiles = list(_profiles(seed, 9, (24, 30, 40)))
    if seed == 0:  # the 40-client cell: exact ties between gammas
        profiles.append((_bench_sizes(9, 40, 20, 400), 0.1, 1.0, 100))
    else:  # the 100-client cell
        profiles.append((_bench_sizes(10, 100, 10, 1000), 0.1, 1.0, 100))
    for sizes, alpha, epsilon, n_bins in profiles:
        args = (sizes, alpha, epsilon, n_bins, "auto")
        fast = gamma_search(args)
        assert fast == gamma_search(args, _USE_BOUNDS=False)


def test_near_tie_falls_back_to_the_grid_order_search(monkeypatch, gamma_search):
    # With a huge tie margin every profile is a near tie: the grid-order
    # search decides, and the plan is the same.
    args = (_bench_sizes(9, 40, 20, 400), 0.1, 1.0, 100, "auto")
    calls = []
    sequential = _plan._sequential_search

    def counting(*a):
        calls.append(a)
        return sequential(*a)

    fast = gamma_search(args, _sequential_search=counting)
    assert not calls
    monkeypatch.setattr(_paper_search, "_NEAR", 1.0)
    slow = gamma_search(args, _sequential_search=counting)
    assert len(calls) == 1
    assert fast == slow


def test_fixed_ranks_are_the_conformal_ranks():
    sizes = np.arange(1, 3000, dtype=np.float64)
    for alpha in (0.1, 0.7, 0.0905, 0.05 * (1 - 0.37) / (1 - 0.37 * 0.05)):
        ranks = _paper_bounds.fixed_ranks(sizes, alpha)
        assert ranks.tolist() == [conformal_rank(int(n), alpha) for n in sizes]


@pytest.mark.parametrize("batched", [True, False])
def test_packed_bounds_are_below_every_score_of_their_rows(batched):
    # One row per gamma (and one block row of gammas of one l_cor): below
    # each score the search would compute, on coarse and fine nodes, by the
    # count DP of all rows or each row's own law.
    checked = 0
    for sizes, alpha, epsilon, n_bins in _profiles(6, 3, (40, 100)):
        m, counts = len(sizes), tuple(sorted(Counter(sizes).items()))
        ns = np.array([n for n, _ in counts], dtype=np.float64)
        grid = [g for g in _plan.GAMMA_GRID if g <= 0.3]
        corr = {g: dp_qq_local_correction(epsilon, n_bins, g, alpha, m) for g in grid}
        ta = {g: alpha * (1 - g) / (1 - g * alpha) for g in grid}
        tau = {g: (1 - alpha) / (1 - g * alpha) for g in grid}
        ranks = {g: _paper_bounds.fixed_ranks(ns, ta[g]) for g in grid}
        scores = {}
        for g in grid:
            sel = select_qq_ranks(sizes, ta[g], local_rank="fixed")
            if not sel.feasible:
                continue
            shifted = tuple(r + corr[g] for r in sel.local_ranks)
            if sum(r <= n for r, n in zip(shifted, sizes, strict=True)) >= sel.k:
                scores[g] = _plan._qq_score(sizes, shifted, sel.k)
        block = [g for g in grid if corr[g] == corr[grid[-1]]]
        rows = [([g], ranks[g], ranks[g] + corr[g], tau[g]) for g in grid]
        first, last = block[0], block[-1]
        rows.append((block, ranks[last], ranks[first] + corr[last], tau[first]))
        for n_nodes in (4, 16, 64):
            bounds = _paper_bounds.packed_bounds(
                counts,
                np.array([r[1] for r in rows]),
                np.array([r[2] for r in rows]),
                [r[3] for r in rows],
                n_nodes,
                batched,
            )
            for (gammas, *_), bound in zip(rows, bounds, strict=True):
                for g in gammas:
                    if g in scores:
                        assert bound <= scores[g]
                        checked += math.isfinite(bound)
    assert checked >= 100


def test_a_block_whose_last_gamma_keeps_no_client_certifies_nothing():
    # The last gamma of a block (``top``) may leave no client active while
    # the first keeps some (ranks cross n_j inside the block): no kappa is
    # certified then, the block is no bound (one gamma alone: infeasible).
    counts = ((18, 2), (19, 1), (20, 3))
    fixed = {18: 18, 19: 19, 20: 20}
    top = {18: 19, 19: 20, 20: 21}
    assert _plan._packed_score_bound(counts, fixed, 1, 0.9, top=top) == -math.inf
    assert _plan._packed_score_bound(counts, top, 1, 0.9) == math.inf
