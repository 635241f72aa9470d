"""Joint search over one common level c and k for clients of unequal sizes.

``select_qq_ranks(..., local_rank="joint")`` returns, over the family
l_j = ceil(c (n_j + 1)), c in (0, 1), k in 1..m, the pair with the smallest
exact coverage M >= 1 - alpha (issue 14, item 1). These tests check it against
a literal enumeration of the family with exact rational coverages.
"""

import itertools
import math
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from _qq_family import brute_force

from skfedcp.calibrators._qq._coverage import (
    qq_coverage_unequal,
    qq_coverage_unequal_fraction,
)
from skfedcp.calibrators._qq._order_statistics import local_order_statistics
from skfedcp.calibrators._qq._selection import select_qq_ranks
from skfedcp.federated import ClientPartition

REFERENCE_SIZES = [5, 10, 20, 40, 15, 8, 30, 12]


def literal_coverage(sizes, ranks, k):
    """Appendix A.1, literally: subsets A of clients below t, then tuples."""
    m, N = len(sizes), sum(sizes)
    total = Fraction(0)
    for j in range(k, m + 1):
        for subset in itertools.combinations(range(m), j):
            ranges = [
                range(ranks[a], sizes[a] + 1) if a in subset else range(0, ranks[a])
                for a in range(m)
            ]
            for idx in itertools.product(*ranges):
                prod = math.prod(comb(sizes[a], i) for a, i in enumerate(idx))
                total += Fraction(prod, comb(N, sum(idx)))
    return 1 - total / (N + 1)


class TestReferenceCase:
    def test_joint_search(self):
        # Issue 14: A.1 gives M = 0.91004 (k = 3), the joint search 0.90029.
        sel = select_qq_ranks(REFERENCE_SIZES, 0.1, local_rank="joint")
        assert sel.local_ranks == (5, 9, 18, 34, 14, 8, 26, 11)
        assert sel.k == 6
        assert sel.coverage == pytest.approx(0.90029, abs=5e-6)
        exact = qq_coverage_unequal_fraction(REFERENCE_SIZES, sel.local_ranks, 6)
        assert abs(sel.coverage - float(exact)) < 1e-13
        assert exact >= Fraction(9, 10)
        # k = 5 misses the target at these ranks.
        assert qq_coverage_unequal_fraction(REFERENCE_SIZES, sel.local_ranks, 5) < 0.9

    def test_fixed_rule_is_kept(self):
        sel = select_qq_ranks(REFERENCE_SIZES, 0.1, local_rank="fixed")
        assert sel.k == 3
        assert sel.coverage == pytest.approx(0.91004, abs=5e-6)
        # "auto" searches the family (8 clients: every level and every k).
        auto = select_qq_ranks(REFERENCE_SIZES, 0.1)
        assert auto == select_qq_ranks(REFERENCE_SIZES, 0.1, local_rank="joint")
        assert auto.coverage < sel.coverage

    def test_ranks_share_one_level(self):
        sel = select_qq_ranks(REFERENCE_SIZES, 0.1, local_rank="joint")
        pairs = list(zip(sel.local_ranks, REFERENCE_SIZES, strict=True))
        # l_j = ceil(c (n_j + 1)) <=> (l_j - 1)/(n_j + 1) < c <= l_j/(n_j + 1).
        low = max(Fraction(l - 1, n + 1) for l, n in pairs)
        high = min(Fraction(l, n + 1) for l, n in pairs)
        assert low < high


