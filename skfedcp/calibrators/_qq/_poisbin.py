"""Poisson-binomial laws of the count of clients below t: DP and product tree."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
from scipy import fft as sp_fft
from scipy import special

# Many clients: a product tree instead of the DP.  The count of clients below
# t has the generating polynomial prod_j (1 - p_j + p_j z); multiplying the
# m factors pairwise, level by level (direct convolution for short factors,
# real FFTs beyond), costs O(m log^2 m) per node against the DP's
# O(groups x states), and runs as ~log2(m) vectorised passes over every node
# (and every pair) at once instead of one Python step per group.  Each FFT
# product adds an absolute error of a few ulps of the (<= 1) coefficients;
# over the ~10 levels of 1,000 clients the CDF stays within ~2e-14 of the DP
# (tests/calibrators/qq/test_qq_many_clients.py checks both on random clients).
_TREE_MIN_CLIENTS = 32
# Rows of the tree per pass, bounding its memory (rows x m doubles, ~3 live).
_TREE_CHUNK = 1 << 21
# Factors this short are multiplied directly (cheaper than an FFT).
_TREE_DIRECT = 8
# Many clients: the count of the clients of a product lies within h of its
# mean mu but with probability <= _TREE_TAIL (Bernstein: P(|S - mu| >= h) <=
# 2 exp(-h^2 / (2 (var + h / 3))) for a sum of independent Bernoulli,
# = _TREE_TAIL at h = c / 3 + sqrt(c^2 / 9 + 2 c var), c = log(2 /
# _TREE_TAIL)), so each product keeps only those counts (a window of width
# ~20 sd instead of every count: at 10^5 clients ~3,000 of 10^5). Each
# dropped tail changes the CDF by at most _TREE_TAIL, 1e-20 per product, far
# below the FFT's rounding (~1e-16 per level).
_TREE_TAIL = 1e-20
_TREE_C = float(np.log(2.0 / _TREE_TAIL))
# Products shorter than this stay whole: below it the gathers cost about what
# the shorter FFTs save (1,000 clients), and their bits stay those of the
# whole tree. From _TREE_WIDE clients on, every product that a window halves
# is windowed (10^5 clients: 24 s -> 9 s).
_TREE_TRUNCATE_MIN = 4096
_TREE_WIDE = 16384


# Cached laws at canonical node sets (_batch._canonical_features): each
# client's probabilities P(value <= t) (or > t), keyed by (n, l, below, node
# key), and the tree's CDF of the count, keyed by (groups, node key). The
# folds of a cross-validation, the groups of a grouped calibration and the
# neighbouring k of one search share most sizes and land on the same nodes;
# betainc is most of a plan's cost. Bounded (least recently used dropped).
_PROB_CACHE: OrderedDict = OrderedDict()
_PROB_CACHE_MAX = 4096  # columns of <= 176 doubles: <= 6 MB
_LAW_CACHE: OrderedDict = OrderedDict()
_LAW_CACHE_MAX = 16


_CACHE_LOCK = threading.Lock()  # plans may run in threads (joblib)


def _lru_get(cache, key):
    with _CACHE_LOCK:
        value = cache.get(key)
        if value is not None:
            cache.move_to_end(key)
        return value


def _lru_put(cache, key, value, limit):
    with _CACHE_LOCK:
        cache[key] = value
        if len(cache) > limit:
            cache.popitem(last=False)


def _cached_probabilities(groups, t, key, *, below=True):
    """Each group's P(value <= t) (``below``) or P(value > t): (nodes, groups).

    ``key`` names the node set ``t`` (the same key, the same nodes); the
    values are those of one vectorised ``betainc`` call, cached per client.
    """
    out = np.empty((t.shape[0], len(groups)))
    missing = []
    with _CACHE_LOCK:  # one pass under the lock (not one lock per column)
        for g, ((n_j, l_j), _) in enumerate(groups):
            cache_key = (n_j, l_j, below, key)
            column = _PROB_CACHE.get(cache_key)
            if column is None:
                missing.append(g)
            else:
                _PROB_CACHE.move_to_end(cache_key)
                out[:, g] = column
    if missing:
        n = np.array([groups[g][0][0] for g in missing], dtype=np.float64)
        l = np.array([groups[g][0][1] for g in missing], dtype=np.float64)
        if below:
            fresh = special.betainc(l[None, :], (n - l + 1.0)[None, :], t[:, None])
        else:
            fresh = special.betainc(
                (n - l + 1.0)[None, :], l[None, :], 1.0 - t[:, None]
            )
        out[:, missing] = fresh
        with _CACHE_LOCK:
            for i, g in enumerate(missing):
                column = fresh[:, i].copy()
                column.flags.writeable = False
                (n_j, l_j), _ = groups[g]
                _PROB_CACHE[(n_j, l_j, below, key)] = column
            while len(_PROB_CACHE) > _PROB_CACHE_MAX:
                _PROB_CACHE.popitem(last=False)
    return out


def _uses_tree(m):
    """Whether ``m`` clients go through the product tree (else the DP)."""
    return m >= _TREE_MIN_CLIENTS


def _poisbin_pmf_tree(p):
    """Poisson-binomial pmf of each row of ``p`` (rows, m): (rows, m + 1)."""
    offset, window = _poisbin_window_tree(p, truncate=False)
    return window[:, : p.shape[1] + 1]


def _poisbin_window_tree(p, *, truncate=True, lean=False):
    """The pmf of each row of ``p`` as ``(offset, window)``: counts
    ``offset[r] .. offset[r] + width - 1`` of row r, no mass elsewhere but
    the dropped tails (see the comment above: at most ``_TREE_TAIL`` per
    product, ``truncate=False`` keeps every count, offsets 0). ``lean``:
    :func:`_whole_product` where no product would be windowed (the same
    law to a few ulps, not the same bits)."""
    rows, m = p.shape
    polys = np.empty((rows, m, 2))
    polys[..., 0] = 1.0 - p
    polys[..., 1] = p
    if m < _TREE_TRUNCATE_MIN and lean:  # no product is ever windowed
        return np.zeros(rows, dtype=np.int64), _whole_product(polys)
    return _tree_product(polys, p, p * (1.0 - p), truncate)


def _whole_product(polys):
    """The product of each row's polynomials ``polys`` (rows, leaves, length),
    no window: :func:`_tree_product` without its bookkeeping (an odd factor
    waits beside the level instead of a padding one, the short products
    skip the zero fill)."""
    rows = polys.shape[0]
    while polys.shape[1] > 1:
        length = polys.shape[2]
        odd = None
        if polys.shape[1] % 2:
            odd, polys = polys[:, -1:], polys[:, :-1]
        a, b = polys[:, 0::2], polys[:, 1::2]
        out = 2 * length - 1
        if length <= _TREE_DIRECT:
            res = np.empty(a.shape[:2] + (out,))
            np.multiply(a[..., :1], b, out=res[..., :length])
            res[..., length:] = 0.0
            for i in range(1, length):
                res[..., i : i + length] += a[..., i : i + 1] * b
        else:
            nfft = sp_fft.next_fast_len(out, real=True)
            spectrum = sp_fft.rfft(a, nfft, axis=-1) * sp_fft.rfft(b, nfft, axis=-1)
            res = sp_fft.irfft(spectrum, nfft, axis=-1)[..., :out]
        if odd is not None:
            last = np.zeros((rows, 1, out))
            last[..., :length] = odd
            res = np.concatenate([res, last], axis=1)
        polys = res
    return polys[:, 0]


def _tree_product(polys, mean, var, truncate):
    """Multiply the polynomials ``polys`` (rows, leaves, length) of each row.

    ``mean`` and ``var`` (rows, leaves): of each leaf's count, for the
    windows. Returns ``(offset, window)`` as :func:`_poisbin_window_tree`.
    """
    rows = polys.shape[0]
    offset = np.zeros(mean.shape, dtype=np.int64)
    shortest = 0 if polys.shape[1] >= _TREE_WIDE else _TREE_TRUNCATE_MIN
    while polys.shape[1] > 1:
        n_poly, length = polys.shape[1], polys.shape[2]
        if n_poly % 2:  # pad with the constant polynomial 1
            one = np.zeros((rows, 1, length))
            one[:, 0, 0] = 1.0
            polys = np.concatenate([polys, one], axis=1)
            pad = np.zeros((rows, 1))
            offset = np.concatenate([offset, pad.astype(np.int64)], axis=1)
            mean = np.concatenate([mean, pad], axis=1)
            var = np.concatenate([var, pad], axis=1)
        a, b = polys[:, 0::2], polys[:, 1::2]
        out = 2 * length - 1
        if length <= _TREE_DIRECT:
            res = np.zeros(a.shape[:2] + (out,))
            for i in range(length):
                res[..., i : i + length] += a[..., i : i + 1] * b
        else:
            nfft = sp_fft.next_fast_len(out, real=True)
            res = sp_fft.irfft(
                sp_fft.rfft(a, nfft, axis=-1) * sp_fft.rfft(b, nfft, axis=-1),
                nfft,
                axis=-1,
            )[..., :out]
        offset = offset[:, 0::2] + offset[:, 1::2]
        mean = mean[:, 0::2] + mean[:, 1::2]
        var = var[:, 0::2] + var[:, 1::2]
        if truncate:
            res, offset = _truncate_window(res, offset, mean, var, shortest)
        polys = res
    return offset[:, 0], polys[:, 0]


def _truncate_window(res, offset, mean, var, shortest):
    """Keep the counts within ``h`` of each product's mean (Bernstein, above).

    Only for products of ``shortest`` counts and more, and when that at
    least halves their length (shorter products are left whole, so their
    bits do not change).
    """
    full = res.shape[-1]
    if full < shortest:
        return res, offset
    h = _TREE_C / 3.0 + np.sqrt(_TREE_C**2 / 9.0 + 2.0 * _TREE_C * var)
    lower = np.maximum(np.floor(mean - h).astype(np.int64) - offset, 0)
    upper = np.minimum(np.ceil(mean + h).astype(np.int64) - offset, full - 1)
    width = int(np.max(upper - lower)) + 1
    if 2 * width > full:
        return res, offset
    start = np.minimum(lower, full - width)
    index = start[..., None] + np.arange(width)
    return np.take_along_axis(res, index, axis=-1), offset + start


def _leaf_probabilities(groups, t):
    """P(client value <= t): (nodes, m_active), one column per active client."""
    return np.repeat(_group_probabilities(groups, t), [c for _, c in groups], axis=1)


def _group_probabilities(groups, t):
    """P(value <= t) of a client of each group: (nodes, groups)."""
    n = np.array([n_j for (n_j, _), _ in groups], dtype=np.float64)
    l = np.array([l_j for (_, l_j), _ in groups], dtype=np.float64)
    return special.betainc(l[None, :], (n - l + 1.0)[None, :], t[:, None])


def _tree_cdf_ks(groups, ks, t, key=None):
    """P(count <= k - 1) for each k of ``ks`` (rows) at each node, by the tree.

    The nodes go through in chunks of ``_TREE_CHUNK`` leaf coefficients.
    ``key``: the name of the node set ``t``; the probabilities and the law
    are then cached (see ``_PROB_CACHE``).
    """
    counts = [c for _, c in groups]
    step = max(1, _TREE_CHUNK // sum(counts))
    if key is not None and t.shape[0] <= step:
        return _cached_tree_cdf_ks(groups, ks, t, key)
    out = np.empty((len(ks), t.shape[0]))
    for start in range(0, t.shape[0], step):
        p = np.repeat(_group_probabilities(groups, t[start : start + step]), counts, 1)
        kk = np.broadcast_to(ks, (p.shape[0], len(ks)))
        offset, window = _poisbin_window_tree(p)
        out[:, start : start + step] = _window_cdf(offset, window, kk).T
    return out


# A node where Hoeffding's bound puts P(S <= k - 1) below this for every k
# searched (or P(S >= k) for every k) gets 0 (or 1) without the tree; the
# searched k are widened by _LAW_K_MARGIN so the law serves the neighbouring
# passes too.
_CERTAIN = 1e-20
_LAW_K_MARGIN = 3


def _hoeffding_tail(x, mean, m):
    """Bound on P(S <= x) (x < mean) or P(S >= x) (x > mean), S a sum of m
    independent Bernoulli with the given mean: exp(-m KL(x/m || mean/m))
    (Hoeffding, 1963: the binomial's Chernoff bound holds for the sum);
    1 where x is on the wrong side of the mean."""
    a, b = x / m, mean / m
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = (
            special.xlogy(a, a)
            - special.xlogy(a, b)
            + special.xlogy(1.0 - a, 1.0 - a)
            - special.xlogy(1.0 - a, 1.0 - b)
        )
    return np.where(np.isnan(kl), 1.0, np.exp(-m * np.maximum(kl, 0.0)))


def _cached_tree_cdf_ks(groups, ks, t, key):
    """:func:`_tree_cdf_ks` at the named node set ``key``, with cached laws.

    The tree runs only at the nodes where Hoeffding's bound does not settle
    every searched k (``_CERTAIN``, error below 1e-20 per node elsewhere);
    its law is kept per (groups, key) for the later passes whose k lie in
    the widened range it was computed for.
    """
    counts = [c for _, c in groups]
    law_key = (tuple(groups), key)
    law = _lru_get(_LAW_CACHE, law_key)
    if law is None or not (law[0] <= ks[0] and ks[-1] <= law[1]):
        probs = _cached_probabilities(groups, t, key)
        law = _pruned_tree_law(probs, counts, ks)
        _lru_put(_LAW_CACHE, law_key, law, _LAW_CACHE_MAX)
    return _law_cdf_ks(law, ks)


def _pruned_tree_law(probs, counts, ks):
    """The count's law by the tree at the nodes (rows of ``probs``, one column
    per group of ``counts`` clients) where Hoeffding's bound does not settle
    every k within ``_LAW_K_MARGIN`` of ``ks``: ``(k_lo, k_hi, one, rows,
    offset, cdf)``, read by :func:`_law_cdf_ks`."""
    m = sum(counts)
    k_lo = max(1, int(ks[0]) - _LAW_K_MARGIN)
    k_hi = min(m, int(ks[-1]) + _LAW_K_MARGIN)
    mean = probs @ np.asarray(counts, dtype=np.float64)
    # P(S <= k - 1) <= P(S <= k_hi - 1) for every k <= k_hi, and
    # P(S >= k) <= P(S >= k_lo) for every k >= k_lo.
    zero = (k_hi - 1 < mean) & (_hoeffding_tail(k_hi - 1.0, mean, m) < _CERTAIN)
    one = (k_lo > mean) & (_hoeffding_tail(float(k_lo), mean, m) < _CERTAIN)
    rows = np.flatnonzero(~(zero | one))
    p = np.repeat(probs[rows], counts, 1)
    offset, window = _poisbin_window_tree(p, lean=True)
    # Only P(count <= k - 1) for the k of the range is kept (a few columns,
    # not the m + 1 of the law: the cache holds kilobytes, not megabytes).
    k_all = np.arange(k_lo, k_hi + 1)
    kk = np.broadcast_to(k_all, (rows.shape[0], k_all.shape[0]))
    cdf_k = _cumulative_at(offset, np.cumsum(window, axis=1), kk)
    return (k_lo, k_hi, one, rows, cdf_k)


def _law_cdf_ks(law, ks):
    """P(count <= k - 1) for each k of ``ks`` (rows) at each node, from a law
    of :func:`_pruned_tree_law` whose k range holds ``ks``."""
    k_lo, _, one, rows, cdf_k = law
    out = np.zeros((len(ks), one.shape[0]))
    out[:, one] = 1.0
    out[:, rows] = cdf_k[:, np.asarray(ks) - k_lo].T
    return out


def _poisbin_cdf_tree(p, ks):
    """P(PoisBin(row of p) <= k - 1) for each row of ``p`` and its ``k``."""
    rows, m = p.shape
    ks = np.broadcast_to(np.asarray(ks, dtype=np.int64), (rows,))
    out = np.empty(rows)
    step = max(1, _TREE_CHUNK // max(m, 1))
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        kk = np.clip(ks[start:stop], 1, m + 1)[:, None]
        offset, window = _poisbin_window_tree(p[start:stop])
        out[start:stop] = _window_cdf(offset, window, kk)[:, 0]
    return np.clip(out, 0.0, 1.0)


def _window_cdf(offset, window, ks):
    """P(count <= k - 1) for each row's ``ks`` (rows, n_k), from its window.

    Below the window the CDF is 0, past it the window's total (the dropped
    tails are below _TREE_TAIL).
    """
    return _cumulative_at(offset, np.cumsum(window, axis=1), ks)


def _cumulative_at(offset, cdf, ks):
    """:func:`_window_cdf` from the window's cumulative sums ``cdf``."""
    index = ks - 1 - offset[:, None]
    inside = np.clip(index, 0, cdf.shape[1] - 1)
    values = np.take_along_axis(cdf, inside, axis=1)
    return np.where(index < 0, 0.0, values)


