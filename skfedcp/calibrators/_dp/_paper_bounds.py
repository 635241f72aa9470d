"""Packed Riemann bounds of many gammas of the dp-qq paper plan in one pass."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from .._qq._coverage import _FEASIBILITY_TOL
from .._qq._poisbin import _add_clients, _poisbin_cdf_ks


def fixed_ranks(sizes, target_alpha):
    """``conformal_rank(n, target_alpha)`` of each size of ``sizes`` (an array).

    The same float operations as :func:`~skfedcp.utils._quantile.conformal_rank`
    (``ceil((n + 1)(1 - alpha) - 1e-9)``, at least 1), so the same ranks.
    """
    raw = np.ceil((sizes + 1.0) * (1.0 - target_alpha) - 1e-9)
    return np.maximum(raw, 1.0)


def _beta_terms(ns, ls, active):
    """Safe Beta parameters ``(l, n - l + 1)``: ``(1, 1)`` where not active."""
    a = np.where(active, ls, 1.0)
    return a, np.where(active, ns - ls + 1.0, 1.0)


def _moments(ns, a, b, weights, k, start, steps=6):
    """Rough centre and spread of the k-th smallest client value, per gamma.

    ``weights`` (gammas, sizes): the clients of each size counted for each
    gamma (0 where not active). The centre solves ``mu(t) = k - 1/2``
    (``mu`` = expected count of the clients below t; Newton steps from
    ``start``, kept inside a bracket); the spread is the delta-method
    ``sqrt(Var S(t)) / mu'(t)`` there, and the step ``1 / mu'(t)`` to the
    next value is returned third. Any values are valid: they only place the
    Riemann nodes.
    """
    log_beta = special.betaln(a, b)
    lo, hi = np.zeros_like(start), np.ones_like(start)
    t = np.clip(start, 1e-6, 1.0 - 1e-6)
    done = np.zeros(t.shape, dtype=bool)
    for _ in range(steps + 1):
        p = special.betainc(a, b, t[:, None])
        log_t, log_s = np.log(t)[:, None], np.log1p(-t)[:, None]
        dens = np.exp((a - 1.0) * log_t + (b - 1.0) * log_s - log_beta)
        density = (weights * dens).sum(axis=1)
        miss = k - 0.5 - (weights * p).sum(axis=1)
        done |= np.abs(miss) < 1e-3
        if done.all():
            break
        up = miss > 0
        lo, hi = np.where(up & ~done, t, lo), np.where(~up & ~done, t, hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(density > 0, t + miss / density, -1.0)
        inside = (lo < step) & (step < hi)
        t = np.where(done, t, np.where(inside, step, 0.5 * (lo + hi)))
    step = 1.0 / np.maximum(density, 1.0)
    var = np.maximum((weights * p * (1.0 - p)).sum(axis=1), 0.25)
    spread = np.clip(np.sqrt(var) * step, 1e-5, 0.25)
    return t, spread, step


def _nodes(center, spread, n_nodes):
    """Riemann nodes of each gamma (rows), packed where the k-th value lives.

    Zero, the quantiles of ``N(center, 2 spread^2)`` clipped to [0, 1], one:
    sorted, repeated nodes give empty intervals (the sums do not change).
    ``f_k(t) = P(#{clients <= t} <= k - 1)`` decreases in ``t``, so whatever
    the nodes the right (left) Riemann sum is a lower (upper) bound on ``M =
    int_0^1 f_k``; for a normal-shaped drop of width ``spread`` these nodes
    equalise the terms ``dt df`` of the gap, about ``5 spread / n_nodes``.
    """
    u = np.linspace(1e-6, 1.0 - 1e-6, n_nodes)
    t = center[:, None] + math.sqrt(2.0) * spread[:, None] * special.ndtri(u)
    t = np.clip(t, 0.0, 1.0)
    rows = t.shape[0]
    return np.hstack([np.zeros((rows, 1)), t, np.ones((rows, 1))])


def _count_cdf(ns, counts, a, b, active, t, states):
    """``P(#{clients <= t} <= s)`` for ``s < states``, per gamma and node.

    One count DP for every gamma: the columns are the (gamma, node) pairs,
    a client of an inactive size is never below t. Returns (states, gammas,
    nodes); the DP keeps the first ``states`` counts (larger counts never
    feed smaller ones) and, after ``j`` clients, works on counts up to ``j``
    only (the others are still zero). Rounding ~1e-16 per client. The end
    nodes 0 and 1 (first and last) need no DP: no client is below 0 (the
    CDF is 1), every active one is below 1 (1 from their count on, else 0).
    """
    rows, cols = t.shape
    pmf = np.zeros((states, rows * (cols - 2)))
    pmf[0] = 1.0
    probs = special.betainc(a.T[:, :, None], b.T[:, :, None], t[None, :, 1:-1])
    probs *= active.T[:, :, None]  # an inactive client is never below t
    probs = probs.reshape(len(ns), -1)
    seen = 0
    for p, count in zip(probs, counts, strict=True):
        seen += int(count)
        live = min(seen + 1, states)
        if count == 1:  # the multiply-add of _add_clients, in place
            moved = pmf[: live - 1] * p
            pmf[:live] *= 1.0 - p
            pmf[1:live] += moved
        else:
            pmf[:live] = _add_clients(pmf[:live], p, int(count))
    cdf = np.empty((states, rows, cols))
    cdf[:, :, 1:-1] = np.minimum(np.cumsum(pmf, axis=0), 1.0).reshape(states, rows, -1)
    cdf[:, :, 0] = 1.0
    m_active = active.astype(np.float64) @ counts
    cdf[:, :, -1] = np.arange(states)[:, None] >= m_active[None, :]
    return cdf


def _cdf_rows(ns, counts, ranks, active, t, ks, batched):
    """``P(#{clients <= t} <= k - 1)`` of each row, for its ``ks`` and nodes.

    Row ``r``: the clients of the sizes ``active[r]`` at ranks ``ranks[r]``,
    nodes ``t[r]``, sorted ``ks[r]`` (within 1..active clients). One count
    DP for all rows (``batched``), else the law of :func:`_poisbin_cdf_ks`
    per row (the product tree for many clients), at its nodes inside (0, 1)
    only: at ``t <= 0`` no client is below t (the CDF is 1), at ``t >= 1``
    every active one is, more than ``k - 1`` (0). A list of (ks, nodes).
    """
    if batched:
        a, b = _beta_terms(ns, ranks, active)
        cdf = _count_cdf(ns, counts, a, b, active, t, int(max(k[-1] for k in ks)))
        return [cdf[k - 1, r] for r, k in enumerate(ks)]
    out = []
    for r, k in enumerate(ks):
        groups = [
            ((int(n), int(rank)), int(c))
            for n, rank, c, on in zip(ns, ranks[r], counts, active[r], strict=True)
            if on
        ]
        inner = (t[r] > 0.0) & (t[r] < 1.0)
        cdf = np.zeros((len(k), t.shape[1]))
        cdf[:, t[r] <= 0.0] = 1.0
        cdf[:, inner] = np.minimum(_poisbin_cdf_ks(groups, k, t[r][inner]), 1.0)
        out.append(cdf)
    return out


def packed_bounds(size_counts, ranks, shifted, taus, n_nodes=16, batched=True):
    """Lower bounds on the scores of many gammas of the paper plan (one DP per pass).

    Each row is one gamma or one block of gammas: ``ranks`` (rows, sizes)
    are the fixed ranks that certify ``kappa`` (a block's largest, ``top``),
    ``shifted`` the corrected ranks of the score (a block's smallest:
    ``fixed + l_cor`` of its first gamma and smallest correction) and
    ``taus`` the targets (a block's smallest), for the sizes of
    ``size_counts``. Each value is a rigorous lower bound on the score of
    the row's gammas, by the argument of :func:`._plan._packed_score_bound`
    (``-inf``: no certificate, ``+inf``: the search skips them anyway); the
    ks checked reach two spreads below the selection's guess of its ``k``,
    so that coarse nodes still certify a ``kappa``. ``batched=False``: the
    law of each row on its own (the product tree for many clients), for
    more than ``_BOUND_DP_MAX_CLIENTS``.
    """
    ns = np.array([n for n, _ in size_counts], dtype=np.float64)
    counts = np.array([c for _, c in size_counts], dtype=np.float64)
    out, kappa, center = certified_kappas(ns, counts, ranks, taus, n_nodes, batched)
    return shifted_bounds(ns, counts, shifted, kappa, center, out, n_nodes, batched)


def certified_kappas(ns, counts, ranks, taus, n_nodes, batched):
    """``(out, kappa, center)``: per row, a rank ``kappa`` below which every
    ``k`` has ``M(ranks, k) < tau - 1e-10`` over the clients ``counts`` of
    the sizes ``ns`` (certified by upper Riemann sums, with 1e-9 for the
    selection's rounding), and where the ``kappa``-th value lives.

    ``out`` is ``nan`` where ``kappa`` is certified, ``+inf`` where no
    client is active (the selection is infeasible) and ``-inf`` where the
    coarse nodes certify nothing (see :func:`packed_bounds`).
    """
    ranks = np.asarray(ranks, dtype=np.float64)
    taus = np.asarray(taus, dtype=np.float64)
    out = np.full(taus.shape, np.nan)
    active = ranks <= ns
    weights = active * counts
    m_sel = weights.sum(axis=1)
    out[m_sel == 0] = math.inf
    threshold = taus - _FEASIBILITY_TOL - 1e-9
    a, b = _beta_terms(ns, ranks, active)
    mean = (special.betainc(a, b, taus[:, None]) * weights).sum(axis=1)
    kappa = np.minimum(np.maximum(np.ceil(mean + 0.5), 1.0), np.maximum(m_sel, 1.0))
    center, spread, step = _moments(ns, a, b, weights, kappa - 1.0, taus)
    lowest = np.maximum(kappa - 1.0 - np.ceil(2.0 * spread / step), 1.0)
    todo = np.flatnonzero((kappa > 1.0) & np.isnan(out))
    if todo.size:
        t = _nodes(center[todo], spread[todo], n_nodes)
        ks = [np.arange(int(lowest[g]), int(kappa[g])) for g in todo]
        cdfs = _cdf_rows(ns, counts, ranks[todo], active[todo], t, ks, batched)
        width = np.diff(t, axis=1)
        for row, g in enumerate(todo):
            upper = cdfs[row][:, :-1] @ width[row] + 1e-12
            failing = np.flatnonzero(upper < threshold[g])  # a prefix
            if failing.size == 0:
                out[g] = -math.inf  # no cheap certificate: evaluate the gamma
            else:
                kappa[g] = ks[row][failing[-1]] + 1
    return out, kappa, center


def shifted_bounds(ns, counts, shifted, kappa, center, out, n_nodes, batched):
    """``out`` with each ``nan`` row set to a lower Riemann sum of
    ``M(shifted, kappa)`` over the clients ``counts`` of the sizes ``ns``
    (``+inf`` where fewer than ``kappa`` of them stay finite); ``center``
    starts the search of where the ``kappa``-th value lives."""
    shifted = np.asarray(shifted, dtype=np.float64)
    finite = shifted <= ns
    s_weights = finite * counts
    out[np.isnan(out) & (s_weights.sum(axis=1) < kappa)] = math.inf
    todo = np.flatnonzero(np.isnan(out))
    if todo.size:
        a, b = _beta_terms(ns, shifted[todo], finite[todo])
        center, spread, _ = _moments(
            ns, a, b, s_weights[todo], kappa[todo], center[todo]
        )
        t = _nodes(center, spread, n_nodes)
        ks = [np.array([int(kappa[g])]) for g in todo]
        cdfs = _cdf_rows(ns, counts, shifted[todo], finite[todo], t, ks, batched)
        width = np.diff(t, axis=1)
        out[todo] = [f[0, 1:] @ w - 1e-12 for f, w in zip(cdfs, width, strict=True)]
    return out
