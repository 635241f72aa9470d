"""QQ against dishonest clients: the sandwich, the certified bound, the rule."""

import itertools
import warnings

import numpy as np
import pytest

from skfedcp.calibrators import (
    AveragingCalibrator,
    CentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
    byzantine_coverage_bounds,
    max_byzantine,
    qq_coverage,
    qq_coverage_unequal,
    select_byzantine_ranks,
    select_qq_ranks,
)
from skfedcp.calibrators._qq._coverage import (
    qq_coverage_fraction,
    qq_coverage_unequal_fraction,
)
from skfedcp.utils._quantile import conformal_rank

TOL = 1e-10  # the feasibility tolerance of the rank selection


def _kth(values, k):
    return float(np.sort(values)[k - 1])


# ---------------------------------------------------------------------------
# 1. The sandwich h_(k-c) <= T <= h_(k), by enumeration of every placement.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("m,c", [(5, 1), (6, 2), (7, 3)])
def test_sandwich_every_placement(m, c):
    rng = np.random.default_rng(m * 10 + c)
    honest = np.sort(rng.normal(size=m - c))
    # Adversarial values: below everything (the smallest finite float),
    # between every pair of honest values, on them (ties), above everything.
    mids = (honest[:-1] + honest[1:]) / 2
    menu = np.r_[-np.finfo(float).max, honest[0] - 1, mids, honest, honest[-1] + 1]
    menu = np.r_[menu, np.finfo(float).max, np.inf]
    for k in range(1, m + 1):
        for attack in itertools.product(menu, repeat=c):
            # Which clients lie does not change the sorted messages; every
            # position of the dishonest values among the m is tried anyway.
            for where in itertools.combinations(range(m), c):
                values = np.empty(m)
                mask = np.zeros(m, dtype=bool)
                mask[list(where)] = True
                values[mask] = attack
                values[~mask] = honest
                t = _kth(values, k)
                if k > c:
                    assert t >= honest[k - c - 1]
                if k <= m - c:
                    assert t <= honest[k - 1]
                break  # positions: one suffices once checked below
        # positions, checked on one attack: every subset of clients
        for where in itertools.combinations(range(m), c):
            values = np.empty(m)
            mask = np.zeros(m, dtype=bool)
            mask[list(where)] = True
            values[mask] = -np.finfo(float).max
            values[~mask] = honest
            if k > c:
                assert _kth(values, k) == honest[k - c - 1]  # the minimal attack


# ---------------------------------------------------------------------------
# 2. The certified bound: exact for equal sizes, a bound for unequal ones.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("m,n,c", [(5, 4, 1), (6, 3, 2), (8, 5, 2), (9, 2, 3)])
def test_equal_sizes_bounds_are_the_honest_exact_coverages(m, n, c):
    for l in range(1, n + 1):
        for k in range(1, m + 1):
            lower, upper = byzantine_coverage_bounds([n] * m, [l] * m, k, c)
            want_lower = (
                0.0 if k <= c else float(qq_coverage_fraction(m - c, n, l, k - c))
            )
            want_upper = (
                1.0 if k > m - c else float(qq_coverage_fraction(m - c, n, l, k))
            )
            assert lower == pytest.approx(want_lower, abs=1e-12)
            assert upper == pytest.approx(want_upper, abs=1e-12)


