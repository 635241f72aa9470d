"""Certified choice of Appendix A.1's k: Riemann and trapezoid brackets of M(k)."""

# The decision (issue 21).  With fixed ranks l_j the coverage of k is
#
#     M(k) = int_0^1 F_k(t) dt,   F_k(t) = P(S(t) <= k - 1),
#
# S(t) = #{j : U^j_(l_j) <= t} the count of client values below t.  Each
# client's order-statistic CDF increases in t, so S(t) increases
# stochastically and F_k DEcreases in t.  For any nodes 0 < t_0 < ... < t_K < 1
# the monotone Riemann sums are therefore rigorous bounds:
#
#     L = t_0 F(t_0) + sum_i F(t_{i+1}) h_i            <= M(k)
#     U = t_0 + sum_i F(t_i) h_i + (1 - t_K) F(t_K)    >= M(k)
#
# (h_i = t_{i+1} - t_i; on [0, t_0] F lies in [F(t_0), 1], on [t_K, 1] in
# [0, F(t_K)]).  A bound G_i on |F_k'| over each piece narrows them
# (_slope_bound, _riemann_bracket): F'_k = -sum_j f_j(t) P(S_{-j}(t) = k -
# 1) with f_j client j's Beta density, and P(S_{-j} = k - 1) <= P(S = k - 1)
# + P(S = k) = F_{k+1} - F_{k-1}, so |F_k'| <= (sum_j f_j) (F_{k+1} -
# F_{k-1}), bounded on a piece by the densities at their modes clipped to
# the piece and by F_{k+1}(t_i) - F_{k-1}(t_{i+1}); F then stays within the
# lines of slope G_i through the piece's end values, which moves each bound
# inwards by D^2 / (2 G_i) (D the piece's drop; ~40% narrower brackets).  A
# bound B_i on |F_k''| over each piece (_curvature_bound: from the same
# counts, the larger of F_{k+1} - F_{k-2} and F_{k+2} - F_{k-1}, or where
# smaller (4 / pi) K(v) ~ 1 / (pi v) from the count's variance v by a
# Fourier argument (_difference_bound), bounding the differences of the
# laws without two clients, and |f_j'| = f_j |(l - 1) / t - (r - 1) / (1 -
# t)|) bounds the trapezoid rule's error on it by B_i h_i^3 / 12; each
# piece takes the tighter of its two brackets.  On a grid plan's pieces B_i
# is ~3-4 times the largest second difference quotient of F (12 times
# with the windows alone: their max(P) ~ 1 / sqrt(2 pi v) against a true
# difference ~ 1 / v).  One
# Poisson-binomial law per node gives F_k for every k of a window (and two
# more on each side) at once.  F is computed to ~1e-13: the DP of _count_cdf
# rounds by a few ulps of 1 per client (at most _CERTIFIED_MAX_CLIENTS = 256
# active clients; beyond, the exact search alone decides), and an error e
# in one p_j moves F by at most e.  scipy's betainc states no error bound;
# measured against exact sums (review, session 10) it is ~2e-14 relative at
# n = 400 and ~5e-14 at n = 2,000, so F's error stays far below the 1e-12
# allowances below up to the 256 clients and 10^8 rows the path takes (an
# assumption on betainc, as every plan of the library makes, not a proof).  G_i
# and B_i are raised by 2e-12 on each difference of F and by 1e-6 of
# themselves (the densities' and the sums' rounding), and each bracket is
# widened by _BRACKET_SLACK = 1e-10, a thousand times those errors and the
# sums' own rounding (K ulps).
#
# Nodes: a sinh map t = c + s sinh(u), u uniform on [-asinh(6), asinh(6)],
# around the centre c = the threshold (1 - alpha - 1e-10: the first valid k
# has M(k) just above it, so its step and its neighbours' sit there), with
# the scale s of the step, sigma(S(c)) / mu'(c), rounded to a power of
# sqrt(2): the folds of a cross-validation, its refit and the groups of a
# grouped calibration (the same alpha, similar sizes) land on the same
# nodes and share each client's values (betainc, densities: _cached_rows).  33 nodes
# first; each further level (65, 129, then 257) adds the nodes interleaving the
# previous ones, whose values are kept.  A level is skipped when the last
# one would still leave the decision open (_hopeless, a guess for speed:
# the exact search then decides at once).
#
# k* is the smallest k with M(k) >= threshold (M increases in k).  It is
# decided when, for the k of the window (the exact search's guess
# ceil(mu(c) + 1/2) and two on each side), L(k*) >= threshold + margin and
# U(k* - 1) < threshold - margin (or k* = 1), margin = _DECISION_MARGIN =
# 1e-9; "no valid k" when U(m) < threshold - margin.  The exact search
# (_selection._select_unequal) compares values whose two rules agree to
# 1e-12 (checked against quad and the rational formula) with the same
# threshold, those within 1e-11 re-decided by its accurate rule: with the
# true M certified 1e-9 away from the threshold, its values fall on the same
# side, and it returns the same k.  The threshold inside a bracket (or k*
# outside the window) is undecided: None, and the caller runs the exact
# search.  On the grid-search profiles (100 clients of 10-1,000 rows, 80
# per fold) the M(k) around the threshold are ~3e-4 to 6e-4 apart, the
# brackets 4e-5 (alpha = 0.05) to 8e-5 (alpha = 0.2) wide at 33 nodes
# (1.2e-5 to 2.3e-5 at 65): the 16 plans of a 3-alpha x 5-fold search are
# all decided, 14 at 33 nodes (two, 1e-5 from the threshold, at 65); on
# random profiles of 2-256 clients of 1-1,000 rows about 98 fits in 100.
# _fixed_rank_plan is the plan a fit takes: A.1's ranks and the certified
# k, the coverage left for later.

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
from scipy import special

