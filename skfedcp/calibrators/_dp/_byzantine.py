"""FedCP²-QQ plans certified against dishonest clients (issue 23, section 2)."""

# With c of the m clients dishonest (any message that passes validation: a
# bin edge of the announced grid or +inf, possibly chosen after seeing every
# honest message), the k-th smallest message T satisfies T >= h_(k-c), the
# (k - c)-th smallest honest release (at most c of the k smallest messages
# are dishonest).  The honest set H is fixed before the data are drawn.
#
# rule="paper".  With probability >= 1 - gamma alpha (over the mechanisms,
# given any data: the correction l_cor is a union bound over all m clients,
# so it covers the m - c honest ones) every honest release is at least the
# client's l_j-th score.  On that event h_(k-c) >= the (k - c)-th smallest of
# the honest l_j-th scores, so for a test score exchangeable with the honest
# clients' scores
#
#     P(S <= T) >= (1 - gamma alpha) M_H(l, k - c)
#
# (the event depends on the mechanisms' noise only, independent of S given
# the data).  min_H M_H(l, k - c) is bounded by the QQ rule certified against
# c dishonest clients (select_byzantine_ranks / byzantine_coverage_bounds of
# _qq/_byzantine.py: exact with equal sizes, the worst honest set at every
# point of the integral otherwise), asked for tau_gamma = (1 - alpha) /
# (1 - gamma alpha).  Among the gammas with a certified pair, the one with
# the smallest all-honest coverage M(l + l_cor, k) of the corrected ranks is
# kept, ties to the smaller gamma, as in the c = 0 search (with its
# re-decision of near ties on the reference quadrature, _plan._beats).
# Shortcuts that leave that plan unchanged: a gamma whose score cannot beat
# the best is not planned (its score is at least tau_gamma + 1/(N + 1) -
# 1e-10, see _paper_plan; with unequal sizes, at least the score at the rank
# of one honest set's c = 0 rule, see _unequal_score_bound), and with equal
# sizes only the staircase of the smallest certified r per l is read, cell
# by cell (Riemann brackets first, an adaptive quadrature near the
# threshold, cached across gammas), never the whole (l, r) table.
#
# rule="tight".  Every honest release is at least U^j_(D_j) (coupling of the
# tight bound, D_j the worst-case rank law of the mechanism), independently
# across clients, so P(S <= T) >= LB_H(q, k - c), the tight bound of the
# honest clients alone at rank k - c.  LB_H depends on H only through the
# multiset of its sizes: with equal sizes every H gives the same value
# (exact); with unequal sizes the minimum over every multiset of m - c sizes
# the federation can leave honest is taken (exact, enumerated; refused when
# there are more than _MAX_HONEST_MIXES of them).  For each k the smallest
# level q with min_H LB_H(q, k - c) >= 1 - alpha is found by the replayed
# bisection of the c = 0 search, and the plan with the smallest expected
# all-honest coverage on public uniform scores is kept.
#
# In both rules k <= m - c, so c clients sending +inf cannot make the
# threshold infinite on their own.

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import special

from ...privacy import dp_qq_local_correction
from ...utils._quantile import conformal_rank
from ...utils._validation import check_int
from .._qq._byzantine import (
    _equal_best,
    _equal_cell,
    fixed_certified_pair,
    fixed_k_floor,
    max_byzantine,
)
from .._qq._coverage import _FEASIBILITY_TOL
from .._qq._selection import _fixed_ranks, select_qq_ranks
from ._byzantine_bounds import CoarseBounds
from ._common import _describe
from ._plan import _TIE, GAMMA_GRID, _beats, _dpqq_auto_bins, _qq_score
from ._tight import (
    _BOUND_MARGIN,
    _best_simulated,
    _tight_candidates,
    _TightBounds,
)
from ._tight_bounds import _RowBudget

__all__ = ["check_n_byzantine", "dpqq_byzantine_plan", "dpqq_max_byzantine"]

# Largest number of honest size mixes the tight rule enumerates.
_MAX_HONEST_MIXES = 64
#: Switch the paper search's score bounds off (tests: the reference search).
_USE_BOUNDS = True


def _check_c(sizes, c):
    m = len(sizes)
    if 2 * c >= m:
        raise ValueError(
            f"n_byzantine={c} is not below half of the m={m} clients: no rank k "
            f"satisfies n_byzantine < k <= m - n_byzantine, so {c} dishonest "
            "clients could always move the threshold to +inf or below every "
            "honest value. Use n_byzantine < m / 2."
        )


