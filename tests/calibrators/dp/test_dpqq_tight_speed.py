"""The fast paths of the chained tight dp-qq search (the reference of the plan
before session 9, ``_dpqq_tight_search_chained``) give its plain search's plan."""

from collections import Counter

import numpy as np
import pytest

from skfedcp.calibrators._dp import _tight, _tight_prune
from skfedcp.privacy._quantile import _logits_from_counts


def _plain_plan(monkeypatch, sizes, alpha, epsilon, n_bins, utility):
    """The plan with the early stop and the deferred check at 1/2 turned off."""
    with monkeypatch.context() as patch:
        patch.setattr(_tight_prune, "_PRUNE_TAIL", False)
        patch.setattr(_tight, "_HALF_GUESS", np.inf)
        return _tight._dpqq_tight_search_chained.__wrapped__(
            sizes, alpha, epsilon, n_bins, utility
        )


def _profiles(count):
    rng = np.random.default_rng(20261127)
    for _ in range(count):
        m = int(rng.integers(2, 13))
        sizes = tuple(int(n) for n in rng.integers(20, 160, m))
        yield (
            sizes,
            float(rng.choice([0.05, 0.1])),
            float(rng.choice([1.0, 5.0])),
            str(rng.choice(["quantile", "rank"])),
        )


@pytest.mark.parametrize("case", list(_profiles(20)))
def test_fast_tight_plan_is_the_plain_one(monkeypatch, case):
    sizes, alpha, epsilon, utility = case
    fast = _tight._dpqq_tight_search_chained.__wrapped__(
        sizes, alpha, epsilon, 50, utility
    )
    plain = _plain_plan(monkeypatch, sizes, alpha, epsilon, 50, utility)
    assert fast == plain  # every key, every bit


def test_early_stop_skips_bisections(monkeypatch):
    # 20 clients, quantile utility: the best k is near the middle and the
    # simulated coverage rises after it; the later k are proved, not bisected.
    sizes = tuple(int(n) for n in np.random.default_rng(8).integers(20, 200, 20))
    calls = []
    bisect = _tight._replayed_bisection

    def counted(bounds, k, q_top, target):
        calls.append(k)
        return bisect(bounds, k, q_top, target)

    monkeypatch.setattr(_tight, "_replayed_bisection", counted)
    plan = dict(_tight._dpqq_tight_search_chained.__wrapped__(sizes, 0.1, 2.0, 100))
    assert plan["feasible"]
    assert max(calls) <= plan["k"] + 3 < len(sizes)


@pytest.mark.parametrize("utility", ["quantile", "rank"])
def test_simulated_coverage_rises_with_the_level(utility):
    # The proof's step 1, exactly on the engine: S(q, k) does not decrease
    # in q (nor in k), on the public data sets of the search.
    groups = ((30, 2), (75, 1), (140, 1))
    counts_of = _tight._simulation_counts(groups, 40)
    levels = np.linspace(0.5, 1.0, 41)
    values = np.array(
        [
            _tight_prune._simulated_coverage_all_k(
                groups, q, 2.0, 40, utility, counts_of
            )
            for q in levels
        ]
    )
    assert (np.diff(values, axis=0) >= -1e-13).all()
    assert (np.diff(values, axis=1) >= -1e-13).all()


@pytest.mark.parametrize("utility", ["quantile", "rank"])
def test_logits_have_increasing_differences(utility):
    # logit(b + 1, q) - logit(b, q) does not decrease in q, for any counts:
    # the release law is stochastically increasing in the level.
    rng = np.random.default_rng(3)
    n, n_bins = 60, 12
    counts = rng.multinomial(n, np.full(n_bins, 1.0 / n_bins), size=50)
    lower = np.cumsum(counts, axis=1) - counts
    greater = n - lower - counts
    levels = np.linspace(0.5, 1.0, 26)
    steps = np.array(
        [
            np.diff(_logits_from_counts(lower, greater, n, q, 3.0, utility), axis=1)
            for q in levels
        ]
    )
    assert (np.diff(steps, axis=0) >= -1e-12).all()


def test_all_k_simulated_coverage_is_the_single_k_one():
    groups = ((25, 1), (60, 2), (90, 1))
    counts_of = _tight._simulation_counts(groups, 30)
    for q in (0.5, 0.81, 0.97):
        every = _tight_prune._simulated_coverage_all_k(
            groups, q, 1.0, 30, "quantile", counts_of
        )
        for k in range(1, 5):
            one = _tight._simulated_coverage(groups, q, k, 1.0, 30)
            assert abs(every[k - 1] - one) <= 1e-14


@pytest.mark.parametrize("q_top", [1.0, 0.97, 0.7123456789])
def test_all_pass_level_is_the_bisection_that_always_passes(q_top):
    lo, hi = 0.5, q_top
    for _ in range(_tight._TIGHT_LEVEL_STEPS):
        mid = 0.5 * (lo + hi)
        lo, hi = lo, mid
    assert _tight._all_pass_level(q_top) == hi


def test_deferred_half_check_keeps_levels_of_small_k():
    # Plans whose level is 1/2 (LB(1/2, k) passes: k = 4, 5) and plans above.
    groups = tuple(sorted(Counter((200, 200, 250, 300, 300)).items()))
    target = 1.0 - 0.5 + _tight._BOUND_MARGIN
    fast = _tight._TightBounds(groups, 10.0, 50, "quantile")
    plain = _tight._TightBounds(groups, 10.0, 50, "quantile")
    q_fast = q_plain = 1.0
    halves = 0
    for k in range(1, 6):
        if plain(q_plain, k) < target:
            continue
        level = _tight._smallest_level(fast, k, q_fast, target)
        if plain(0.5, k) >= target:
            expected = 0.5
        else:
            expected = _tight._replayed_bisection(plain, k, q_plain, target)
        assert level == expected
        halves += level == 0.5
        q_fast = q_plain = level
    assert 1 <= halves < 5
