"""rule="tight": the exact per-rank tail bound and the coverage it guarantees.

Everything here is exact (enumeration of every data set, exact laws of the
releases); nothing is Monte Carlo. The Monte Carlo checks on continuous
laws are in tests/statistical/test_private_mc.py.
"""

import itertools
import math
import warnings

import numpy as np
import pytest
from _ranks import coverage_given_ranks
from scipy import stats

from skfedcp.calibrators import (
    PrivateCentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
)
from skfedcp.calibrators._dp._laws import _kth_smallest_law
from skfedcp.exceptions import ClippedScoresWarning
from skfedcp.privacy import (
    private_conformal_tight_coverage,
    private_quantile_probabilities,
    private_quantile_rank_tail,
)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippedScoresWarning)
        yield


def _histograms(n, n_bins):
    """Every way to put n scores in n_bins bins (as bin counts)."""
    for cut in itertools.combinations(range(n + n_bins - 1), n_bins - 1):
        bounds = (-1,) + cut + (n + n_bins - 1,)
        yield np.diff(bounds) - 1


# --------------------------------------------------------------------------
# The tail bound holds for every data set


@pytest.mark.parametrize("level", [0.5, 0.7, 0.9, 1.0])
@pytest.mark.parametrize(
    "n, n_bins, epsilon", [(10, 4, 2.0), (12, 5, 6.0), (8, 6, 1.0)]
)
def test_tail_bounds_every_data_set(n, n_bins, epsilon, level):
    edges = np.arange(n_bins + 1.0)
    tail = private_quantile_rank_tail(n, level, epsilon=epsilon, n_bins=n_bins)
    assert tail[0] == 0.0 and tail[-1] == 1.0 and (np.diff(tail) >= 0).all()
    worst = np.zeros(n + 2)
    for counts in _histograms(n, n_bins):
        scores = np.repeat(edges[1:], counts)  # each score on its bin's edge
        p = private_quantile_probabilities(scores, level, epsilon=epsilon, edges=edges)
        rank = np.cumsum(counts)  # R if the mechanism releases bin b
        # P(R < r) = mass of the bins with rank < r (rank is non-decreasing).
        below = np.searchsorted(rank, np.arange(n + 2), side="left")
        cum = np.r_[0.0, np.cumsum(p)]
        worst = np.maximum(worst, cum[below])
    assert (worst[1 : n + 1] <= tail[1 : n + 1] * (1 + 1e-12) + 1e-300).all()
    # Not vacuous: the bound is within a factor (n_bins - 1) of the worst case
    # somewhere in its non-trivial range.
    useful = (tail > 1e-6) & (tail < 0.5)
    if useful.any():
        assert (worst[useful] >= tail[useful] / (n_bins - 1) / 1.01).any()


def test_tail_bound_validation():
    with pytest.raises(ValueError, match=r"level must be in \[1/2, 1\]"):
        private_quantile_rank_tail(10, 0.3, epsilon=1.0, n_bins=10)
    with pytest.raises(ValueError, match="n_bins"):
        private_quantile_rank_tail(10, 0.9, epsilon=1.0, n_bins=1)
    with pytest.raises(ValueError, match="epsilon"):
        private_quantile_rank_tail(10, 0.9, epsilon=0.0, n_bins=10)


# --------------------------------------------------------------------------
# Exact coverage on discrete laws (atoms, ties on edges, values outside the
# bounds, two-point laws), by enumerating every data set of a client


def _multisets(n, n_atoms):
    yield from _histograms(n, n_atoms)


def _release_law(calibrator, plan, n, atoms, weights):
    """Unconditional law of one client's release: the mixture over its data."""
    edges = np.linspace(*plan["score_bounds"], plan["n_bins"] + 1)
    level = plan["levels"][0] if "levels" in plan else plan["level"]
    clipped = np.clip(atoms, *plan["score_bounds"])
    law = np.zeros(plan["n_bins"])
    log_w = np.log(weights)
    for counts in _multisets(n, len(atoms)):
        log_prob = (
            math.lgamma(n + 1)
            - sum(math.lgamma(c + 1) for c in counts)
            + float(counts @ log_w)
        )
        scores = np.repeat(clipped, counts)
        p = private_quantile_probabilities(
            scores, level, epsilon=plan["epsilon"], edges=edges, top_bin="inf"
        )
        law += math.exp(log_prob) * p
    values = edges[1:].copy()
    values[-1] = np.inf
    return values, law


def _cdf(atoms, weights):
    atoms, weights = np.asarray(atoms), np.asarray(weights)
    return lambda t: np.array([weights[atoms <= v].sum() for v in np.atleast_1d(t)])


