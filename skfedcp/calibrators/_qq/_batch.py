"""Coverage of many (ranks, k) pairs at once: the searches' batched rules."""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import integrate, interpolate, special

from ._coverage import (
    _TAIL,
    _coverage_unequal_quad,
    _panel_rule,
    _window_unequal,
)
from ._poisbin import (
    _poisbin_cdf_batch,
    _poisbin_cdf_ks,
    _poisbin_pmf_groups,
    _uses_tree,
)


def _undecided(values, errors, threshold):
    """Whether a coarse value is too close to the threshold to decide.

    Within ten estimated errors (the gap between two passes of the coarse
    rule) plus 1e-12: the accurate rule decides instead.
    """
    return np.abs(np.asarray(values) - threshold) <= 10.0 * np.asarray(errors) + 1e-12


def _batch_windows(sizes, ranks, ks, m_active):
    """Per pair, the t-window outside which the integrand is 1 or 0 (1e-17)."""
    ks = ks.astype(np.float64)
    ma = m_active.astype(np.float64)
    u_lo = special.betaincinv(ks, ma - ks + 1, _TAIL)[:, None]
    v_hi = special.betaincinv(ma - ks + 1, ks, _TAIL)[:, None]
    active = ranks <= sizes[None, :]
    l_safe = np.where(active, ranks, 1).astype(np.float64)
    n = sizes[None, :].astype(np.float64)
    lo = special.betaincinv(l_safe, n - l_safe + 1, u_lo)
    hi = special.betaincinv(n - l_safe + 1, l_safe, v_hi)
    t_lo = np.where(active, lo, np.inf).min(axis=1)
    t_hi = 1.0 - np.where(active, hi, np.inf).min(axis=1)
    return t_lo, t_hi


