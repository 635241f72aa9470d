"""QQ ranks certified against dishonest clients (issue 23, section 2)."""

# With c of the m clients dishonest (sending anything that passes
# validation, possibly chosen after seeing every honest message), the k-th
# smallest message T satisfies h_(k-c) <= T <= h_(k), where h_(1) <= ... are
# the honest messages (at most c of the k smallest values are dishonest, and
# the k smallest honest values are among all values).  So, for the honest set
# H (fixed before the data are drawn) and a test score exchangeable with the
# honest clients' scores,
#
#     M_H(l, k - c) <= P(S <= T) <= M_H(l, k)    (upper: continuous scores),
#
# M_H the exact QQ coverage of the clients in H alone.  The rule below
# certifies min over every H of size m - c of the lower end.  With
# p_j(t) = I_t(l_j, n_j - l_j + 1), M_H(l, r) = int_0^1 P(sum_{j in H} B_j(t)
# <= r - 1) dt, B_j(t) ~ Bernoulli(p_j(t)) independent; at each t the count
# is stochastically largest for the m - c largest p_j(t) (a coupling swap), so
#
#     min_H M_H(l, r) >= int_0^1 min_H P(X_H(t) <= r - 1) dt =: L(r),
#
# computed with H(t) = the m - c largest p_j(t) at every node.  Equal sizes
# and ranks: every H is the same, L is exact (the equal-size rule below uses
# qq_coverage directly; the staircase of _equal_steps).  The upper end is
# bounded the same way by the m - c smallest p_j(t).  How L is integrated,
# and why the rule only integrates a few ranks, is in _byzantine_bound.py;
# how max_byzantine reads a range of c from one count law per node, in
# _byzantine_max.py.  A fit needs only the ranks, k and L (byzantine_fit_plan);
# the upper bound and the all-honest coverage are computed when read.

from __future__ import annotations

import bisect
import functools
import math
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from ...utils._docstrings import fill_doc
from ...utils._validation import check_alpha
from ._byzantine_bound import certified_band, extreme_coverages, riemann_brackets
from ._byzantine_max import MAX_CLIENTS, max_byzantine_unequal
from ._coverage import _FEASIBILITY_TOL, _check_int, _check_sizes, qq_coverage
from ._coverage import _integrand as _qq_integrand
from ._selection import _conformal_ranks, _fixed_ranks

__all__ = [
    "ByzantineSelection",
    "byzantine_coverage_bounds",
    "max_byzantine",
    "select_byzantine_ranks",
]

_TIE = 1e-13
# A bracket this clear of a threshold decides like the quadrature would
# (qq_coverage is within ~1e-14 of the integral, _QUAD_OPTIONS).
_DECIDE = 1e-12
# Nodes of the equal-size brackets (:func:`_equal_bracket`), coarse first:
# most cells of a staircase walk are far from the threshold; a quadrature
# costs about as much as 2,000 nodes.
_BRACKET_NODES = (48, 192, 768)


class ByzantineSelection(NamedTuple):
    """Ranks certified against ``n_byzantine`` dishonest clients.

    Attributes
    ----------
    local_ranks : tuple of int
        Rank ``l_j`` each client sends (empty when infeasible).
    k : int or None
        Rank the server takes among the ``m`` messages.
    coverage : float
        Exact coverage ``M(l, k)`` when every client is honest.
    feasible : bool
        Whether a pair with ``k <= m - n_byzantine`` is certified.
    lower : float
        Certified coverage lower bound with ``n_byzantine`` dishonest
        clients (any score law), ``>= 1 - alpha`` when feasible.
    upper : float
        Coverage upper bound for continuous scores when the dishonest
        clients push the threshold up (``1.0`` when infeasible).
    """

    local_ranks: tuple[int, ...]
    k: int | None
    coverage: float
    feasible: bool
    lower: float
    upper: float


_INFEASIBLE = ByzantineSelection((), None, 1.0, False, 1.0, 1.0)


def _bounds(sizes, ranks, k, c):
    """``(lower, upper)`` for the pair ``(ranks, k)`` with ``c`` dishonest clients."""
    m = len(sizes)
    h = m - c
    if len(set(sizes)) == 1 and len(set(ranks)) == 1:  # every honest set alike
        n, l = sizes[0], ranks[0]

        def honest(r):
            return 1.0 if l > n else float(qq_coverage(h, n, l, r))

        lower = 0.0 if c >= k else honest(k - c)
        upper = 1.0 if k > h else honest(k)
        return lower, upper
    lower = 0.0 if c >= k else extreme_coverages(sizes, ranks, h, True, (k - c,))[0]
    upper = 1.0 if k > h else extreme_coverages(sizes, ranks, h, False, (k,), h)[0]
    return float(lower), float(upper)


