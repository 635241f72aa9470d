"""The worst-honest-set coverage integral of QQ against dishonest clients."""

# L(r) = int_0^1 min_H P(X_H(t) <= r - 1) dt over the honest sets H of
# n_keep clients (the lower bound of _byzantine.py; the upper bound takes
# the maximum), X_H(t) the number of clients of H whose value lies below t,
# a Poisson-binomial count with p_j(t) = I_t(l_j, n_j - l_j + 1).  At each
# node the minimum is reached by H(t) = the n_keep largest p_j(t) (the
# coupling swap of the user guide), so the integrand is evaluated directly:
# the p_j(t) of every client, the n_keep largest kept (np.partition), their
# count law (DP for few clients, the product tree of _poisbin beyond).  No
# pair of clients is ever compared at every node.
#
# Why the value is still the integral of that integrand (the proof is the
# guide's proposition; what is computed here is a quadrature of it):
#
# * f_r(t) = min_H P(X_H(t) <= r - 1) decreases in t (each P(X_H(t) <=
#   r - 1) does, as every p_j increases), so on any nodes 0 = t_0 < ... <
#   t_G = 1 its right / left Riemann sums are rigorous lower / upper
#   bounds of L(r) (up to the rounding of the count law, ~1e-14, covered by
#   1e-12).  One pass on 257 nodes brackets every r: a rank whose upper sum
#   misses the target cannot pass, one whose lower sum reaches it passes,
#   and only the few ranks in between are integrated (the band).
# * Monotone f also trims the window rigorously: left of a node where
#   f >= 1 - 1e-16 the integral is the length (error <= 1e-16), right of
#   one where f <= 1e-17 it is 0 (error <= 1e-17).
# * Inside, f is analytic except where H(t) changes, i.e. where two Beta
#   CDFs at the boundary of H cross (each pair crosses at most once: the
#   ratio of two Beta densities is t^a (1 - t)^b up to a constant).  Those
#   crossings are the panel edges of a composite Gauss-Legendre rule with
#   each panel halved until it and its halves agree to 1e-13 times its share
#   of the width (8-node panels: most pieces are short).  They
#   are found without looking at every pair: on a grid, H changes only in
#   the intervals where the kept set differs at the two ends (a change and
#   its undoing inside one interval would need a pair to cross twice), and
#   in such an interval a crossing of x and y can move the boundary only if
#   fewer than `room` clients are ahead of x at both ends and fewer than
#   `total - room` behind it at both ends (a client ahead of x at both ends
#   is ahead throughout), so only those clients are paired and root-found.

from __future__ import annotations

import functools

import numpy as np
from scipy.special import betainc, betaincinv

from ._poisbin import _TREE_CHUNK, _poisbin_window_tree, _uses_tree, _window_cdf

# Below / above the window every active p_j is within this of 0 / 1.
_EDGE = 1e-18
# Panels halved until their Gauss and Kronrod values agree (at most
# _MAX_LEVELS times), within budgets adding up to 2 _AGREE.
_AGREE = 1e-13
_MAX_LEVELS = 12
# Nodes of the bracketing Riemann pass and of the crossing grid.
_GRID = 257
# Bracketing passes of certified_band (the window's grid, then crowded nodes).
_BAND_PASSES = 3
# Rounding of the count law (DP or product tree), on the Riemann brackets.
_ROUNDING = 1e-12


def _types(sizes, ranks):
    """Distinct active ``(n, l)`` with counts, and the number of inactive clients."""
    pairs: dict[tuple[int, int], int] = {}
    inactive = 0
    for n, l in zip(sizes, ranks, strict=True):
        if l > n:
            inactive += 1
        else:
            pairs[(n, l)] = pairs.get((n, l), 0) + 1
    keys = sorted(pairs)
    a = np.array([l for _, l in keys], dtype=np.float64)
    b = np.array([n - l + 1 for n, l in keys], dtype=np.float64)
    counts = np.array([pairs[key] for key in keys], dtype=np.int64)
    return a, b, counts, inactive