# Atoms on (0, 1) with 4 bins (edges 0, .25, .5, .75, 1): below e_0, on
# edges, inside a bin and above e_B.
ATOMS = np.array([-0.3, 0.25, 0.4, 0.9, 1.0, 1.7])
LAWS = {
    "spread": np.full(6, 1 / 6),
    "two-point": np.array([0.9, 0, 0, 0, 0, 0.1]) + 1e-12,
    "edges": np.array([0.02, 0.45, 0.02, 0.02, 0.47, 0.02]),
    "low atom": np.array([0.85, 0.03, 0.03, 0.03, 0.03, 0.03]),
    "top heavy": np.array([0.02, 0.02, 0.02, 0.04, 0.2, 0.7]),
}


@pytest.mark.parametrize("law", list(LAWS))
@pytest.mark.parametrize(
    "n, rule",
    [
        (10, "tight"),
        pytest.param(9, "tight", marks=pytest.mark.slow),
        pytest.param(10, "paper", marks=pytest.mark.slow),
    ],
)
def test_dp_qq_exact_coverage_on_discrete_laws(law, n, rule):
    # n = 9: level 2/3 and k = 3; n = 10: level 0.8 and k = 2 (tight).
    m, alpha = 3, 0.25
    cal = PrivateQuantileOfQuantilesCalibrator(
        epsilon=20.0, score_bounds=(0, 1), n_bins=4, rule=rule
    )
    plan = cal.plan([n] * m, alpha)
    assert plan["feasible"]
    weights = LAWS[law] / LAWS[law].sum()
    values, release = _release_law(cal, plan, n, ATOMS, weights)
    threshold = _kth_smallest_law(np.tile(release, (m, 1)), plan["k"])
    coverage = float(threshold @ _cdf(ATOMS, weights)(values))
    assert coverage >= plan["coverage_lower"] - 1e-12
    assert coverage >= 1 - alpha - 1e-12


@pytest.mark.parametrize("law", list(LAWS))
@pytest.mark.parametrize(
    "sizes", [(8, 10, 10), pytest.param((7, 9, 11), marks=pytest.mark.slow)]
)
def test_dp_qq_tight_exact_coverage_unequal_sizes(law, sizes):
    alpha = 0.25
    cal = PrivateQuantileOfQuantilesCalibrator(
        epsilon=20.0, score_bounds=(0, 1), n_bins=4, rule="tight"
    )
    plan = cal.plan(list(sizes), alpha)
    assert plan["feasible"]
    weights = LAWS[law] / LAWS[law].sum()
    laws = {n: _release_law(cal, plan, n, ATOMS, weights) for n in set(sizes)}
    values = laws[sizes[0]][0]
    releases = np.array([laws[n][1] for n in sizes])
    threshold = _kth_smallest_law(releases, plan["k"])
    coverage = float(threshold @ _cdf(ATOMS, weights)(values))
    assert coverage >= plan["coverage_lower"] - 1e-12
    assert coverage >= 1 - alpha - 1e-12


@pytest.mark.parametrize(
    "sizes, level, k, epsilon, n_bins",
    [((3, 4), 0.7, 1, 3.0, 4), ((3, 4), 0.9, 2, 6.0, 3), ((2, 3, 3), 0.8, 2, 4.0, 5)],
)
def test_tight_bound_unequal_sizes_is_the_average_over_the_ranks(
    sizes, level, k, epsilon, n_bins
):
    # LB(q, k) = E_D[M(D_1..D_m, k)] with independent D_j: enumerate every
    # rank vector and compare with the Poisson-binomial integral.
    from collections import Counter

    from skfedcp.calibrators._dp._tight import _tight_lower_bound
    from skfedcp.privacy._tight import _rank_law

    laws = [_rank_law(n, level, epsilon, n_bins) for n in sizes]
    expected = 0.0
    for combo in itertools.product(*[range(len(r)) for r, _ in laws]):
        ranks = [int(laws[j][0][i]) for j, i in enumerate(combo)]
        prob = math.prod(float(laws[j][1][i]) for j, i in enumerate(combo))
        expected += prob * coverage_given_ranks(sizes, ranks, k)
    groups = tuple(sorted(Counter(sizes).items()))
    value = _tight_lower_bound(groups, level, k, epsilon, n_bins)
    assert value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("law", list(LAWS))
def test_dp_central_exact_coverage_on_discrete_laws(law):
    n, alpha = 10, 0.25
    cal = PrivateCentralCalibrator(
        epsilon=40.0, score_bounds=(0, 1), n_bins=4, rule="tight"
    )
    plan = cal.plan([n], alpha)
    assert plan["feasible"]
    weights = LAWS[law] / LAWS[law].sum()
    values, release = _release_law(cal, plan, n, ATOMS, weights)
    coverage = float(release @ _cdf(ATOMS, weights)(values))
    assert coverage >= plan["coverage_lower"] - 1e-12 >= 1 - alpha - 1e-12