@pytest.mark.parametrize(
    "sizes,alpha",
    [((2, 3, 4, 5, 6), 0.2), ((3, 3, 5, 8, 9, 12), 0.1), ((1, 2, 4, 4, 7), 0.3)],
)
def test_unequal_bounds_enclose_every_honest_subset(sizes, alpha):
    # Enumerate every honest set H of size m - c and compare with the exact
    # rational coverage of its clients alone.
    m = len(sizes)
    ranks = tuple(conformal_rank(n, alpha) for n in sizes)
    for c in range(1, m // 2 + 1):
        subsets = list(itertools.combinations(range(m), m - c))
        for k in range(c + 1, m + 1):
            lower, upper = byzantine_coverage_bounds(sizes, ranks, k, c)
            exact_lo = [
                float(
                    qq_coverage_unequal_fraction(
                        [sizes[j] for j in h], [ranks[j] for j in h], k - c
                    )
                )
                for h in subsets
            ]
            assert lower <= min(exact_lo) + 1e-12
            # The pointwise worst set is close to the worst set.
            assert lower >= min(exact_lo) - 0.05
            if k <= m - c:
                exact_up = [
                    float(
                        qq_coverage_unequal_fraction(
                            [sizes[j] for j in h], [ranks[j] for j in h], k
                        )
                    )
                    for h in subsets
                ]
                assert upper >= max(exact_up) - 1e-12
            else:
                assert upper == 1.0


def test_unequal_bound_with_c_zero_is_the_exact_coverage():
    sizes = (5, 10, 20, 40, 15, 8, 30, 12)
    ranks = tuple(conformal_rank(n, 0.1) for n in sizes)
    for k in range(1, 9):
        lower, upper = byzantine_coverage_bounds(sizes, ranks, k, 0)
        exact = qq_coverage_unequal(sizes, ranks, k)
        assert lower == pytest.approx(exact, abs=1e-12)
        assert upper == pytest.approx(exact, abs=1e-12)


def test_bound_decreases_in_c():
    sizes = (12, 30, 7, 55, 20, 20, 41, 9, 16, 25)
    ranks = tuple(conformal_rank(n, 0.1) for n in sizes)
    k = 8
    lows = [byzantine_coverage_bounds(sizes, ranks, k, c)[0] for c in range(k + 1)]
    assert all(a >= b - 1e-13 for a, b in itertools.pairwise(lows))
    assert lows[-1] == 0.0


# ---------------------------------------------------------------------------
# 3. The rule: valid, non-trivial against +inf, optimal on its family.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "m,n,alpha,c", [(10, 8, 0.1, 1), (12, 5, 0.2, 3), (9, 20, 0.1, 2)]
)
def test_equal_rule_is_the_brute_force_optimum(m, n, alpha, c):
    sel = select_byzantine_ranks([n] * m, alpha, c)
    best = None
    for l in range(1, n + 1):
        for k in range(c + 1, m - c + 1):
            if qq_coverage(m - c, n, l, k - c) >= 1 - alpha - TOL:
                benign = qq_coverage(m, n, l, k)
                if best is None or benign < best[0] - 1e-13:
                    best = (benign, l, k)
                break  # larger k only raises the benign coverage
    if best is None:
        assert not sel.feasible
        return
    assert sel.feasible
    assert sel.coverage == pytest.approx(best[0], abs=1e-12)
    assert c < sel.k <= m - c
    assert sel.lower >= 1 - alpha - TOL
    l = sel.local_ranks[0]
    assert sel.lower == pytest.approx(qq_coverage(m - c, n, l, sel.k - c), abs=1e-12)
    assert sel.upper == pytest.approx(qq_coverage(m - c, n, l, sel.k), abs=1e-12)


def test_unequal_rule_is_a1_with_the_smallest_certified_k():
    sizes = (5, 10, 20, 40, 15, 8, 30, 12, 25, 18)
    for c in (1, 2, 3):
        sel = select_byzantine_ranks(sizes, 0.1, c)
        ranks = tuple(conformal_rank(n, 0.1) for n in sizes)
        assert sel.local_ranks == ranks
        assert sel.lower >= 0.9 - TOL and c < sel.k <= len(sizes) - c
        below = byzantine_coverage_bounds(sizes, ranks, sel.k - 1, c)[0]
        assert sel.k - 1 <= c or below < 0.9 - TOL
        assert sel.coverage == pytest.approx(qq_coverage_unequal(sizes, ranks, sel.k))


def test_non_trivial_up_to_045_m():
    for c in (0, 10, 20, 40, 45):
        cal = QuantileOfQuantilesCalibrator(n_byzantine=c)
        plan = cal.plan([50] * 100, 0.1)
        assert plan["feasible"] and plan["k"] <= 100 - c
        assert cal.coverage_bounds([50] * 100, 0.1).lower >= 0.9 - TOL
    assert not QuantileOfQuantilesCalibrator(n_byzantine=50).plan([50] * 100, 0.1)[
        "feasible"
    ]


def test_max_byzantine_matches_the_bounds():
    sizes = (12, 30, 7, 55, 20, 20, 41, 9, 16, 25, 33, 14)
    sel = select_byzantine_ranks(sizes, 0.1, 2)
    c_max = max_byzantine(sizes, 0.1, sel.local_ranks, sel.k)
    assert c_max >= 2
    assert (
        byzantine_coverage_bounds(sizes, sel.local_ranks, sel.k, c_max)[0] >= 0.9 - TOL
    )
    assert byzantine_coverage_bounds(sizes, sel.local_ranks, sel.k, c_max + 1)[0] < 0.9
    honest = select_qq_ranks(sizes, 0.1, local_rank="fixed")
    assert max_byzantine(sizes, 0.1, honest.local_ranks, honest.k) >= 0
    assert max_byzantine(sizes, 0.1, honest.local_ranks, 1) == -1


