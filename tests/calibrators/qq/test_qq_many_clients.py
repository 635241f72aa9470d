"""Unequal sizes with many clients: the product tree and the guessed k.

From ``_TREE_MIN_CLIENTS`` clients on, the Poisson-binomial CDF inside the
QQ coverage comes from a product tree of FFT convolutions instead of the
DP over groups, and the fixed-rank selection guesses the first valid k with
a normal approximation before confirming it. These tests pin both against
the DP (forced by raising the threshold) and check that the guess only
moves the work, never the answer.
"""

import numpy as np
import pytest

from skfedcp.calibrators._qq import _poisbin as _qq_poisbin
from skfedcp.calibrators._qq import _selection as _qq_selection
from skfedcp.calibrators._qq._batch import _coverage_unequal_batch, _NormalEstimate
from skfedcp.calibrators._qq._coverage import _active_groups
from skfedcp.calibrators._qq._poisbin import (
    _poisbin_cdf_tree,
    _poisbin_cdf_unequal,
    _poisbin_pmf_tree,
)
from skfedcp.calibrators._qq._selection import select_qq_ranks
from skfedcp.utils._quantile import conformal_rank


def dp_pmf(p):
    """Reference: the textbook DP, one client at a time (rows of p)."""
    rows, m = p.shape
    pmf = np.zeros((rows, m + 1))
    pmf[:, 0] = 1.0
    for j in range(m):
        nxt = pmf * (1.0 - p[:, j : j + 1])
        nxt[:, 1:] += pmf[:, :-1] * p[:, j : j + 1]
        pmf = nxt
    return pmf


def random_clients(seed, m, low=10, high=1000):
    return np.random.default_rng(seed).integers(low, high + 1, size=m).tolist()