def byzantine_coverage_bounds(
    n_per_client: ArrayLike, local_ranks: ArrayLike, k: int, n_byzantine: int
) -> tuple[float, float]:
    """Coverage bounds of the QQ pair ``(l_j, k)`` with dishonest clients.

    ``n_byzantine = c`` of the ``m`` clients may send any value that passes
    validation (chosen after seeing the honest messages); which clients are
    dishonest is fixed before the scores are drawn. Then the threshold lies
    between the ``(k - c)``-th and the ``k``-th smallest honest message.

    Parameters
    ----------
    n_per_client : array-like of int
        Calibration size ``n_j >= 1`` of each client.
    local_ranks : array-like of int
        Rank ``l_j >= 1`` each client sends (``l_j > n_j``: ``+inf``).
    k : int
        Rank in ``1..m`` the server takes.
    n_byzantine : int
        Number ``c >= 0`` of dishonest clients.

    Returns
    -------
    lower, upper : float
        ``lower`` (any score law) is at most the exact coverage of the honest
        clients at rank ``k - c``, for every honest set (``0`` when
        ``c >= k``); ``upper`` (continuous scores) at least their coverage at
        rank ``k`` (``1`` when ``k > m - c``: ``c`` clients sending ``+inf``
        make the threshold infinite). Exact with equal sizes and ranks; with
        unequal ones the bounds take the worst honest set at every point of
        the integral (see the user guide).

    Examples
    --------
    >>> lo, up = byzantine_coverage_bounds([10] * 20, [9] * 20, 16, 2)
    >>> round(lo, 6), round(up, 6)
    (0.900555, 0.929686)
    """
    sizes = _check_sizes(n_per_client)
    ranks = _check_ranks(local_ranks, sizes)
    m = len(sizes)
    k = _check_int(k, "k", 1, m)
    c = _check_int(n_byzantine, "n_byzantine", 0, m - 1)
    return _bounds(sizes, ranks, k, c)


def _check_ranks(local_ranks, sizes):
    """``local_ranks`` as a tuple of ints ``>= 1``, one per client."""
    ranks = tuple(int(r) for r in np.asarray(local_ranks, dtype=np.int64).ravel())
    if len(ranks) != len(sizes) or min(ranks, default=0) < 1:
        raise ValueError(
            "local_ranks must hold one rank >= 1 per client; got "
            f"{len(ranks)} ranks for {len(sizes)} clients."
        )
    return ranks


def _lower_passes(sizes, ranks, k, c, threshold):
    """``_bounds(sizes, ranks, k, c)[0] >= threshold``, without the upper bound.

    A rigorous bracket of the lower bound decides when it clears
    ``threshold`` by ``_DECIDE`` (both integrals are within ~1e-13 of
    theirs: the same answer); only the others are integrated.
    """
    if c >= k:
        return 0.0 >= threshold
    h, r = len(sizes) - c, k - c
    if len(set(sizes)) == 1 and len(set(ranks)) == 1:  # as in _bounds
        n, l = sizes[0], ranks[0]
        return 1.0 >= threshold if l > n else _equal_passes(h, n, l, r, threshold)
    for lower, upper in riemann_brackets(sizes, ranks, h, r):
        if lower >= threshold + _DECIDE:
            return True
        if upper < threshold - _DECIDE:
            return False
    return float(extreme_coverages(sizes, ranks, h, True, (r,))[0]) >= threshold


