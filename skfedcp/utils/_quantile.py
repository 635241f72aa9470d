"""The one rank helper behind every conformal threshold in skfedcp."""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike

from ..exceptions import SmallCalibrationSetWarning
from ._warnings import warn_user

__all__ = ["conformal_quantile", "conformal_rank", "order_statistic"]

# ceil(x) is computed as ceil(x - _CEIL_EPS): (n + 1) * (1 - alpha) is
# 6.000000000000001 in float for n = 19, alpha = 0.7, and must give rank 6.
_CEIL_EPS = 1e-9


def float_safe_ceil(x: float) -> int:
    """Ceil that ignores float noise below 1e-9 above an integer."""
    return int(math.ceil(x - _CEIL_EPS))


def conformal_rank(n: int, alpha: float) -> int:
    """Rank of the split-conformal quantile, ``ceil((n + 1) * (1 - alpha))``.

    Computed float-safely: ``(n + 1)(1 - alpha)`` within 1e-9 above an integer
    is taken as that integer.

    Parameters
    ----------
    n : int
        Number of calibration scores.
    alpha : float
        Miscoverage level in (0, 1).

    Returns
    -------
    rank : int
        A rank larger than ``n`` means the quantile is ``+inf``.

    Examples
    --------
    >>> conformal_rank(19, 0.1)
    18
    >>> conformal_rank(19, 0.7)
    6
    """
    return max(float_safe_ceil((n + 1) * (1.0 - alpha)), 1)


def order_statistic(
    values: ArrayLike, rank: int, *, overwrite_input: bool = False
) -> float:
    """Return the ``rank``-th smallest element (1-based), ``+inf`` past the end.

    Repeated values count with their multiplicity (``Q_r`` of the papers).

    Parameters
    ----------
    values : array-like of shape (n,)
        Values; repeats are counted.
    rank : int
        1-based rank; ``rank > n`` gives ``+inf``.
    overwrite_input : bool, default=False
        Partition a float64 ``values`` array in place instead of a copy (as
        :func:`numpy.median`'s ``overwrite_input``): for an array the caller
        made and no longer needs in its order.

    Returns
    -------
    value : float

    Examples
    --------
    >>> order_statistic([3, 1, 2], 2)
    2.0
    >>> order_statistic([3, 1, 2], 4)
    inf
    >>> order_statistic([1, 1, 5], 2)
    1.0
    """
    if isinstance(rank, bool) or not isinstance(rank, Integral | np.integer):
        raise TypeError(f"rank must be an integer >= 1; got {rank!r}.")
    if rank < 1:
        raise ValueError(f"rank must be >= 1; got {rank}.")
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    if rank > n:
        return math.inf
    if (
        values.ndim == 1
        and n >= _SELECT_MIN_SIZE
        and min(rank - 1, n - rank) <= n * _SELECT_MAX_FRACTION
    ):
        value = _filtered_select(values, rank - 1)
        if value is not None:
            return value
    if overwrite_input:
        values.partition(rank - 1)
        return float(values[rank - 1])
    return float(np.partition(values, rank - 1)[rank - 1])


# Selection by filtering (see _filtered_select) beats one partition of a copy
# from about 10^5 values on, for ranks in the outer quarters (conformal
# levels); below, or near the median, the partition is as fast.
_SELECT_MIN_SIZE = 1 << 16
_SELECT_MAX_FRACTION = 0.25
# Size of the fixed-stride sample that places the pivot, and the margin, in
# binomial standard deviations, between the pivot's sample rank and the
# sought one: for values in random order the guess fails with probability
# below 1e-5 (and a failed guess only costs the full partition).
_SELECT_SAMPLE = 1 << 12
_SELECT_Z = 4.5


def _filtered_select(values, k):
    """The ``k``-th smallest (0-based) of 1-D float64 ``values``, or None.

    Exact and deterministic. A pivot taken from a fixed-stride sample lies
    just below (or above) the answer with overwhelming probability; one
    pass keeps the values on the answer's side of it, and the rank of the
    answer among the kept values follows from their count. Only the kept
    values are copied and partitioned (no copy of ``values``, which is
    never written). Returns None when the pivot guess fails (the kept
    values do not hold the answer) or the answer is zero or NaN, where
    which of equal-comparing values (``-0.0``/``+0.0``, NaN payloads)
    :func:`numpy.partition` would return is not decided here: the caller
    then partitions, so the returned value is always the partition's, bit
    for bit. NaN ranks above every value, as in :func:`numpy.partition`.
    """
    n = values.shape[0]
    step = n // _SELECT_SAMPLE
    sample = values[::step].copy()
    s = sample.shape[0]
    q = (k + 0.5) / n
    margin = _SELECT_Z * math.sqrt(s * q * (1.0 - q)) + 1.0
    if k >= n // 2:  # keep the upper tail: values >= pivot, and NaN
        j = math.floor(q * s - margin)
        if j < 0:
            return None
        sample.partition(j)
        keep = np.less(values, sample[j])
        np.logical_not(keep, out=keep)  # NaN is kept: it ranks last
        kept = np.compress(keep, values)  # (faster than values[keep])
        k -= n - kept.shape[0]  # rank among the kept values
        if k < 0:
            return None  # the answer lies below the pivot
    else:  # keep the lower tail: values <= pivot (never NaN)
        j = math.ceil(q * s + margin)
        if j >= s:
            return None
        sample.partition(j)
        kept = np.compress(np.less_equal(values, sample[j]), values)
        if k >= kept.shape[0]:
            return None  # the answer lies above the pivot
    kept.partition(k)
    value = float(kept[k])
    if value == 0.0 or value != value:
        return None  # signed zero or NaN: let the partition decide which
    return value


def conformal_quantile(
    values: ArrayLike,
    alpha: float,
    *,
    warn: bool = True,
    overwrite_input: bool = False,
) -> float:
    """Split-conformal quantile: the ``ceil((n+1)(1-alpha))``-th smallest value.

    Parameters
    ----------
    values : array-like of shape (n,)
        Calibration scores.
    alpha : float
        Miscoverage level in (0, 1).
    warn : bool, default=True
        Emit a :class:`~skfedcp.exceptions.SmallCalibrationSetWarning` when the
        rank exceeds ``n`` and the quantile is ``+inf``.
    overwrite_input : bool, default=False
        Partition ``values`` in place (see :func:`order_statistic`).

    Returns
    -------
    quantile : float

    Examples
    --------
    >>> conformal_quantile(range(1, 20), 0.1)
    18.0
    """
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    rank = conformal_rank(n, alpha)
    if rank > n and warn:
        warn_user(
            f"{n} calibration scores are too few for alpha={alpha}: need at least "
            f"{float_safe_ceil(1 / alpha - 1)}; the threshold is +inf.",
            SmallCalibrationSetWarning,
        )
    return order_statistic(values, rank, overwrite_input=overwrite_input)