from ._coverage import _FEASIBILITY_TOL, _active_groups
from ._poisbin import _CACHE_LOCK
from ._selection import _fixed_ranks

# Nodes: u uniform on [-asinh(_BRACKET_SPAN), asinh(_BRACKET_SPAN)] (the
# step's scales either side of the centre), 2 n + 1 of them at level 0 with
# n = _BRACKET_HALF_NODES, doubled per level up to _BRACKET_LEVELS levels.
_BRACKET_SPAN = 6.0
_BRACKET_HALF_NODES = 16
_BRACKET_LEVELS = 4
# Up to this many active clients (the lean DP of _count_cdf, one numpy step
# per client); beyond, the exact search is cheaper than the brackets (1,000
# clients: ~37 ms against ~66 ms for the brackets' product-tree passes) and
# decides alone.
_CERTIFIED_MAX_CLIENTS = 256
# Clients of more rows than this (the default plan policy's total, 10^8
# rows; a policy raised beyond it) are left to the exact search, so that a
# fit and plan() agree wherever the exact search is accurate: the
# densities' log-space rounding grows with n (~1e-7 relative at 10^9), and
# near 10^9 rows with a tiny alpha the exact search's own values can be
# ~1e-7 off (review, session 10: two clients of 10^9 rows at alpha = 1e-6,
# where the brackets certified k = 2 and the search found no valid k).
_CERTIFIED_MAX_SIZE = 10**8
# Widening of each bracket for the rounding of F and of the sums (above).
_BRACKET_SLACK = 1e-10
# A bound on the rounding of F at a node (~1e-13, above).
_F_ROUNDING = 1e-12
# A decision needs the bracket this far beyond the threshold (above).
_DECISION_MARGIN = 1e-9
# The scale is rounded to a power of 2^(1 / _SCALE_STEPS).
_SCALE_STEPS = 2.0
# The ks decided together: the guess and this many on each side.
_WINDOW = 2
# F is computed for this many more ks on each side (the bounds on F' and F'').
_WIDE = 2

_NO_VALID_K = "no valid k"


