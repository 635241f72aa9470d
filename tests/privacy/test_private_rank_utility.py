"""utility="rank": the symmetric rank utility of the binned private quantile.

``u_b = max(L_b - t + 1, G_b - n + t)`` with ``t = q n`` (sensitivity 1),
used by ``PrivateQuantileOfQuantilesCalibrator(rule="tight",
utility="rank")``. Exact checks: the privacy loss over every neighbouring
pair of small data sets, the step-1 tail bound over every data set, the
step-3 bound against the exact QQ coverage averaged over every rank vector,
and the exact coverage of the plan on discrete laws (every data set of a
client enumerated). One Monte Carlo check on uniform scores is marked slow.
"""

import itertools
import math
import warnings
from collections import Counter

import numpy as np
import pytest
from _ranks import coverage_given_ranks

from skfedcp.calibrators import PrivateQuantileOfQuantilesCalibrator
from skfedcp.calibrators._dp._laws import _kth_smallest_law
from skfedcp.calibrators._dp._tight import _tight_lower_bound
from skfedcp.exceptions import ClippedScoresWarning
from skfedcp.privacy import (
    exponential_mechanism_probabilities,
    private_quantile,
    private_quantile_probabilities,
    private_quantile_rank_tail,
)
from skfedcp.privacy._quantile import _quantile_loss, _rank_counts
from skfedcp.privacy._tight import _rank_law


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippedScoresWarning)
        yield


# --------------------------------------------------------------------------
# The loss and its privacy


def _log_probs(scores, level, epsilon, edges):
    return private_quantile_probabilities(
        scores, level, epsilon=epsilon, edges=edges, utility="rank", log=True
    )


def _mutant_no_half(scores, level, epsilon, edges):
    """Mutant: exp(-eps * u_b), the 1/2 of the exponential mechanism dropped."""
    scores = np.asarray(scores, dtype=float)
    lower, greater, _, _ = _rank_counts(scores, edges)
    loss, _ = _quantile_loss(lower, greater, level, "rank", scores.shape[0])
    return exponential_mechanism_probabilities(
        -loss, epsilon=2 * epsilon, sensitivity=1.0, log=True
    )


def _max_log_ratio(log_prob_fn, level, epsilon, edges, n_max=4):
    """Largest |log P_D(b) - log P_D'(b)| over all replace-one neighbours.

    The mechanism sees scores only through bin indices: D ranges over every
    multiset of size 1..n_max of one value per bin plus one below e_0 and one
    above e_B, and D' replaces one element by any other value.
    """
    values = [edges[0] - 1.0, *((edges[:-1] + edges[1:]) / 2), edges[-1] + 1.0]
    cache = {}

    def log_p(multiset):
        if multiset not in cache:
            cache[multiset] = log_prob_fn(
                [values[i] for i in multiset], level, epsilon, edges
            )
        return cache[multiset]

    worst = 0.0
    for n in range(1, n_max + 1):
        for data in itertools.combinations_with_replacement(range(len(values)), n):
            for i in range(n):
                for v in range(len(values)):
                    if v == data[i]:
                        continue
                    other = tuple(sorted(data[:i] + (v,) + data[i + 1 :]))
                    ratio = np.abs(log_p(data) - log_p(other)).max()
                    worst = max(worst, float(ratio))
    return worst


BIN_GRIDS = [
    np.array([0.0, 0.5, 1.0]),
    np.array([0.0, 0.2, 0.3, 1.0]),
    np.linspace(-1.0, 1.0, 6),
]