@fill_doc
def max_byzantine(
    n_per_client: ArrayLike, alpha: float, local_ranks: ArrayLike, k: int
) -> int:
    """Largest number of dishonest clients under which ``1 - alpha`` still holds.

    The largest ``c`` whose certified lower bound
    (:func:`byzantine_coverage_bounds`) is ``>= 1 - alpha`` (up to the
    ``1e-10`` feasibility tolerance of the rank selection). The bound
    decreases in ``c``, so every smaller number of dishonest clients is
    covered too. Against clients sending ``+inf`` the threshold stays finite
    only while ``c <= m - k``.

    Parameters
    ----------
    %(n_per_client)s
    %(alpha)s
    local_ranks : array-like of int
        The plan's rank ``l_j`` of each client.
    k : int
        The plan's server rank.

    Returns
    -------
    c : int
        ``-1`` when the pair is not valid even with honest clients.

    Examples
    --------
    >>> max_byzantine([10] * 20, 0.1, [9] * 20, 16)
    2
    """
    alpha = check_alpha(alpha)
    threshold = (1.0 - alpha) - _FEASIBILITY_TOL
    sizes = _check_sizes(n_per_client)
    ranks = _check_ranks(local_ranks, sizes)
    m = len(sizes)
    k = _check_int(k, "k", 1, m)

    def ok(c):
        return _lower_passes(sizes, ranks, k, c, threshold)

    active = sum(l <= n for n, l in zip(sizes, ranks, strict=True))
    if (len(set(sizes)) > 1 or len(set(ranks)) > 1) and 0 < active <= MAX_CLIENTS:
        # Every c of a range from one count law per node (_byzantine_max).
        return max_byzantine_unequal(sizes, ranks, k, threshold, ok, _DECIDE)
    if not ok(0):
        return -1
    # ok(c) fails from some c on (c = k gives a zero bound): the answer is the
    # number of c in 1..k-1 before the first failure, found by bisection.
    return bisect.bisect_left(range(1, k), True, key=lambda c: not ok(c))


@functools.lru_cache(maxsize=1 << 16)
def _equal_cell(h, n, l, r):
    """``M_h(l, r)`` of ``h`` clients of ``n`` scores (cached: the staircases
    of neighbouring targets, e.g. the gammas of a dp-qq plan, share cells)."""
    return float(qq_coverage(h, n, l, r))


@functools.lru_cache(maxsize=1 << 16)
def _equal_bracket(h, n, l, r, n_nodes=_BRACKET_NODES[-1]):
    """Rigorous ``(lower, upper)`` on ``M_h(l, r)``: ~1e-4 wide on 192 nodes
    (~50 us), ~4e-4 on 48.

    ``M_h(l, r) = int_0^1 f`` with ``f(t) = P(Bin(h, G(t)) <= r - 1)``,
    ``G(t) = I_t(l, n - l + 1)``: ``f`` decreases in ``t``, so its right and
    left Riemann sums on any nodes from 0 to 1 bound the integral (the
    1e-13 covers the rounding of ``betainc`` and of the sums). The nodes
    ``t_c + s sinh(u)`` (``u`` uniform) crowd where ``f`` drops: ``G(t_c)``
    is the level ``(r - 1/2) / h`` and ``s`` the width, in ``t``, of one
    binomial standard deviation around it. Where they are placed changes
    only the width of the bracket, never its validity.
    """
    p_c = (r - 0.5) / h
    sd = math.sqrt(p_c * (1.0 - p_c) / h)
    levels = np.clip([p_c - sd, p_c, p_c + sd], 1e-300, 1.0 - 1e-16)
    below, t_c, above = special.betaincinv(l, n - l + 1, levels)
    s = (above - below) / 2.0
    if not s > 0.0:
        s = 1e-3
    u = np.linspace(np.arcsinh(-t_c / s), np.arcsinh((1.0 - t_c) / s), n_nodes)
    t = np.clip(t_c + s * np.sinh(u), 0.0, 1.0)
    t[0], t[-1] = 0.0, 1.0
    f = _qq_integrand(h, n, l, r, t)
    width = np.diff(t)
    return float(f[1:] @ width) - 1e-13, float(f[:-1] @ width) + 1e-13


def _equal_passes(h, n, l, r, threshold):
    """``_equal_cell(h, n, l, r) >= threshold``, read from the bracket when
    it clears ``threshold`` by ``_DECIDE`` (the quadrature is within ~1e-14
    of the integral: the same answer), else from the quadrature."""
    for n_nodes in _BRACKET_NODES:
        lower, upper = _equal_bracket(h, n, l, r, n_nodes)
        if lower >= threshold + _DECIDE:
            return True
        if upper < threshold - _DECIDE:
            return False
    return _equal_cell(h, n, l, r) >= threshold


def _first_passing(lo, hi, passes):
    """The smallest ``x`` in ``lo..hi`` with ``passes(x)`` (monotone: False
    then True), or ``None``; galloping from ``lo``, then bisection."""
    if lo > hi:
        return None
    step, below = 1, lo - 1
    while True:
        x = min(below + step, hi)
        if passes(x):
            return bisect.bisect_left(range(below + 1, x), True, key=passes) + below + 1
        if x == hi:
            return None
        below, step = x, step * 2


