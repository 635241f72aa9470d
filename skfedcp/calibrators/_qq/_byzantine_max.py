"""How many dishonest clients a QQ plan with unequal sizes tolerates, at once."""

# max_byzantine asks, for a fixed pair (l, k), for the largest c with
# L_c >= threshold, L_c = int_0^1 f_c(t) dt, f_c(t) = P(X_{h}(t) <= k - c -
# 1), X_h(t) the count below t of the h = m - c clients of largest p_j(t)
# (_byzantine.py).  The bisection of _byzantine.max_byzantine integrates
# each probed c on its own: a new honest size h, a new count law per node.
# Here one evaluation serves every c of a range [c_lo, c_hi] at once:
#
# * At a node, with the clients in decreasing order of p_j(t), the count of
#   the first h is that of the first h - 1 plus one Bernoulli(p_(h)): the
#   law of the m - c_hi largest (the product tree of _poisbin), then one
#   Bernoulli step per client up to the m - c_lo largest, gives f_c for
#   every c of the range (states past k - 1 dropped: no step lowers a
#   count, and f_c reads the law up to k - c - 1 only).  The rounding of
#   the tree and of these few positive steps is below 1e-13 per node, well
#   inside the _ROUNDING (1e-12) of the brackets.
# * f_c(t) >= f_{c+1}(t) at every t (X_{h-1} <= X_h <= X_{h-1} + 1, so
#   {X_{h-1} <= r - 2} is inside {X_h <= r - 1}): L_c decreases in c, so
#   the answer is the last c of the range that passes when the range holds
#   a pass and a failure (or starts at 0 / ends at k - 1); otherwise the
#   range moves.  Where the range starts comes from a normal approximation
#   of every L_c on the window's grid: it only places the range (a wrong
#   guess costs a move, never a wrong answer).
# * Each f_c decreases in t, so right / left Riemann sums on any nodes from
#   0 to 1 bound L_c rigorously (_riemann_sums): the window's grid, then
#   nodes crowded where the undecided c's drop.  A c is decided when its
#   bracket clears the threshold by _DECIDE (as in _lower_passes).
# * The c's left undecided are integrated together by the adaptive
#   Gauss-Kronrod rule of _byzantine_bound._integral, on the union of their
#   pieces (each f_c is smooth between the crossings of its own boundary):
#   the same tolerances as extreme_coverages, so the value is that
#   integral's to about 1e-13.  A value within _SAFE (1e-9) of the threshold
#   is re-decided by _lower_passes itself, so every answer is the one the
#   bisection over _lower_passes gives (tested against it).

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from ._byzantine_bound import (
    _crowded,
    _dp_pmf,
    _Extreme,
    _integral,
    _pieces,
    _presplit,
    _riemann_sums,
    _trim,
    _window_probs,
)
from ._poisbin import (
    _TREE_CHUNK,
    _TREE_TRUNCATE_MIN,
    _poisbin_window_tree,
    _uses_tree,
)

# Half the width of the first range of c around the normal estimate.
_HALF_RANGE = 6
# Integrals this clear of the threshold decide like extreme_coverages'
# would (both are within ~1e-13 of the integral); closer ones are re-decided
# by the exact per-c path.
_SAFE = 1e-9
# Honest sets from this size on get a windowed law from the product tree:
# beyond, the per-c bisection.
MAX_CLIENTS = _TREE_TRUNCATE_MIN - 1


