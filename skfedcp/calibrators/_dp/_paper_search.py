"""The dp-qq paper plan's gamma search, bounds first and exact scores last."""

from __future__ import annotations

import math

import numpy as np

from . import _paper_bounds

#: Out-of-order search (unequal sizes, ``_BOUND_MIN_DISTINCT`` distinct and
#: more): a gamma whose lower bound clears the best exact score by this
#: margin is neither the plan's gamma nor within a tie of it.
_NEAR = 1e-9
#: Blocks of gammas in one batch: their margin is guessed, so a wider one.
_ROW_BLOCK_MARGIN = 0.02
#: Nodes of a coarse packed bound (fewer far from the best, see _rows).
_COARSE_NODES = 16
#: The search could not tell the plan apart from the grid-order search's.
_NEAR_TIE = object()
#: Gammas per batched bound (one count DP for all, up to
#: ``_BOUND_DP_MAX_CLIENTS`` clients); one at a time through the tree.
_BATCH = 16


class _Candidates:
    """The gammas of a search and the best lower bound known on each score.

    ``bound[i]`` is a rigorous lower bound on the exact score of
    ``grid[i]`` (each tier sharper and dearer: ``tau + 1/(N + 1)``, then the
    coarse bound, then the fine one, see :func:`_refine`); ``level[i]`` the
    tier reached. A gamma found infeasible on the way is dropped.
    """

    def __init__(self, sizes, alpha, grid, corrections, size_counts, ops):
        self.ops = ops
        self.sizes, self.alpha, self.grid = sizes, alpha, grid
        self.corrections, self.size_counts = corrections, size_counts
        self.ns = np.array([n for n, _ in size_counts], dtype=np.float64)
        self.n_total = sum(sizes)
        self.batched = len(sizes) <= ops._BOUND_DP_MAX_CLIENTS
        n_max = max(sizes)
        self.bound, self.level, self.tried, self.nodes = {}, {}, set(), {}
        for i, g in enumerate(grid):
            if corrections[g] < n_max:  # else no client has a finite value
                self.bound[i] = self.tau(i) + 1.0 / (self.n_total + 1)
                self.level[i] = 0

    def tau(self, i):
        return (1.0 - self.alpha) / (1.0 - self.grid[i] * self.alpha)

    def ranks(self, i):
        g = self.grid[i]
        return _paper_bounds.fixed_ranks(
            self.ns, self.alpha * (1.0 - g) / (1.0 - g * self.alpha)
        )

    def as_dict(self, ranks):
        """Ranks of the sizes (an array) as ``{n_j: l_j}``."""
        keys = [n for n, _ in self.size_counts]
        return dict(zip(keys, ranks.astype(int).tolist(), strict=True))

    def raise_bound(self, i, value, level):
        self.bound[i] = max(self.bound[i], value)
        self.level[i] = level

    def drop(self, i):
        del self.bound[i], self.level[i]


def _refine(cands, rows, level, best=math.inf):
    """Raise the bounds of the gammas of ``rows`` to ``level`` (1 or 2).

    ``rows``: pairs of a number of nodes and a list of consecutive grid
    indices of one ``l_cor``, one gamma or a block bounded at once (see ``top`` in
    :func:`._plan._packed_score_bound`; a block that does not clear ``best`` leaves
    its gammas as they were, marked). A gamma whose clients all stay finite
    gets the shift gain of :func:`._plan._shift_gain` (level 1) or
    :func:`._plan._score_lower_bound` (level 2); the others the packed Riemann bound
    on the row's nodes, in one count DP per number of nodes when the clients
    are few.
    """
    packed = []
    for n_nodes, row in rows:
        first, last = row[0], row[-1]
        correction, tau = cands.corrections[cands.grid[last]], cands.tau(first)
        ranks = cands.ranks(first)
        finite = ranks + correction <= cands.ns
        if len(row) > 1:
            cands.tried.update(row)
            top = cands.ranks(last)
            if (top <= cands.ns).any():  # else the block certifies no kappa
                packed.append((row, top, ranks + correction, tau, n_nodes))
        elif not finite.any():
            cands.drop(first)  # the fixed ranks leave no client finite
        elif finite.all():
            if level == 1:
                bound = tau + cands.ops._shift_gain(cands.size_counts, correction)
            else:
                fixed = cands.as_dict(ranks)
                bound = cands.ops._score_lower_bound(
                    cands.size_counts, fixed, correction, tau
                )
            cands.raise_bound(first, bound, level)
        else:
            packed.append((row, ranks, ranks + correction, tau, n_nodes))
    for n_nodes in sorted({item[4] for item in packed}):
        items = [item for item in packed if item[4] == n_nodes]
        values = _paper_bounds.packed_bounds(
            cands.size_counts,
            np.array([item[1] for item in items]),
            np.array([item[2] for item in items]),
            [item[3] for item in items],
            n_nodes,
            cands.batched,
        )
        for (row, *_), value in zip(items, values, strict=True):
            if len(row) == 1 or value - 3e-10 >= best + _NEAR:
                for i in row:
                    cands.raise_bound(i, float(value), level)
                    cands.nodes[i] = n_nodes