def _equal_steps(h, n, threshold, l_max, r_max):
    """The first ``l`` of each step of the staircase ``r(l)``, with its ``r``.

    ``r(l)`` is the smallest ``r <= r_max`` with ``M_h(l, r) >= threshold``,
    for the ``l <= l_max`` that have one. ``M_h`` increases in ``l`` and
    ``r``, so ``r(l)`` is non-increasing in ``l`` and the ``l`` with one are
    a suffix: the walk finds the first by galloping, lowers ``r`` one step
    at a time and jumps (galloping again) to the first ``l`` passing at
    ``r - 1``: ``O(r_max + steps log n)`` cells instead of the ``n r_max``
    of a table (and of a walk over every ``l``).
    """

    def cell(l, r):
        return _equal_passes(h, n, l, r, threshold)

    l = _first_passing(1, l_max, lambda x: cell(x, r_max))
    steps: list[tuple[int, int]] = []
    r = r_max
    while l is not None:
        while r > 1 and cell(l, r - 1):
            r -= 1
        steps.append((l, r))
        if r == 1:
            break
        l = _first_passing(l + 1, l_max, lambda x, r=r: cell(x, r - 1))
        r -= 1
    return steps


def _equal_best(m, n, threshold, correction, c, tie):
    """Equal sizes: the certified ``(l, r)`` of least all-honest coverage.

    Every honest set is alike: the certified bound of ``(l, k = r + c)`` is
    ``M_{m - c}(l, r)``, increasing in ``l`` and ``r``. For each ``l <= n -
    correction``, the smallest ``r <= m - 2 c`` with ``M_{m - c}(l, r) >=
    threshold`` (``k <= m - c``: ``+inf`` senders cannot blow the threshold
    up); among these pairs, the one with the smallest all-honest coverage
    ``M_m(l + correction, r + c)`` (of the ranks the clients will use),
    ties within ``tie`` to the larger ``l``. ``None`` when no pair is
    certified.

    The smallest certified ``r`` is non-increasing in ``l``: only the first
    ``l`` of each step of that staircase can win (at the same ``r`` a larger
    ``l`` raises ``M_m`` by at least ``1 / (m n + 1)``, far above the tie
    tolerance), and the walk (:func:`_equal_steps`) reads only the
    staircase's cells. Each step's ``M_m`` is bracketed first
    (:func:`_equal_bracket`, finer and finer); only the steps whose lower
    end can come within ``tie`` of the smallest upper end are kept (the
    others are above the minimum by more than ``tie`` whatever the
    quadrature's rounding, and the step of the minimum is always kept), and
    only those left are integrated: the minimum and the last step within
    ``tie`` of it are those of every step's exact value.
    """
    h, r_max = m - c, m - 2 * c
    if r_max < 1:
        return None
    steps = _equal_steps(h, n, threshold, n - correction, r_max)
    if not steps:
        return None
    cells = [(m, n, l + correction, r + c) for l, r in steps]
    near = list(range(len(cells)))
    for n_nodes in _BRACKET_NODES[1:]:
        if len(near) == 1:
            break
        brackets = {i: _equal_bracket(*cells[i], n_nodes) for i in near}
        cap = min(upper for _, upper in brackets.values()) + tie + 2.0 * _DECIDE
        near = [i for i in near if brackets[i][0] <= cap]
    benign = {i: _equal_cell(*cells[i]) for i in near}
    low = min(benign.values())
    best = max(i for i, value in benign.items() if value <= low + tie)
    return (*steps[best], benign[best])


def _select_equal(m, n, alpha, c):
    """Equal sizes: every common ``l`` with its smallest certified ``k``, the
    pair of least all-honest coverage winning (:func:`_equal_best`)."""
    found = _equal_best(m, n, (1.0 - alpha) - _FEASIBILITY_TOL, 0, c, _TIE)
    if found is None:
        return None
    l, r, benign = found
    h, k = m - c, r + c
    return ByzantineSelection(
        (l,) * m, k, benign, True, _equal_cell(h, n, l, r), _equal_cell(h, n, l, k)
    )