def _binomial_block(count, p, size):
    """Bin(count, p) pmf at 0..size-1 for an array p (one row per value)."""
    r = np.arange(size, dtype=np.float64)[:, None]
    log_comb = (
        special.gammaln(count + 1.0)
        - special.gammaln(r + 1.0)
        - special.gammaln(count - r + 1.0)
    )
    return np.exp(log_comb + special.xlogy(r, p) + special.xlog1py(count - r, -p))


def _add_clients(pmf, p, count, *, single_as_block=False):
    """One step of the count DP: ``count`` identical clients, each below t
    with probability ``p`` (the shape of a row of ``pmf``).

    ``pmf`` holds the law of the count so far on its first ``pmf.shape[0]``
    states (larger counts are dropped). A single client is one multiply-add
    (``single_as_block``: the binomial block of size 2, whose ``exp(log1p)``
    rounds differently; kept where a caller's values depend on it).
    """
    size = pmf.shape[0]
    if count == 1 and not single_as_block:
        nxt = pmf * (1.0 - p)
        nxt[1:] += pmf[:-1] * p
        return nxt
    block = _binomial_block(count, p.ravel(), min(count, size - 1) + 1)
    block = block.reshape((-1,) + p.shape)
    nxt = pmf * block[0]
    for r in range(1, block.shape[0]):
        nxt[r:] += pmf[: size - r] * block[r]
    return nxt


