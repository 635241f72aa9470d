"""The number of bins of the private conformal quantile, chosen from public numbers."""

from __future__ import annotations

import math
from functools import lru_cache
from numbers import Integral
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from .._config import get_config
from .._typing import SecureRandomStateLike
from ._exponential import _log_probabilities, _scaled_logits
from ._quantile import (
    _MAX_BINS,
    _check_conformal_args,
    _gamma,
    _level,
    _quantile_loss,
    _rank_counts,
)
from ._randomness import check_random_source
from ._validation import _check_int

__all__ = ["private_conformal_n_bins"]


def private_conformal_n_bins(
    n: int,
    alpha: float,
    *,
    epsilon: float,
    strategy: Literal["expected", "paper"] = "expected",
    grid: ArrayLike | None = None,
    random_state: SecureRandomStateLike = None,
) -> int:
    """Number of uniform bins for private conformal calibration ("auto").

    For every ``m`` in ``grid``, with ``gamma = private_conformal_gamma(n,
    alpha, epsilon)``, simulate calibration on *public* uniform scores on
    [0, 1] with ``m`` equal bins and keep the ``m`` whose threshold is
    smallest (Angelopoulos et al., Algorithm 5). A level ``q~ >= 1`` counts
    as the trivial threshold 1. The data are never read, so the choice costs
    no privacy.

    Parameters
    ----------
    n : int
        Number of calibration scores.
    alpha : float
        Miscoverage level in (0, 0.5].
    epsilon : float
        Privacy parameter, ``> 0``.
    strategy : {"expected", "paper"}, default="expected"
        ``"expected"``: deterministic; scores ``i / (n + 1)``, ``i = 1..n``,
        and the *expected* threshold ``sum_b P(b) e_b``. ``"paper"``: the
        literal Algorithm 5, one draw of ``n`` uniform scores and one sampled
        threshold per ``m``; noisy from seed to seed.
    grid : array-like of int, default=None
        Candidate numbers of bins. ``None``: 50 values log-spaced on
        ``[1e2, 1e6]``, truncated to integers and de-duplicated (the paper's
        grid).
    random_state : int, Generator, RandomState, SeedSequence, "secure" or None, \
            default=None
        Public randomness of ``strategy="paper"``; unused otherwise.

    Returns
    -------
    n_bins : int
        The best ``m``; ties go to the smaller ``m``.

    Notes
    -----
    ``"expected"`` never builds the ``n`` public scores: its work and memory
    depend on the grid only, for any ``n`` up to ``2**62``. ``"paper"``
    draws ``n`` scores, in blocks (memory bounded by the grid), so ``n`` is
    bounded by the plan policy's ``max_total_size``
    (:func:`skfedcp.get_config`); a larger ``n`` raises a ValueError.

    Examples
    --------
    >>> from skfedcp.privacy import private_conformal_n_bins
    >>> private_conformal_n_bins(1000, 0.1, epsilon=1)
    120
    """
    n, alpha, epsilon = _check_conformal_args(n, alpha, epsilon)
    if strategy not in ("expected", "paper"):
        raise ValueError(f'strategy must be "expected" or "paper"; got {strategy!r}.')
    grid = _default_grid() if grid is None else _check_grid(grid)
    if strategy == "expected":
        _check_int(n, "n", low=0, high=_MAX_N)
        return _n_bins_expected(n, alpha, epsilon, grid)
    limit = get_config()["max_total_size"]
    if n > limit:
        raise ValueError(
            f'strategy="paper" draws n={n} public scores, more than the plan '
            f"policy's max_total_size={limit} (skfedcp.get_config()); use "
            'strategy="expected" (its cost does not grow with n) or raise the '
            "bound with skfedcp.config_context(max_total_size=...)."
        )
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        return _n_bins_paper_cached(n, alpha, epsilon, grid, int(random_state))
    return _n_bins_paper(n, alpha, epsilon, grid, check_random_source(random_state))


def _default_grid() -> tuple[int, ...]:
    # Truncation (astype), not rounding, reproduces the reference values.
    return tuple(int(m) for m in np.unique(np.logspace(2, 6, 50).astype(np.int64)))