class TestRankUtilityPrivacy:
    @pytest.mark.parametrize("level", [0.3, 0.5, 0.77, 0.9, 1.0])
    @pytest.mark.parametrize("epsilon", [0.5, 2.0, 10.0])
    def test_replace_one_bound(self, level, epsilon):
        worst = max(_max_log_ratio(_log_probs, level, epsilon, e) for e in BIN_GRIDS)
        assert worst <= epsilon + 1e-9

    def test_bound_is_attained(self):
        # One replacement can raise the chosen bin's loss by one and lower the
        # best bin's loss by one: the full epsilon.
        worst = _max_log_ratio(_log_probs, 0.5, 10.0, BIN_GRIDS[2])
        assert worst == pytest.approx(10.0, rel=1e-3)

    def test_mutant_without_the_half_fails(self):
        worst = _max_log_ratio(_mutant_no_half, 0.5, 2.0, BIN_GRIDS[2])
        assert worst > 1.5 * 2.0

    def test_loss_sensitivity(self, seed):
        # |u_b(D) - u_b(D')| <= 1 when one of n scores is replaced.
        rng = np.random.default_rng(seed)
        edges = np.linspace(0.0, 1.0, 8)
        for _ in range(300):
            level = rng.uniform(0.01, 1.0)
            scores = rng.uniform(-0.2, 1.2, size=rng.integers(1, 20))
            other = scores.copy()
            other[rng.integers(scores.shape[0])] = rng.uniform(-0.2, 1.2)
            n = scores.shape[0]
            u, delta = _quantile_loss(
                *_rank_counts(scores, edges)[:2], level, "rank", n
            )
            u2, _ = _quantile_loss(*_rank_counts(other, edges)[:2], level, "rank", n)
            assert delta == 1.0
            assert np.abs(u - u2).max() <= 1.0 + 1e-12

    def test_hand_case(self):
        # 4 scores, one per bin; t = 0.5 * 4 = 2: u_b = max(L_b - 1, G_b - 2)
        # = max(-1, 1), max(0, 0), max(1, -1), max(2, -2) = 1, 0, 1, 2.
        edges = np.array([0.0, 0.1, 0.2, 0.3, 0.4])
        p = private_quantile_probabilities(
            [0.05, 0.15, 0.25, 0.35], 0.5, epsilon=2.0, edges=edges, utility="rank"
        )
        expected = np.exp(-np.array([1.0, 0.0, 1.0, 2.0]))
        np.testing.assert_allclose(p, expected / expected.sum(), rtol=1e-12)
        # The draw uses the same law (epsilon huge: the argmin, edge e_2).
        assert (
            private_quantile(
                [0.05, 0.15, 0.25, 0.35],
                0.5,
                epsilon=1e9,
                edges=edges,
                utility="rank",
                random_state=0,
            )
            == 0.2
        )

    def test_validation(self):
        with pytest.raises(ValueError, match='utility must be "quantile" or "rank"'):
            private_quantile([0.1], 0.5, epsilon=1.0, bounds=(0, 1), utility="x")
        with pytest.raises(ValueError, match='utility must be "quantile" or "rank"'):
            private_quantile_rank_tail(10, 0.9, epsilon=1.0, n_bins=10, utility="x")


# --------------------------------------------------------------------------
# Step 1: the tail bound holds for every data set


def _histograms(n, n_bins):
    for cut in itertools.combinations(range(n + n_bins - 1), n_bins - 1):
        bounds = (-1,) + cut + (n + n_bins - 1,)
        yield np.diff(bounds) - 1


@pytest.mark.parametrize("level", [0.3, 0.5, 0.75, 0.9, 1.0])
@pytest.mark.parametrize(
    "n, n_bins, epsilon", [(10, 4, 2.0), (12, 5, 6.0), (8, 6, 1.0), (9, 3, 20.0)]
)
def test_tail_bounds_every_data_set(n, n_bins, epsilon, level):
    edges = np.arange(n_bins + 1.0)
    tail = private_quantile_rank_tail(
        n, level, epsilon=epsilon, n_bins=n_bins, utility="rank"
    )
    assert tail[0] == 0.0 and tail[-1] == 1.0 and (np.diff(tail) >= 0).all()
    worst = np.zeros(n + 2)
    for counts in _histograms(n, n_bins):
        scores = np.repeat(edges[1:], counts)  # each score on its bin's edge
        p = private_quantile_probabilities(
            scores, level, epsilon=epsilon, edges=edges, utility="rank"
        )
        rank = np.cumsum(counts)  # R if the mechanism releases bin b
        below = np.searchsorted(rank, np.arange(n + 2), side="left")
        cum = np.r_[0.0, np.cumsum(p)]
        worst = np.maximum(worst, cum[below])
    assert (worst[1 : n + 1] <= tail[1 : n + 1] * (1 + 1e-12) + 1e-300).all()
    # Not vacuous: within a factor 2 (n_bins - 1) of the worst case somewhere
    # (measured: 1 to 2.4 in these cases, 4 at n = 9, B = 3, t = 4.5, where
    # three bins cannot hold the B - 1 low bins and a bin at |j - t| = 1/2).
    useful = (tail > 1e-6) & (tail < 0.5)
    if useful.any():
        assert (worst[useful] >= tail[useful] / (2 * (n_bins - 1)) / 1.01).any()


