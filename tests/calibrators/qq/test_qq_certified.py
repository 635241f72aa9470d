"""Certified k of Appendix A.1: monotone Riemann brackets of M(k).

``_certified._certified_k`` decides the first valid k from rigorous lower and
upper bounds of M(k) (``_riemann_bracket``, F_k decreasing in t), or leaves
the decision to the exact search. The brackets must contain the exact M
(rational, on small profiles), and a decided k must be the exact search's.
"""

from fractions import Fraction

import numpy as np
import pytest

from skfedcp.calibrators import select_qq_ranks
from skfedcp.calibrators._qq import _certified
from skfedcp.calibrators._qq._coverage import (
    _active_groups,
    qq_coverage_unequal_fraction,
)
from skfedcp.calibrators._qq._selection import _conformal_ranks

ALPHAS = (0.01, 0.05, 0.1, 0.2, 0.3)


def _bracket(groups, ks, t, slope=True):
    """The certified bounds of M(k) for ``ks`` at the nodes ``t`` (plain
    Riemann sums with ``slope=False``)."""
    m = sum(c for _, c in groups)
    key = ("test", tuple(t))
    f_wide = _certified._wide_cdf(groups, ks, t, key, m)
    if slope:
        return _certified._bracket(groups, t, f_wide, key)
    return _certified._riemann_bracket(t, f_wide[2:-2])


def _small_case(rng):
    m = int(rng.integers(2, 6))
    sizes = tuple(int(n) for n in rng.integers(1, 9, size=m))
    ranks = tuple(int(l) for l in np.minimum(rng.integers(1, 9, size=m), sizes))
    return sizes, ranks, _active_groups(sizes, ranks)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("slope", [False, True])
def test_bracket_contains_the_exact_coverage(seed, slope):
    rng = np.random.default_rng(seed)
    sizes, ranks, groups = _small_case(rng)
    ks = np.arange(1, sum(c for _, c in groups) + 1)
    # Few, uneven nodes: wide brackets, still around the exact value.
    t = np.sort(rng.uniform(0.02, 0.98, size=int(rng.integers(3, 40))))
    lower, upper = _bracket(groups, ks, t, slope)
    slack = _certified._BRACKET_SLACK
    for k, lo, hi in zip(ks, lower, upper, strict=True):
        exact = qq_coverage_unequal_fraction(sizes, ranks, int(k))
        # Without the rounding slack: the sums themselves bracket M.
        assert Fraction(lo + slack) <= exact + Fraction(1, 10**14)
        assert exact - Fraction(1, 10**14) <= Fraction(hi - slack)
        assert hi - lo < 1.0


def _random_pieces(seed):
    """A small case's groups, its k = 1..m, 12 sorted nodes, and per piece
    between them (columns) the largest first and second difference quotients
    of F_k (rows) on a fine grid of 201 points (computed by the DP)."""
    rng = np.random.default_rng(seed)
    _, _, groups = _small_case(rng)
    m = sum(c for _, c in groups)
    ks = np.arange(1, m + 1)
    t = np.sort(rng.uniform(0.01, 0.99, size=12))
    first, second = [], []
    for i in range(t.shape[0] - 1):
        fine = np.linspace(t[i], t[i + 1], 201)
        f = _certified._count_cdf(groups, ks, fine, None, m)
        step = fine[1] - fine[0]
        first.append(np.abs(np.diff(f, axis=1)).max(axis=1) / step)
        second.append(np.abs(np.diff(f, 2, axis=1)).max(axis=1) / step**2)
    return groups, ks, t, m, np.array(first).T, np.array(second).T


