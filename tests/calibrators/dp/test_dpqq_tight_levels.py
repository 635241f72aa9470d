"""The tight dp-qq plan of session 9: each k's own smallest level (issue 21).

The plan keeps the guarantee (``LB >= 1 - alpha``, the float below the level
fails), its ``k`` is the rule's choice over every ``k``'s own smallest
passing level (checked by brute force), and its simulated coverage is never
above the chained plan's (``_tight_select``'s proof, checked on random
profiles of both utilities).
"""

import math
from collections import Counter

import numpy as np
import pytest

from skfedcp.calibrators._dp import _tight, _tight_select


def _groups(sizes):
    return tuple(sorted(Counter(sizes).items()))


def _expected(sizes, plan, epsilon, n_bins, utility):
    q, k = plan["levels"][0], plan["k"]
    return _tight._simulated_coverage(_groups(sizes), q, k, epsilon, n_bins, utility)


def _profiles(count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        m = int(rng.integers(2, 7))
        yield (
            tuple(int(n) for n in rng.integers(5, 150, m)),
            float(rng.choice([0.05, 0.1])),
            float(rng.choice([0.5, 1.0, 5.0])),
            str(rng.choice(["quantile", "rank"])),
        )


@pytest.mark.parametrize("case", list(_profiles(40, 20261127)))
def test_plan_is_never_further_than_the_chained_one(case):
    sizes, alpha, epsilon, utility = case
    new = dict(
        _tight_select._dpqq_tight_search.__wrapped__(sizes, alpha, epsilon, 50, utility)
    )
    old = dict(
        _tight._dpqq_tight_search_chained.__wrapped__(
            sizes, alpha, epsilon, 50, utility
        )
    )
    assert new["feasible"] == old["feasible"]
    if not new["feasible"]:
        return
    target = 1.0 - alpha + _tight._BOUND_MARGIN
    assert new["coverage_lower"] >= target
    assert new["levels"][0] <= old["levels"][0] or new["k"] != old["k"]
    s_new = _expected(sizes, new, epsilon, 50, utility)
    s_old = _expected(sizes, old, epsilon, 50, utility)
    assert s_new <= s_old + 1e-12


@pytest.mark.parametrize(
    "sizes, alpha, epsilon, utility",
    [
        ((40, 60, 55), 0.1, 5.0, "quantile"),
        ((30, 80, 120, 45), 0.1, 3.0, "rank"),
        ((25, 25, 40), 0.2, 10.0, "quantile"),
        ((1500, 1800, 2000), 0.1, 5.0, "quantile"),  # composite quadrature
    ],
)
def test_level_is_the_smallest_passing_float(sizes, alpha, epsilon, utility):
    plan = dict(
        _tight_select._dpqq_tight_search.__wrapped__(
            sizes, alpha, epsilon, 100, utility
        )
    )
    q, k = plan["levels"][0], plan["k"]
    target = 1.0 - alpha + _tight._BOUND_MARGIN
    bounds = _tight._TightBounds(_groups(sizes), epsilon, 100, utility)
    assert bounds(q, k) == plan["coverage_lower"] >= target
    assert q == 0.5 or bounds(math.nextafter(q, 0.0), k) < target


def _smallest_passing_float(bounds, k, target):
    """Float bisection of ``LB(., k)`` down to adjacent floats (the plain way)."""
    if bounds(0.5, k) >= target:
        return 0.5
    lo, hi = 0.5, 1.0
    while math.nextafter(lo, 1.0) != hi:
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            mid = math.nextafter(lo, 1.0)
        lo, hi = (lo, mid) if bounds(mid, k) >= target else (mid, hi)
    return hi


@pytest.mark.parametrize(
    "sizes, alpha, epsilon, utility",
    [
        ((8, 12, 15), 0.2, 10.0, "quantile"),
        ((9, 9, 14), 0.2, 10.0, "rank"),
        ((20, 30, 25), 0.1, 5.0, "quantile"),
        ((6, 10, 13, 18, 30), 0.2, 5.0, "rank"),
    ],
)
def test_chosen_k_is_the_argmin_over_every_k(sizes, alpha, epsilon, utility):
    # Brute force: every feasible k's own smallest passing float, its S, and
    # the rule (the smallest k within 1e-9 of the smallest S).
    groups = _groups(sizes)
    target = 1.0 - alpha + _tight._BOUND_MARGIN
    bounds = _tight._TightBounds(groups, epsilon, 20, utility)
    scored = []
    for k in range(1, len(sizes) + 1):
        if bounds(1.0, k) < target:
            continue
        q = _smallest_passing_float(bounds, k, target)
        scored.append(
            (_tight._simulated_coverage(groups, q, k, epsilon, 20, utility), q, k)
        )
    plan = dict(
        _tight_select._dpqq_tight_search.__wrapped__(sizes, alpha, epsilon, 20, utility)
    )
    assert plan["feasible"] == bool(scored)
    if scored:
        least = min(s for s, _, _ in scored)
        _, q, k = next(c for c in scored if c[0] <= least + 1e-9)
        assert (plan["levels"][0], plan["k"]) == (q, k)


def test_only_contenders_are_resolved(monkeypatch):
    # 20 clients: most k are excluded by certified brackets, not resolved.
    sizes = tuple(int(n) for n in np.random.default_rng(8).integers(20, 200, 20))
    resolved = []
    resolve = _tight_select._LevelSearch.resolve

    def counted(self, k, width=0.0):
        if width == 0.0:
            resolved.append(k)
        return resolve(self, k, width)

    monkeypatch.setattr(_tight_select._LevelSearch, "resolve", counted)
    plan = dict(_tight_select._dpqq_tight_search.__wrapped__(sizes, 0.1, 2.0, 100))
    assert plan["feasible"] and plan["k"] in resolved
    assert len(set(resolved)) < len(sizes) // 2


def test_bracket_stays_below_the_smallest_passing_level():
    # A computed LB may fall by a rounding between two levels (the review
    # found 1.1e-16 near a crossing): a failing level above a passing one
    # must not invert the bracket, or the narrowing to adjacent floats
    # probes outside it and never ends.
    search = _tight_select._LevelSearch.__new__(_tight_select._LevelSearch)
    search.target = 0.9
    below, passing, above = 0.7, 0.8, 0.8 + 2.0**-40
    search.lb = {
        below: np.array([0.85]),
        passing: np.array([0.9]),
        above: np.array([0.9 - 1e-16]),  # fails, above a passing level
        0.95: np.array([np.nan]),  # unsettled: no decision
    }
    assert search.bracket(1) == (below, passing)
    search.lb = {above: np.array([0.9 - 1e-16])}
    assert search.bracket(1) == (above, None)  # no pass known: the last failure