def test_continuous_law_exact_check_central():
    # Uniform scores: E[F(threshold)] given the data, averaged over the order
    # statistics exactly by Gauss quadrature is out of reach; instead check
    # that the bound is below the exact coverage given the deterministic
    # data set i/(n+1) (the law of no data set can beat the bound from below
    # on average, but this one is typical) and far below the paper's level.
    cal = PrivateCentralCalibrator(epsilon=1.0, score_bounds=(0, 1), rule="tight")
    plan = cal.plan([1000], 0.1)
    paper = PrivateCentralCalibrator(epsilon=1.0, score_bounds=(0, 1), rule="paper")
    paper = paper.plan([1000], 0.1)
    assert plan["level"] < paper["level"]
    assert plan["coverage_lower"] >= 0.9
    assert plan["coverage_lower"] == pytest.approx(
        private_conformal_tight_coverage(
            1000, plan["level"], epsilon=1.0, n_bins=plan["n_bins"]
        )
    )


# --------------------------------------------------------------------------
# Plans of rule="tight"


class TestTightPlans:
    def test_dp_qq_paper_setting(self):
        # Issue 14 item 4 changed these: the level is any real in [1/2, 1]
        # (no longer a rank / n), bisected until the bound is 1 - alpha, and
        # k is the plan with the lowest coverage on public uniform scores.
        for epsilon, (level, k) in {
            10.0: (0.88005, 5),
            5.0: (0.89900, 4),
            1.0: (0.97873, 1),
        }.items():
            cal = PrivateQuantileOfQuantilesCalibrator(
                epsilon=epsilon, score_bounds=(0, 1), rule="tight"
            )
            plan = cal.plan([200] * 5, 0.1)
            assert plan["rule"] == "tight" and plan["feasible"]
            assert plan["k"] == k
            np.testing.assert_allclose(plan["levels"], level, atol=5e-6)
            assert plan["local_ranks"].tolist() == [math.ceil(200 * level)] * 5
            assert 0.9 <= plan["coverage_lower"] <= 0.9 + 1e-8
            assert cal.coverage_bounds([200] * 5, 0.1).lower == plan["coverage_lower"]

    def test_dp_qq_level_is_the_smallest_that_covers(self):
        from skfedcp.calibrators._dp._tight import _tight_lower_bound

        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=5.0, score_bounds=(0, 1), rule="tight"
        )
        plan = cal.plan([200] * 5, 0.1)
        q, k = plan["levels"][0], plan["k"]
        groups = ((200, 5),)
        assert _tight_lower_bound(groups, q, k, 5.0, 100) >= 0.9
        assert _tight_lower_bound(groups, q - 1e-8, k, 5.0, 100) < 0.9 + 1e-12

    def test_dp_qq_tight_is_feasible_where_paper_is_not(self):
        # epsilon = 1, 5 x 200: the paper runs at q = 1 (M = 0.999).
        paper = PrivateQuantileOfQuantilesCalibrator(epsilon=1.0, score_bounds=(0, 1))
        tight = paper.set_params(rule="tight")
        assert tight.plan([200] * 5, 0.1)["levels"][0] < 1.0

    def test_dp_central_levels_are_lower(self):
        for n, epsilon in [(1000, 1.0), (1000, 5.0), (5000, 8.0)]:
            paper = PrivateCentralCalibrator(
                epsilon=epsilon, score_bounds=(0, 1), rule="paper"
            )
            tight = PrivateCentralCalibrator(
                epsilon=epsilon, score_bounds=(0, 1), rule="tight"
            )
            p, t = paper.plan([n], 0.1), tight.plan([n], 0.1)
            assert t["n_bins"] == p["n_bins"]
            assert 0.9 < t["level"] < p["level"]
            assert t["coverage_lower"] >= 0.9

    def test_dp_central_infeasible_reports_min_n(self):
        cal = PrivateCentralCalibrator(
            epsilon=0.1, score_bounds=(0, 1), n_bins=100, rule="tight"
        )
        plan = cal.plan([50], 0.1)
        assert not plan["feasible"] and "N >= " in plan["reason"]
        assert cal.plan([plan["min_n"]], 0.1)["feasible"]
        assert not cal.plan([plan["min_n"] - 1], 0.1)["feasible"]

    def test_unequal_sizes(self):
        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=10.0, score_bounds=(0, 1), rule="tight"
        )
        sizes = [150, 180, 200, 220, 250]
        plan = cal.plan(sizes, 0.1)
        assert plan["feasible"] and plan["rule"] == "tight"
        assert len(set(plan["levels"].tolist())) == 1  # one common level
        assert 0.9 <= plan["coverage_lower"] <= 0.9 + 1e-8
        paper = cal.set_params(rule="paper").plan(sizes, 0.1)
        assert plan["coverage_lower"] < paper["score"]

    def test_bad_rule(self):
        cal = PrivateCentralCalibrator(epsilon=5.0, score_bounds=(0, 1), rule="nope")
        with pytest.raises(ValueError, match='rule must be "paper" or "tight"'):
            cal.plan([1000], 0.1)

    def test_fit_uses_the_tight_plan(self):
        rng = np.random.default_rng(0)
        scores, ids = rng.uniform(size=1000), np.repeat(np.arange(5), 200)
        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=10.0, score_bounds=(0, 1), rule="tight"
        ).fit(scores, ids, alpha=0.1, random_state=0)
        assert cal.calibration_info_["rule"] == "tight"
        law = cal.threshold_probabilities(scores, ids, alpha=0.1)
        assert cal.threshold_ in law.values[law.probabilities > 0]


