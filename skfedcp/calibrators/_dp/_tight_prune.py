"""Tight dp-qq plan: stop the search once no later plan can be chosen.

The chained tight search (``_tight._dpqq_tight_search_chained``: the plan
before session 9, still that of ``n_byzantine > 0``; step 1 below is also
the proof behind ``_tight_select``) bisects, for k = 1, 2, ...,
the smallest level ``q*(k)`` with ``LB(q, k) >= 1 - alpha`` on ``[1/2,
q*(k - 1)]`` (each bisection starts from the previous level, so every
``q*(k)`` needs the ones before it), then keeps the plan with the smallest
simulated coverage ``S(q*(k), k)``, scanning the plans in the order of ``k``:
a plan replaces the best so far only if its ``S`` is smaller by more than
1e-9. Past the best plan, ``S`` usually rises with ``k``; this module proves,
from a few evaluations at levels of its choice, that no later plan replaces
the best one, so their bisections are skipped. The plan is the same.

Why (the proof; the user guide's "Tight corrections" has the search):

1. ``S(q, k)`` does not decrease in ``q``. Each client's release is the
   exponential mechanism with logits ``-c(q) w_b(q)``. For ``utility=
   "quantile"`` and ``q >= 1/2`` they are ``-(epsilon / 2) max(L_b a, G_b)``
   with ``a = (1 - q) / q`` decreasing in ``q``, ``L_b`` non-decreasing and
   ``G_b`` non-increasing in the bin ``b``; the difference ``max(L_{b+1} a,
   G_{b+1}) - max(L_b a, G_b)`` has derivative ``L_{b+1} 1{L_{b+1} a >
   G_{b+1}} - L_b 1{L_b a > G_b} >= 0`` in ``a`` (the second event implies
   the first), so the logits have increasing differences in ``(b, q)``. For
   ``utility="rank"`` the logits are ``-(epsilon / 2) max(L_b - t + 1, G_b -
   n + t)`` with ``t = q n``; the kink ``2 t = L_b - G_b + n + 1`` of bin
   ``b + 1`` lies above that of bin ``b``, so the derivative of the
   difference in ``t`` is ``-2`` between the kinks and 0 elsewhere: again
   increasing differences. Increasing differences give a monotone likelihood
   ratio, hence a release stochastically larger at a larger level, for every
   simulated data set; the threshold (the k-th smallest independent release)
   is then stochastically larger too, and so is its expected coverage ``S``.
   ``S(q, k)`` does not decrease in ``k`` either.
2. ``q*(k) > a`` for any level ``a`` with ``LB(a, k) < 1 - alpha`` (the
   bisection returns a level that passes; ``LB`` increases in ``q``, as the
   bisection itself assumes), and ``q*(k) >= 1/2``. So ``S(q*(k), k) >=
   S(a, k)`` for such ``a`` and ``>= S(1/2, k)``: one evaluation of ``LB``
   and of ``S`` at a level bounds every later plan at once.
3. The scan: let ``B`` be the best value after the plans up to ``k``. If
   every later plan has ``S >= B - 1e-9``, none replaces the best (by
   induction, the best stays ``B``), so the scan of all plans chooses the
   plan of the scan stopped at ``k``. The bounds of 2 are compared with
   ``B - 1e-9 + 1e-12``: the rounding of a computed ``S`` (a sum of 100
   terms below 1) is far below 1e-12.

The levels probed are only aimed by guesses (from the levels already found);
a probe that proves nothing only costs its evaluation. Probes go on while
they prove the plans one after another; a plan missed ``_RETRIES + 1``
times in a row sends the search on to the next bisection.
"""

from __future__ import annotations

import numpy as np

from .._qq._poisbin import _add_clients
from ._laws import _release_cdfs

#: Turn the early stop off (tests compare the plans with and without it).
_PRUNE_TAIL = True
#: Rounding allowance of a computed simulated coverage (see the proof, 3).
_S_SLACK = 1e-12
#: The sequential rule's tie tolerance (``_tight._best_simulated``).
_TIE = 1e-9
#: Probes that may miss the same plan before the search goes on.
_RETRIES = 1


def _simulated_coverage_all_k(groups, level, epsilon, n_bins, utility, counts_of):
    """``S(level, k)`` for ``k = 1..m`` from one DP over the sizes.

    The per-size release laws of ``_tight._simulated_coverage`` (the same
    public data sets, ``counts_of``), then the law of the number of releases
    below each edge on all states: the value for ``k`` is the one the
    single-``k`` DP computes up to the rounding of the final sums (these are
    lower bounds with a slack, never the values the scan compares).
    """
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    cdfs = _release_cdfs(groups, level, epsilon, utility, counts_of)
    m = sum(c for _, c in groups)
    state = np.zeros((1, n_bins))
    state[0] = 1.0
    for cdf, (_, count) in zip(cdfs, groups, strict=True):
        grown = np.zeros((min(m, state.shape[0] + count), n_bins))
        grown[: state.shape[0]] = state
        state = _add_clients(grown, np.clip(cdf, 0.0, 1.0), count, single_as_block=True)
    above = np.minimum(np.cumsum(state, axis=0), 1.0)  # P(T_k > e_b), row k - 1
    return edges[1] + above[:, :-1] @ np.diff(edges[1:])