def _check_grid(grid: ArrayLike) -> tuple[int, ...]:
    values = np.asarray(grid)
    if values.ndim != 1 or values.shape[0] < 1:
        raise ValueError("grid must be a non-empty 1-D array of integers.")
    return tuple(
        sorted({_check_int(m, "grid", low=2, high=_MAX_BINS) for m in values.tolist()})
    )


# The largest n of strategy="expected": counts stay exact int64 values.
_MAX_N = 2**62


class _UniformScores:
    """The public scores ``i / (n + 1.0)``, ``i = 1..n``, never all in memory.

    What ``np.arange(1, n + 1) / (n + 1.0)`` holds, value for value: counts
    below an edge are computed from the formula in ``O(1)`` per edge
    (:meth:`count_le`), and a slice is built only when asked (the rules ask
    for slices only with more bins than scores, so ``n`` is then bounded by
    the grid).
    """

    def __init__(self, n):
        self.n = n
        self.shape = (n,)
        self._denominator = n + 1.0

    def _value(self, i):
        return np.asarray(i, dtype=np.int64).astype(np.float64) / self._denominator

    def __getitem__(self, window):
        start, stop, _ = window.indices(self.n)
        return self._value(np.arange(start + 1, stop + 1))

    def count_le(self, values):
        """``#{i : score_i <= v}`` per value: ``searchsorted(..., side="right")``.

        The scores do not decrease with ``i``, so the count is the largest
        ``c`` in ``0..n`` with ``score_c <= v``: guessed as ``floor(v (n +
        1))``, corrected against the scores' own rounding (by one step at
        most below ``2**53``; by bisection beyond, where scores tie in runs).
        """
        values = np.asarray(values, dtype=np.float64)
        n = self.n
        guess = np.floor(np.clip(values, 0.0, 1.0) * self._denominator)
        count = np.minimum(guess.astype(np.int64), n)  # n itself may not be a float
        for _ in range(3):
            next_value = self._value(np.minimum(count + 1, n))
            too_few = (count < n) & (next_value <= values)
            too_many = (count > 0) & (self._value(count) > values)
            if not (too_few.any() or too_many.any()):
                return count
            count = count + too_few - too_many
        # Beyond 2**53 the scores tie in runs of up to n / 2**53: bisect the
        # unsettled counts within the guess's rounding error (or everywhere).
        settled = (count == n) | (self._value(np.minimum(count + 1, n)) > values)
        settled &= (count == 0) | (self._value(count) <= values)
        todo = np.flatnonzero(~settled)
        reach = int(4 * n * 2.0**-52) + 4
        lo = np.maximum(count[todo] - reach, 0)
        hi = np.minimum(count[todo] + reach, n + 1)
        wanted = values[todo]
        lo[(lo > 0) & (self._value(np.maximum(lo, 1)) > wanted)] = 0
        hi[(hi <= n) & (self._value(np.minimum(hi, n)) <= wanted)] = n + 1
        # Invariants: lo = 0 or score_lo <= v; hi = n + 1 or score_hi > v.
        while np.any(active := hi - lo > 1):
            mid = lo + (hi - lo) // 2  # >= 1 where active
            ok = self._value(np.maximum(mid, 1)) <= wanted
            lo = np.where(active & ok, mid, lo)
            hi = np.where(active & ~ok, mid, hi)
        count[todo] = lo
        return count


def _count_le(scores, values):
    """``np.searchsorted(scores, values, side="right")`` for sorted scores."""
    if isinstance(scores, _UniformScores):
        return scores.count_le(values)
    return np.searchsorted(scores, values, side="right")


def _simulated_log_probabilities(scores, level, epsilon, n_bins):
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    if isinstance(scores, _UniformScores):
        # _rank_counts' L_b and G_b from counts at the edges: the scores lie
        # in (0, 1], so none is below e_0 = 0 nor above e_B = 1.
        lower = scores.count_le(edges[:-1])
        greater = scores.n - scores.count_le(edges[1:])
    else:
        lower, greater, _, _ = _rank_counts(scores, edges)
    loss, sensitivity = _quantile_loss(lower, greater, level)
    return edges, _scaled_logits(-loss, epsilon, sensitivity)


