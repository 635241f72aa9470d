"""The Byzantine plans' fast paths against their references (brackets, shared grids)."""

import bisect
import math

import numpy as np
import pytest
from _byzantine_caches import clear_byzantine_caches

from skfedcp.calibrators import (
    PrivateQuantileOfQuantilesCalibrator,
    byzantine_coverage_bounds,
    max_byzantine,
    qq_coverage,
    select_byzantine_ranks,
)
from skfedcp.calibrators._dp import _byzantine as _dp_byz
from skfedcp.calibrators._qq import _byzantine as _byz
from skfedcp.calibrators._qq import _byzantine_bound as _bound
from skfedcp.utils._quantile import conformal_rank

TOL = 1e-10  # the feasibility tolerance of the rank selection


def _unequal(m, seed, low=10, high=200):
    return tuple(int(n) for n in np.random.default_rng(seed).integers(low, high, m))


_clear_caches = clear_byzantine_caches


@pytest.fixture
def no_brackets(monkeypatch):
    """Every bracket undecided: each decision goes to the quadrature."""
    _clear_caches()
    monkeypatch.setattr(_byz, "_equal_bracket", lambda *a: (-math.inf, math.inf))

    def undecided(*args):
        yield -math.inf, math.inf

    monkeypatch.setattr(_byz, "riemann_brackets", undecided)
    monkeypatch.setattr(_dp_byz, "_USE_BOUNDS", False)
    yield
    _clear_caches()


# ---------------------------------------------------------------------------
# The brackets hold the integrals they stand for.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("h,n", [(4, 5), (9, 10), (19, 40), (99, 100), (30, 1000)])
def test_equal_bracket_holds_the_quadrature(h, n):
    rng = np.random.default_rng(h * n)
    cells = [(1, 1), (n, h), (n, 1), (1, h)]
    cells += [
        (int(rng.integers(1, n + 1)), int(rng.integers(1, h + 1))) for _ in range(30)
    ]
    for l, r in cells:
        lower, upper = _byz._equal_bracket(h, n, l, r)
        value = qq_coverage(h, n, l, r)
        assert lower <= value + 1e-14 and value <= upper + 1e-14
        assert upper - lower < 0.05