def _guess_and_scale(groups, center):
    """The first k guessed at ``center`` and the step's scale exponent.

    The guess is the exact search's, ``ceil(mu(c) + 1/2)`` (``mu`` the
    expected count below ``c``); the scale ``sigma(S(c)) / mu'(c)``, the
    width of F's step in t, as an exponent of 2^(1/2) (None if degenerate).
    """
    cs = np.array([c for _, c in groups], dtype=np.float64)
    # Each client's P(value <= c) and density at c.
    p, pdf = _cached_rows(groups, ("centre", center), _centre_values, center).T
    mean = float(p @ cs)
    m_active = int(cs.sum())
    k_guess = min(max(math.ceil(mean + 0.5), 1), m_active)
    slope = float(pdf @ cs)
    var = max(float((p * (1.0 - p)) @ cs), 0.25)
    scale = math.sqrt(var) / slope if slope > 0 and math.isfinite(slope) else 0.0
    if not scale > 0:
        return k_guess, None
    return k_guess, round(_SCALE_STEPS * math.log2(scale))


def _centre_values(ns, ls, center):
    """(clients, 2): P(value <= c) and the density at c of each client's
    order statistic, Beta(l, n - l + 1)."""
    rs = ns - ls + 1.0
    pdf = _beta_density(ls, rs, center)
    return np.concatenate((special.betainc(ls, rs, center), pdf), 1)


def _beta_density(ls, rs, t):
    """The Beta(l, r) density at ``t`` (elementwise, through its logarithm)."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return np.exp(
            special.xlogy(ls - 1.0, t)
            + special.xlog1py(rs - 1.0, -t)
            - special.betaln(ls, rs)
        )


@functools.lru_cache(maxsize=64)
def _bracket_nodes(center, scale_exp, level):
    """The nodes added at ``level`` (read-only, inside (0, 1), sorted).

    Level 0: the 2 n + 1 points of the sinh map; level j >= 1: the 2^(j-1)
    n points that interleave the nodes of the levels below it.
    """
    n_side = _BRACKET_HALF_NODES << level
    top = math.asinh(_BRACKET_SPAN)
    u = np.linspace(-top, top, 2 * n_side + 1)
    if level:
        u = u[1::2]
    t = center + 2.0 ** (scale_exp / _SCALE_STEPS) * np.sinh(u)
    t = t[(t > 0.0) & (t < 1.0)]
    t.flags.writeable = False
    return t


def _riemann_bracket(t, f, slope=None, curvature=None):
    """(lower, upper) bounds of int_0^1 F for decreasing F with F(t) = f.

    ``t``: increasing nodes in (0, 1); ``f``: (rows, nodes), one decreasing
    function per row. ``slope`` (rows, nodes - 1), optional: a bound G_i >=
    |F'| on each piece [t_i, t_{i+1}]; on a piece of drop D = F(t_i) -
    F(t_{i+1}) and length h, F then lies between max(F(t_{i+1}), F(t_i) -
    G (t - t_i)) and min(F(t_i), F(t_{i+1}) + G (t_{i+1} - t)), which moves
    each bound inwards by D tau / 2, tau = min(D / G, h) (the width D h of
    the piece becomes D h - D^2 / G). ``curvature`` (rows, nodes - 1),
    optional: a bound B_i >= |F''| on each piece; the trapezoid rule's
    error on it is then at most B_i h^3 / 12, and each piece takes the
    tighter of its two brackets (both hold). Widened by ``_BRACKET_SLACK``.
    """
    h = np.diff(t)
    low, high = f[:, 1:] * h, f[:, :-1] * h
    if slope is not None:
        drop = np.maximum(f[:, :-1] - f[:, 1:], 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            tau = np.where(slope > 0.0, np.minimum(drop / slope, h), 0.0)
        inward = drop * tau / 2.0
        low, high = low + inward, high - inward
    if curvature is not None:
        trapezoid = (f[:, :-1] + f[:, 1:]) * (h / 2.0)
        error = curvature * (h**3 / 12.0)
        low = np.maximum(low, trapezoid - error)
        high = np.minimum(high, trapezoid + error)
    lower = t[0] * f[:, 0] + low.sum(axis=1)
    upper = t[0] + high.sum(axis=1) + (1.0 - t[-1]) * f[:, -1]
    return lower - _BRACKET_SLACK, upper + _BRACKET_SLACK


def _slope_bound(groups, t, f_wide, key, sums=None):
    """G_i >= |F_k'| on each piece [t_i, t_{i+1}], for each k (rows).

    ``f_wide``: F at the nodes for the ks and ``_WIDE`` more on each side
    (rows; F_k = 0 for k < 1, 1 for k > m). With a_j = P(S_{-j} = k - 1)
    (the count without client j), -F_k' = sum_j f_j a_j, f_j client j's
    density; P(S = k - 1) >= a_j (1 - p_j) and P(S = k) >= a_j p_j give a_j
    <= P(S = k - 1) + P(S = k) = F_{k+1} - F_{k-1}, so |F_k'| <= mu'
    (F_{k+1} - F_{k-1}), mu' = sum_j f_j. On a piece, F_{k+1} <= its value
    at t_i, F_{k-1} >= its value at t_{i+1} (both decrease), and each Beta
    density, unimodal, is at most its value at its mode clipped to the
    piece. The density sum is raised by 1e-6 of itself for its rounding, the
    bound on F_{k+1} - F_{k-1} by 2 ``_F_ROUNDING`` for F's: G is never
    below the true bound, and the inward moves never exceed what it allows.
    ``key`` names the node set ``t`` (None: nothing cached); ``sums``: its
    :func:`_piece_sums` if already at hand.
    """
    top, _ = _piece_sums(groups, t, key) if sums is None else sums
    return (top * (1.0 + 1e-6))[None, :] * _band_bound(f_wide, 1)


def _piece_sums(groups, t, key):
    """On each piece: sum_j f_j and sum_j |f_j'| bounds (the clients'
    densities at their clipped modes, and those times max |g_j| at the
    piece's ends; :func:`_curvature_bound`), from one cached table."""
    cs = np.array([c for _, c in groups], dtype=np.float64)
    sums = cs @ _cached_rows(groups, key and ("pieces", key), _piece_terms, t)
    return sums[: t.shape[0] - 1], sums[t.shape[0] - 1 :]


