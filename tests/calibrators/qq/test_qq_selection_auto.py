"""``local_rank="auto"`` with clients of unequal sizes (issue 14, item 1).

"auto" searches the family l_j = ceil(c (n_j + 1)) of one common level c:

* while m x (distinct sizes) <= _JOINT_MAX_WORK, over every level and every
  k (the joint search, ``local_rank="joint"``);
* up to _LEVEL_MAX_WORK, over every level for the k within _LEVEL_K_SPAN
  of the k of Appendix A.1 (then the smaller of that optimum and A.1);
* beyond, it is Appendix A.1.

Each tier is checked here against an exact enumeration with rational
coverages (the tiers are forced on small cases by lowering the limits);
the Monte Carlo check of a selected pair is marked slow.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from _qq_family import brute_force, target

from skfedcp.calibrators._qq import _selection as _qq_selection
from skfedcp.calibrators._qq._coverage import (
    qq_coverage_unequal,
    qq_coverage_unequal_fraction,
)
from skfedcp.calibrators._qq._selection import select_qq_ranks

REFERENCE_SIZES = [5, 10, 20, 40, 15, 8, 30, 12]


@pytest.fixture
def limits(monkeypatch):
    """Set the work limits of the tiers (and clear the selection cache)."""

    def set_limits(joint, level):
        monkeypatch.setattr(_qq_selection, "_JOINT_MAX_WORK", joint)
        monkeypatch.setattr(_qq_selection, "_LEVEL_MAX_WORK", level)
        select_qq_ranks.cache_clear()

    yield set_limits
    select_qq_ranks.cache_clear()


def random_case(seed, low=1, high=13, max_m=6):
    rng = np.random.default_rng([23, seed])
    m = int(rng.integers(2, max_m))
    sizes = tuple(int(s) for s in rng.integers(low, high, size=m))
    if len(set(sizes)) == 1:
        sizes = (*sizes[:-1], sizes[-1] + 1)
    alpha = float(rng.choice([0.05, 0.1, 0.2, 0.3]))
    return sizes, alpha, bool(seed % 3 == 0)


class TestJointTier:
    def test_reference_case(self):
        # Issue 14: A.1 gives M = 0.91004 (k = 3); "auto" now the joint optimum.
        select_qq_ranks.cache_clear()
        sel = select_qq_ranks(REFERENCE_SIZES, 0.1)
        assert sel.local_ranks == (5, 9, 18, 34, 14, 8, 26, 11)
        assert sel.k == 6
        exact = qq_coverage_unequal_fraction(REFERENCE_SIZES, sel.local_ranks, 6)
        assert exact >= Fraction(9, 10)
        assert abs(sel.coverage - float(exact)) < 1e-13
        fixed = select_qq_ranks(REFERENCE_SIZES, 0.1, local_rank="fixed")
        assert fixed.k == 3 and sel.coverage < fixed.coverage - 0.009

    @pytest.mark.parametrize("case", range(10))
    def test_exact_rational_family(self, case):
        sizes, alpha, clip = random_case(case)
        select_qq_ranks.cache_clear()
        sel = select_qq_ranks(sizes, alpha, clip_local_rank=clip)
        best = brute_force(sizes, alpha, clip=clip)
        if best is None:
            assert not sel.feasible
            return
        value, _, ranks, k = best
        assert (sel.local_ranks, sel.k) == (ranks, k)
        assert abs(sel.coverage - float(value)) < 1e-13


class TestLevelTier:
    @pytest.mark.parametrize("case", range(10))
    def test_exact_rational_family_at_the_fixed_k(self, case, limits):
        # Joint tier off: the level is searched for k near A.1's k; the answer
        # is the exact argmin over those (c, k), or A.1 if not smaller.
        limits(joint=0, level=10**9)
        sizes, alpha, clip = random_case(case, low=2, high=16)
        sel = select_qq_ranks(sizes, alpha, clip_local_rank=clip)
        fixed = select_qq_ranks(sizes, alpha, local_rank="fixed", clip_local_rank=clip)
        m, span = len(sizes), _qq_selection._LEVEL_K_SPAN
        k = fixed.k if fixed.feasible else m
        best = brute_force(
            sizes,
            alpha,
            clip=clip,
            only_k=range(max(1, k - span), min(m, k + span) + 1),
        )
        candidates = []
        if fixed.feasible:
            exact_fixed = qq_coverage_unequal_fraction(sizes, fixed.local_ranks, k)
            candidates.append((exact_fixed, 0, fixed.local_ranks, k))
        if best is not None:
            candidates.append((best[0], 1, best[2], best[3]))
        if not candidates:
            assert not sel.feasible
            return
        # The level optimum replaces A.1 only when strictly smaller.
        value, _, ranks, k_best = min(candidates, key=lambda c: (c[0], c[1]))
        assert sel.feasible
        assert (sel.local_ranks, sel.k) == (ranks, k_best)
        assert abs(sel.coverage - float(value)) < 1e-13
        assert value >= target(alpha)
        if fixed.feasible:
            assert sel.coverage <= fixed.coverage

    def test_reference_case(self, limits):
        limits(joint=0, level=10**9)
        sel = select_qq_ranks(REFERENCE_SIZES, 0.1)
        # k in 1..7 around A.1's k = 3: the same optimum as the joint tier
        # (k = 6, M = 0.90029), found by the level search.
        assert sel == select_qq_ranks(REFERENCE_SIZES, 0.1, local_rank="joint")
        assert sel.k == 6


class TestTiers:
    def test_fixed_beyond_the_limits(self, limits):
        limits(joint=0, level=0)
        assert select_qq_ranks(REFERENCE_SIZES, 0.1) == select_qq_ranks(
            REFERENCE_SIZES, 0.1, local_rank="fixed"
        )

    def test_tier_by_work(self):
        # 8 distinct sizes: 64 <= _JOINT_MAX_WORK, the joint search.
        assert 8 * 8 <= _qq_selection._JOINT_MAX_WORK
        # 60 clients of 30 sizes: 1,800, the level search near A.1's k.
        sizes = [10 + (j % 30) for j in range(60)]
        select_qq_ranks.cache_clear()
        sel = select_qq_ranks(sizes, 0.1)
        fixed = select_qq_ranks(sizes, 0.1, local_rank="fixed")
        assert abs(sel.k - fixed.k) <= _qq_selection._LEVEL_K_SPAN
        assert 0.9 - 1e-10 <= sel.coverage < fixed.coverage
        assert sel.coverage == pytest.approx(
            qq_coverage_unequal(sizes, sel.local_ranks, sel.k), abs=1e-13
        )

    @pytest.mark.parametrize("case", range(6))
    def test_never_above_the_fixed_rule(self, case):
        rng = np.random.default_rng([29, case])
        m = int(rng.integers(2, 40))
        sizes = tuple(int(s) for s in rng.integers(5, 200, size=m))
        alpha = float(rng.choice([0.05, 0.1, 0.2]))
        select_qq_ranks.cache_clear()
        auto = select_qq_ranks(sizes, alpha)
        fixed = select_qq_ranks(sizes, alpha, local_rank="fixed")
        if fixed.feasible:
            assert auto.feasible and auto.coverage <= fixed.coverage + 1e-13
        if auto.feasible:
            assert auto.coverage >= 1 - alpha - 1e-10
            # Ranks share one level: (l - 1)/(n + 1) < c <= l/(n + 1).
            pairs = list(zip(auto.local_ranks, sizes, strict=True))
            low = max(Fraction(l - 1, n + 1) for l, n in pairs)
            high = min(Fraction(l, n + 1) for l, n in pairs)
            assert low < high or auto == fixed

    def test_client_order_does_not_matter(self):
        # The choice depends on the multiset of sizes: a permutation of the
        # clients permutes the ranks.
        sizes = [5, 10, 20, 40, 15, 8, 30, 12]
        order = [3, 0, 7, 1, 6, 2, 5, 4]
        a = select_qq_ranks(sizes, 0.1)
        b = select_qq_ranks([sizes[i] for i in order], 0.1)
        assert b.local_ranks == tuple(a.local_ranks[i] for i in order)
        assert (b.k, b.coverage) == (a.k, a.coverage)

    def test_dp_qq_keeps_the_fixed_rule(self):
        # dp-qq calls select_qq_ranks with local_rank="fixed" for unequal
        # sizes: its plans do not move with the new default.
        sel = select_qq_ranks(REFERENCE_SIZES, 0.1, local_rank="fixed")
        ranks = tuple(math.ceil(0.9 * (n + 1) - 1e-9) for n in REFERENCE_SIZES)
        assert sel.local_ranks == ranks and sel.k == 3


@pytest.mark.slow
@pytest.mark.parametrize("tier", ["joint", "level"])
def test_monte_carlo_coverage(tier, seed, limits):
    # The selected pair's empirical coverage over REPS data sets (exponential
    # scores; any continuous law gives the same M) must match the exact M
    # within 4.5 binomial standard errors, sqrt(M (1 - M) / REPS) (two-sided
    # false alarm ~7e-6), and clear 1 - alpha by the same margin.
    reps = 200_000
    sizes = [5, 10, 20, 40, 15, 8, 30, 12, 25, 9]
    if tier == "level":
        limits(joint=0, level=10**9)
    sel = select_qq_ranks(sizes, 0.1)
    assert sel.feasible
    rng = np.random.default_rng([seed, 141, tier == "level"])
    covered = 0
    batch = 20_000
    for start in range(0, reps, batch):
        r = min(batch, reps - start)
        local = np.full((r, len(sizes)), np.inf)
        for j, (n_j, l_j) in enumerate(zip(sizes, sel.local_ranks, strict=True)):
            if l_j <= n_j:
                x = rng.exponential(size=(r, n_j))
                local[:, j] = np.partition(x, l_j - 1, axis=1)[:, l_j - 1]
        q = np.partition(local, sel.k - 1, axis=1)[:, sel.k - 1]
        covered += np.count_nonzero(rng.exponential(size=r) <= q)
    freq = covered / reps
    tol = 4.5 * math.sqrt(sel.coverage * (1 - sel.coverage) / reps)
    assert abs(freq - sel.coverage) <= tol
    assert freq >= 0.9 - tol


class TestCertificate:
    @pytest.mark.parametrize("case", range(8))
    def test_exact_degree_rule_against_rationals(self, case):
        # Clenshaw-Curtis with N + 1 points is exact for the degree-N
        # integrand: the value agrees with exact arithmetic within its bound.
        from skfedcp.calibrators._qq._coverage import (
            _active_groups,
            _coverage_unequal_certified,
        )

        rng = np.random.default_rng([31, case])
        m = int(rng.integers(1, 6))
        sizes = [int(s) for s in rng.integers(1, 15, size=m)]
        ranks = [int(rng.integers(1, n + 2)) for n in sizes]
        k = int(rng.integers(1, m + 1))
        value, bound = _coverage_unequal_certified(
            _active_groups(sizes, ranks), k, sum(sizes)
        )
        exact = qq_coverage_unequal_fraction(sizes, ranks, k)
        assert bound <= 1e-11
        assert abs(value - float(exact)) <= 1e-14

    def test_rule_is_exact_to_its_degree(self):
        from skfedcp.calibrators._qq._coverage import _clenshaw_curtis01

        t, w = _clenshaw_curtis01(20)
        assert (w > 0).all()
        for p in range(22):
            assert np.dot(w, t**p) == pytest.approx(1 / (p + 1), abs=1e-15)

    def test_failed_certificate_falls_back_to_the_fixed_rule(self, monkeypatch):
        # If the exact-degree value contradicted the search, "auto" would
        # return the paper's rule rather than an uncertified pair.
        monkeypatch.setattr(
            _qq_selection, "_coverage_unequal_certified", lambda g, k, N: (0.5, 0.0)
        )
        select_qq_ranks.cache_clear()
        try:
            sel = select_qq_ranks(REFERENCE_SIZES, 0.1)
            assert sel == select_qq_ranks(REFERENCE_SIZES, 0.1, local_rank="fixed")
        finally:
            select_qq_ranks.cache_clear()


@pytest.mark.parametrize("seed", [0, 1])
def test_level_search_from_a1_finds_what_the_ends_find(seed, monkeypatch):
    """The level search starts at A.1's level; from the two ends of the range
    it finds the same first valid level of every k, so the same pair."""
    from skfedcp.calibrators._qq import _joint

    sizes = tuple(np.random.default_rng(seed).integers(10, 1001, 30).tolist())
    k_a1 = select_qq_ranks(sizes, 0.1, local_rank="fixed").k
    ks = list(range(max(1, k_a1 - 4), min(30, k_a1 + 4) + 1))
    fast = _joint._select_joint(sizes, 0.1, False, only_k=ks)
    # The search of _joint.py (test_qq_levels.py compares the two further).
    monkeypatch.setattr(_joint, "_FAST_LEVELS", False)
    started = _joint._select_joint(sizes, 0.1, False, only_k=ks)
    assert fast == started
    original = _joint._first_feasible
    monkeypatch.setattr(
        _joint,
        "_first_feasible",
        lambda cov, ks, levels, start=None: original(cov, ks, levels),
    )
    ends = _joint._select_joint(sizes, 0.1, False, only_k=ks)
    assert started == ends
