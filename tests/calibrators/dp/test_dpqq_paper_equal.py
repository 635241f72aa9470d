"""Equal client sizes: the dp-qq paper plan's shared selections and shift bound."""

import numpy as np
import pytest

from skfedcp.calibrators._dp import _plan
from skfedcp.calibrators._dp._paper_equal import EqualSelections
from skfedcp.calibrators._qq._selection import select_qq_ranks


def _targets(alpha, step=1):
    return [alpha * (1 - g) / (1 - g * alpha) for g in _plan.GAMMA_GRID[::step]]


@pytest.mark.parametrize(
    "m, n, alpha, step",
    [
        (8, 1000, 0.1, 1),
        (1, 50, 0.1, 1),
        (3, 3, 0.5, 7),
        (5, 200, 0.05, 2),
        (17, 31, 0.1, 3),
        (64, 400, 0.1, 5),
        (300, 60, 0.1, 11),
        (40, 7, 0.2, 1),
        (2, 2, 0.1, 9),  # no valid pair at any target
    ],
)
def test_shared_selections_are_the_staircase_ones(m, n, alpha, step):
    # Increasing targets (the gamma search's order: a target reuses the
    # last one's brackets), then decreasing ones (a fresh bisection).
    selections = EqualSelections(m, n)
    targets = _targets(alpha, step)
    for target in targets + targets[::-1]:
        assert selections.select(target) == select_qq_ranks(
            (n,) * m, target, local_rank="auto"
        )


def test_shared_selections_on_random_sizes():
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(12):
        m, n = int(rng.integers(1, 65)), int(rng.integers(1, 1500))
        alpha = float(rng.choice([0.05, 0.1, 0.2]))
        selections = EqualSelections(m, n)
        for target in _targets(alpha, int(rng.integers(1, 6))):
            expected = select_qq_ranks((n,) * m, target, local_rank="auto")
            assert selections.select(target) == expected
            checked += expected.feasible
    assert checked >= 100


@pytest.mark.parametrize(
    "sizes, alpha, epsilon, n_bins",
    [
        ((1000,) * 8, 0.1, 1.0, 100),
        ((300,) * 20, 0.05, 5.0, 100),
        ((150,) * 40, 0.1, 5.0, 50),
        ((80,) * 3, 0.1, 5.0, 20),
        ((2000,) * 64, 0.1, 1.0, 300),
        ((500,) * 100, 0.1, 1.0, 100),
    ],
)
def test_equal_plan_is_the_reference_plan(sizes, alpha, epsilon, n_bins, gamma_search):
    # The reference: every gamma with select_qq_ranks and its exact score,
    # no bound; then the shift bound alone (no shared selections). Every
    # plan field, bit for bit.
    args = (sizes, alpha, epsilon, n_bins, "auto")
    fast = gamma_search(args)
    assert dict(fast)["feasible"]
    assert fast == gamma_search(args, _SHARED_EQUAL=False)
    assert fast == gamma_search(args, _USE_BOUNDS=False)


def test_equal_sizes_skip_gammas_by_the_shift_gain(gamma_search):
    # Eight clients of 1,000 rows: the bound leaves about a third of the
    # 29 gammas the grid-order search used to score before its tau bound
    # stopped it.
    args = ((1000,) * 8, 0.1, 1.0, 100, "auto")
    calls = []
    scored = _plan._scored

    def counting(*a):
        calls.append(a[2])
        return scored(*a)

    fast = gamma_search(args, _scored=counting)
    assert len(calls) <= 12
    calls.clear()
    assert fast == gamma_search(args, _scored=counting, _USE_BOUNDS=False)
    assert len(calls) == len(_plan.GAMMA_GRID)


@pytest.mark.slow
def test_equal_plan_of_huge_clients_is_the_staircase_plan(gamma_search):
    # Eight clients announcing 10^9 rows each: the staircase over l in
    # 1..10^9 of select_qq_ranks (seconds per plan) and the shared
    # selections (a divide and conquer over the 8 ks) give the same plan.
    args = ((10**9,) * 8, 0.1, 1.0, 100, "auto")
    fast = gamma_search(args)
    assert dict(fast)["feasible"]
    assert fast == gamma_search(args, _SHARED_EQUAL=False)