def _piece_terms(ns, ls, t):
    """(clients, 2 (nodes - 1)): each client's density bound on each
    piece (:func:`_piece_densities`), then that times max |g| at the
    piece's ends (:func:`_log_slopes`)."""
    density = _piece_densities(ns, ls, t)
    growth = _log_slopes(ns, ls, t)
    bend = density * np.maximum(growth[:, :-1], growth[:, 1:])
    return np.concatenate((density, bend), axis=1)


def _band_bound(f_wide, below, above=None):
    """On each piece, a bound on P(k - below <= S <= k + above - 1) =
    F_{k+above} - F_{k-below} (``above`` = ``below`` if None) for the
    inner ks of ``f_wide`` (``_WIDE`` rows each side): F_{k+above}'s value
    at the piece's left end minus F_{k-below}'s at its right end (both
    decrease), plus 2 ``_F_ROUNDING``."""
    above = below if above is None else above
    rows = f_wide.shape[0] - 2 * _WIDE
    upper = f_wide[_WIDE + above : _WIDE + above + rows, :-1]
    lower = f_wide[_WIDE - below : _WIDE - below + rows, 1:]
    return np.maximum(upper - lower, 0.0) + 2.0 * _F_ROUNDING


def _curvature_bound(groups, t, f_wide, key, sums=None, spread=None):
    """B_i >= |F_k''| on each piece [t_i, t_{i+1}], for each k (rows).

    With a_j = P(S_{-j} = k - 1), F_k'' = -sum_j f_j' a_j - sum_j f_j a_j',
    a_j' = sum_{i != j} f_i (P(S_{-ij} = k - 2) - P(S_{-ij} = k - 1)).
    As for the slope, a_j <= F_{k+1} - F_{k-1}, and removing two clients,
    P(S_{-ij} = r) <= P(r <= S <= r + 2) = F_{r+3} - F_r; the difference
    of the two (nonnegative) counts of a_j' is at most the larger of them,
    max(F_{k+1} - F_{k-2}, F_{k+2} - F_{k-1}) (three terms of S's law, not
    the four of F_{k+2} - F_{k-2}), and at most :func:`_difference_bound`
    (from S_{-ij}'s variance; ``spread``: each group's p (1 - p) at the
    nodes, None: not used), whichever is smaller; hence |F_k''| <= (sum_j
    |f_j'|) (F_{k+1} - F_{k-1}) + mu'^2 min(max(F_{k+1} - F_{k-2}, F_{k+2}
    - F_{k-1}), that bound). On a piece
    (:func:`_band_bound`), f_j' = f_j g_j with g_j(t) = (l - 1) / t -
    (r - 1) / (1 - t) decreasing, so |f_j'| <= (f_j's bound on the piece)
    x max(|g_j|) at the piece's ends (:func:`_log_slopes`). Raised by 1e-6
    of itself for the rounding of the sums (as the slope's). ``key``,
    ``sums``: as for :func:`_slope_bound`.
    """
    top, bend = _piece_sums(groups, t, key) if sums is None else sums
    pair = np.maximum(_band_bound(f_wide, 2, 1), _band_bound(f_wide, 1, 2))
    if spread is not None:
        pair = np.minimum(pair, _difference_bound(groups, spread)[None, :])
    bound = bend[None, :] * _band_bound(f_wide, 1) + (top * top)[None, :] * pair
    return bound * (1.0 + 1e-6)