def _infeasible(sizes, alpha, epsilon, n_bins, c, rule):
    raise ValueError(
        f"n_byzantine={c}: no dp-qq plan (rule={rule!r}) certifies coverage "
        f">= 1 - alpha against {c} dishonest clients with client sizes "
        f"{_describe(sizes)}, epsilon={epsilon:g}, alpha={alpha:g} and "
        f"n_bins={n_bins}; tolerate fewer dishonest clients, or use more data "
        "per client, a larger epsilon or fewer bins."
    )


def check_n_byzantine(n_byzantine):
    """``n_byzantine`` as an int ``>= 0`` (TypeError / ValueError otherwise)."""
    return check_int(n_byzantine, "n_byzantine", low=0)


def dpqq_byzantine_plan(sizes, alpha, epsilon, n_bins, gamma, rule, utility, c):
    """The public dp-qq plan certified against ``c >= 1`` dishonest clients.

    Same keys as the ``c = 0`` plan (``coverage_lower`` is the certified
    bound, ``score`` the all-honest coverage of the plan), plus
    ``n_byzantine``. Raises ``ValueError`` when no plan is certified (see the
    module comment for the proofs). Cached per arguments.
    """
    sizes = tuple(int(n) for n in sizes)
    if min(sizes) < 1:
        raise ValueError(
            "n_byzantine > 0 needs every announced client to hold calibration "
            "rows (a client of 0 rows would count as honest and always send +inf)."
        )
    _check_c(sizes, c)
    plan = dict(_byzantine_plan(sizes, alpha, epsilon, n_bins, gamma, rule, utility, c))
    for key in ("local_ranks", "levels"):
        plan[key] = np.array(plan[key])
    return plan


@lru_cache(maxsize=64)
def _byzantine_plan(sizes, alpha, epsilon, n_bins, gamma, rule, utility, c):
    if rule == "tight":
        if isinstance(n_bins, str):  # "auto": any data-free choice is valid
            n_bins = _dpqq_auto_bins(sizes, alpha, epsilon, "auto")
        plan = _tight_plan(sizes, alpha, epsilon, int(n_bins), utility, c)
    else:
        if isinstance(n_bins, str):
            n_bins = _dpqq_auto_bins(sizes, alpha, epsilon, gamma)
        plan = _paper_plan(sizes, alpha, epsilon, int(n_bins), gamma, c)
    if plan is None:
        _infeasible(sizes, alpha, epsilon, n_bins, c, rule)
    plan["n_byzantine"] = c
    return tuple(plan.items())


class _Pair(NamedTuple):
    """A gamma's certified pair, shaped as the ``c = 0`` search's selection
    where :func:`~._plan._beats` reads it (``best[2].k``)."""

    local_ranks: tuple[int, ...]
    k: int
    lower: float