@pytest.mark.parametrize("m", [1, 2, 3, 7, 33, 256, 1000])
def test_tree_pmf_matches_dp(m):
    rng = np.random.default_rng(m)
    p = rng.random((5, m))
    p[:, : m // 3] = 0.0  # clients that never / always count
    p[:, m // 3 : m // 2] = 1.0
    pmf = _poisbin_pmf_tree(p)
    assert pmf.shape == (5, m + 1)
    # Rounding of ~10 levels of FFT products on coefficients <= 1.
    np.testing.assert_allclose(pmf, dp_pmf(p), rtol=0, atol=1e-14)
    np.testing.assert_allclose(pmf.sum(axis=1), 1.0, rtol=0, atol=1e-13)


def test_tree_cdf_picks_each_rows_k():
    rng = np.random.default_rng(3)
    p = rng.random((4, 50))
    ks = np.array([1, 10, 25, 51])
    expected = np.cumsum(dp_pmf(p), axis=1)[np.arange(4), ks - 1]
    np.testing.assert_allclose(_poisbin_cdf_tree(p, ks), expected, atol=1e-13)


def test_tree_chunks_give_the_same_rows(monkeypatch):
    p = np.random.default_rng(4).random((9, 40))
    whole = _poisbin_cdf_tree(p, 17)
    monkeypatch.setattr(_qq_poisbin, "_TREE_CHUNK", 80)  # two rows per pass
    np.testing.assert_array_equal(_poisbin_cdf_tree(p, 17), whole)


@pytest.mark.parametrize("m", [40, 150])
def test_tree_integrand_matches_dp_integrand(m, monkeypatch):
    sizes = random_clients(m, m)
    ranks = [conformal_rank(n, 0.1) for n in sizes]
    groups = _active_groups(sizes, ranks)
    t = np.linspace(0.8, 0.97, 41)
    for k in (1, m // 3, m // 2, m):
        tree = _poisbin_cdf_unequal(groups, k, t)
        monkeypatch.setattr(_qq_poisbin, "_TREE_MIN_CLIENTS", 10**9)
        dp = _poisbin_cdf_unequal(groups, k, t)
        monkeypatch.undo()
        np.testing.assert_allclose(tree, dp, rtol=0, atol=1e-13)


@pytest.mark.parametrize(("m", "alpha"), [(40, 0.1), (120, 0.1), (90, 0.05)])
def test_coverage_batch_tree_matches_dp(m, alpha, monkeypatch):
    sizes = random_clients(10 + m, m)
    g_sizes, g_counts = np.unique(sizes, return_counts=True)
    ranks = np.array(
        [[conformal_rank(int(n), alpha) for n in g_sizes]] * 3, dtype=np.int64
    )
    ranks[1] -= 1  # one level down: still a valid rank vector
    ranks[2, ::2] = g_sizes[::2] + 1  # half the groups send +inf
    ks = np.array([m // 2, m // 3, m // 4])
    tree = _coverage_unequal_batch(g_sizes, g_counts, ranks, ks)
    monkeypatch.setattr(_qq_poisbin, "_TREE_MIN_CLIENTS", 10**9)
    dp = _coverage_unequal_batch(g_sizes, g_counts, ranks, ks)
    # Both are ~1e-14 from M; the gap between them bounds their errors.
    np.testing.assert_allclose(tree, dp, rtol=0, atol=2e-13)


@pytest.mark.parametrize(("m", "alpha", "seed"), [(40, 0.1, 0), (75, 0.2, 1)])
def test_fixed_rule_same_pair_as_dp(m, alpha, seed):
    sizes = random_clients(seed, m)
    _qq_selection._select_cached.cache_clear()
    fast = select_qq_ranks(sizes, alpha, local_rank="fixed")
    with pytest.MonkeyPatch.context() as patch:  # the DP over groups
        # One switch: every caller asks _poisbin._uses_tree.
        patch.setattr(_qq_poisbin, "_TREE_MIN_CLIENTS", 10**9)
        _qq_selection._select_cached.cache_clear()
        reference = select_qq_ranks(sizes, alpha, local_rank="fixed")
    _qq_selection._select_cached.cache_clear()
    assert fast.local_ranks == reference.local_ranks
    assert fast.k == reference.k
    assert fast.coverage == pytest.approx(reference.coverage, abs=2e-13)


@pytest.mark.parametrize("offset", [-0.05, 0.05])
def test_wrong_guess_moves_the_work_not_the_answer(offset, monkeypatch):
    """A normal estimate that is badly off still yields the first valid k."""
    sizes = random_clients(5, 60)
    _qq_selection._select_cached.cache_clear()
    right = select_qq_ranks(sizes, 0.1, local_rank="fixed")

    class Off(_NormalEstimate):
        def __call__(self, ks):
            return super().__call__(ks) + offset

    monkeypatch.setattr(_qq_selection, "_NormalEstimate", Off)
    _qq_selection._select_cached.cache_clear()
    moved = select_qq_ranks(sizes, 0.1, local_rank="fixed")
    _qq_selection._select_cached.cache_clear()
    assert (moved.k, moved.coverage) == (right.k, right.coverage)
    # The pair is the first valid one: M(k) >= 1 - alpha > M(k - 1).
    g_sizes, g_counts = np.unique(sizes, return_counts=True)
    ranks = [conformal_rank(int(n), 0.1) for n in g_sizes]
    below, at = _coverage_unequal_batch(
        g_sizes, g_counts, [ranks, ranks], [right.k - 1, right.k]
    )
    assert below < 0.9 <= at


def test_normal_estimate_is_close():
    sizes = random_clients(6, 200)
    groups = _active_groups(sizes, [conformal_rank(n, 0.1) for n in sizes])
    estimate = _NormalEstimate(groups)
    ks = np.array([50, 90, 150])
    g_sizes, g_counts = np.unique(sizes, return_counts=True)
    ranks = [[conformal_rank(int(n), 0.1) for n in g_sizes]] * 3
    accurate = _coverage_unequal_batch(g_sizes, g_counts, ranks, ks)
    # A guess only; the step of M in k is ~1e-3 here.
    np.testing.assert_allclose(estimate(ks), accurate, atol=1e-5)


def test_thousand_clients_fixed_rule_is_first_valid_k():
    sizes = random_clients(0, 1000)
    _qq_selection._select_cached.cache_clear()
    sel = select_qq_ranks(sizes, 0.1, local_rank="fixed")
    assert sel.feasible
    g_sizes, g_counts = np.unique(sizes, return_counts=True)
    ranks = [conformal_rank(int(n), 0.1) for n in g_sizes]
    below, at = _coverage_unequal_batch(
        g_sizes, g_counts, [ranks, ranks], [sel.k - 1, sel.k]
    )
    assert below < 0.9 <= at
    assert sel.coverage == at


@pytest.mark.parametrize("m", [5000, 9000])
def test_truncated_tree_matches_the_whole_tree(m):
    """The windows (at most 1e-20 dropped per product) move the CDF by rounding
    only, and they do shrink the products of thousands of clients."""
    rng = np.random.default_rng(m)
    p = rng.beta(20, 3, size=(7, m))
    offset, window = _qq_poisbin._poisbin_window_tree(p)
    whole_offset, whole = _qq_poisbin._poisbin_window_tree(p, truncate=False)
    assert window.shape[1] < whole.shape[1] // 2
    assert np.all(whole_offset == 0)
    ks = np.array([1, int(p[0].sum()) - 40, int(p[0].sum()), m // 2, m + 1])
    kk = np.broadcast_to(ks, (7, ks.size))
    np.testing.assert_allclose(
        _qq_poisbin._window_cdf(offset, window, kk),
        _qq_poisbin._window_cdf(whole_offset, whole, kk),
        rtol=0,
        atol=1e-14,
    )


def test_small_trees_are_not_truncated():
    """Below 4,096 clients the products stay whole: the same bits."""
    p = np.random.default_rng(2).random((3, 2000))
    offset, window = _qq_poisbin._poisbin_window_tree(p)
    assert np.all(offset == 0)
    np.testing.assert_array_equal(window[:, :2001], _poisbin_pmf_tree(p))
