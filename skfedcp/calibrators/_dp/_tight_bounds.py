"""The tight dp-qq engine: ``LB(q, k)`` for every ``k`` at once, cached per level."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import special

from ...privacy._tight import _rank_law
from .._qq._poisbin import _add_clients
from ._tight_rows import _ROW_REL, _cut_rows

_GAUSS_EXACT_MAX_N = 4000
# Slack on the numerical bound when the quadrature is not exact.
_QUADRATURE_SLACK = 1e-10


@lru_cache(maxsize=16)
def _gauss_nodes01(n_nodes):
    """Gauss-Legendre nodes and weights on [0, 1] (cached: the search
    evaluates the bound at many levels with the same degree)."""
    x, w = special.roots_legendre(n_nodes)
    x, w = (x + 1.0) / 2.0, w / 2.0
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


# --------------------------------------------------------------------------
# The search's engine: LB(q, k) for every k at once, cached per level
#
# The old search called _tight_lower_bound once per (q, k): every call
# recomputed P(U_(D) <= t) = sum_r P(D = r) I_t(r, n - r + 1) for every rank
# r of the support of D and every quadrature node, ~100 incomplete beta
# functions per node and size.  Here the nodes are fixed (they depend on N
# only), so each row I_t(r, n - r + 1) is computed once per (size, rank) and
# reused by every level; a level then costs one matrix-vector product per
# size and one Poisson-binomial DP over the sizes that gives every k at once
# (the states 0..k-1 of the DP do not depend on the larger states, so the
# value for k is the one the single-k DP computes, up to the order of the
# final sum).  Rows are only computed where I_t is not 0 or 1: left of
# t_lo(r) = I^{-1}(r, n - r + 1; 1e-20) the row is set to 0 (the bound
# changes by at most m x 1e-20, below the rounding of a value near
# 1 - alpha and far below _BOUND_MARGIN), right of the level 1 - 1e-20 it
# is 1 (which float rounds to anyway).
#
# Session 10 (issue 21; the user guide's "Tight corrections" has the proof):
# the rows come from a ratio recurrence between betainc anchors
# (``_tight_rows``), the DP skips the clients that are 0 or 1 on a chunk of
# nodes (same bits), a client whose p is a near-step gets panels of its own
# (``_TightBounds._refined``), and every value the search compares is the
# computed one minus a bound on what these changes can add
# (``_TightBounds._certified``).

_ROW_CUT = 1e-20
#: A rank law's mass at rank 0 up to this is left out of ``p`` (and its
#: bound subtracted from LB, see _TightBounds._client_cdf).
_BASE_DROP = 1e-15
#: Bytes of kept rows past which new rows are computed where asked, not kept.
_ROW_CACHE_BYTES = 2 << 30
#: Panels of the composite rule's first pass (doubled at each pass): 32 when
#: every size is at most _FEW_PANELS_MAX_N (its p is smooth at that scale:
#: the passes of 32 and 64 panels agree, at half the nodes), else 64.
_FIRST_PANELS = (32, 64)
_FEW_PANELS_MAX_N = 500
#: Nodes per chunk of the count DP (:meth:`_TightBounds._count_cdf`).
_DP_CHUNK = 256


class _RowBudget:
    """Bytes of rows kept, shared by the bounds of one plan (the Byzantine
    tight plan holds one :class:`_TightBounds` per honest mix, up to 64: one
    counter keeps their rows within ``_ROW_CACHE_BYTES`` together, plus at
    most the window that crosses it)."""

    def __init__(self):
        self.kept = 0


class _TightBounds:
    """``LB(q, k)`` for every ``k``, cached per level ``q`` (see above).

    ``budget``: the :class:`_RowBudget` shared with the other bounds of the
    plan (a fresh one if None).
    """

    def __init__(self, groups, epsilon, n_bins, utility, budget=None):
        self.groups = groups
        self.counts = [c for _, c in groups]
        self.m = sum(self.counts)
        self.N = sum(n * c for n, c in groups)
        self.law_args = (epsilon, n_bins)
        self.utility = utility
        self.exact = self.N <= _GAUSS_EXACT_MAX_N
        few = max(n for n, _ in groups) <= _FEW_PANELS_MAX_N
        self.first_panels = _FIRST_PANELS[0] if few else _FIRST_PANELS[1]
        self._nodes = []  # (t, w) of each pass
        self._rows = []  # per pass: {n: {r: row}}
        self._values = {}  # q -> list of per-pass arrays over k = 1..m
        # The DP keeps the states 0..cap-1 only (LB for k <= cap; NaN above):
        # a search lowers it to the largest k it can still choose. The states
        # below cap do not depend on the ones above (each row i of a step
        # reads rows i - r, r >= 0), so LB(q, k <= cap) has the same bits.
        self.cap = self.m
        self._caps = {}  # q -> cap of each pass at q
        self._laws = {}  # q -> per size (ranks, pmf, mass at rank 0)
        self._slacks = {}  # (q, pass) -> the rows' error bound on LB
        self._narrow = {}  # q -> narrow windows (_TightBounds._refined)
        # The rows' windows, counted in a budget shared across the plan.
        self._budget = _RowBudget() if budget is None else budget
        self.evaluations = 0

    def _pass(self, index):
        while len(self._nodes) <= index:
            if self.exact:
                t, w = _gauss_nodes01(-(-(self.N + 1) // 2))
            else:
                panels = self.first_panels << len(self._nodes)
                x, w16 = np.polynomial.legendre.leggauss(16)
                edges = np.linspace(0.0, 1.0, panels + 1)
                width = edges[1] - edges[0]
                t = (edges[:-1, None] + width * (x + 1.0) / 2.0).ravel()
                w = np.tile(w16 * width / 2.0, panels)
            self._nodes.append((t, w))
            # Per size: windows of rows ``[first, first + len)`` filled on
            # demand, and which of their rows are computed. A window covers
            # the ranks a level asks for (the support of the rank law, near
            # q n); windows that do not overlap stay apart, so memory follows
            # the ranks used, never a client's announced n (one window from
            # the ranks at q = 1/2 to those at q = 1 of a client announcing
            # 10^9 would be 500 million rows).
            self._rows.append({n: [] for n, _ in self.groups})
        return self._nodes[index]

    def _find_window(self, index, n, low, high):
        """The kept window of size ``n`` covering ranks ``[low, high)``, or None."""
        for first, matrix, done in self._rows[index][n]:
            if first <= low and high <= first + matrix.shape[0]:
                return first, matrix, done
        return None

    def _window(self, index, n, low, high):
        """The rows of size ``n`` as a window covering ranks ``[low, high)``."""
        windows = self._rows[index][n]
        found = self._find_window(index, n, low, high)
        if found is not None:
            return found
        width = self._nodes[index][0].shape[0]
        touching = [w for w in windows if w[0] <= high and low <= w[0] + w[1].shape[0]]
        if touching:
            # A window that grows (the levels of a search drift) grows by half
            # its span on the side asked for: O(log) copies, not one per level.
            start = min(first for first, _, _ in touching)
            end = max(first + matrix.shape[0] for first, matrix, _ in touching)
            pad = (max(high, end) - min(low, start)) // 2
            if low < start:
                low = max(low - pad, 1)
            if high > end:
                high = min(high + pad, n + 1)
        for first, matrix, _ in touching:
            low, high = min(low, first), max(high, first + matrix.shape[0])
        grown = np.empty((high - low, width))
        known = np.zeros(high - low, dtype=bool)
        for first, matrix, done in touching:
            at = first - low
            grown[at : at + matrix.shape[0]] = matrix
            known[at : at + matrix.shape[0]] = done
        kept = [w for w in windows if all(w is not t for t in touching)]
        self._rows[index][n] = [*kept, (low, grown, known)]
        self._budget.kept += grown.nbytes - sum(w[1].nbytes for w in touching)
        return low, grown, known

    def _row_block(self, index, n, ranks):
        """``I_t(r, n - r + 1)`` on the nodes of pass ``index``, rows ``ranks``."""
        t, _ = self._pass(index)
        if not ranks.size:
            return np.empty((0, t.shape[0]))
        low, high = int(ranks[0]), int(ranks[-1])  # (increasing ranks)
        if self._budget.kept > _ROW_CACHE_BYTES:
            # Rows past the budget (1,000 clients, whose composite rule asks
            # passes of 8,192 nodes, filled 17 GB) are not kept, unless a
            # kept window has them: a row's values are a function of (n, r,
            # t) alone, so this changes no bit.
            kept = self._find_window(index, n, low, high + 1)
            if kept is None or not kept[2][low - kept[0] : high + 1 - kept[0]].all():
                return _cut_rows(n, ranks, t, _ROW_CUT)
        first, matrix, done = self._window(index, n, low, high + 1)
        start = low - first
        if high - low + 1 == ranks.size:  # consecutive ranks: a view
            seen = done[start : start + ranks.size]
            if not seen.all():
                todo = ranks[~seen]
                matrix[todo - first] = _cut_rows(n, todo, t, _ROW_CUT)
                done[todo - first] = True
            return matrix[start : start + ranks.size]
        todo = ranks[~done[ranks - first]]
        if todo.size:
            matrix[todo - first] = _cut_rows(n, todo, t, _ROW_CUT)
            done[todo - first] = True
        return matrix[ranks - first]  # one gather: the rows, as np.array(list) stacked

    def _compute(self, q, index, cap=None):
        cap = self.cap if cap is None else cap
        t, w = self._pass(index)
        epsilon, n_bins = self.law_args
        probs = np.empty((len(self.groups), t.shape[0]))
        laws = self._laws.get(q)
        if laws is None:  # the same for every pass at this level
            laws = []
            for n, _ in self.groups:
                ranks, pmf = _rank_law(n, q, epsilon, n_bins, utility=self.utility)
                keep = (pmf != 0.0) & (ranks > 0)
                laws.append((ranks[keep], pmf[keep], float(pmf[ranks == 0].sum())))
            self._laws[q] = laws
        for g, (n, _) in enumerate(self.groups):
            probs[g] = self._client_cdf(index, n, laws[g])
        if not self.exact:
            t, w, probs = self._refined(q, index, laws, probs)
        # The DP on the counts reachable so far only: after clients adding up
        # to c, the states above c are exact zeros in the full (m, nodes) DP
        # and add exact zeros to the others, so the kept states carry the
        # same operations on the same values (the same bits) at about half
        # the cost.
        #
        # The DP is elementwise in the nodes, and a node where every p is 0 or
        # 1 ends, exactly, in the state e_C (C = the clients with p = 1; no
        # state if C >= m): its binomial blocks are exact 0s and 1s. Only the
        # other nodes run the DP (most nodes below the levels' quantiles
        # have p = 0 for every size).
        #
        # So does a node where ``cap`` clients or more have p = 1: there
        # the DP's states below that count are exact zeros (a p = 1 client
        # multiplies each state by exp(log1p(-1)) = 0 and moves it up; a
        # binomial block of p = 1 is 0 below its count), so the kept rows
        # 0..cap-1 of the CDF are 0, the values of the formula below.
        ones = np.asarray(self.counts) @ (probs == 1.0)
        binary = ((probs == 0.0) | (probs == 1.0)).all(axis=0) | (ones >= cap)
        mixed = np.flatnonzero(~binary)
        cdf = np.empty((self.m, probs.shape[1]))
        cdf[:cap, mixed] = self._count_cdf(probs[:, mixed], cap)
        cdf[:, binary] = np.arange(self.m)[:, None] >= ones[None, binary]
        cdf[cap:] = np.nan  # (the product keeps its shape: same bits per row)
        self.evaluations += 1
        # What _certified subtracts (each a bound on how much LB rose; LB is
        # affine in each client's p with a coefficient in [-1, 0], so it
        # moves by at most sum_j int |p_j change|): the rows' recurrence
        # error (``_tight_rows``, _ROW_REL p_j), the mass at rank 0 and the
        # rows cut to 0 below 1e-20 (_client_cdf).
        dropped = sum(
            c * ((law[2] if law[2] <= _BASE_DROP else 0.0) + 2.0 * _ROW_CUT)
            for c, law in zip(self.counts, laws, strict=True)
        )
        rows = _ROW_REL * float(self.counts @ (probs @ w))
        self._slacks[(q, index)] = rows + dropped
        return cdf @ w

    def _refined(self, q, index, laws, probs):
        """The composite rule at ``q`` with the narrow windows refined.

        A client whose ``p`` goes from 0 to 1 inside a window narrower than
        1/32 (two panels of 64; a client of 10^9 scores: a near-step at
        ``q``) made the uniform panels refine to 8192 without settling. The
        base panels that meet its window ``[L, R]`` (where its lowest rank's
        row turns positive and its top rank's row reaches 1) are replaced by
        pieces: the window cut into ``16 * 2**index`` panels of its own and
        the rest of those base panels on either side (16 Gauss nodes on each
        piece, as on every panel), so both passes resolve the step and
        settle. The new nodes' rows are computed at
        this level (not kept); the other nodes keep their cached rows.
        Returns ``(t, w, probs)`` on the nodes of this level.
        """
        t, w = self._pass(index)
        windows = self._narrow_windows(q, laws)
        if not windows:
            return t, w, probs
        panels = self.first_panels << index
        split = np.zeros(panels, dtype=bool)  # panels that meet a window
        for low, high in windows:
            split[int(low * panels) : min(int(high * panels), panels - 1) + 1] = True
        keep = ~np.repeat(split, 16)
        base_edges = np.linspace(0.0, 1.0, panels + 1)
        ids = np.flatnonzero(split)
        edges = np.union1d(base_edges[ids], base_edges[ids + 1])
        for low, high in windows:
            edges = np.union1d(edges, np.linspace(low, high, 16 * 2**index + 1))
        lows, highs = edges[:-1], edges[1:]
        inside = split[
            np.minimum((0.5 * (lows + highs) * panels).astype(int), panels - 1)
        ]
        lows, highs = lows[inside], highs[inside]
        x, w16 = np.polynomial.legendre.leggauss(16)
        width = (highs - lows)[:, None]
        extra = (lows[:, None] + width * (x + 1.0) / 2.0).ravel()
        extra_w = (width * w16 / 2.0).ravel()
        fresh = np.empty((len(self.groups), extra.shape[0]))
        for g, (n, _) in enumerate(self.groups):
            fresh[g] = self._client_cdf_on(extra, n, laws[g], None)
        nodes = np.concatenate([t[keep], extra])
        weights = np.concatenate([w[keep], extra_w])
        return nodes, weights, np.concatenate([probs[:, keep], fresh], axis=1)

    def _narrow_windows(self, q, laws):
        """``[L, R]`` of each client whose ``p`` moves inside less than two
        panels of the first pass (see :meth:`_refined`), at ``q``."""
        found = self._narrow.get(q)
        if found is None:
            found = []
            for (n, _), (ranks, _, base) in zip(self.groups, laws, strict=True):
                if not ranks.size or base > _BASE_DROP:
                    continue
                low, high = float(ranks[0]), float(ranks[-1])
                left = float(special.betaincinv(low, n - low + 1.0, _ROW_CUT))
                right = 1.0 - float(special.betaincinv(n - high + 1.0, high, _ROW_CUT))
                if 0.0 < left < right < 1.0 and right - left < 2.0 / 64:
                    found.append((left, right))
            self._narrow[q] = found
        return found

    def _client_cdf(self, index, n, law):
        """:meth:`_client_cdf_on` the nodes of pass ``index`` (cached rows)."""
        t, _ = self._pass(index)
        return self._client_cdf_on(t, n, law, index)

    def _client_cdf_on(self, t, n, law, index):
        """``p_n(t)`` of one client on the nodes of pass ``index``, made
        0 or 1 where its rows decide it (the DP then skips it there).

        ``p_n = P(D = 0) + sum_r P(D = r) T_r``. A mass at rank 0 of at
        most ``_BASE_DROP`` (the law's mass below its window, when the
        window does not reach rank 1) is left out: it made ``p`` positive
        at every node; ``LB`` rises by at most that mass, which
        ``_certified`` subtracts. Where the top rank's row is 1 (every row
        is), ``p`` is set to 1 (``p <= 1``; a larger ``p`` only lowers
        ``LB``, so the bound stays valid).
        """
        ranks, weights, base = law
        base = base if base > _BASE_DROP else 0.0
        if not ranks.size:
            return np.full(t.shape[0], min(base, 1.0))
        if index is None:  # nodes of one level only: rows not kept
            rows = _cut_rows(n, ranks, t, _ROW_CUT)
        else:
            rows = self._row_block(index, n, ranks)
        # Rows increase in t and decrease in the rank: left of the first
        # node where the lowest rank's row is positive every row is 0 (p is
        # the base), from the first node where the top rank's row is 1
        # every row is 1 (p = 1); the product runs in between only.
        left = int(np.argmax(rows[0] > 0.0)) if rows[0, -1] > 0.0 else t.shape[0]
        right = int(np.argmax(rows[-1] == 1.0)) if rows[-1, -1] == 1.0 else t.shape[0]
        p = np.full(t.shape[0], base)
        p[right:] = 1.0
        if right > left:
            p[left:right] += weights @ rows[:, left:right]
        return np.minimum(p, 1.0)

    def _count_cdf(self, probs, cap):
        """``P(count <= i)``, ``i = 0..cap-1`` (rows), on the nodes of ``probs``.

        A single client's binomial block is exp(log1p(-p)) and exp(log p)
        (its log-binomial coefficients are exact zeros): computed for all
        single clients in two calls, then one multiply-add per client, the
        values _add_clients(..., single_as_block=True) gives.

        The nodes go by chunks of ``_DP_CHUNK``. In a chunk, a client with
        p = 0 on every node is skipped: its step multiplies each state by
        exp(log1p(0)) = 1 and adds 0 * state, the same values. A client
        with p = 1 on every node shifts the states up by its count (its
        factors are exact 0s and 1s); shifts commute with the other steps
        (each step reads states i and i - 1 with the same factors, and the
        states dropped at the cap never come back below it), so they are
        applied at the end, and the chunk's DP keeps ``cap - shift``
        states: the same operations on the same values, the same bits.
        """
        counts = np.asarray(self.counts)
        single = counts == 1
        stay = np.exp(special.xlog1py(1.0, -probs[single]))
        move = np.exp(special.xlogy(1.0, probs[single]))
        out = np.empty((cap, probs.shape[1]))
        for lo in range(0, probs.shape[1], _DP_CHUNK):
            hi = min(lo + _DP_CHUNK, probs.shape[1])
            chunk = probs[:, lo:hi]
            zero = (chunk == 0.0).all(axis=1)
            one = (chunk == 1.0).all(axis=1) & ~zero
            shift = int(counts[one].sum())
            # (shift < cap: the nodes where cap clients have p = 1 are not here)
            kept = cap - shift
            width = hi - lo
            # The states live in two buffers (no array per client): a single
            # client's row i is state[i] * stay + state[i - 1] * move, the
            # two products and the sum of the padded arrays the DP was
            # written with (a new top row is 0 * stay + x = x), so the same
            # bits.
            state, spare, products = (np.empty((kept, width)) for _ in range(3))
            state[0] = 1.0
            rows = 1
            singles = np.cumsum(single) - 1  # client -> its row of stay, move
            for g in np.flatnonzero(~(zero | one)):
                count = int(counts[g])
                grown = min(kept, rows + count)
                if count == 1 and grown > 1:
                    s = singles[g]
                    np.multiply(state[:rows], stay[s, lo:hi], out=spare[:rows])
                    spare[rows:grown] = 0.0
                    np.multiply(
                        state[: grown - 1], move[s, lo:hi], out=products[: grown - 1]
                    )
                    np.add(spare[1:grown], products[: grown - 1], out=spare[1:grown])
                    state, spare = spare, state
                elif grown > 1:
                    padded = np.zeros((grown, width))
                    padded[:rows] = state[:rows]
                    state[:grown] = _add_clients(
                        padded, chunk[g], count, single_as_block=True
                    )
                else:  # one state kept: only P(count = 0) = prod (1 - p)
                    state[:1] = _add_clients(
                        state[:1], chunk[g], count, single_as_block=True
                    )
                rows = grown
            # States above the reachable ones and below the shift are exact
            # zeros: the CDF is 0 below the shift, flat above.
            cum = np.minimum(np.cumsum(state[:rows], axis=0), 1.0)
            out[:shift, lo:hi] = 0.0
            out[shift : shift + rows, lo:hi] = cum
            out[shift + rows :, lo:hi] = cum[-1]
        return out

    def _certified(self, q, index, cap):
        """:meth:`_compute` minus the rows' error bound (``_tight_rows``)."""
        values = self._compute(q, index, cap)
        return values - self._slacks[(q, index)]

    def _passes(self, q, k):
        """The passes made at ``q``, those computed below ``k`` states
        computed again with ``k`` (the same bits for the smaller ``k``)."""
        passes = self._values.setdefault(q, [])
        caps = self._caps.setdefault(q, [])
        caps.extend([self.m] * (len(passes) - len(caps)))  # set from outside
        for i, cap in enumerate(caps):
            if cap < k:
                caps[i] = max(k, self.cap)
                passes[i] = self._certified(q, i, caps[i])
        return passes

    def _append(self, q, passes, k):
        """One more pass at ``q`` (the states up to ``cap``, ``k`` at least)."""
        cap = max(self.cap, k)
        self._caps.setdefault(q, []).append(cap)
        passes.append(self._certified(q, len(passes), cap))

    def known(self, q, k):
        """``LB(q, k)`` if already computed (no new work), else None."""
        if q not in self._values:
            return None
        return self._settle(self._passes(q, k), k)

    def _settle(self, passes, k):
        if not passes:
            return None
        if self.exact:
            return float(passes[0][k - 1])
        for i in range(1, len(passes)):
            value, previous = passes[i][k - 1], passes[i - 1][k - 1]
            if abs(value - previous) < 1e-13:
                return float(value) - _QUADRATURE_SLACK
            if (self.first_panels << i) >= 8192:
                return float(min(value, previous)) - 1e-8
        return None

    def __call__(self, q, k):
        passes = self._passes(q, k)
        while True:
            value = self._settle(passes, k)
            if value is not None:
                return value
            self._append(q, passes, k)

    def within(self, q, k, passes=2):
        """``LB(q, k)`` if it settles within ``passes`` passes, else None
        (the passes made are kept: a later call settles from them)."""
        made = self._passes(q, k)
        if self.exact:
            passes = 1  # exact nodes: one pass is the bound
        while len(made) < passes:
            self._append(q, made, k)
        return self._settle(made[:passes], k)

    def estimate(self, q, k):
        """``LB(q, k)`` from the passes made at ``q`` (one at least): a guess.

        Exact nodes: the bound itself. Composite rule: the last pass minus
        the slack (the settled value when that pass agrees with the next, as
        it nearly always does to ~1e-13). Never used to decide a midpoint,
        only to aim the levels that will (see :func:`_replayed_bisection`).
        """
        passes = self._passes(q, k)
        if not passes:
            self._append(q, passes, k)
        if self.exact:
            return float(passes[0][k - 1])
        return float(passes[-1][k - 1]) - _QUADRATURE_SLACK