class _Range:
    """``f_c(t)`` for every ``c`` in ``c_lo..c_hi`` (rows, ``c`` ascending)."""

    def __init__(self, sizes, ranks, k, c_lo, c_hi):
        self.ext = _Extreme(sizes, ranks, len(sizes), True)
        self.m, self.k = len(sizes), k
        self.cs = np.arange(c_lo, c_hi + 1)
        total = self.ext.total
        # Honest set of each c among the active clients (the inactive ones,
        # p = 0, never count).
        self.hs = np.minimum(self.m - self.cs, total)

    def cdf(self, t, ks=None):
        """``f_c`` at the nodes ``t``: (len(cs), nodes); ``ks`` unused (the
        rows are the range's ``c``, as :func:`_integral` reads them)."""
        return self.rows(self.ext.probs(np.asarray(t, dtype=np.float64)))

    def rows(self, p):
        """``f_c`` from the types' ``p_j`` at the nodes (rows of ``p``)."""
        clients = -p[:, self.ext.client_type]  # descending order of p_j
        total = clients.shape[1]
        h_lo, h_hi = int(self.hs[-1]), int(self.hs[0])
        if h_hi < total or h_lo < h_hi:
            clients = np.partition(clients, np.arange(h_lo - 1, h_hi), axis=1)
        base, extra = -clients[:, :h_lo], -clients[:, h_lo:h_hi]
        out = np.empty((self.cs.size, p.shape[0]))
        step = max(1, _TREE_CHUNK // max(h_lo, 1))
        for start in range(0, p.shape[0], step):
            rows = slice(start, start + step)
            out[:, rows] = self._chunk(base[rows], extra[rows])
        return np.clip(out, 0.0, 1.0)

    def _chunk(self, base, extra):
        states = self.k  # counts 0..k - 1: f_c reads up to k - c - 1
        pmf = _count_pmf(base)[:, :states]
        out = np.empty((self.cs.size, base.shape[0]))
        h, added = base.shape[1], 0
        for i in range(self.cs.size - 1, -1, -1):  # c descending, h ascending
            while h < self.hs[i]:
                pj = extra[:, added : added + 1]
                nxt = pmf * (1.0 - pj)
                if pmf.shape[1] < states:
                    nxt = np.c_[nxt, np.zeros(nxt.shape[0])]
                width = min(pmf.shape[1], states - 1)
                nxt[:, 1 : width + 1] += pmf[:, :width] * pj
                pmf, h, added = nxt, h + 1, added + 1
            r = self.k - int(self.cs[i])  # f_c = P(X_h <= r - 1), r >= 1
            upto = min(r, pmf.shape[1])
            out[i] = np.sum(pmf[:, :upto], axis=1)
        return out


def _count_pmf(p):
    """The law of ``sum_j Bernoulli(p_j)`` per row: (rows, size + 1)."""
    if not _uses_tree(p.shape[1]):
        return _dp_pmf(p, p.shape[1] + 1)
    _, window = _poisbin_window_tree(p, lean=True)  # unwindowed below 4096
    return window


def _normal_rows(sizes, ranks, k):
    """``(t, f)``: every ``f_c`` (rows, ``c = 0..k - 1``) on the window's grid
    ``t`` with each count law replaced by the normal law of its mean and
    variance (continuity-corrected). A guide only: it places the range of
    ``c`` and the crowded nodes, never decides."""
    ext = _Extreme(sizes, ranks, len(sizes), True)
    _, t, p = _window_probs(sizes, ranks)
    clients = -np.sort(-p[:, ext.client_type], axis=1)
    mean = np.cumsum(clients, axis=1)
    var = np.cumsum(clients * (1.0 - clients), axis=1)
    cs = np.arange(k)
    hs = np.minimum(len(sizes) - cs, clients.shape[1]) - 1
    z = (k - cs - 0.5 - mean[:, hs]) / np.sqrt(np.maximum(var[:, hs], 1e-300))
    return t, ndtr(z).T


def _normal_estimate(t, f, threshold):
    """The last ``c`` whose normal-guided ``L_c`` reaches ``threshold``
    (``-1`` when none)."""
    width = np.diff(t)
    values = (f[:, 1:] + f[:, :-1]) @ width / 2.0
    passing = np.flatnonzero(values >= threshold)
    return int(passing[-1]) if passing.size else -1


def _brackets(t, f):
    """Rigorous ``(lower, upper)`` of each row's ``L_c`` (nodes ``t``)."""
    out = [_riemann_sums(t, row) for row in f]
    return np.array([lo for lo, _ in out]), np.array([up for _, up in out])


def _integrals(rng, t, f, cs):
    """``L_c`` for the ``c`` of ``cs`` (contiguous, in ``rng``), integrated
    together on the union of their pieces; the exact rows ``f`` of ``rng``
    on the nodes ``t`` (0 and 1 included) trim and presplit, as the window's
    grid does in extreme_coverages (any nodes serve: ``f_c`` is monotone)."""
    sub = _Range(rng.ext.sizes, rng.ext.ranks, rng.k, int(cs[0]), int(cs[-1]))
    rows = f[cs - rng.cs[0]]
    first, last = rows[-1, 1:-1], rows[0, 1:-1]  # c_hi drops first
    (lo, hi), grid = _window_probs(sub.ext.sizes, sub.ext.ranks)[0], t[1:-1]
    a, b, zero = _trim(first, last, grid, lo, hi)
    at1 = 0.0 if zero else rows[:, -1]
    middle = np.zeros(cs.size)
    if b > a:
        cuts = [np.array([a, b])]
        for c in cs.tolist():
            ext = _Extreme(sub.ext.sizes, sub.ext.ranks, sub.m - c, True)
            cuts.append(np.concatenate(_pieces(ext, a, b)))
        edges = np.unique(np.concatenate(cuts))
        lows, highs = _presplit(edges[:-1], edges[1:], grid, first, last, a, b)
        middle = _integral(sub, np.arange(cs.size), lows, highs)
    return np.clip(a + middle + (1.0 - b) * at1, 0.0, 1.0)


def max_byzantine_unequal(sizes, ranks, k, threshold, lower_passes, decide):
    """``max_byzantine`` for unequal sizes or ranks (see the comment above).

    ``lower_passes(c)``: the exact per-c decision (``_lower_passes``), for
    the integrals too close to call; ``decide``: the bracket margin.
    """
    status: dict[int, bool] = {}  # c -> passes
    t, guide = _normal_rows(sizes, ranks, k)
    estimate = _normal_estimate(t, guide, threshold)
    c_lo = min(max(estimate - _HALF_RANGE, 0), k - 1)
    c_hi = min(max(estimate + _HALF_RANGE, 0), k - 1)
    while True:
        rng = _Range(sizes, ranks, k, c_lo, c_hi)
        # Nodes crowded where the range's integrands drop (the guide's),
        # then where the undecided ones do (exact rows).
        nodes = _crowded(t, guide[c_hi], guide[c_lo])
        f = rng.cdf(nodes)
        todo = _decide(rng, status, nodes, f, threshold, decide)
        if 0 < todo.size < rng.cs.size:
            crowd = _crowded(nodes, f[todo[-1] - c_lo], f[todo[0] - c_lo])
            nodes, f = crowd, rng.cdf(crowd)
            todo = _decide(rng, status, nodes, f, threshold, decide, todo)
        if todo.size:
            values = _integrals(rng, nodes, f, todo)
            for c, value in zip(todo.tolist(), values.tolist(), strict=True):
                if abs(value - threshold) > _SAFE:
                    status[c] = value >= threshold
                else:
                    status[c] = lower_passes(c)
        # The last known pass and the first known failure (monotone in c).
        last = max((c for c, ok in status.items() if ok), default=-1)
        first = min((c for c, ok in status.items() if not ok), default=k)
        if first == last + 1:  # also -1 (c = 0 fails) and k - 1 (all pass)
            return last
        width = c_hi - c_lo + 1  # the answer is beyond the range: move on
        if not status[c_lo]:
            c_lo, c_hi = max(c_lo - 2 * width, last + 1), c_lo - 1
        else:
            c_lo, c_hi = c_hi + 1, min(c_hi + 2 * width, first - 1)


def _decide(rng, status, t, f, threshold, decide, among=None):
    """Record the ``c`` whose Riemann bracket on ``t`` decides; return the
    undecided ones between the last sure pass and the first sure failure."""
    lower, upper = _brackets(t, f)
    cs = rng.cs if among is None else among
    for c in cs.tolist():
        i = c - int(rng.cs[0])
        if lower[i] >= threshold + decide:
            status[c] = True
        elif upper[i] < threshold - decide:
            status[c] = False
    sure_pass = [c for c in cs.tolist() if status.get(c) is True]
    sure_fail = [c for c in cs.tolist() if status.get(c) is False]
    lo = max(sure_pass, default=int(cs[0]) - 1) + 1
    hi = min(sure_fail, default=int(cs[-1]) + 1) - 1
    # By monotony in c, every c below a sure pass passes, above a failure fails.
    for c in cs.tolist():
        if c not in status:
            if c < lo:
                status[c] = True
            elif c > hi:
                status[c] = False
    return np.array([c for c in range(lo, hi + 1) if c not in status], dtype=np.int64)