def test_tail_formula_by_hand():
    # n = 4, t = 2.5 (q = 0.625), B = 3: U_r = min_{j >= r} |j - t| = 0.5 for
    # r <= 3 and 1.5 for r = 4; the floor t - r + 1 is 2.5, 1.5, 0.5, -0.5,
    # so the gap is 2, 1, 0, -2 and tail[r] = 1 / (1 + e^{gap} / 2).
    tail = private_quantile_rank_tail(4, 0.625, epsilon=2.0, n_bins=3, utility="rank")
    gap = np.array([2.0, 1.0, 0.0, -2.0])
    expected = 1.0 / (1.0 + np.exp(gap) / 2.0)
    np.testing.assert_allclose(tail[1:5], expected, rtol=1e-12)


# --------------------------------------------------------------------------
# Step 3: the bound is the average of the exact QQ coverage over the ranks


@pytest.mark.parametrize(
    "sizes, level, k, epsilon, n_bins",
    [((3, 4), 0.7, 1, 3.0, 4), ((3, 4), 0.9, 2, 6.0, 3), ((2, 3, 3), 0.6, 2, 4.0, 5)],
)
def test_bound_is_the_average_over_the_ranks(sizes, level, k, epsilon, n_bins):
    laws = [_rank_law(n, level, epsilon, n_bins, utility="rank") for n in sizes]
    expected = 0.0
    for combo in itertools.product(*[range(len(r)) for r, _ in laws]):
        ranks = [int(laws[j][0][i]) for j, i in enumerate(combo)]
        prob = math.prod(float(laws[j][1][i]) for j, i in enumerate(combo))
        expected += prob * coverage_given_ranks(sizes, ranks, k)
    groups = tuple(sorted(Counter(sizes).items()))
    value = _tight_lower_bound(groups, level, k, epsilon, n_bins, "rank")
    assert value == pytest.approx(expected, abs=1e-12)


# --------------------------------------------------------------------------
# Exact coverage of the plan on discrete laws (every data set of a client)

ATOMS = np.array([-0.3, 0.25, 0.4, 0.9, 1.0, 1.7])
LAWS = {
    "spread": np.full(6, 1 / 6),
    "two-point": np.array([0.9, 0, 0, 0, 0, 0.1]) + 1e-12,
    "edges": np.array([0.02, 0.45, 0.02, 0.02, 0.47, 0.02]),
    "low atom": np.array([0.85, 0.03, 0.03, 0.03, 0.03, 0.03]),
    "top heavy": np.array([0.02, 0.02, 0.02, 0.04, 0.2, 0.7]),
}


def _release_law(plan, n, level, weights):
    """Law of one client's release, mixed over every data set of n atoms."""
    edges = np.linspace(*plan["score_bounds"], plan["n_bins"] + 1)
    clipped = np.clip(ATOMS, *plan["score_bounds"])
    law = np.zeros(plan["n_bins"])
    log_w = np.log(weights)
    for counts in _histograms(n, len(ATOMS)):
        log_prob = (
            math.lgamma(n + 1)
            - sum(math.lgamma(c + 1) for c in counts)
            + float(counts @ log_w)
        )
        p = private_quantile_probabilities(
            np.repeat(clipped, counts),
            level,
            epsilon=plan["epsilon"],
            edges=edges,
            top_bin="inf",
            utility=plan["utility"],
        )
        law += math.exp(log_prob) * p
    values = edges[1:].copy()
    values[-1] = np.inf
    return values, law


def _cdf(weights):
    return lambda t: np.array([weights[ATOMS <= v].sum() for v in np.atleast_1d(t)])


@pytest.mark.parametrize("law", list(LAWS))
@pytest.mark.parametrize(
    "sizes", [(10, 10, 10), pytest.param((8, 10, 10), marks=pytest.mark.slow)]
)
def test_exact_coverage_on_discrete_laws(law, sizes):
    alpha = 0.25
    cal = PrivateQuantileOfQuantilesCalibrator(
        epsilon=20.0, score_bounds=(0, 1), n_bins=4, rule="tight", utility="rank"
    )
    plan = cal.plan(list(sizes), alpha)
    assert plan["feasible"] and plan["utility"] == "rank"
    weights = LAWS[law] / LAWS[law].sum()
    laws = {
        n: _release_law(plan, n, plan["levels"][sizes.index(n)], weights)
        for n in set(sizes)
    }
    values = laws[sizes[0]][0]
    releases = np.array([laws[n][1] for n in sizes])
    threshold = _kth_smallest_law(releases, plan["k"])
    coverage = float(threshold @ _cdf(weights)(values))
    assert coverage >= plan["coverage_lower"] - 1e-12
    assert coverage >= 1 - alpha - 1e-12


# --------------------------------------------------------------------------
# Plans and fit


