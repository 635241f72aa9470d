"""The count law behind the automatic bins, and a certified bound on its value."""

from __future__ import annotations

import numpy as np

from ...privacy._quantile import _logits_from_counts
from .._qq._poisbin import _binomial_block

#: A bin count is skipped when its value's lower bound clears the best by
#: a margin on top of the tie rule's 1e-12. The exact value sums each
#: client's pmf over the B bins (``cumsum``: at most ~B ulps off its CDF),
#: the bound sums it by runs of equal bins; ``P(X_(k) > e)`` moves by at
#: most the sum of the m clients' CDF errors (each client's CDF enters it
#: with a slope in [-1, 0]), so the two values differ by at most ~2 m B
#: ulps, plus the ~1e-13 rounding of the DP and of the sums over bins.
_ULP = float(np.finfo(np.float64).eps)
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


def value_beats(cdfs_at, k, edges, best_value):
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
    first = cdfs_at(sampled)
    values = kth_survival(first, k)
    n_clients = sum(count for _, count in first)
    margin = 1e-9 + 4.0 * _ULP * n_clients * (edges.shape[0] - 1)
    limit = best_value - 1e-12
    for round_ in range(_ROUNDS + 1):
        width = cum[sampled + 1] - np.r_[0.0, cum[sampled[:-1] + 1]]
        left = np.r_[1.0, values[:-1]]
        lower = edges[1] + values @ width
        if lower - margin >= limit:
            return False
        gap = (left - values) * width
        if lower + gap.sum() + margin < limit or round_ == _ROUNDS:
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
        values = np.r_[values, kth_survival(cdfs_at(extra), k)][order]
    return True


def uniform_release_cdfs(groups, levels, epsilon, edges):
    """The CDFs of the automatic bins' releases, column by column on demand.

    ``groups`` lists ``(n, count)``, ``levels[n]`` the level of a client of
    ``n`` scores ``i / (n + 1)``; the release is :func:`private_quantile`'s
    on ``edges`` (``+inf`` level: the top bin). Returns ``cdfs_at(columns)``,
    the ``(cdf[columns], count)`` list. Bins between two occupied ones share
    their counts, hence their probability: each CDF is a sum over these runs
    (``O(n)`` per client instead of ``O(B)``), equal to the cumulated pmf up
    to rounding (see ``_ULP``).
    """
    n_bins = edges.shape[0] - 1
    sizes = np.array([n for n, _ in groups])
    # Every client's bin indices at once, keyed by group: key = g * span + bin.
    span = n_bins + 2
    scores = np.concatenate([np.arange(1, n + 1) / (n + 1.0) for n in sizes])
    index = np.clip(np.searchsorted(edges, scores, side="left"), 1, n_bins)
    key = np.repeat(np.arange(len(groups)) * span, sizes) + index
    # Runs start at bin 1, at each occupied bin and just after it.
    starts = np.sort(
        np.concatenate([np.arange(len(groups)) * span + 1, key, key + 1]),
        kind="stable",  # sorted pieces: a merge (np.unique hashes: slower)
    )
    starts = starts[np.concatenate([[True], np.diff(starts) != 0])]
    starts = starts[starts % span <= n_bins]
    first = np.r_[0, np.cumsum(sizes)[:-1]]  # each group's first key
    owner = starts // span
    lower = np.searchsorted(key, starts, side="left") - first[owner]
    greater = sizes[owner] - (np.searchsorted(key, starts, side="right") - first[owner])
    bounds = np.searchsorted(owner, np.arange(len(groups) + 1))
    runs = []
    for g, (n, count) in enumerate(groups):
        level = levels[n]
        if not np.isfinite(level):
            runs.append((None, None, None, count))
            continue
        cut = slice(bounds[g], bounds[g + 1])
        logits = _logits_from_counts(
            lower[None, cut], greater[None, cut], n, level, epsilon
        )[0]
        begin = starts[cut] % span
        lengths = np.diff(np.r_[begin, n_bins + 1])
        # The largest logit is 0: the normaliser is >= 1, no overflow.
        p = np.exp(logits - np.log(lengths @ np.exp(logits)))
        before = np.r_[0.0, np.cumsum(p * lengths)[:-1]]
        runs.append((begin, p, before, count))

    def cdfs_at(columns):
        bins = np.asarray(columns) + 1
        out = []
        for starts, p, before, count in runs:
            if starts is None:
                out.append(((bins == n_bins).astype(np.float64), count))
                continue
            run = np.searchsorted(starts, bins, side="right") - 1
            out.append((before[run] + p[run] * (bins - starts[run] + 1), count))
        return out

    return cdfs_at
