"""Exact laws of private releases and of their order statistics."""

from __future__ import annotations

import numpy as np
from scipy import special

from ...privacy import private_quantile_probabilities
from ...privacy._quantile import _logits_from_counts
from .._qq._poisbin import _add_clients
from ._bins_bound import kth_survival


def _client_pmf(scores, level, mechanism_args, log=False):
    """Law of one client's release over the bins (``+inf`` sender: the top)."""
    n_bins = mechanism_args["edges"].shape[0] - 1
    if not np.isfinite(level):
        pmf = np.r_[np.zeros(n_bins - 1), 1.0]
        if log:
            with np.errstate(divide="ignore"):
                return np.log(pmf)
        return pmf
    return private_quantile_probabilities(scores, level, log=log, **mechanism_args)


def _kth_smallest_log_law(log_pmfs, k):
    """:func:`_kth_smallest_law` in log space: no probability underflows.

    The same DP over clients with every product a sum of logs and every sum
    a ``logaddexp``, so a probability of 1e-400 stays ``-921`` instead of 0
    and privacy ratios between neighbouring data sets stay finite.
    """
    n_values = log_pmfs.shape[1]
    ninf = np.full((log_pmfs.shape[0], 1), -np.inf)
    below = np.logaddexp.accumulate(np.hstack([ninf, log_pmfs[:, :-1]]), axis=1)
    above = np.logaddexp.accumulate(np.hstack([ninf, log_pmfs[:, :0:-1]]), axis=1)
    above = above[:, ::-1]
    state = np.full((k, k + 1, n_values), -np.inf)
    state[0, 0] = 0.0
    with np.errstate(invalid="ignore"):
        for less, equal, greater in zip(below, log_pmfs, above, strict=True):
            new = state + greater
            new[1:] = np.logaddexp(new[1:], state[:-1] + less)
            new[:, 1:] = np.logaddexp(new[:, 1:], state[:, :-1] + equal)
            new[:, k] = np.logaddexp(new[:, k], state[:, k] + equal)
            state = new
    hit = np.add.outer(np.arange(k), np.arange(k + 1)) >= k
    return special.logsumexp(state[hit], axis=0)


def _kth_smallest_law(pmfs, k):
    """Exact law of the k-th smallest of independent discrete variables.

    ``pmfs[j, b] = P(X_j = v_b)`` on common sorted values. ``X_(k) = v_b``
    iff fewer than ``k`` variables are below ``v_b`` and at least ``k`` are
    at most ``v_b``; the joint law of these two counts is built client by
    client from non-negative terms only (no subtraction), so tiny
    probabilities keep their relative accuracy. ``O(m k^2 B)``.
    """
    zero = np.zeros((pmfs.shape[0], 1))
    below = np.cumsum(np.hstack([zero, pmfs[:, :-1]]), axis=1)
    above = np.cumsum(np.hstack([zero, pmfs[:, :0:-1]]), axis=1)[:, ::-1]
    # state[a, e, b]: a = #{X_j < v_b} (a >= k is dropped: X_(k) < v_b),
    # e = #{X_j = v_b}, capped at k.
    state = np.zeros((k, k + 1, pmfs.shape[1]))
    state[0, 0] = 1.0
    for less, equal, greater in zip(below, pmfs, above, strict=True):
        new = state * greater
        new[1:] += state[:-1] * less
        new[:, 1:] += state[:, :-1] * equal
        new[:, k] += state[:, k] * equal
        state = new
    hit = np.add.outer(np.arange(k), np.arange(k + 1)) >= k
    return state[hit].sum(axis=0)


def _expected_kth_smallest(groups, k, edges):
    """Expected k-th smallest of independent releases on ``edges[1:]``.

    ``groups`` lists ``(cdf, count)``: ``count`` clients whose release has
    CDF ``cdf`` over ``edges[1:]``. Uses ``E[X] = e_1 + sum_b (e_{b+1} -
    e_b) P(X > e_b)``, where ``X_(k) > e_b`` iff fewer than ``k`` releases
    are ``<= e_b``, a sum of independent binomial counts.
    """
    above = kth_survival(groups, k)[:-1]  # P(X_(k) > e_b), b = 1..B-1
    return float(edges[1] + np.diff(edges[1:]) @ above)