def _difference_bound(groups, spread):
    """On each piece, a bound on |P(W = r - 1) - P(W = r)| for every r and
    W = S_{-ij}, the count without any two clients.

    Fourier: P(W = r - 1) - P(W = r) = (1 / 2 pi) int_{-pi}^{pi} phi(u)
    e^{-iru} (e^{iu} - 1) du, phi = prod_j (1 - p_j + p_j e^{iu}) W's
    characteristic function, and |1 - p + p e^{iu}|^2 = 1 - 4 p (1 - p)
    sin^2(u / 2) <= exp(-4 p (1 - p) sin^2(u / 2)), so with v = Var(W) =
    sum p_j (1 - p_j) over W's clients, |e^{iu} - 1| = 2 |sin(u / 2)| and
    c = cos(u / 2), the difference is at most (1 / 2 pi) int 2 |sin(u / 2)|
    exp(-2 v sin^2(u / 2)) du = (4 / pi) K(v), K(v) = int_0^1 exp(-2 v (1 -
    c^2)) dc. With s = 1 - c, 1 - c^2 = s (2 - s) >= s (2 - d) on [0, d]
    and >= d (2 - d) on [d, 1] (it increases), so K(v) <= 1 / (2 v (2 -
    d)) + (1 - d) exp(-2 v d (2 - d)) for any d in (0, 1), and K <= 1 (the
    smaller of d = 1/4 and d = 1/2 is taken; ~1 / (3.5 v) against the
    exact ~1 / (4 v) for large v: ~1 / (pi v) in all, where the band
    bound's max(P) is ~1 / sqrt(2 pi v)). On a piece, v >= sum_j min(p_j
    (1 - p_j)) at its two ends (p_j increases in t, p (1 - p) is unimodal
    in p) - 1/2 (two clients of p (1 - p) <= 1/4 each removed). ``spread``:
    each group's p (1 - p) at the nodes (rows); v is lowered by 1e-6 of
    itself and the bound raised by as much for the rounding (the p's, ~1e-13
    relative, and up to an ulp absolute near 0 or 1: at most ~1e-13 of v
    wherever the bound is below 1, which needs v > 0.3; the closed forms' few
    ulps).
    """
    cs = np.array([c for _, c in groups], dtype=np.float64)
    v = cs @ np.minimum(spread[:, :-1], spread[:, 1:])
    # (v = 0 becomes 1e-300: its K bounds are then huge, and K <= 1 holds.)
    v = np.maximum(v * (1.0 - 1e-6) - 0.5, 1e-300)
    k = np.minimum(_k_bound(v, 0.25), _k_bound(v, 0.5))
    return (4.0 / math.pi) * np.minimum(k, 1.0) * (1.0 + 1e-6)


def _k_bound(v, d):
    """1 / (2 v (2 - d)) + (1 - d) exp(-2 v d (2 - d)) >= K(v)
    (:func:`_difference_bound`)."""
    return 1.0 / (2.0 * (2.0 - d) * v) + (1.0 - d) * np.exp(-2.0 * d * (2.0 - d) * v)


def _log_slopes(ns, ls, t):
    """|g(t)| = |(l - 1) / t - (r - 1) / (1 - t)| at the nodes (a bound:
    raised by the rounding of its two terms), g = f' / f for Beta(l, r)."""
    left, right = (ls - 1.0) / t, (ns - ls) / (1.0 - t)
    return np.abs(left - right) + 1e-15 * (left + right)


