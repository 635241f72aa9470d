"""Binomial-tail rows of the tight engine by a ratio recurrence, with an error bound.

The tight bound needs, for a client of ``n`` scores and each rank ``r`` its
rank law asks for, the row ``T_r(t) = I_t(r, n - r + 1) = P(Bin(n, t) >=
r)`` on the quadrature nodes. One ``betainc`` per (rank, node) was most of a
plan's cost. Here ``betainc`` is only called at the anchor ranks ``a_0 <
a_1 < ...`` spaced ``_STEP`` apart, and between two anchors ``a < b`` the
rows follow from the binomial pmf's ratios, on each node:

* ``pi_{b-1} = 1`` and ``pi_{j-1} = pi_j * j / (n - j + 1) * (1 - t) / t``
  (a ``cumprod``: ``pi_j`` is ``P(Bin(n, t) = j)`` up to one common factor);
* ``T_j = T_b + (T_a - T_b) * (pi_j + ... + pi_{b-1}) / (pi_a + ... +
  pi_{b-1})`` for ``a < j < b``, an identity of the exact values (``T_j -
  T_b`` is the pmf's sum from ``j`` to ``b - 1``).

Error bound (``u = 2**-53``, the unit roundoff; ``e_B`` the relative error of
``betainc``, the library function the rows used before). A factor is ``j /
(n - j + 1)`` (one rounding) times ``(1 - t) / t`` (two, the same at every
step) times the running product (one): at most 4 roundings per step, so each
``pi_j / pi_{b-1}`` is within ``4 _STEP u`` (relative), the two sums within
``_STEP u`` more, and their ratio ``f_j`` within ``10 _STEP u`` (with the
final products and the second-order terms: ``11 _STEP u``). The anchors
enter as ``T_b (1 - f_j) + T_a f_j`` and ``f_j T_a <= 2 T_j`` (if ``T_b <=
T_a / 2``, ``f_j T_a = (T_j - T_b) T_a / (T_a - T_b) <= 2 (T_j - T_b)``;
else ``f_j T_a <= T_a <= 2 T_b <= 2 T_j``), so ``|T_j computed - T_j| <= (4
e_B + _ROW_REL) T_j`` with ``_ROW_REL = 11 _STEP u``, against ``e_B T_j`` for a
``betainc`` row. The engine's ``p_n(t) = P(D = 0) + sum_r P(D = r) T_r(t)``
then moves by at most ``_ROW_REL p_n(t)`` more, and ``LB`` (a Poisson-binomial
probability, affine in each client's ``p`` with a coefficient in ``[-1, 0]``)
by at most ``_ROW_REL sum_j p_j(t)`` at each node: ``_TightBounds`` subtracts
``_ROW_REL sum_j int p_j`` (with the quadrature's positive weights), so the
recurrence's own rounding never raises a certified bound. ``betainc``'s
error is not subtracted, here (up to ``4 e_B``) as for the ``betainc`` rows
before (``e_B``): scipy states no bound for it. Measured against exact sums
(review, session 10): ``e_B`` about 2e-14 at ``n = 400`` and 5e-14 at ``n =
2000``, so ``3 e_B sum_j int p_j`` is about 1e-13 on the exact-Gauss plans
(inside ``_BOUND_MARGIN`` = 1e-12) and inside the composite rule's 1e-10
slack while ``m alpha e_B`` stays below about 3e-11 (the default plan
policy); for clients of ~10^9 rows the rows and ``betainc`` differ by ~5e-11
(relative) in the bulk, where that cover is not proved.

A node whose factors overflow or whose sums are not positive while ``T_a >
T_b`` is computed by ``betainc`` itself.
"""

from __future__ import annotations

import numpy as np
from scipy import special

#: Ranks between two ``betainc`` anchors.
_STEP = 8
#: Ranks per piece of a run computed on its own nodes (a multiple of _STEP).
_PIECE = 32
#: Relative error the recurrence may add to a row (see the module docstring).
_ROW_REL = 11 * _STEP * 2.0**-53