def _poisbin_cdf_unequal(groups, k, t):
    """P(PoisBin(p_1(t), ..., p_m(t)) <= k - 1) for an array t (inactive p = 0).

    Convolution DP over clients, vectorised over the nodes t, with the count
    capped at k - 1 (the states that matter). When k - 1 > m - k the DP counts
    the clients *above* t instead (``P(S <= k - 1) = 1 - P(F <= m - k)``), so
    it never holds more than ``min(k, m - k + 1)`` states. Identical clients
    form one binomial block.
    """
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    m_active = sum(c for _, c in groups)
    if k > m_active:
        return np.ones(t.shape[0])
    if _uses_tree(m_active):
        return np.clip(_tree_cdf_ks(groups, np.array([k]), t)[0], 0.0, 1.0)
    # The DP of _poisbin_cdf_ks with the one k: the same states and sums as
    # the DP that was here (tests/calibrators/qq/test_qq_sinh_rule.py
    # compares the bits).
    return _poisbin_cdf_ks(groups, [k], t)[0]


def _poisbin_cdf_batch(sizes, counts, ranks, ks, t, flip):
    """P(#{clients with value <= t} <= k - 1) for a batch of pairs.

    ``sizes``/``counts``: distinct client sizes and how many clients have
    each; ``ranks``: (pairs, groups) local ranks (``> size`` = sends +inf);
    ``ks``: (pairs,); ``t``: (pairs, nodes). One DP over the groups serves
    every pair and node. With ``flip`` the DP counts the clients *above* t
    (``1 - P(F <= m - k)``), which needs fewer states when k > m / 2.
    """
    m = int(counts.sum())
    n_pairs, n_nodes = t.shape
    if _uses_tree(m):
        active = ranks <= sizes[None, :]
        l_safe = np.where(active, ranks, 1).astype(np.float64)[:, :, None]
        n_g = sizes.astype(np.float64)[None, :, None]
        # (pairs, groups, nodes); a client sending +inf is never below t.
        p = special.betainc(l_safe, n_g - l_safe + 1, t[:, None, :])
        p = np.where(active[:, :, None], p, 0.0)
        p = np.repeat(p, counts, axis=1).transpose(0, 2, 1).reshape(-1, m)
        cdf = _poisbin_cdf_tree(p, np.repeat(ks, n_nodes))
        return cdf.reshape(n_pairs, n_nodes)
    need = (m - ks + 1) if flip else ks
    size = int(need.max())
    pmf = np.zeros((size, n_pairs, n_nodes))
    pmf[0] = 1.0
    for g in range(sizes.shape[0]):
        n_j, count = int(sizes[g]), int(counts[g])
        l_j = ranks[:, g][:, None].astype(np.float64)
        active = l_j <= n_j
        l_safe = np.where(active, l_j, 1.0)
        if flip:  # P(value > t); a client sending +inf is always above
            p = special.betainc(n_j - l_safe + 1, l_safe, 1.0 - t)
            p = np.where(active, p, 1.0)
        else:
            p = special.betainc(l_safe, n_j - l_safe + 1, t)
            p = np.where(active, p, 0.0)
        pmf = _add_clients(pmf, p, count)
    # P(count <= need - 1) for each pair.
    keep = np.arange(size)[:, None] < need[None, :]
    cdf = np.einsum("spn,sp->pn", pmf, keep.astype(np.float64))
    return 1.0 - cdf if flip else np.minimum(cdf, 1.0)