def _paper_plan(sizes, alpha, epsilon, n_bins, gamma, c):
    m = len(sizes)
    equal = len(set(sizes)) == 1
    grid = GAMMA_GRID if isinstance(gamma, str) else (float(gamma),)
    n_total = sum(sizes)
    sizes_array = np.asarray(sizes)
    best = None  # (score, gamma, _Pair, correction, corrected ranks)
    planned = set()  # the corrections of the gammas planned (equal sizes)
    corrections = [dp_qq_local_correction(epsilon, n_bins, g, alpha, m) for g in grid]
    coarse = None if equal or not _USE_BOUNDS else CoarseBounds(sizes, c)
    for index, g in enumerate(grid):
        correction = corrections[index]
        if correction >= max(sizes):
            continue
        tau = (1.0 - alpha) / (1.0 - g * alpha)
        # Pruning (the plan is unchanged): a certified pair (l, r + c) of
        # this gamma has score M(l + l_cor, r + c) >= M(l, r + c) + gain
        # (gain = 1/(N + 1) when l_cor >= 1: every client value moves up a
        # rank, or to +inf) and M(l, r + c) >= M_H(l, r) >= L_c(r) >= tau -
        # 1e-10 for any honest set H (the (r + c)-th smallest of all m
        # values is at least the r-th smallest of H's). So a gamma with tau
        # + gain - 3e-10 >= the best score cannot win (a win needs a score
        # below best - 1e-10), and its selection is skipped.
        gain = 1.0 / (n_total + 1) if correction >= 1 else 0.0
        if best is not None and tau + gain - 3e-10 >= best[0]:
            continue
        if coarse is not None and best is not None:  # unequal, bounds on
            # Riemann bounds first (coarse, then fine when close), the
            # selection of one honest set last: each is a lower bound on the
            # score, the cheaper ones usually enough.
            taus = [(1.0 - alpha) / (1.0 - h * alpha) for h in grid]
            if coarse.bound(index, taus, corrections, best[0]) - 3e-10 >= best[0]:
                continue
            bound = _unequal_score_bound(sizes, tau, correction, c)
            if bound - 3e-10 >= best[0]:
                continue
        if equal and correction in planned and _USE_BOUNDS:
            # An earlier gamma g' had this correction (they are contiguous
            # in the grid: l_cor decreases in gamma). Its tau is smaller, so
            # every cell passing for this gamma passed for g' (the same
            # computed values, a lower threshold): r(l) >= r'(l) for every
            # l, over the same l <= n - l_cor, and this gamma's score, the
            # computed M_m(l + l_cor, r(l) + c) at its best step, is at
            # least M_m(l + l_cor, r'(l) + c) >= score(g') (the minimum over
            # l), or there is no pair if g' had none. After g', best <=
            # score(g') + 1e-10 (it won, or did not beat the best), so this
            # gamma cannot beat the best (a win needs < best - 1e-10).
            continue
        planned.add(correction)
        if equal:
            found = _equal_best(
                m, sizes[0], tau - _FEASIBILITY_TOL, correction, c, _TIE
            )
            if found is None:
                continue
            l, r, _ = found
            pair = _Pair((l,) * m, r + c, _equal_cell(m - c, sizes[0], l, r))
        else:
            # The pair's ranks are A.1's or their clipped ones, with k at
            # least the floor: a correction that leaves fewer than floor + c
            # of the clipped ranks finite leaves too few of either (below).
            if _USE_BOUNDS:
                floor = fixed_k_floor(sizes, 1.0 - tau, c)
                clipped = np.array(_fixed_ranks(sizes, 1.0 - tau, True))
                finite = int(np.count_nonzero(clipped + correction <= sizes_array))
                if floor is None or finite < floor + c:
                    continue
            found = fixed_certified_pair(sizes, 1.0 - tau, c)
            if found is None:
                continue
            pair = _Pair(*found)
        ranks = tuple(r + correction for r in pair.local_ranks)
        if sum(r <= n for r, n in zip(ranks, sizes, strict=True)) < pair.k + c:
            continue  # c dishonest +inf among the active ones: +inf threshold
        score = _qq_score(sizes, ranks, pair.k)
        # As in the c = 0 search: a score within 1e-12 of the tie line is
        # compared again on the reference quadrature's values.
        if _beats(sizes, score, ranks, pair.k, best):
            best = (score, g, pair, correction, ranks)
    if best is None:
        return None
    score, g, pair, correction, ranks = best
    levels = tuple(
        max(r / n, 0.5) if r <= n else math.inf
        for r, n in zip(ranks, sizes, strict=True)
    )
    return _feasible_plan(
        (pair.local_ranks, pair.k, levels, score, (1.0 - g * alpha) * pair.lower),
        gamma=g,
        correction=correction,
        public=(n_bins, epsilon, "paper", "quantile"),
    )


def _unequal_score_bound(sizes, tau, correction, c):
    """A lower bound on the score of a gamma (unequal sizes), or ``-inf``.

    The gamma's certified pair keeps Appendix A.1's ranks ``l`` at level
    ``tau``, or their clipped ``min(l_j, n_j)`` when A.1 has no certified
    ``k``, with ``k = r + c`` and ``L_c(r) >= tau - 1e-10``. For any fixed
    honest set ``H0``, ``L_c(r) <= M_H0(l, r)`` (``L_c`` takes the worst
    set at every point of its integral), so ``r`` passes the ``c = 0`` rule
    of the clients of ``H0`` alone: ``r`` is at least the ``k`` of
    :func:`~skfedcp.calibrators.select_qq_ranks` on their sizes (the same
    ranks), asked 1e-9 below ``tau`` (the margin covers both integrals'
    rounding, ~1e-13). The score ``M(l + l_cor, r + c)`` increases in ``r``:
    it is at least its value there. When some A.1 rank exceeds its size
    either ranks may be the pair's: the smaller of both bounds. Any ``H0``
    gives a valid bound; the one kept leaves out the ``c`` clients least
    likely to fall below ``tau`` (smallest ``p_j(tau)``, 0 for a client
    sending ``+inf``), about the worst set where the integrand drops, so the
    bound is usually the score itself, at about a third of the cost of the
    certified selection.
    """
    ranks = tuple(conformal_rank(n, 1.0 - tau) for n in sizes)
    bound = _score_bound_at(sizes, ranks, tau, correction, c, False)
    if any(l > n for l, n in zip(ranks, sizes, strict=True)):
        clipped = tuple(min(l, n) for l, n in zip(ranks, sizes, strict=True))
        bound = min(bound, _score_bound_at(sizes, clipped, tau, correction, c, True))
    return bound