def _rows(cands, indices, best, count, gap):
    """Up to ``count`` rows for :func:`_refine` from the open ``indices``.

    The margin by which a gamma's bound will clear the best is guessed as
    that of the last gamma bounded before it plus their tau difference (the
    scores grow about as tau beyond the best). Far from the best (by
    ``_BLOCK_MARGIN``; ``_ROW_BLOCK_MARGIN`` in a batch, where the guess
    reaches further), up to ``_BLOCK`` consecutive open gammas of one
    ``l_cor`` share a row (a block loses about its tau spread), unless one
    of them was in a block before. A single gamma gets fewer nodes where
    the margin is several times ``gap`` (the gap of a coarse bound; it
    grows as 1 / nodes). A wrong guess costs a retry, never the plan.
    """
    rows, taken = [], set()
    for i in sorted(indices):
        if i in taken:
            continue
        row = [i]
        before = [j for j in cands.bound if j < i and cands.level[j] > 0]
        margin = -math.inf
        if before:
            j = max(before)
            margin = cands.bound[j] - best + cands.tau(i) - cands.tau(j)
        far = margin > (_ROW_BLOCK_MARGIN if cands.batched else cands.ops._BLOCK_MARGIN)
        correction = cands.corrections[cands.grid[i]]
        while (
            far
            and len(row) < cands.ops._BLOCK
            and cands.level.get(row[-1] + 1) == 0
            and cands.bound[row[-1] + 1] - 3e-10 < best + _NEAR
            and cands.corrections[cands.grid[row[-1] + 1]] == correction
        ):
            row.append(row[-1] + 1)
        if len(row) > 1 and cands.tried.intersection(row):
            row = [i]
        taken.update(row)
        nodes = _COARSE_NODES
        if len(row) == 1 and margin > 6.0 * gap:
            nodes = _COARSE_NODES // 4
        elif len(row) == 1 and margin > (2.0 if cands.batched else 3.0) * gap:
            nodes = _COARSE_NODES // 2  # batched: a retry costs less
        rows.append((nodes, row))
        if len(rows) == count:
            break
    return rows