class _Extreme:
    """``ext_H P(X_H(t) <= k - 1)`` over the honest sets of ``n_keep`` clients.

    ``largest=True``: the minimum (``H`` = the ``n_keep`` largest
    ``p_j(t)``); ``False``: the maximum (the ``n_keep`` smallest, the
    inactive clients, ``p = 0``, counting as the smallest).
    """

    def __init__(self, sizes, ranks, n_keep, largest):
        self.sizes, self.ranks = sizes, ranks
        self.a, self.b, self.counts, self.inactive = _types(sizes, ranks)
        self.n_keep, self.largest = n_keep, largest
        self.client_type = np.repeat(np.arange(self.a.size), self.counts)
        self.room = n_keep if largest else max(n_keep - self.inactive, 0)
        self.total = int(self.counts.sum())

    def probs(self, t):
        return betainc(self.a[None, :], self.b[None, :], t[:, None])

    def members(self, p):
        """The ``p_j(t)`` of ``H(t)`` at each node (rows): (nodes, n_keep)."""
        clients = p[:, self.client_type]
        if self.largest:
            if self.n_keep >= clients.shape[1]:
                return clients[:, : self.n_keep]
            return -np.partition(-clients, self.n_keep - 1, axis=1)[:, : self.n_keep]
        if self.room == 0:
            return np.zeros((p.shape[0], 0))
        if self.room >= clients.shape[1]:
            return clients
        return np.partition(clients, self.room - 1, axis=1)[:, : self.room]

    def cdf(self, t, ks):
        """``P(X_H(t) <= k - 1)``: (len(ks), nodes)."""
        return _count_cdf(self.members(self.probs(t)), np.asarray(ks))

    def fixed(self):
        """Whether ``H(t)`` is the same at every ``t`` (every client kept, or none)."""
        return self.room <= 0 or self.room >= self.total

    def grid_cdf(self):
        """``(window, t, f)``: ``f[k - 1]`` the integrand of every ``k`` on the
        window's grid ``t`` (with 0 and 1), shared (see :func:`_grid_cdf`)."""
        return _grid_cdf(self.sizes, self.ranks, self.n_keep, self.largest)

    def take(self, p, types=None, room=None):
        """How many clients of each type ``H`` holds at each node (of the
        ``types`` given, sharing ``room`` places: every type, all places)."""
        counts = self.counts if types is None else self.counts[types]
        room = self.room if room is None else room
        order = np.argsort(-p if self.largest else p, axis=1, kind="stable")
        sorted_counts = counts[order]
        before = np.cumsum(sorted_counts, axis=1) - sorted_counts
        take_sorted = np.clip(room - before, 0, sorted_counts)
        take = np.empty_like(take_sorted)
        np.put_along_axis(take, order, take_sorted, axis=1)
        return take


