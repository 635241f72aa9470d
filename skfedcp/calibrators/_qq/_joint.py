"""Unequal sizes: the joint search over one common level c and k."""

from __future__ import annotations

import math

import numpy as np

from ._batch import _coverage_unequal_batch, _undecided
from ._coverage import _FEASIBILITY_TOL, _TIE_TOL
from ._levels import _level_half_width, _level_search

# Family: l_j(c) = ceil(c (n_j + 1)) for c in (0, 1) (c = 1 - alpha is the
# fixed rule of Appendix A.1), and any k.  l(c) only changes at the levels
# r / (n_j + 1), so the distinct members are those levels ("breakpoints");
# they are sorted, and every rank vector is computed from the fraction in
# integer arithmetic.  M is non-decreasing in every l_j (the estimate is
# pointwise non-decreasing in each local rank) and strictly increasing in k,
# so i_k, the first breakpoint with M(i, k) >= 1 - alpha, is non-increasing
# in k and the optimum is min_k M(i_k, k).  The i_k are found by a divide and
# conquer over k (the ends first, then midpoints, each bracketed by its
# computed neighbours, every level one batched bisection), screening with a
# coarse rule and its error estimate; a decision within 10 estimated errors
# (+1e-12) of the threshold is re-evaluated accurately (~1e-14), and so are
# all candidates near the screened minimum.  The k near A.1's (the "auto"
# tier between the joint search and A.1) first go through the level search of
# _levels.py (_FAST_LEVELS; the same breakpoints, fewer evaluations).
_FAST_LEVELS = True
_NO_FIT = object()