@pytest.mark.parametrize("m,c", [(12, 2), (40, 3), (100, 5)])
def test_riemann_brackets_hold_the_integral(m, c):
    sizes = _unequal(m, m)
    ranks = tuple(conformal_rank(n, 0.1) for n in sizes)
    widths = []
    for r in (1, (m - c) // 2, m - 2 * c, m - c):
        values = _bound.extreme_coverages(sizes, ranks, m - c, True, (r,))
        assert not values.flags.writeable  # cached, shared by later plans
        value = values[0]
        brackets = list(_bound.riemann_brackets(sizes, ranks, m - c, r))
        assert len(brackets) == 2
        for lower, upper in brackets:
            assert lower <= value + 1e-13 and value <= upper + 1e-13
        widths.append([upper - lower for lower, upper in brackets])
    # The second bracket, crowded where the integrand drops, is the sharper.
    assert all(fine <= coarse for coarse, fine in widths)


@pytest.mark.parametrize("m", [12, 40])
@pytest.mark.parametrize("largest", [True, False])
def test_shared_grid_is_the_integrand_at_its_nodes(m, largest):
    # The band and the trims read the shared grid's rows: the same bits as
    # the integrand evaluated on its own, at any subset of nodes and ranks.
    sizes = _unequal(m, 7)
    ranks = tuple(conformal_rank(n, 0.1) for n in sizes)
    n_keep = m - 2
    ext = _bound._Extreme(sizes, ranks, n_keep, largest)
    _, t, f = ext.grid_cdf()
    ks = np.array([1, n_keep // 2, n_keep])
    np.testing.assert_array_equal(ext.cdf(t, ks), f[ks - 1])
    np.testing.assert_array_equal(ext.cdf(t[5:9], ks[1:2]), f[ks[1:2] - 1, 5:9])
    assert not f.flags.writeable


# ---------------------------------------------------------------------------
# The decisions taken from brackets are the quadrature's.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "m,n,threshold,correction,c,tie",
    [
        (12, 30, 0.9, 2, 1, 1e-10),
        (20, 15, 0.92, 3, 3, 1e-10),
        (25, 40, 0.9, 0, 1, 1e-13),
        (41, 20, 0.8, 0, 5, 1e-13),
        (9, 60, 0.95, 7, 2, 1e-10),
    ],
)
def test_equal_best_is_the_quadrature_rule(m, n, threshold, correction, c, tie):
    fast = _byz._equal_best(m, n, threshold, correction, c, tie)
    _clear_caches()
    steps = _byz._equal_steps(m - c, n, threshold, n - correction, m - 2 * c)

    def exact(l, r):
        return float(qq_coverage(m - c, n, l, r)) >= threshold

    # The staircase on quadrature values only (no bracket).
    want = []
    for l in range(1, n - correction + 1):
        passing = [r for r in range(1, m - 2 * c + 1) if exact(l, r)]
        if passing and (not want or passing[0] != want[-1][1]):
            want.append((l, passing[0]))
    assert steps == want
    if not want:
        assert fast is None
        return
    benign = [float(qq_coverage(m, n, l + correction, r + c)) for l, r in want]
    best = max(i for i, v in enumerate(benign) if v <= min(benign) + tie)
    assert fast == (*want[best], benign[best])


@pytest.mark.parametrize(
    "sizes,alpha,c",
    [
        ((50,) * 30, 0.1, 2),
        ((200,) * 100, 0.1, 1),
        ((20,) * 15, 0.2, 3),
    ],
)
def test_equal_selection_with_and_without_brackets(sizes, alpha, c, monkeypatch):
    _clear_caches()
    fast = select_byzantine_ranks(sizes, alpha, c)
    _clear_caches()
    monkeypatch.setattr(_byz, "_equal_bracket", lambda *a: (-math.inf, math.inf))
    assert select_byzantine_ranks(sizes, alpha, c) == fast
    _clear_caches()


def _reference_max_byzantine(sizes, alpha, ranks, k):
    """The rule as first written: the full bounds at each bisection step."""
    threshold = (1.0 - alpha) - TOL

    def ok(c):
        return byzantine_coverage_bounds(sizes, ranks, k, c)[0] >= threshold

    if not ok(0):
        return -1
    return bisect.bisect_left(range(1, k), True, key=lambda c: not ok(c))


@pytest.mark.parametrize(
    "sizes,alpha,c",
    [
        (_unequal(60, 1), 0.1, 3),
        (_unequal(25, 2, 5, 60), 0.2, 2),
        ((40,) * 30, 0.1, 2),
        (_unequal(40, 0, 10, 1001), 0.1, 4),
    ],
)
def test_max_byzantine_is_the_bisection_of_the_bounds(sizes, alpha, c):
    sel = select_byzantine_ranks(sizes, alpha, c)
    assert sel.feasible
    got = max_byzantine(sizes, alpha, sel.local_ranks, sel.k)
    assert got == _reference_max_byzantine(sizes, alpha, sel.local_ranks, sel.k)
    assert got >= c
    # Other pairs, not chosen for any c: the answer may be -1 or 0.
    for k in (max(sel.k - 2, 1), min(sel.k + 3, len(sizes))):
        got = max_byzantine(sizes, alpha, sel.local_ranks, k)
        assert got == _reference_max_byzantine(sizes, alpha, sel.local_ranks, k)


def test_max_byzantine_without_brackets_is_the_same(no_brackets):
    sizes = _unequal(40, 3)
    sel = select_byzantine_ranks(sizes, 0.1, 2)
    got = max_byzantine(sizes, 0.1, sel.local_ranks, sel.k)
    assert got == _reference_max_byzantine(sizes, 0.1, sel.local_ranks, sel.k)


def test_max_byzantine_checks_the_ranks():
    with pytest.raises(ValueError, match="one rank >= 1 per client"):
        max_byzantine([10, 20, 30], 0.1, [9, 18], 2)
    with pytest.raises(ValueError, match="one rank >= 1 per client"):
        max_byzantine([10, 20, 30], 0.1, [9, 0, 27], 2)


# ---------------------------------------------------------------------------
# dp-qq: the gamma search's score bound and the plans with every shortcut off.
# ---------------------------------------------------------------------------
def _dp_plan(sizes, c, epsilon=10.0):
    cal = PrivateQuantileOfQuantilesCalibrator(
        epsilon=epsilon, score_bounds=(0, 1), n_byzantine=c
    )
    return cal.plan(np.array(sizes), 0.1)


@pytest.mark.parametrize("m,c,low", [(30, 2, 20), (60, 3, 20), (40, 2, 8)])
def test_unequal_score_bound_is_below_every_score(m, c, low):
    # low = 8: some of A.1's ranks exceed their sizes (the pair may then
    # use the clipped ranks; the bound covers both).
    sizes = _unequal(m, m + c, low, 400)
    for g in (0.01, 0.05, 0.2, 0.5, 0.9):
        tau = 0.9 / (1.0 - 0.1 * g)
        found = _byz.fixed_certified_pair(sizes, 1.0 - tau, c)
        bound = _dp_byz._unequal_score_bound(sizes, tau, 2, c)
        if found is None:
            continue
        ranks, k, _ = found
        score = _dp_byz._qq_score(sizes, tuple(r + 2 for r in ranks), k)
        assert bound <= score + 1e-13


@pytest.mark.parametrize(
    "sizes,c",
    [
        (_unequal(40, 5, 20, 400), 2),
        ((60,) * 25, 1),
        ((150,) * 40, 2),
        (_unequal(12, 6, 30, 300), 1),
    ],
)
def test_dp_plans_without_shortcuts_are_the_same(sizes, c, monkeypatch):
    _clear_caches()
    fast = _dp_plan(sizes, c)
    _clear_caches()
    monkeypatch.setattr(_byz, "_equal_bracket", lambda *a: (-math.inf, math.inf))
    monkeypatch.setattr(_dp_byz, "_USE_BOUNDS", False)
    slow = _dp_plan(sizes, c)
    _clear_caches()
    assert fast.keys() == slow.keys()
    for key, value in fast.items():
        np.testing.assert_array_equal(value, slow[key])


def test_dp_gamma_search_re_decides_near_ties(monkeypatch):
    # Each comparison of two gammas goes through the c = 0 search's _beats.
    calls = []
    beats = _dp_byz._beats

    def spy(*args):
        calls.append(args[1])
        return beats(*args)

    _clear_caches()
    monkeypatch.setattr(_dp_byz, "_beats", spy)
    plan = _dp_plan(_unequal(20, 9, 30, 300), 1)
    _clear_caches()
    assert calls and plan["score"] in calls
