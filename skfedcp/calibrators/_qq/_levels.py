"""The level search of local_rank="auto": every k's first valid level at once."""

from __future__ import annotations

import numpy as np
from scipy import special

from ._batch import _batch_windows, _sinh_features, _sinh_rule, _undecided
from ._poisbin import _whole_product

# The level search (the "auto" tier of _selection._select_auto_unequal) looks,
# for each k of a few near Appendix A.1's, for i_k, the first breakpoint of
# the levels c = r / (n_j + 1) with M(i, k) >= 1 - alpha.  Near A.1's level
# those crossings lie within a few thousandths of a level of each other
# (about 1 / (sum_j of the client densities at 1 - alpha) per k), where every
# M is about 1 - alpha: the integrands of every (i, k) the search meets
# there are steps at about the same t, of about the same width.  So one node
# set serves them all:
#
# * the nodes: a sinh-mapped Gauss-Legendre rule (_batch's comment) around
#   the step of A.1's k at A.1's level, on the window that holds the windows
#   of every level of the range and every k (1 or 0 outside, 1e-17); two
#   rules (_LEVEL_NODES per side), their gap the error estimate;
# * each client's P(value <= t) at the nodes, for every rank the range
#   reaches: betainc at the lowest rank of each size, then
#   I_t(l + 1, n - l) = I_t(l, n - l + 1) - C(n, l) t^l (1 - t)^(n - l);
# * one law (the count's product tree) per level gives M(i, k) for every k.
#
# The search.  A tree at A.1's level first.  From the law at any level, the
# jump of M(k) when a client's rank grows from l is about
# int C(n, l) t^l (1 - t)^(n - l) P(S(t) = k - 1) dt (first order: the count
# of the others taken as the whole count's); summed over the breakpoints of
# the range, these predict M(i, k) at every breakpoint, hence each k's
# crossing (within a breakpoint or two: one tree per k, about).  Each round
# evaluates, for every k not yet bracketed between two adjacent breakpoints,
# the breakpoints within _LEVEL_HALF of its predicted crossing with one tree:
# the clients whose rank changes inside that window are left out of it and
# multiplied in afterwards, level by level (one Bernoulli factor each, on the
# counts that can still matter).  Every evaluated level updates every k's
# bracket (M is non-decreasing in the level).  A decision within ten gaps
# (+1e-12) of the threshold is the accurate rule's (the joint search's own),
# as before.  The result is the first breakpoint the decisions call valid,
# the same as the joint search's: only the number of evaluations changes.
# If a predicted crossing leaves the range (or lies at its end), the nodes
# do not fit (a client much narrower than the others), or the rounds run
# out, the caller's search runs instead.
_LEVEL_NODES = (24, 32)
# Half-width of the level range, in units of the predicted distance between
# the crossings of two successive k, plus this many units.
_LEVEL_RANGE_PAD = 6.0
_LEVEL_ROUNDS = 10
# Breakpoints on each side of a predicted crossing evaluated with its tree.
_LEVEL_HALF = 3


