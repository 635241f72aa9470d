"""Eq. (6) rank selections of the dp-qq paper plan's gammas, equal client sizes."""

from __future__ import annotations

import numpy as np

from .._qq._coverage import _FEASIBILITY_TOL
from .._qq._selection import (
    _INFEASIBLE,
    QQSelection,
    _EqualSizeCoverage,
    _staircase,
)


class EqualSelections:
    """``select_qq_ranks([n] * m, alpha)`` for many ``alpha``, values shared.

    The gamma search of the paper plan asks for the eq. (6) pair of one
    ``(m, n)`` at up to 99 targets; each call of ``select_qq_ranks`` starts
    from nothing. Here one :class:`_EqualSizeCoverage` keeps every screened
    and every "quad" value of ``M(l, k)`` across the targets, and a target's
    pair comes from the staircase with the roles of ``l`` and ``k`` swapped:
    ``l_k``, the smallest ``l`` with ``M(l, k)`` valid, is non-increasing in
    ``k`` (``M`` increases in ``l`` and in ``k``, by at least ``1 / (N +
    1)`` a step), found by divide and conquer over ``k``; at a larger
    target than the last, every ``l`` below the last ``l_k`` is known not
    valid (no evaluation). The smallest valid ``k`` of ``l`` is ``k``
    exactly on ``l_k <= l < l_(k-1)``, so the first ``l`` of each run of
    the staircase of ``select_qq_ranks`` is ``l_k`` for each ``k`` with
    ``l_k < l_(k-1)``. Those candidates go through the same comparison
    (``_EqualSizeCoverage.best``).

    Why the same pair: each decision ``M(l, k) >= threshold`` is the
    staircase's (the screened value, or the "quad" one within
    ``_SCREEN_MARGIN`` of the threshold: the same values whichever pairs
    are asked, the screen being evaluated pair by pair), and monotone in
    ``l`` and ``k``, so both searches find the same smallest valid ``l`` per
    ``k``, hence the same candidates and the same winner. About half the
    time of ``select_qq_ranks`` per gamma from 8 to 3,000 clients.
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
        floor = np.zeros(m, dtype=np.int64)
        if self._last is not None and self._last[0] <= threshold:
            # A larger threshold: below the last smallest valid l of each k
            # nothing is valid (no evaluation needed there).
            floor = self._last[1]

        def feasible(k, l):
            out = np.zeros(k.shape[0], dtype=bool)
            above = l >= floor[k - 1]
            if above.any():
                out[above] = coverage.feasible(l[above], k[above])
            return out

        ks = np.arange(1, m + 1, dtype=np.int64)
        # The staircase of select_qq_ranks with the roles of l and k swapped:
        # the smallest valid l (n + 1: none) is non-increasing in k.
        first = _staircase(feasible, ks, n)
        self._last = (threshold, first)
        previous = np.r_[n + 1, first[:-1]]
        starts = (first <= n) & (first < previous)
        if not starts.any():
            return _INFEASIBLE
        l_best, k_best, value = coverage.best(first[starts], ks[starts])
        return QQSelection((int(l_best),) * m, int(k_best), float(value), True)