class TestAgainstBruteForce:
    @pytest.mark.parametrize(
        ("sizes", "alpha"),
        [
            ((2, 3), 0.2),
            ((1, 2, 3), 0.3),
            ((2, 4), 0.25),
            ((3, 1, 2), 0.4),
            ((2, 2, 3), 0.2),
        ],
    )
    def test_literal_enumeration(self, sizes, alpha):
        # Tiny cases: every coverage from the literal sum of Appendix A.1.
        sel = select_qq_ranks(sizes, alpha, local_rank="joint")
        best = brute_force(sizes, alpha, coverage=literal_coverage)
        if best is None:
            assert not sel.feasible
            return
        value, _, ranks, k = best
        assert (sel.local_ranks, sel.k) == (ranks, k)
        assert abs(sel.coverage - float(value)) < 1e-13

    @pytest.mark.parametrize("case", range(12))
    def test_exact_rational_family(self, case):
        # Random small sizes: the family enumerated with exact rationals.
        rng = np.random.default_rng([7, case])
        m = int(rng.integers(2, 6))
        sizes = tuple(int(s) for s in rng.integers(1, 13, size=m))
        if len(set(sizes)) == 1:
            sizes = (*sizes[:-1], sizes[-1] + 1)
        alpha = float(rng.choice([0.05, 0.1, 0.2, 0.3]))
        clip = bool(case % 3 == 0)
        sel = select_qq_ranks(sizes, alpha, local_rank="joint", clip_local_rank=clip)
        best = brute_force(sizes, alpha, clip=clip)
        if best is None:
            assert not sel.feasible
            return
        value, _, ranks, k = best
        assert sel.feasible
        assert (sel.local_ranks, sel.k) == (ranks, k)
        assert abs(sel.coverage - float(value)) < 1e-13
        assert value >= 1 - Fraction(alpha).limit_denominator(10**6)

    def test_joint_finds_a_pair_where_the_fixed_rule_has_none(self):
        # A.1 with alpha = 0.2 asks l = (3, 4) > n: both clients send +inf.
        assert not select_qq_ranks([2, 3], 0.2, local_rank="fixed").feasible
        sel = select_qq_ranks([2, 3], 0.2, local_rank="joint")
        assert sel.feasible and sel.local_ranks == (2, 3) and sel.k == 2
        assert qq_coverage_unequal_fraction([2, 3], [2, 3], 2) == Fraction(5, 6)


class TestProperties:
    @pytest.mark.parametrize("case", range(6))
    def test_never_worse_than_the_fixed_rule(self, case):
        # c = 1 - alpha is in the family, so the joint optimum is at most A.1's.
        rng = np.random.default_rng([11, case])
        sizes = tuple(int(s) for s in rng.integers(5, 60, size=int(rng.integers(2, 7))))
        alpha = float(rng.choice([0.05, 0.1, 0.2]))
        joint = select_qq_ranks(sizes, alpha, local_rank="joint")
        fixed = select_qq_ranks(sizes, alpha, local_rank="fixed")
        if fixed.feasible:
            assert joint.feasible
            assert joint.coverage <= fixed.coverage + 1e-13
        if joint.feasible:
            assert joint.coverage >= 1 - alpha - 1e-10
            assert joint.coverage == pytest.approx(
                qq_coverage_unequal(sizes, joint.local_ranks, joint.k), abs=1e-13
            )

    def test_equal_sizes_use_the_full_search(self):
        # The family is contained in the full (l, k) grid of eq. (6).
        for m, n in [(5, 10), (10, 20)]:
            assert select_qq_ranks([n] * m, 0.1, local_rank="joint") == (
                select_qq_ranks([n] * m, 0.1)
            )

    def test_clip_keeps_every_client_finite(self):
        sel = select_qq_ranks(
            REFERENCE_SIZES, 0.1, local_rank="joint", clip_local_rank=True
        )
        assert all(
            l <= n for l, n in zip(sel.local_ranks, REFERENCE_SIZES, strict=True)
        )
        assert sel.coverage >= 0.9 - 1e-10
        assert sel.coverage == pytest.approx(
            qq_coverage_unequal(REFERENCE_SIZES, sel.local_ranks, sel.k), abs=1e-13
        )

    def test_infeasible(self):
        # alpha < 1/(N + 1): no finite threshold reaches the target.
        assert not select_qq_ranks([2, 3], 0.1, local_rank="joint").feasible

    def test_threshold_with_the_joint_ranks(self):
        # The ranks drive the same client and server arithmetic as any plan.
        rng = np.random.default_rng(3)
        ids = np.repeat(np.arange(len(REFERENCE_SIZES)), REFERENCE_SIZES)
        scores = rng.exponential(size=ids.shape[0])
        sel = select_qq_ranks(REFERENCE_SIZES, 0.1, local_rank="joint")
        values = local_order_statistics(
            ClientPartition(ids), sel.local_ranks, scores=scores
        )
        expected = []
        for j, (n, l) in enumerate(zip(REFERENCE_SIZES, sel.local_ranks, strict=True)):
            own = np.sort(scores[ids == j])
            expected.append(own[l - 1] if l <= n else np.inf)
        assert values.tolist() == expected

    def test_bad_local_rank(self):
        with pytest.raises(ValueError, match='"joint"'):
            select_qq_ranks(REFERENCE_SIZES, 0.1, local_rank="best")
