"""Exact worst-case lower tail of the private quantile's rank (skfedcp extension).

The tight corrections of the private calibrators (``rule="tight"``) rest on it;
see the user guide, "Tight corrections".
"""

from __future__ import annotations

import bisect
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
    return np.concatenate(([0.0], np.maximum.accumulate(tail), [1.0]))


#: Up to this size the whole tail array costs less than finding a window.
_FULL_TAIL_MAX_N = 2048


def _rank_law(n, level, epsilon, n_bins, cut=1e-17, utility="quantile"):
    """A law of ranks ``D`` with ``P(D < r) >= tail[r]`` on a short support.

    Returns ``(ranks, pmf)``. Mass below the window goes to rank 0 and mass
    above it to the window's top rank: both make ``D`` stochastically
    smaller, so the bound stays valid while the support stays short. Only
    the ranks around the window are computed (:class:`_TailWindow`), so the
    cost is ``O(min(n, log(1 / cut) / epsilon))``: it does not grow with
    ``n`` past about ``80 / epsilon`` ranks (at the smallest accepted
    epsilon, 1e-6, the window is the whole range); the law is the one the
    full ``tail`` gives, value for value.
    """
    if n <= _FULL_TAIL_MAX_N:  # the whole array is cheaper than the window
        first, tail = 0, _rank_tail(n, level, epsilon, n_bins, utility)
    else:
        window = _TailWindow(n, level, epsilon, n_bins, utility)
        first, tail = window.around(cut)  # tail[i] is the full tail[first + i]
    full = np.searchsorted(tail, cut, side="right") - 1
    lo = first + int(full)  # tail[lo] <= cut (the window holds that index)
    hi = first + int(np.searchsorted(tail, 1.0 - cut, side="left"))
    lo, hi = max(lo, 0), min(max(hi, lo + 1), n + 1)
    # (np.concatenate, not np.r_: the same arrays, without its parsing,
    # which the tight search pays per size and level.)
    ranks = np.concatenate(([0], np.arange(max(lo, 1), hi)))
    cdf = np.concatenate(([0.0], tail[max(lo, 1) - first : hi - first], [1.0]))
    pmf = np.diff(cdf)
    return ranks, pmf


class _TailWindow:
    """The values of :func:`_rank_tail` on a window of ranks, in O(window).

    The utility bound of the bin of score ``j`` is ``v_j = max(a (j - 1), n
    - j)`` (or ``|j - t|``): a valley (non-increasing, then non-decreasing),
    so ``U_r = min_{j >= r} v_j`` is ``min v`` up to the last index ``j*``
    of the minimum and ``v_r`` beyond: the same floats as the reversed
    running minimum, found from a few ``v_j`` around the valley's bottom.
    ``gap_r = floor_r - U_r`` then falls by at least one per rank, so the
    sigmoid is non-decreasing and the running maximum of :func:`_rank_tail`
    changes nothing: each window value is the full array's, bit for bit
    (``tests/privacy/test_tight_window.py`` checks it on random cases).
    """

    def __init__(self, n, level, epsilon, n_bins, utility="quantile"):
        self.n, self.level, self.utility = n, level, utility
        self.epsilon, self.log_b = epsilon, math.log(n_bins - 1)
        if utility == "rank":
            self.t = level * n
            bottom = self.t
        else:
            self.a = (1.0 - level) / level
            bottom = (n + self.a) / (1.0 + self.a)  # a (j - 1) = n - j
        low = min(max(math.floor(bottom) - 3, 1), n)
        high = min(max(math.ceil(bottom) + 3, 1), n)
        j = np.arange(low, high + 1, dtype=np.float64)
        v = self._v(j)
        self.v_min = v.min()
        self.j_star = low + int(np.flatnonzero(v == self.v_min)[-1])

    def _v(self, j):
        if self.utility == "rank":
            return np.abs(j - self.t)
        return np.maximum(self.a * (j - 1.0), self.n - j)

    def _log_odds(self, j):
        upper = np.where(j <= self.j_star, self.v_min, self._v(j))
        floor = (self.t - j + 1.0) if self.utility == "rank" else (self.n - j + 1.0)
        return self.log_b - 0.5 * self.epsilon * (floor - upper)

    def values(self, first, last):
        """``tail[first..last]`` (``0 <= first <= last <= n + 1``)."""
        j = np.arange(max(first, 1), min(last, self.n) + 1, dtype=np.float64)
        tail = np.exp(-np.logaddexp(0.0, -self._log_odds(j)))
        tail = np.maximum.accumulate(tail) if tail.size else tail
        return np.r_[[0.0] * (first == 0), tail, [1.0] * (last == self.n + 1)]

    def _crossing(self, log_odds):
        """About the rank where the log-odds cross ``log_odds`` (solved on
        the two linear pieces of ``gap``; :meth:`around` checks the ends)."""
        gap = (self.log_b - log_odds) * 2.0 / self.epsilon
        rank = self.utility == "rank"
        r = (self.t if rank else self.n) + 1.0 - self.v_min - gap
        if r > self.j_star:
            r = (
                (2.0 * self.t + 1.0 - gap) / 2.0
                if rank
                else ((self.n + 1.0 + self.a - gap) / (1.0 + self.a))
            )
        return min(max(math.floor(r), 1), self.n)

    def around(self, cut):
        """``(first, tail[first..last])`` holding the last ``tail <= cut`` and
        the first ``tail >= 1 - cut``.

        The log-odds fall by at least ``epsilon / 2`` per rank, so the
        window from the two crossings (plus a margin, widened until the
        ends are checked) stays ``O(log(1 / cut) / epsilon)`` ranks long.
        """
        logit = math.log(cut) - math.log1p(-cut)
        first = self._crossing(logit) - 2
        last = self._crossing(-logit) + 2
        margin = 2
        while True:
            first, last = max(first, 0), min(last, self.n + 1)
            tail = self.values(first, last)
            if (first == 0 or tail[0] <= cut) and (
                last == self.n + 1 or tail[-1] >= 1.0 - cut
            ):
                return first, tail
            first, last, margin = first - margin, last + margin, 2 * margin


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


