"""Riemann lower bounds on the scores of the Byzantine dp-qq paper plan's gammas."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from scipy import special

from ._paper_bounds import certified_kappas, fixed_ranks, shifted_bounds
from ._plan import _BOUND_DP_MAX_CLIENTS, _FINE_MARGIN, _FINE_NODES

#: Gammas bounded in one count DP (up to ``_BOUND_DP_MAX_CLIENTS`` clients;
#: one at a time through the product tree beyond).
_BATCH = 16
_COARSE_NODES = 16


class CoarseBounds:
    """Lower bounds on the scores of a search's gammas (unequal sizes).

    The argument of :func:`._byzantine._unequal_score_bound`, with the
    honest set's ``c = 0`` rank replaced by ``kappa``, certified by upper
    Riemann sums (:func:`._paper_bounds.certified_kappas`: every ``r <
    kappa`` has ``M_H0(l, r) < tau - 1e-10`` with 1e-9 to spare for the
    quadrature, so the pair's ``r >= kappa``), and the score ``M(l + l_cor,
    r + c) >= M(l + l_cor, kappa + c)`` by its lower Riemann sum
    (:func:`._paper_bounds.shifted_bounds`; ``+inf`` when fewer than
    ``kappa + c`` clients stay finite: the pair needs ``r + 2c``, the gamma
    is skipped). ``H0`` may be any honest set: the one kept leaves out the
    ``c`` clients least likely below the first target of a batch. When some
    A.1 rank exceeds its size, the pair's ranks may be A.1's or their
    clipped ones: the smaller bound of both. ``-inf`` when the nodes
    certify no ``kappa``.
    """

    def __init__(self, sizes, c):
        size_counts = sorted(Counter(sizes).items())
        self.ns = np.array([n for n, _ in size_counts], dtype=np.float64)
        self.counts = np.array([k for _, k in size_counts], dtype=np.float64)
        self.c = c
        self.batched = len(sizes) <= _BOUND_DP_MAX_CLIENTS
        self.known: dict[int, float] = {}

    def bound(self, index, taus, corrections, best):
        """A lower bound on the score of gamma ``index`` of the grid.

        On ``_COARSE_NODES`` nodes, for this gamma and (with the count DP)
        the next ones that the cheap test ``tau + 1/(N + 1)`` leaves open
        against ``best`` (bounds do not depend on ``best``: they stay valid
        as it improves); redone on ``_FINE_NODES`` when within
        ``_FINE_MARGIN`` of ``best``. Past ``_BOUND_DP_MAX_CLIENTS`` clients
        (one gamma at a time) a quarter of ``_COARSE_NODES`` first: a value
        that already clears ``best`` is returned (not kept: it is asked
        once, the search moves past it).
        """
        if index not in self.known:
            n_total = float(self.ns @ self.counts)
            batch = [
                i
                for i in range(index, len(taus))
                if corrections[i] < self.ns.max()
                and taus[i] + 1.0 / (n_total + 1) - 3e-10 < best
            ][: _BATCH if self.batched else 1]
            batch = batch if index in batch else [index]
            rows = [(taus[i], corrections[i]) for i in batch]
            # One gamma at a time (the product tree, whose cost grows with
            # the nodes): a quarter of the nodes first, enough past the
            # first gammas (their margin grows with tau, the gap of a
            # Riemann bound shrinks as 1 / nodes); all of them if short.
            if not self.batched:
                value = self._bounds(rows, _COARSE_NODES // 4)[0]
                if value - 3e-10 >= best:
                    return value
            self.known.update(
                zip(batch, self._bounds(rows, _COARSE_NODES), strict=True)
            )
        value = self.known[index]
        if best - _FINE_MARGIN <= value < best + 3e-10:
            value = self._bounds([(taus[index], corrections[index])], _FINE_NODES)[0]
        return value

    def _bounds(self, rows, n_nodes):
        """One bound per ``(tau, correction)`` of ``rows``."""
        ns = self.ns
        choices, owner = [], []
        for row, (tau, _) in enumerate(rows):
            ranks = fixed_ranks(ns, 1.0 - tau)
            choices.append(ranks)
            owner.append(row)
            if (ranks > ns).any():
                choices.append(np.minimum(ranks, ns))
                owner.append(row)
        ranks = np.array(choices)
        taus = np.array([rows[row][0] for row in owner])
        shifted = ranks + np.array([[rows[row][1]] for row in owner])
        honest = self._honest(ranks[0], taus[0])
        keep = honest > 0
        out, kappa, center = certified_kappas(
            ns[keep], honest[keep], ranks[:, keep], taus, n_nodes, self.batched
        )
        out = shifted_bounds(
            ns, self.counts, shifted, kappa + self.c, center, out, n_nodes, self.batched
        )
        bounds = [math.inf] * len(rows)
        for row, value in zip(owner, out.tolist(), strict=True):
            bounds[row] = min(bounds[row], value)
        return bounds

    def _honest(self, ranks, tau):
        """Counts per size of ``H0``: without the ``c`` clients least likely
        below ``tau`` (inactive ones first)."""
        ns = self.ns
        active = ranks <= ns
        p = np.zeros(ns.size)
        p[active] = special.betainc(
            ranks[active], ns[active] - ranks[active] + 1.0, tau
        )
        honest = self.counts.copy()
        left = self.c
        for j in np.argsort(p, kind="stable"):
            drop = min(left, int(honest[j]))
            honest[j] -= drop
            left -= drop
            if left == 0:
                break
        return honest