class _LevelLaws:
    """M(i, k) for the breakpoints of a level range, every k of ``ks`` per law."""

    def __init__(self, cov, ks, levels, i_min, i_max, center_level):
        self.cov, self.ks, self.levels = cov, ks, levels
        self.i_min, self.i_max = i_min, i_max
        sizes, counts = cov.sizes, cov.counts
        all_ranks = cov.ranks(np.arange(i_min, i_max + 1))
        active = all_ranks <= sizes[None, :]
        self.m_active = (active * counts[None, :]).sum(axis=1)
        self.r_lo, r_hi = all_ranks[0], all_ranks[-1]
        k_lo, k_hi = int(ks[0]), int(ks[-1])
        if self.m_active[-1] < 1 or k_lo > self.m_active[0]:
            raise _NoFit
        # The window of every (level, k) of the range.  While the active
        # clients stay the same, its lower end grows with the ranks and k, so
        # does its upper end: the lower end at the first level of each run
        # of equal m_active (k_lo), the upper end at the last (the largest k
        # it holds); fewer active clients only raise the lower end.
        change = np.flatnonzero(np.diff(self.m_active)) + 1
        lasts = np.concatenate([change - 1, [self.m_active.shape[0] - 1]])
        ma_last = self.m_active[lasts]
        k_top = np.minimum(k_hi, ma_last)
        a, _ = _batch_windows(sizes, all_ranks[:1], np.array([k_lo]), self.m_active[:1])
        _, b = _batch_windows(sizes, all_ranks[lasts], k_top, ma_last)
        a, b = float(a[0]), float(np.max(b))
        if not b > a:
            raise _NoFit
        center = cov.ranks([center_level])[0]
        act = center <= sizes
        groups = [
            ((int(n), int(r)), int(c))
            for n, r, c in zip(sizes[act], center[act], counts[act], strict=True)
        ]
        k_mid = min(int(ks[ks.shape[0] // 2]), sum(c for _, c in groups))
        features = _sinh_features(groups, k_mid, a, b)
        if features is None or len(features) != 1:
            raise _NoFit
        rules = [_sinh_rule(features, a, b, n_side) for n_side in _LEVEL_NODES]
        nodes = [t for t, _ in rules]
        weights = [w for _, w in rules]
        self.split = nodes[0].shape[0]
        self.t = np.concatenate(nodes)
        self.w = weights
        self.a = a
        # Each size's P(value <= t) for the ranks r_lo..min(r_hi, n).
        top = np.minimum(r_hi, sizes)
        width = np.maximum(top - self.r_lo + 1, 0)
        self.offset = np.concatenate([[0], np.cumsum(width)[:-1]])
        self.zero = int(width.sum())  # index of the column of zeros
        t = self.t
        cols = np.zeros((self.zero + 1, t.shape[0]))
        has = width > 0
        n_f = sizes[has].astype(np.float64)
        l_f = self.r_lo[has].astype(np.float64)
        base = special.betainc(l_f[:, None], (n_f - l_f + 1.0)[:, None], t[None, :])
        rows = np.repeat(np.flatnonzero(has), width[has])
        step = np.arange(rows.shape[0]) - np.repeat(self.offset[has], width[has])
        n_r = sizes[rows].astype(np.float64)
        l_r = (self.r_lo[rows] + step).astype(np.float64)
        log_t, log_1mt = np.log(t), np.log1p(-t)
        log_c = (
            special.gammaln(n_r + 1.0)
            - special.gammaln(l_r + 1.0)
            - special.gammaln(n_r - l_r + 1.0)
        )
        pmf = np.exp(
            log_c[:, None] + l_r[:, None] * log_t + (n_r - l_r)[:, None] * log_1mt
        )
        # p(l_lo + j) = p(l_lo) - sum_{i < j} pmf(l_lo + i), per size: a
        # cumulative sum of the shifted pmf, reset at each size's first rank.
        firsts = self.offset[has]
        shifted = np.zeros_like(pmf)
        shifted[1:] = pmf[:-1]
        shifted[firsts] = 0.0
        totals = np.add.reduceat(shifted, firsts, axis=0)
        shifted[firsts[1:]] -= totals[:-1]
        drop = np.cumsum(shifted, axis=0)
        cols[: self.zero] = np.clip(np.repeat(base, width[has], axis=0) - drop, 0, 1)
        self.cols = cols
        # The pmf C(n, l) t^l (1 - t)^(n - l) of each column: what a client's
        # P(value <= t) loses when its rank l grows by one.
        self.pmf = np.zeros_like(cols)
        self.pmf[: self.zero] = pmf
        # The ranks at every breakpoint of the range, as column indices.
        self.index = np.where(
            active, self.offset[None, :] + all_ranks - self.r_lo[None, :], self.zero
        )
        self.values = {}
        self.laws = {}
        self._predicted = {}

    def window(self, center, half):
        """M(i, k) for the breakpoints within ``half`` of ``center``, one tree.

        The clients whose rank changes inside the window are left out of the
        tree (the "rest") and multiplied in afterwards, every level at once,
        one Bernoulli factor each. Only the counts that can still end in
        ``k_lo - 1 .. k_hi - 1`` are followed: the rest's mass below
        ``k_lo - 1 - h`` (h clients left out) ends below ``k_lo - 1`` whatever
        they do, and mass beyond ``k_hi - 1`` never comes back. Returns the
        levels evaluated.
        """
        first = max(center - half, self.i_min)
        last = min(center + half, self.i_max)
        index = self.index[first - self.i_min : last - self.i_min + 1]
        counts = self.cov.counts
        moving = (index != index[0]).any(axis=0)
        held = int(counts[moving].sum())
        k_lo, k_hi = int(self.ks[0]), int(self.ks[-1])
        s_lo = max(k_lo - 1 - held, 0)
        n_states = k_hi - s_lo
        p = np.repeat(self.cols[index[0][~moving]], counts[~moving], axis=0).T
        n_t = self.t.shape[0]
        if p.shape[1]:
            polys = np.empty(p.shape + (2,))
            polys[..., 0] = 1.0 - p
            polys[..., 1] = p
            cdf = np.cumsum(_whole_product(polys), axis=1)
        else:
            cdf = np.ones((n_t, 1))
        # cdf[:, s] = P(S_rest <= s), the last column repeated beyond.
        top = cdf.shape[1] - 1
        at = np.minimum(np.arange(s_lo - 1, k_hi), top)
        tracked = cdf[:, at]
        if s_lo == 0:
            tracked[:, 0] = 0.0
        base = tracked[:, 0].copy()
        part = np.diff(tracked, axis=1)  # P(S_rest = s), s_lo..k_hi - 1
        n_lev = index.shape[0]
        part = np.broadcast_to(part, (n_lev, n_t, n_states)).copy()
        for g in np.flatnonzero(moving).tolist():
            q = self.cols[index[:, g]][:, :, None]  # (levels, nodes, 1)
            for _ in range(int(counts[g])):
                moved = part[:, :, :-1] * q
                part *= 1.0 - q
                part[:, :, 1:] += moved
        below = base[None, :, None] + np.cumsum(part, axis=2)
        split = self.split
        done = []
        for r, i in enumerate(range(first, last + 1)):
            m_active = int(self.m_active[i - self.i_min])
            inside = self.ks <= m_active
            cols = np.minimum(self.ks, m_active) - 1 - s_lo
            f = below[r][:, cols]
            coarse = self.a + self.w[0] @ f[:split]
            fine = self.a + self.w[1] @ f[split:]
            gaps = np.where(inside, np.abs(fine - coarse), 0.0)
            self.values[i] = (np.where(inside, fine, 1.0), gaps)
            self.laws[i] = part[r][:, self.ks - 1 - s_lo]  # P(S = k - 1)
            done.append(i)
        return done

    def predict(self, i):
        """Predicted M(i', k) for every breakpoint i' of the range (rows), every k.

        First order from the law at ``i``: a client whose rank grows from l
        moves M(k) by about int C(n, l) t^l (1 - t)^(n - l) P(S(t) = k - 1) dt.
        """
        if i in self._predicted:
            return self._predicted[i]
        weight = self.laws[i][self.split :] * self.w[1][:, None]
        jumps = self.pmf[:, self.split :] @ weight  # (columns, ks)
        index = self.index
        b, g = np.nonzero(index[1:] != index[:-1])
        step = np.zeros((index.shape[0], self.ks.shape[0]))
        np.add.at(step, b + 1, jumps[index[b, g]] * self.cov.counts[g][:, None])
        total = np.cumsum(step, axis=0)
        values, _ = self.values[i]
        out = values[None, :] + total - total[i - self.i_min][None, :]
        self._predicted[i] = out
        return out


class _NoFit(Exception):
    """The level range or its nodes do not fit: the caller's search runs."""


def _level_search(cov, ks, levels, start):
    """i_k (first feasible breakpoint) for each k, or None (see above)."""
    try:
        return _search(cov, np.asarray(ks, dtype=np.int64), levels, start)
    except _NoFit:
        return None


def _level_half_width(sizes, counts, alpha, threshold, ks):
    """Half-width of the level range around A.1's level 1 - alpha, or None.

    The crossings of k and k + 1 lie about 1 / (the density of the client
    values at the threshold) apart in level (M moves with the level about one
    for one); the range holds those of ``ks`` with _LEVEL_RANGE_PAD to spare.
    """
    n_f = sizes.astype(np.float64)
    l_f = np.ceil((1.0 - alpha) * (n_f + 1.0))
    act = l_f <= n_f
    n_f, l_f = n_f[act], l_f[act]
    t0 = min(max(threshold, 1e-9), 1.0 - 1e-9)
    dens = np.exp(
        (l_f - 1.0) * np.log(t0)
        + (n_f - l_f) * np.log1p(-t0)
        - special.betaln(l_f, n_f - l_f + 1.0)
    )
    density = float(dens @ counts[act])
    if not density > 0:
        return None
    return (_LEVEL_RANGE_PAD + 0.5 * (ks[-1] - ks[0] + 1)) / density


def _search(cov, ks, levels, start):
    B = levels.shape[0]
    threshold = cov.threshold
    i_min, i_max = 0, B - 1
    if not i_min < start < i_max:
        raise _NoFit
    laws = _LevelLaws(cov, ks, levels, i_min, i_max, start)
    n_k = ks.shape[0]
    lo = np.full(n_k, -1, dtype=np.int64)
    hi = np.full(n_k, B, dtype=np.int64)

    def absorb(evaluated):
        for i in evaluated:
            values, gaps = laws.values[i]
            ok = values >= threshold
            for j in np.flatnonzero(_undecided(values, gaps, threshold)):
                ok[j] = cov.accurate([i], [ks[j]])[0] >= threshold
            for col in range(n_k):
                cov._screened[(i, int(ks[col]))] = (
                    float(values[col]),
                    float(gaps[col]),
                )
            hi[ok & (i < hi)] = i
            lo[~ok & (i > lo)] = i

    absorb(laws.window(start, _LEVEL_HALF))
    for _ in range(_LEVEL_ROUNDS):
        todo = np.flatnonzero(hi - lo > 1)
        if todo.size == 0:
            # Each k's crossing between two listed breakpoints (not at an end
            # of the range, whose neighbours outside were not listed).
            if (lo < 0).any() or (hi > i_max).any():
                raise _NoFit
            return hi
        centers = set()
        for j in todo.tolist():
            # Predict from the evaluated end of the bracket nearest the threshold.
            ends = [e for e in (lo[j], hi[j]) if e in laws.laws]
            base = min(ends, key=lambda e: abs(laws.values[e][0][j] - threshold))
            predicted = laws.predict(base)[:, j]
            guess = i_min + int(np.searchsorted(predicted, threshold, side="left"))
            if not i_min < guess <= i_max:
                raise _NoFit
            guess = min(max(guess, lo[j] + 1), hi[j] - 1 if hi[j] < B else guess)
            if guess in laws.values and guess - 1 in laws.values:
                guess = (lo[j] + hi[j]) // 2 if hi[j] < B and lo[j] >= 0 else guess
            centers.add(int(guess))
        evaluated = []
        for c in sorted(centers):
            if c in laws.values and c - 1 in laws.values:
                continue
            evaluated.extend(laws.window(c, _LEVEL_HALF))
        absorb(evaluated)
    raise _NoFit