def _window_coverage(n, level, epsilon, n_bins, utility="quantile"):
    """:func:`_tail_coverage` of :func:`_rank_tail` in O(window), not O(n).

    Below the window every ``tail[r] <= 1e-17`` (``1 - tail[r]`` is exactly
    1.0) and above it ``tail[r] = 1.0``: the sum is an exact count plus the
    window's terms, the same terms as the full sum in another order (the two
    differ by a few units in the last place of the sum, far below the
    ``1e-12`` margin of the bound; see :func:`_tight_central`).
    """
    first, tail = _TailWindow(n, level, epsilon, n_bins, utility).around(1e-17)
    start = max(first, 1)  # tail[first] <= 1e-17: every rank up to it counts 1
    inside = tail[start - first : min(first + tail.shape[0], n + 1) - first]
    return float((start - 1 + np.sum(1.0 - inside)) / (n + 1))


#: Up to this total the tight central plan's near-tie decisions use the full
#: sum (the level is bit-identical to the O(n) plan's); above, the window
#: alone (the cost of a plan no longer grows with an announced n).
_EXACT_CENTRAL_MAX_N = 2**20
# A windowed value this close to the target is re-decided by the full sum.
_CENTRAL_CERTIFY = 1e-13


def _tight_central(n, alpha, epsilon, n_bins):
    """Smallest rank level ``t / n`` (>= 1/2) whose bound reaches ``1 - alpha``.

    The bound increases with the level (a larger ``q`` widens every gap), so
    bisection over ``t`` finds it. Returns ``(level, coverage)`` or ``None``.
    Each step costs ``O(min(n, log(1 / 1e-17) / epsilon))``
    (:func:`_window_coverage`); a step whose windowed value is within
    ``1e-13`` of the target (the two sums differ by less than ``1e-14``) is
    re-decided by the full sum when ``n <= 2**20``, so the level is the one
    the full sums give.
    """

    def full(t):
        level = max(t / n, 0.5)
        return _tail_coverage(_rank_tail(n, level, epsilon, n_bins), n)

    def coverage(t):
        if n <= _FULL_TAIL_MAX_N:
            return full(t)
        return _window_coverage(n, max(t / n, 0.5), epsilon, n_bins)

    def passes(t):
        value = coverage(t)
        if abs(value - target) < _CENTRAL_CERTIFY and n <= _EXACT_CENTRAL_MAX_N:
            return full(t) >= target
        return value >= target

    target = 1.0 - alpha + 1e-12  # a margin for the rounding of the sum
    if n == 0 or not passes(n):
        return None
    # The smallest t in 1..n that passes (passes(n) does): the coverage
    # grows by about 1 / (n + 1) per step of t, far above its rounding, so
    # the predicate is monotone and any bisection finds the same t.
    hi = bisect.bisect_left(range(n + 1), True, lo=1, hi=n, key=passes)
    # The value returned is the windowed sum above 2048 scores (a more
    # accurate sum of the same terms; it may differ from the full one by a
    # few units in the last place).
    return max(hi / n, 0.5), coverage(hi)
