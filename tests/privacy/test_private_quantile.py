"""Binned private quantile: exact privacy checks, mutants, hand cases, sampler."""

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from skfedcp.exceptions import ClippedScoresWarning
from skfedcp.privacy import (
    exponential_mechanism_probabilities,
    private_quantile,
    private_quantile_probabilities,
)
from skfedcp.privacy._quantile import _quantile_loss, _rank_counts

# --------------------------------------------------------------------------
# Exact privacy check over all neighbouring pairs of small data sets


def _log_probs(scores, level, epsilon, edges):
    """The implementation under test (public function, exact law)."""
    return private_quantile_probabilities(
        scores, level, epsilon=epsilon, edges=edges, log=True
    )


def _mutant_no_half(scores, level, epsilon, edges):
    """Mutant: exp(-eps * w / Delta), i.e. the 1/2 dropped from the exponent."""
    lower, greater, _, _ = _rank_counts(np.asarray(scores, dtype=float), edges)
    loss, sensitivity = _quantile_loss(lower, greater, level)
    return exponential_mechanism_probabilities(
        -loss, epsilon=2 * epsilon, sensitivity=sensitivity, log=True
    )


def _mutant_max_factor(scores, level, epsilon, edges):
    """Mutant: sensitivity factor max(q, 1 - q) instead of min(q, 1 - q)."""
    lower, greater, _, _ = _rank_counts(np.asarray(scores, dtype=float), edges)
    loss, _ = _quantile_loss(lower, greater, level)
    return exponential_mechanism_probabilities(
        -loss, epsilon=epsilon, sensitivity=1 / max(level, 1 - level), log=True
    )


def _make_uncorrected_factor_mutant(alpha):
    """Mutant: factor min(alpha, 1 - alpha) of the *uncorrected* level 1 - alpha.

    This is the public-code bug: the mechanism runs at the corrected level
    q~ > 1 - alpha, but its sensitivity factor is taken from 1 - alpha.
    """

    def mutant(scores, level, epsilon, edges):
        lower, greater, _, _ = _rank_counts(np.asarray(scores, dtype=float), edges)
        loss, _ = _quantile_loss(lower, greater, level)
        return exponential_mechanism_probabilities(
            -loss, epsilon=epsilon, sensitivity=1 / min(alpha, 1 - alpha), log=True
        )

    return mutant