def bounded_search(sizes, alpha, grid, corrections, size_counts, ops):
    """The plan's gamma with exact scores only where bounds cannot decide.

    ``ops`` is the module :mod:`._plan` itself, whose scores, bounds and
    settings (``_scored``, ``_shift_gain``, ``_score_lower_bound``,
    ``_BLOCK``, ``_BLOCK_MARGIN``, ``_FINE_MARGIN``, ``_FINE_NODES``,
    ``_BOUND_DP_MAX_CLIENTS``) are read from it when used: handed over, not
    imported, since that module imports this one.

    Returns the best ``(score, gamma, selection, correction, ranks)`` of
    the grid-order search (:func:`._plan._sequential_search`), None when no gamma
    is feasible, or ``_NEAR_TIE`` when another evaluated score lies within
    ``_NEAR`` of the best (the caller then runs the grid-order search).

    Why the same plan: the grid-order search replaces its best by a score
    below ``best - 1e-10``, so its final score is within 1e-10 of the
    smallest score ``s``. Here every gamma is evaluated exactly unless a
    lower bound puts its score above ``s + _NEAR``; if the evaluated scores
    within ``_NEAR`` of ``s`` all equal ``s``, the grid-order search keeps
    the first of them in the grid (every earlier best lies above ``s +
    _NEAR``, every later score is ``s`` or above ``s + _NEAR``), as here.
    The gamma of the smallest coarse bound near the start of the grid is
    evaluated first (the best is then soon the final one), then bounds are
    sharpened where they are cheap before any other exact score.
    """
    cands = _Candidates(sizes, alpha, grid, corrections, size_counts, ops)
    step = _BATCH if cands.batched else 1
    first = _BATCH // 2 if cands.batched else 1
    scores, best = {}, math.inf
    # First guess: coarse bounds in grid order until they rise past a dip.
    done: list[int] = []
    for start in range(0, len(grid), first):
        chunk = [i for i in range(start, start + first) if cands.level.get(i) == 0]
        _refine(cands, [(_COARSE_NODES, [i]) for i in chunk], 1)
        done = [i for i in done + chunk if i in cands.bound]
        if done:
            low = min(done, key=lambda i: (cands.bound[i], i))
            if sum(cands.bound[i] > cands.bound[low] for i in done if i > low) >= 2:
                break
    guess = min(done, key=lambda i: (cands.bound[i], i)) if done else None
    fine_margin, gains, gap = ops._FINE_MARGIN, [], ops._FINE_MARGIN
    while True:
        open_ = [i for i, b in cands.bound.items() if b - 3e-10 < best + _NEAR]
        if not open_:
            break
        i = min(open_, key=lambda j: (cands.bound[j], j))
        if guess is not None and guess in cands.bound:
            i = guess
        guess = None
        level = cands.level[i] if best < math.inf else 3
        if level == 0:
            todo = [j for j in open_ if cands.level[j] == 0]
            rows = _rows(cands, todo, best, 4 * step if cands.batched else 1, gap)
            _refine(cands, rows, 1, best)
            continue
        if level == 1 and cands.nodes.get(i, _COARSE_NODES) < _COARSE_NODES:
            todo = [
                j
                for j in open_
                if cands.level[j] == 1
                and cands.nodes.get(j, _COARSE_NODES) < _COARSE_NODES
            ]
            _refine(cands, [(_COARSE_NODES, [j]) for j in todo[:step]], 1)
            continue
        if level == 2 and cands.nodes.get(i, ops._FINE_NODES) < ops._FINE_NODES:
            todo = [
                j
                for j in open_
                if cands.level[j] == 2
                and cands.nodes.get(j, ops._FINE_NODES) < ops._FINE_NODES
            ]
            _refine(cands, [(ops._FINE_NODES, [j]) for j in todo[:step]], 2)
            continue
        if level == 1 and best - fine_margin < cands.bound[i]:
            # Close to the best: finer nodes may settle it (the gain they
            # bring, measured, sets how close is worth trying).
            todo = [
                j
                for j in open_
                if cands.level[j] == 1 and best - fine_margin < cands.bound[j]
            ]
            before = {j: cands.bound[j] for j in todo[:step]}
            # Batched: half the fine nodes first (most gammas clear there).
            nodes = ops._FINE_NODES // 2 if cands.batched else ops._FINE_NODES
            _refine(cands, [(nodes, [j]) for j in before], 2)
            gains += [
                cands.bound[j] - value
                for j, value in before.items()
                if j in cands.bound and cands.bound[j] < math.inf
            ]
            fine_margin = min(
                ops._FINE_MARGIN, 2.0 * max(gains, default=ops._FINE_MARGIN)
            )
            continue
        g, bound = grid[i], cands.bound[i]
        cands.drop(i)
        target = ops._scored(sizes, alpha, g, corrections[g], "fixed")
        if target is not None:
            scores[i] = target
            best = min(best, target[0])
            if len(scores) == 1 and bound > -math.inf:  # the coarse bound's gap
                gap = max(target[0] - bound, 1e-5)
    if not scores:
        return None
    near = [i for i, target in scores.items() if target[0] <= best + _NEAR]
    if any(scores[i][0] != best for i in near):
        return _NEAR_TIE
    return scores[min(near)]