def _decide(ks, lower, upper, threshold, m_active):
    """The certified first valid k of the window ``ks``, ``_NO_VALID_K``,
    or None (the threshold inside a bracket, or k* outside the window)."""
    above = lower >= threshold + _DECISION_MARGIN  # M(k) >= threshold, certified
    below = upper < threshold - _DECISION_MARGIN  # M(k) < threshold, certified
    if below.all():
        return _NO_VALID_K if int(ks[-1]) == m_active else None
    if not above.any():
        return None
    first = int(np.argmax(above))
    if first == 0:
        return int(ks[0]) if int(ks[0]) == 1 else None
    return int(ks[first]) if below[first - 1] else None


def _certified_k(groups, threshold):
    """The smallest k with ``M(k) >= threshold``, certified, or None.

    ``groups``: the active ((n_j, l_j), count) of fixed ranks (at least
    one). Returns k, ``_NO_VALID_K`` (even ``M(m_active)`` is below the
    threshold), or None when the brackets of every level leave the decision
    open (see the comment above).
    """
    m_active = sum(c for _, c in groups)
    largest = max(n for (n, _), _ in groups)
    if m_active > _CERTIFIED_MAX_CLIENTS or largest > _CERTIFIED_MAX_SIZE:
        return None
    center = min(max(float(threshold), 0.0), 1.0)
    k_guess, scale_exp = _guess_and_scale(groups, center)
    if scale_exp is None:
        return None
    ks = np.arange(max(1, k_guess - _WINDOW), min(m_active, k_guess + _WINDOW) + 1)
    nodes, values, spreads = [], [], []
    for level in range(_BRACKET_LEVELS):
        t = _bracket_nodes(center, scale_exp, level)
        if t.size == 0:
            return None
        # Names the node set (the constants too, should a test change them).
        key = ("bracket", center, scale_exp, level, _BRACKET_HALF_NODES, _BRACKET_SPAN)
        nodes.append(t)
        f, spread = _wide_cdf(groups, ks, t, key, m_active, spread=True)
        values.append(f)
        spreads.append(spread)
        if level:  # the levels' nodes interleaved, in order
            t_all = np.concatenate(nodes)
            order = np.argsort(t_all, kind="stable")
            t_all, f_all = t_all[order], np.concatenate(values, 1)[:, order]
            spread = np.concatenate(spreads, 1)[:, order]
        else:
            t_all, f_all = t, f
        lower, upper = _bracket(groups, t_all, f_all, key, spread)
        decided = _decide(ks, lower, upper, threshold, m_active)
        if decided is not None or _hopeless(lower, upper, threshold, level):
            return decided
    return None


def _piece_densities(sizes, ranks, t):
    """Each client's largest density on each piece [t_i, t_{i+1}]:
    (clients, pieces), the Beta(l, n - l + 1) density at its mode clipped
    to the piece (``sizes``, ``ranks``: columns (clients, 1))."""
    rs = sizes - ranks + 1.0
    # The mode of Beta(l, r): (l - 1) / (l + r - 2); 0 if l = 1, 1 if r = 1.
    total = ranks + rs - 2.0
    mode = np.where(total > 0.0, (ranks - 1.0) / np.maximum(total, 1.0), 0.5)
    at = np.clip(mode, t[:-1], t[1:])
    density = _beta_density(ranks, rs, at)
    # The log-space sum rounds by a few ulps of its terms, ~n in size.
    return density * (1.0 + 1e-13 * sizes)


def _wide_cdf(groups, ks, t, key, m_active, spread=False):
    """F at the nodes for ``ks`` and ``_WIDE`` ks on each side (rows;
    F_k = 0 for k < 1 and 1 for k > m_active). ``spread=True``: also each
    group's p (1 - p) at the nodes (rows; :func:`_difference_bound`), from
    the DP's own probabilities."""
    wide = np.arange(int(ks[0]) - _WIDE, int(ks[-1]) + _WIDE + 1)
    inside = (wide >= 1) & (wide <= m_active)
    f = np.empty((wide.shape[0], t.shape[0]))
    probs = _count_probabilities(groups, wide[inside], t, key, m_active)
    f[inside] = _count_cdf(groups, wide[inside], t, key, m_active, probs)
    f[wide < 1] = 0.0
    f[wide > m_active] = 1.0
    if spread:
        return f, probs * (1.0 - probs)
    return f