def _tails(n, ranks, t):
    """``T_r(t)`` for the ranks ``a..b`` (``ranks = (a, b)``, ``1 <= a <= b
    <= n``; rows) on the nodes ``t`` (module docstring)."""
    a, b = ranks
    # Anchors on the multiples of _STEP (every value is a function of (n,
    # r, t) alone, whatever ranks a search asked before), from below a to
    # b or above; T_0 = 1 and T_r = 0 above n.
    start = (a // _STEP) * _STEP
    blocks = max(-(-(b - start) // _STEP), 1)
    anchors = start + _STEP * np.arange(blocks + 1)
    fa = anchors.astype(np.float64)[:, None]
    ends = np.zeros((blocks + 1, t.shape[0]))
    ends[anchors == 0] = 1.0
    inside = (anchors >= 1) & (anchors <= n)
    ends[inside] = special.betainc(fa[inside], n - fa[inside] + 1.0, t)
    out = np.empty((blocks * _STEP + 1, t.shape[0]))
    out[::_STEP] = ends
    # pi_j / pi_{a_i} for j = a_i .. a_i + STEP - 1 in block i (upwards:
    # the factor at j = n is 0, so the ranks above n get no mass).
    j = anchors[:-1, None] + np.arange(_STEP - 1)[None, :]
    ratio = np.maximum(n - j, 0) / (j + 1.0)
    odds = t / (1.0 - t)
    pi = np.empty((blocks, _STEP, t.shape[0]))
    pi[:, 0] = 1.0
    np.multiply(ratio[:, :, None], odds[None, None, :], out=pi[:, 1:])
    np.cumprod(pi[:, 1:], axis=1, out=pi[:, 1:])
    # sums[:, s] = pi_{a_i + STEP - 1 - s} + ... + pi_{a_i + STEP - 1}.
    sums = np.cumsum(pi[:, ::-1], axis=1)
    total = sums[:, -1:]  # >= pi_{a_i} = 1 (inf or NaN: overflow)
    # Row a_i + s (s = 1 .. STEP - 1): T_b + (T_a - T_b) * sums[:, STEP-1-s] / total.
    rows = out[: blocks * _STEP].reshape(blocks, _STEP, t.shape[0])[:, 1:]
    low, high = ends[:-1, None], ends[1:, None]
    with np.errstate(invalid="ignore", over="ignore"):
        np.divide(sums[:, -2::-1], total, out=rows)
        rows *= low - high
        rows += high
    for i, col in zip(*np.nonzero(~np.isfinite(total[:, 0])), strict=True):
        r = anchors[i] + np.arange(1, _STEP, dtype=np.float64)
        got = np.zeros(_STEP - 1)
        ok = (r >= 1) & (r <= n)
        got[ok] = special.betainc(r[ok], n - r[ok] + 1.0, t[col])
        out[i * _STEP + 1 : (i + 1) * _STEP, col] = got
    return out[a - start : b - start + 1]


def _cut_rows(n, ranks, t, cut):
    """``T_r`` for the increasing ranks ``ranks`` (rows) on the sorted nodes
    ``t``: 0 where every ``T`` of the rank's piece is below ``cut``, 1 where
    every one is above ``1 - cut``, by runs of consecutive ranks
    (:func:`_tails`) in between.

    A run goes by pieces of ranks ``[32 i, 32 i + 31]``, each computed on
    its own nodes: from the node where the piece's lowest rank's ``T``
    reaches ``cut`` to the one where its top rank's reaches ``1 - cut``
    (two ``betaincinv`` per piece, whichever of its ranks are asked); 0 left
    of them, 1 right of them (the rows between keep their values, below
    ``cut`` or not).
    """
    ranks = np.asarray(ranks, dtype=np.int64)
    out = np.zeros((ranks.shape[0], t.shape[0]))
    breaks = np.flatnonzero(np.diff(ranks) != 1) + 1
    for run in np.split(np.arange(ranks.shape[0]), breaks):
        cuts = np.flatnonzero(np.diff(ranks[run] // _PIECE) != 0) + 1
        for piece in np.split(run, cuts):
            first, last = piece[0], piece[-1]
            # The nodes of the whole aligned piece, whichever of its ranks
            # are asked: each value is a function of (n, r, t) alone.
            a = float(max((int(ranks[first]) // _PIECE) * _PIECE, 1))
            b = float(min((int(ranks[first]) // _PIECE + 1) * _PIECE - 1, n))
            left = np.searchsorted(t, special.betaincinv(a, n - a + 1.0, cut))
            right = np.searchsorted(
                t, 1.0 - special.betaincinv(n - b + 1.0, b, cut), side="right"
            )
            rows = slice(first, last + 1)
            out[rows, right:] = 1.0
            if right > left:
                pair = (int(ranks[first]), int(ranks[last]))
                out[rows, left:right] = _tails(n, pair, t[left:right])
    return out