class TestRankPlans:
    def test_paper_setting(self):
        # 5 x 200 uniform scores, B = 100: the plans the benchmark runs.
        for epsilon, (level, k) in {10.0: (0.92986, 1), 5.0: (0.88481, 5)}.items():
            cal = PrivateQuantileOfQuantilesCalibrator(
                epsilon=epsilon, score_bounds=(0, 1), rule="tight", utility="rank"
            )
            plan = cal.plan([200] * 5, 0.1)
            assert plan["feasible"] and plan["utility"] == "rank"
            assert plan["k"] == k
            np.testing.assert_allclose(plan["levels"], level, atol=5e-6)
            assert 0.9 <= plan["coverage_lower"] <= 0.9 + 1e-8

    def test_level_is_the_smallest_that_covers(self):
        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=5.0, score_bounds=(0, 1), rule="tight", utility="rank"
        )
        plan = cal.plan([200] * 5, 0.1)
        q, k = plan["levels"][0], plan["k"]
        groups = ((200, 5),)
        assert _tight_lower_bound(groups, q, k, 5.0, 100, "rank") >= 0.9
        assert _tight_lower_bound(groups, q - 1e-8, k, 5.0, 100, "rank") < 0.9 + 1e-12

    def test_needs_the_tight_rule(self):
        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=5.0, score_bounds=(0, 1), utility="rank"
        )
        with pytest.raises(ValueError, match='utility="rank" needs rule="tight"'):
            cal.plan([200] * 5, 0.1)
        cal.set_params(utility="nope", rule="tight")
        with pytest.raises(ValueError, match='utility must be "quantile" or "rank"'):
            cal.plan([200] * 5, 0.1)

    def test_default_is_the_papers_utility(self):
        cal = PrivateQuantileOfQuantilesCalibrator(epsilon=5.0, score_bounds=(0, 1))
        assert cal.get_params()["utility"] == "quantile"
        assert cal.plan([200] * 5, 0.1)["utility"] == "quantile"

    def test_fit_draws_from_the_rank_law(self):
        rng = np.random.default_rng(0)
        scores, ids = rng.uniform(size=1000), np.repeat(np.arange(5), 200)
        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=10.0, score_bounds=(0, 1), rule="tight", utility="rank"
        ).fit(scores, ids, alpha=0.1, random_state=0)
        info = cal.calibration_info_
        assert info["utility"] == "rank" and info["rule"] == "tight"
        law = cal.threshold_probabilities(scores, ids, alpha=0.1)
        assert cal.threshold_ in law.values[law.probabilities > 0]
        # The rank law differs from the quantile utility's on the same data.
        other = cal.set_params(utility="quantile").threshold_probabilities(
            scores, ids, alpha=0.1
        )
        assert np.abs(law.probabilities - other.probabilities).max() > 1e-3

    def test_client_step_matches_fit(self):
        # fit's vectorised simulation and client_step draw the same releases
        # (one stream per client, spawned in sorted-client order).
        from skfedcp.utils._random import spawn_generators

        rng = np.random.default_rng(1)
        scores, ids = rng.uniform(size=400), np.repeat([0, 1], 200)
        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=5.0, score_bounds=(0, 1), rule="tight", utility="rank"
        )
        sent = cal.fit(scores, ids, alpha=0.1, random_state=3).messages_["quantile"]
        streams = spawn_generators(3, 2)
        for j, stream in enumerate(streams):
            message = cal.client_step(
                scores[ids == j],
                alpha=0.1,
                n_per_client=[200, 200],
                random_state=stream,
            )
            assert message["quantile"] == sent[j]


# --------------------------------------------------------------------------
# Monte Carlo: uniform scores


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [10.0, 5.0])
def test_uniform_coverage_is_above_the_bound(epsilon):
    # The exact law of the threshold given each of R data sets, averaged:
    # the mean must not fall below the bound by more than 4.5 Monte Carlo
    # standard errors (their sample SE over the R draws); it is also below
    # the paper's coverage (0.928 / 0.949 here), the point of the rule.
    reps = 200
    rng = np.random.default_rng(2026)
    ids = np.repeat(np.arange(5), 200)
    cal = PrivateQuantileOfQuantilesCalibrator(
        epsilon=epsilon, score_bounds=(0, 1), rule="tight", utility="rank"
    )
    bound = cal.plan([200] * 5, 0.1)["coverage_lower"]
    cov = np.empty(reps)
    for r in range(reps):
        law = cal.threshold_probabilities(rng.uniform(size=1000), ids, alpha=0.1)
        cov[r] = law.probabilities @ np.minimum(law.values, 1.0)
    se = cov.std(ddof=1) / np.sqrt(reps)
    assert cov.mean() >= bound - 4.5 * se
    assert cov.mean() < 0.92