def _fraction_ranks(num, den, sizes, clip):
    """ceil(num / den * (n + 1)) for every size, exactly (integers)."""
    num = np.asarray(num, dtype=np.int64)[:, None]
    den = np.asarray(den, dtype=np.int64)[:, None]
    ranks = -(-(num * (sizes[None, :] + 1)) // den)
    if clip:
        ranks = np.minimum(ranks, sizes[None, :])
    return ranks


def _level_breakpoints(sizes, c_low, c_high=1.0):
    """Sorted distinct levels r / (n + 1) in (c_low, c_high] with 1 <= r <= n."""
    nums, dens = [], []
    for n in sizes.tolist():
        r0 = int(math.floor(c_low * (n + 1))) + 1
        r1 = min(n, int(math.floor(c_high * (n + 1))))
        r = np.arange(max(r0, 1), r1 + 1, dtype=np.int64)
        nums.append(r)
        dens.append(np.full(r.shape[0], n + 1, dtype=np.int64))
    num = np.concatenate(nums)
    den = np.concatenate(dens)
    if num.size == 0:
        return num, den
    g = np.gcd(num, den)
    num, den = num // g, den // g
    code = num * (int(den.max()) + 1) + den
    _, first = np.unique(code, return_index=True)
    num, den = num[first], den[first]
    order = np.argsort(num / den, kind="stable")
    return num[order], den[order]


class _JointCoverage:
    """M(breakpoint i, k) for fixed sizes: coarse screen, accurate near decisions."""

    def __init__(self, sizes, counts, num, den, clip, threshold):
        self.sizes, self.counts = sizes, counts
        self.num, self.den, self.clip = num, den, clip
        self.threshold = threshold
        self.m = int(counts.sum())
        self._accurate = {}
        self._screened = {}

    def ranks(self, idx):
        idx = np.asarray(idx, dtype=np.int64)
        top = idx >= self.num.shape[0]  # sentinel: every client sends +inf
        safe = np.where(top, 0, idx)
        ranks = _fraction_ranks(self.num[safe], self.den[safe], self.sizes, self.clip)
        ranks[top] = self.sizes + 1
        return ranks

    def accurate(self, idx, ks):
        idx = np.asarray(idx, dtype=np.int64)
        ks = np.asarray(ks, dtype=np.int64)
        keys = list(zip(idx.tolist(), ks.tolist(), strict=True))
        todo = [j for j, key in enumerate(keys) if key not in self._accurate]
        if todo:
            rows = np.asarray(todo)
            values = _coverage_unequal_batch(
                self.sizes, self.counts, self.ranks(idx[rows]), ks[rows]
            )
            for j, v in zip(rows.tolist(), values.tolist(), strict=True):
                self._accurate[keys[j]] = v
        return np.array([self._accurate[key] for key in keys])

    def feasible(self, idx, ks):
        idx = np.asarray(idx, dtype=np.int64)
        ks = np.asarray(ks, dtype=np.int64)
        values, errors = _coverage_unequal_batch(
            self.sizes, self.counts, self.ranks(idx), ks, coarse=True
        )
        for j, (v, e) in enumerate(zip(values.tolist(), errors.tolist(), strict=True)):
            self._screened[(int(idx[j]), int(ks[j]))] = (v, e)
        close = _undecided(values, errors, self.threshold)
        if close.any():
            values[close] = self.accurate(idx[close], ks[close])
        return values >= self.threshold

    def decide(self, idx, ks):
        """Feasibility of each pair and its (screened or accurate) value."""
        idx = np.asarray(idx, dtype=np.int64)
        ks = np.asarray(ks, dtype=np.int64)
        ok = self.feasible(idx, ks)
        values = np.array(
            [
                self._accurate.get(key, self._screened[key][0])
                for key in zip(idx.tolist(), ks.tolist(), strict=True)
            ]
        )
        return ok, values


def _first_feasible(cov, ks, levels, start=None):
    """i_k, the first feasible breakpoint for each k, by safeguarded interpolation.

    M(i, k) is monotone in i and close to a smooth function of the level
    c_i, so the crossing of 1 - alpha is first predicted by interpolating M
    linearly in c between the bracket ends (regula falsi); a round that does
    not halve a bracket is followed by a bisection step. Every k runs in the
    same batch. Returns B (no feasible breakpoint) where M(B - 1, k) fails.

    The bracket comes from the two ends, or with ``start`` (a breakpoint
    near the crossing) from :func:`_bracket`. Either way the result is the
    first breakpoint the decisions call feasible (M is monotone in i), so
    only the number of evaluations depends on the start.
    """
    B = levels.shape[0]
    n_k = ks.shape[0]
    if start is not None:
        lo, hi, v_lo, v_hi = _bracket(cov, ks, levels, start)
    else:
        ends = np.concatenate([np.zeros(n_k, np.int64), np.full(n_k, B - 1)])
        ok, vals = cov.decide(ends, np.concatenate([ks, ks]))
        ok_lo, ok_hi = ok[:n_k], ok[n_k:]
        lo = np.where(ok_lo, -1, 0)
        hi = np.where(ok_hi, B - 1, B)
        hi = np.where(ok_lo, 0, hi)
        v_lo, v_hi = vals[:n_k].copy(), vals[n_k:].copy()
    bisect = np.zeros(n_k, dtype=bool)
    threshold = cov.threshold
    active = np.flatnonzero((hi - lo > 1) & (hi < B) & (lo >= 0))
    while active.size:
        l, h = lo[active], hi[active]
        c_l, c_h = levels[l], levels[h]
        span = v_hi[active] - v_lo[active]
        frac = np.where(
            span > 0, (threshold - v_lo[active]) / np.where(span > 0, span, 1), 0.5
        )
        target = c_l + np.clip(frac, 0.0, 1.0) * (c_h - c_l)
        probe = np.searchsorted(levels, target, side="left")
        probe = np.where(bisect[active], (l + h) // 2, probe)
        probe = np.clip(probe, l + 1, h - 1)
        ok, vals = cov.decide(probe, ks[active])
        width = h - l
        lo[active] = np.where(ok, l, probe)
        hi[active] = np.where(ok, probe, h)
        v_lo[active] = np.where(ok, v_lo[active], vals)
        v_hi[active] = np.where(ok, vals, v_hi[active])
        bisect[active] = (hi[active] - lo[active]) * 2 > width
        active = active[hi[active] - lo[active] > 1]
    return hi


def _bracket(cov, ks, levels, start):
    """Per k, a feasible and an infeasible breakpoint around the crossing.

    Probes ``start`` for every k, then steps away from it: M moves with the
    level c about one for one (every client's value is near its level), so
    the next probe is ``c + 1.5 x 2^e x (threshold - M)`` after ``e`` steps
    on the same side, the ends of the range when that leaves it. Returns
    ``(lo, hi, v_lo, v_hi)``: ``lo`` infeasible (``-1``: none below ``hi =
    0``), ``hi`` feasible (``B``: none, ``lo = B - 1``), and their values.
    """
    B = levels.shape[0]
    n_k = ks.shape[0]
    threshold = cov.threshold
    lo = np.full(n_k, -1, dtype=np.int64)
    hi = np.full(n_k, B, dtype=np.int64)
    v_lo = np.zeros(n_k)
    v_hi = np.ones(n_k)
    probe = np.full(n_k, min(max(int(start), 0), B - 1), dtype=np.int64)
    rows = np.arange(n_k)
    steps = np.zeros(n_k)
    while rows.size:
        ok, vals = cov.decide(probe, ks[rows])
        lo[rows] = np.where(ok, lo[rows], probe)
        hi[rows] = np.where(ok, probe, hi[rows])
        v_lo[rows] = np.where(ok, v_lo[rows], vals)
        v_hi[rows] = np.where(ok, vals, v_hi[rows])
        # Unbracketed: only feasible probes so far (lo = -1) or only
        # infeasible ones (hi = B), and not yet at the end of the range.
        down = (lo[rows] < 0) & (hi[rows] > 0)
        up = (hi[rows] >= B) & (lo[rows] < B - 1)
        keep = down | up
        rows, down, vals, probe = rows[keep], down[keep], vals[keep], probe[keep]
        if not rows.size:
            break
        steps[rows] = np.where(steps[rows] > 0, 2.0 * steps[rows], 1.5)
        target = levels[probe] + steps[rows] * (threshold - vals)
        probe = np.searchsorted(levels, target, side="left")
        probe = np.where(
            down,
            np.clip(probe, 0, hi[rows] - 1),
            np.clip(probe, lo[rows] + 1, B - 1),
        )
    return lo, hi, v_lo, v_hi


def _select_joint(sizes_tuple, alpha, clip, only_k=None):
    """Joint search over (c, k); returns (ranks, k, M) or None.

    ``only_k``: search the level c for these k only (not every k).
    """
    sizes_all = np.asarray(sizes_tuple, dtype=np.int64)
    sizes, counts = np.unique(sizes_all, return_counts=True)
    m = int(counts.sum())
    threshold = (1.0 - alpha) - _FEASIBILITY_TOL
    if only_k is not None:
        ks = np.asarray(only_k, dtype=np.int64).reshape(-1)
        if _FAST_LEVELS:
            result = _pick_near_a1(sizes, counts, sizes_tuple, alpha, clip, ks)
            if result is not _NO_FIT:
                return result
        num, den = _level_breakpoints(sizes, 0.0)
        cov = _JointCoverage(sizes, counts, num, den, clip, threshold)
        # The search starts at Appendix A.1's level, c = 1 - alpha, near
        # which the crossings of these k lie.
        start = int(np.searchsorted(num / den, 1.0 - alpha, side="left"))
        return _pick(cov, ks, sizes, sizes_tuple, threshold, start=start)

    # Lower end of the useful levels: bisection on real c with k = m (if
    # M(l(c), m) < 1 - alpha no pair at level c is valid).
    def valid_at(c):
        num, den = float(c).as_integer_ratio()
        ranks = _fraction_ranks([num], [den], sizes, clip)
        values, errors = _coverage_unequal_batch(sizes, counts, ranks, [m], coarse=True)
        if _undecided(values[0], errors[0], threshold):
            values = _coverage_unequal_batch(sizes, counts, ranks, [m])
        return values[0] >= threshold

    c_lo, c_hi = 0.0, 1.0
    while c_hi - c_lo > 1.0 / (4.0 * (int(sizes.max()) + 1)):
        c_mid = 0.5 * (c_lo + c_hi)
        if valid_at(c_mid):
            c_hi = c_mid
        else:
            c_lo = c_mid
    num, den = _level_breakpoints(sizes, c_lo)
    if num.size == 0:
        return None
    cov = _JointCoverage(sizes, counts, num, den, clip, threshold)
    return _pick(cov, np.arange(1, m + 1), sizes, sizes_tuple, threshold)


def _pick_near_a1(sizes, counts, sizes_tuple, alpha, clip, ks):
    """:func:`_pick` by the level search of :mod:`._levels`, or ``_NO_FIT``.

    Only the breakpoints of the level range around A.1's level are listed;
    every k's first valid breakpoint lies strictly inside it (else
    ``_NO_FIT``), so it is the first valid breakpoint of the whole list.
    """
    threshold = (1.0 - alpha) - _FEASIBILITY_TOL
    half = _level_half_width(sizes, counts, alpha, threshold, ks)
    if half is None:
        return _NO_FIT
    for _ in range(6):  # at least 8 breakpoints on each side (few sizes)
        num, den = _level_breakpoints(sizes, 1.0 - alpha - half, 1.0 - alpha + half)
        start = int(np.searchsorted(num / den, 1.0 - alpha, side="left"))
        if min(start, num.size - start) >= 8:
            break
        half *= 2.0
    else:
        return _NO_FIT
    cov = _JointCoverage(sizes, counts, num, den, clip, threshold)
    ik = _level_search(cov, ks, num / den, start)
    if ik is None:
        return _NO_FIT
    return _pick(cov, ks, sizes, sizes_tuple, threshold, ik=ik)


def _pick(cov, ks, sizes, sizes_tuple, threshold, start=None, ik=None):
    """First feasible breakpoint for each k in ``ks``, then the best pair.

    ``ik``: those breakpoints, already found (:func:`_pick_near_a1`).
    """
    counts = cov.counts
    B = cov.num.shape[0]
    num, den = cov.num, cov.den
    if ik is None:
        ik = _first_feasible(cov, ks, num / den, start)
    # Valid candidates: a finite threshold needs k <= #clients with l_j <= n_j.
    ok = ik < B
    ranks = cov.ranks(np.minimum(ik, B - 1))
    m_active = ((ranks <= sizes[None, :]) * counts[None, :]).sum(axis=1)
    ok &= ks <= m_active
    if not ok.any():
        return None
    cand_i, cand_k = ik[ok], ks[ok]
    screened = np.array(
        [
            cov._screened.get((int(i), int(k)), (np.nan, 0.0))
            for i, k in zip(cand_i, cand_k, strict=True)
        ]
    )
    screened, errors = screened[:, 0], screened[:, 1]
    missing = np.isnan(screened)
    if missing.any():
        screened[missing] = cov.accurate(cand_i[missing], cand_k[missing])
    j_min = int(np.argmin(screened))
    near = screened <= screened[j_min] + 10.0 * (errors + errors[j_min]) + 1e-12
    values = cov.accurate(cand_i[near], cand_k[near])
    values = np.where(values >= threshold, values, np.inf)
    best = np.min(values)
    if not np.isfinite(best):
        return None
    tied = np.flatnonzero(values <= best + _TIE_TOL)
    # Tie rule: the largest level (largest ranks), then the smallest k.
    order = sorted(tied.tolist(), key=lambda j: (-cand_i[near][j], cand_k[near][j]))
    j = order[0]
    i_best, k_best = int(cand_i[near][j]), int(cand_k[near][j])
    level_ranks = dict(
        zip(sizes.tolist(), cov.ranks([i_best])[0].tolist(), strict=True)
    )
    return tuple(level_ranks[n] for n in sizes_tuple), k_best, float(values[j])
