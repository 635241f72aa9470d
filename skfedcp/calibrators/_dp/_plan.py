"""The public plan of FedCP²-QQ: gamma search, automatic bins, per-step memo."""

from __future__ import annotations

import math
import sys
from collections import Counter
from functools import lru_cache
from typing import Literal

import numpy as np
from scipy import special

from ...privacy import dp_qq_local_correction
from ...utils._quantile import conformal_rank
from .._qq._batch import _coverage_unequal_batch, _coverage_unequal_sinh
from .._qq._coverage import _FEASIBILITY_TOL, qq_coverage, qq_coverage_unequal
from .._qq._poisbin import _poisbin_pmf_groups
from .._qq._selection import select_qq_ranks
from ._bins_bound import uniform_release_cdfs, value_beats
from ._common import _describe
from ._laws import _client_pmf, _expected_kth_smallest
from ._paper_bounds import packed_bounds
from ._paper_equal import EqualSelections
from ._paper_search import _NEAR_TIE, bounded_search
from ._tight_select import _dpqq_tight_search

#: gamma grid of FedCP²-QQ when ``gamma="auto"`` (the paper leaves it open).
GAMMA_GRID = tuple(round(0.01 * i, 2) for i in range(1, 100))
#: Candidate numbers of bins of FedCP²-QQ when ``n_bins="auto"``: 100 to 1e5,
#: then 10 to 75 only if none of those is feasible (on uniform simulations a
#: coarse grid "wins" when an edge happens to sit on the target quantile).
DPQQ_BINS_GRID = tuple(int(b) for b in np.unique(np.logspace(2, 5, 25).astype(int)))
_DPQQ_SMALL_BINS = tuple(int(b) for b in np.unique(np.logspace(1, 2, 9).astype(int)))
_DPQQ_SMALL_BINS = _DPQQ_SMALL_BINS[:-1]  # 10 .. 74
# Coverages within this tolerance are tied (ties go to the smaller gamma).
_TIE = 1e-10
#: Switch every bound off (tests: the reference search, gamma by gamma).
_USE_BOUNDS = True
#: Automatic bins: a bin count whose certified lower bound cannot beat the
#: best is not valued exactly (tests switch it off for the reference).
_BINS_BOUND = True
#: Equal sizes: the gammas' selections share their coverage values
#: (:class:`EqualSelections`; tests switch it off for the reference).
_SHARED_EQUAL = True


class _PlanMemo:
    """The last plans, keyed by the *identity* of the sizes array.

    ``fit`` passes the same ``n_per_client`` array to every client step, and
    each step asks for the plan: hashing an m-tuple per step would make a fit
    quadratic in m. A hit needs the same array object with the same content
    (one vectorised comparison against a private snapshot, so a mutated
    array is never served a stale plan) and the same public parameters.
    Lists and tuples always miss (their conversion is O(m) anyway) and fall
    through to the ``lru_cache`` of the plan functions. Entries are replaced
    whole (one assignment), so concurrent fits never see a torn entry.
    """

    def __init__(self, size=8):
        self._size = size
        self._entries = {}

    def get(self, sizes, key):
        if not isinstance(sizes, np.ndarray):
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        array, snapshot, plan = entry
        if array is not sizes or not np.array_equal(snapshot, sizes):
            return None
        return plan

    def put(self, sizes, key, plan):
        if not isinstance(sizes, np.ndarray):
            return
        if len(self._entries) >= self._size:
            self._entries = {}
        self._entries[key] = (sizes, sizes.copy(), plan)


_PLAN_MEMO = _PlanMemo()


def _copy_plan(plan):
    """A fresh dict with fresh arrays: callers may modify what they get."""
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in plan.items()}


def _dpqq_plan(sizes, alpha, epsilon, n_bins, gamma, rule="paper", utility="quantile"):
    if rule == "tight":
        if isinstance(n_bins, str):  # "auto": any data-free choice is valid
            n_bins = _dpqq_auto_bins(sizes, alpha, epsilon, "auto")
        plan = dict(_dpqq_tight_search(sizes, alpha, epsilon, int(n_bins), utility))
        for key in ("local_ranks", "levels"):
            if key in plan:
                plan[key] = np.array(plan[key])
        return plan
    if isinstance(n_bins, str):  # "auto"
        n_bins = _dpqq_auto_bins(sizes, alpha, epsilon, gamma)
    plan = dict(_dpqq_gamma_search(sizes, alpha, epsilon, int(n_bins), gamma))
    plan["rule"] = "paper"
    plan["utility"] = "quantile"
    for key in ("local_ranks", "levels"):
        if key in plan:
            plan[key] = np.array(plan[key])
    return plan


