"""dp-qq tight plans whose work does not grow with an announced client size."""

import numpy as np
import pytest

from skfedcp.calibrators._dp import _tight
from skfedcp.calibrators._dp._tight import _simulation_counts, _TightBounds


def test_simulation_counts_of_large_sizes_are_drawn_per_bin():
    # Up to 4096 scores the simulated data sets are drawn score by score (the
    # plans of such sizes are unchanged); above, the bin counts are drawn from
    # their multinomial law: O(n_bins) per data set, whatever n.
    (lower, greater), (big_lower, big_greater) = _simulation_counts(
        ((300, 1), (10**9, 1)), 50
    )
    assert lower.shape == big_lower.shape == (_tight._TIGHT_SIMULATIONS, 50)
    counts = 10**9 - big_lower - big_greater
    assert (counts >= 0).all() and (counts.sum(axis=1) == 10**9).all()
    assert (big_lower[:, 0] == 0).all() and (big_greater[:, -1] == 0).all()
    # Each bin holds about n / n_bins scores (binomial sd ~ 4.4e3).
    assert np.abs(counts / 10**9 - 1 / 50).max() < 1e-4
    assert ((300 - lower - greater).sum(axis=1) == 300).all()


def test_small_sizes_draw_the_same_scores_as_before():
    # The draws of sizes up to the cap are the score-by-score ones: the same
    # stream as rng.uniform((200, n)) per size, in the order of the groups.
    from skfedcp.privacy._quantile import _release_counts

    groups = ((40, 2), (4096, 1))
    edges = np.linspace(0.0, 1.0, 101)
    rng = np.random.default_rng(_tight._TIGHT_SEED)
    for (lower, greater), (n, _) in zip(
        _simulation_counts(groups, 100), groups, strict=True
    ):
        ref_lower, ref_greater = _release_counts(
            rng.uniform(size=(_tight._TIGHT_SIMULATIONS, n)), edges
        )
        np.testing.assert_array_equal(lower, ref_lower)
        np.testing.assert_array_equal(greater, ref_greater)


def test_rows_stay_apart_for_far_levels():
    # A client announcing 10^9 rows: the ranks at q = 1/2 and q = 1 are 5e8
    # apart; each level keeps its own window of rows (a single window spanning
    # both asked numpy for 3.7 TiB).
    bounds = _TightBounds(((10**9, 1), (1000, 2)), 1.0, 100, "quantile")
    bounds._values[0.5] = [bounds._compute(0.5, 0)]
    bounds._values[1.0] = [bounds._compute(1.0, 0)]
    windows = bounds._rows[0][10**9]
    assert len(windows) == 2
    assert sum(matrix.shape[0] for _, matrix, _ in windows) < 1000


def test_overlapping_windows_merge():
    bounds = _TightBounds(((300, 4),), 1.0, 100, "quantile")
    bounds._pass(0)
    bounds._window(0, 300, 10, 20)
    bounds._window(0, 300, 40, 50)
    first, matrix, _ = bounds._window(0, 300, 15, 45)
    assert len(bounds._rows[0][300]) == 1
    assert (first, matrix.shape[0]) == (10, 40)


@pytest.mark.parametrize("utility", ["quantile", "rank"])
def test_triangular_count_dp_is_the_full_dp(utility):
    # The count DP on the reachable states only gives the bits of the full
    # (m, nodes) DP.
    from skfedcp.calibrators._qq._poisbin import _add_clients

    bounds = _TightBounds(((20, 3), (35, 1), (60, 2)), 2.0, 50, utility)
    values = bounds._compute(0.9, 0)
    t, w = bounds._pass(0)
    state = np.zeros((bounds.m, t.shape[0]))
    state[0] = 1.0
    # (p as the engine builds it since session 10: without the rank-0 mass,
    # 1 where every row is 1; the DP's bits are what this test pins.)
    for (n, count), law in zip(bounds.groups, bounds._laws[0.9], strict=True):
        p = bounds._client_cdf(0, n, law)
        state = _add_clients(state, p, count, single_as_block=True)
    full = np.minimum(np.cumsum(state, axis=0), 1.0) @ w
    np.testing.assert_array_equal(values, full)
