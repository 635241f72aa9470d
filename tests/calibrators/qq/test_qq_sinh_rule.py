"""The sinh-mapped rule of the fixed-rank selection (issue 21) against the search.

``_select_unequal`` first tries ``_select_unequal_sinh`` (a guessed k and its
neighbours, each M from one Gauss-Legendre pass on sinh-mapped panels); the
composite-rule search it replaces is still there as the fallback. These tests
compare the two decisions and values on random size profiles (forcing the
fallback by disabling the fast path), the values against ``quad`` and the
rational formula, and check that a client announcing 10^9 rows costs about
as much as one of 10^3.
"""

from fractions import Fraction

import numpy as np
import pytest

from skfedcp.calibrators._qq import _poisbin
from skfedcp.calibrators._qq import _selection as _qq_selection
from skfedcp.calibrators._qq._batch import _coverage_unequal_sinh
from skfedcp.calibrators._qq._coverage import (
    _active_groups,
    _coverage_unequal_quad,
    qq_coverage_unequal_fraction,
)
from skfedcp.utils._quantile import conformal_rank


def _profiles():
    rng = np.random.default_rng(2024)
    out = []
    for i in range(40):
        m = int(rng.choice([2, 3, 7, 20, 31, 32, 60, 100]))
        high = int(rng.choice([30, 1000, 5000]))
        sizes = rng.integers(1, high + 1, size=m).tolist()
        if i % 9 == 0:
            sizes[0] = 10**9
        alpha = float(rng.choice([0.02, 0.05, 0.1, 0.2, 0.4]))
        out.append((sizes, alpha))
    return out


@pytest.mark.parametrize(("sizes", "alpha"), _profiles())
def test_fast_selection_matches_the_search(sizes, alpha, monkeypatch):
    ranks = tuple(conformal_rank(n, alpha) for n in sizes)
    fast = _qq_selection._select_unequal(tuple(sizes), ranks, alpha)
    monkeypatch.setattr(_qq_selection, "_select_unequal_sinh", lambda *a: None)
    # The reference owes nothing to the sinh rule: without the product tree
    # (whose accurate values are the sinh rule's from 32 clients on), every
    # value is the composite rule's on the count DP. Not with a client of
    # 10^9 rows among 32 or more: its step needs thousands of composite
    # panels there (seconds per profile), so the tree's values stay.
    if max(sizes) < 10**9 or len(sizes) < 32:
        monkeypatch.setattr(_poisbin, "_TREE_MIN_CLIENTS", 10**9)
    reference = _qq_selection._select_unequal(tuple(sizes), ranks, alpha)
    if reference is None:
        assert fast is None
        return
    assert fast is not None
    assert fast[0] == reference[0]
    assert fast[1] == pytest.approx(reference[1], abs=1e-13)


@pytest.mark.parametrize("seed", range(6))
def test_sinh_values_against_quad(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 40))
    sizes = rng.integers(5, 2000, size=m).tolist()
    alpha = float(rng.uniform(0.02, 0.4))
    groups = _active_groups(sizes, [conformal_rank(n, alpha) for n in sizes])
    m_active = sum(c for _, c in groups)
    if m_active == 0:
        pytest.skip("every client sends +inf")
    k = int(rng.integers(1, m_active + 1))
    ks = np.arange(max(1, k - 1), min(m_active, k + 1) + 1)
    result = _coverage_unequal_sinh(groups, ks)
    if result is None:  # allowed: the caller falls back to the search
        return
    values, gaps = result
    assert np.all(gaps < 1e-12)
    for kk, v in zip(ks.tolist(), values.tolist(), strict=True):
        assert v == pytest.approx(_coverage_unequal_quad(groups, kk), abs=1e-13)


def test_sinh_values_against_the_rational_formula():
    sizes, ranks = [3, 5, 8, 2, 6], [3, 5, 7, 2, 6]
    groups = _active_groups(sizes, ranks)
    values, _ = _coverage_unequal_sinh(groups, np.arange(1, 6))
    for k, v in enumerate(values.tolist(), start=1):
        exact = qq_coverage_unequal_fraction(sizes, ranks, k)
        assert isinstance(exact, Fraction)
        assert v == pytest.approx(float(exact), abs=1e-14)