@lru_cache(maxsize=1024)
def _qq_score(sizes, ranks, k):
    """Exact coverage ``M(ranks, k)`` of the corrected ranks.

    Equal sizes: :func:`qq_coverage`. Unequal sizes: the clients are grouped
    by ``(n_j, l_j)`` (the integrand only depends on that multiset, so the
    value is cached per multiset) and integrated by the batched composite
    Gauss-Legendre rule of ``_qq_coverage`` (panels doubled until two passes
    agree to 5e-14, ``quad`` for any pair that does not converge): the same
    value as :func:`qq_coverage_unequal` to ~1e-14, several times faster.
    Decisions closer than ``_CERTIFY`` to a tie are re-made with
    :func:`_qq_score_quad` (see :func:`_beats`).
    """
    if len(set(sizes)) == 1:
        return qq_coverage(len(sizes), sizes[0], ranks[0], k)
    return _grouped_score(
        tuple(sorted(Counter(zip(sizes, ranks, strict=True)).items())), k
    )


@lru_cache(maxsize=4096)
def _grouped_score(groups, k):
    # The sinh-mapped rule first (one pass, ~1e-15, see _qq/_batch.py); the
    # composite rule if it does not converge. A client with l_j > n_j sends
    # +inf (never below t): it is left out of the count.
    active = [((n, r), c) for (n, r), c in groups if r <= n]
    if sum(c for _, c in active) < k:
        return 1.0
    fast = _coverage_unequal_sinh(active, [k])
    if fast is not None:
        return float(fast[0][0])
    g_sizes = np.array([n for (n, _), _ in groups], dtype=np.int64)
    g_ranks = np.array([[r for (_, r), _ in groups]], dtype=np.int64)
    g_counts = np.array([c for _, c in groups], dtype=np.int64)
    return float(_coverage_unequal_batch(g_sizes, g_counts, g_ranks, [k])[0])


@lru_cache(maxsize=64)
def _qq_score_quad(sizes, ranks, k):
    """The reference value (adaptive quadrature) for near-tie decisions."""
    if len(set(sizes)) == 1:
        return qq_coverage(len(sizes), sizes[0], ranks[0], k)
    return qq_coverage_unequal(sizes, ranks, k)


# A comparison of two scores closer than this to the tie line is re-made
# with the quad values: the batched and the quad values agree to ~1e-14, so
# every other decision is the one the quad values would give.
_CERTIFY = 1e-12


def _beats(sizes, score, ranks, k, best):
    """``score < best_score - _TIE``, certified against the quad values."""
    if best is None:
        return True
    gap = score - (best[0] - _TIE)
    if abs(gap) >= _CERTIFY or len(set(sizes)) == 1:
        return gap < 0
    best_ranks, best_k = best[4], best[2].k
    return _qq_score_quad(sizes, ranks, k) < (
        _qq_score_quad(sizes, best_ranks, best_k) - _TIE
    )