def _expected_threshold(scores, level, epsilon, m):
    """Expected released edge on ``scores`` with ``m`` bins (the reference value)."""
    if level >= 1.0:
        return 1.0
    edges, logits = _simulated_log_probabilities(scores, level, epsilon, m)
    return float(np.exp(_log_probabilities(logits)) @ edges[1:])


def _expected_threshold_runs(scores, level, epsilon, m):
    """:func:`_expected_threshold` in ``O(min(n, m))``: bins grouped in runs.

    Bins with the same strict counts ``(L_b, G_b)`` have the same logit: each
    bin holding a score is its own run, and the empty bins between two of
    them form one run. The value is ``sum_runs (size x mean edge) x exp(logit
    - logsumexp)``, the same sum as the reference in another order: it
    agrees to a few ulps (relative ~1e-15), which the caller relies on only
    through a 1e-12 margin. With more bins than scores, only the scores near
    the target rank are binned (:func:`_windowed_runs`).
    """
    if level >= 1.0:
        return 1.0
    n = scores.shape[0]
    edges = np.linspace(0.0, 1.0, m + 1)
    if m < n:  # one run per bin; counts from the edges
        runs = _windowed_bins(scores, level, epsilon, edges)
        if runs is None:  # every bin, O(m log n)
            cum = _count_le(scores, edges[1:])  # #{J <= b}
            cum[-1] = n  # the top bin also holds the scores above e_B
            held = np.diff(np.r_[0, cum])
            first = last = np.arange(1, m + 1)
            runs = (first, last, (cum - held).astype(np.float64), n - cum, np.ones(m))
    else:
        runs = _windowed_runs(scores, level, epsilon, edges)
        if runs is None:
            runs = _runs(scores, 0, n, edges)
    first, last, lower, greater, size = runs
    logits = _run_logits(lower, greater, level, epsilon)
    weights = size * np.exp(logits - logits.max())
    mean_edge = (first + last) / (2.0 * m)
    return float(weights @ mean_edge / weights.sum())


def _runs(scores, lo, hi, edges):
    """Runs of equal counts from the scores ``scores[lo:hi]`` (sorted).

    Returns ``(first bin, last bin, L, G, size)`` per run: each bin holding a
    score, the empty bins before it and (when ``hi = n``) the tail. The first
    and last occupied bins of a partial window (``lo > 0``, ``hi < n``) may
    hold scores outside it and are left out, with the gaps beyond them.
    """
    n, m = scores.shape[0], edges.shape[0] - 1
    # Bin index J(s) = min{b : e_b >= s}, clipped to 1..m.
    index = np.clip(np.searchsorted(edges, scores[lo:hi]), 1, m)
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    occupied = index[starts]
    held = np.diff(np.r_[starts, hi - lo])
    below = (lo + starts).astype(np.float64)
    first = np.r_[np.r_[1, occupied[:-1] + 1], occupied, occupied[-1] + 1]
    last = np.r_[occupied - 1, occupied, m]
    lower = np.r_[below, below, n]
    greater = n - lower - np.r_[np.zeros(occupied.shape[0]), held, 0.0]
    size = (last - first + 1).astype(np.float64)
    keep = size > 0
    j = occupied.shape[0]
    if lo > 0:  # drop the first occupied bin and the gap before it
        keep[0] = keep[j] = False
    if hi < n:  # drop the last occupied bin and the tail gap
        keep[2 * j - 1] = keep[2 * j] = False
    order = np.argsort(first[keep], kind="stable")  # in bin order
    return tuple(a[keep][order] for a in (first, last, lower, greater, size))


# Truncation of _windowed_runs: the bins left out have logits below the best
# by more than _RUN_DROP, so they hold less than m e^-_RUN_DROP <= 1e-20 of
# the mass relative to the best bin (m <= 1e7).
_RUN_DROP = 60.0