class _TailProbes:
    """Lower bounds of ``S(q*(k), k)`` for the plans not bisected yet.

    ``lower[k - 1]`` is the largest ``S(a, k)`` over the probed levels ``a``
    that fail ``k`` (``LB(a, k) < target``), and over ``a = 1/2`` (proof, 2).
    """

    def __init__(self, bounds, target, simulate):
        self.bounds = bounds
        self.target = target
        self.simulate = simulate  # level -> S(level, k) for k = 1..m
        self.m = bounds.m
        self.lower = np.full(self.m, -np.inf)
        self.probes = {}  # level -> (LB over k, S over k)

    def probe(self, level, aimed=None):
        """Evaluate ``LB`` and ``S`` at ``level`` for every ``k``; update.

        ``LB(level, aimed)`` is settled in full; the other ``k`` use the
        passes made (at least two), NaN where these do not settle it (no
        bound from this level for that ``k``: one more pass, on new nodes,
        would cost more than the probe).
        """
        if level not in self.probes:
            passes = 2  # (one on exact nodes, see _TightBounds.within)
            if aimed is not None:
                self.bounds(level, aimed)
                passes = max(passes, len(self.bounds._values[level]))
            lb = np.array(
                [self.bounds.within(level, k, passes) for k in range(1, self.m + 1)],
                dtype=np.float64,
            )
            values = self.simulate(level)
            self.probes[level] = (lb, values)
            # q*(k) >= 1/2 always: S(1/2, k) bounds every plan.
            fails = (lb < self.target) | (level == 0.5)
            self.lower = np.maximum(self.lower, np.where(fails, values, -np.inf))
        return self.probes[level]

    def settled(self, history, best):
        """Whether no plan after the last one of ``history`` can replace
        ``best`` (the scan's best value); probes levels to prove it.

        ``history`` lists ``(q*(k), k, S)`` of the plans bisected so far.
        """
        q_done, k_done, _ = history[-1]
        if k_done >= self.m:
            return True
        threshold = best - _TIE + _S_SLACK
        self.probe(q_done)  # passes every later plan: the upper ends of the aim
        misses, aimed = 0, None
        while True:
            open_ = np.flatnonzero(self.lower[k_done:] < threshold)
            if not open_.size:
                return True
            k = k_done + 1 + int(open_[0])
            misses = misses + 1 if k == aimed else 0
            if misses > _RETRIES:
                return False
            level = self._aim(k, history, threshold)
            if level is None or level in self.probes:
                return False
            aimed = k
            self.probe(level, aimed)

    def _half_passes(self, k):
        """A guess of ``LB(1/2, k) >= target`` (the full bound if known, else
        the one-pass estimate: only where to probe depends on it)."""
        value = self.bounds.known(0.5, k)
        if value is None:
            value = self.bounds.estimate(0.5, k)
        return value >= self.target

    def _aim(self, k, history, threshold):
        """A level that should fail ``k`` with ``S(level, k) >= threshold``
        (a guess: linear interpolation of ``LB(., k)`` and ``S(., k)``
        between the closest probes around ``q*(k)``), or None when ``k``
        looks like it would replace the best plan."""
        below = [q for q, (lb, _) in self.probes.items() if lb[k - 1] < self.target]
        above = [q for q, (lb, _) in self.probes.items() if lb[k - 1] >= self.target]
        if not above:
            return None
        if not below and self._half_passes(k):  # q*(k) = 1/2: S(1/2, k) is exact
            return None if 0.5 in self.probes else 0.5
        b = min(above)
        lb_b, s_b = self.probes[b][0][k - 1], self.probes[b][1][k - 1]
        if not below:
            # No failing level yet: step below b as far as q* moved per plan.
            q_done, k_done, _ = history[-1]
            step = (history[-2][0] - q_done) / (k_done - history[-2][1])
            return b - max(k - k_done, 1) * step if len(history) >= 2 else None
        a = max(below)
        lb_a, s_a = self.probes[a][0][k - 1], self.probes[a][1][k - 1]
        x = a + (self.target - lb_a) / (lb_b - lb_a) * (b - a)  # ~ q*(k)
        s_x = s_a + (x - a) / (b - a) * (s_b - s_a)  # ~ S(q*(k), k)
        if s_x <= threshold or s_b <= s_a:
            return None
        low = a + (threshold - s_a) / (s_b - s_a) * (b - a)  # ~ S(., k) = threshold
        return float(max(low, a) + 0.5 * (x - max(low, a)))