@lru_cache(maxsize=256)
def _dpqq_gamma_search(sizes, alpha, epsilon, n_bins, gamma):
    """The public plan of FedCP²-QQ for given bins (section 2.11 of the spec)."""
    m = len(sizes)
    grid = GAMMA_GRID if isinstance(gamma, str) else (float(gamma),)
    equal = len(set(sizes)) == 1
    # Explicit rule (not "auto"): the plans must not move if the default of
    # select_qq_ranks changes. Equal sizes: the full search of eq. (6);
    # unequal sizes: the fixed ranks of Appendix A.1.
    local_rule: Literal["auto", "fixed"] = "auto" if equal else "fixed"
    n_max = max(sizes)
    # A search costs a rank selection and an exact coverage per gamma.
    # Two data-free shortcuts keep the result identical:
    # * necessary condition: every corrected rank is l_gamma + l_cor >=
    #   1 + l_cor, so l_cor >= max(n_j) leaves no client with a finite
    #   value (the loop below would skip that gamma). l_cor decreases in
    #   gamma, so the largest gamma of the grid decides feasibility at once;
    # * pruning: score(gamma) = M(l_gamma + l_cor, k_gamma) >= M(l_gamma,
    #   k_gamma) + 1/(N + 1) (M = E[rank]/(N + 1) and every client value
    #   moves up at least one rank) >= tau_gamma - 1e-10 + 1/(N + 1), and
    #   tau_gamma increases in gamma: once that bound exceeds the best
    #   score, no larger gamma can win (ties need a score < best - 1e-10).
    corrections = {
        g: dp_qq_local_correction(epsilon, n_bins, g, alpha, m) for g in grid
    }
    if min(corrections.values()) >= n_max:
        grid = ()
    # (n_j, count) pairs for the pruning bounds of unequal sizes (after the
    # feasibility check: an infeasible plan costs no O(m) Python counting).
    size_counts = tuple(sorted(Counter(sizes).items())) if grid and not equal else ()
    args = (sizes, alpha, grid, corrections, size_counts)
    if not equal and len(size_counts) >= _BOUND_MIN_DISTINCT and _USE_BOUNDS:
        # The search reads this module's scores, bounds and settings from it
        # (at call time: a patched name is seen), not by importing it back.
        best = bounded_search(*args, sys.modules[__name__])
        if best is _NEAR_TIE:
            best = _sequential_search(*args, local_rule)
    else:
        best = _sequential_search(*args, local_rule)
    if best is None:
        reason = (
            f"no gamma is feasible: with client sizes {_describe(sizes)}, "
            f"epsilon={epsilon:g}, alpha={alpha:g} and n_bins={n_bins} the "
            "corrected ranks l_gamma + l_cor exceed the client sizes; use more "
            "data per client, a larger epsilon or fewer bins"
        )
        plan = {
            "feasible": False,
            "reason": reason,
            "n_bins": n_bins,
            "epsilon": epsilon,
        }
        return tuple(plan.items())
    score, g, sel, correction, ranks = best
    levels = tuple(
        max(r / n, 0.5) if r <= n else math.inf
        for r, n in zip(ranks, sizes, strict=True)
    )
    plan = {
        "feasible": True,
        "gamma": g,
        "local_ranks": sel.local_ranks,
        "k": sel.k,
        "correction": correction,
        "levels": levels,
        "score": score,
        "coverage_lower": (1.0 - g * alpha) * sel.coverage,
        "n_bins": n_bins,
        "epsilon": epsilon,
    }
    return tuple(plan.items())


def _sequential_search(sizes, alpha, grid, corrections, size_counts, local_rule):
    """The gammas in grid order; each skipped only where it cannot beat the best.

    ``_USE_BOUNDS = False`` switches every bound off (the reference: each
    gamma costs a rank selection and an exact score). Equal sizes: the
    selections of eq. (6) share their coverage values (the same pairs,
    :class:`EqualSelections`), unless ``_SHARED_EQUAL`` is off.
    """
    equal = not size_counts
    n_max, n_total = max(sizes), sum(sizes)
    distinct = [n for n, _ in size_counts]
    select = None
    if equal and _USE_BOUNDS and _SHARED_EQUAL:
        select = EqualSelections(len(sizes), n_max).select
    best = None
    skip_until, margin = 0, -math.inf
    for index, g in enumerate(grid):
        if not _USE_BOUNDS:
            best = _evaluate(sizes, alpha, g, corrections[g], local_rule, best)
            continue
        if index < skip_until:
            continue  # in a block that cannot beat the best
        correction = corrections[g]
        if correction >= n_max:
            continue
        tau = (1.0 - alpha) / (1.0 - g * alpha)
        if best is not None and tau + 1.0 / (n_total + 1) - 3e-10 >= best[0]:
            break
        target_alpha = alpha * (1.0 - g) / (1.0 - g * alpha)  # 1 - tau_gamma
        if equal and best is not None:
            # Equal sizes: the full search of eq. (6) picks some (l, k) with
            # M(l, k) >= tau - 1e-10; its score is M(l + l_cor, k) if every
            # client stays finite (else the gamma is infeasible), at least
            # M(l, k) + the shift gain whatever l (see _min_shift_gain).
            if tau + _shift_gain(((n_max, len(sizes)),), correction) - 3e-10 >= best[0]:
                continue  # cannot win (nor tie: needs < best - 1e-10)
        if not equal:
            fixed = {n: conformal_rank(n, target_alpha) for n in distinct}
            finite = [fixed[n] + correction <= n for n in distinct]
            if not any(finite):
                continue  # the fixed ranks leave no client with a finite value
            if all(finite) and best is not None:
                # No client turns to +inf, so each client value moves up
                # l_cor of its own ranks: score >= tau - 1e-10 + gain, where
                # the gain is l_cor/(N+1) or E[min_j (spacings)], whichever
                # is larger (see _min_shift_gain).
                if tau + _shift_gain(size_counts, correction) - 3e-10 >= best[0]:
                    continue  # cannot win (nor tie: needs < best - 1e-10)
                # Sharper and still rigorous, at a fraction of the cost of
                # the rank selection and the exact score it avoids.
                bound = _score_lower_bound(size_counts, fixed, correction, tau)
                if bound - 3e-10 >= best[0]:
                    continue
            elif best is not None and len(distinct) >= _BOUND_MIN_DISTINCT:
                # Some clients turn to +inf: the packed Riemann bound (the
                # plan is unchanged: a skipped gamma cannot beat the best,
                # and the best only decreases). Far from the best, one bound
                # for the next gammas of the same l_cor first (see
                # _packed_score_bound: their ranks lie between these and the
                # last one's).
                block = index
                while (
                    block + 1 < min(index + _BLOCK, len(grid))
                    and corrections[grid[block + 1]] == correction
                ):
                    block += 1
                if block > index and margin > _BLOCK_MARGIN:
                    last = grid[block]
                    top_alpha = alpha * (1.0 - last) / (1.0 - last * alpha)
                    top = {n: conformal_rank(n, top_alpha) for n in distinct}
                    bound = _packed_score_bound(
                        size_counts, fixed, correction, tau, top=top
                    )
                    if bound - 3e-10 >= best[0]:
                        skip_until = block + 1
                        continue
                bound = _packed_score_bound(size_counts, fixed, correction, tau)
                margin = bound - best[0]
                if bound - 3e-10 >= best[0]:
                    continue
                if margin > -_FINE_MARGIN:  # close: finer nodes may settle it
                    bound = _packed_score_bound(
                        size_counts, fixed, correction, tau, _FINE_NODES
                    )
                    if bound - 3e-10 >= best[0]:
                        continue
        best = _evaluate(sizes, alpha, g, correction, local_rule, best, select)
    return best