def _max_log_ratio(log_prob_fn, level, epsilon, edges, n_max=4, neighbours="replace"):
    """Largest |log P_D(b) - log P_D'(b)| over all neighbouring D, D'.

    The mechanism sees scores only through bin indices, so D ranges over all
    multisets of size 1..n_max of one representative per bin, plus one value
    below e_0 and one above e_B. Neighbours replace one element by any other
    value ("replace") or add one element ("add", i.e. add/remove).
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippedScoresWarning)
        for n in range(1, n_max + 1):
            for data in itertools.combinations_with_replacement(range(len(values)), n):
                if neighbours == "replace":
                    others = (
                        tuple(sorted(data[:i] + (v,) + data[i + 1 :]))
                        for i in range(n)
                        for v in range(len(values))
                        if v != data[i]
                    )
                else:
                    others = (tuple(sorted((*data, v))) for v in range(len(values)))
                for other in others:
                    ratio = np.abs(log_p(data) - log_p(other)).max()
                    worst = max(worst, float(ratio))
    return worst


LEVELS = [0.3, 0.5, 0.9, 0.97, 1.0]
EPSILONS = [0.5, 2.0, 10.0]
BIN_GRIDS = [
    np.array([0.0, 0.5, 1.0]),
    np.array([0.0, 0.2, 0.3, 1.0]),
    np.linspace(-1.0, 1.0, 6),
]


class TestExactPrivacy:
    @pytest.mark.parametrize("level", LEVELS)
    @pytest.mark.parametrize("epsilon", EPSILONS)
    def test_replace_one_bound(self, level, epsilon):
        worst = max(_max_log_ratio(_log_probs, level, epsilon, e) for e in BIN_GRIDS)
        assert worst <= epsilon + 1e-9

    def test_bound_is_attained(self):
        # At q = 1/2 (and large epsilon) one replacement can move the chosen
        # bin's loss up by one and the dominant bin's loss down by one.
        worst = _max_log_ratio(_log_probs, 0.5, 10.0, BIN_GRIDS[2])
        assert worst == pytest.approx(10.0, rel=1e-3)

    @pytest.mark.parametrize("level", LEVELS)
    def test_replace_one_loss_by_level(self, level):
        # Away from q = 1/2 one replacement moves all L_b one way and all G_b
        # the other, so the loss is eps (1 + min(q,1-q)/max(q,1-q)) / 2, and
        # large epsilon attains it.
        ratio = min(level, 1 - level) / max(level, 1 - level)
        worst = _max_log_ratio(_log_probs, level, 10.0, BIN_GRIDS[2])
        assert worst == pytest.approx(10.0 * (1 + ratio) / 2, rel=1e-3)

    @pytest.mark.parametrize("level", [0.5, 0.9, 1.0])
    def test_add_remove_bound(self, level):
        # With the level held fixed, add/remove neighbours are also covered.
        worst = _max_log_ratio(_log_probs, level, 2.0, BIN_GRIDS[2], neighbours="add")
        assert worst <= 2.0 + 1e-9

    def test_random_sweep(self, seed):
        # Larger random cases with ties: n in [2, 60], B in [2, 40].
        rng = np.random.default_rng(seed)
        for _ in range(300):
            n, n_bins = rng.integers(2, 61), rng.integers(2, 41)
            level = 1.0 if rng.random() < 0.1 else rng.uniform(0.01, 0.99)
            epsilon = rng.choice([0.1, 0.5, 1.0, 2.0, 5.0, 10.0])
            edges = np.linspace(0.0, 1.0, n_bins + 1)
            scores = np.round(rng.uniform(-0.1, 1.1, size=n), 1)
            other = scores.copy()
            other[rng.integers(n)] = np.round(rng.uniform(-0.1, 1.1), 1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ClippedScoresWarning)
                a = _log_probs(scores, level, epsilon, edges)
                b = _log_probs(other, level, epsilon, edges)
            assert np.abs(a - b).max() <= epsilon * (1 + 1e-9)

    def test_loss_sensitivity(self, seed):
        # |w_b(D) - w_b(D')| <= Delta_q for replace, add and remove.
        rng = np.random.default_rng(seed)
        edges = np.linspace(0.0, 1.0, 8)
        for _ in range(200):
            level = rng.uniform(0.01, 0.99)
            scores = rng.uniform(-0.2, 1.2, size=rng.integers(1, 20))
            new = rng.uniform(-0.2, 1.2)
            replaced = scores.copy()
            replaced[0] = new
            w, delta = _quantile_loss(*_rank_counts(scores, edges)[:2], level)
            for other in (replaced, np.append(scores, new), scores[1:]):
                w2, _ = _quantile_loss(*_rank_counts(other, edges)[:2], level)
                assert np.abs(w - w2).max() <= delta * (1 + 1e-12)


class TestMutantsFail:
    """The exact check has teeth: wrong exponents or factors fail it."""

    def test_dropping_the_half_fails(self):
        worst = _max_log_ratio(_mutant_no_half, 0.5, 2.0, BIN_GRIDS[2])
        assert worst > 1.5 * 2.0

    def test_max_factor_fails(self):
        worst = _max_log_ratio(_mutant_max_factor, 0.9, 2.0, BIN_GRIDS[2])
        assert worst > 2.0 * 2.0

    def test_uncorrected_level_factor_fails(self):
        # alpha = 0.1 but the mechanism runs at the corrected level 0.97.
        mutant = _make_uncorrected_factor_mutant(alpha=0.1)
        worst = _max_log_ratio(mutant, 0.97, 2.0, BIN_GRIDS[2])
        assert worst > 1.5 * 2.0
        # The same harness passes the correct implementation at that level.
        assert _max_log_ratio(_log_probs, 0.97, 2.0, BIN_GRIDS[2]) <= 2.0 + 1e-9


# --------------------------------------------------------------------------
# Hand cases and limits


class TestHandCases:
    def test_fedcp_hand_case(self):
        scores = np.array([0.05, 0.15, 0.25, 0.35])
        edges = np.array([0.0, 0.1, 0.2, 0.3, 0.4])
        lower, greater, _, _ = _rank_counts(scores, edges)
        loss, delta = _quantile_loss(lower, greater, 0.5)
        np.testing.assert_array_equal(loss, [6, 4, 4, 6])
        assert delta == 2
        p = private_quantile_probabilities(scores, 0.5, epsilon=2.0, edges=edges)
        expected = np.exp([-3.0, -2.0, -2.0, -3.0])
        np.testing.assert_allclose(p, expected / expected.sum(), rtol=1e-12)

    def test_angelopoulos_hand_case(self):
        scores = [0.05, 0.15, 0.15, 0.35, 0.95]
        edges = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
        lower, greater, _, _ = _rank_counts(np.array(scores), edges)
        np.testing.assert_array_equal(lower, [0, 3, 4, 4])
        np.testing.assert_array_equal(greater, [2, 1, 1, 0])
        loss, delta = _quantile_loss(lower, greater, 0.8)
        np.testing.assert_allclose(loss, [10, 5, 5, 5])
        np.testing.assert_allclose(loss / delta, [2, 1, 1, 1])
        p = private_quantile_probabilities(scores, 0.8, epsilon=2.0, edges=edges)
        np.testing.assert_allclose(
            p, [0.109232, 0.296923, 0.296923, 0.296923], atol=1e-6
        )

    @pytest.mark.parametrize(
        ("score", "rounded"),
        [(0.0, 0.25), (0.25, 0.25), (0.2500001, 0.5), (1.0, 1.0), (0.7, 0.75)],
    )
    def test_scores_round_up_to_edges(self, score, rounded):
        # One score, q = 1/2: its own bin has loss 0, so a huge epsilon picks it.
        edges = [0.0, 0.25, 0.5, 0.75, 1.0]
        out = private_quantile([score], 0.5, epsilon=1e9, edges=edges, random_state=0)
        assert out == rounded

    @pytest.mark.parametrize(("score", "rounded"), [(-0.3, 0.25), (1.7, 1.0)])
    def test_out_of_range_scores_clip_and_warn(self, score, rounded):
        edges = [0.0, 0.25, 0.5, 0.75, 1.0]
        with pytest.warns(ClippedScoresWarning, match="clipped"):
            out = private_quantile(
                [score], 0.5, epsilon=1e9, edges=edges, random_state=0
            )
        assert out == rounded

    def test_warning_counts_clipped_scores(self):
        with pytest.warns(ClippedScoresWarning, match="1 score.* below .* 2 above"):
            private_quantile_probabilities(
                [-1.0, 0.5, 3.0, np.inf], 0.5, epsilon=1.0, bounds=(0, 1), n_bins=4
            )
        assert issubclass(ClippedScoresWarning, UserWarning)

    def test_rounding_identity(self, seed):
        # For every edge e_1..e_B: s <= e  <=>  [s] <= e (scores on edges
        # included). Not for e_0: a score equal to e_0 rounds up to e_1.
        rng = np.random.default_rng(seed)
        edges = np.sort(rng.uniform(0, 1, size=12))
        scores = np.concatenate([rng.uniform(edges[0], edges[-1], 150), edges])
        rounded = np.array(
            [
                private_quantile([s], 0.5, epsilon=1e9, edges=edges, random_state=0)
                for s in scores
            ]
        )
        for e in edges[1:]:
            np.testing.assert_array_equal(scores <= e, rounded <= e)

    def test_huge_epsilon_is_argmin(self, seed):
        rng = np.random.default_rng(seed)
        edges = np.linspace(0, 1, 11)
        scores = rng.uniform(size=7)
        lower, greater, _, _ = _rank_counts(scores, edges)
        loss, _ = _quantile_loss(lower, greater, 0.7)
        argmins = set(edges[1:][loss == loss.min()])
        for s in range(20):
            out = private_quantile(
                scores, 0.7, epsilon=1e9, edges=edges, random_state=seed + s
            )
            assert out in argmins

    def test_huge_epsilon_order_statistic(self, seed):
        # Distinct scores in distinct bins: the output is the bin of order
        # statistic floor(q(n-1)+1) or ceil(q(n-1)+1).
        rng = np.random.default_rng(seed)
        edges = np.linspace(0.0, 1.0, 100_001)
        checked = 0
        while checked < 100:
            n = int(rng.integers(2, 50))
            level = rng.uniform(0.5, 0.99)
            scores = np.sort(rng.uniform(size=n))
            bins = np.searchsorted(edges, scores, side="left")
            if np.unique(bins).shape[0] < n:
                continue
            out = private_quantile(
                scores, level, epsilon=1e9, edges=edges, random_state=0
            )
            x = level * (n - 1) + 1
            allowed = {edges[bins[math.floor(x) - 1]], edges[bins[math.ceil(x) - 1]]}
            assert out in allowed
            checked += 1

    def test_no_overflow_large_n_epsilon(self, seed):
        scores = np.random.default_rng(seed).uniform(size=100_000)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            log_p = private_quantile_probabilities(
                scores, 0.9, epsilon=10.0, bounds=(0, 1), n_bins=1000, log=True
            )
            out = private_quantile(
                scores, 0.9, epsilon=10.0, bounds=(0, 1), n_bins=1000, random_state=0
            )
        assert np.isfinite(log_p).all()
        assert math.fsum(np.exp(log_p)) == pytest.approx(1.0, abs=1e-9)
        assert out in np.linspace(0, 1, 1001)[1:]

    def test_stability_million_bins(self):
        scores = np.random.default_rng(0).uniform(size=200_000)
        log_p = private_quantile_probabilities(
            scores, 0.9, epsilon=100.0, bounds=(0, 1), n_bins=1_000_000, log=True
        )
        assert np.isfinite(log_p).all()
        assert math.fsum(np.exp(log_p)) == pytest.approx(1.0, abs=1e-9)

    def test_level_one_limit(self):
        # q = 1: logit = -(eps/2) G_b, the limit of q -> 1.
        scores = [0.05, 0.15, 0.15, 0.35, 0.95]
        edges = [0.0, 0.25, 0.5, 0.75, 1.0]
        p1 = private_quantile_probabilities(scores, 1.0, epsilon=2.0, edges=edges)
        greater = np.array([2, 1, 1, 0])
        expected = np.exp(-greater)
        np.testing.assert_allclose(p1, expected / expected.sum(), rtol=1e-12)
        p_near = private_quantile_probabilities(
            scores, 1 - 1e-9, epsilon=2.0, edges=edges
        )
        np.testing.assert_allclose(p_near, p1, rtol=1e-7)

    def test_empty_scores_are_uniform(self):
        p = private_quantile_probabilities(
            [], 0.9, epsilon=1.0, bounds=(0, 1), n_bins=4
        )
        np.testing.assert_allclose(p, 0.25)


class TestTopBinAndEdges:
    def test_top_bin_inf(self):
        scores = [5.0, 6.0, 7.0]  # far above the top edge
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = private_quantile(
                scores,
                0.5,
                epsilon=1e9,
                edges=[0, 1, 2],
                top_bin="inf",
                random_state=0,
            )
        assert out == math.inf
        with pytest.warns(ClippedScoresWarning):
            out = private_quantile(
                scores, 0.5, epsilon=1e9, edges=[0, 1, 2], random_state=0
            )
        assert out == 2.0

    def test_top_bin_does_not_change_law(self, seed):
        scores = np.random.default_rng(seed).normal(size=30)
        kwargs = {"epsilon": 1.0, "bounds": (-1, 1), "n_bins": 7}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ClippedScoresWarning)
            p_edge = private_quantile_probabilities(scores, 0.8, **kwargs)
            p_inf = private_quantile_probabilities(scores, 0.8, top_bin="inf", **kwargs)
        np.testing.assert_array_equal(p_edge, p_inf)

    def test_bounds_equal_uniform_edges(self, seed):
        scores = np.random.default_rng(seed).uniform(-2, 3, size=25)
        a = private_quantile_probabilities(
            scores, 0.9, epsilon=1.0, bounds=(-2, 3), n_bins=10
        )
        b = private_quantile_probabilities(
            scores, 0.9, epsilon=1.0, edges=np.linspace(-2, 3, 11)
        )
        np.testing.assert_array_equal(a, b)

    def test_default_n_bins(self):
        p = private_quantile_probabilities([0.5], 0.5, epsilon=1.0, bounds=(0, 1))
        assert p.shape == (100,)


# --------------------------------------------------------------------------
# Sampler and randomness


class TestSampling:
    def test_sampler_matches_law(self, seed):
        # 20000 draws against the exact law; chi-square at false-alarm 1e-4.
        scores = [0.05, 0.15, 0.15, 0.35, 0.95]
        edges = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
        p = private_quantile_probabilities(scores, 0.8, epsilon=2.0, edges=edges)
        rng = np.random.default_rng(seed)
        draws = [
            private_quantile(scores, 0.8, epsilon=2.0, edges=edges, random_state=rng)
            for _ in range(20_000)
        ]
        observed = np.array([np.sum(np.isclose(draws, e)) for e in edges[1:]])
        assert observed.sum() == 20_000
        assert stats.chisquare(observed, 20_000 * p).pvalue > 1e-4

    def test_output_is_an_edge(self, seed):
        rng = np.random.default_rng(seed)
        edges = np.sort(rng.uniform(size=9))
        for _ in range(50):
            scores = rng.uniform(edges[0], edges[-1], size=rng.integers(0, 30))
            out = private_quantile(
                scores,
                rng.uniform(0.05, 1.0),
                epsilon=rng.uniform(0.1, 5),
                edges=edges,
                random_state=rng,
            )
            assert out in edges[1:]

    def test_reproducible_and_permutation_invariant(self, seed):
        scores = np.random.default_rng(seed).uniform(size=40)
        kwargs = {"epsilon": 0.5, "bounds": (0, 1), "n_bins": 50}
        a = [private_quantile(scores, 0.9, random_state=s, **kwargs) for s in range(10)]
        b = [
            private_quantile(scores[::-1], 0.9, random_state=s, **kwargs)
            for s in range(10)
        ]
        assert a == b

    def test_secure_source_runs(self):
        scores = np.linspace(0, 1, 50)
        draws = {
            private_quantile(
                scores,
                0.5,
                epsilon=0.1,
                bounds=(0, 1),
                n_bins=50,
                random_state="secure",
            )
            for _ in range(30)
        }
        # 30 draws from a near-uniform law on 50 edges are not all equal
        # (probability < 1e-40).
        assert len(draws) > 1
        assert draws <= set(np.linspace(0, 1, 51)[1:])


class TestValidation:
    def test_bad_epsilon(self):
        for epsilon in (0, -1.0, math.inf, math.nan):
            with pytest.raises(ValueError, match="epsilon"):
                private_quantile([0.5], 0.5, epsilon=epsilon, bounds=(0, 1))
        with pytest.raises(TypeError, match="epsilon"):
            private_quantile([0.5], 0.5, epsilon="1", bounds=(0, 1))

    def test_bad_bounds_and_edges(self):
        for bounds in ((1, 0), (0, 0), (0, math.inf), (math.nan, 1)):
            with pytest.raises(ValueError, match="bounds"):
                private_quantile([0.5], 0.5, epsilon=1, bounds=bounds)
        for edges in ([0, 1, 1], [0, math.nan, 1], [1, 0, -1], [0, 1]):
            with pytest.raises(ValueError, match="edges"):
                private_quantile([0.5], 0.5, epsilon=1, edges=edges)
        with pytest.raises(ValueError, match="exactly one of bounds"):
            private_quantile([0.5], 0.5, epsilon=1)
        with pytest.raises(ValueError, match="exactly one of bounds"):
            private_quantile([0.5], 0.5, epsilon=1, bounds=(0, 1), edges=[0, 0.5, 1])
        with pytest.raises(ValueError, match="n_bins"):
            private_quantile([0.5], 0.5, epsilon=1, edges=[0, 0.5, 1], n_bins=2)

    def test_bad_n_bins(self):
        for n_bins in (1, 0, -3):
            with pytest.raises(ValueError, match="n_bins"):
                private_quantile([0.5], 0.5, epsilon=1, bounds=(0, 1), n_bins=n_bins)
        with pytest.raises(TypeError, match="n_bins"):
            private_quantile([0.5], 0.5, epsilon=1, bounds=(0, 1), n_bins=2.5)

    def test_bad_level_scores_top_bin(self):
        for level in (0, -0.1, 1.01, math.nan):
            with pytest.raises(ValueError, match="level"):
                private_quantile([0.5], level, epsilon=1, bounds=(0, 1))
        with pytest.raises(ValueError, match="NaN"):
            private_quantile([math.nan], 0.5, epsilon=1, bounds=(0, 1))
        with pytest.raises(ValueError, match="top_bin"):
            private_quantile([0.5], 0.5, epsilon=1, bounds=(0, 1), top_bin="max")
        with pytest.raises(ValueError, match="random_state"):
            private_quantile([0.5], 0.5, epsilon=1, bounds=(0, 1), random_state="os")
