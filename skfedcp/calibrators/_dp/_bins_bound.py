"""The count law behind the automatic bins, and a certified bound on its value."""

from __future__ import annotations

import numpy as np

from .._qq._poisbin import _binomial_block

#: A bin count is skipped when its value's lower bound clears the best by
#: this much on top of the tie rule's 1e-12: the bound and the exact value
#: each round to ~1e-13 (sums of <= 1e5 non-negative terms of at most 1).
_MARGIN = 1e-9
#: Columns of the first pass of the bound, then the refinement of the cells
#: that carry most of its gap: each split into ``_SPLIT`` parts, at most
#: ``_ROUNDS`` times (then the exact value is computed).
_FIRST = 128
_SPLIT = 16
_ROUNDS = 4


def kth_survival(groups, k):
    """``P(fewer than k releases are <= e_b)`` for every column ``b``.

    ``groups`` lists ``(cdf, count)`` (``count`` clients whose release has
    CDF ``cdf`` on the columns). The law of the count so far is built group
    by group on the counts ``0..k-1`` only: a count never decreases, so the
    states ``>= k`` never feed a lower one, and each kept state receives the
    same products in the same order as in the DP over every count (the same
    bits).
    """
    total = np.ones((1, groups[0][0].shape[0]))  # law of the count so far
    for cdf, count in groups:
        pmf = _binomial_block(count, np.clip(cdf, 0.0, 1.0), min(count, k - 1) + 1)
        rows = min(total.shape[0] + count, k)
        new = np.zeros((rows, total.shape[1]))
        for i in range(pmf.shape[0]):
            stop = min(i + total.shape[0], rows)
            new[i:stop] += total[: stop - i] * pmf[i]
        total = new
    return total.sum(axis=0)


def value_beats(groups, k, edges, best_value):
    """False when the expected k-th smallest release certainly cannot beat
    ``best_value`` by the tie rule (``value < best_value - 1e-12``), else True.

    The value is ``e_1 + sum_b w_b S_b`` (``w_b = e_{b+1} - e_b``, ``S_b =
    P(X_(k) > e_b)``, see :func:`._laws._expected_kth_smallest`), and ``S``
    does not increase in ``b`` (each client's CDF does not decrease). On
    sampled columns ``c_0 < ... < c_J`` (``c_J`` the last), every ``b`` in
    ``(c_{i-1}, c_i]`` has ``S_{c_i} <= S_b <= S_{c_{i-1}}`` (``S <= 1``
    before ``c_0``): lower and upper sums. The cells carrying most of the
    gap are split until the lower sum clears the best (False), the upper
    sum is below it (True: the exact value is needed) or the rounds end
    (True).
    """
    n_cols = edges.shape[0] - 2  # columns b = 1..B-1 of the value's sum
    cum = np.r_[0.0, np.cumsum(np.diff(edges[1:]))]  # cum[c + 1]: w_0..w_c
    sampled = np.unique(np.linspace(0, n_cols - 1, min(_FIRST, n_cols)).astype(int))
    values = _survival_at(groups, k, sampled)
    limit = best_value - 1e-12
    for round_ in range(_ROUNDS + 1):
        width = cum[sampled + 1] - np.r_[0.0, cum[sampled[:-1] + 1]]
        left = np.r_[1.0, values[:-1]]
        lower = edges[1] + values @ width
        if lower - _MARGIN >= limit:
            return False
        gap = (left - values) * width
        if lower + gap.sum() + _MARGIN < limit or round_ == _ROUNDS:
            return True
        # Split the cells holding the largest part of the gap (their share
        # above the mean, at least one cell), each into _SPLIT parts.
        cells = np.flatnonzero(gap >= gap.mean())
        starts = np.r_[-1, sampled[:-1]][cells]
        stops = sampled[cells]
        extra = np.unique(
            np.concatenate(
                [
                    np.linspace(a, b, _SPLIT + 1)[1:-1].astype(int)
                    for a, b in zip(starts.tolist(), stops.tolist(), strict=True)
                ]
            )
        )
        extra = np.setdiff1d(extra[extra >= 0], sampled)
        if extra.size == 0:
            return True  # every column is sampled: the exact value is cheap
        merged = np.r_[sampled, extra]
        order = np.argsort(merged, kind="stable")
        sampled = merged[order]
        values = np.r_[values, _survival_at(groups, k, extra)][order]
    return True


def _survival_at(groups, k, columns):
    """:func:`kth_survival` on the given columns only."""
    return kth_survival([(cdf[columns], count) for cdf, count in groups], k)
