"""Exact coverage M(l, k) of FedCP-QQ and the selection of (l*, k*)."""

import functools
import itertools
import math
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from scipy import special

from skfedcp.calibrators._qq._coverage import (
    _coverage_screen,
    _coverage_top_rank,
    qq_conditional_tail,
    qq_coverage,
    qq_coverage_fraction,
    qq_coverage_unequal,
    qq_coverage_unequal_fraction,
)
from skfedcp.calibrators._qq._selection import QQSelection, select_qq_ranks
from skfedcp.utils._quantile import conformal_quantile, order_statistic


# --------------------------------------------------------------------------
# Oracles written from the paper, independent of the package's algorithms.
# --------------------------------------------------------------------------
def brute_force_coverage(m, n, l, k):
    """Theorem 3.2, literally: enumerate every tuple (i_1, ..., i_m)."""
    N = m * n
    total = Fraction(0)
    for j in range(k, m + 1):
        ranges = [range(l, n + 1)] * j + [range(0, l)] * (m - j)
        inner = Fraction(0)
        for idx in itertools.product(*ranges):
            prod = math.prod(comb(n, i) for i in idx)
            inner += Fraction(prod, comb(N, sum(idx)))
        total += comb(m, j) * inner
    return 1 - total / (N + 1)


def brute_force_coverage_unequal(sizes, ranks, k):
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


@functools.cache
def exact_grid(m, n):
    """{(l, k): Fraction} over the full grid."""
    return {
        (l, k): qq_coverage_fraction(m, n, l, k)
        for l in range(1, n + 1)
        for k in range(1, m + 1)
    }


def gauss_grid(m, n):
    """M over the full grid by Gauss-Legendre with N+1 nodes (exact degree N)."""
    N = m * n
    x, w = special.roots_legendre(N + 1)
    t, w = (x + 1) / 2, w / 2
    L, K = np.meshgrid(np.arange(1, n + 1), np.arange(1, m + 1), indexing="ij")
    g = special.betainc(L[..., None], n - L[..., None] + 1, t)  # G_l(t)
    cdf = special.bdtr(K[..., None] - 1, m, g)  # P(Bin(m, G_l(t)) <= k - 1)
    return cdf @ w  # [l - 1, k - 1]


def argmin_tie_rule(values):
    """Pair with the smallest M; M within 1e-13 tie: largest l, then smallest k."""
    if not values:
        return None
    lowest = min(float(v) for v in values.values())
    tied = [(-l, k) for (l, k), v in values.items() if float(v) <= lowest + 1e-13]
    neg_l, k = min(tied)
    return -neg_l, k


def brute_force_selection(values, alpha):
    """argmin over the grid of {M : M >= 1 - alpha - 1e-10}."""
    target = (1 - alpha) - 1e-10
    return argmin_tie_rule({pair: v for pair, v in values.items() if v >= target})


def as_dict(grid):
    n, m = grid.shape
    return {
        (l, k): grid[l - 1, k - 1] for l in range(1, n + 1) for k in range(1, m + 1)
    }


# --------------------------------------------------------------------------
# Exact values
# --------------------------------------------------------------------------
class TestExactRationals:
    @pytest.mark.parametrize(
        ("m", "n", "l", "k", "expected"),
        [
            (2, 2, 1, 2, Fraction(7, 15)),
            (2, 2, 2, 1, Fraction(8, 15)),
            (2, 3, 2, 2, Fraction(22, 35)),
            (3, 4, 2, 2, Fraction(1966, 5005)),
            (3, 3, 3, 2, Fraction(27, 35)),
            (3, 3, 2, 3, Fraction(97, 140)),
            (5, 10, 10, 3, Fraction(20000, 21607)),
            (3, 3, 3, 3, Fraction(9, 10)),
        ],
    )
    def test_equal_sizes(self, m, n, l, k, expected):
        assert qq_coverage_fraction(m, n, l, k) == expected
        assert qq_coverage(m, n, l, k, method="exact") == float(expected)
        assert qq_coverage(m, n, l, k) == pytest.approx(float(expected), abs=1e-13)
        assert qq_coverage(m, n, l, k, method="gauss") == pytest.approx(
            float(expected), abs=1e-13
        )

    @pytest.mark.parametrize(
        ("ranks", "k", "expected"),
        [
            ((2, 3), 1, Fraction(7, 12)),
            ((2, 3), 2, Fraction(5, 6)),
            ((3, 3), 1, Fraction(3, 4)),  # client 1 (n = 2) sends +inf
        ],
    )
    def test_unequal_sizes(self, ranks, k, expected):
        assert qq_coverage_unequal_fraction([2, 3], ranks, k) == expected
        assert brute_force_coverage_unequal((2, 3), ranks, k) == expected
        for method in ("quad", "gauss", "exact"):
            assert qq_coverage_unequal([2, 3], ranks, k, method=method) == (
                pytest.approx(float(expected), abs=1e-13)
            )