def _poisbin_pmf_groups(groups, t):
    """PoisBin pmf of the clients below t, states 0..m - 1 (rows), per node."""
    m_active = sum(c for _, c in groups)
    if _uses_tree(m_active):
        return _poisbin_pmf_tree(_leaf_probabilities(groups, t))[:, :m_active].T
    pmf = np.zeros((m_active, t.shape[0]))
    pmf[0] = 1.0
    for (n_j, l_j), count in groups:
        p = special.betainc(l_j, n_j - l_j + 1, t)
        pmf = _add_clients(pmf, p, count)
    return pmf


def _poisbin_cdf_ks(groups, ks, t, key=None):
    """P(PoisBin(p_1(t), ..., p_m(t)) <= k - 1) for every k of ``ks`` (rows).

    ``ks`` is sorted and within ``1..m_active``; ``t`` an array of nodes. One
    law serves every k: the product tree from ``_TREE_MIN_CLIENTS`` clients,
    else the DP capped at the states the ks need (counting the clients below
    t up to ``max(ks) - 1``, or those above t up to ``m - min(ks)``,
    whichever holds fewer states). ``key``: the name of the node set ``t``,
    whose client probabilities are then cached (the same values).
    """
    ks = np.asarray(ks, dtype=np.int64)
    m_active = sum(c for _, c in groups)
    if _uses_tree(m_active):
        return np.minimum(_tree_cdf_ks(groups, ks, t, key), 1.0)
    below, above = int(ks[-1]), m_active - int(ks[0]) + 1
    flip = above < below
    pmf = np.zeros((above if flip else below, t.shape[0]))
    pmf[0] = 1.0
    probs = None
    if key is not None:  # P(client value > t) with flip, else P(<= t)
        probs = _cached_probabilities(groups, t, key, below=not flip)
    for g, ((n_j, l_j), count) in enumerate(groups):
        if probs is not None:
            p = probs[:, g]
        elif flip:  # P(client value > t)
            p = special.betainc(n_j - l_j + 1, l_j, 1.0 - t)
        else:  # P(client value <= t)
            p = special.betainc(l_j, n_j - l_j + 1, t)
        pmf = _add_clients(pmf, p, count)
    cdf = np.cumsum(pmf, axis=0)
    if flip:  # P(S <= k - 1) = 1 - P(F <= m - k)
        return 1.0 - cdf[m_active - ks]
    return np.minimum(cdf[ks - 1], 1.0)