def _bracket(groups, t, f_wide, key, spread=None):
    """(lower, upper) bounds of M(k) for the ks of ``f_wide``'s inner rows
    (:func:`_riemann_bracket` with :func:`_slope_bound` and
    :func:`_curvature_bound`; ``key`` names the node set ``t``, None:
    nothing cached; ``spread``: as for :func:`_curvature_bound`)."""
    sums = _piece_sums(groups, t, key)
    slope = _slope_bound(groups, t, f_wide, key, sums)
    curvature = _curvature_bound(groups, t, f_wide, key, sums, spread)
    return _riemann_bracket(t, f_wide[_WIDE:-_WIDE], slope, curvature)


def _hopeless(lower, upper, threshold, level):
    """Whether the last level's brackets would still hold the threshold.

    A guess, for speed only (the decisions are the brackets'): the
    midpoints are far closer to M than the bracket's half-width (the
    trapezoid rule's error against the Riemann sums'), and each level
    halves the width; if the threshold lies within a quarter of the last
    level's expected width of some bracket's midpoint, refining is not
    worth its cost and the exact search decides at once.
    """
    straddle = (lower < threshold) & (upper >= threshold)
    if not straddle.any():
        return False
    width = (upper - lower)[straddle] / 2.0 ** (_BRACKET_LEVELS - 1 - level)
    gap = np.abs((lower + upper)[straddle] / 2.0 - threshold)
    return bool(np.any(gap < width / 4.0))


def _count_probabilities(groups, ks, t, key, m_active):
    """Each group's probabilities (rows) at the nodes ``t`` on the side the
    DP of :func:`_count_cdf` takes for ``ks``: P(value <= t), or P(value >
    t) when counting the clients above t needs fewer states."""
    flip = m_active - int(ks[0]) + 1 < int(ks[-1])
    return _cached_rows(
        groups,
        key and ("above" if flip else "below", key),
        _above if flip else _below,
        t,
    )


def _count_cdf(groups, ks, t, key, m_active, probs=None):
    """P(S(t) <= k - 1) for each k of ``ks`` (rows) at the nodes ``t``.

    Each client's probabilities come from :func:`_cached_rows` under
    ``key`` (None: computed afresh, the same betainc values), or are
    ``probs`` (:func:`_count_probabilities`' for the same arguments).
    A DP over the clients: counting those below t up to ``max(ks) - 1``,
    or those above up to ``m - min(ks)`` (fewer states), each step
    ``pmf[r] += q (pmf[r - 1] - pmf[r])`` in place on the states reached so
    far (a rounding of a few ulps of 1 per step on the CDF: ~1e-13 after
    256 clients).
    """
    below, above = int(ks[-1]), m_active - int(ks[0]) + 1
    flip = above < below
    states = above if flip else below
    # One contiguous row per group: P(value <= t), or P(value > t) if flip.
    if probs is None:
        probs = _count_probabilities(groups, ks, t, key, m_active)
    # Row 0 is a zero sentinel (P(count = -1)); the law sits in rows 1.. .
    law = np.zeros((states + 1, t.shape[0]))
    law[1] = 1.0
    step = np.empty((states, t.shape[0]))
    # Client i (from 0) can change the states 0..i + 1 only: the first
    # clients work on growing slices, the others on the whole law (its
    # views made once; numpy's per-call cost is most of the DP's).
    columns = np.repeat(np.arange(len(groups)), [c for _, c in groups])
    rows = probs[columns]
    views = [(step[:top], law[:top], law[1 : top + 1]) for top in range(2, states)]
    views += [(step, law[:states], law[1:])] * max(rows.shape[0] - len(views), 0)
    subtract, multiply, add = np.subtract, np.multiply, np.add
    for (diff, low, high), q in zip(views, rows, strict=False):
        subtract(low, high, out=diff)
        multiply(diff, q, out=diff)
        add(high, diff, out=high)
    pmf = law[1:]
    cdf = np.cumsum(pmf, axis=0)
    if flip:  # P(S <= k - 1) = 1 - P(clients above t <= m - k)
        return 1.0 - cdf[m_active - ks]
    return np.minimum(cdf[ks - 1], 1.0)


