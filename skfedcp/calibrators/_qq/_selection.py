"""Choice of the QQ ranks (l*, k*): the smallest exact coverage >= 1 - alpha."""

# Selection.  The coverage is strictly increasing in l and in k, by at least
# 1/(N + 1) per step: M = E[R]/(N + 1) with R the pooled rank of the
# estimate, and R grows by at least one when l or k does.  The optimum is
# therefore one of the "staircase" pairs (l, k_min(l)), k_min(l) the smallest
# feasible k, which is non-increasing in l; and within a run of equal k_min only
# the smallest l can win.  `select_qq_ranks` finds them with few evaluations:
#
# 1. feasibility: some pair is valid iff 1 - alpha <= M(n, m) = N / (N + 1);
# 2. l_min, the smallest l with M(l, m) >= 1 - alpha, by bisection on l;
# 3. k_min(l) for every l in [l_min, n] by a divide-and-conquer over l: the
#    two ends first, then the midpoints of the computed neighbours, whose
#    k_min bracket the unknown one (k_min(b) - 1 < k_min(l) <= k_min(a) for
#    a < l < b).  Every level is one vectorised bisection over its brackets,
#    and a segment whose ends agree is filled without any evaluation;
# 4. the candidates (first l of each run of equal k_min) are compared.
#
# Every M in steps 2-4 comes first from a vectorised *screen*: the window
# [t_lo, t_hi] is cut into 12 panels at the quantiles 1e-17, 1e-11, 1e-6, 1e-3,
# 0.03, 0.2, 0.5, 0.8, ... of U_(l,k) (where the integrand is smooth on the
# panel's own scale) and each panel gets a 10-node Gauss-Legendre rule.  Its
# error against the "quad" and "exact" back-ends is below 1e-14 on every grid
# tried (m, n up to 2e4 and 1e5).  A decision is delegated to "quad" whenever
# the screen lands within 1e-11 of the feasibility threshold, and all
# candidates within 1e-11 of the screened minimum are re-evaluated with "quad"
# before the tie rule is applied; the coverage returned is the "quad" value.
# At m = n = 1000 this costs a few hundred screened pairs and a handful of
# quad calls (see benchmarks/bench_qq_selection.py), against ~n + m quad
# calls for a plain staircase walk.
#
# Unequal sizes (or fixed ranks). Only k is searched. First (issue 21),
# _select_unequal_sinh: a guess k_g = ceil(mu(1 - alpha) + 1/2), mu(t) the
# expected count of clients below t (with many clients of few sizes, see
# _NORMAL_GUESS_MIN, the first k whose normal estimate reaches 1 - alpha),
# and its neighbours
# k_g - 2..k_g + 2 get M
# from one Poisson-binomial pass on the nodes of a sinh-mapped Gauss-Legendre
# rule (_batch.py: 32 and 48 nodes per side of the step, a panel of its own
# for a client much narrower than the others, the two rules agreeing to
# 1e-12); the window moves until it holds the k with M(k) >= threshold > M(k -
# 1) (M increases in k); a value within _SCREEN_MARGIN of the threshold is
# re-decided with the composite rule below, as the bisection does. The passes
# run on canonical nodes (_batch._canonical_features, 40 and 48 nodes per
# side), so the folds, groups and passes of nearby profiles share each
# client's betainc values and the count's law (_poisbin's caches); the close
# decisions keep the profile's own nodes (the values agree to ~1e-15,
# tests/calibrators/qq/test_qq_canonical_nodes.py). If the rule
# does not converge, the search below runs unchanged. From _TREE_MIN_CLIENTS
# clients on (the product tree of _poisbin), a normal approximation guesses
# the first valid k and coarse / accurate values confirm it (see
# _select_unequal). With fewer clients, while the DP is small (m x distinct
# groups <= 12,000, e.g. 100 clients of distinct sizes), one Poisson-binomial
# DP per quadrature pass gives M for every k at once (composite Gauss-Legendre
# over the union of the k-windows, panels doubled until every k agrees to
# 5e-14); the first valid k is read off, and only a value within 1e-11 of the
# threshold is re-evaluated with "quad". Beyond, or if that quadrature does
# not settle, k is bisected: the screen is a composite 16-node Gauss-Legendre
# rule on a window trimmed by monotonicity, the panel count doubled until two
# passes agree, with every node pushed through the DP at once; close decisions
# and the returned coverage use the batch rule of _coverage_unequal_batch
# (panels doubled to 5e-14 agreement, "quad" only if that fails).
#
# A fit (issue 21, _certified._fixed_rank_plan): the calibrator needs the
# ranks and k,
# not M itself.  With A.1's ranks and unequal sizes k is first decided by
# _certified._certified_k: rigorous lower and upper bounds of M(k) (monotone
# Riemann sums of the decreasing integrand on canonical sinh nodes, narrowed
# by a bound on its slope), k taken
# only when the threshold lies 1e-9 outside them (then the search above,
# whose values are far more accurate than that, returns the same k), else
# that search runs.  The exact coverage is the search's value, computed when
# first read (_calibrator._LazyCoverage): the same function of the same
# arguments, the same bits.  Checked against the search on random profiles
# (tests/calibrators/qq/test_qq_certified.py, test_qq_fit_plan.py) and,
# fitted plans and coverages, against the previous code on 1,920 random
# profiles (1-1,000 rows, 2-1,000 clients, "fixed", "paper" and "auto").
#
# Unequal sizes, local_rank="joint": one common level c and k (see the
# comment of _joint.py); local_rank="auto": that search, restricted
# to the k near A.1's (the level search of _levels.py) or replaced by A.1 as
# the work grows (_select_auto_unequal).

