"""The tight engine of session 10 (issue 21): rows by a ratio recurrence, a
DP that skips the clients decided on a chunk of nodes, narrow windows with
their own panels, the simulated release law from tables of exponentials."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special

from skfedcp.calibrators._dp import _laws, _tight, _tight_bounds, _tight_rows


def _exact_tail(n, r, t):
    """``P(Bin(n, t) >= r)`` in rational arithmetic (``t`` the float's value)."""
    x = Fraction(t)
    return float(
        sum(math.comb(n, j) * x**j * (1 - x) ** (n - j) for j in range(r, n + 1))
    )


@pytest.mark.parametrize("n", [1, 2, 7, 25, 60])
def test_recurrence_rows_are_within_their_bound_of_the_exact_tails(n):
    # Small n: every rank, on nodes across (0, 1); the betainc anchors are
    # accurate to a few ulps there, so the rows are within the recurrence's
    # own bound (_ROW_REL, relative) plus those ulps.
    t = np.sort(np.random.default_rng(n).uniform(0.01, 0.99, 40))
    ranks = np.arange(1, n + 1)
    rows = _tight_rows._cut_rows(n, ranks, t, _tight._ROW_CUT)
    for i, r in enumerate(ranks):
        for j, x in enumerate(t):
            exact = _exact_tail(n, int(r), float(x))
            if exact < _tight._ROW_CUT or exact > 1.0 - _tight._ROW_CUT:
                continue
            bound = _tight_rows._ROW_REL * exact + 8 * 2.0**-53 * exact
            assert abs(rows[i, j] - exact) <= bound


@pytest.mark.parametrize("n", [40, 300, 1000, 10**6])
def test_recurrence_rows_match_betainc(n):
    t = np.sort(np.random.default_rng(0).uniform(size=500))
    low = max(1, int(0.8 * n) - 50)
    ranks = np.arange(low, min(n, low + 70) + 1)
    rows = _tight_rows._cut_rows(n, ranks, t, _tight._ROW_CUT)
    ref = special.betainc(ranks[:, None].astype(float), n - ranks[:, None] + 1.0, t)
    # Where a piece is cut both are below 1e-20 (or above 1 - 1e-20).
    np.testing.assert_allclose(rows, ref, rtol=1e-11, atol=2e-20)


def test_rows_do_not_depend_on_the_ranks_asked_with_them():
    # Anchors sit on multiples of _STEP: a row's bits are a function of (n,
    # r, t) only, so LB(q, k) does not depend on the levels probed before.
    t = np.sort(np.random.default_rng(1).uniform(size=300))
    wide = _tight_rows._cut_rows(500, np.arange(380, 470), t, _tight._ROW_CUT)
    for low, high in [(380, 381), (395, 412), (431, 469), (400, 401)]:
        part = _tight_rows._cut_rows(500, np.arange(low, high), t, _tight._ROW_CUT)
        assert np.array_equal(part, wide[low - 380 : high - 380])


def test_certified_value_subtracts_the_engine_slack():
    groups = ((30, 2), (70, 1), (120, 1))
    bounds = _tight._TightBounds(groups, 5.0, 100, "quantile")
    raw = bounds._compute(0.93, 0)
    slack = bounds._slacks[(0.93, 0)]
    assert 0.0 < slack < 1e-13
    np.testing.assert_array_equal(bounds._certified(0.93, 0, bounds.m), raw - slack)
    assert bounds(0.93, 2) == raw[1] - slack


@pytest.mark.parametrize("utility", ["quantile", "rank"])
def test_chunked_dp_gives_the_bits_of_one_chunk(monkeypatch, utility):
    # Skipping the clients with p = 0 on a chunk and shifting for those with
    # p = 1 are the same operations on the same values.
    groups = ((20, 3), (45, 1), (90, 1), (200, 2), (600, 1), (1500, 1))
    values = {}
    for chunk in (16, 256, 10**6):
        monkeypatch.setattr(_tight_bounds, "_DP_CHUNK", chunk)
        bounds = _tight._TightBounds(groups, 1.0, 50, utility)
        values[chunk] = [
            bounds._compute(q, 1, cap) for q in (0.8, 0.95) for cap in (3, 9)
        ]
    for chunk in (16, 256):
        for got, want in zip(values[chunk], values[10**6], strict=True):
            assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("big", [10**6, 10**9, 10**12])
def test_narrow_window_settles_in_two_passes(big):
    # A client announcing `big` scores has a near-step p at the level: its
    # window gets panels of its own, and the composite rule settles on its
    # second pass whatever `big` is (it refined to 8192 panels before).
    bounds = _tight._TightBounds(((1000, 7), (big, 1)), 1.0, 100, "quantile")
    for q in (0.9, 0.95):
        assert bounds._narrow_windows(q, bounds._laws.get(q) or _laws_at(bounds, q))
        for k in (1, 2, 3):
            value = bounds(q, k)
            assert 0.8 < value < 1.0
        assert len(bounds._values[q]) == 2


def _laws_at(bounds, q):
    bounds._compute(q, 0)
    return bounds._laws[q]


def test_narrow_window_bound_does_not_depend_on_the_announced_size():
    # The big client's p is a step at its rank law's quantile: 10^9 and 10^12
    # give the same bound to the quadrature's tolerance.
    values = []
    for big in (10**9, 10**12):
        bounds = _tight._TightBounds(((1000, 7), (big, 1)), 1.0, 100, "quantile")
        values.append([bounds(0.92, k) for k in (1, 2, 3)])
    np.testing.assert_allclose(values[0], values[1], atol=1e-8)


@pytest.mark.parametrize("utility", ["quantile", "rank"])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 5.0])
def test_release_tables_match_the_log_sum_exp(utility, epsilon):
    rng = np.random.default_rng(3)
    groups = tuple((int(n), 1) for n in sorted(set(rng.integers(5, 1500, 12))))
    groups = (*groups, (5000, 1))  # above _TABLE_MAX_N: the log-sum-exp path
    counts_of = _tight._simulation_counts(groups, 60)
    for level in (0.5, 0.8, 0.97, 1.0):
        fast = _laws._release_cdfs(groups, level, epsilon, utility, counts_of)
        for (n, _), (lower, greater), cdf in zip(groups, counts_of, fast, strict=True):
            exact = _laws._exact_cdf(lower, greater, n, level, epsilon, utility)
            np.testing.assert_allclose(cdf, exact, rtol=0, atol=1e-13)


@pytest.mark.parametrize("n_bins", [2, 7, 100, 101, 1000])
def test_uniform_counts_are_the_release_counts(n_bins):
    from skfedcp.privacy._quantile import _release_counts

    rng = np.random.default_rng(n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    scores = rng.uniform(size=(30, 300))
    # Scores on the edges and next to them (a float away on either side).
    near = np.concatenate(
        [edges[:-1], np.nextafter(edges[1:-1], 0.0), np.nextafter(edges[:-1], 1.0)]
    )
    scores[0, : min(300, near.size)] = near[:300]
    got = _tight._uniform_counts(scores, edges)
    want = _release_counts(scores, edges)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