def _score_bound_at(sizes, ranks, tau, correction, c, clip):
    """:func:`_unequal_score_bound` for one choice of the pair's ranks."""
    l_arr, n_arr = np.array(ranks, dtype=np.float64), np.array(sizes, dtype=np.float64)
    active = l_arr <= n_arr
    p = np.zeros(len(sizes))
    p[active] = special.betainc(l_arr[active], n_arr[active] - l_arr[active] + 1.0, tau)
    keep = np.sort(np.argsort(p, kind="stable")[c:])
    sel = select_qq_ranks(
        tuple(sizes[j] for j in keep),
        (1.0 - tau) + 1e-9,
        local_rank="fixed",
        clip_local_rank=clip,
    )
    if not sel.feasible or tuple(map(int, sel.local_ranks)) != tuple(
        ranks[j] for j in keep
    ):
        return -math.inf  # (or a rank moved with the 1e-9)
    return _qq_score(sizes, tuple(l + correction for l in ranks), sel.k + c)


def _feasible_plan(chosen, *, gamma, correction, public):
    """The plan dict of both rules (the keys of the ``c = 0`` plans)."""
    local_ranks, k, levels, score, lower = chosen
    n_bins, epsilon, rule, utility = public
    return {
        "feasible": True,
        "gamma": gamma,
        "local_ranks": local_ranks,
        "k": k,
        "correction": correction,
        "levels": levels,
        "score": score,
        "coverage_lower": lower,
        "n_bins": n_bins,
        "epsilon": epsilon,
        "rule": rule,
        "utility": utility,
    }


class _TooManyMixes(ValueError):
    """More honest size mixes than the tight rule enumerates."""


def _honest_mixes(sizes, c):
    """Every multiset of ``m - c`` sizes the federation can leave honest.

    Their number is the coefficient of ``x^c`` in ``prod_g (1 + x + ... +
    x^min(count_g, c))`` over the groups of equal sizes: it is counted first
    (``O(groups c)``, capped), and past ``_MAX_HONEST_MIXES`` the plan is
    refused before any enumeration. Otherwise only removals that can still
    add up to ``c`` are followed, so the work is ``O(mixes x groups)``, never
    the ``prod_g (min(count_g, c) + 1)`` of a plain product (2^m with ``m``
    distinct sizes and ``c = 1``).
    """
    groups = sorted(Counter(sizes).items())
    caps = [min(count, c) for _, count in groups]
    if _count_mixes(caps, c) > _MAX_HONEST_MIXES:
        raise _TooManyMixes(
            f"rule='tight' with n_byzantine={c} and unequal client sizes "
            f"{_describe(sizes)}: more than {_MAX_HONEST_MIXES} honest size "
            "mixes to check; use rule='paper' (a proved bound for any sizes)."
        )
    # room[g]: the most clients the groups g, g + 1, ... can lose together.
    room = np.cumsum(caps[::-1])[::-1].tolist() + [0]
    mixes = []

    def walk(g, left, removed):
        if g == len(groups):
            mix = zip(groups, removed, strict=True)
            mixes.append(tuple((n, count - d) for (n, count), d in mix if count > d))
            return
        for d in range(max(0, left - room[g + 1]), min(caps[g], left) + 1):
            walk(g + 1, left - d, (*removed, d))

    walk(0, c, ())
    return mixes