@pytest.mark.parametrize("big", [10**9, 10**12])
def test_a_huge_client_is_handled_by_its_own_panel(big):
    sizes = [1000] * 7 + [big]
    ranks = [conformal_rank(n, 0.1) for n in sizes]
    groups = _active_groups(sizes, ranks)
    result = _coverage_unequal_sinh(groups, np.arange(3, 7))
    assert result is not None
    # Converged: a finer rule agrees with the returned values.
    values, gaps = result
    assert np.all(gaps < 1e-12)
    k, value = _qq_selection._select_unequal(tuple(sizes), tuple(ranks), 0.1)
    assert value >= 0.9 - 1e-10
    assert values[k - 3] == pytest.approx(value, abs=1e-14)


def test_cost_does_not_grow_with_the_announced_size(monkeypatch):
    # The work of a plan is its nodes (each through betainc and the count's
    # law): a client of 10^9 rows adds its own panel, not nodes in
    # proportion to its size. Counted, not timed (no clock in unit tests).
    from skfedcp.calibrators._qq import _batch

    def nodes(big):
        seen = []
        original = _batch._poisbin_cdf_ks

        def counted(groups, ks, t, key=None):
            seen.append(t.shape[0])
            return original(groups, ks, t, key=key)

        monkeypatch.setattr(_batch, "_poisbin_cdf_ks", counted)
        sizes = tuple([1000] * 7 + [big])
        ranks = tuple(conformal_rank(n, 0.1) for n in sizes)
        _qq_selection._select_unequal(sizes, ranks, 0.1)
        monkeypatch.setattr(_batch, "_poisbin_cdf_ks", original)
        return sum(seen)

    # Inside the default bound (max_client_size = 10^9). Beyond about 10^11
    # rows SciPy's incomplete beta function itself slows down (1.5 ms per
    # value at 10^12 near the client's quantile), not the number of nodes.
    # (176 nodes for 8 clients of 10^3 rows, 576 with one of 10^9: its panel
    # and the profile's own nodes instead of the canonical ones.)
    small, huge = nodes(1000 + 1), nodes(10**9)
    assert 0 < huge <= 4 * small


def _old_single_k_dp(groups, k, t):
    """The DP branch of _poisbin_cdf_unequal before it called _poisbin_cdf_ks."""
    from scipy import special

    from skfedcp.calibrators._qq._poisbin import _add_clients

    m_active = sum(c for _, c in groups)
    flip = (k - 1) > (m_active - k)
    size = m_active - k + 1 if flip else k
    pmf = np.zeros((size, t.shape[0]))
    pmf[0] = 1.0
    for (n_j, l_j), count in groups:
        if flip:
            p = special.betainc(n_j - l_j + 1, l_j, 1.0 - t)
        else:
            p = special.betainc(l_j, n_j - l_j + 1, t)
        pmf = _add_clients(pmf, p, count)
    cdf = pmf.sum(axis=0)
    return 1.0 - cdf if flip else np.minimum(cdf, 1.0)


def test_single_k_dp_is_unchanged_and_agrees_with_every_k():
    from skfedcp.calibrators._qq import _poisbin

    rng = np.random.default_rng(11)
    for _ in range(100):
        m = int(rng.integers(1, 31))
        sizes = rng.integers(1, 300, m).tolist()
        ranks = [int(rng.integers(1, s + 2)) for s in sizes]
        groups = _active_groups(sizes, ranks)
        m_active = sum(c for _, c in groups)
        if m_active == 0:
            continue
        t = rng.uniform(0.0, 1.0, 40)
        every = _poisbin._poisbin_cdf_ks(groups, np.arange(1, m_active + 1), t)
        for k in (1, m_active, int(rng.integers(1, m_active + 1))):
            single = _poisbin._poisbin_cdf_unequal(groups, k, t)
            np.testing.assert_array_equal(single, _old_single_k_dp(groups, k, t))
            np.testing.assert_allclose(every[k - 1], single, rtol=0, atol=2e-15)