# ---------------------------------------------------------------------------
# 4. The calibrator: n_byzantine=0 unchanged, attacks never break the bound.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sizes", [[10] * 5, [50] * 20, [5, 10, 20, 40, 15, 8, 30, 12], [3, 300, 40]]
)
def test_n_byzantine_zero_is_bit_identical(sizes):
    rng = np.random.default_rng(1)
    ids = np.repeat(np.arange(len(sizes)), sizes)
    scores = rng.exponential(size=ids.size)
    a = QuantileOfQuantilesCalibrator().fit(scores, ids, alpha=0.1)
    b = QuantileOfQuantilesCalibrator(n_byzantine=0).fit(scores, ids, alpha=0.1)
    assert a.threshold_ == b.threshold_
    assert a.calibration_info_.keys() == b.calibration_info_.keys()
    assert a.calibration_info_["k"] == b.calibration_info_["k"]
    assert a.coverage_bounds_ == (a.calibration_info_["coverage"],) * 2


def _attack(kind, honest, c, rng, low=-1e300):
    """The c dishonest messages of one attack, given the honest ones."""
    finite = honest[np.isfinite(honest)]
    if kind == "min":  # all at the bottom: the adaptive attack
        return np.full(c, low)
    if kind == "below":  # adaptive, just below the honest minimum
        return np.full(c, np.nextafter(finite.min(), -np.inf))
    if kind == "max":
        return np.full(c, np.finfo(float).max)
    if kind == "noise":
        return rng.normal(size=c)
    if kind == "copy":
        return np.full(c, honest[0])
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["min", "below", "max", "noise", "copy"])
def test_attacks_keep_the_certified_coverage_monte_carlo(kind):
    # 20 clients of 10 uniform scores, 4 dishonest. For uniform scores the
    # coverage given the threshold T is min(T, 1)^+ exactly, so its mean over
    # R repetitions estimates the coverage with SE = std / sqrt(R) (about
    # 0.0012 for R = 2000, std ~ 0.05): it must not fall 4.5 SE below the
    # certified bound, and under "min" it estimates the bound itself.
    m, n, c, alpha, reps = 20, 10, 4, 0.1, 2000
    cal = QuantileOfQuantilesCalibrator(n_byzantine=c)
    plan = cal.plan([n] * m, alpha)
    lower, upper = cal.coverage_bounds([n] * m, alpha)
    rng = np.random.default_rng(7)
    cover = np.empty(reps)
    for r in range(reps):
        honest_scores = rng.uniform(size=(m - c, n))
        honest = np.sort(honest_scores, axis=1)[:, plan["local_ranks"][0] - 1]
        values = np.r_[honest, _attack(kind, honest, c, rng)]
        messages = [{"n": n, "quantile": float(v)} for v in values]
        t = cal.server_step(messages, alpha=alpha, n_per_client=[n] * m)
        cover[r] = min(max(t, 0.0), 1.0)
    mean, se = cover.mean(), cover.std(ddof=1) / np.sqrt(reps)
    assert mean >= lower - 4.5 * se
    assert mean <= upper + 4.5 * se
    if kind in ("min", "below"):
        assert abs(mean - lower) < 4.5 * se
    assert lower >= 1 - alpha - TOL


def test_minimal_attack_coverage_is_exactly_the_bound():
    # Equal sizes: under the minimal attack T = h_(k-c), whose coverage is
    # qq_coverage(m - c, n, l, k - c) exactly; check by exact enumeration of
    # the pooled ranks on a tiny case (every ordering of the N + 1 uniforms
    # is equally likely: the coverage is E[rank of T] / (N_H + 1)).
    m, n, c = 4, 2, 1
    cal = QuantileOfQuantilesCalibrator(n_byzantine=c)
    alpha = 0.4
    plan = cal.plan([n] * m, alpha)
    l, k = plan["local_ranks"][0], plan["k"]
    h = m - c
    total, count = 0, 0
    for perm in itertools.permutations(range(h * n)):
        ranks = np.array(perm).reshape(h, n) + 1
        honest = np.sort(np.sort(ranks, axis=1)[:, l - 1])
        values = np.r_[honest, np.full(c, -1e300)]
        t = _kth(values, k)
        total += t  # rank among the pooled honest scores
        count += 1
    exact = total / count / (h * n + 1)
    assert exact == pytest.approx(cal.coverage_bounds([n] * m, alpha).lower, abs=1e-12)