def _evaluate(sizes, alpha, g, correction, local_rule, best, select=None):
    """The best after gamma ``g``: its rank selection, exact score, comparison.

    Returns ``best`` unchanged when the gamma is not feasible or does not
    beat it, else ``(score, g, selection, correction, ranks)``.
    """
    target = _scored(sizes, alpha, g, correction, local_rule, select)
    if target is None or not _beats(sizes, target[0], target[4], target[2].k, best):
        return best
    return target


def _scored(sizes, alpha, g, correction, local_rule, select=None):
    """``(score, g, selection, correction, ranks)`` of gamma ``g``, or None.

    ``select``: the selection's function of the target miscoverage, if not
    ``select_qq_ranks`` with ``local_rule`` (the same pairs, faster).
    """
    if correction >= max(sizes):
        return None
    target_alpha = alpha * (1.0 - g) / (1.0 - g * alpha)  # 1 - tau_gamma
    if select is None:
        sel = select_qq_ranks(sizes, target_alpha, local_rank=local_rule)
    else:
        sel = select(target_alpha)
    if not sel.feasible:
        return None
    ranks = tuple(r + correction for r in sel.local_ranks)
    if sum(r <= n for r, n in zip(ranks, sizes, strict=True)) < sel.k:
        return None  # fewer than k clients could send a finite value
    return (_qq_score(sizes, ranks, sel.k), g, sel, correction, ranks)


def _shift_gain(size_counts, shift):
    """The larger of two lower bounds on ``M(l + shift, k) - M(l, k)``.

    ``shift / (N + 1)`` (every client value moves up ``shift`` of its own
    ranks, ``M = E[rank] / (N + 1)``) and :func:`_min_shift_gain`; every
    client must stay finite (``l_j + shift <= n_j``).
    """
    n_total = sum(n * count for n, count in size_counts)
    return max(shift / (n_total + 1), _min_shift_gain(size_counts, shift))