def _coverage_unequal_batch(sizes, counts, ranks, ks, *, coarse=False, canonical=True):
    """M for a batch of (ranks, k) pairs over the same clients.

    ``coarse``: each pair first goes through the sinh-mapped rule
    (:func:`_batch_sinh`, 16 and 24 nodes per side); a pair it does not
    settle (the two rules further apart than 1e-6, or a client much
    narrower than the others) goes through the coarse composite rule;
    returns ``(values, error)``, the error estimated by the gap between two
    rules (for decisions far from the threshold). Accurate mode: from
    ``_TREE_MIN_CLIENTS`` clients, each pair's value of
    :func:`_coverage_unequal_sinh_at` (32 and 48 nodes per side, agreement
    1e-12, ~1e-15; the same bits as the fixed-rank selection's); with
    fewer, the composite rule
    (:func:`_batch_composite`), whose values (``quad``'s where it does not
    converge) the small cases have always returned (~1e-14). A pair with
    fewer than k clients sending a finite value gets 1.0 (error 0).
    ``canonical``: the sinh passes on the snapped nodes of
    :func:`_canonical_features` (False: on the profile's own nodes, the
    values of the rule before the snapping, within ~1e-15 of them).
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    ranks = np.atleast_2d(np.asarray(ranks, dtype=np.int64))
    ks = np.asarray(ks, dtype=np.int64).reshape(-1)
    m_active = ((ranks <= sizes[None, :]) * counts[None, :]).sum(axis=1)
    out = np.ones(ks.shape[0])
    err = np.zeros(ks.shape[0])
    todo = np.flatnonzero(ks <= m_active)
    if todo.size == 0:
        return (out, err) if coarse else out
    R, K, MA = ranks[todo], ks[todo], m_active[todo]
    if coarse:
        values, gaps = _batch_sinh(sizes, counts, R, K, MA, True)
        rest = np.flatnonzero(~(gaps < _SINH_COARSE_AGREE))
        if rest.size:
            values[rest], gaps[rest] = _batch_composite(
                sizes, counts, R[rest], K[rest], MA[rest], coarse=True
            )
        out[todo], err[todo] = values, gaps
        return out, err
    if not _uses_tree(int(counts.sum())):
        out[todo] = _batch_composite(sizes, counts, R, K, MA)
        return out
    values = np.empty(todo.size)
    unsettled: list[int] = []
    for j in range(todo.size):
        act = R[j] <= sizes
        groups = [
            ((int(n), int(r)), int(c))
            for n, r, c in zip(sizes[act], R[j][act], counts[act], strict=True)
        ]
        value = _coverage_unequal_sinh_at(groups, int(K[j]), canonical=canonical)
        if value is None:
            unsettled.append(j)
        else:
            values[j] = value
    if unsettled:
        values[unsettled] = _batch_composite(
            sizes, counts, R[unsettled], K[unsettled], MA[unsettled]
        )
    out[todo] = values
    return out


def _batch_sinh(sizes, counts, R, K, MA, coarse):
    """(values, gaps) of the sinh-mapped rule for each pair (see below).

    One center and scale per pair (safeguarded Newton on mu(t) = k - 1/2,
    vectorised over the pairs), two rules in one Poisson-binomial pass; a
    pair with a client much narrower than the others gets an infinite gap
    (its steps need their own panels: the composite rule takes it).
    """
    n_pairs = K.shape[0]
    a, b = _batch_windows(sizes, R, K, MA)
    b = np.maximum(a, b)
    active = R <= sizes[None, :]
    n = sizes.astype(np.float64)[None, :]
    L = np.where(active, R, 1).astype(np.float64)
    Rb = n - L + 1.0
    cnt = np.where(active, counts[None, :], 0).astype(np.float64)
    q = L / (n + 1.0)
    width = np.sqrt(q * (1.0 - q) / (n + 2.0))
    w_med = np.array(
        [
            np.median(np.repeat(width[i], cnt[i].astype(np.int64)))
            for i in range(n_pairs)
        ]
    )
    sharp = (active & (width < w_med[:, None] / 10.0)).any(axis=1)
    log_beta = special.betaln(L, Rb)
    target = K - 0.5
    lo, hi = a.copy(), b.copy()
    t = 0.5 * (a + b)
    live = np.flatnonzero(b > a)
    for _ in range(40):
        if live.size == 0:
            break
        tl = t[live][:, None]
        p = special.betainc(L[live], Rb[live], tl)
        pdf = np.exp(
            (L[live] - 1.0) * np.log(tl)
            + (Rb[live] - 1.0) * np.log1p(-tl)
            - log_beta[live]
        )
        gap = (p * cnt[live]).sum(axis=1) - target[live]
        lo[live] = np.where(gap < 0, t[live], lo[live])
        hi[live] = np.where(gap < 0, hi[live], t[live])
        slope = (pdf * cnt[live]).sum(axis=1)
        step = t[live] - gap / np.where(slope > 0, slope, 1.0)
        mid = 0.5 * (lo[live] + hi[live])
        inside = (slope > 0) & (step > lo[live]) & (step < hi[live])
        new = np.where(inside, step, mid)
        moved = np.abs(new - t[live])
        t[live] = new
        live = live[moved > 1e-3 * (hi[live] - lo[live]) + 1e-15]
    tt = t[:, None]
    p = special.betainc(L, Rb, tt)
    pdf = np.exp((L - 1.0) * np.log(tt) + (Rb - 1.0) * np.log1p(-tt) - log_beta)
    var = np.maximum(((p * (1.0 - p)) * cnt).sum(axis=1), 0.25)
    slope = (np.where(np.isfinite(pdf), pdf, 0.0) * cnt).sum(axis=1)
    scale = np.where(slope > 0, np.sqrt(var) / np.where(slope > 0, slope, 1.0), 0.0)
    scale = np.minimum(np.where(scale > 0, scale, (b - a) / 10.0), b - a)
    scale = np.where(scale > 0, scale, 1.0)
    center = np.clip(t, a, b)
    n1, n2 = (16, 24) if coarse else _SINH_NODES[:2]
    nodes, weights = [], []
    for n_side in (n1, n2):
        x, w = _legendre01(n_side)
        parts_t, parts_w = [], []
        for side, span in ((-1.0, center - a), (1.0, b - center)):
            top = np.arcsinh(span / scale)[:, None]
            u = top * x
            parts_t.append(center[:, None] + side * scale[:, None] * np.sinh(u))
            parts_w.append(w * top * scale[:, None] * np.cosh(u))
        nodes.append(np.concatenate(parts_t, axis=1))
        weights.append(np.concatenate(parts_w, axis=1))
    m = int(counts.sum())
    flip = bool(np.mean(K - 1 > m - K) > 0.5)
    f = _poisbin_cdf_batch(sizes, counts, R, K, np.concatenate(nodes, axis=1), flip)
    split = nodes[0].shape[1]
    low = a + (f[:, :split] * weights[0]).sum(axis=1)
    high = a + (f[:, split:] * weights[1]).sum(axis=1)
    gaps = np.abs(high - low)
    gaps[sharp | ~np.isfinite(high)] = np.inf
    empty = ~(b > a)
    high[empty], gaps[empty] = a[empty], 0.0
    return high, gaps


def _batch_composite(sizes, counts, R, K, MA, *, coarse=False):
    """M for a batch of (ranks, k) pairs: the composite rule.

    Same scheme as :func:`_coverage_unequal_screen`, with every pair's nodes
    in one DP pass: a rigorous trim of each window by monotonicity, then
    composite Gauss-Legendre on the trimmed window. Accurate mode: 8 and 16
    panels of 16 nodes, a pair whose two passes differ by more than 5e-14 is
    recomputed alone with ``quad``; returns ``values`` (~1e-14). ``coarse``:
    3 and 6 panels; returns ``(values, error)``, the error estimated by the
    gap between the two passes (for decisions far from the threshold).
    ``R, K, MA``: the pairs' ranks, k and active clients, every ``K <= MA``
    (the caller gives 1.0 to the others).
    """
    m = int(counts.sum())
    flip = bool(np.mean(K - 1 > m - K) > 0.5)

    def f(t):
        return _poisbin_cdf_batch(sizes, counts, R, K, t, flip)

    a, b = _batch_windows(sizes, R, K, MA)
    b = np.maximum(a, b)
    few = not _uses_tree(m)
    # The tree's CDF carries ~1e-16 of absolute rounding, so its trim levels
    # are 1e-15 (dropping at most 1e-15 x window); its steps are narrow at
    # many clients, so it trims on a finer grid and for more passes.
    if few:
        top, bottom, n_grid, passes, keep = 1e-16, 1e-17, 17, 3, 0.25
    else:
        top, bottom, n_grid, passes, keep = 1e-15, 1e-15, 33, 5, 0.7
    for _ in range(passes):
        frac = np.linspace(0.0, 1.0, n_grid)[1:-1]
        grid = a[:, None] + (b - a)[:, None] * frac
        vals = f(grid)
        # f decreases: a moves to the last node of the leading run of values
        # >= 1 - top, b to the first node of the trailing run <= bottom.
        lead = np.cumprod(vals >= 1.0 - top, axis=1).sum(axis=1)
        trail = np.cumprod((vals <= bottom)[:, ::-1], axis=1).sum(axis=1)
        width = b - a
        new_a = a + width * np.where(lead > 0, frac[np.maximum(lead - 1, 0)], 0.0)
        new_b = b - width * np.where(trail > 0, frac[np.maximum(trail - 1, 0)], 0.0)
        new_b = np.maximum(new_a, new_b)
        shrunk = (new_b - new_a) < keep * width
        a, b = new_a, new_b
        if not shrunk.any():
            break
    x, w = _panel_rule()

    def rule(n_panels, rows):
        edges = np.linspace(0.0, 1.0, n_panels + 1)[:-1]
        nodes = (edges[:, None] + x / n_panels).ravel()
        width = (b - a)[rows]
        t = a[rows][:, None] + width[:, None] * nodes
        wts = np.tile(w, n_panels) / n_panels
        cdf = _poisbin_cdf_batch(sizes, counts, R[rows], K[rows], t, flip)
        return a[rows] + width * (cdf @ wts)

    everyone = np.arange(K.shape[0])
    if coarse:
        low, high = rule(3, everyone), rule(6, everyone)
        return high, np.abs(high - low)
    # Panels doubled (8, 16, 32, 64) for the
    # pairs whose last two passes differ by 5e-14 or more; "quad" for any
    # left after that.
    schedule = (8, 16, 32, 64)
    res = rule(schedule[0], everyone)
    rows = everyone
    for n_panels in schedule[1:]:
        finer = rule(n_panels, rows)
        done = np.abs(finer - res[rows]) < 5e-14
        res[rows] = finer
        rows = rows[~done]
        if rows.size == 0:
            break
    for i in rows:
        active = R[i] <= sizes
        groups = [
            ((int(n), int(l)), int(c))
            for n, l, c in zip(sizes[active], R[i][active], counts[active], strict=True)
        ]
        res[i] = _coverage_unequal_quad(groups, int(K[i]))
    return res


class _NormalEstimate:
    """Normal-approximation estimates of M(k) for fixed ranks (no guarantee).

    ``P(S(t) <= k - 1) ~ Phi((k - 1/2 - mu(t)) / sigma(t))`` with the exact
    mean and variance of the count ``S(t)`` of clients below ``t``,
    interpolated (cubic spline) from ``n_coarse`` points of the union of the
    k-windows and integrated by the trapezoid rule on ``n_fine`` points.
    Within ~1e-6 of M on random clients (about 1e-7 from 100 clients on),
    far below the step of M in k; only used to guess where a decision flips,
    every returned decision being made with accurate values.
    """

    def __init__(self, groups, n_coarse=257, n_fine=8193):
        self.t_lo, t_hi = _window_unequal(groups, 1, sum(c for _, c in groups))
        self.t = None
        if not t_hi > self.t_lo:
            return
        counts = np.array([c for _, c in groups], dtype=np.float64)
        n = np.array([n_j for (n_j, _), _ in groups], dtype=np.float64)
        l = np.array([l_j for (_, l_j), _ in groups], dtype=np.float64)
        tc = np.linspace(self.t_lo, t_hi, n_coarse)
        p = special.betainc(l[None, :], (n - l + 1.0)[None, :], tc[:, None])
        self.t = np.linspace(self.t_lo, t_hi, n_fine)
        self.mu = interpolate.CubicSpline(tc, p @ counts)(self.t)
        var = interpolate.CubicSpline(tc, (p * (1.0 - p)) @ counts)(self.t)
        self.sd = np.sqrt(np.maximum(var, 1e-12))

    def __call__(self, ks):
        ks = np.atleast_1d(np.asarray(ks, dtype=np.float64))
        if self.t is None:
            return np.full(ks.shape[0], self.t_lo)
        z = (ks[:, None] - 0.5 - self.mu[None, :]) / self.sd[None, :]
        return self.t_lo + integrate.trapezoid(special.ndtr(z), self.t, axis=1)


def _coverage_unequal_all_k(groups, max_panels=256):
    """M(k) for every k = 1..m_active at once, or None if not converged.

    One Poisson-binomial DP per pass gives ``P(S <= k - 1)`` for every k at
    every node; the nodes cover the union of the k-windows (from the lower
    end for k = 1 to the upper end for k = m_active), outside which every
    integrand is 1 or 0 to 1e-17. Composite 16-node Gauss-Legendre, the
    panels doubled from 16 until every k agrees to 5e-14 between two passes.
    """
    m_active = sum(c for _, c in groups)
    if m_active == 0:
        return np.zeros(0)
    t_lo, t_hi = _window_unequal(groups, 1, m_active)
    if not t_hi > t_lo:
        return np.full(m_active, t_lo)
    x, w = _panel_rule()
    previous = None
    n_panels = 16
    while n_panels <= max_panels:
        edges = np.linspace(t_lo, t_hi, n_panels + 1)
        width = edges[1] - edges[0]
        t = (edges[:-1, None] + width * x).ravel()
        cdf = np.minimum(np.cumsum(_poisbin_pmf_groups(groups, t), axis=0), 1.0)
        values = t_lo + width * (cdf @ np.tile(w, n_panels))
        if previous is not None and np.max(np.abs(values - previous)) < 5e-14:
            return values
        previous = values
        n_panels *= 2
    return None


# --------------------------------------------------------------------------
# A few k at once: sinh-mapped Gauss-Legendre (issue 21)
# --------------------------------------------------------------------------
# f_k(t) = P(S(t) <= k - 1) is a smooth step: with mu(t) = E S(t) and
# sigma(t)^2 = Var S(t), it falls from 1 to 0 around the t_c where
# mu(t_c) = k - 1/2, over a width s = sigma(t_c) / mu'(t_c), while the window
# where it is neither 0 nor 1 (1e-17) is tens to a hundred s wide.  The map
# t = t_c +/- s sinh(u), u in [0, asinh(span / s)], puts the nodes of a
# Gauss-Legendre rule densely inside the step and logarithmically sparse in
# the tails; 32 to 48 nodes per side give 1e-15 on clients of 10 to 1,000
# rows (2 to 1,000 clients), against ~400 nodes for the composite rule.
# A client much narrower than the others (a Beta(l, n - l + 1) with n =
# 10^9 among clients of 10^3) is a step of its own: it gets its own center
# (its mean) and scale (its standard deviation), the window is cut halfway
# between centers, and centers closer than 20 times the finer scale are
# merged into the finer one (a one-sided sinh map resolves every coarser
# scale).  The cost is therefore independent of the sizes.  Error control:
# two rules (n_1, n_2 nodes per side) must agree to _SINH_AGREE for every
# k, else None (the caller falls back to the composite rule); the value
# returned is the finer rule's.  The window is the rigorous one of
# _window_unequal (1e-17 outside).
_SINH_NODES = (32, 48, 64)
_SINH_CANONICAL = (40, 48, 64)
_CANONICAL_MAX_SPAN = 128
_SINH_AGREE = 1e-12
_SINH_MAX_FEATURES = 16
_SINH_COARSE_AGREE = 1e-6


@functools.lru_cache(maxsize=8)
def _legendre01(n_nodes):
    x, w = np.polynomial.legendre.leggauss(n_nodes)
    return (x + 1.0) / 2.0, w / 2.0


def _sinh_rule(features, a, b, n_nodes):
    """Nodes and weights on [a, b]: one-sided sinh maps from each center."""
    x, w = _legendre01(n_nodes)
    centers = [min(max(c, a), b) for c, _ in features]
    mids = [(c0 + c1) / 2.0 for c0, c1 in zip(centers[:-1], centers[1:], strict=True)]
    cuts = [a, *mids, b]
    nodes, weights = [], []
    for i, (c, (_, s)) in enumerate(zip(centers, features, strict=True)):
        for side, end in ((-1.0, cuts[i]), (1.0, cuts[i + 1])):
            span = abs(end - c)
            if span <= 0.0:
                continue
            top = float(np.arcsinh(span / s))
            u = top * x
            nodes.append(c + side * s * np.sinh(u))
            weights.append(w * top * s * np.cosh(u))
    return np.concatenate(nodes), np.concatenate(weights)


def _sinh_features(groups, k, a, b):
    """Centers and scales of the steps of f_k on [a, b] (see above), or None."""
    ns = np.array([n for (n, _), _ in groups], dtype=np.float64)
    ls = np.array([l for (_, l), _ in groups], dtype=np.float64)
    cs = np.array([c for _, c in groups], dtype=np.float64)
    rs = ns - ls + 1.0
    q = ls / (ns + 1.0)
    width = np.sqrt(q * (1.0 - q) / (ns + 2.0))
    order = np.argsort(width)
    cum = np.cumsum(cs[order])
    w_med = width[order][np.searchsorted(cum, cum[-1] / 2.0)]
    sharp = width < w_med / 10.0
    log_beta = special.betaln(ls, rs)

    def mu_and_slope(t):
        p = special.betainc(ls, rs, t)
        pdf = np.exp((ls - 1.0) * np.log(t) + (rs - 1.0) * np.log1p(-t) - log_beta)
        return p, pdf

    # t_c: mu(t_c) = k - 1/2, safeguarded Newton inside [a, b].
    target = k - 0.5
    lo, hi = a, b
    # The (k-1)-th client level in order (as np.repeat(q, cs)[k - 1]).
    at = int(np.searchsorted(np.cumsum(cs), max(k - 1, 0), side="right"))
    at = min(at, len(q) - 1)
    t = min(max(float(q[at]), a), b)
    if not a < t < b:
        t = 0.5 * (a + b)
    for _ in range(30):
        p, pdf = mu_and_slope(t)
        gap = float(p @ cs) - target
        if gap < 0:
            lo = t
        else:
            hi = t
        slope = float(pdf @ cs)
        step = t - gap / slope if slope > 0 else 0.5 * (lo + hi)
        new = step if lo < step < hi else 0.5 * (lo + hi)
        if abs(new - t) <= 1e-3 * (hi - lo) + 1e-15 or hi - lo < 1e-12:
            t = new
            break
        t = new
    p, pdf = mu_and_slope(t)
    var = max(float((p * (1.0 - p)) @ cs), 0.25)
    slope = float(pdf[~sharp] @ cs[~sharp])
    s = math.sqrt(var) / slope if slope > 0 else (b - a) / 10.0
    s = min(s, b - a)
    if not s > 0:
        return None
    candidates = [(s, t)] + [
        (float(width[g]), float(q[g]))
        for g in np.flatnonzero(sharp)
        if a - 20 * width[g] < q[g] < b + 20 * width[g]
    ]
    kept: list[tuple[float, float]] = []
    for scale, center in sorted(candidates):
        if all(abs(center - c) > 20.0 * sc for c, sc in kept):
            kept.append((center, scale))
        if len(kept) > _SINH_MAX_FEATURES:
            return None
    return sorted(kept)


def _canonical_features(features, a, b):
    """The features and window snapped to a grid, so near profiles share nodes.

    Each scale is rounded to a power of 2^(1/4), each center to a multiple
    of half its rounded scale, and the window widened (never narrowed) so
    that it reaches a power of two, at least 64, of the outer scales from
    the outer centers (clipped to [0, 1]). The integrand is 1 or 0 (1e-17)
    on the added pieces, and the map moves by less than a quarter of a step
    width; the wider window costs accuracy, hence the rules of
    _SINH_CANONICAL (40 and 48 nodes per side: within 1.5e-14 of a 96-node
    rule on 60 random profiles of 40-400 clients, the two rules within
    7.2e-13). The
    nodes are then a function of a few integers: the folds, the groups and
    the neighbouring k of one alpha land on the same node set and reuse
    each client's probabilities and the count's law (_poisbin's caches).
    Returns None (the profile's own nodes) unless there is one feature and
    the window reaches at most 128 scales from it on each side: a client
    much narrower than the others, snapped, would widen the window past
    what the rules resolve.
    """
    if len(features) != 1:
        return None
    ((center, scale),) = features
    s_q = 2.0 ** (round(4.0 * math.log2(scale)) / 4.0)
    half = s_q / 2.0
    c_q = round(center / half) * half
    spans = [_canonical_span(c_q - a, s_q), _canonical_span(b - c_q, s_q)]
    if max(spans) > _CANONICAL_MAX_SPAN * s_q:
        return None
    a = max(min(c_q - spans[0], a), 0.0) if a < c_q else a
    b = min(max(c_q + spans[1], b), 1.0) if b > c_q else b
    return [(c_q, s_q)], a, b


def _canonical_span(span, scale):
    """``span`` rounded up to ``scale`` times a power of two, at least 64."""
    if span <= 0.0:
        return 0.0
    return scale * 2.0 ** max(6, math.ceil(math.log2(span / scale)))


def _coverage_unequal_sinh(groups, ks, *, canonical=False):
    """(M(k) for each k of ``ks``, agreement of the two rules), or None.

    ``groups``: active ((n_j, l_j), count); ``ks`` sorted within
    1..m_active. See the comment above. ``canonical``: the nodes of
    :func:`_canonical_features` (values within ~1e-15 of the plain rule's),
    each client's probabilities and the count's law cached across calls.
    """
    ks = np.asarray(ks, dtype=np.int64)
    a, b = _window_unequal(groups, int(ks[0]), int(ks[-1]))
    if not b > a:
        return np.full(ks.shape[0], a), np.zeros(ks.shape[0])
    k_mid = int(ks[ks.shape[0] // 2])
    features = _sinh_features(groups, k_mid, a, b)
    if features is None:
        return None
    key, schedule = None, _SINH_NODES
    snapped = _canonical_features(features, a, b) if canonical else None
    if snapped is not None:
        features, a, b = snapped
        key, schedule = (a, b, tuple(features)), _SINH_CANONICAL

    def cdf(t, n_nodes):
        node_key = None if key is None else (key, n_nodes)
        return _poisbin_cdf_ks(groups, ks, t, key=node_key)

    rules = [_sinh_rule(features, a, b, n) for n in schedule[:2]]
    t = np.concatenate([r[0] for r in rules])
    f = cdf(t, schedule[:2])
    split = rules[0][0].shape[0]
    coarse = a + f[:, :split] @ rules[0][1]
    fine = a + f[:, split:] @ rules[1][1]
    for n_nodes in schedule[2:]:  # one more rule if the two disagree
        if np.all(np.abs(fine - coarse) < _SINH_AGREE):
            break
        t, w = _sinh_rule(features, a, b, n_nodes)
        coarse, fine = fine, a + cdf(t, (n_nodes,)) @ w
    gap = np.abs(fine - coarse)
    if not np.all(gap < _SINH_AGREE):
        return None
    return fine, gap


def _sinh_ks(k, m_active):
    """The k evaluated together with k by the canonical pass (k - 2..k + 2)."""
    return np.arange(max(1, k - 2), min(m_active, k + 2) + 1)


def _coverage_unequal_sinh_at(groups, k, *, canonical=False):
    """M(k) from the pass over ``_sinh_ks(k)`` (a function of groups and k
    only, so every caller gets the same bits), or None."""
    m_active = sum(c for _, c in groups)
    ks = _sinh_ks(k, m_active)
    result = _coverage_unequal_sinh(groups, ks, canonical=canonical)
    if result is None:
        return None
    return float(result[0][int(np.searchsorted(ks, k))])