# ---------------------------------------------------------------------------
# 5. Parameters, the fitted coverage_bounds() and the default rule.
# ---------------------------------------------------------------------------
def test_parameter_errors():
    scores, ids = np.arange(60.0), np.repeat(np.arange(6), [5, 5, 10, 10, 15, 15])
    with pytest.raises(ValueError, match="n_byzantine"):
        QuantileOfQuantilesCalibrator(n_byzantine=-1).fit(scores, ids, alpha=0.1)
    with pytest.raises(ValueError, match="conditional"):
        QuantileOfQuantilesCalibrator(n_byzantine=1, conditional=True).fit(
            np.arange(60.0), np.repeat(np.arange(6), 10), alpha=0.1
        )
    with pytest.raises(ValueError, match="local_rank"):
        QuantileOfQuantilesCalibrator(n_byzantine=1, local_rank="auto").fit(
            scores, ids, alpha=0.1
        )


def test_fitted_max_byzantine():
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(30), 20)
    cal = QuantileOfQuantilesCalibrator(n_byzantine=3).fit(
        rng.uniform(size=600), ids, alpha=0.1
    )
    assert cal.max_byzantine() >= 3
    info = cal.calibration_info_
    assert cal.max_byzantine() == max_byzantine(
        [20] * 30, 0.1, info["local_ranks"], info["k"]
    )
    assert cal.coverage_bounds_ == (info["coverage_lower"], info["coverage_upper"])


@pytest.mark.parametrize(
    "calibrator",
    [
        CentralCalibrator(),
        QuantileOfQuantilesCalibrator(),
        QuantileOfQuantilesCalibrator(n_byzantine=2),
        AveragingCalibrator(),
        PrivateQuantileOfQuantilesCalibrator(epsilon=50.0, score_bounds=(0, 1)),
    ],
)
def test_fitted_coverage_bounds_without_arguments(calibrator):
    # Issue 24: coverage_bounds() on a fitted calibrator used to raise
    # TypeError (2 missing arguments); the explicit call still works.
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(10), 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = calibrator.fit(rng.uniform(size=1000), ids, alpha=0.1, random_state=0)
    got = cal.coverage_bounds()
    want = cal.coverage_bounds(cal.n_per_client_, 0.1)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert cal.coverage_bounds(alpha=0.2) == cal.coverage_bounds(cal.n_per_client_, 0.2)


def test_unfitted_coverage_bounds_without_arguments_raises():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        QuantileOfQuantilesCalibrator().coverage_bounds()
    with pytest.raises(NotFittedError):
        CentralCalibrator().coverage_bounds()


# ---------------------------------------------------------------------------
# 6. How the bound is computed: the pointwise worst set, the band, the
#    staircase, and a plan that used to take seconds.
# ---------------------------------------------------------------------------
def _pointwise_worst(sizes, ranks, h, k, largest):
    """int_0^1 ext over every honest set of h clients of P(X_H(t) <= k - 1),
    the extremum taken by enumeration at each t (scipy quad)."""
    from scipy import integrate
    from scipy.special import betainc

    subsets = list(itertools.combinations(range(len(sizes)), h))

    def f(t):
        values = []
        for sub in subsets:
            pmf = np.zeros(h + 1)
            pmf[0] = 1.0
            for j in sub:
                if ranks[j] <= sizes[j]:
                    p = betainc(ranks[j], sizes[j] - ranks[j] + 1, t)
                    pmf[1:] = pmf[1:] * (1 - p) + pmf[:-1] * p
                    pmf[0] *= 1 - p
            values.append(float(np.sum(pmf[:k])))
        return min(values) if largest else max(values)

    return integrate.quad(f, 0.0, 1.0, epsabs=1e-13, epsrel=1e-12, limit=400)[0]


