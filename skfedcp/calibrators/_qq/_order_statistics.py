"""Per-client order statistics, vectorised when client sizes allow it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ...federated import ClientPartition
from ...federated._partition import _group_order

__all__ = ["local_order_statistics"]

# The band filter (see _banded_order_statistics) pays off on large inputs of
# shuffled rows (it spares their grouping) with clients of a few hundred rows
# or more; below, and on grouped rows, plain partitions win.
_BAND_MIN_ROWS = 1 << 15
_BAND_MIN_MEAN_SIZE = 64
_BAND_SAMPLE = 1 << 14
# Margin, in standard deviations, of the band around each client's level:
# with exchangeable clients a client falls outside the band with
# probability < 1e-5; one that does is still answered exactly (by a
# partition of its own rows), only more slowly.
_BAND_Z = 4.5
_BAND_MAX_FRACTION = 0.35
_BAND_BUCKETS = 64
# Rows of equal-size clients are partitioned in blocks of about this size.
_ROW_BLOCK_BYTES = 1 << 20


def local_order_statistics(
    groups: ClientPartition | Sequence[NDArray[np.float64]],
    ranks: ArrayLike,
    *,
    scores: ArrayLike | None = None,
    check_finite: bool = False,
) -> NDArray[np.float64]:
    """Return the ``ranks[j]``-th smallest value of each client (``+inf`` past n_j).

    Parameters
    ----------
    groups : ClientPartition or list of ndarray
        The clients' scores: a partition (then ``scores`` holds all rows) or
        one array per client.
    ranks : sequence of int
        1-based rank for each client.
    scores : ndarray of shape (n_samples,), optional
        All rows' scores (no NaN), required with a partition.
    check_finite : bool, default=False
        With a partition: raise ``ValueError`` if ``scores`` holds NaN or
        an infinity (the check of :func:`~skfedcp.utils._validation.check_scores`),
        done once, where possible inside the selection's own pass over the
        rows (on the cache-resident copy it partitions) instead of as a
        separate pass.

    Returns
    -------
    values : ndarray of shape (n_clients,)
        Each value is one of the client's scores (the exact order
        statistic), whichever path computed it.
    """
    ranks = np.asarray(ranks, dtype=np.intp)
    if isinstance(groups, ClientPartition):
        return _partition_order_statistics(
            groups, ranks, np.asarray(scores), check_finite
        )
    values = np.full(len(groups), np.inf)
    for j, (g, r) in enumerate(zip(groups, ranks, strict=True)):
        if r <= g.shape[0]:
            values[j] = np.partition(g, r - 1)[r - 1]
    return values


def _partition_order_statistics(partition, ranks, scores, check_finite=False):
    """The order statistics of every client of a partition of ``scores``."""
    sizes = partition.sizes
    # Equal sizes and ranks (the usual QQ plan): one rank for a matrix.
    common = (
        int(ranks[0])
        if np.all(ranks == ranks[0]) and np.all(sizes == sizes[0])
        else None
    )
    if common is not None and partition.is_grouped and common <= sizes[0]:
        return _rowwise_select(
            partition.as_matrix(scores), common, check_finite=check_finite
        )
    if check_finite:
        _check_finite(scores)
    if common is not None and common > sizes[0]:
        return np.full(sizes.shape[0], np.inf)
    if partition.is_grouped:
        # One copy, each client's rows partitioned in place: faster than the
        # band filter on grouped rows at every size measured (80-1,000
        # clients of 10-3,000 rows: 0.14 against 0.33 ms at 80 clients of
        # 10-1,000, 2.2 against 4.3 ms at 1,000), which pays off only when
        # it spares the grouping of shuffled rows.
        return _select_grouped(scores.copy(), partition.offsets, ranks)
    values = _banded_order_statistics(partition, ranks, scores)
    if values is not None:
        return values
    # Shuffled rows are gathered into a fresh array by the partition: that
    # copy may be partitioned in place (the caller's scores never are).
    if common is not None:
        matrix = partition.as_matrix(scores)
        matrix.partition(common - 1, axis=1)
        return matrix[:, common - 1].copy()
    return _select_grouped(partition.grouped(scores), partition.offsets, ranks)


def _select_grouped(work, bounds, ranks):
    """The ``ranks[j]``-th smallest of each client's block ``work[bounds[j]:
    bounds[j + 1]]`` (``+inf`` past its size); ``work`` is partitioned in
    place (a copy of the caller's rows)."""
    values = np.full(ranks.shape[0], np.inf)
    bounds = bounds.tolist()
    for j, r in enumerate(ranks.tolist()):
        start, stop = bounds[j], bounds[j + 1]
        if r <= stop - start:
            block = work[start:stop]
            block.partition(r - 1)
            values[j] = block[r - 1]
    return values


def _rowwise_select(matrix, rank, *, check_finite=False):
    """The ``rank``-th smallest of every row, without modifying ``matrix``.

    Rows are copied a block at a time into one cache-sized buffer and
    partitioned there: no full copy of the matrix is ever allocated.
    ``check_finite``: raise ``ValueError`` on NaN or an infinity, checked
    on each block while it is in the cache.
    """
    n_rows, width = matrix.shape
    out = np.empty(n_rows)
    block = max(1, _ROW_BLOCK_BYTES // (8 * width))
    buf = np.empty((min(block, n_rows), width))
    as_int = buf.view(np.int64) if matrix.dtype == np.float64 else None
    for start in range(0, n_rows, block):
        stop = min(start + block, n_rows)
        rows = buf[: stop - start]
        rows[...] = matrix[start:stop]
        keys = None if as_int is None else as_int[: stop - start]
        if keys is not None and keys.min() >= 0:
            # No sign bit set (no negative number, no -0.0, no -inf): as
            # int64, the bit patterns of these floats sort as their values
            # (NaNs and +inf above every finite number) and equal values
            # have equal bits, so the int64 selection (about a fifth
            # faster) picks the same value bit for bit.
            keys.partition(rank - 1, axis=1)
            # Each row's maximum lies at or after the selected position:
            # the rows are finite iff that tail is below +inf's pattern.
            if check_finite and keys[:, rank - 1 :].max() >= _POS_INF_BITS:
                _raise_not_finite()
        else:
            if check_finite and not np.isfinite(rows).all():
                _raise_not_finite()
            rows.partition(rank - 1, axis=1)
        out[start:stop] = rows[:, rank - 1]
    return out


# The bit pattern of +inf as an int64: non-negative floats below it are
# finite; +inf and the NaNs with a clear sign bit are at or above it.
_POS_INF_BITS = int(np.array(np.inf).view(np.int64))


def _check_finite(scores):
    if not np.isfinite(scores).all():
        _raise_not_finite()


def _raise_not_finite():
    # The message of skfedcp.utils._validation.check_scores.
    raise ValueError("scores must be finite (no NaN or inf).")


def _banded_order_statistics(partition, ranks, scores):
    """Every client's order statistic from the rows of a narrow value band.

    A strided sample of the scores gives a band ``[lo, hi]`` that, when the
    clients' scores are exchangeable, holds every client's answer with
    overwhelming probability. One pass over the scores keeps the rows at or
    above ``lo`` (about a sixth of them for 1,000 clients of 1,000 rows at
    the 90% level) and counts, per client, the rows below; one counting pass
    over the kept rows in ``_BAND_BUCKETS`` value buckets of the band then
    narrows each client to the few rows of the bucket holding its answer,
    where one partition of a small padded matrix finishes. No row is
    grouped or moved beyond the kept ones, so shuffled rows cost no
    grouping. A client whose answer lies below ``lo`` (the counts reveal
    it) is answered from its own rows. Exact: every value returned is the
    order statistic itself (bucketing is monotone in the value).

    Returns None when the band would not pay off (small inputs, clients of
    a few rows, wide bands, many ties); the caller then partitions every
    client.
    """
    n = scores.shape[0]
    sizes = partition.sizes
    m = sizes.shape[0]
    if (
        n < _BAND_MIN_ROWS
        or n < _BAND_MIN_MEAN_SIZE * m
        or scores.ndim != 1
        or scores.dtype != np.float64
        or ranks.shape != (m,)
        or ranks.min() < 1
    ):
        return None
    active = ranks <= sizes
    if not active.any():
        return np.full(m, np.inf)
    band = _sample_band(scores, ranks[active], sizes[active])
    if band is None:
        return None
    lo, hi, upper = band

    # One pass over all rows: keep the rows >= lo (``upper``) or those <= hi,
    # whichever are fewer, and count them per client.
    idx = np.flatnonzero(scores >= lo if upper else scores <= hi)
    if idx.shape[0] > 2 * _BAND_MAX_FRACTION * n:
        return None  # ties (or a misleading sample) defeat the band
    kept = scores.take(idx)
    if partition.is_grouped:
        n_kept = np.diff(np.searchsorted(idx, partition.offsets))
        codes = np.repeat(np.arange(m), n_kept)
    else:
        codes = partition.codes.take(idx)
        n_kept = np.bincount(codes, minlength=m)
    # Rank of each client's answer among its kept rows.
    rank_in = ranks - (sizes - n_kept) if upper else ranks.copy()
    good = active & (rank_in >= 1) & (rank_in <= n_kept)
    bad = np.flatnonzero(active & ~good)
    if bad.size > m // 8 and not partition.is_grouped:
        return None  # clients far from exchangeable: grouping them all is cheaper
    values = np.full(m, np.inf)
    if good.any():
        values[good] = _bucket_select(kept, codes, rank_in, good, lo, hi)[good]
    if bad.size:
        values[bad] = _exact_for(partition, scores, bad, ranks[bad])
    return values


def _bucket_select(kept, codes, ranks, good, lo, hi):
    """``ranks[j]``-th smallest of client ``j``'s kept values, for ``good`` j.

    The values are counted per (client, bucket) in ``_BAND_BUCKETS`` equal
    buckets of ``[lo, hi]`` (clipped at both ends; monotone in the value);
    the bucket holding each client's answer is read off the cumulative
    counts, and only that bucket's rows are partitioned. ``codes`` (the
    client of each kept value) is overwritten.
    """
    m = ranks.shape[0]
    n_buckets = _BAND_BUCKETS
    a = lo if lo > -np.inf else kept.min()
    b = hi if hi < np.inf else kept.max()
    # Kept values may lie outside [a, b] (above hi, or below lo when the
    # rows <= hi were kept): they fall in the end buckets.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        scale = n_buckets / (b - a) if b > a else 0.0
    if not np.isfinite(scale):
        scale = 0.0
    # key = code * n_buckets + floor((v - a) * scale) clipped to the buckets:
    # monotone in v.
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.subtract(kept, a)
        x *= scale
    np.clip(x, 0, n_buckets - 1, out=x)
    key = x.astype(np.intp)  # truncation is floor: x >= 0
    codes *= n_buckets
    key += codes
    cum = np.bincount(key, minlength=m * n_buckets).reshape(m, n_buckets)
    np.cumsum(cum, axis=1, out=cum)
    rank = np.where(good, ranks, 1)
    target = (cum < rank[:, None]).sum(axis=1)  # first bucket reaching rank
    below = np.where(target > 0, cum[np.arange(m), np.maximum(target - 1, 0)], 0)
    wanted = np.zeros(m * n_buckets, dtype=bool)
    wanted[(np.arange(m) * n_buckets + target)[good]] = True
    final = np.flatnonzero(wanted.take(key))
    final_codes = key.take(final) // n_buckets
    counts = np.bincount(final_codes, minlength=m)
    grouped = kept.take(final).take(_group_order(final_codes, m))
    return _padded_select(grouped, counts, np.where(good, rank - below, 1))


def _sample_band(scores, ranks, sizes):
    """Bounds ``lo <= hi`` holding each client's answer, or None if too wide.

    Also returns whether the rows ``>= lo`` are fewer than those ``<= hi``.

    Under exchangeability, F(answer of client j) ~ Beta(r_j, n_j + 1 - r_j);
    the band covers every client's level +-``_BAND_Z`` standard deviations,
    widened by the sample's own error, and is read off a strided sample.
    """
    n = scores.shape[0]
    level = ranks / (sizes + 1.0)
    sd = np.sqrt(level * (1.0 - level) / (sizes + 2.0))
    q_lo = min(max(float(np.min(level - _BAND_Z * sd)), 0.0), 1.0)
    q_hi = min(max(float(np.max(level + _BAND_Z * sd)), 0.0), 1.0)
    sample = scores[:: max(1, n // _BAND_SAMPLE)]
    s = sample.shape[0]
    k_lo = int(np.floor(s * q_lo - _BAND_Z * np.sqrt(s * q_lo * (1 - q_lo))))
    k_hi = int(np.ceil(s * q_hi + _BAND_Z * np.sqrt(s * q_hi * (1 - q_hi))))
    k_lo = max(k_lo, -1)  # -1: no lower bound
    k_hi = min(k_hi, s)  # s: no upper bound
    if k_lo < 0 and k_hi >= s:
        return None
    if (k_hi - k_lo) / s > _BAND_MAX_FRACTION:
        return None
    # Two single-rank selections (numpy's fast path) rather than one
    # partition at both ranks: the second only sees the rows below hi.
    sample = sample.copy()
    if k_hi < s:
        sample.partition(k_hi)
        hi, low = sample[k_hi], sample[:k_hi]
    else:
        hi, low = np.inf, sample
    if k_lo < 0:
        lo = -np.inf
    elif k_lo >= low.shape[0]:  # k_lo == k_hi
        lo = hi
    else:
        low.partition(k_lo)
        lo = low[k_lo]
    upper = k_lo >= 0 and (k_hi >= s or s - k_lo <= k_hi)
    return lo, hi, upper


def _padded_select(kept, counts, ranks):
    """``ranks[j]``-th smallest of each client's block of the grouped ``kept``.

    Row ``j`` of a padded matrix holds ``R - ranks[j]`` copies of ``-inf``,
    the client's values, then ``+inf``: its ``R``-th smallest is the
    client's answer, for every row at once (one partition, one rank ``R``).
    """
    m = counts.shape[0]
    lead = ranks.max() - ranks
    width = int((lead + counts).max())
    r = int(ranks.max())
    if m * width > 4 * kept.shape[0] + 4096:
        # Very uneven blocks: a per-client loop uses less memory.
        bounds = np.concatenate(([0], np.cumsum(counts)))
        out = np.full(m, np.inf)
        for j in np.flatnonzero(counts):
            block = np.partition(kept[bounds[j] : bounds[j + 1]], ranks[j] - 1)
            out[j] = block[ranks[j] - 1]
        return out
    matrix = np.full((m, width), np.inf)
    starts = np.cumsum(counts) - counts
    row_shift = np.arange(m) * width + lead - starts
    flat = matrix.reshape(-1)
    flat[np.repeat(row_shift, counts) + np.arange(kept.shape[0])] = kept
    matrix[np.arange(width) < lead[:, None]] = -np.inf
    matrix.partition(r - 1, axis=1)
    return matrix[:, r - 1].copy()


def _exact_for(partition, scores, clients, ranks):
    """Order statistics of a few clients, each from all of its rows."""
    if partition.is_grouped:
        b = partition.offsets
        return np.array(
            [
                np.partition(scores[b[j] : b[j + 1]], r - 1)[r - 1]
                for j, r in zip(clients, ranks, strict=True)
            ]
        )
    # Gather these clients' rows only, grouped by a counting sort.
    m = partition.n_clients
    wanted = np.zeros(m, dtype=bool)
    wanted[clients] = True
    rows = np.flatnonzero(wanted.take(partition.codes))
    codes = partition.codes.take(rows)
    values = scores.take(rows).take(_group_order(codes, m))
    b = np.concatenate(([0], np.cumsum(np.bincount(codes, minlength=m))))
    out = np.empty(clients.shape[0])
    for i, (j, r) in enumerate(zip(clients, ranks, strict=True)):
        block = values[b[j] : b[j + 1]]  # a fresh copy's slice: in place
        block.partition(r - 1)
        out[i] = block[r - 1]
    return out