@pytest.mark.parametrize("seed", range(8))
def test_slope_bound_bounds_the_derivative(seed):
    # |F_k'| <= G_i on each piece, checked on a fine grid inside the pieces.
    groups, ks, t, m, quotient, _ = _random_pieces(100 + seed)
    slope = _certified._slope_bound(
        groups, t, _certified._wide_cdf(groups, ks, t, ("s", tuple(t)), m), None
    )
    assert np.all(quotient <= slope * (1 + 1e-9) + 1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_curvature_bound_bounds_the_second_derivative(seed):
    # |F_k''| <= B_i on each piece, checked on a fine grid inside the pieces,
    # and the bound is not vacuous: within a factor 1,000 of the largest
    # quotient somewhere.
    groups, ks, t, m, _, quotient = _random_pieces(200 + seed)
    f_wide = _certified._wide_cdf(groups, ks, t, None, m)
    bound = _certified._curvature_bound(groups, t, f_wide, None)
    assert np.all(quotient <= bound * (1 + 1e-6) + 1e-6)
    assert (quotient.max(axis=0) / bound.max(axis=0)).max() > 1e-3


@pytest.mark.parametrize("seed", range(4))
def test_curvature_bound_with_the_spread_on_a_plan_s_nodes(seed):
    # The bound a plan uses (the count's spread given): |F_k''| <= B_i on
    # each piece of a plan's nodes (20-60 clients of 10-300 rows), checked on
    # a fine grid inside the pieces; the spread's term makes it tighter than
    # the windows' alone somewhere, and stays within 4x of the quotients
    # (0.49-0.63 of it on these cases).
    rng = np.random.default_rng(500 + seed)
    alpha = float(rng.choice(ALPHAS[1:]))
    sizes = tuple(int(n) for n in rng.integers(10, 301, size=int(rng.integers(20, 61))))
    groups = _active_groups(sizes, _conformal_ranks(sizes, alpha))
    m = sum(c for _, c in groups)
    k_guess, scale = _certified._guess_and_scale(groups, 1.0 - alpha)
    ks = np.arange(max(1, k_guess - 2), min(m, k_guess + 2) + 1)
    t = _certified._bracket_nodes(1.0 - alpha, scale, 0)[::2]
    f_wide, spread = _certified._wide_cdf(groups, ks, t, None, m, spread=True)
    bound = _certified._curvature_bound(groups, t, f_wide, None, None, spread)
    windows = _certified._curvature_bound(groups, t, f_wide, None)
    second = []
    for i in range(t.shape[0] - 1):
        fine = np.linspace(t[i], t[i + 1], 201)
        f = _certified._count_cdf(groups, ks, fine, None, m)
        second.append(
            np.abs(np.diff(f, 2, axis=1)).max(axis=1) / (fine[1] - fine[0]) ** 2
        )
    quotient = np.array(second).T
    assert np.all(quotient <= bound * (1 + 1e-6) + 1e-6)
    assert np.all(bound <= windows) and np.any(bound < windows / 2.0)
    assert np.max(quotient / bound) > 0.25


@pytest.mark.parametrize("seed", range(6))
def test_two_clients_removed_law_difference_bound(seed):
    # The curvature bound's lemma: without clients i and j, |P(T = s) -
    # P(T = s + 1)| <= max(P(s <= S <= s + 2), P(s + 1 <= S <= s + 3)), for
    # every pair, count s and probabilities; the three-term windows are
    # tighter than the four-term one (F_{k+2} - F_{k-2}) used before.
    rng = np.random.default_rng(300 + seed)
    p = rng.uniform(0.0, 1.0, size=int(rng.integers(5, 10)))
    p[: int(rng.integers(0, 3))] = rng.choice([0.0, 1.0])

    def law(q):
        out = np.array([1.0])
        for x in q:
            out = np.convolve(out, [1.0 - x, x])
        return np.concatenate((out, np.zeros(4)))

    full = law(p)
    windows3 = np.array([full[s : s + 3].sum() for s in range(p.size + 1)])
    windows4 = np.array([full[s : s + 4].sum() for s in range(p.size)])
    tighter = False
    for i in range(p.size):
        for j in range(i + 1, p.size):
            t = law(np.delete(p, [i, j]))
            for s in range(p.size - 1):
                bound = max(windows3[s], windows3[s + 1])
                assert abs(t[s] - t[s + 1]) <= bound + 1e-15
                assert bound <= windows4[s] + 1e-15
                tighter |= bound < windows4[s] - 1e-6
    assert tighter


def _bernoulli_law(q):
    out = np.array([1.0])
    for x in q:
        out = np.convolve(out, [1.0 - x, x])
    return out


@pytest.mark.parametrize("seed", range(6))
def test_difference_bound_from_the_variance(seed):
    # The Fourier lemma: without any two clients i and j, |P(W = r - 1) -
    # P(W = r)| <= (4 / pi) K(Var(S) - 1/2) for every r (_difference_bound,
    # Var(S) read from each client's p (1 - p) at a piece's two ends, here
    # equal). Sharp: on the larger laws the largest difference is over a third
    # of the bound (a bound three times smaller would fail), and the bound
    # is below a third of the largest three-term window of S's law.
    rng = np.random.default_rng(400 + seed)
    m = int(rng.choice([6, 12, 40, 90]))
    p = rng.uniform(0.0, 1.0, size=m) if seed % 2 else rng.beta(0.5, 0.5, size=m)
    p[: int(rng.integers(0, 3))] = rng.choice([0.0, 1.0])
    groups = [((10 + j, 1), 1) for j in range(m)]  # only the counts are read
    spread = np.repeat((p * (1.0 - p))[:, None], 2, axis=1)
    bound = float(_certified._difference_bound(groups, spread)[0])
    full = _bernoulli_law(p)
    windows = np.array([full[r : r + 3].sum() for r in range(m - 1)])
    largest = 0.0
    for i in range(m):
        for j in range(i + 1, m):
            law = np.concatenate(([0.0], _bernoulli_law(np.delete(p, [i, j])), [0.0]))
            gap = np.abs(np.diff(law)).max()
            assert gap <= bound
            largest = max(largest, gap)
    if m >= 40:
        assert largest > bound / 3.0
        assert bound < windows.max() / 3.0


def test_trapezoid_side_of_the_bracket_holds_alone():
    # Without the slope bound the curvature bound alone narrows the bracket,
    # which must still contain the exact M; with a zero bound (F taken as
    # linear on each piece: the plain trapezoid rule) it would exclude it
    # (the test can fail).
    sizes, ranks = (5, 7, 8, 12), (4, 6, 7, 10)
    groups = _active_groups(sizes, ranks)
    ks = np.array([2, 3])
    t = np.sort(np.random.default_rng(0).uniform(0.02, 0.98, 8))
    f_wide = _certified._wide_cdf(groups, ks, t, None, 4)
    curvature = _certified._curvature_bound(groups, t, f_wide, None)
    exact = [float(qq_coverage_unequal_fraction(sizes, ranks, int(k))) for k in ks]
    inner = f_wide[2:-2]
    lower, upper = _certified._riemann_bracket(t, inner, None, curvature)
    plain = _certified._riemann_bracket(t, inner)
    for r in range(2):
        assert lower[r] <= exact[r] <= upper[r]
        assert upper[r] - lower[r] < plain[1][r] - plain[0][r]
    lower, upper = _certified._riemann_bracket(t, inner, None, 0.0 * curvature)
    assert not lower[0] <= exact[0] <= upper[0]


def test_bracket_narrows_and_fails_when_reversed():
    # The bracket's sides are not interchangeable: the upper sum alone
    # (F at the left end of each piece) overshoots M, the lower undershoots.
    sizes, ranks, k = (5, 7, 8), (4, 6, 7), 2
    groups = _active_groups(sizes, ranks)
    exact = float(qq_coverage_unequal_fraction(sizes, ranks, k))
    widths = []
    for n_nodes in (8, 64, 512):
        t = np.linspace(0.01, 0.99, n_nodes)
        plain = _bracket(groups, np.array([k]), t, slope=False)
        lower, upper = _bracket(groups, np.array([k]), t)
        assert plain[0][0] <= lower[0] < exact < upper[0] <= plain[1][0]
        widths.append(upper[0] - lower[0])
        # Lower and upper swapped would exclude M.
        assert not (upper[0] <= exact <= lower[0])
    assert widths[0] > widths[1] > widths[2]  # narrower with the node gap
    assert widths[2] < 0.002


def _profile(rng, client_sizes):
    sizes = client_sizes(rng)
    return tuple(int(n) for n in sizes), float(rng.choice(ALPHAS))


def _check_certified(sizes, alpha):
    """The certified k (if decided) is the exact search's; returns whether
    it decided."""
    for clip in (False, True):
        ranks = _conformal_ranks(sizes, alpha)
        if clip:
            ranks = tuple(min(l, n) for l, n in zip(ranks, sizes, strict=True))
        groups = _active_groups(sizes, ranks)
        if not groups or len(set(sizes)) == 1:
            continue
        k = _certified._certified_k(groups, (1.0 - alpha) - 1e-10)
        if k is None:
            continue
        sel = select_qq_ranks(sizes, alpha, local_rank="fixed", clip_local_rank=clip)
        if k == _certified._NO_VALID_K:
            assert not sel.feasible
        else:
            assert sel.feasible and sel.k == k
        return True
    return False


def test_certified_k_is_the_selected_k(client_sizes):
    rng = np.random.default_rng(3)
    decided = sum(_check_certified(*_profile(rng, client_sizes)) for _ in range(30))
    assert decided >= 20  # most plans are decided without the exact search (27)


@pytest.mark.slow
def test_certified_k_is_the_selected_k_300_profiles(client_sizes):
    rng = np.random.default_rng(2026)
    decided = sum(_check_certified(*_profile(rng, client_sizes)) for _ in range(300))
    assert decided >= 220  # 270


def test_undecided_when_the_threshold_is_inside_the_bracket(monkeypatch):
    # A margin wider than any bracket: nothing is decided.
    monkeypatch.setattr(_certified, "_DECISION_MARGIN", 1.0)
    sizes = tuple(int(n) for n in np.random.default_rng(4).integers(10, 1001, 60))
    groups = _active_groups(sizes, _conformal_ranks(sizes, 0.1))
    assert _certified._certified_k(groups, 0.9 - 1e-10) is None


def test_no_valid_k_is_certified():
    # Clients of 1 and 2 rows sending their smallest value: M(2) = 7/12,
    # below 0.95 for every k.
    groups = _active_groups((1, 2), (1, 1))
    assert _certified._certified_k(groups, 0.95 - 1e-10) == _certified._NO_VALID_K
    assert float(qq_coverage_unequal_fraction((1, 2), (1, 1), 2)) == 7 / 12
    assert not select_qq_ranks((1, 2), 0.05, local_rank=1).feasible


def test_left_to_the_exact_search_beyond_its_range():
    # More than 256 active clients, or a client of more than 10^9 rows.
    many = tuple(range(10, 10 + 300))
    groups = _active_groups(many, _conformal_ranks(many, 0.1))
    assert _certified._certified_k(groups, 0.9 - 1e-10) is None
    huge = (100, 200, 10**10)
    groups = _active_groups(huge, _conformal_ranks(huge, 0.1))
    assert _certified._certified_k(groups, 0.9 - 1e-10) is None
    assert _certified._certified_k(groups[:2], 0.9 - 1e-10) is not None


def test_cached_rows_restart_keeps_every_row(monkeypatch):
    # A table that would outgrow its bound restarts; a call whose groups are
    # partly in the old table still gets all its rows (the old ones too),
    # bit-identical to a fresh computation.
    monkeypatch.setattr(_certified, "_TABLES", type(_certified._TABLES)())
    monkeypatch.setattr(_certified, "_TABLE_MAX_ROWS", 4)
    t = np.array([0.2, 0.5, 0.8])
    key = ("test-restart",)
    first = [((10, 3), 1), ((20, 5), 1), ((30, 9), 1)]
    second = [((10, 3), 1), ((40, 7), 1), ((50, 11), 2)]
    _certified._cached_rows(first, key, _certified._below, t)
    rows = _certified._cached_rows(second, key, _certified._below, t)
    fresh = _certified._cached_rows(second, None, _certified._below, t)
    assert np.array_equal(rows, fresh)
    assert set(_certified._TABLES[key][0]) == {(10, 3), (40, 7), (50, 11)}
    again = _certified._cached_rows(first[:1], key, _certified._below, t)
    assert np.array_equal(again, fresh[:1])


def test_fit_and_plan_agree_for_clients_past_the_certified_range():
    # Review, session 10: two clients of ~10^9 rows at alpha = 1e-6 (the
    # plan policy raised): the brackets certified k = 2 while the exact
    # search (whose values are ~1e-7 off there) found no valid k, so a fit
    # and plan() disagreed. Clients past 10^8 rows are the exact search's.
    import numpy as np

    from skfedcp import config_context
    from skfedcp.calibrators import QuantileOfQuantilesCalibrator

    sizes = np.array([10**9, 10**9 - 1])
    assert sizes.max() > _certified._CERTIFIED_MAX_SIZE
    with config_context(max_total_size=10**10):
        cal = QuantileOfQuantilesCalibrator(local_rank="fixed")
        plan = cal.plan(sizes, 1e-6)
        fitted = cal._server_plan(sizes, 1e-6, None)
    assert fitted["feasible"] == plan["feasible"]
    assert fitted["k"] == plan["k"]