@pytest.mark.parametrize(
    "sizes,alpha,c",
    [
        ((2, 3, 4, 5, 6, 9), 0.2, 1),
        ((3, 3, 5, 8, 9, 12), 0.1, 2),
        ((4, 7, 7, 20), 0.3, 1),
    ],
)
def test_bound_is_the_integral_of_the_pointwise_worst_set(sizes, alpha, c):
    # The partition of the largest p_j(t) is the minimum over every honest
    # set at each t (and the smallest the maximum); its integral matches
    # an adaptive quadrature of the enumerated extremum.
    ranks = tuple(conformal_rank(n, alpha) for n in sizes)
    h = len(sizes) - c
    for k in range(c + 1, len(sizes) + 1):
        lower, upper = byzantine_coverage_bounds(sizes, ranks, k, c)
        want = _pointwise_worst(sizes, ranks, h, k - c, True)
        assert lower == pytest.approx(want, abs=1e-10)
        if k <= h:
            assert upper == pytest.approx(
                _pointwise_worst(sizes, ranks, h, k, False), abs=1e-10
            )


def test_certified_band_brackets_the_first_passing_rank():
    from skfedcp.calibrators._qq._byzantine_bound import (
        certified_band,
        extreme_coverages,
    )

    rng = np.random.default_rng(5)
    for _ in range(6):
        m = int(rng.integers(8, 30))
        c = int(rng.integers(1, 3))
        sizes = tuple(rng.integers(5, 200, m).tolist())
        ranks = tuple(conformal_rank(n, 0.1) for n in sizes)
        threshold = 0.9 - TOL
        band = certified_band(sizes, ranks, m - c, threshold, m - 2 * c)
        values = extreme_coverages(
            sizes, ranks, m - c, True, tuple(range(1, m - 2 * c + 1))
        )
        passing = np.flatnonzero(values >= threshold)
        if band is None:
            assert passing.size == 0
            continue
        k_lo, k_hi = band
        assert np.all(values[: k_lo - 1] < threshold)
        if k_hi < m - 2 * c:  # an inner upper end is a certified pass
            assert values[k_hi - 1] >= threshold
        if passing.size:  # the first passing rank lies in the band
            assert k_lo - 1 <= passing[0] <= k_hi - 1


@pytest.mark.parametrize(
    "h,n,l_max,r_max", [(9, 10, 10, 8), (14, 20, 17, 12), (5, 40, 40, 5)]
)
def test_equal_staircase_is_the_table_frontier(h, n, l_max, r_max):
    from skfedcp.calibrators._qq._byzantine import _equal_steps

    table = np.array(
        [
            [qq_coverage(h, n, l, r) for r in range(1, r_max + 1)]
            for l in range(1, l_max + 1)
        ]
    )
    for threshold in (0.5, 0.8, 0.9, 0.95):
        passing = table >= threshold
        want, last = [], None
        for l in range(1, l_max + 1):
            if passing[l - 1, -1]:
                r = int(passing[l - 1].argmax()) + 1
                if r != last:
                    want.append((l, r))
                    last = r
        assert _equal_steps(h, n, threshold, l_max, r_max) == want


def test_unequal_hundred_clients_plans():
    # Formerly 1.5 s (every pair of Beta CDFs root-found), now ~0.15 s.
    sizes = np.random.default_rng(0).integers(10, 1001, 100)
    cal = QuantileOfQuantilesCalibrator(n_byzantine=5)
    plan = cal.plan(sizes, 0.1)
    assert plan["feasible"] and 5 < plan["k"] <= 95
    assert plan["coverage_lower"] >= 0.9 - TOL
    assert plan["coverage_lower"] <= plan["coverage"] <= plan["coverage_upper"]


def test_fixed_certified_pair_is_the_fixed_selection():
    # dp-qq's gamma search reads (ranks, k, lower) without the upper bound
    # and the all-honest coverage: the same pair as the full selection,
    # including A.1's clipped fallback at a small alpha.
    from skfedcp.calibrators._qq._byzantine import fixed_certified_pair

    cases = [
        ((5, 10, 20, 40, 15, 8, 30, 12, 25, 18), 0.1, 2),
        ((12, 30, 7, 55, 20, 20, 41, 9, 16, 25, 33, 14), 0.2, 3),
        ((3, 4, 6, 9, 11, 5, 7), 0.05, 1),
        ((2, 3, 3, 4, 5, 6, 8), 0.1, 1),
    ]
    for sizes, alpha, c in cases:
        sel = select_byzantine_ranks(sizes, alpha, c, local_rank="fixed")
        got = fixed_certified_pair(sizes, alpha, c)
        if not sel.feasible:
            assert got is None
            continue
        assert got == (sel.local_ranks, sel.k, sel.lower)