from __future__ import annotations

import functools
import math
from numbers import Real
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from ...utils._docstrings import fill_doc
from ...utils._quantile import _CEIL_EPS, float_safe_ceil
from ...utils._validation import check_alpha
from ._batch import (
    _coverage_unequal_all_k,
    _coverage_unequal_batch,
    _coverage_unequal_sinh,
    _coverage_unequal_sinh_at,
    _NormalEstimate,
    _sinh_ks,
    _undecided,
)
from ._coverage import (
    _FEASIBILITY_TOL,
    _TIE_TOL,
    _active_groups,
    _check_int,
    _check_sizes,
    _conditional_tails,
    _coverage_quad,
    _coverage_screen,
    _coverage_unequal_certified,
    _coverage_unequal_screen,
)
from ._joint import _select_joint
from ._poisbin import _uses_tree

__all__ = ["QQSelection", "select_qq_ranks"]

# A screened value this close to a decision is re-evaluated with "quad".
_SCREEN_MARGIN = 1e-11
# Slack on the exact training-conditional tail, tail <= delta + _TAIL_TOL.
_TAIL_TOL = 1e-12
# Fixed ranks: one Poisson-binomial DP gives M for every k at once
# (_coverage_unequal_all_k) instead of a bisection on k while the DP is small,
# m_active x (number of distinct (n_j, l_j)) <= this.
_ALL_K_MAX_WORK = 12_000
# local_rank="auto" with unequal sizes (see _select_auto_unequal): the joint
# search over every (c, k) while m x (distinct sizes) <= _JOINT_MAX_WORK
# (about 0.1-0.6 s), the level search at A.1's k up to _LEVEL_MAX_WORK.
_JOINT_MAX_WORK = 400
_LEVEL_MAX_WORK = 12_000
# The level search runs for the k within this distance of A.1's k.
_LEVEL_K_SPAN = 4
# From this many clients, at least four per distinct (size, rank), the sinh
# search starts from the normal estimate's k (_normal_guess) instead of the
# expected count's: one pass there costs ~0.3 s and up (it grows with the
# clients), the estimate a few hundredths (it grows with the groups).
_NORMAL_GUESS_MIN = 5000
# "auto" certifies the pair it returns (exact-degree quadrature) up to this N.
_CERTIFY_MAX_N = 20_000


class QQSelection(NamedTuple):
    """Ranks chosen for FedCP-QQ and their exact coverage.

    Attributes
    ----------
    local_ranks : tuple of int
        Rank ``l_j`` each client sends (one entry per client, in the order of
        ``n_per_client``); empty when infeasible.
    k : int or None
        Rank the server takes among the ``m`` client values.
    coverage : float
        Exact coverage ``M`` of the pair (1.0 when infeasible: the threshold
        is ``+inf``).
    feasible : bool
        Whether a pair with a finite threshold reaches the target.
    """

    local_ranks: tuple[int, ...]
    k: int | None
    coverage: float
    feasible: bool


_INFEASIBLE = QQSelection(local_ranks=(), k=None, coverage=1.0, feasible=False)


