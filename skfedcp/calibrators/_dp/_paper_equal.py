"""Eq. (6) rank selections of the dp-qq paper plan's gammas, equal client sizes."""

from __future__ import annotations

import numpy as np

from .._qq._coverage import _FEASIBILITY_TOL
from .._qq._selection import _INFEASIBLE, QQSelection, _bisect_k, _EqualSizeCoverage

#: Up to this many clients the gammas of an equal-size plan share one
#: :class:`EqualSelections` (beyond, each gamma runs the staircase of
#: :func:`~skfedcp.calibrators._qq._selection.select_qq_ranks`, which
#: needs fewer evaluations than one bisection per k).
EQUAL_FAST_MAX_CLIENTS = 64


class EqualSelections:
    """``select_qq_ranks([n] * m, alpha)`` for many ``alpha``, values shared.

    The gamma search of the paper plan asks for the eq. (6) pair of one
    ``(m, n)`` at up to 99 targets; each call of ``select_qq_ranks`` starts
    from nothing. Here one :class:`_EqualSizeCoverage` keeps every screened
    and every "quad" value of ``M(l, k)`` across the targets, and a target's
    pair comes from ``m`` bisections on ``l`` (one per ``k``, vectorised)
    instead of the staircase: ``l_k``, the smallest ``l`` with ``M(l, k)``
    valid, is non-increasing in ``k`` (``M`` increases in ``l`` and in
    ``k``, by at least ``1 / (N + 1)`` a step); the smallest valid ``k`` of
    ``l`` is ``k`` exactly on ``l_k <= l < l_(k-1)``, so the first ``l`` of
    each run of the staircase is ``l_k`` for each ``k`` with ``l_k <
    l_(k-1)``. Those candidates go through the same comparison
    (``_EqualSizeCoverage.best``).

    Why the same pair: each decision ``M(l, k) >= threshold`` is the
    staircase's (the screened value, or the "quad" one within
    ``_SCREEN_MARGIN`` of the threshold: the same values whichever pairs
    are asked, the screen being evaluated pair by pair), and monotone in
    ``l`` and ``k``, so both searches find the same smallest valid ``l`` per
    ``k``, hence the same candidates and the same winner.
    """

    def __init__(self, m, n):
        self.m, self.n = m, n
        self.coverage = _EqualSizeCoverage(m, n, None)
        self._last = None  # (threshold, smallest valid l per k) of the last call

    def select(self, alpha):
        """The :class:`QQSelection` of ``select_qq_ranks([n] * m, alpha)``."""
        m, n = self.m, self.n
        threshold = (1.0 - alpha) - _FEASIBILITY_TOL
        if threshold > m * n / (m * n + 1):
            return _INFEASIBLE
        coverage = self.coverage
        coverage.threshold = threshold
        ks = np.arange(1, m + 1, dtype=np.int64)
        lo = np.zeros(m, dtype=np.int64)  # l = 0 is never valid
        hi = np.full(m, n + 1, dtype=np.int64)  # l = n + 1 stands for "none"
        if self._last is not None and self._last[0] <= threshold:
            # A larger threshold: below the last smallest valid l nothing is
            # valid, and the new one is usually a few ranks above it.
            lo = np.maximum(self._last[1] - 1, 0)
            lo, hi = self._gallop(ks, lo, hi)
        first = _bisect_k(lambda k, l: coverage.feasible(l, k), ks, lo, hi)
        self._last = (threshold, first)
        previous = np.r_[n + 1, first[:-1]]
        starts = (first <= n) & (first < previous)
        if not starts.any():
            return _INFEASIBLE
        l_best, k_best, value = self.coverage.best(first[starts], ks[starts])
        return QQSelection((int(l_best),) * m, int(k_best), float(value), True)

    def _gallop(self, ks, lo, hi):
        """Brackets ``lo`` (not valid) < ``hi`` (valid, or ``n + 1``) per k,
        probing ``lo + 1, lo + 2, lo + 4, ...`` until a valid ``l``."""
        step = np.ones_like(lo)
        active = np.arange(lo.shape[0])
        while active.size:
            probe = lo[active] + step[active]
            inside = probe <= self.n
            active, probe = active[inside], probe[inside]
            if not active.size:
                break
            valid = self.coverage.feasible(probe, ks[active])
            hi[active[valid]] = probe[valid]
            lo[active[~valid]] = probe[~valid]
            active = active[~valid]
            step[active] *= 2
        return lo, hi
