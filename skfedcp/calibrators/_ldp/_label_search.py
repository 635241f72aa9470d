"""LDP-L's threshold searches: the de-biased coverage and its first covering score.

The exact search examines only the candidates that can hold the first hit
(the smallest score and the noisy-label scores), a block at a time, counting
all scores below them from the sorted scores or from a float32 bracket.
"""

from __future__ import annotations

import numpy as np


def _debiased_coverage(
    sorted_all, sorted_noisy, thresholds, beta, n_classes, count_noisy=None
):
    """``Fc_hat(q) = (Fn_hat(q) - beta Fr_hat(q)) / (1 - beta)`` at each ``q``.

    ``sorted_all`` holds the ``n k`` entries of the score matrix and
    ``sorted_noisy`` the ``n`` scores of the noisy labels, both sorted.
    ``count_noisy``: the counts ``#{noisy scores <= q}`` if already known.
    """
    n = sorted_noisy.shape[0]
    count_all = np.searchsorted(sorted_all, thresholds, side="right")
    if count_noisy is None:
        count_noisy = np.searchsorted(sorted_noisy, thresholds, side="right")
    return _coverage_from_counts(count_noisy, count_all, n, beta, n_classes)


def _coverage_from_counts(count_noisy, count_all, n, beta, n_classes):
    """The de-biased coverage from the counts of noisy and of all scores <= q.

    Non-decreasing in ``count_noisy`` and non-increasing in ``count_all``
    (``0 <= beta < 1``), also in floating point: every step is a monotone
    rounding of a monotone operation.
    """
    noisy_cdf = count_noisy / n
    uniform_cdf = count_all / (n * n_classes)
    return (noisy_cdf - beta * uniform_cdf) / (1.0 - beta)


# Candidates of the exact LDP-L search are bounded a block at a time (see
# _first_hit); only the blocks that may hold the first hit are counted.
_HIT_BLOCK = 64
# Exact counts (one pass each over the unsorted scores) that the float32
# bracketing may ask for before the search sorts the float64 scores instead.
_MAX_EXACT_PASSES = 8


def _first_covering(sorted_all, sorted_noisy, beta, n_classes, target):
    """Smallest distinct score whose de-biased coverage reaches ``target``.

    Equal to evaluating :func:`_debiased_coverage` at every distinct value
    of ``sorted_all`` and taking the first hit, but only the smallest score
    and the noisy-label scores need to be examined: between two consecutive
    noisy-label scores the noisy count is constant while the count of all
    entries grows, so the estimate (computed with the same, monotone
    floating-point operations) can only decrease. A first hit past the
    smallest score is therefore a noisy-label score, and checking the
    ``<= n + 1`` of them finds the same threshold with the same arithmetic.
    ``+inf`` when no candidate reaches the target (only through rounding
    when it is within 1e-16 of 1).
    """
    if sorted_all.size == 0:
        return np.inf
    return _covering_threshold(
        _SortedCounts(sorted_all), sorted_all[0], sorted_noisy, beta, n_classes, target
    )


def _first_covering_unsorted(values, sorted_noisy, beta, n_classes, target):
    """:func:`_first_covering` on the unsorted (flat) scores, never written.

    The counts of all scores below the candidates are bracketed by the
    sorted float32 roundings of the scores (half the bytes of a float64
    sort, and about 40% faster): rounding to nearest is monotone, so
    ``#{r(x) < r(q)} <= #{x <= q} <= #{r(x) <= r(q)}``. Only a candidate
    whose decision the bracket leaves open is counted exactly, by one pass
    over ``values``; past ``_MAX_EXACT_PASSES`` of them (scores that tie in
    float32 without being equal, near the answer), the float64 scores are
    sorted after all. The threshold is :func:`_first_covering`'s, bit for
    bit.
    """
    if values.size == 0:
        return np.inf
    threshold = _covering_threshold(
        _BracketedCounts(values), values.min(), sorted_noisy, beta, n_classes, target
    )
    if threshold is _GIVE_UP:
        return _first_covering(np.sort(values), sorted_noisy, beta, n_classes, target)
    return threshold


def _covering_threshold(counts, smallest, sorted_noisy, beta, n_classes, target):
    """The first covering candidate's value, ``+inf``, or ``_GIVE_UP``."""
    candidates, count_noisy = _candidates(sorted_noisy, smallest)
    hit = _first_hit(
        counts,
        candidates,
        count_noisy,
        sorted_noisy.shape[0],
        beta,
        n_classes,
        target,
    )
    if hit is _GIVE_UP:
        return _GIVE_UP
    return np.inf if hit is None else float(candidates[hit])


