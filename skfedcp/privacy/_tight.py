"""Exact worst-case lower tail of the private quantile's rank (skfedcp extension).

The tight corrections of the private calibrators (``rule="tight"``) rest on it;
see the user guide, "Tight corrections".
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ._exponential import _check_epsilon
from ._quantile import _MAX_BINS, _check_level, _check_utility
from ._validation import _check_int

__all__ = ["private_conformal_tight_coverage", "private_quantile_rank_tail"]


def private_quantile_rank_tail(
    n: int,
    level: float,
    *,
    epsilon: float,
    n_bins: int,
    utility: Literal["quantile", "rank"] = "quantile",
) -> NDArray[np.float64]:
    """Data-free bound on the lower tail of the rank released by the mechanism.

    Let ``R = #{i : [s_i] <= released edge}`` be the rank of the output of
    :func:`private_quantile` among the ``n`` rounded-up scores. For **every**
    data set of ``n`` scores (any values, ties, atoms, scores outside the
    bins) and every ``r`` in ``1..n``::

        P(R < r) <= tail[r] = 1 / (1 + exp(epsilon (n - r + 1 - U_r) / 2)
                                       / (n_bins - 1)),
        U_r = min_{r <= j <= n} max(a (j - 1), n - j),  a = (1 - q) / q

    (``a = 0`` at ``q = 1``). With ``utility="rank"`` (target rank ``t = q
    n``) the same holds with ``n - r + 1`` replaced by ``t - r + 1`` and
    ``U_r = min_{r <= j <= n} |j - t|``. Proof (see the user guide, "Tight
    corrections"): a bin below the ``r``-th rounded score has ``G_b >= n - r
    + 1``, so its normalised utility is ``>= n - r + 1``, and there are at
    most ``n_bins - 1`` such bins; the bin holding the ``j``-th rounded score
    (``j >= r``) has ``L_b <= j - 1`` and ``G_b <= n - j``; and ``x / (x +
    y)`` increases in ``x`` and decreases in ``y``. The bound is attained up
    to the factor ``n_bins - 1`` versus the number of empty bins, so it is
    the union bound of Lemma C.4 taken rank by rank instead of at one rank.

    Parameters
    ----------
    n : int
        Number of scores, ``>= 1``.
    level : float
        Level ``q`` of the mechanism, in [1/2, 1] (in (0, 1] with
        ``utility="rank"``).
    epsilon : float
        Privacy parameter, ``> 0``.
    n_bins : int
        Number of bins (candidate outputs), ``>= 2``.
    utility : {"quantile", "rank"}, default="quantile"
        Utility of the mechanism, as in :func:`private_quantile`.

    Returns
    -------
    tail : ndarray of shape (n + 2,)
        ``tail[r]`` bounds ``P(R < r)``; ``tail[0] = 0`` and ``tail[n + 1] =
        1``. Non-decreasing in ``r``.

    Examples
    --------
    >>> from skfedcp.privacy import private_quantile_rank_tail
    >>> tail = private_quantile_rank_tail(200, 0.9, epsilon=10, n_bins=100)
    >>> bool(tail[170] < 1e-12), bool(tail[185] > 0.5)
    (True, True)
    """
    n = _check_int(n, "n", low=1)
    level = _check_level(level)
    utility = _check_utility(utility)
    if utility == "quantile" and level < 0.5:
        raise ValueError(f"level must be in [1/2, 1]; got {level!r}.")
    epsilon = _check_epsilon(epsilon)
    n_bins = _check_int(n_bins, "n_bins", low=2, high=_MAX_BINS)
    return _rank_tail(n, level, epsilon, n_bins, utility)


def _rank_tail(n, level, epsilon, n_bins, utility="quantile"):
    j = np.arange(1, n + 1, dtype=np.float64)
    if utility == "rank":
        # A low bin has u_b >= G_b - n + t >= t - r + 1; the bin of score j
        # has u_b <= max(j - t, t - j).
        t = level * n
        v = np.abs(j - t)
        floor = t - j + 1.0
    else:
        a = (1.0 - level) / level
        v = np.maximum(a * (j - 1.0), n - j)  # utility bound of the bin of score j
        floor = n - j + 1.0
    upper = np.minimum.accumulate(v[::-1])[::-1]  # U_r, r = 1..n
    gap = floor - upper
    log_odds = math.log(n_bins - 1) - 0.5 * epsilon * gap
    tail = np.exp(-np.logaddexp(0.0, -log_odds))  # sigmoid(log_odds)
    return np.r_[0.0, np.maximum.accumulate(tail), 1.0]


def _rank_law(n, level, epsilon, n_bins, cut=1e-17, utility="quantile"):
    """A law of ranks ``D`` with ``P(D < r) >= tail[r]`` on a short support.

    Returns ``(ranks, pmf)``. Mass below the window goes to rank 0 and mass
    above it to the window's top rank: both make ``D`` stochastically
    smaller, so the bound stays valid while the support stays short.
    """
    tail = _rank_tail(n, level, epsilon, n_bins, utility)
    lo = int(np.searchsorted(tail, cut, side="right")) - 1  # tail[lo] <= cut
    hi = int(np.searchsorted(tail, 1.0 - cut, side="left"))  # tail[hi] >= 1-cut
    lo, hi = max(lo, 0), min(max(hi, lo + 1), n + 1)
    ranks = np.r_[0, np.arange(max(lo, 1), hi)]
    cdf = np.r_[tail[max(lo, 1)], tail[max(lo, 1) + 1 : hi], 1.0]
    pmf = np.diff(np.r_[0.0, cdf])
    return ranks, pmf


def private_conformal_tight_coverage(
    n: int, level: float, *, epsilon: float, n_bins: int
) -> float:
    """Coverage guaranteed by one private quantile at ``level`` (central DP).

    ``E[D] / (n + 1)`` where ``D`` is the rank law of
    :func:`private_quantile_rank_tail`: for i.i.d. scores from **any**
    distribution, the released edge covers a new score with probability at
    least this (the rank-``D`` order statistic covers with probability
    ``>= D / (n + 1)`` and ``D`` is below the released rank, see the user
    guide).

    Parameters
    ----------
    n : int
        Number of calibration scores.
    level : float
        Level of the mechanism, in [1/2, 1].
    epsilon : float
        Privacy parameter.
    n_bins : int
        Number of bins.

    Returns
    -------
    coverage : float

    Examples
    --------
    >>> from skfedcp.privacy import private_conformal_tight_coverage
    >>> round(private_conformal_tight_coverage(1000, 0.93, epsilon=1,
    ...                                        n_bins=120), 4)
    0.92
    """
    tail = private_quantile_rank_tail(n, level, epsilon=epsilon, n_bins=n_bins)
    return _tail_coverage(tail, n)


def _tail_coverage(tail, n):
    """``E[D] / (n + 1)`` for the rank law whose ``P(D < r)`` is ``tail[r]``."""
    return float(np.sum(1.0 - tail[1 : n + 1]) / (n + 1))


def _tight_central(n, alpha, epsilon, n_bins):
    """Smallest rank level ``t / n`` (>= 1/2) whose bound reaches ``1 - alpha``.

    The bound increases with the level (a larger ``q`` widens every gap), so
    bisection over ``t`` finds it. Returns ``(level, coverage)`` or ``None``.
    """

    def coverage(t):
        level = max(t / n, 0.5)
        return _tail_coverage(_rank_tail(n, level, epsilon, n_bins), n)

    target = 1.0 - alpha + 1e-12  # a margin for the rounding of the sum
    if n == 0 or coverage(n) < target:
        return None
    lo, hi = 0, n  # coverage(lo) < target <= coverage(hi), lo "virtual"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if coverage(mid) >= target:
            hi = mid
        else:
            lo = mid
    return max(hi / n, 0.5), coverage(hi)
