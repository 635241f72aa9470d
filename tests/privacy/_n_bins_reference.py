"""Shared reference of the n_bins tests: the "expected" rule, scores built."""

import math

import numpy as np

from skfedcp.privacy import _n_bins, _quantile


def materialised_n_bins(n, alpha, epsilon, grid):
    """The "expected" rule with the n public scores built (the reference)."""
    gamma = _quantile._gamma(n, alpha, epsilon)
    scores = np.arange(1, n + 1) / (n + 1.0)
    best, best_value = grid[0], math.inf
    for m in grid:
        level = _quantile._level(n, alpha, epsilon, m, gamma)
        value = _n_bins._expected_threshold(scores, level, epsilon, m)
        if value < best_value:
            best, best_value = m, value
    return best