class TestBackendAgreement:
    LISTED = [(1, 5), (2, 3), (3, 3), (3, 4), (4, 3), (2, 6)]
    SMALL = [(m, n) for m in range(1, 5) for n in range(1, 5)]

    @pytest.mark.parametrize(("m", "n"), sorted(set(LISTED + SMALL)))
    def test_exact_equals_literal_enumeration(self, m, n):
        for (l, k), value in exact_grid(m, n).items():
            assert value == brute_force_coverage(m, n, l, k), (l, k)

    @pytest.mark.parametrize(("m", "n"), sorted(set(LISTED + SMALL)))
    def test_float_backends_match_exact(self, m, n):
        for (l, k), value in exact_grid(m, n).items():
            for method in ("quad", "gauss"):
                got = qq_coverage(m, n, l, k, method=method)
                assert abs(got - float(value)) < 1e-12, (l, k, method)

    @pytest.mark.parametrize(("m", "n"), [(100, 10), (10, 100), (50, 20)])
    def test_gauss_matches_quad(self, m, n):
        rng = np.random.default_rng(0)
        pairs = [(1, 1), (n, m), (1, m), (n, 1)]
        pairs += zip(
            rng.integers(1, n + 1, 40).tolist(),
            rng.integers(1, m + 1, 40).tolist(),
            strict=True,
        )
        for l, k in pairs:
            diff = qq_coverage(m, n, l, k, method="gauss") - qq_coverage(m, n, l, k)
            assert abs(diff) < 1e-12, (l, k)

    @pytest.mark.parametrize(
        ("m", "n"),
        [
            (5, 10),
            (1, 500),
            (500, 1),
            (1000, 100),
            (100, 1000),
            (1000, 1000),
            (3, 20000),
        ],
    )
    def test_selection_screen_matches_quad(self, m, n):
        # The search screens M with a panel Gauss-Legendre rule; its decisions
        # are only trusted 1e-11 away from a threshold, so it must be far
        # better than that.
        rng = np.random.default_rng(1)
        ls = np.r_[rng.integers(1, n + 1, 25), 1, 1, n, n]
        ks = np.r_[rng.integers(1, m + 1, 25), 1, m, 1, m]
        screened = _coverage_screen(m, n, ls, ks)
        for l, k, value in zip(ls.tolist(), ks.tolist(), screened, strict=True):
            assert abs(value - qq_coverage(m, n, l, k)) < 1e-13, (l, k)

    @pytest.mark.parametrize(
        ("sizes", "ranks"),
        [
            ((2, 3), (2, 2)),
            ((3, 1, 4), (2, 1, 4)),
            ((2, 2, 3), (3, 1, 2)),
            ((4, 2), (1, 2)),
        ],
    )
    def test_unequal_exact_equals_literal_enumeration(self, sizes, ranks):
        for k in range(1, len(sizes) + 1):
            expected = brute_force_coverage_unequal(sizes, ranks, k)
            assert qq_coverage_unequal_fraction(sizes, ranks, k) == expected
            for method in ("quad", "gauss"):
                got = qq_coverage_unequal(sizes, ranks, k, method=method)
                assert abs(got - float(expected)) < 1e-12

    @pytest.mark.parametrize(("m", "n"), [(3, 4), (6, 5), (40, 20)])
    def test_unequal_reduces_to_equal(self, m, n):
        for l, k in [(1, 1), (n, m), (max(n - 1, 1), (m + 1) // 2), (2, m)]:
            expected = qq_coverage(m, n, l, k)
            assert qq_coverage_unequal([n] * m, [l] * m, k) == pytest.approx(
                expected, abs=1e-13
            )
        if m * n <= 30:
            for (l, k), value in exact_grid(m, n).items():
                assert qq_coverage_unequal_fraction([n] * m, [l] * m, k) == value


# --------------------------------------------------------------------------
# Identities (Section 2.3)
# --------------------------------------------------------------------------
class TestIdentities:
    @pytest.mark.parametrize(("m", "n"), [(2, 3), (4, 4), (3, 7)])
    def test_symmetry_exact(self, m, n):
        grid = exact_grid(m, n)
        for (l, k), value in grid.items():
            assert value + grid[(n + 1 - l, m + 1 - k)] == 1

    @pytest.mark.parametrize(("m", "n"), [(50, 20), (100, 10), (10, 100), (7, 300)])
    def test_symmetry_and_corners_quad(self, m, n):
        N = m * n
        assert qq_coverage(m, n, 1, 1) == pytest.approx(1 / (N + 1), abs=1e-14)
        assert qq_coverage(m, n, n, m) == pytest.approx(N / (N + 1), abs=1e-14)
        for l, k in [(1, 1), (n // 2, m // 2 + 1), (n, 1), (n - 1, m - 1)]:
            total = qq_coverage(m, n, l, k) + qq_coverage(m, n, n + 1 - l, m + 1 - k)
            assert total == pytest.approx(1.0, abs=1e-13)

    @pytest.mark.parametrize("n", [1, 2, 7, 30, 199])
    def test_one_client_is_split_cp(self, n):
        for l in range(1, n + 1, max(n // 10, 1)):
            assert qq_coverage(1, n, l, 1) == pytest.approx(l / (n + 1), abs=1e-14)
        assert qq_coverage_fraction(1, min(n, 30), 1, 1) == Fraction(1, min(n, 30) + 1)

    @pytest.mark.parametrize("m", [1, 2, 7, 30, 199])
    def test_one_score_per_client_is_split_cp(self, m):
        for k in range(1, m + 1, max(m // 10, 1)):
            assert qq_coverage(m, 1, 1, k) == pytest.approx(k / (m + 1), abs=1e-14)

    @pytest.mark.parametrize(
        ("m", "n"), [(2, 3), (4, 4), (5, 10), (50, 20), (100, 10), (10, 100)]
    )
    def test_proposition_a1(self, m, n):
        # M(n, k) = Gamma(k + 1/n) Gamma(m + 1) / (Gamma(k) Gamma(m + 1 + 1/n)).
        for k in sorted({1, 2, (m + 1) // 2, m}):
            lgamma_form = math.exp(
                math.lgamma(k + 1 / n)
                - math.lgamma(k)
                + math.lgamma(m + 1)
                - math.lgamma(m + 1 + 1 / n)
            )
            quad = qq_coverage(m, n, n, k)
            assert abs(lgamma_form - quad) < 1e-10
            assert abs(_coverage_top_rank(m, n, k) - quad) < 1e-13
            # M(1, k) = 1 - M(n, m + 1 - k)
            assert qq_coverage(m, n, 1, m + 1 - k) == pytest.approx(1 - quad, abs=1e-13)
            if m * n <= 60:
                assert (
                    abs(float(qq_coverage_fraction(m, n, n, k)) - lgamma_form) < 1e-12
                )

    def test_proposition_a1_product_form_is_exact(self):
        # prod_{j=k}^m n j / (n j + 1) is the same rational number.
        m, n = 4, 3
        for k in range(1, m + 1):
            product = math.prod(Fraction(n * j, n * j + 1) for j in range(k, m + 1))
            assert qq_coverage_fraction(m, n, n, k) == product

    def test_paper_asymptotic_rule_is_not_finite_sample(self):
        # k_m = ceil(m (1 - alpha)^n) gives M = 0.89992 < 0.9 for n = 10, m = 1000.
        k = math.ceil(1000 * 0.9**10)
        assert qq_coverage(1000, 10, 10, k) == pytest.approx(0.89992, abs=5e-6)
        assert qq_coverage(1000, 10, 10, k) < 0.9


class TestStrictMonotonicity:
    @pytest.mark.parametrize(
        ("m", "n"), [(m, n) for m in range(1, 9) for n in range(1, 9)]
    )
    def test_small_grids(self, m, n):
        self._check(m, n)

    @pytest.mark.slow
    @pytest.mark.parametrize(
        ("m", "n"),
        [(m, n) for m in range(1, 13) for n in range(1, 13) if max(m, n) > 8],
    )
    def test_grids_up_to_12(self, m, n):
        self._check(m, n)

    @staticmethod
    def _check(m, n):
        grid = exact_grid(m, n)
        gap = Fraction(1, m * n + 1)  # R grows by at least one per step
        for (l, k), value in grid.items():
            if l < n:
                assert grid[(l + 1, k)] - value >= gap
            if k < m:
                assert grid[(l, k + 1)] - value >= gap


# --------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------
SECTION_7 = [
    # (m, n), (l*, k*), M*
    ((5, 10), (10, 3), 0.925626),
    ((10, 10), (10, 5), 0.919487),
    ((20, 10), (10, 8), 0.904775),
    ((10, 20), (19, 5), 0.907915),
    ((50, 20), (18, 35), 0.901736),
    ((100, 10), (10, 36), 0.901254),
    ((10, 100), (95, 1), 0.900180),
    ((80, 10), (9, 60), 0.901296),
    ((10, 80), (70, 9), 0.901252),
    ((40, 10), (8, 38), 0.901445),
    ((10, 40), (36, 7), 0.901116),
    ((5, 200), (183, 2), 0.901148),
    ((20, 100), (92, 7), 0.900290),
    ((100, 1), (1, 91), 0.900990),
    ((1000, 100), (91, 452), 0.900012),
    ((100, 1000), (901, 49), 0.900007),
]

OTHER_ALPHAS = [
    (0.05, (5, 10), (10, 4), 0.956480),
    (0.05, (10, 20), (18, 10), 0.950365),
    (0.05, (50, 20), (18, 47), 0.950326),
    (0.05, (10, 100), (96, 5), 0.950383),
    (0.2, (5, 10), (10, 1), 0.801408),
    (0.2, (10, 20), (16, 7), 0.802333),
    (0.2, (50, 20), (20, 1), 0.800133),
    (0.2, (10, 100), (78, 8), 0.800283),
]


class TestSelection:
    @pytest.mark.parametrize(("size", "pair", "coverage"), SECTION_7)
    def test_reference_table(self, size, pair, coverage):
        m, n = size
        sel = select_qq_ranks([n] * m, 0.1)
        assert sel.feasible
        assert (sel.local_ranks[0], sel.k) == pair
        assert sel.local_ranks == (pair[0],) * m
        assert sel.coverage == pytest.approx(coverage, abs=5e-7)
        assert sel.coverage >= 0.9
        assert sel.coverage == qq_coverage(m, n, *pair)

    @pytest.mark.parametrize(("alpha", "size", "pair", "coverage"), OTHER_ALPHAS)
    def test_reference_other_alphas(self, alpha, size, pair, coverage):
        m, n = size
        sel = select_qq_ranks([n] * m, alpha)
        assert (sel.local_ranks[0], sel.k) == pair
        assert sel.coverage == pytest.approx(coverage, abs=5e-7)

    def test_exact_tie_at_target_is_feasible(self):
        # M(3, 3) = 9/10 exactly; float noise must not make it infeasible.
        sel = select_qq_ranks([3, 3, 3], 0.1)
        assert (sel.local_ranks, sel.k) == ((3, 3, 3), 3)
        assert sel.coverage == pytest.approx(0.9, abs=1e-14)

    @pytest.mark.parametrize(("sizes", "alpha"), [([2, 2], 0.1), ([3, 3, 3], 0.09)])
    def test_infeasible(self, sizes, alpha):
        sel = select_qq_ranks(sizes, alpha)
        assert sel == QQSelection(local_ranks=(), k=None, coverage=1.0, feasible=False)
        assert sel == ((), None, 1.0, False)  # still unpacks as a tuple

    def test_feasibility_boundary(self):
        # A pair exists iff alpha >= 1 / (N + 1); at equality only (n, m) works.
        m, n = 4, 5
        sel = select_qq_ranks([n] * m, 1 / 21)
        assert (sel.local_ranks[0], sel.k) == (n, m)
        assert not select_qq_ranks([n] * m, 1 / 21 - 1e-6).feasible

    def test_best_local_rank_is_not_the_fixed_rule(self):
        # (50, 20): l* = 18 (M = 0.90174); fixing l = 19 gives 0.90279.
        auto = select_qq_ranks([20] * 50, 0.1)
        fixed = select_qq_ranks([20] * 50, 0.1, local_rank="fixed")
        assert auto.local_ranks[0] == 18
        assert (fixed.local_ranks[0], fixed.k) == (19, 21)
        assert fixed.coverage == pytest.approx(0.902791, abs=5e-7)

    @pytest.mark.parametrize(
        ("size", "pair", "coverage"),
        [((10, 100), (91, 6), 0.906794), ((80, 10), (10, 29), 0.901480)],
    )
    def test_fixed_rule_equal_sizes(self, size, pair, coverage):
        m, n = size
        sel = select_qq_ranks([n] * m, 0.1, local_rank="fixed")
        assert (sel.local_ranks[0], sel.k) == pair
        assert sel.coverage == pytest.approx(coverage, abs=5e-7)

    def test_integer_local_rank(self):
        sel = select_qq_ranks([20] * 50, 0.1, local_rank=19)
        assert sel == select_qq_ranks([20] * 50, 0.1, local_rank="fixed")
        # Too small a rank: no k reaches the target.
        assert not select_qq_ranks([20] * 5, 0.1, local_rank=10).feasible
        # Larger than n: every client would send +inf, unless clipped.
        assert not select_qq_ranks([20] * 5, 0.1, local_rank=21).feasible
        clipped = select_qq_ranks([20] * 5, 0.1, local_rank=21, clip_local_rank=True)
        assert clipped.local_ranks == (20,) * 5
        assert clipped.k == select_qq_ranks([20] * 5, 0.1, local_rank=20).k

    @pytest.mark.parametrize("seed_offset", range(4))
    def test_optimal_against_brute_force_gauss(self, seed, seed_offset):
        # Random (m, n) <= 30 and alpha: the search equals the full-grid argmin
        # (every pair with a smaller M is infeasible).
        rng = np.random.default_rng([seed, seed_offset])
        for _ in range(6):
            m, n = (int(v) for v in rng.integers(1, 31, size=2))
            grid = gauss_grid(m, n)
            values = as_dict(grid)
            alphas = rng.uniform(0.001, 0.6, size=3).tolist()
            alphas.append(1 - grid[rng.integers(n), rng.integers(m)])  # a tie
            for alpha in alphas:
                if not 0 < alpha < 1:
                    continue
                sel = select_qq_ranks([n] * m, alpha)
                expected = brute_force_selection(values, alpha)
                got = (sel.local_ranks[0], sel.k) if sel.feasible else None
                assert got == expected, (m, n, alpha)
                if sel.feasible:
                    smaller = grid < grid[got[0] - 1, got[1] - 1] - 1e-13
                    assert np.all(grid[smaller] < 1 - alpha - 1e-10)

    @pytest.mark.parametrize(
        ("m", "n"), [(m, n) for m in range(1, 7) for n in range(1, 7)]
    )
    def test_optimal_against_brute_force_exact(self, m, n):
        # Exact rationals; alpha = 1 - M for every grid value exercises ties.
        values = exact_grid(m, n)
        for target in sorted(set(values.values())):
            alpha = float(1 - target)
            if not 0 < alpha < 1:
                continue
            sel = select_qq_ranks([n] * m, alpha)
            expected = brute_force_selection(values, alpha)
            assert (sel.local_ranks[0], sel.k) == expected
            assert sel.coverage == pytest.approx(float(values[expected]), abs=1e-13)

    @pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
    def test_reduction_to_split_cp(self, alpha):
        rng = np.random.default_rng(7)
        sizes = sorted({1, 2, 9, 10, 19, 20, 200, *rng.integers(1, 201, 25).tolist()})
        for n in sizes:
            l_star = math.ceil((n + 1) * (1 - alpha) - 1e-9)
            one_client = select_qq_ranks([n], alpha)
            one_score = select_qq_ranks([1] * n, alpha)  # n clients of one score
            if l_star > n:
                assert not one_client.feasible and not one_score.feasible
                continue
            assert one_client.local_ranks == (l_star,) and one_client.k == 1
            assert one_score.local_ranks == (1,) * n and one_score.k == l_star
            # The thresholds equal central split CP on the same data.
            scores = rng.standard_normal(n)
            central = conformal_quantile(scores, alpha, warn=False)
            assert order_statistic(scores, one_client.local_ranks[0]) == central
            assert order_statistic(scores, one_score.k) == central

    @pytest.mark.parametrize("m", [5, 20])
    def test_figure_1_regression(self, m):
        # (M* - 0.9)(mn + 1) <= 4 and M* <= 0.9 + 1/(n + 1), n = 10..100.
        for n in range(10, 101):
            sel = select_qq_ranks([n] * m, 0.1)
            assert 0.9 <= sel.coverage <= 0.9 + 1 / (n + 1)
            assert (sel.coverage - 0.9) * (m * n + 1) <= 4

    def test_cache(self):
        select_qq_ranks.cache_clear()
        first = select_qq_ranks([10] * 5, 0.1)
        assert select_qq_ranks((10, 10, 10, 10, 10), 0.1) is first
        assert select_qq_ranks(np.full(5, 10), 0.1) is first
        assert select_qq_ranks.cache_info().hits == 2


class TestUnequalSizes:
    SIZES = [5, 10, 20, 40, 15, 8, 30, 12]

    def test_reference_example(self):
        # The fixed rule of Appendix A.1 ("auto" searches one common level
        # jointly with k since issue 14; see test_qq_joint.py).
        sel = select_qq_ranks(self.SIZES, 0.1, local_rank="fixed")
        ranks = tuple(math.ceil(0.9 * (n + 1) - 1e-9) for n in self.SIZES)
        assert sel.local_ranks == ranks
        assert ranks[0] > self.SIZES[0] and ranks[5] > self.SIZES[5]  # send +inf
        assert sel.k == 3
        assert sel.coverage == pytest.approx(0.91004, abs=5e-6)
        # The selection reads M for every k off one quadrature (issue 12: fast
        # unequal-size plans); it agrees with "quad" to rounding.
        assert sel.coverage == pytest.approx(
            qq_coverage_unequal(self.SIZES, ranks, 3), abs=1e-14
        )
        assert qq_coverage_unequal(self.SIZES, ranks, 2) < 0.9
        exact = qq_coverage_unequal(self.SIZES, ranks, 3, method="exact")
        assert sel.coverage == pytest.approx(exact, abs=1e-13)
        gauss = qq_coverage_unequal(self.SIZES, ranks, 3, method="gauss")
        assert sel.coverage == pytest.approx(gauss, abs=1e-12)

    def test_clip_local_rank(self):
        sel = select_qq_ranks(self.SIZES, 0.1, clip_local_rank=True)
        assert all(l <= n for l, n in zip(sel.local_ranks, self.SIZES, strict=True))
        assert sel.local_ranks[0] == 5 and sel.local_ranks[5] == 8
        assert sel.coverage >= 0.9
        assert sel.coverage == qq_coverage_unequal(self.SIZES, sel.local_ranks, sel.k)

    def test_fewer_finite_clients_than_k(self):
        # Only one client sends a finite value: k = 2 gives +inf, M = 1.
        assert qq_coverage_unequal([2, 3], [3, 3], 2) == 1.0
        assert qq_coverage_unequal_fraction([2, 3], [3, 3], 2) == 1
        # The selection never returns such a trivial pair.
        sel = select_qq_ranks([2, 3], 0.2, local_rank="fixed")
        assert not sel.feasible  # l = (3, 4): nobody sends a finite value
        sel = select_qq_ranks([2, 9], 0.1, local_rank="fixed")
        assert sel.feasible and sel.local_ranks == (3, 9) and sel.k == 1
        assert sel.coverage == pytest.approx(0.9, abs=1e-13)

    def test_equal_sizes_through_the_unequal_formula(self):
        # Same answer as the equal-size fixed rule.
        sel = select_qq_ranks([20] * 50, 0.1, local_rank="fixed")
        assert qq_coverage_unequal([20] * 50, sel.local_ranks, sel.k) == pytest.approx(
            sel.coverage, abs=1e-13
        )

    def test_integer_rank_with_unequal_sizes(self):
        sel = select_qq_ranks([5, 10, 20], 0.2, local_rank=5)
        assert sel.local_ranks == (5, 5, 5)
        expected = min(
            k for k in (1, 2, 3) if qq_coverage_unequal([5, 10, 20], [5] * 3, k) >= 0.8
        )
        assert sel.k == expected

    def test_conditional_needs_equal_sizes(self):
        with pytest.raises(ValueError, match="conditional.*equal client sizes"):
            select_qq_ranks([5, 10], 0.1, conditional=True)
        with pytest.raises(ValueError, match="conditional.*equal client sizes"):
            select_qq_ranks([5, 10], 0.1, conditional="exact")


class TestConditional:
    def test_theorem_3_3_example(self):
        sel = select_qq_ranks([20] * 10, 0.1, conditional=True, delta=0.1)
        assert (sel.local_ranks[0], sel.k) == (20, 10)
        assert sel.coverage == pytest.approx(200 / 201, abs=1e-13)

    @pytest.mark.parametrize(
        ("m", "n", "alpha", "delta"), [(20, 50, 0.1, 0.1), (8, 200, 0.2, 0.05)]
    )
    def test_theorem_3_3_rule_against_brute_force(self, m, n, alpha, delta):
        N = m * n
        alpha_delta = alpha - math.sqrt(math.log(1 / delta) / (2 * N))
        need = math.ceil((1 - alpha_delta) * N - 1e-9)
        grid = as_dict(gauss_grid(m, n))
        allowed = {pair: v for pair, v in grid.items() if pair[0] * pair[1] >= need}
        sel = select_qq_ranks([n] * m, alpha, conditional=True, delta=delta)
        expected = argmin_tie_rule(allowed)
        assert (sel.local_ranks[0], sel.k) == expected
        assert sel.local_ranks[0] * sel.k >= (1 - alpha_delta) * N
        assert sel.coverage >= 1 - alpha  # M >= l k / (N + 1) >= 1 - alpha here

    def test_no_room_for_the_dkw_margin(self):
        # alpha_delta = alpha - sqrt(log(1/delta)/(2N)) <= 0.
        assert not select_qq_ranks([3] * 2, 0.1, conditional=True).feasible

    def test_exact_tail_value(self):
        assert qq_conditional_tail(10, 20, 19, 5, 0.1) == pytest.approx(
            0.3463, abs=5e-5
        )
        # P(Bin(m, p) >= k) with p = P(U_(l) <= 1 - alpha).
        p = special.betainc(19, 2, 0.9)
        tail = sum(comb(10, j) * p**j * (1 - p) ** (10 - j) for j in range(5, 11))
        assert qq_conditional_tail(10, 20, 19, 5, 0.1) == pytest.approx(tail, rel=1e-12)

    @pytest.mark.parametrize(
        ("m", "n", "alpha", "delta"), [(10, 20, 0.1, 0.1), (30, 30, 0.2, 0.3)]
    )
    def test_exact_rule_against_brute_force(self, m, n, alpha, delta):
        grid = as_dict(gauss_grid(m, n))
        allowed = {
            (l, k): v
            for (l, k), v in grid.items()
            if qq_conditional_tail(m, n, l, k, alpha) <= delta
        }
        sel = select_qq_ranks([n] * m, alpha, conditional="exact", delta=delta)
        assert (sel.local_ranks[0], sel.k) == argmin_tie_rule(allowed)
        assert qq_conditional_tail(m, n, sel.local_ranks[0], sel.k, alpha) <= delta
        # Far less conservative than Theorem 3.3.
        bound = select_qq_ranks([n] * m, alpha, conditional=True, delta=min(delta, 0.5))
        assert sel.coverage <= bound.coverage

    def test_exact_rule_only_targets_the_conditional_guarantee(self):
        # Only P(alpha_P <= alpha) >= 1 - delta is targeted: with delta > 1/2
        # the marginal M can drop below 1 - alpha (documented).
        sel = select_qq_ranks([20] * 10, 0.1, conditional="exact", delta=0.7)
        assert qq_conditional_tail(10, 20, sel.local_ranks[0], sel.k, 0.1) <= 0.7
        assert sel.coverage < 0.9

    def test_fixed_rank_with_conditional(self):
        sel = select_qq_ranks([20] * 10, 0.1, conditional="exact", local_rank=19)
        assert sel.local_ranks[0] == 19
        tails = [qq_conditional_tail(10, 20, 19, k, 0.1) for k in range(1, 11)]
        assert sel.k == min(k for k, t in enumerate(tails, 1) if t <= 0.1)


class TestInputValidation:
    @pytest.mark.parametrize(
        ("args", "error", "match"),
        [
            ((0, 5, 1, 1), ValueError, "m must be >= 1"),
            ((3, 0, 1, 1), ValueError, "n must be >= 1"),
            ((3, 5, 6, 1), ValueError, "local_rank must be >= 1 and <= 5"),
            ((3, 5, 0, 1), ValueError, "local_rank"),
            ((3, 5, 1, 4), ValueError, "k must be >= 1 and <= 3"),
            ((3.0, 5, 1, 1), TypeError, "m must be an integer"),
            ((3, 5, True, 1), TypeError, "local_rank must be an integer"),
            ((3, 5, 1, "2"), TypeError, "k must be an integer"),
        ],
    )
    def test_qq_coverage(self, args, error, match):
        with pytest.raises(error, match=match):
            qq_coverage(*args)
        with pytest.raises(error, match=match):
            qq_coverage_fraction(*args)

    def test_method(self):
        with pytest.raises(ValueError, match="method must be one of"):
            qq_coverage(3, 3, 1, 1, method="simpson")
        with pytest.raises(ValueError, match="method must be one of"):
            qq_coverage_unequal([3, 3], [1, 1], 1, method="mc")
        with pytest.raises(ValueError, match='method="gauss" needs N'):
            qq_coverage(100, 100, 50, 50, method="gauss")

    @pytest.mark.parametrize(
        ("args", "error", "match"),
        [
            (([3, 4], [1], 1), ValueError, "local_ranks has 1 entries"),
            (([3, 4], [1, 1], 3), ValueError, "k must be"),
            (([3, 0], [1, 1], 1), ValueError, "n_per_client must hold positive"),
            (([], [], 1), ValueError, "n_per_client must list at least one"),
            (([3, 4], [0, 1], 1), ValueError, "local_ranks must be >= 1"),
            (([3, 4.5], [1, 1], 1), TypeError, "n_per_client must hold integers"),
            ((5, [1], 1), TypeError, "n_per_client must be a sequence"),
            (([3, 4], 2, 1), TypeError, "local_ranks must be a sequence"),
        ],
    )
    def test_qq_coverage_unequal(self, args, error, match):
        with pytest.raises(error, match=match):
            qq_coverage_unequal(*args)

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            ({"alpha": 0.0}, ValueError, "alpha"),
            ({"alpha": 1.5}, ValueError, "alpha"),
            ({"alpha": "0.1"}, TypeError, "alpha"),
            ({"n_per_client": [10, 0]}, ValueError, "n_per_client"),
            ({"n_per_client": [10, -1]}, ValueError, "n_per_client"),
            ({"n_per_client": "abc"}, TypeError, "n_per_client"),
            ({"local_rank": "best"}, ValueError, "local_rank"),
            ({"local_rank": 0}, ValueError, "local_rank"),
            ({"local_rank": 2.5}, TypeError, "local_rank"),
            ({"clip_local_rank": "yes"}, TypeError, "clip_local_rank"),
            ({"conditional": "approx"}, ValueError, "conditional"),
            ({"conditional": True, "delta": 0.6}, ValueError, "delta must be <= 0.5"),
            ({"delta": 0.0}, ValueError, "delta"),
            ({"delta": 1.0}, ValueError, "delta"),
            ({"delta": None}, TypeError, "delta"),
        ],
    )
    def test_select_qq_ranks(self, kwargs, error, match):
        params = {"n_per_client": [10] * 5, "alpha": 0.1, **kwargs}
        with pytest.raises(error, match=match):
            select_qq_ranks(params.pop("n_per_client"), params.pop("alpha"), **params)

    def test_conditional_tail(self):
        with pytest.raises(ValueError, match="alpha"):
            qq_conditional_tail(10, 20, 19, 5, 1.0)
        with pytest.raises(ValueError, match="local_rank"):
            qq_conditional_tail(10, 20, 21, 5, 0.1)