def _certified_k(sizes, ranks, alpha, c):
    """Fixed ranks: ``(k, lower)`` of the smallest certified ``k <= m - c``.

    The bound ``L(r)`` (``r = k - c``) increases in ``r``. One Riemann pass
    brackets every ``r`` rigorously (:func:`certified_band`): below the
    first ``r`` whose upper sum reaches the target none can pass, from the
    first whose lower sum does every one passes; only the ranks between are
    integrated. ``None`` when no ``k`` is certified.
    """
    threshold = (1.0 - alpha) - _FEASIBILITY_TOL
    m = len(sizes)
    h, r_max = m - c, m - 2 * c
    if r_max < 1:
        return None
    band = certified_band(sizes, ranks, h, threshold, r_max)
    if band is None:
        return None
    band = tuple(range(band[0], band[1] + 1))
    lows = extreme_coverages(sizes, ranks, h, True, band)
    passing = np.flatnonzero(lows >= threshold)
    if passing.size == 0:
        return None
    return band[int(passing[0])] + c, float(lows[int(passing[0])])


def fixed_k_floor(sizes, alpha, c):
    """A lower bound on the ``k`` of :func:`fixed_certified_pair`, or
    ``None`` when it is infeasible, from Riemann brackets only.

    Every ``r`` below the band of :func:`certified_band` fails, for Appendix
    A.1's ranks and for their clipped ones (the pair's ranks are one of
    them): ``k = r + c`` is at least ``c`` plus the smaller band start.
    """
    threshold = (1.0 - alpha) - _FEASIBILITY_TOL
    m = len(sizes)
    h, r_max = m - c, m - 2 * c
    if r_max < 1:
        return None
    choices = {_fixed_ranks(sizes, alpha, False), _fixed_ranks(sizes, alpha, True)}
    starts = [certified_band(sizes, l, h, threshold, r_max) for l in choices]
    starts = [band[0] for band in starts if band is not None]
    return min(starts) + c if starts else None


def _clipped(ranks, sizes):
    return tuple(min(l, n) for l, n in zip(ranks, sizes, strict=True))


def _fixed_pair(sizes, ranks, alpha, c, retry_clipped):
    """Fixed ranks: ``(ranks, k, lower)`` of the smallest certified ``k``,
    with ``retry_clipped`` the clipped ranks when these have none; ``None``
    when infeasible."""
    found = _certified_k(sizes, ranks, alpha, c)
    if found is None and retry_clipped:
        ranks = _clipped(ranks, sizes)
        found = _certified_k(sizes, ranks, alpha, c)
    return None if found is None else (ranks, *found)


@functools.lru_cache(maxsize=256)
def fixed_certified_pair(sizes, alpha, c):
    """``(ranks, k, lower)`` of ``select_byzantine_ranks(sizes, alpha, c,
    local_rank="fixed")`` for unequal sizes, or ``None`` when infeasible.

    The same ranks (Appendix A.1, clipped when A.1 has no certified ``k``),
    ``k`` and certified bound, without the upper bound and the all-honest
    coverage (dp-qq's gamma search reads neither: they cost as much again).
    """
    ranks = _conformal_ranks(sizes, alpha)
    return _fixed_pair(sizes, ranks, alpha, c, True)


class ByzantinePlan(NamedTuple):
    """The ranks, ``k`` and certified bound of a plan, without the bounds a
    fit does not need (the all-honest coverage and the upper bound).

    What :func:`byzantine_fit_plan` returns when those are left for later:
    the same ``local_ranks``, ``k`` and ``lower`` (the same bits) as
    :func:`select_byzantine_ranks`, which completes them.
    """

    local_ranks: tuple[int, ...]
    k: int | None
    feasible: bool
    lower: float


@functools.lru_cache(maxsize=128)
def _fit_plan_cached(sizes, alpha, c, local_rank, clip):
    equal = len(set(sizes)) == 1
    if local_rank in ("paper", "auto", "joint"):
        if equal:
            result = _select_equal(len(sizes), sizes[0], alpha, c)
            return _INFEASIBLE if result is None else result
        if local_rank != "paper":
            raise ValueError(
                f"n_byzantine > 0 with unequal client sizes needs local_rank="
                f'"paper", "fixed" or an int; got {local_rank!r}.'
            )
        local_rank = "fixed"
    if local_rank == "fixed":
        ranks = _conformal_ranks(sizes, alpha)
    else:
        ranks = (int(local_rank),) * len(sizes)
    if clip:
        ranks = _clipped(ranks, sizes)
    # A.1 without a certified k (e.g. some l_j > n_j at a small alpha): its
    # clipped ranks.
    found = _fixed_pair(sizes, ranks, alpha, c, not clip and local_rank == "fixed")
    if found is None:
        return _INFEASIBLE
    ranks, k, lower = found
    return ByzantinePlan(ranks, k, True, lower)


