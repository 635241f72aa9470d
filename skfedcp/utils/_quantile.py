"""The one rank helper behind every conformal threshold in skfedcp."""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike

from ..exceptions import SmallCalibrationSetWarning
from ..utils._warnings import warn_user

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
    if rank > values.shape[0]:
        return math.inf
    if overwrite_input:
        values.partition(rank - 1)
        return float(values[rank - 1])
    return float(np.partition(values, rank - 1)[rank - 1])


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