def _windowed_bins(scores, level, epsilon, edges):
    """With fewer bins than scores: the bins within ``_RUN_DROP`` logits of
    the best one (one run each), or None.

    The argument of :func:`_windowed_runs`, bin by bin: ``L_b`` does not
    decrease in ``b`` and ``G_b`` does not increase, so the loss is
    quasi-convex in ``b``; once the two outer bins of a window are
    ``_RUN_DROP`` logits below the best bin inside it, every bin outside is
    below its nearer outer bin, and the bins left out hold less than ``m
    e^-_RUN_DROP <= 1e-19`` of the weight of the best one (``m <= 1e7``):
    the value moves by less than 1e-19, far below the ``_N_BINS_TIE``
    margin its callers compare with. The window spans the scores within the
    reach of :func:`_windowed_runs` around the target rank ``q n``, in bins
    (``m / n`` per score); the counts are those of every bin (the same
    edges, the same :func:`_count_le`), read at the window's edges only, so
    the cost no longer grows with ``m`` past the edges themselves (a
    client announcing 10^6 rows made the automatic bins of ``"dp-central"``
    sum over every bin of the grid's 10^6). None when the window is every
    bin or the check fails (the caller counts every bin).
    """
    n, m = scores.shape[0], edges.shape[0] - 1
    reach = _score_reach(level, epsilon)
    per_score = m / n
    lo = max(1, int((level * n - reach * (1.0 - level)) * per_score) - 2)
    hi = min(m, int((level * n + reach * level) * per_score) + 3)
    if lo == 1 and hi == m:
        return None
    cum = _count_le(scores, edges[lo - 1 : hi + 1])  # #{J <= b}, b = lo-1..hi
    if hi == m:
        cum[-1] = n  # the top bin also holds the scores above e_B
    lower = cum[:-1].astype(np.float64)
    greater = n - cum[1:]
    logits = _run_logits(lower, greater, level, epsilon)
    if not _outer_runs_clear(logits, lo > 1, hi < m):
        return None
    bins = np.arange(lo, hi + 1)
    return bins, bins, lower, greater, np.ones(bins.shape[0])


def _windowed_runs(scores, level, epsilon, edges):
    """The runs within ``_RUN_DROP`` logits of the best one, or None.

    The loss ``max(L_b / q, G_b / (1 - q))`` is quasi-convex in ``b`` (``L_b``
    does not decrease, ``G_b`` does not increase), so once the two outer runs
    of a window are ``_RUN_DROP`` logits below the best run inside it, the
    best bin overall is inside and every bin outside is below its nearer
    outer run: dropping them changes the value by less than 1e-20
    (relative). A logit moves by ``epsilon / (2 Delta (1 - q))`` per score
    below the target rank ``q n`` (where ``G_b / (1 - q)`` dominates) and by
    ``epsilon / (2 Delta q)`` above, which sizes the window; None when the
    check fails (the caller bins every score).
    """
    n = scores.shape[0]
    reach = _score_reach(level, epsilon)
    lo = max(0, int(level * n - reach * (1.0 - level)) - 2)
    hi = min(n, int(level * n + reach * level) + 3)
    if lo == 0 and hi == n:
        return None
    runs = _runs(scores, lo, hi, edges)
    if runs[0].shape[0] < 3:
        return None
    logits = _run_logits(runs[2], runs[3], level, epsilon)
    if not _outer_runs_clear(logits, lo > 0, hi < n):
        return None
    return runs


def _run_logits(lower, greater, level, epsilon):
    """The mechanism's logits of runs of strict counts ``(L, G)``, the best
    at 0."""
    loss, sensitivity = _quantile_loss(lower, greater.astype(np.float64), level)
    return (0.5 * epsilon / sensitivity) * (loss.min() - loss)


def _score_reach(level, epsilon):
    """Scores on each side of the target rank a window spans: a logit
    moves by at least ``epsilon / (2 Delta)`` per score away from it, so
    ``_RUN_DROP`` logits (and 8 to spare) are within this many."""
    delta = max(1.0 / level, 1.0 / (1.0 - level))
    return 2.0 * delta * (_RUN_DROP + 8.0) / epsilon