def _count_cdf(p, ks):
    """``P(sum_j Bernoulli(p_j) <= k - 1)`` per row of ``p``: (len(ks), rows)."""
    rows, size = p.shape
    out = np.empty((ks.size, rows))
    if size == 0:
        out[:] = 1.0
        return out
    if not _uses_tree(size):
        states = min(int(ks.max()), size + 1)
        cdf = np.minimum(np.cumsum(_dp_pmf(p, states), axis=1), 1.0)
        return cdf[:, np.minimum(ks, states) - 1].T
    step = max(1, _TREE_CHUNK // size)
    for start in range(0, rows, step):
        block = p[start : start + step]
        offset, window = _poisbin_window_tree(block, lean=True)
        kk = np.broadcast_to(np.minimum(ks, size + 1), (block.shape[0], ks.size))
        out[:, start : start + step] = _window_cdf(offset, window, kk).T
    return np.clip(out, 0.0, 1.0)


def _dp_pmf(p, states):
    """The law of ``sum_j Bernoulli(p_j)`` per row of ``p`` on the counts
    ``0..states - 1`` (the mass of larger counts dropped: no step lowers a
    count), one client at a time."""
    pmf = np.zeros((p.shape[0], states))
    pmf[:, 0] = 1.0
    for j in range(p.shape[1]):
        pj = p[:, j : j + 1]
        nxt = pmf * (1.0 - pj)
        nxt[:, 1:] += pmf[:, :-1] * pj
        pmf = nxt
    return pmf


# A plan reads one (sizes, ranks) at a time (dp-qq: one per gamma); each
# entry holds (_GRID + 2) x types doubles, 1.3 MB at 1,000 distinct sizes.
@functools.lru_cache(maxsize=8)
def _window_probs(sizes, ranks):
    """``((lo, hi), t, p)``: the window, its grid ``t`` (``_GRID`` nodes, with
    0 and 1) and every active type's ``p_j`` there (rows: nodes).

    ``[lo, hi]`` is where some active ``p_j`` is more than 1e-18 from 0 and
    1. Both depend on the clients' ``(n_j, l_j)`` only, not on the honest
    set: the bracketing pass, the trims and ``max_byzantine``'s brackets of
    one plan share these ``betainc`` values (elementwise: the same bits as
    evaluated node by node).
    """
    a, b, _, _ = _types(sizes, ranks)
    lo = float(np.min(betaincinv(a, b, _EDGE)))
    hi = float(np.max(betaincinv(a, b, 1.0 - _EDGE)))
    t = np.r_[0.0, np.linspace(lo, hi, _GRID), 1.0]
    p = betainc(a[None, :], b[None, :], t[:, None])
    t.flags.writeable = p.flags.writeable = False
    return (lo, hi), t, p


# Honest sets up to this many clients keep the integrand of every k on the
# grid cached ((n_keep + 1) x (_GRID + 2) doubles: 2 MB at 1,000 clients).
_GRID_CACHE_MAX_KEEP = 4096


def _grid_cdf(sizes, ranks, n_keep, largest):
    """``(window, t, f)``: ``f[k - 1]`` the integrand ``ext_H P(X_H(t) <= k -
    1)`` of every ``k`` in ``1..n_keep + 1`` at the nodes ``t`` of
    :func:`_window_probs`. The value at a node and ``k`` does not depend on
    which other nodes and ``k`` are evaluated with it (one count law per
    node, read at ``k``), so callers reading a few rows get the bits they
    would compute themselves. Cached for honest sets of at most
    ``_GRID_CACHE_MAX_KEEP`` clients (the bracketing pass and the trim of
    the integral that follows it read the same rows)."""
    if n_keep <= _GRID_CACHE_MAX_KEEP:
        return _grid_cdf_cached(sizes, ranks, n_keep, largest)
    return _grid_cdf_fresh(sizes, ranks, n_keep, largest)


def _grid_cdf_fresh(sizes, ranks, n_keep, largest):
    ext = _Extreme(sizes, ranks, n_keep, largest)
    window, t, p = _window_probs(sizes, ranks)
    f = _count_cdf(ext.members(p), np.arange(1, n_keep + 2))
    f.flags.writeable = False
    return window, t, f


_grid_cdf_cached = functools.lru_cache(maxsize=8)(_grid_cdf_fresh)


def riemann_brackets(sizes, ranks, n_keep, k):
    """Rigorous ``(lower, upper)`` brackets on ``int_0^1 min_H P(X_H(t) <= k
    - 1) dt``, each sharper than the one before (a generator: stop when one
    decides).

    The right / left Riemann sums of the decreasing integrand bound the
    integral on any nodes from 0 to 1 (``_ROUNDING`` covers the count law's
    rounding). First on the window's shared grid (:func:`_window_probs`:
    about its width over ``_GRID``, a few 1e-3), then on ``_GRID`` nodes
    ``t_c + s sinh(u)`` (``u`` uniform) crowded where that grid shows the
    integrand dropping from 0.98 to 0.02 (``t_c`` its middle, ``s`` a
    quarter of its width): about ``s / 20``. Where the nodes sit changes
    only the width, never the validity.
    """
    ext = _Extreme(sizes, ranks, n_keep, True)
    if ext.a.size == 0:  # every client sends +inf: f = 1
        yield 1.0, 1.0
        return
    _, t, f = ext.grid_cdf()
    row = f[k - 1]
    yield _riemann_sums(t, row)
    nodes = _crowded(t, row, row)
    yield _riemann_sums(nodes, ext.cdf(nodes, np.array([k]))[0])


def _crowded(t, first, last):
    """``_GRID`` nodes from 0 to 1, ``t_c + s sinh(u)`` (``u`` uniform),
    crowded where the integrands drop: from the last node of ``t`` before
    ``first`` (the earliest to drop) falls below 0.98 to the first where
    ``last`` is at most 0.02 (``t_c`` the middle, ``s`` a quarter of the
    width). Where they sit changes only the width of a Riemann bracket."""
    below = last <= 0.02
    high = int(np.argmax(below)) if below.any() else t.size - 1
    low = max(int(np.argmax(first < 0.98)) - 1, 0)
    center = (t[low] + t[high]) / 2.0
    s = max((t[high] - t[low]) / 4.0, 1e-12)
    u = np.linspace(np.arcsinh(-center / s), np.arcsinh((1.0 - center) / s), _GRID)
    nodes = np.clip(center + s * np.sinh(u), 0.0, 1.0)
    nodes[0], nodes[-1] = 0.0, 1.0
    return nodes


def _riemann_sums(t, f):
    """Right / left Riemann sums of a decreasing ``f`` on the nodes ``t``."""
    width = np.diff(t)
    return float(f[1:] @ width) - _ROUNDING, float(f[:-1] @ width) + _ROUNDING


def _trim(f_first, f_last, grid, lo, hi):
    """``[a, b]``: ``f ~ 1`` left of ``a`` for the first ``k``, ``~ 0`` right
    of ``b`` for the last (``f`` decreases in ``t`` and increases in ``k``)."""
    one = f_first >= 1.0 - 1e-16
    last_one = grid.size - 1 if one.all() else int(np.argmin(one)) - 1
    zeros = np.flatnonzero(f_last <= 1e-17)
    a = grid[last_one] if last_one >= 0 else lo
    return a, (grid[zeros[0]] if zeros.size else hi), bool(zeros.size)


@functools.lru_cache(maxsize=256)
def certified_band(sizes, ranks, n_keep, threshold, k_max):
    """``(k_lo, k_hi)``: every ``k < k_lo`` has ``int f_k < threshold`` and
    ``k_hi`` (if ``<= k_max``) has ``int f_k >= threshold``, rigorously.

    Right / left Riemann sums of the decreasing integrand ``f_k`` (the
    minimum over the honest sets) bound its integral from below / above on
    any nodes; ``_ROUNDING`` covers the count law's rounding. The first pass
    reads the window's grid, the next ones (at most ``_BAND_PASSES`` in
    all) nodes crowded where the band's integrands drop
    (:func:`_crowded`, a gap about 50 times narrower), until the band holds
    at most 2 ranks. ``None`` when no ``k <= k_max`` can pass; ``k_hi =
    k_max`` when none is certain to.
    """
    ext = _Extreme(sizes, ranks, n_keep, True)
    if ext.a.size == 0:  # every client sends +inf: f = 1
        return 1, 1
    _, t, f_window = ext.grid_cdf()
    k_lo, k_hi, base = 1, k_max, 1  # base: the k of f's first row
    for step in range(_BAND_PASSES):
        if step == 0:  # the window's grid: its integrand is shared
            f = f_window[k_lo - 1 : k_hi]
        else:
            t = _crowded(t, f[k_lo - base], f[k_hi - base])
            f = ext.cdf(t, np.arange(k_lo, k_hi + 1))
        base = k_lo
        width = np.diff(t)
        lower = f[:, 1:] @ width - _ROUNDING
        upper = f[:, :-1] @ width + _ROUNDING
        maybe = np.flatnonzero(upper >= threshold)
        if maybe.size == 0:
            return None
        surely = np.flatnonzero(lower >= threshold)
        k_lo = base + int(maybe[0])
        k_hi = max(base + int(surely[0]) if surely.size else k_hi, k_lo)
        if k_hi - k_lo < 2:
            break
    return k_lo, k_hi


def _crossings(ext, grid, p):
    """The crossings in ``grid`` where the boundary of ``H`` moves (``p``:
    the types' ``p_j`` at the nodes).

    In an interval of the grid, a type with at least ``room`` clients ahead
    of it at both ends (ahead throughout: two types cross at most once) is
    never in ``H``, one with at least ``total - room`` behind it at both
    ends always wholly in it. Only the others ("near") can move the
    boundary: the crossings of their pairs that swap order are found, and
    kept where ``H`` differs on their two sides (the near types sharing the
    places the others leave, at the midpoints between crossings).
    """
    take = ext.take(p)
    changed = np.flatnonzero(np.any(take[1:] != take[:-1], axis=1))
    sign = 1.0 if ext.largest else -1.0
    intervals, xs, ys = [], [], []
    for s in changed.tolist():
        pa, pb = sign * p[s], sign * p[s + 1]
        ahead = (pa[None, :] > pa[:, None]) & (pb[None, :] > pb[:, None])
        behind = (pa[None, :] < pa[:, None]) & (pb[None, :] < pb[:, None])
        is_near = (ahead @ ext.counts < ext.room) & (
            behind @ ext.counts < ext.total - ext.room
        )
        near = np.flatnonzero(is_near)
        da = np.sign(p[s, near][:, None] - p[s, near][None, :])
        db = np.sign(p[s + 1, near][:, None] - p[s + 1, near][None, :])
        i, j = np.nonzero(np.triu(da * db < 0, 1))
        intervals.append((s, is_near, near, i.size))
        xs.append(near[i])
        ys.append(near[j])
    if not intervals:
        return np.empty(0)
    x, y = np.concatenate(xs), np.concatenate(ys)
    left = np.repeat([s for s, *_ in intervals], [n for *_, n in intervals])
    roots = _roots(ext.a[x], ext.b[x], ext.a[y], ext.b[y], grid[left], grid[left + 1])
    cuts, start = [], 0
    for s, is_near, near, n_pairs in intervals:
        found = np.sort(roots[start : start + n_pairs])
        start += n_pairs
        edges = np.r_[grid[s], found, grid[s + 1]]
        mids = (edges[:-1] + edges[1:]) / 2.0
        p_near = betainc(ext.a[near][None, :], ext.b[near][None, :], mids[:, None])
        room = ext.room - int(take[s][~is_near].sum())
        take_near = ext.take(p_near, near, room)
        moves = np.flatnonzero(np.any(take_near[1:] != take_near[:-1], axis=1))
        cuts.append(found[moves])
    return np.concatenate(cuts)


def _roots(ax, bx, ay, by, lo, hi):
    """Where ``I_t(ax, bx) = I_t(ay, by)`` in each ``[lo, hi]`` (one sign
    change each): bisection, all at once, to ``1e-15`` (brentq's ``xtol``)."""
    lo, hi = lo.astype(np.float64), hi.astype(np.float64)
    f_lo = betainc(ax, bx, lo) - betainc(ay, by, lo)
    for _ in range(64):
        if not np.any(hi - lo > 1e-15):
            break
        mid = 0.5 * (lo + hi)
        f_mid = betainc(ax, bx, mid) - betainc(ay, by, mid)
        same = np.sign(f_mid) == np.sign(f_lo)
        lo, f_lo = np.where(same, mid, lo), np.where(same, f_mid, f_lo)
        hi = np.where(same, hi, mid)
    return 0.5 * (lo + hi)


def _pieces(ext, lo, hi):
    """``[lo, hi]`` cut where ``H`` changes."""
    if ext.fixed():  # every client kept, or none: H never changes
        return np.array([lo]), np.array([hi])
    # The window's grid (its p_j are cached) inside [lo, hi], and both ends.
    _, t, p = _window_probs(ext.sizes, ext.ranks)
    inside = (t > lo) & (t < hi)
    grid = np.r_[lo, t[inside], hi]
    p = np.r_[ext.probs(np.array([lo])), p[inside], ext.probs(np.array([hi]))]
    cuts = np.sort(_crossings(ext, grid, p))
    kept = np.r_[lo, cuts[(cuts > lo) & (cuts < hi)], hi]
    return kept[:-1], kept[1:]


# Gauss-Kronrod 7-15 (QUADPACK's qk15): the 15 Kronrod nodes on [0, 1]
# (ascending), their weights, and the 7-point Gauss weights on the odd ones.
_XGK = np.array(
    [
        0.991455371120812639206854697526329,
        0.949107912342758524526189684047851,
        0.864864423359769072789712788640926,
        0.741531185599394439863864773280788,
        0.586087235467691130294144845693013,
        0.405845151377397166906606412076961,
        0.207784955007898467600689403773245,
    ]
)
_WGK = np.array(
    [
        0.022935322010529224963732008058970,
        0.063092092629978553290700663189204,
        0.104790010322250183839876322541518,
        0.140653259715525918745189590510238,
        0.169004726639267902826583426598550,
        0.190350578064785409913256402421014,
        0.204432940075298892414161999234649,
    ]
)
_WGK_MID = 0.209482141084727828012999174891714
_WG = np.array(
    [
        0.129484966168869693270611432679082,
        0.279705391489276667901467771423780,
        0.381830050505118944950369775488975,
    ]
)
_WG_MID = 0.417959183673469387755102040816327
_GK_X = (np.r_[-_XGK, 0.0, _XGK[::-1]] + 1.0) / 2.0
_GK_WK = np.r_[_WGK, _WGK_MID, _WGK[::-1]] / 2.0
_GK_WG = np.zeros(15)
_GK_WG[[1, 3, 5]] = _WG / 2.0
_GK_WG[[13, 11, 9]] = _WG / 2.0
_GK_WG[7] = _WG_MID / 2.0
# The width outside the outer Kronrod nodes (each end).
_XGK_EDGE = _GK_X[0]
#: Largest share of a panel's drop left between its ends and outer nodes.
_END_SHARE = 0.05


#: Panels the part where the integrands drop is cut into first, and how
#: close to 1 or 0 they are outside it.
_PRESPLIT = 8
_FLAT = 1e-15


def _presplit(lows, highs, grid, first, last, a, b):
    """The pieces cut further where the integrands are neither within
    ``_FLAT`` of 1 nor of 0 (from the last grid node where the first ``k``'s
    is ``>= 1 - _FLAT`` to the first where the last one's is ``<= _FLAT``),
    into ``_PRESPLIT`` panels crowded where they drop (:func:`_crowded`'s
    spacing). Outside, any panel's rule errs by at most its width times
    ``_FLAT`` (a monotone integrand and positive weights)."""
    high = np.flatnonzero(first >= 1.0 - _FLAT)
    low = np.flatnonzero(last <= _FLAT)
    d_lo = max(grid[high[-1]] if high.size else a, a)
    d_hi = min(grid[low[0]] if low.size else b, b)
    if not d_hi > d_lo:
        return lows, highs
    below = last <= 0.02
    top = int(np.argmax(below)) if below.any() else grid.size - 1
    bottom = max(int(np.argmax(first < 0.98)) - 1, 0)
    center = min(max((grid[bottom] + grid[top]) / 2.0, d_lo), d_hi)
    s = max((grid[top] - grid[bottom]) / 4.0, 1e-12)
    u = np.linspace(
        np.arcsinh((d_lo - center) / s), np.arcsinh((d_hi - center) / s), _PRESPLIT + 1
    )
    cuts = np.clip(center + s * np.sinh(u), d_lo, d_hi)
    edges = np.unique(np.r_[lows, highs[-1], cuts[(cuts > a) & (cuts < b)]])
    return edges[:-1], edges[1:]


def _integral(ext, ks, lows, highs):
    """``int f_k`` over the pieces: adaptive Gauss-Kronrod, panel by panel.

    Each initial panel gets the budget ``_AGREE (width / total + 1 /
    panels)``, shared by width among its halves; a panel is kept when its
    Kronrod and Gauss values agree within its budget (the Gauss value's
    error: the Kronrod value kept is far closer) and the integrand's drop
    between the panel's ends and its outer nodes is at most ``_END_SHARE``
    of the panel's, or within the budget over the width there (a drop the
    nodes cannot see), else it is halved, at
    most ``_MAX_LEVELS`` times. The budgets add up to ``2 _AGREE``.
    """
    wk, wg = _GK_WK, _GK_WG
    n_ks = len(ks)
    a, b = lows, highs
    per_width = _AGREE * (
        1.0 / max(float(np.sum(b - a)), 1e-300)
        + 1.0 / (a.size * np.maximum(b - a, 1e-300))
    )
    total = np.zeros(n_ks)
    # The integrand at the panels' ends (contiguous: each edge once).
    edges = ext.cdf(np.r_[a, b[-1]], ks)
    f_a, f_b = edges[:, :-1], edges[:, 1:]
    for level in range(_MAX_LEVELS + 1):
        t = (a[:, None] + (b - a)[:, None] * _GK_X).ravel()
        f = ext.cdf(t, ks).reshape(n_ks, a.size, _GK_X.size)
        kron, gauss = (f @ wk) * (b - a), (f @ wg) * (b - a)
        # The drop between the ends and the outer nodes, which the rule
        # cannot see: a small share of the panel's drop (a smooth integrand
        # puts about 1% there), or negligible over the width it spans.
        ends = (f_a - f[:, :, 0]) + (f[:, :, -1] - f_b)
        budget = per_width * (b - a)
        seen = (ends <= _END_SHARE * (f_a - f_b)) | (
            ends * (b - a) * _XGK_EDGE <= budget
        )
        done = (np.max(np.abs(kron - gauss), axis=0) <= budget) & seen.all(axis=0)
        if level == _MAX_LEVELS:
            done[:] = True
        total += kron[:, done].sum(axis=1)
        if done.all():
            return total
        keep = ~done
        mid = (a + b) / 2.0
        f_mid = ext.cdf(mid[keep], ks)
        a, b = np.r_[a[keep], mid[keep]], np.r_[mid[keep], b[keep]]
        f_a = np.c_[f_a[:, keep], f_mid]
        f_b = np.c_[f_mid, f_b[:, keep]]
        per_width = np.r_[per_width[keep], per_width[keep]]
    return total  # pragma: no cover (the last level keeps every panel)


@functools.lru_cache(maxsize=1024)
def extreme_coverages(sizes, ranks, n_keep, largest, ks, guide=None):
    """``int_0^1 ext_H P(X_H(t) <= k - 1) dt`` for each ``k`` of ``ks`` (sorted).

    ``largest=True``: the minimum over every honest set of ``n_keep``
    clients taken pointwise in ``t`` (a lower bound on ``min_H M_H(l,
    k)``); ``False``: the maximum (an upper bound on ``max_H M_H``).
    ``guide``: the ``n_keep`` of a minimum (``largest=True``) whose grid
    (:func:`_grid_cdf`, usually cached) sandwiches these integrands, to trim
    the integral without a grid of their own (see :func:`_sandwich`).
    Cached: the array returned is read-only.
    """
    values = _extreme_coverages(sizes, ranks, n_keep, largest, ks, guide)
    values.flags.writeable = False
    return values


def _sandwich(n_clients, n_keep, largest, guide):
    """``(below, above)``: ``f_g(k - below) <= f(k) <= f_g(k + above)`` at
    every ``t``, ``f`` this integrand and ``f_g`` the minimum over the sets
    of ``guide`` clients (``X_g`` their count below ``t``).

    ``largest=True``, ``n_keep >= guide``: the ``guide`` largest ``p_j(t)``
    are among the ``n_keep`` largest, so ``X_g <= X <= X_g + n_keep -
    guide``. ``largest=False``, ``n_keep = guide``: the smallest
    ``p_j(t)`` give a count stochastically below the largest ones' (``f(k)
    >= f_g(k)``), and at least the count of all ``n_clients`` minus the
    ``n_clients - n_keep`` left out, itself at least ``X_g`` (``f(k) <=
    f_g(k + n_clients - n_keep)``).
    """
    if largest and n_keep >= guide:
        return n_keep - guide, 0
    if not largest and n_keep == guide:
        return 0, n_clients - n_keep
    raise ValueError("no sandwich for this guide")


def _guide_rows(f, rows):
    """Rows of a grid's integrands by ``k`` (``f[k - 1]``), with ``0`` for
    ``k < 1`` (a count is never negative) and ``1`` past the last row."""
    out = np.empty((len(rows), f.shape[1]))
    for i, k in enumerate(rows):
        out[i] = 0.0 if k < 1 else (1.0 if k > f.shape[0] else f[k - 1])
    return out


def _extreme_coverages(sizes, ranks, n_keep, largest, ks, guide=None):
    ext = _Extreme(sizes, ranks, n_keep, largest)
    ks_arr = np.asarray(ks, dtype=np.int64)
    if ext.a.size == 0:  # every client sends +inf
        return np.ones(ks_arr.size)
    if guide is None:
        (lo, hi), t, f = ext.grid_cdf()
        first, last = f[ks_arr[[0, -1]] - 1, 1:-1]
        at1 = f[ks_arr - 1, -1]  # t[-1] = 1
    else:
        below, above = _sandwich(len(sizes), n_keep, largest, guide)
        (lo, hi), t, f = _grid_cdf(sizes, ranks, guide, True)
        rows = (ks_arr[0] - below, ks_arr[-1] + above)
        first, last = _guide_rows(f, rows)[:, 1:-1]
        at1 = ext.cdf(np.array([1.0]), ks_arr)[:, 0]
    # Trim (f is monotone): f ~ 1 left of a, ~ 0 right of b for every k.
    a, b, zero = _trim(first, last, t[1:-1], lo, hi)
    at1 = 0.0 if zero else at1
    middle = np.zeros(ks_arr.size)
    if b > a:
        lows, highs = _pieces(ext, a, b)
        lows, highs = _presplit(lows, highs, t[1:-1], first, last, a, b)
        middle = _integral(ext, ks_arr, lows, highs)
    return np.clip(a + middle + (1.0 - b) * at1, 0.0, 1.0)