@functools.lru_cache(maxsize=128)
def _select_cached(sizes, alpha, c, local_rank, clip):
    plan = _fit_plan_cached(sizes, alpha, c, local_rank, clip)
    if isinstance(plan, ByzantineSelection):
        return plan
    ranks, k, _, lower = plan
    m = len(sizes)
    # Both trimmed from the grid of the certified bound (its honest sets).
    upper = float(extreme_coverages(sizes, ranks, m - c, False, (k,), m - c)[0])
    benign = float(extreme_coverages(sizes, ranks, m, True, (k,), m - c)[0])
    return ByzantineSelection(ranks, k, benign, True, lower, upper)


def _checked(n_per_client, alpha, n_byzantine, local_rank, clip_local_rank):
    """The arguments of :func:`select_byzantine_ranks`, checked: the key of
    its cache."""
    sizes = _check_sizes(n_per_client)
    alpha = check_alpha(alpha)
    c = _check_int(n_byzantine, "n_byzantine", 1)
    if not isinstance(local_rank, str):
        local_rank = _check_int(local_rank, "local_rank")
    return sizes, alpha, c, local_rank, bool(clip_local_rank)


def byzantine_fit_plan(
    n_per_client, alpha, n_byzantine, *, local_rank="paper", clip_local_rank=False
):
    """:func:`select_byzantine_ranks` as a fit needs it.

    The same plan, but where the ranks come from a rule (unequal sizes, an
    int or ``"fixed"``) a :class:`ByzantinePlan`: the ranks, ``k`` and the
    certified ``lower`` the selection computes first, without its upper
    bound and all-honest coverage (at 1,000 clients they cost twice the
    rest). A fitted calibrator computes those when they are read, from
    :func:`select_byzantine_ranks` (whose ranks, ``k`` and ``lower`` are
    these, cached). Equal sizes with a searched ``l`` and infeasible plans:
    the full :class:`ByzantineSelection` itself.
    """
    key = _checked(n_per_client, alpha, n_byzantine, local_rank, clip_local_rank)
    return _fit_plan_cached(*key)


def select_byzantine_ranks(
    n_per_client: ArrayLike,
    alpha: float,
    n_byzantine: int,
    *,
    local_rank: Literal["paper", "auto", "fixed", "joint"] | int = "paper",
    clip_local_rank: bool = False,
) -> ByzantineSelection:
    """QQ ranks whose coverage stays ``>= 1 - alpha`` with dishonest clients.

    Chooses ``(l_j, k)`` with ``n_byzantine < k <= m - n_byzantine`` such
    that the certified lower bound of :func:`byzantine_coverage_bounds` is
    ``>= 1 - alpha``. Equal sizes (``"paper"``, ``"auto"``, ``"joint"``):
    every common ``l`` with its smallest certified ``k``, the pair of least
    all-honest coverage winning. Otherwise the ranks of the rule (Appendix
    A.1 for ``"paper"`` / ``"fixed"``, an int for all) and the smallest
    certified ``k`` (A.1's clipped ranks when A.1 has none, with ``"paper"``
    and ``"fixed"``).

    Parameters
    ----------
    n_per_client : array-like of int
        Calibration size ``n_j >= 1`` of each client.
    alpha : float
        Target miscoverage in (0, 1).
    n_byzantine : int
        Number ``c >= 1`` of dishonest clients to tolerate.
    local_rank : "paper", "auto", "fixed", "joint" or int, default="paper"
        The rank family (see :class:`QuantileOfQuantilesCalibrator`);
        ``"auto"`` and ``"joint"`` need equal sizes here.
    clip_local_rank : bool, default=False
        Use ``min(l_j, n_j)``.

    Returns
    -------
    selection : ByzantineSelection
        Infeasible (threshold ``+inf``) when no pair is certified.

    Examples
    --------
    >>> sel = select_byzantine_ranks([10] * 20, 0.1, 2)
    >>> sel.local_ranks[0], sel.k, round(sel.lower, 4), round(sel.coverage, 4)
    (9, 16, 0.9006, 0.9072)
    """
    key = _checked(n_per_client, alpha, n_byzantine, local_rank, clip_local_rank)
    return _select_cached(*key)