# --------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------
class _EqualSizeCoverage:
    """M(l, k) for one (m, n): screened values, "quad" near decisions."""

    def __init__(self, m, n, threshold):
        self.m, self.n, self.threshold = m, n, threshold
        self._screened = {}
        self._accurate = {}

    def screen(self, ls, ks):
        ls = np.asarray(ls, dtype=np.int64)
        ks = np.asarray(ks, dtype=np.int64)
        out = np.empty(ls.shape[0])
        todo = []
        for i, key in enumerate(zip(ls.tolist(), ks.tolist(), strict=True)):
            value = self._screened.get(key)
            if value is None:
                todo.append(i)
            else:
                out[i] = value
        if todo:
            rows = np.asarray(todo)
            values = _coverage_screen(self.m, self.n, ls[rows], ks[rows])
            out[rows] = values
            for i, v in zip(rows.tolist(), values.tolist(), strict=True):
                self._screened[(int(ls[i]), int(ks[i]))] = v
        return out

    def accurate(self, l, k):
        key = (int(l), int(k))
        if key not in self._accurate:
            self._accurate[key] = _coverage_quad(self.m, self.n, *key)
        return self._accurate[key]

    def feasible(self, ls, ks):
        values = self.screen(ls, ks)
        close = np.abs(values - self.threshold) < _SCREEN_MARGIN
        for i in np.flatnonzero(close):
            values[i] = self.accurate(ls[i], ks[i])
        return values >= self.threshold

    def best(self, ls, ks):
        """Candidate with the smallest M; ties: largest l, then smallest k."""
        ls = np.asarray(ls, dtype=np.int64)
        ks = np.asarray(ks, dtype=np.int64)
        values = self.screen(ls, ks)
        near = np.flatnonzero(values <= values.min() + _SCREEN_MARGIN)
        exact = [(self.accurate(ls[i], ks[i]), int(ls[i]), int(ks[i])) for i in near]
        lowest = min(v for v, _, _ in exact)
        tied = [(-l, k, v) for v, l, k in exact if v <= lowest + _TIE_TOL]
        neg_l, k, value = min(tied)
        return -neg_l, k, value


def _bisect_k(is_feasible, ls, lo, hi):
    """Vectorised bisection: smallest feasible k in (lo, hi] for each l.

    ``hi`` must be feasible (or a sentinel) and ``lo`` infeasible.
    """
    lo = np.array(lo, dtype=np.int64)
    hi = np.array(hi, dtype=np.int64)
    active = np.flatnonzero(hi - lo > 1)
    while active.size:
        mid = (lo[active] + hi[active]) // 2
        ok = is_feasible(ls[active], mid)
        hi[active] = np.where(ok, mid, hi[active])
        lo[active] = np.where(ok, lo[active], mid)
        active = active[hi[active] - lo[active] > 1]
    return hi


def _staircase(is_feasible, ls, k_max):
    """k_min(l) for increasing ls, k_min non-increasing; k_max + 1 if none.

    Divide and conquer over l; see the module header.
    """
    size = ls.shape[0]
    kmin = np.zeros(size, dtype=np.int64)
    ends = np.unique([0, size - 1])
    kmin[ends] = _bisect_k(
        is_feasible, ls[ends], np.zeros(ends.size), np.full(ends.size, k_max + 1)
    )
    segments = [(0, size - 1)] if size > 2 else []
    while segments:
        mids: list[int] = []
        los: list[int] = []
        his: list[int] = []
        nxt: list[tuple[int, int]] = []
        for a, b in segments:
            if kmin[a] == kmin[b]:
                kmin[a + 1 : b] = kmin[a]
                continue
            c = (a + b) // 2
            mids.append(c)
            los.append(kmin[b] - 1)
            his.append(kmin[a])
            nxt.extend(s for s in ((a, c), (c, b)) if s[1] - s[0] > 1)
        if mids:
            at = np.asarray(mids)
            kmin[at] = _bisect_k(is_feasible, ls[at], los, his)
        segments = nxt
    return kmin


def _run_starts(ls, kmin, k_max):
    """First l of each run of equal, valid k_min: the only possible optima."""
    valid = kmin <= k_max
    first = np.ones(ls.shape[0], dtype=bool)
    first[1:] = kmin[1:] != kmin[:-1]
    keep = valid & first
    return ls[keep], kmin[keep]