def _outer_runs_clear(logits, cut_below, cut_above):
    """Whether a window's outer runs, on each side where it cuts runs
    off, lie ``_RUN_DROP`` logits below the best one inside (then, the loss
    being quasi-convex, so does every run outside)."""
    outer = [logits[0] if cut_below else -np.inf, logits[-1] if cut_above else -np.inf]
    return max(outer) <= -_RUN_DROP


# Grid values whose fast values lie within this of the smallest are re-ranked
# with the reference values (the fast ones are off by ~1e-15).
_N_BINS_TIE = 1e-12


@lru_cache(maxsize=64)
def _n_bins_expected(n, alpha, epsilon, grid):
    """The first ``m`` of ``grid`` with the smallest expected threshold.

    Every value comes from :func:`_expected_threshold_runs`; the values
    within ``_N_BINS_TIE`` of the smallest are recomputed by the reference
    :func:`_expected_threshold` and ranked as before (first strict minimum
    in grid order). The reference winner's fast value is within twice the
    fast rule's error (~1e-15) of the fast minimum, so it is always among
    them: the choice is the reference one.
    """
    gamma = _gamma(n, alpha, epsilon)
    scores = _UniformScores(n)  # i / (n + 1): never all in memory
    levels = [_level(n, alpha, epsilon, m, gamma) for m in grid]
    if n == 0:
        fast = [1.0 if level >= 1.0 else math.inf for level in levels]
    else:
        fast = [
            _expected_threshold_runs(scores, level, epsilon, m)
            for level, m in zip(levels, grid, strict=True)
        ]
    lowest = min(fast)
    near = [
        m for m, value in zip(grid, fast, strict=True) if value <= lowest + _N_BINS_TIE
    ]
    if len(near) == 1:  # the reference winner is among them: it is this one
        return near[0]
    best, best_value = grid[0], math.inf
    for m, level, value in zip(grid, levels, fast, strict=True):
        if value > lowest + _N_BINS_TIE:
            continue
        value = _expected_threshold(scores, level, epsilon, m)
        if value < best_value:
            best, best_value = m, value
    return best


@lru_cache(maxsize=64)
def _n_bins_paper_cached(n, alpha, epsilon, grid, seed):
    return _n_bins_paper(n, alpha, epsilon, grid, check_random_source(seed))


# Scores drawn at a time by strategy="paper" (memory bounded by the grid).
_PAPER_BLOCK = 2**20


def _n_bins_paper(n, alpha, epsilon, grid, source):
    """Algorithm 5: ``n`` uniform draws, then one sampled threshold per ``m``.

    The draws are those of ``source.random(n)``, taken in blocks: each
    block is binned for every ``m`` of the grid at once and only the bin
    counts are kept, which are all the mechanism reads (the same counts as
    :func:`_rank_counts` on the ``n`` scores, so the same sampled values).
    """
    gamma = _gamma(n, alpha, epsilon)
    levels = [_level(n, alpha, epsilon, m, gamma) for m in grid]
    edges = {
        m: np.linspace(0.0, 1.0, m + 1)
        for m, level in zip(grid, levels, strict=True)
        if level < 1.0
    }
    counts = {m: np.zeros(m, dtype=np.int64) for m in edges}
    for start in range(0, n, _PAPER_BLOCK):
        block = source.random(min(_PAPER_BLOCK, n - start))
        for m, bins in edges.items():
            index = np.clip(np.searchsorted(bins, block, side="left"), 1, m)
            counts[m] += np.bincount(index, minlength=m + 1)[1:]
    best, best_value = grid[0], math.inf
    for m, level in zip(grid, levels, strict=True):
        if level >= 1.0:
            value = 1.0
        else:
            held = counts[m]
            lower = np.cumsum(held) - held  # #{[s_i] < e_b}
            loss, sensitivity = _quantile_loss(lower, n - lower - held, level)
            logits = _scaled_logits(-loss, epsilon, sensitivity)
            value = float(edges[m][source.choice_from_log_weights(logits) + 1])
        if value < best_value:
            best, best_value = m, value
    return best
