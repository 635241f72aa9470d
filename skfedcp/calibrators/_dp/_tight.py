"""Tight corrections of FedCP²-QQ (``rule="tight"``): guaranteed bounds, plan."""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache

import numpy as np
from scipy import special

from ...privacy._quantile import _release_log_probabilities
from ...privacy._tight import _rank_law
from ._common import _describe
from ._laws import _poisbin_at_most, _rank_cdf_on

# --------------------------------------------------------------------------
# Tight corrections (rule="tight", a skfedcp extension; proof in the user
# guide, "Tight corrections")

_GAUSS_EXACT_MAX_N = 4000
# Slack on the numerical bound when the quadrature is not exact.
_QUADRATURE_SLACK = 1e-10
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


@lru_cache(maxsize=16)
def _gauss_nodes01(n_nodes):
    """Gauss-Legendre nodes and weights on [0, 1] (cached: the search
    evaluates the bound at many levels with the same degree)."""
    x, w = special.roots_legendre(n_nodes)
    x, w = (x + 1.0) / 2.0, w / 2.0
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


# Bisection steps on the level (precision 2**-31 on [1/2, 1]).
_TIGHT_LEVEL_STEPS = 30
# Public uniform client data sets (per size) that rank the feasible plans.
_TIGHT_SIMULATIONS = 200
_TIGHT_SEED = 20260101


def _simulated_coverage(groups, level, k, epsilon, n_bins, utility="quantile"):
    """Expected coverage of the plan ``(level, k)`` on i.i.d. uniform scores.

    Used only to choose among plans that all guarantee ``1 - alpha``: it
    reads no data (public uniform samples from a fixed seed), so it costs no
    privacy. Clients are independent, so ``P(threshold <= e_b) = P(at least
    k clients release <= e_b)`` follows exactly from one client's marginal
    release law (per size), which is averaged over the simulated data sets.
    """
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    rng = np.random.default_rng(_TIGHT_SEED)
    cdfs = []
    for n, _ in groups:
        scores = rng.uniform(size=(_TIGHT_SIMULATIONS, n))
        log_p = _release_log_probabilities(scores, level, epsilon, edges, utility)
        cdfs.append(np.cumsum(np.exp(log_p).mean(axis=0)))
    counts = [c for _, c in groups]
    above = _poisbin_at_most(np.array(cdfs), counts, k)  # P(T > e_b)
    # E[F(T)] = e_1 + sum_b (e_{b+1} - e_b) P(T > e_b), F(+inf) = 1.
    return float(edges[1] + np.diff(edges[1:]) @ above[:-1])


@lru_cache(maxsize=256)
def _dpqq_tight_search(sizes, alpha, epsilon, n_bins, utility="quantile"):
    """Plan of rule="tight": a guaranteed coverage of ``1 - alpha``, no more.

    Every client runs the mechanism at one common level ``q`` in [1/2, 1]
    (any real number: the level is a public parameter, not a rank) and the
    server keeps the ``k``-th smallest release. The guaranteed coverage
    ``LB(q, k)`` increases in ``q`` and in ``k``; for each ``k`` the smallest
    ``q`` with ``LB >= 1 - alpha`` is found by bisection (so every feasible
    ``k`` gives a plan with ``LB`` at ``1 - alpha``), and among these plans
    the one with the smallest expected coverage on public uniform scores is
    kept (:func:`_simulated_coverage`; ties: the smaller ``k``).
    """
    m = len(sizes)
    groups = tuple(sorted(Counter(sizes).items()))
    target = 1.0 - alpha + _BOUND_MARGIN

    def bound(q, k):
        return _tight_lower_bound(groups, q, k, epsilon, n_bins, utility)

    candidates = []
    q_hi = 1.0
    for k in range(1, m + 1):
        if bound(q_hi, k) < target:
            continue
        lo, hi = 0.5, q_hi
        if bound(lo, k) >= target:
            hi = lo
        else:
            for _ in range(_TIGHT_LEVEL_STEPS):
                mid = 0.5 * (lo + hi)
                lo, hi = (lo, mid) if bound(mid, k) >= target else (mid, hi)
        candidates.append((hi, k, bound(hi, k)))
        q_hi = hi  # the smallest level is non-increasing in k
    if not candidates:
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
    best: tuple[float, float, int, float] | None = None
    for q, k, value in candidates:
        expected = _simulated_coverage(groups, q, k, epsilon, n_bins, utility)
        if best is None or expected < best[0] - 1e-9:
            best = (expected, q, k, value)
    assert best is not None  # candidates is not empty
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