def _rank_cdf_on(t, n, ranks, pmf):
    """``P(U_(D) <= t)`` for the uniform order statistics of ``n`` draws.

    ``D`` has law ``pmf`` on ``ranks`` (rank 0: ``-inf``, always below).
    """
    out = np.zeros_like(t)
    for r, p in zip(ranks.tolist(), pmf.tolist(), strict=True):
        if p == 0.0:
            continue
        out += p if r == 0 else p * special.betainc(r, n - r + 1, t)
    return np.minimum(out, 1.0)


def _poisbin_at_most(probs, counts, k):
    """``P(sum_g Bin(counts[g], probs[g]) <= k - 1)``, each column of ``probs``.

    ``probs`` is ``(groups, nodes)``; a DP over the groups on the counts
    ``0..k-1`` (larger counts are dropped: they never come back below k),
    with binomial blocks for groups of identical clients. Sums of
    non-negative terms only.
    """
    state = np.zeros((k, probs.shape[1]))
    state[0] = 1.0
    for p, count in zip(probs, counts, strict=True):
        state = _add_clients(state, np.clip(p, 0.0, 1.0), count, single_as_block=True)
    return np.minimum(state.sum(axis=0), 1.0)


def _release_cdfs(groups, level, epsilon, utility, counts_of):
    """Per size, the CDF over the bins of one client's release at ``level``,
    averaged over the public data sets whose bin counts are ``counts_of``.

    The release has weights ``exp(-c w_b)`` with a loss that is a maximum of
    one term in ``L_b`` and one in ``G_b`` (``c w_b = max(c L_b / q, c G_b
    / (1 - q))``, ``c = epsilon min(q, 1 - q) / 2``; ``utility="rank"``:
    ``c w_b = max(c (L_b - t + 1), c (G_b - n + t))``, ``c = epsilon / 2``),
    so ``exp(-c w_b) = min(A[L_b], B[G_b])`` with two tables of ``n + 1``
    exponentials per size and level: two gathers per bin instead of the
    log-sum-exp of the logits (the normalisation is then one sum per data
    set). Each weight is within ``(|c w_b| + 2) u`` of its value (relative;
    ``u = 2**-53``) and the weights that matter have ``|c w_b| <= 600``
    (below, the size takes the log-sum-exp path), so the CDFs move by far
    less than the ``1e-12`` a simulated coverage is compared with
    (``_tight_prune._S_SLACK``). Sizes are stacked by chunks that stay in
    the cache.
    """
    lower, greater, sizes = _stacked_counts(groups, counts_of)
    low_at, high_at, starts = _stacked_indices(groups, counts_of)
    per_size = lower.shape[0] // max(len(groups), 1)
    tables_low, tables_high, fast = [], [], []
    for n, _ in groups:
        if n > _TABLE_MAX_N:  # the log-sum-exp path (tables of n + 1 values)
            tables_low.append(np.ones(1))
            tables_high.append(np.ones(1))
            fast.append(False)
            continue
        j = np.arange(n + 1, dtype=np.float64)
        if utility == "rank":
            half, t = 0.5 * epsilon, level * n
            ok = half * n <= 600.0  # no exponent above 600
            tables_low.append(np.exp(-half * (j - t + 1.0)) if ok else 0.0 * j)
            tables_high.append(np.exp(-half * (j - n + t)) if ok else 0.0 * j)
        else:
            c = 0.5 * epsilon * min(level, 1.0 - level)
            slope_low = c / level if level < 1.0 else 0.0
            slope_high = c / (1.0 - level) if level < 1.0 else 0.5 * epsilon
            ok = True
            tables_low.append(np.exp(-slope_low * j))
            tables_high.append(np.exp(-slope_high * j))
        fast.append(ok)
    table_low = np.concatenate(tables_low)
    table_high = np.concatenate(tables_high)
    step = max(_STACK_ROWS // max(per_size, 1), 1) * per_size  # whole sizes
    cdfs: list = []
    for at in range(0, lower.shape[0], step):
        rows = slice(at, at + step)
        weights = np.minimum(table_low[low_at[rows]], table_high[high_at[rows]])
        total = weights.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # (a total of 0 makes NaNs here: that size is redone below)
            scale = (1.0 / total).reshape(-1, 1, per_size)
            mean = np.matmul(scale, weights.reshape(-1, per_size, weights.shape[1]))
        cdfs.extend(np.cumsum(mean[:, 0] / per_size, axis=1))
        bad = ~(total >= _LEAST_TOTAL).reshape(-1, per_size).all(axis=1)
        for i in np.flatnonzero(bad):
            fast[at // per_size + i] = False
    for g in np.flatnonzero(~np.asarray(fast, dtype=bool)):
        rows = slice(g * per_size, (g + 1) * per_size)
        cdfs[g] = _exact_cdf(
            lower[rows], greater[rows], sizes[rows], level, epsilon, utility
        )
    return cdfs


#: Sizes above this take the log-sum-exp path (no tables of n + 1 values).
_TABLE_MAX_N = 4096
#: Data sets whose total weight is below this take the log-sum-exp path
#: (their largest weight would be near the float range's end).
_LEAST_TOTAL = 1e-250


def _exact_cdf(lower, greater, sizes, level, epsilon, utility):
    """The release CDF by the logits' log-sum-exp (one size's data sets)."""
    logits = _logits_from_counts(lower, greater, sizes, level, epsilon, utility)
    log_p = logits - special.logsumexp(logits, axis=1, keepdims=True)
    return np.cumsum(np.exp(log_p).mean(axis=0))


def _stacked_indices(groups, counts_of):
    """Indices of each data set's ``L_b`` and ``G_b`` in the stacked tables
    of :func:`_release_cdfs` (size ``g``'s table starts at ``starts[g]``)."""

    def build():
        lower, greater, _ = _stacked_counts(groups, counts_of)
        lengths = [n + 1 if n <= _TABLE_MAX_N else 1 for n, _ in groups]
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        rows = [low.shape[0] for low, _ in counts_of]
        offset = np.repeat(starts, rows)[:, None]
        small = np.repeat([n <= _TABLE_MAX_N for n, _ in groups], rows)[:, None]
        return lower * small + offset, greater * small + offset, starts

    return _kept_for(_INDICES, counts_of, build)


_INDICES: dict = {}  # id(counts_of) -> (counts_of, indices)


#: Data sets per stacked pass of :func:`_release_cdfs` (arrays that stay in
#: the cache: one pass over every size was slower at 100 sizes).
_STACK_ROWS = 2048
_STACKED: dict = {}  # id(counts_of) -> (counts_of, stacked arrays)


def _stacked_counts(groups, counts_of):
    """``counts_of``'s arrays stacked over the sizes, and each row's ``n``
    (a column); kept per ``counts_of`` object (the search asks them at every
    level)."""

    def build():
        lower = np.concatenate([low for low, _ in counts_of])
        greater = np.concatenate([high for _, high in counts_of])
        sizes = np.repeat(
            np.array([n for n, _ in groups], dtype=np.float64),
            [low.shape[0] for low, _ in counts_of],
        )[:, None]
        return lower, greater, sizes

    return _kept_for(_STACKED, counts_of, build)


def _kept_for(cache, counts_of, build):
    """``build()``, kept in ``cache`` per ``counts_of`` object (held with
    it, so that its id is not reused while kept; at most 16 kept)."""
    kept = cache.get(id(counts_of))
    if kept is not None and kept[0] is counts_of:
        return kept[1]
    found = build()
    if len(cache) >= 16:
        cache.clear()
    cache[id(counts_of)] = (counts_of, found)
    return found