@lru_cache(maxsize=1024)
def _min_shift_gain(size_counts, shift, n_nodes=512):
    """A lower bound on ``E[min_j (U^j_(l_j + c) - U^j_(l_j))]``, ``c = shift``.

    Client ``j`` holds ``n_j`` i.i.d. uniforms; the sum of ``c`` consecutive
    spacings ``U_(l + c) - U_(l)`` is ``Beta(c, n_j + 1 - c)`` whatever
    ``l`` (``l + c <= n_j``), independently across clients, so ``P(min_j >
    x) = prod_j (1 - I_x(c, n_j + 1 - c))``, a decreasing function whose
    lower Riemann sum on ``[0, x_max]`` bounds the expectation from below.

    Why it bounds the dp-qq score: with every client active, the ``k``-th
    smallest of the shifted values ``X_j + D_j`` is at least the ``k``-th
    smallest of the ``X_j`` plus ``min_j D_j`` (pointwise), so ``M(l + c,
    k) >= M(l, k) + E[min_j D_j]`` (``M = E[threshold]`` on uniform scores).
    Much larger than ``c / (N + 1)`` when each client holds a small share of
    the ``N`` scores, so the gamma search skips more candidates (the plan
    is unchanged: a skipped gamma cannot win).
    """
    c = float(shift)
    if c < 1:
        return 0.0
    sizes = np.array([n for n, _ in size_counts], dtype=np.float64)
    counts = np.array([k for _, k in size_counts], dtype=np.float64)
    x_max = float(np.min(special.betaincinv(c, sizes + 1.0 - c, 1.0 - 1e-9)))
    x = np.linspace(0.0, x_max, n_nodes + 1)[1:]  # right ends: a lower sum
    tail = special.betainc(c, sizes[:, None] + 1.0 - c, x[None, :])
    log_survival = (counts[:, None] * special.log1p(-tail)).sum(axis=0)
    return max(float(x_max / n_nodes * np.exp(log_survival).sum()) - 1e-12, 0.0)


def _riemann_brackets(groups, n_nodes=192):
    """Rigorous ``[lower, upper]`` brackets of ``M(ranks, k)`` for every ``k``.

    ``groups`` lists ``((n_j, l_j), count)`` (all active). The integrand
    ``f_k(t) = P(#{clients <= t} <= k - 1)`` decreases in ``t``, so on any
    nodes ``0 = t_0 < ... < t_G = 1`` the right and left Riemann sums bound
    ``M = int_0^1 f_k`` from below and above (whatever the nodes; they are
    packed where the client values live, so the brackets are ~1e-3 wide).
    One Poisson-binomial DP over the nodes serves every ``k``; 1e-12 covers
    its rounding.
    """
    ns = np.array([n for (n, _), _ in groups], dtype=np.float64)
    ls = np.array([r for (_, r), _ in groups], dtype=np.float64)
    a = float(special.betaincinv(ls, ns - ls + 1.0, 1e-13).min())
    b = float(special.betaincinv(ls, ns - ls + 1.0, 1.0 - 1e-13).max())
    t = np.unique(np.r_[0.0, np.linspace(a, b, n_nodes), 1.0])
    f = np.minimum(np.cumsum(_poisbin_pmf_groups(list(groups), t), axis=0), 1.0)
    width = np.diff(t)
    return f[:, 1:] @ width - 1e-12, f[:, :-1] @ width + 1e-12


def _score_lower_bound(size_counts, fixed, correction, tau):
    """A lower bound on the score of one gamma of the unequal-size search.

    The rank selection (fixed ranks ``l``) keeps the smallest ``k`` whose
    computed ``M(l, k)`` reaches ``tau - 1e-10``; where the upper bracket of
    ``M(l, k)`` is below that (by a 1e-9 margin for the selection's own
    rounding) ``k`` is rejected, so the kept ``k`` is at least the first
    ``kappa`` that is not. ``M`` increases in ``k``, so the score ``M(l +
    l_cor, k) >= M(l + l_cor, kappa) >=`` its lower bracket. ``+inf`` when
    no ``k`` can pass (the selection is infeasible: the gamma is skipped
    anyway). Every client is active here (the caller checked it).
    """
    groups = [((n, fixed[n]), count) for n, count in size_counts]
    _, upper = _riemann_brackets(groups)
    passing = np.flatnonzero(upper >= tau - _FEASIBILITY_TOL - 1e-9)
    if passing.size == 0:
        return math.inf
    shifted = [((n, fixed[n] + correction), count) for n, count in size_counts]
    lower, _ = _riemann_brackets(shifted)
    return float(lower[passing[0]])


#: Gammas of one block bound (same l_cor), tried when the last single bound
#: cleared the best by this margin (a block loses about its tau spread).
_BLOCK = 8
_BLOCK_MARGIN = 0.01
#: A single bound that misses the best by less than this is redone on more
#: nodes (its gap shrinks as 1 / nodes) before the selection and score.
_FINE_MARGIN = 2e-3
_FINE_NODES = 64
#: The packed bound of a gamma pays for itself from this many distinct sizes
#: (below, an exact selection and score cost about as much as the bound).
_BOUND_MIN_DISTINCT = 24


