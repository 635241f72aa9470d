"""private_conformal_n_bins: cost bounded by the grid, not by n (issue 22)."""

import math
import tracemalloc

import numpy as np
import pytest
from _n_bins_reference import materialised_n_bins

from skfedcp import config_context
from skfedcp.privacy import _n_bins, _quantile, private_conformal_n_bins
from skfedcp.privacy._randomness import check_random_source


def _paper_reference(n, alpha, epsilon, grid, seed):
    """Algorithm 5 with all n draws in one array (the rule before blocks)."""
    source = check_random_source(seed)
    gamma = _quantile._gamma(n, alpha, epsilon)
    scores = source.random(n)
    best, best_value = grid[0], math.inf
    for m in grid:
        level = _quantile._level(n, alpha, epsilon, m, gamma)
        if level >= 1.0:
            value = 1.0
        else:
            edges, logits = _n_bins._simulated_log_probabilities(
                scores, level, epsilon, m
            )
            value = float(edges[source.choice_from_log_weights(logits) + 1])
        if value < best_value:
            best, best_value = m, value
    return best


@pytest.mark.parametrize("n", [1, 2, 3, 7, 99, 100, 101, 4999, 65_537, 300_001])
def test_uniform_scores_count_like_the_materialised_array(n):
    scores = np.arange(1, n + 1) / (n + 1.0)
    uniform = _n_bins._UniformScores(n)
    rng = np.random.default_rng(n)
    for m in (2, 3, 100, 997, 10**4):
        edges = np.linspace(0.0, 1.0, m + 1)
        np.testing.assert_array_equal(
            uniform.count_le(edges), np.searchsorted(scores, edges, side="right")
        )
    values = np.r_[scores, np.nextafter(scores, 0), rng.uniform(-0.1, 1.1, 500)]
    np.testing.assert_array_equal(
        uniform.count_le(values), np.searchsorted(scores, values, side="right")
    )
    np.testing.assert_array_equal(uniform[n // 3 : n], scores[n // 3 : n])


@pytest.mark.parametrize("n", [2**53 - 1, 2**53 + 3, 2**58 + 1, 2**62])
def test_uniform_scores_count_exactly_beyond_float_precision(n):
    uniform = _n_bins._UniformScores(n)
    values = np.r_[np.linspace(0.0, 1.0, 101), 1 / 3, np.nextafter(1.0, 0.0)]
    counts = uniform.count_le(values)
    for value, count in zip(values, counts.tolist(), strict=True):
        assert 0 <= count <= n
        # The largest count whose score is <= value (scores do not decrease).
        assert count == 0 or np.float64(count) / (n + 1.0) <= value
        assert count == n or np.float64(count + 1) / (n + 1.0) > value


@pytest.mark.parametrize(
    ("n", "alpha", "epsilon"),
    [(0, 0.1, 1.0), (1, 0.1, 1.0), (50, 0.5, 50.0), (1000, 0.1, 1.0)]
    + [(3_000_017, 0.1, 0.5), (2_000_000, 0.05, 5.0)],
)
def test_expected_rule_values_unchanged(n, alpha, epsilon):
    grid = (100, 1000, 5000, 10**4, 10**5)
    expected = materialised_n_bins(n, alpha, epsilon, grid)
    assert private_conformal_n_bins(n, alpha, epsilon=epsilon, grid=grid) == expected


@pytest.mark.parametrize("n", [10**9, 10**12, 2**62])
def test_expected_rule_memory_does_not_grow_with_n(n):
    grid = (100, 1000, 10**4)
    tracemalloc.start()
    try:
        private_conformal_n_bins(n, 0.1, epsilon=1.0, grid=grid)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 10**6  # a few arrays of the grid's size, never n


def test_expected_rule_refuses_n_beyond_int64_counts():
    with pytest.raises(ValueError, match="n must be >= 0 and <= 4611686018427387904"):
        private_conformal_n_bins(2**62 + 1, 0.1, epsilon=1.0)


def test_paper_rule_is_bounded_by_the_plan_policy():
    with config_context(max_total_size=1000):
        private_conformal_n_bins(1000, 0.1, epsilon=1.0, strategy="paper")
        with pytest.raises(ValueError, match=r"max_total_size=1000.*expected"):
            private_conformal_n_bins(1001, 0.1, epsilon=1.0, strategy="paper")


@pytest.mark.parametrize("n", [0, 1, 6, 7, 8, 50, 1000])
@pytest.mark.parametrize("seed", [0, 3])
def test_paper_rule_in_blocks_draws_the_same_values(n, seed, monkeypatch):
    grid = (100, 200, 1000, 4000)
    expected = _paper_reference(n, 0.1, 2.0, grid, seed)
    monkeypatch.setattr(_n_bins, "_PAPER_BLOCK", 7)  # several blocks
    blocks = _n_bins._n_bins_paper(n, 0.1, 2.0, grid, check_random_source(seed))
    assert blocks == expected
    monkeypatch.undo()
    assert _n_bins._n_bins_paper(n, 0.1, 2.0, grid, check_random_source(seed)) == (
        expected
    )