def _select_equal(m, n, alpha, ranks, conditional, delta):
    """Equal sizes; ``ranks`` is None (full search) or the one allowed l."""
    threshold = (1.0 - alpha) - _FEASIBILITY_TOL
    coverage = _EqualSizeCoverage(m, n, threshold)
    N = m * n
    if conditional is True:
        alpha_delta = alpha - math.sqrt(math.log(1.0 / delta) / (2.0 * N))
        if alpha_delta <= 0:
            return None
        need = float_safe_ceil((1.0 - alpha_delta) * N)
        ls = np.arange(1, n + 1) if ranks is None else np.array([ranks])
        kmin = -(-need // ls)
    elif conditional == "exact":
        ls = np.arange(1, n + 1) if ranks is None else np.array([ranks])

        def tail_ok(l_arr, k_arr):
            tails = _conditional_tails(
                m, n, l_arr.astype(float), k_arr.astype(float), alpha
            )
            return tails <= delta + _TAIL_TOL

        kmin = _bisect_k(tail_ok, ls, np.zeros(ls.size), np.full(ls.size, m + 1))
    else:
        if threshold > N / (N + 1):
            return None
        if ranks is None:
            # Smallest l with a valid k, i.e. with M(l, m) >= 1 - alpha.
            l_min = _bisect_k(
                lambda _, l_arr: coverage.feasible(l_arr, np.full(l_arr.size, m)),
                np.zeros(1, dtype=np.int64),
                [0],
                [n],
            )[0]
            ls = np.arange(l_min, n + 1)
        else:
            ls = np.array([ranks])
        kmin = _staircase(coverage.feasible, ls, m)
    ls, kmin = _run_starts(ls, kmin, m)
    if ls.size == 0:
        return None
    l_best, k_best, value = coverage.best(ls, kmin)
    return l_best, k_best, value


def _select_unequal(sizes, ranks, alpha, *, canonical=True):
    """Fixed per-client ranks: smallest k with M >= 1 - alpha (bisection on k).

    ``canonical=False``: every pass on the profile's own nodes, nothing
    cached (the slower reference the tests compare the plans with).
    """
    groups = _active_groups(sizes, ranks)
    m_active = sum(c for _, c in groups)
    if m_active == 0:
        return None
    threshold = (1.0 - alpha) - _FEASIBILITY_TOL
    screened, accurate = {}, {}

    g_sizes = np.array([n for (n, _), _ in groups], dtype=np.int64)
    g_ranks = np.array([[l for (_, l), _ in groups]], dtype=np.int64)
    g_counts = np.array([c for _, c in groups], dtype=np.int64)

    def value(k, own_nodes=False):
        # Composite Gauss-Legendre, panels doubled to 5e-14 agreement ("quad"
        # only if that fails): quad's scalar DP costs seconds at 300 clients.
        # From 32 clients, the sinh rule, on the canonical nodes unless
        # ``own_nodes`` (the decisions within _SCREEN_MARGIN of the
        # threshold: the profile's own nodes, as before the snapping).
        key = (k, canonical and not own_nodes)
        if key not in accurate:
            accurate[key] = float(
                _coverage_unequal_batch(
                    g_sizes, g_counts, g_ranks, [k], canonical=key[1]
                )[0]
            )
        return accurate[key]

    def reference(k):
        return value(k, own_nodes=True)

    def feasible(k):
        if k not in screened:
            screened[k] = _coverage_unequal_screen(groups, k)
        if abs(screened[k] - threshold) < _SCREEN_MARGIN:
            return value(k) >= threshold
        return screened[k] >= threshold

    fast = _select_unequal_sinh(groups, threshold, reference, value, canonical)
    if fast is not None:
        return None if fast is _NO_VALID_K else fast
    if _uses_tree(m_active):
        # Many clients: a normal approximation of the count (~1e-7 off, far
        # below the step of M in k) guesses the first valid k, which is then
        # confirmed (or moved): k is returned only when M(k) >= threshold >
        # M(k - 1), each decided by the coarse rule if its error estimate
        # clears the threshold by 10x, by the accurate rule otherwise, and M
        # increases in k.  The returned coverage is accurate.
        k = _normal_guess(groups, threshold)

        def decided(k):
            vals, errs = _coverage_unequal_batch(
                g_sizes, g_counts, g_ranks, [k], coarse=True
            )
            if _undecided(vals[0], errs[0], threshold):
                return value(k) >= threshold
            return vals[0] >= threshold

        if decided(k):
            while k > 1 and decided(k - 1):
                k -= 1
            return k, value(k)
        while k < m_active:
            k += 1
            if decided(k):
                return k, value(k)
        return None
    if m_active * len(groups) <= _ALL_K_MAX_WORK:
        values = _coverage_unequal_all_k(groups)
        if values is not None:
            ok = values >= threshold
            for i in np.flatnonzero(np.abs(values - threshold) < _SCREEN_MARGIN):
                ok[i] = value(int(i) + 1) >= threshold
            if not ok.any():
                return None
            k = int(np.argmax(ok)) + 1  # M increases with k: the first valid k
            return k, accurate.get((k, canonical), float(values[k - 1]))
    # Only k <= m_active gives a finite threshold; beyond, M = 1 trivially.
    if not feasible(m_active):
        return None
    lo, hi = 0, m_active
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    return hi, value(hi)


_NO_VALID_K = (0, 0.0)


def _normal_guess(groups, threshold):
    """First k whose normal estimate of M reaches ``threshold`` (a guess)."""
    estimate = _NormalEstimate(groups)
    lo, hi = 0, sum(c for _, c in groups)  # bisection on the estimate
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if estimate([mid])[0] >= threshold:
            hi = mid
        else:
            lo = mid
    return hi


def _select_unequal_sinh(groups, threshold, reference, value, canonical=True):
    """Smallest k with M(k) >= threshold from the sinh-mapped rule, or None.

    A guess ``k_g = ceil(mu(threshold) + 1/2)`` (``mu(t) = E S(t)``, the
    count of clients expected below t: M(k), the mean of the k-th client
    value, is near the t where ``mu(t) = k - 1/2``, so the first k with
    ``M(k) >= threshold`` is near the first k with ``k - 1/2 >=
    mu(threshold)``; exact on 287 of 296 random profiles tried, one too
    small on the others) and its neighbours are evaluated
    in one pass (:func:`_coverage_unequal_sinh`, ~1e-15); the window moves
    until it holds k with ``M(k) >= threshold > M(k - 1)`` (M increases in
    k). A value within ``_SCREEN_MARGIN`` of the threshold is decided by
    ``reference(k)`` (the accurate rule on the profile's own nodes), as the
    bisection does. The passes run on canonical nodes
    (:func:`_canonical_features`), whose probabilities and laws are shared
    with the other folds, groups and passes; the coverage returned is
    ``value(k)``, the accurate rule on those nodes.
    Returns ``(k, M(k))``, ``_NO_VALID_K`` if ``M(m_active) < threshold``,
    or None when the rule does not converge (the caller's search runs).
    """
    m_active = sum(c for _, c in groups)
    ns = np.array([n for (n, _), _ in groups], dtype=np.float64)
    ls = np.array([l for (_, l), _ in groups], dtype=np.float64)
    cs = np.array([c for _, c in groups], dtype=np.float64)
    mean = float(special.betainc(ls, ns - ls + 1.0, min(threshold, 1.0)) @ cs)
    k_guess = min(max(math.ceil(mean + 0.5), 1), m_active)
    if m_active >= _NORMAL_GUESS_MIN and 4 * len(groups) <= m_active:
        # A pass costs far more than the normal estimate here, and a pass
        # centred on the wrong k costs a second one (on k's own window).
        k_guess = _normal_guess(groups, threshold)
    seen = set()
    for _ in range(6):
        ks = _sinh_ks(k_guess, m_active)
        if (int(ks[0]), int(ks[-1])) in seen:
            return None
        seen.add((int(ks[0]), int(ks[-1])))
        result = _coverage_unequal_sinh(groups, ks, canonical=canonical)
        if result is None:
            return None
        values = result[0]
        ok = values >= threshold
        settled = np.zeros(ks.shape[0], dtype=bool)
        for i in np.flatnonzero(np.abs(values - threshold) < _SCREEN_MARGIN):
            ok[i] = reference(int(ks[i])) >= threshold
            values[i] = value(int(ks[i]))
            settled[i] = True
        if not ok.any():
            if ks[-1] == m_active:
                return _NO_VALID_K
            k_guess = int(ks[-1]) + 3
            continue
        first = int(np.argmax(ok))
        if first == 0 and ks[0] > 1:
            k_guess = int(ks[0]) - 3
            continue
        k = int(ks[first])
        if k == k_guess or settled[first]:
            return k, float(values[first])
        # The value of k's own pass (the bits every caller of M(k) gets).
        own = _coverage_unequal_sinh_at(groups, k, canonical=canonical)
        return k, value(k) if own is None else own
    return None


def _select_auto_unequal(sizes, alpha, clip):
    """``local_rank="auto"`` with unequal sizes: the family searched by cost.

    * ``m x (distinct sizes) <= _JOINT_MAX_WORK``: the joint search over
      every level c and every k (:func:`_select_joint`);
    * up to ``_LEVEL_MAX_WORK``: the level search at the k of Appendix A.1
      (k = m if A.1 has none), compared with A.1 itself;
    * beyond: Appendix A.1.

    Every branch depends on the public sizes and alpha only, and each
    returns a pair whose exact coverage is >= 1 - alpha; the first two
    never return a larger coverage than A.1 (its pair is in their family).
    """
    m, groups = len(sizes), len(set(sizes))
    work = m * groups
    threshold = (1.0 - alpha) - _FEASIBILITY_TOL
    if work <= _JOINT_MAX_WORK:
        joint = _select_cached(sizes, alpha, "joint", clip, False, None)
        if _certified_valid(sizes, joint, threshold):
            return joint
        return _select_cached(sizes, alpha, "fixed", clip, False, None)
    fixed = _select_cached(sizes, alpha, "fixed", clip, False, None)
    if work > _LEVEL_MAX_WORK:
        return fixed
    k_a1 = fixed.k if fixed.feasible else m
    ks = range(max(1, k_a1 - _LEVEL_K_SPAN), min(m, k_a1 + _LEVEL_K_SPAN) + 1)
    result = _select_joint(sizes, alpha, clip, only_k=list(ks))
    if result is None:
        return fixed
    ranks, k_best, value = result
    if fixed.feasible and not value < fixed.coverage - _TIE_TOL:
        return fixed
    level = QQSelection(tuple(int(r) for r in ranks), int(k_best), float(value), True)
    return level if _certified_valid(sizes, level, threshold) else fixed


def _certified_valid(sizes, sel, threshold):
    """False only if the exact-degree rule proves ``M < threshold``.

    For ``sum(sizes) <= _CERTIFY_MAX_N`` the coverage of the selected pair
    is recomputed by Clenshaw-Curtis with N + 1 points, exact for this
    degree-N polynomial up to rounding (``_coverage_unequal_certified``), and
    the pair is kept only if that value minus its error bound clears the
    threshold. Larger N: the quadrature decision stands (not certified).
    """
    N = sum(sizes)
    if not sel.feasible or N > _CERTIFY_MAX_N:
        return True
    groups = _active_groups(sizes, sel.local_ranks)
    value, bound = _coverage_unequal_certified(groups, sel.k, N)
    return value - bound >= threshold


def _fixed_ranks(sizes, alpha, clip_local_rank):
    """Appendix A.1's ranks ``ceil((1 - alpha)(n_j + 1))``, clipped to
    ``min(l_j, n_j)`` with ``clip_local_rank``."""
    ranks = _conformal_ranks(sizes, alpha)
    if clip_local_rank:
        ranks = tuple(min(l_j, n_j) for l_j, n_j in zip(ranks, sizes, strict=True))
    return ranks


def _conformal_ranks(sizes, alpha):
    """``conformal_rank(n, alpha)`` for every size, in one vectorised pass
    (the same float-safe ceil)."""
    n = np.asarray(sizes, dtype=np.float64)
    ranks = np.maximum(np.ceil((n + 1.0) * (1.0 - alpha) - _CEIL_EPS), 1.0)
    return tuple(ranks.astype(np.int64).tolist())


@functools.lru_cache(maxsize=256)
def _select_cached(sizes, alpha, local_rank, clip_local_rank, conditional, delta):
    m = len(sizes)
    equal = len(set(sizes)) == 1
    if local_rank == "auto" and equal:
        ranks = None
    elif local_rank == "auto":
        return _select_auto_unequal(sizes, alpha, clip_local_rank)
    elif local_rank == "joint" and not equal:
        result = _select_joint(sizes, alpha, clip_local_rank)
        if result is None:
            return _INFEASIBLE
        ranks, k_best, value = result
        return QQSelection(
            tuple(int(r) for r in ranks), int(k_best), float(value), True
        )
    elif local_rank == "joint":  # equal sizes: the full search contains the family
        ranks = None
    elif local_rank in ("auto", "fixed"):
        ranks = _fixed_ranks(sizes, alpha, clip_local_rank)
    elif clip_local_rank:
        ranks = tuple(min(local_rank, n_j) for n_j in sizes)
    else:
        ranks = (local_rank,) * m
    if equal:
        n = sizes[0]
        if ranks is not None and ranks[0] > n:  # every client would send +inf
            return _INFEASIBLE
        result = _select_equal(
            m, n, alpha, None if ranks is None else ranks[0], conditional, delta
        )
        if result is None:
            return _INFEASIBLE
        l_best, k_best, value = result
        return QQSelection((int(l_best),) * m, int(k_best), float(value), True)
    assert ranks is not None  # None only with equal sizes, returned above
    result = _select_unequal(sizes, ranks, alpha)
    if result is None:
        return _INFEASIBLE
    k_best, value = result
    return QQSelection(tuple(int(r) for r in ranks), int(k_best), float(value), True)


@fill_doc
def select_qq_ranks(
    n_per_client: ArrayLike,
    alpha: float,
    *,
    local_rank: Literal["auto", "fixed", "joint"] | int = "auto",
    clip_local_rank: bool = False,
    conditional: bool | Literal["exact"] = False,
    delta: float = 0.1,
) -> QQSelection:
    """Choose the ranks ``(l_j, k)`` of FedCP-QQ from public metadata.

    With equal client sizes and ``local_rank="auto"`` this is eq. (6) of
    [1]_: the pair with the smallest exact coverage ``M(l, k) >= 1 - alpha``
    over the full grid ``[1..n] x [1..m]``. With unequal sizes, ``"joint"``
    (and ``"auto"`` with few clients) is the same argmin over the ranks of
    one common level and ``k``. With fixed local ranks the smallest valid
    ``k`` is returned. The result depends only on the sizes and ``alpha``
    (never on scores) and is cached.

    Parameters
    ----------
    n_per_client : array-like of int
        Calibration size ``n_j >= 1`` of each client (``m`` entries).
    alpha : float
        Target miscoverage in (0, 1).
    local_rank : "auto", "fixed", "joint" or int, default="auto"
        ``"auto"``: full search when all sizes are equal. With unequal sizes
        (skfedcp extension, issue 14) the family of one common level
        ``l_j = ceil(c (n_j + 1))`` is searched by cost, from the work
        ``w = m x (number of distinct sizes)``: ``w <= 400``, every level
        and every ``k`` (as ``"joint"``); ``w <= 12,000``, every level for
        the ``k`` within 4 of the ``"fixed"`` rule's ``k``, and that rule
        itself (never a larger coverage than ``"fixed"``); beyond, the
        ``"fixed"`` rule. ``"fixed"``: ``l_j = ceil((1 - alpha)(n_j + 1))``
        (float-safe, Appendix A.1 of [1]_); a client with ``l_j > n_j``
        sends ``+inf``. ``"joint"``: every level ``c`` in (0, 1) jointly
        with every ``k``, the smallest exact coverage ``>= 1 - alpha`` over
        that family (it contains the fixed rule, ``c = 1 - alpha``); seconds
        from about 50 clients on; with equal sizes the same as ``"auto"``.
        An int: the same ``l`` for every client.
    clip_local_rank : bool, default=False
        With fixed, joint or integer ranks, use ``min(l_j, n_j)`` so every
        client sends a finite value; the coverage is recomputed, so it stays
        exact.
    conditional : bool or "exact", default=False
        ``True``: training-conditional pairs of Theorem 3.3 of [1]_,
        ``l k >= ceil((1 - alpha_delta) N)`` with
        ``alpha_delta = alpha - sqrt(log(1/delta) / (2N))``, so that
        ``P(miscoverage given the data <= alpha) >= 1 - delta``.
        ``"exact"`` (skfedcp extension): pairs whose exact tail
        :func:`qq_conditional_tail` is ``<= delta``. In both cases the pair
        with the smallest ``M`` is returned. Equal sizes only.
    delta : float, default=0.1
        Failure probability of the conditional guarantee: in (0, 0.5] for
        ``conditional=True``, in (0, 1) for ``"exact"``; ignored otherwise.

    Returns
    -------
    selection : QQSelection
        ``(local_ranks, k, coverage, feasible)``. ``local_ranks`` has one
        entry per client; ``coverage`` is ``M`` of the chosen pair. When no
        pair is valid (``alpha < 1/(N+1)``, no valid ``k`` for fixed ranks,
        or ``alpha_delta <= 0``): ``QQSelection((), None, 1.0, False)``, and
        the threshold is ``+inf``.

    See Also
    --------
    qq_coverage, qq_coverage_unequal : the coverage ``M``.

    Notes
    -----
    A pair is valid when ``M >= (1 - alpha) - 1e-10`` (exact ties such as
    ``M(3, 3) = 0.9`` for ``m = n = 3`` must stay valid). Pairs whose
    coverages lie within ``1e-13`` are tied; the largest ``l``, then the
    smallest ``k``, wins. With one client this is split conformal
    prediction, ``l* = ceil((n + 1)(1 - alpha))``; with ``n = 1``,
    ``k* = ceil((m + 1)(1 - alpha))``.

    The full search walks the staircase of smallest valid ``k`` per ``l``
    (non-increasing in ``l``) by divide and conquer over ``l`` with
    vectorised bisections on ``k``, screening ``M`` with a panel
    Gauss-Legendre rule (error < 1e-14) and re-evaluating every value close
    to a decision with adaptive quadrature (see the module source). It takes
    a few hundredths of a second at ``m = n = 1000``. Clear the cache with
    ``select_qq_ranks.cache_clear()``.

    The conditional rules target ``P(miscoverage given the data <= alpha)``
    only. With ``conditional="exact"`` and a large ``delta`` (around 0.5 or
    more) the returned ``M`` can fall below ``1 - alpha``; with
    ``conditional=True``, ``l k >= (1 - alpha_delta) N`` keeps it above.

    %(references_humbert)s

    Examples
    --------
    >>> sel = select_qq_ranks([10] * 5, 0.1)
    >>> sel.local_ranks, sel.k, round(sel.coverage, 6)
    ((10, 10, 10, 10, 10), 3, 0.925626)
    >>> select_qq_ranks([5, 10, 20, 40, 15, 8, 30, 12], 0.1, local_rank="fixed").k
    3
    >>> sel = select_qq_ranks([5, 10, 20, 40, 15, 8, 30, 12], 0.1)
    >>> sel.local_ranks, sel.k, round(sel.coverage, 5)
    ((5, 9, 18, 34, 14, 8, 26, 11), 6, 0.90029)
    >>> select_qq_ranks([2, 2], 0.1).feasible
    False
    """
    sizes = _check_sizes(n_per_client)
    alpha = check_alpha(alpha)
    if isinstance(local_rank, str):
        if local_rank not in ("auto", "fixed", "joint"):
            raise ValueError(
                'local_rank must be "auto", "fixed", "joint" or an int >= 1; '
                f"got {local_rank!r}."
            )
    else:
        local_rank = _check_int(local_rank, "local_rank")
    if not isinstance(clip_local_rank, bool | np.bool_):
        raise TypeError(f"clip_local_rank must be a bool; got {clip_local_rank!r}.")
    if isinstance(conditional, bool | np.bool_):
        conditional = bool(conditional)
    elif conditional != "exact":
        raise ValueError(
            f'conditional must be True, False or "exact"; got {conditional!r}.'
        )
    if isinstance(delta, bool) or not isinstance(delta, Real):
        raise TypeError(f"delta must be a float in (0, 1); got {delta!r}.")
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in the open interval (0, 1); got {delta!r}.")
    if conditional is True and delta > 0.5:
        raise ValueError(
            f"delta must be <= 0.5 with conditional=True (Theorem 3.3); got {delta!r}."
        )
    if conditional is not False and len(set(sizes)) > 1:
        raise ValueError(
            f"conditional={conditional!r} needs equal client sizes; got sizes "
            f"{sorted(set(sizes))}."
        )
    return _select_cached(
        sizes,
        alpha,
        local_rank,
        bool(clip_local_rank),
        conditional,
        delta if conditional is not False else None,
    )


# The public function exposes the cache of its memoised core (a function
# attribute mypy cannot see on a plain def).
select_qq_ranks.cache_clear = _select_cached.cache_clear  # type: ignore[attr-defined]
select_qq_ranks.cache_info = _select_cached.cache_info  # type: ignore[attr-defined]