#: Up to this many clients the bound's count law runs the capped DP (on its
#: ~20 nodes the product tree's FFTs cost more).
_BOUND_DP_MAX_CLIENTS = 400


def _packed_score_bound(size_counts, fixed, correction, tau, n_nodes=16, top=None):
    """A lower bound on the score of one gamma; clients may turn to +inf.

    The selection keeps the smallest ``k`` whose ``M(l, k)`` over its active
    clients (``l_j <= n_j``) reaches ``tau - 1e-10`` (computed to ~1e-14);
    ``M`` increases in ``k``, so a ``k`` whose upper Riemann sum is below
    ``tau - 1e-10 - 1e-9`` is below the kept one, and the kept ``k`` is at
    least ``kappa``, the next. The score is ``M`` over the clients with
    ``l_j + l_cor <= n_j`` (the others send ``+inf``) at the kept ``k``, at
    least ``M(l + l_cor, kappa)``, at least its lower Riemann sum. ``+inf``
    when no ``k`` can pass or fewer than ``kappa`` clients stay finite (the
    gamma is then skipped by the search anyway).

    ``top``: the fixed ranks of a larger gamma of the same ``l_cor``; then
    the bound holds for every gamma between (ranks ``fixed <= l <= top``,
    ``tau`` the smallest target): ``M`` only grows with the ranks (a client
    past ``n_j`` sends ``+inf``), so the kept ``k`` of such a gamma passes
    ``M(top, k) >= M(l, k) >= tau - 1e-10`` and is at least the ``kappa``
    certified on ``top``, and its score is at least ``M(fixed + l_cor,
    kappa)``.

    One row of :func:`._paper_bounds.packed_bounds` (its nodes and the ks it
    checks), the search's own bound (the count DP up to
    ``_BOUND_DP_MAX_CLIENTS`` clients, the product tree beyond).
    """
    top = fixed if top is None else top
    ns = [n for n, _ in size_counts]
    if all(top[n] > n for n in ns):
        # One gamma: no active client, the selection is infeasible. A block:
        # its smaller gammas may keep some clients, nothing is certified.
        return math.inf if top is fixed else -math.inf
    m = sum(c for _, c in size_counts)
    bound = packed_bounds(
        size_counts,
        np.array([[top[n] for n in ns]]),
        np.array([[fixed[n] + correction for n in ns]]),
        [tau],
        n_nodes,
        m <= _BOUND_DP_MAX_CLIENTS,
    )
    return float(bound[0])


@lru_cache(maxsize=64)
def _dpqq_auto_bins(sizes, alpha, epsilon, gamma):
    """Number of bins minimising the expected threshold on public uniform scores.

    The first bin count within 1e-12 of the smallest value wins. A bin count
    whose certified lower bound (:func:`._bins_bound.value_beats`) cannot
    beat the best so far is not valued exactly: it could not have replaced
    the best, so the choice is the one of valuing every bin count.
    """
    groups = sorted(Counter(sizes).items())
    simulated = {n: np.arange(1, n + 1) / (n + 1.0) for n, _ in groups}
    best, best_value = DPQQ_BINS_GRID[0], math.inf
    grid = DPQQ_BINS_GRID
    if not any(
        dict(_dpqq_gamma_search(sizes, alpha, epsilon, b, gamma))["feasible"]
        for b in grid[:1]
    ):
        grid = _DPQQ_SMALL_BINS + grid[:1]  # ranks only get larger with more bins
    for n_bins in grid:
        plan = dict(_dpqq_gamma_search(sizes, alpha, epsilon, n_bins, gamma))
        if not plan["feasible"]:
            value = 1.0  # the trivial threshold, on the [0, 1] scale
        else:
            edges = np.linspace(0.0, 1.0, n_bins + 1)
            args = {"epsilon": epsilon, "edges": edges}
            level_of = dict(zip(sizes, plan["levels"], strict=True))
            if _BINS_BOUND and best_value < math.inf:
                cdfs_at = uniform_release_cdfs(groups, level_of, epsilon, edges)
                if not value_beats(cdfs_at, plan["k"], edges, best_value):
                    continue  # certified: its value cannot beat the best
            cdfs = [
                (np.cumsum(_client_pmf(simulated[n], level_of[n], args)), count)
                for n, count in groups
            ]
            value = _expected_kth_smallest(cdfs, plan["k"], edges)
        if value < best_value - 1e-12:
            best, best_value = n_bins, value
    return best