# --------------------------------------------------------------------------
# Log-space laws: exact privacy where the linear law underflows


def _neighbours(scores, values, rng, count):
    for _ in range(count):
        other = scores.copy()
        other[rng.integers(scores.shape[0])] = rng.choice(values)
        yield other


def test_central_log_law_keeps_privacy_ratios_finite():
    rng = np.random.default_rng(0)
    cal = PrivateCentralCalibrator(epsilon=10.0, score_bounds=(0, 1), n_bins=20)
    scores = rng.beta(8, 1, size=3000)
    linear = cal.threshold_probabilities(scores, alpha=0.1)
    assert (linear.probabilities == 0).any()  # underflow in linear space
    base = cal.threshold_probabilities(scores, alpha=0.1, log=True).probabilities
    assert np.isfinite(base).all()
    np.testing.assert_allclose(np.exp(base).sum(), 1.0, rtol=1e-12)
    worst = 0.0
    for other in _neighbours(scores, [0.0, 0.5, 1.0, 1.5], rng, 40):
        log_p = cal.threshold_probabilities(other, alpha=0.1, log=True).probabilities
        worst = max(worst, float(np.abs(log_p - base).max()))
    assert 0.2 * 10.0 < worst <= 10.0 + 1e-9


def test_dp_qq_log_law_keeps_privacy_ratios_finite():
    rng = np.random.default_rng(1)
    cal = PrivateQuantileOfQuantilesCalibrator(
        epsilon=10.0, score_bounds=(0, 1), n_bins=20
    )
    ids = np.repeat([0, 1, 2], 600)
    scores = rng.beta(8, 1, size=1800)
    linear = cal.threshold_probabilities(scores, ids, alpha=0.1)
    assert (linear.probabilities == 0).any()
    base = cal.threshold_probabilities(scores, ids, alpha=0.1, log=True).probabilities
    assert np.isfinite(base).all()
    # Where the linear law is representable, the two agree.
    ok = linear.probabilities > 1e-250
    np.testing.assert_allclose(
        np.exp(base[ok]), linear.probabilities[ok], rtol=1e-9, atol=0
    )
    worst = 0.0
    for other in _neighbours(scores[:600], [0.0, 0.5, 1.0, 1.5], rng, 30):
        data = np.r_[other, scores[600:]]
        log_p = cal.threshold_probabilities(data, ids, alpha=0.1, log=True)
        worst = max(worst, float(np.abs(log_p.probabilities - base).max()))
    assert 0.05 * 10.0 < worst <= 10.0 + 1e-9


def test_log_law_of_an_infeasible_plan():
    cal = PrivateQuantileOfQuantilesCalibrator(epsilon=1.0, score_bounds=(0, 1))
    law = cal.threshold_probabilities(
        np.zeros(100), np.repeat([0, 1], 50), alpha=0.1, log=True
    )
    assert law.values.tolist() == [np.inf] and law.probabilities.tolist() == [0.0]


def test_log_law_matches_linear_on_a_small_case():
    rng = np.random.default_rng(2)
    cal = PrivateQuantileOfQuantilesCalibrator(
        epsilon=5.0, score_bounds=(0, 1), n_bins=8
    )
    scores, ids = rng.uniform(size=300), np.repeat([0, 1, 2], 100)
    lin = cal.threshold_probabilities(scores, ids, alpha=0.2).probabilities
    log = cal.threshold_probabilities(scores, ids, alpha=0.2, log=True).probabilities
    np.testing.assert_allclose(np.exp(log), lin, rtol=1e-10, atol=1e-300)
    assert stats.entropy(lin) > 0  # a non-degenerate law
