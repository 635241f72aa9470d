"""Tight corrections of FedCP²-QQ (``rule="tight"``): guaranteed bounds, plan."""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache, partial

import numpy as np
from scipy import special

from ...privacy._tight import _rank_law
from . import _tight_prune
from ._common import _describe
from ._laws import _poisbin_at_most, _rank_cdf_on, _release_cdfs
from ._tight_bounds import (  # noqa: F401  (the engine's names, re-exported)
    _GAUSS_EXACT_MAX_N,
    _QUADRATURE_SLACK,
    _ROW_CUT,
    _gauss_nodes01,
    _TightBounds,
)

# --------------------------------------------------------------------------
# Tight corrections (rule="tight", a skfedcp extension; proof in the user
# guide, "Tight corrections")

# A bound must exceed 1 - alpha by this much (float rounding of the sums).
_BOUND_MARGIN = 1e-12


def _tight_lower_bound(groups, level, k, epsilon, n_bins, utility="quantile"):
    """``E[M(D_1..D_m, k)]``: coverage guaranteed by FedCP²-QQ at ``level``.

    ``groups`` lists ``(n, count)``: ``count`` clients of ``n`` scores, all
    running the mechanism at ``level``. The bound is ``int_0^1
    P(sum_j 1{U^j_(D_j) <= t} <= k - 1) dt`` with independent ranks ``D_j``
    (:func:`~skfedcp.privacy._tight._rank_law` of the client's size), i.e.
    a Poisson-binomial integrand with ``p_n(t) = P(U_(D) <= t)`` for the
    clients of size ``n``; a polynomial of degree ``N = sum_j n_j``:
    Gauss-Legendre with ``ceil((N + 1) / 2)`` nodes is exact up to rounding
    for ``N <= 4000``; above, a composite rule refined until two passes
    agree to 1e-13, and the result is lowered by 1e-10 (the search needs a
    bound, not an estimate).
    """
    laws = [
        (n, _rank_law(n, level, epsilon, n_bins, utility=utility)) for n, _ in groups
    ]
    counts = [c for _, c in groups]
    N = sum(n * c for n, c in groups)

    def integral(t, w):
        if len(groups) == 1:
            n, (ranks, pmf) = laws[0]
            p = _rank_cdf_on(t, n, ranks, pmf)
            return float(w @ special.bdtr(k - 1, counts[0], p))
        probs = np.array([_rank_cdf_on(t, n, r, pmf) for n, (r, pmf) in laws])
        return float(w @ _poisbin_at_most(probs, counts, k))

    if N <= _GAUSS_EXACT_MAX_N:
        return integral(*_gauss_nodes01(-(-(N + 1) // 2)))
    x, w = np.polynomial.legendre.leggauss(16)
    previous, panels = None, 64
    while True:
        edges = np.linspace(0.0, 1.0, panels + 1)
        width = edges[1] - edges[0]
        t = (edges[:-1, None] + width * (x + 1.0) / 2.0).ravel()
        value = integral(t, np.tile(w * width / 2.0, panels))
        if previous is not None and abs(value - previous) < 1e-13:
            return value - _QUADRATURE_SLACK
        if panels >= 8192:
            return min(value, previous) - 1e-8
        previous, panels = value, panels * 2


# Bisection steps on the level (precision 2**-31 on [1/2, 1]).
_TIGHT_LEVEL_STEPS = 30
# Public uniform client data sets (per size) that rank the feasible plans.
_TIGHT_SIMULATIONS = 200
_TIGHT_SEED = 20260101
#: Sizes up to this draw their simulated scores; larger ones draw the bin
#: counts (the same law, at a cost that does not grow with ``n``).
_SIMULATED_SCORES_MAX_N = 4096


def _simulated_coverage(groups, level, k, epsilon, n_bins, utility="quantile"):
    """Expected coverage of the plan ``(level, k)`` on i.i.d. uniform scores.

    Used only to choose among plans that all guarantee ``1 - alpha``: it
    reads no data (public uniform samples from a fixed seed), so it costs no
    privacy. Clients are independent, so ``P(threshold <= e_b) = P(at least
    k clients release <= e_b)`` follows exactly from one client's marginal
    release law (per size), which is averaged over the simulated data sets.
    The bin counts of the simulated data sets do not depend on the level:
    they are drawn and counted once per (sizes, bins) (:func:`_simulation_counts`).
    """
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    counts_of = _simulation_counts(groups, n_bins)
    cdfs = _release_cdfs(groups, level, epsilon, utility, counts_of)
    counts = [c for _, c in groups]
    above = _poisbin_at_most(np.array(cdfs), counts, k)  # P(T > e_b)
    # E[F(T)] = e_1 + sum_b (e_{b+1} - e_b) P(T > e_b), F(+inf) = 1.
    return float(edges[1] + np.diff(edges[1:]) @ above[:-1])


@lru_cache(maxsize=16)
def _simulation_counts(groups, n_bins):
    """Bin counts of the public uniform data sets of :func:`_simulated_coverage`.

    One generator from a fixed seed, one ``(simulations, n)`` draw per size in
    the order of ``groups`` (the draws, hence the plan, are reproducible).
    """
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    rng = np.random.default_rng(_TIGHT_SEED)
    out = []
    for n, _ in groups:
        if n <= _SIMULATED_SCORES_MAX_N:
            scores = rng.uniform(size=(_TIGHT_SIMULATIONS, n))
            out.append(_uniform_counts(scores, edges))
            continue
        # Above, the bin counts of n uniform scores are drawn directly: the
        # same multinomial law, O(n_bins) per data set instead of O(n)
        # (another draw than the scores' would give: the plans of such
        # sizes changed, see the user guide, "Tight corrections").
        counts = rng.multinomial(n, np.diff(edges), size=_TIGHT_SIMULATIONS)
        lower = np.cumsum(counts, axis=1) - counts
        out.append((lower, n - lower - counts))
    return tuple(out)


def _uniform_counts(scores, edges):
    """:func:`~skfedcp.privacy._quantile._release_counts` of scores in ``[0,
    1)`` on ``edges = linspace(0, 1, B + 1)``, without its binary search.

    The bin index is ``#{edges < s}`` (``searchsorted``, side "left"),
    clipped to ``1..B``; ``ceil(s B)`` is within one of it (``s B`` and the
    edges are within a few ulps of the exact values), and one comparison
    with each neighbouring edge makes it exact: the same indices, the same
    integer counts.
    """
    m, n = scores.shape
    n_bins = edges.shape[0] - 1
    index = np.ceil(scores * n_bins).astype(np.intp)
    index -= (index > 0) & (edges[np.maximum(index - 1, 0)] >= scores)
    index += edges[index] < scores
    np.clip(index, 1, n_bins, out=index)
    flat = (index + (n_bins + 1) * np.arange(m)[:, None]).ravel()
    counts = np.bincount(flat, minlength=m * (n_bins + 1)).reshape(m, -1)[:, 1:]
    lower = counts.cumsum(axis=1) - counts
    return lower, n - lower - counts


def _replayed_bisection(bounds, k, q_top, target):
    """The level a 30-step bisection of ``LB(., k)`` on [1/2, q_top] returns.

    That bisection keeps ``hi`` with ``LB(hi, k) >= target`` and halves
    ``[lo, hi]`` 30 times. ``LB`` increases in ``q``, so a midpoint at or
    above a level known to pass passes, and one at or below a level known to
    fail fails: the same midpoints are walked and decided, and levels are
    only evaluated when no known one decides the current midpoint. Then the
    crossing of ``LB(., k)`` is aimed at with cheap guesses (one pass of the
    quadrature, :meth:`_TightBounds.estimate`, secant steps), the bisection
    is walked ahead to the final cell ``[lo_f, hi_f]`` that crossing would
    give, and the two ends are evaluated in full: when ``hi_f`` passes and
    ``lo_f`` fails, every midpoint left is decided (none lies inside the
    cell). A wrong aim only costs one more round (each evaluation narrows the
    bracket of known levels); after three rounds the midpoint itself is
    evaluated, as a plain bisection would. Every decision is that of a fully
    evaluated level: the result is the plain bisection's, bit for bit.
    """
    if not _estimates_aim(bounds, q_top):
        return _illinois_replay(bounds, k, q_top, target)
    # LB(a, k) < target <= LB(b, k) (the caller checked the ends).
    a, _, b, _ = _known_bracket(bounds, k, target, (0.5, None, q_top, None))
    lo, hi = 0.5, q_top
    for step in range(_TIGHT_LEVEL_STEPS):
        mid = 0.5 * (lo + hi)
        rounds = 0
        while a < mid < b:
            if rounds >= 3:
                ends = (mid,)
            else:
                cell = partial(_final_cell, lo, hi, _TIGHT_LEVEL_STEPS - step)
                ends = _aim(bounds, k, a, b, target, cell)
            for q in ends:
                if a < q < b:
                    if bounds(q, k) >= target:
                        b = q
                    else:
                        a = q
            rounds += 1
        lo, hi = (lo, mid) if mid >= b else (mid, hi)
    return hi


def _known_bracket(bounds, k, target, ends):
    """``ends = (a, fa, b, fb)`` narrowed to the fully evaluated levels inside
    ``(a, b)`` (``f = LB(., k) - target``: ``a`` fails, ``b`` passes)."""
    a, fa, b, fb = ends
    for q in list(bounds._values):
        if a < q < b:
            value = bounds.known(q, k)
            if value is None:
                continue
            if value >= target:
                b, fb = q, value - target
            else:
                a, fa = q, value - target
    return a, fa, b, fb


def _estimates_aim(bounds, q_top):
    """Whether one pass estimates ``LB`` well: exact nodes, or a level that
    settled on its second pass (the composite rule converges at once)."""
    if getattr(bounds, "exact", False):
        return True
    return len(bounds._values.get(q_top, ())) <= 2


def _illinois_replay(bounds, k, q_top, target):
    """The replay with Illinois steps on fully evaluated levels.

    For engines whose levels need many passes of the composite rule (a
    client of 10^9 rows): there a one-pass estimate is too coarse to aim.
    Each Illinois step (regula falsi with the stalled end's value halved) is
    a known level; a midpoint still inside the bracket once it is narrower
    than 1e-13 is evaluated itself.
    """
    ends = (0.5, bounds(0.5, k) - target, q_top, bounds(q_top, k) - target)
    a, fa, b, fb = _known_bracket(bounds, k, target, ends)
    lo, hi = 0.5, q_top
    side = 0
    for _ in range(_TIGHT_LEVEL_STEPS):
        mid = 0.5 * (lo + hi)
        while a < mid < b:
            if b - a <= 1e-13:
                x = mid
            else:
                x = b - fb * (b - a) / (fb - fa) if fb != fa else 0.5 * (a + b)
                if not a < x < b:
                    x = 0.5 * (a + b)
            fx = bounds(x, k) - target
            a, fa, b, fb, side = _illinois_step(a, fa, b, fb, side, x, fx)
        lo, hi = (lo, mid) if mid >= b else (mid, hi)
    return hi


def _final_cell(lo, hi, steps, x):
    """The ends ``(hi_f, lo_f)`` of the bisection's cell if ``LB`` crossed at x."""
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if mid >= x else (mid, hi)
    return hi, lo


def _aim(bounds, k, a, b, target, cell, steps=8):
    """The bisection's final cell at a guess of the crossing of ``LB(., k)``.

    Illinois steps (regula falsi, the stalled end's value halved) on the
    one-pass estimates in ``(a, b)``, from the levels already estimated
    there, until two guesses in a row fall in the same ``cell``.
    """
    fa, fb = bounds.estimate(a, k) - target, bounds.estimate(b, k) - target
    for q in list(bounds._values):
        if a < q < b and bounds._values[q]:
            fq = bounds.estimate(q, k) - target
            if fq >= 0:
                b, fb = q, fq
            else:
                a, fa = q, fq
    side, previous = 0, None
    x = b
    for _ in range(steps):
        if fb == fa:
            break
        x = b - fb * (b - a) / (fb - fa)
        if not a < x < b:
            x = 0.5 * (a + b)
        guess = cell(x)
        if guess == previous:
            return guess
        previous = guess
        fx = bounds.estimate(x, k) - target
        a, fa, b, fb, side = _illinois_step(a, fa, b, fb, side, x, fx)
    return cell(x)


def _illinois_step(a, fa, b, fb, side, x, fx):
    """Move the bracket end on x's side to x; halve the stalled end's value
    when the same side moves twice in a row (the Illinois rule)."""
    if fx >= 0:
        if side == 1:
            fa *= 0.5
        return a, fa, x, fx, 1
    if side == -1:
        fb *= 0.5
    return x, fx, b, fb, -1


def _tight_candidates(bounds, ks, target, shift=0):
    """``(level, k + shift, LB)`` for each feasible ``k`` of ``ks`` (increasing).

    The level is the smallest one with ``LB >= target`` to the bisection's
    precision (:func:`_replayed_bisection`); it is non-increasing in ``k``, so
    each bisection runs below the previous level.
    """
    return list(_iter_candidates(bounds, ks, target, shift))


def _iter_candidates(bounds, ks, target, shift=0):
    """:func:`_tight_candidates` one at a time: each bisection runs only when
    the caller asks for the next candidate (a scan may stop early)."""
    q_hi = 1.0
    for k in ks:
        if bounds(q_hi, k) < target:
            continue
        hi = _smallest_level(bounds, k, q_hi, target)
        yield hi, k + shift, bounds(hi, k)
        q_hi = hi


# A one-pass estimate of LB(1/2, k) this far below the target lets the
# bisection run before LB(1/2, k) is evaluated in full (a guess that only
# routes the work, see _smallest_level).
_HALF_GUESS = 1e-2


def _smallest_level(bounds, k, q_hi, target):
    """1/2 if ``LB(1/2, k) >= target``, else the bisection's level on [1/2, q_hi].

    The full bound at 1/2 (no other level uses its rows) is evaluated only
    when it decides: if a one-pass estimate there is far below the target,
    the bisection runs first. A midpoint of it that fails is decided by a
    fully evaluated level above 1/2 that fails, so ``LB(1/2, k) < target``
    (``LB`` increases in the level) and the bisection's level is the plan's,
    as when 1/2 was checked first. If every midpoint passed, ``LB(1/2, k)``
    decides, as before.
    """
    if (
        bounds.known(0.5, k) is None
        and _estimates_aim(bounds, q_hi)
        and bounds.estimate(0.5, k) < target - _HALF_GUESS
    ):
        hi = _replayed_bisection(bounds, k, q_hi, target)
        if hi != _all_pass_level(q_hi):
            return hi
        return 0.5 if bounds(0.5, k) >= target else hi
    if bounds(0.5, k) >= target:
        return 0.5
    return _replayed_bisection(bounds, k, q_hi, target)


def _all_pass_level(q_top):
    """The level the bisection on [1/2, q_top] returns when every midpoint passes."""
    hi = q_top
    for _ in range(_TIGHT_LEVEL_STEPS):
        hi = 0.5 * (0.5 + hi)
    return hi


def _best_simulated(groups, candidates, epsilon, n_bins, utility, stop=None):
    """``(expected, level, k, LB)`` of the candidate with the smallest
    simulated coverage (:func:`_simulated_coverage`; ties: the first).

    ``stop(q, k, expected, best)``, called after each candidate, ends the
    scan when it returns True (it must prove that no later candidate would
    replace the best one, see ``_tight_prune``).
    """
    best = None
    for q, k, value in candidates:
        expected = _simulated_coverage(groups, q, k, epsilon, n_bins, utility)
        if best is None or expected < best[0] - _tight_prune._TIE:
            best = (expected, q, k, value)
        if stop is not None and stop(q, k, expected, best[0]):
            break
    return best


def _tail_stop(groups, bounds, target, epsilon, n_bins, utility):
    """The ``stop`` of :func:`_best_simulated` for the tight search: after a
    candidate past the best one whose simulated coverage rose, probe a few
    levels to prove that no later candidate replaces the best
    (:class:`~._tight_prune._TailProbes`)."""
    counts_of = _simulation_counts(groups, n_bins)

    def simulate(level):
        return _tight_prune._simulated_coverage_all_k(
            groups, level, epsilon, n_bins, utility, counts_of
        )

    probes = _tight_prune._TailProbes(bounds, target, simulate)
    history = []

    def stop(q, k, expected, best):
        history.append((q, k, expected))
        rising = len(history) >= 2 and expected > history[-2][2]
        if not (_tight_prune._PRUNE_TAIL and rising and expected > best):
            return False
        return probes.settled(history, best)

    return stop


@lru_cache(maxsize=16)
def _dpqq_tight_search_chained(sizes, alpha, epsilon, n_bins, utility="quantile"):
    """The plan of rule="tight" before session 9 (a reference for the tests).

    For ``k = 1, 2, ...`` the level is the end of a 30-step bisection of
    ``LB(., k)`` on ``[1/2, q(k - 1)]``, and among these plans the one with
    the smallest expected coverage on public uniform scores is kept
    (:func:`_simulated_coverage`; scanned in the order of ``k``, a plan
    replaces the best only if smaller by more than 1e-9). The bisection is
    replayed with few evaluations (:func:`_replayed_bisection`,
    :class:`_TightBounds`), and the scan stops once a few probed levels
    prove that no larger ``k`` can be kept (``_tight_prune``: the same plan).
    """
    m = len(sizes)
    groups = tuple(sorted(Counter(sizes).items()))
    target = 1.0 - alpha + _BOUND_MARGIN
    bounds = _TightBounds(groups, epsilon, n_bins, utility)
    candidates = _iter_candidates(bounds, range(1, m + 1), target)
    stop = _tail_stop(groups, bounds, target, epsilon, n_bins, utility)
    best = _best_simulated(groups, candidates, epsilon, n_bins, utility, stop)
    return _tight_plan_items(sizes, alpha, epsilon, n_bins, utility, best)


def _tight_plan_items(sizes, alpha, epsilon, n_bins, utility, best):
    """The plan's items from ``best = (S, level, k, LB)`` (None: infeasible)."""
    m = len(sizes)
    if best is None:
        plan = {
            "feasible": False,
            "reason": (
                f"no plan is feasible: with client sizes {_describe(sizes)}, "
                f"epsilon={epsilon:g}, alpha={alpha:g} and n_bins={n_bins} even "
                "the largest level does not guarantee 1 - alpha; use more data "
                "per client, a larger epsilon or fewer bins"
            ),
            "n_bins": n_bins,
            "epsilon": epsilon,
            "rule": "tight",
            "utility": utility,
        }
        return tuple(plan.items())
    _, q, k, value = best
    plan = {
        "feasible": True,
        "gamma": None,
        # The rank each client's level targets (informative; the level is
        # what the mechanism uses).
        "local_ranks": tuple(min(n, math.ceil(q * n - 1e-9)) for n in sizes),
        "k": k,
        "correction": 0,
        "levels": (q,) * m,
        "score": value,
        "coverage_lower": value,
        "n_bins": n_bins,
        "epsilon": epsilon,
        "rule": "tight",
        "utility": utility,
    }
    return tuple(plan.items())