def _below(ns, ls, t):
    """P(value <= t) of each client (rows) at the nodes ``t``."""
    return special.betainc(ls, ns - ls + 1.0, t)


def _above(ns, ls, t):
    """P(value > t) of each client (rows) at the nodes ``t``."""
    return special.betainc(ns - ls + 1.0, ls, 1.0 - t)


# Per-client values at a node set (probabilities, piece densities, the
# values at the centre), one table per (kind, node key): a row per
# (n_j, l_j), gathered by one fancy index. The folds of a cross-validation,
# its refit and the groups of a grouped calibration (the same alpha,
# similar sizes) land on the same nodes and share most rows. Bounded: at
# most _TABLES_MAX tables (least recently used dropped), each restarted
# beyond _TABLE_MAX_ROWS rows (a 3-alpha x 5-fold grid search uses 11
# tables).
_TABLES: OrderedDict = OrderedDict()
_TABLES_MAX = 24
_TABLE_MAX_ROWS = 2048  # rows of <= 512 doubles (pieces at 257 nodes): <= 8 MiB
# a table, <= 192 MiB in all


def _cached_rows(groups, key, compute, t):
    """``compute(ns, ls, t)`` for each group (rows; ``ns``, ``ls`` columns
    of the groups' sizes and ranks, elementwise: the same bits for a group
    whichever others share the call), cached per (n_j, l_j) in the table
    ``key`` (None: nothing cached)."""
    pairs = [pair for pair, _ in groups]
    index, table = {}, None
    if key is not None:
        with _CACHE_LOCK:  # plans may run in threads
            entry = _TABLES.get(key)
            if entry is not None:
                _TABLES.move_to_end(key)
                index, table = entry
    if table is not None:
        rows = list(map(index.get, pairs))
        if None not in rows:
            return table[rows]
    missing = [pair for pair in pairs if pair not in index]
    if table is not None and table.shape[0] + len(missing) > _TABLE_MAX_ROWS:
        # Restarted with this call's rows only (all of them: the kept ones
        # are gone with the old table).
        index, table, missing = {}, None, pairs
    ns = np.array([n for n, _ in missing], dtype=np.float64)[:, None]
    ls = np.array([l for _, l in missing], dtype=np.float64)[:, None]
    fresh = compute(ns, ls, t)
    if key is None:
        return fresh
    if table is None:
        index, table = {}, fresh[:0]
    start = table.shape[0]
    index = {**index, **{pair: start + i for i, pair in enumerate(missing)}}
    table = np.concatenate((table, fresh))
    table.flags.writeable = False
    with _CACHE_LOCK:
        _TABLES[key] = (index, table)
        while len(_TABLES) > _TABLES_MAX:
            _TABLES.popitem(last=False)
    return table[[index[pair] for pair in pairs]]


class _RankPlan(NamedTuple):
    """The ranks and k of a plan whose exact coverage is left for later."""

    local_ranks: tuple[int, ...]
    k: int | None
    feasible: bool


def _fixed_rank_plan(sizes, alpha, clip_local_rank):
    """``local_rank="fixed"`` with unequal sizes: ranks and k, no coverage.

    The ranks and k of ``select_qq_ranks(sizes, alpha, local_rank="fixed",
    clip_local_rank=...)`` when :func:`_certified_k` decides k (the
    comment at the top), else None (and with equal sizes, whose search is
    another). A fit needs only these (_calibrator._cached_fit_selection);
    its exact coverage is computed when read.
    """
    if len(set(sizes)) == 1:
        return None
    ranks = _fixed_ranks(sizes, alpha, clip_local_rank)
    groups = _active_groups(sizes, ranks)
    if not groups:
        return _RankPlan((), None, False)
    k = _certified_k(groups, (1.0 - alpha) - _FEASIBILITY_TOL)
    if k is None:
        return None
    if k is _NO_VALID_K:
        return _RankPlan((), None, False)
    return _RankPlan(ranks, k, True)
