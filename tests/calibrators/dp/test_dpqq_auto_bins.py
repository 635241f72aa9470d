"""dp-qq ``n_bins="auto"``: the capped count DP and the certified skips keep
the choice of bins of the full computation, bit for bit."""

import numpy as np
import pytest
from scipy import special

from skfedcp.calibrators._dp import _bins_bound, _laws, _plan
from skfedcp.calibrators._qq._poisbin import _binomial_block


def _full_expected_kth_smallest(groups, k, edges):
    """The DP over every count ``0..m`` (the computation before the cap)."""
    total = np.ones((1, edges.shape[0] - 1))
    for cdf, count in groups:
        pmf = _binomial_block(count, np.clip(cdf, 0.0, 1.0), count + 1)
        new = np.zeros((total.shape[0] + count, total.shape[1]))
        for i in range(count + 1):
            new[i : i + total.shape[0]] += total * pmf[i]
        total = new
    above = total[:k].sum(axis=0)[:-1]
    return float(edges[1] + np.diff(edges[1:]) @ above)


def _profile(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 13))
    if seed % 5 == 0:
        sizes = (int(rng.integers(5, 400)),) * m
    else:
        sizes = tuple(int(x) for x in rng.integers(5, 400, size=m))
    return sizes, float(rng.choice([0.1, 0.05])), float(rng.choice([0.5, 1.0, 5.0]))


def _auto_bins(monkeypatch, args, **switches):
    with monkeypatch.context() as patch:
        for name, value in switches.items():
            patch.setattr(_plan, name, value)
        _plan._dpqq_auto_bins.cache_clear()
        try:
            return _plan._dpqq_auto_bins(*args, "auto")
        finally:
            _plan._dpqq_auto_bins.cache_clear()


@pytest.mark.parametrize("seed", range(14))
def test_auto_bins_match_the_full_computation(seed, monkeypatch):
    args = _profile(seed)
    fast = _auto_bins(monkeypatch, args)
    reference = _auto_bins(
        monkeypatch,
        args,
        _BINS_BOUND=False,
        _expected_kth_smallest=_full_expected_kth_smallest,
    )
    assert fast == reference


@pytest.mark.parametrize("seed", range(6))
def test_capped_dp_is_bit_identical(seed):
    rng = np.random.default_rng(seed)
    n_bins = int(rng.choice([10, 100, 1000]))
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    groups = []
    for _ in range(int(rng.integers(1, 8))):
        logits = rng.normal(scale=5.0, size=n_bins)
        cdf = np.cumsum(np.exp(logits - special.logsumexp(logits)))
        groups.append((cdf, int(rng.integers(1, 5))))
    m = sum(count for _, count in groups)
    for k in range(1, m + 1):
        fast = _laws._expected_kth_smallest(groups, k, edges)
        assert fast == _full_expected_kth_smallest(groups, k, edges)


def test_bound_skips_bin_counts(monkeypatch):
    sizes = tuple(range(300, 700, 40))
    calls = []

    def counting(groups, k, edges):
        calls.append(edges.shape[0] - 1)
        return _laws._expected_kth_smallest(groups, k, edges)

    _auto_bins(monkeypatch, (sizes, 0.1, 1.0), _expected_kth_smallest=counting)
    assert len(calls) < len(_plan.DPQQ_BINS_GRID) // 2


def test_bound_brackets_the_value():
    rng = np.random.default_rng(0)
    n_bins = 5000
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    groups = []
    for _ in range(6):
        logits = -np.abs(np.arange(n_bins) - rng.integers(n_bins)) / 300.0
        groups.append((np.cumsum(np.exp(logits - special.logsumexp(logits))), 2))
    value = _laws._expected_kth_smallest(groups, 4, edges)

    def cdfs_at(columns):
        return [(cdf[columns], count) for cdf, count in groups]

    # Far above the value: certified not to beat; far below: must be valued.
    assert not _bins_bound.value_beats(cdfs_at, 4, edges, value - 0.01)
    assert _bins_bound.value_beats(cdfs_at, 4, edges, value + 0.01)
    assert _bins_bound.value_beats(cdfs_at, 4, edges, value)


@pytest.mark.parametrize("n_bins", [10, 133, 5623, 100000])
def test_run_cdfs_are_the_cumulated_pmfs(n_bins):
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    for n in (5, 37, 1000):
        for level in (0.5, 0.93, 1.0, np.inf):
            for epsilon in (0.5, 5.0):
                cdfs_at = _bins_bound.uniform_release_cdfs(
                    [(n, 3)], {n: level}, epsilon, edges
                )
                ((cdf, count),) = cdfs_at(np.arange(n_bins))
                pmf = _laws._client_pmf(
                    np.arange(1, n + 1) / (n + 1.0),
                    level,
                    {"epsilon": epsilon, "edges": edges},
                )
                assert count == 3
                np.testing.assert_allclose(cdf, np.cumsum(pmf), rtol=0, atol=1e-10)