def _count_mixes(caps, c):
    """Coefficient of ``x^c`` in ``prod_g (1 + ... + x^caps[g])``, capped
    just above ``_MAX_HONEST_MIXES`` (the caller only compares it).

    With more than ``_MAX_HONEST_MIXES`` groups and ``1 <= c <`` groups,
    removing one client from each of ``c`` distinct groups already gives
    ``C(groups, c) >= groups`` mixes: no product is needed. Otherwise each
    factor is a sliding-window sum (a cumulative sum) over ``c + 1``
    coefficients; capping keeps them small and the answer exact up to the
    cap (a capped term makes both the true and the capped sum exceed it).
    """
    if len(caps) > _MAX_HONEST_MIXES and 1 <= c < len(caps):
        return _MAX_HONEST_MIXES + 1
    ways = np.zeros(c + 1, dtype=np.int64)
    ways[0] = 1
    for cap in caps:
        total = np.cumsum(ways)
        total[cap + 1 :] -= total[: c - cap] if cap < c else 0
        ways = np.minimum(total, _MAX_HONEST_MIXES + 1)
    return int(ways[c])


class _WorstBounds:
    """``min_H LB_H(q, r)`` over the honest mixes, as the bisection asks it."""

    def __init__(self, parts):
        self.parts = parts
        self._values = parts[0]._values  # every part sees the same levels

    def __call__(self, q, r):
        return min(part(q, r) for part in self.parts)

    def known(self, q, r):
        values = [part.known(q, r) for part in self.parts]
        return None if any(v is None for v in values) else min(values)

    def estimate(self, q, r):
        """A guess of the worst bound (aims the bisection, decides nothing)."""
        return min(part.estimate(q, r) for part in self.parts)


def _worst_bounds(sizes, epsilon, n_bins, utility, c):
    mixes = _honest_mixes(sizes, c)
    budget = _RowBudget()  # one row budget for every mix's bounds
    parts = [_TightBounds(mix, epsilon, n_bins, utility, budget) for mix in mixes]
    return parts[0] if len(parts) == 1 else _WorstBounds(parts)


def _tight_plan(sizes, alpha, epsilon, n_bins, utility, c):
    m = len(sizes)
    groups = tuple(sorted(Counter(sizes).items()))
    target = 1.0 - alpha + _BOUND_MARGIN
    bounds = _worst_bounds(sizes, epsilon, n_bins, utility, c)
    # k = r + c <= m - c: the bound of r honest values below the threshold.
    candidates = _tight_candidates(bounds, range(1, m - 2 * c + 1), target, c)
    if not candidates:
        return None
    _, q, k, value = _best_simulated(groups, candidates, epsilon, n_bins, utility)
    honest = _TightBounds(groups, epsilon, n_bins, utility)(q, k)
    ranks = tuple(min(n, math.ceil(q * n - 1e-9)) for n in sizes)
    return _feasible_plan(
        (ranks, k, (q,) * m, honest, value),
        gamma=None,
        correction=0,
        public=(n_bins, epsilon, "tight", utility),
    )


def dpqq_max_byzantine(sizes, alpha, plan):
    """Largest ``c`` whose certified bound for ``plan`` stays ``>= 1 - alpha``.

    ``plan`` is a feasible dp-qq plan (any ``n_byzantine``). ``rule="paper"``:
    the largest ``c`` with ``(1 - gamma alpha) min_H M_H(l, k - c) >= 1 -
    alpha``, i.e. :func:`~skfedcp.calibrators.max_byzantine` of the
    uncorrected ranks at ``tau_gamma``. ``rule="tight"``: the largest ``c``
    with ``min_H LB_H(q, k - c) >= 1 - alpha``; with unequal sizes the count
    stops before the first ``c`` with more than ``_MAX_HONEST_MIXES`` honest
    size mixes (the value returned is then certified, and a lower bound on
    the tolerance). ``-1`` when the plan is not certified even with honest
    clients. The bounds decrease in ``c``.
    """
    sizes = tuple(int(n) for n in sizes)
    k = int(plan["k"])
    if plan.get("rule", "paper") == "paper":
        g = plan["gamma"]
        target_alpha = alpha * (1.0 - g) / (1.0 - g * alpha)
        return max_byzantine(sizes, target_alpha, plan["local_ranks"], k)
    q = float(plan["levels"][0])
    target = 1.0 - alpha + _BOUND_MARGIN  # the planner's own test
    best = -1
    for c in range(k):
        try:
            bounds = _worst_bounds(
                sizes, plan["epsilon"], plan["n_bins"], plan["utility"], c
            )
        except _TooManyMixes:
            break
        if bounds(q, k - c) < target:
            break
        best = c
    return best