def _candidates(sorted_noisy, smallest):
    """The distinct noisy-label scores (and ``smallest`` below them), with counts.

    Returns the candidates and ``#{noisy scores <= candidate}`` of each.
    """
    first = np.empty(sorted_noisy.shape[0], dtype=bool)  # first of its run of ties
    first[:1] = True
    np.not_equal(sorted_noisy[1:], sorted_noisy[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    candidates = sorted_noisy[starts]
    # #{noisy scores <= candidate}: the end of the candidate's run of ties.
    count_noisy = np.empty(starts.shape[0], dtype=np.intp)
    count_noisy[:-1] = starts[1:]
    count_noisy[-1:] = sorted_noisy.shape[0]
    if candidates.size == 0 or smallest < candidates[0]:
        candidates = np.concatenate(([smallest], candidates))
        count_noisy = np.concatenate(([0], count_noisy))
    return candidates, count_noisy


class _SortedCounts:
    """``#{scores <= q}`` from the sorted scores: exact, so never left open."""

    def __init__(self, sorted_all):
        self._sorted = sorted_all

    def bounds(self, thresholds):
        count = np.searchsorted(self._sorted, thresholds, side="right")
        return count, count

    def exact(self, threshold):  # pragma: no cover - bounds are exact
        return self.bounds(np.array([threshold]))[0]


class _BracketedCounts:
    """Bounds of ``#{scores <= q}`` from the sorted float32 roundings."""

    def __init__(self, values):
        self._values = values
        with np.errstate(over="ignore"):  # beyond float32: +-inf, still monotone
            self._rounded = values.astype(np.float32)
        self._rounded.sort()
        self.passes = 0

    def bounds(self, thresholds):
        with np.errstate(over="ignore"):
            rounded = thresholds.astype(np.float32)
        return (
            np.searchsorted(self._rounded, rounded, side="left"),
            np.searchsorted(self._rounded, rounded, side="right"),
        )

    def exact(self, threshold):
        if self.passes == _MAX_EXACT_PASSES:
            return None
        self.passes += 1
        return np.array([np.count_nonzero(self._values <= threshold)])


_GIVE_UP = object()


def _first_hit(counts, candidates, count_noisy, n, beta, n_classes, target):
    """Index of the first candidate whose coverage reaches ``target``, or None.

    The same answer as counting the scores below every candidate, with the
    counts taken only where needed. ``counts`` gives a lower and an upper
    bound of ``#{scores <= q}`` (equal when exact) and, when they leave the
    decision open, the exact count (None: too costly, then the caller's
    search returns ``_GIVE_UP``). Candidates are taken in blocks of
    ``_HIT_BLOCK`` consecutive ones; within a block the coverage is at most
    its value at the block's largest noisy count and its first candidate's
    lower count of all scores, since it grows with the first and falls with
    the second. A block whose bound is below ``target`` holds no hit; the
    other blocks' candidates are decided in order from their bounds, or
    their exact counts, with the formula of :func:`_debiased_coverage`, so
    the first hit is the same, bit for bit.
    """
    m = candidates.shape[0]
    starts = np.arange(0, m, _HIT_BLOCK)
    lasts = np.minimum(starts + _HIT_BLOCK, m) - 1
    first_low, _ = counts.bounds(candidates[starts])
    bound = _coverage_from_counts(count_noisy[lasts], first_low, n, beta, n_classes)
    flagged = np.flatnonzero(bound >= target)
    if flagged.size == 0:
        return None
    rows = starts[flagged][:, None] + np.arange(_HIT_BLOCK)
    rows = rows[rows < m]  # ascending: blocks, then the rows within each
    low, high = counts.bounds(candidates[rows])
    noisy = count_noisy[rows]
    may = _coverage_from_counts(noisy, low, n, beta, n_classes) >= target
    sure = _coverage_from_counts(noisy, high, n, beta, n_classes) >= target
    for i in np.flatnonzero(may):
        if sure[i]:
            return int(rows[i])
        exact = counts.exact(candidates[rows[i]])
        if exact is None:
            return _GIVE_UP
        if (
            _coverage_from_counts(noisy[i : i + 1], exact, n, beta, n_classes)[0]
            >= target
        ):
            return int(rows[i])
    return None
