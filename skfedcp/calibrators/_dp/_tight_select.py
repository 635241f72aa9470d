"""Tight dp-qq plan: each k's own smallest level, k chosen by certified brackets.

The plan (``rule="tight"``, ``n_byzantine=0``; the user guide's "Tight
corrections", step 4, has the same text):

* for each ``k`` with ``LB(1, k) >= target`` (``target = 1 - alpha +
  1e-12``), ``q(k)`` is the smallest float level in ``[1/2, 1]`` with
  ``LB(q, k) >= target``: ``1/2`` if ``LB(1/2, k)`` passes, else the float
  ``b`` with ``LB(b, k) >= target > LB(b', k)``, ``b'`` the float just below
  ``b`` (found by Illinois steps on fully evaluated levels, down to two
  adjacent floats; the computed ``LB`` is taken to increase in ``q``, the
  assumption every bisection of it makes);
* ``S(k) = S(q(k), k)`` is the expected coverage on the public uniform data
  sets (``_tight._simulated_coverage``); the plan is ``(q(k*), k*)`` with
  ``k*`` the smallest ``k`` such that ``S(k) <= min_j S(j) + 1e-9``.

Until session 9 the level of ``k`` was the end of a 30-step bisection on
``[1/2, q(k - 1)]`` (``_tight._dpqq_tight_search_chained``, kept as the
reference): its grid depended on the previous ``k``'s level, so every ``k``
before the chosen one had to be bisected exactly. Here each ``k``'s level
stands alone, and only the ``k`` that can still be chosen are resolved.

Why the new plan keeps the guarantee and is never further from ``1 -
alpha`` in the rule's criterion ``S`` (``q_old(k)`` the chained level):

1. Same feasible ``k``: ``LB`` increases in ``k``, so ``LB(q_old(k - 1), k)
   >= LB(q_old(k - 1), k - 1) >= target`` and the chain skips a ``k`` only
   when ``LB(1, k)`` fails; both rules plan the ``k`` with ``LB(1, k) >=
   target``.
2. ``LB(q(k), k) >= target`` by construction: the same guarantee ``1 -
   alpha``, certified by a full evaluation at the returned level.
3. ``q(k) <= q_old(k)``: ``q_old(k)`` is a float of ``[1/2, 1]`` that passes
   and ``q(k)`` is the smallest such float.
4. ``S(q, k)`` does not decrease in ``q`` (``_tight_prune``, proof step 1:
   the release is stochastically increasing in the level on every simulated
   data set), so ``S(q(k), k) <= S(q_old(k), k)`` for every feasible ``k``.
5. Hence ``min_k S_new(k) <= min_k S_old(k)``. The chained rule keeps the
   first plan not beaten by more than 1e-9, so its choice has ``S_old >=
   min_k S_old(k)``; the new choice has ``S_new <= min_k S_new(k) + 1e-9``.
   So ``S_new(k*) <= S_old(k_old) + 1e-9`` always, and ``S_new(k*) <=
   S_old(k_old)`` whenever the new minimum is not tied within 1e-9 (the
   tests check ``S_new <= S_old + 1e-12`` on hundreds of profiles).

How ``k*`` is found without resolving every ``k``. One fully evaluated level
``x`` gives ``LB(x, k)`` and ``S(x, k)`` for every ``k`` at once
(``_tight_bounds._TightBounds``, ``_tight_prune._simulated_coverage_all_k``). For
each ``k``, let ``b_k`` be the smallest evaluated level that passes ``k``
and ``a_k`` the largest below it that fails (``1/2`` if none: ``q(k) >=
1/2``).
Then ``q(k)`` is in ``(a_k, b_k]`` and, by 4, ``S(a_k, k) <= S(k) <=
S(b_k, k)``. With ``U = min_k S(b_k, k)`` (``>= min S``), a ``k`` with
``S(a_k, k) > U + 1e-9 + 2e-12`` has ``S(k) > min S + 1e-9``: it is neither
chosen nor the minimum (1e-12 covers the rounding of each of the two
all-``k`` values compared, as in ``_tight_prune``). The other ``k`` are
the contenders; the search probes levels (aimed by interpolation: guesses
that only choose where to evaluate) until every contender is resolved
(its ``a_k``, ``b_k`` adjacent floats, or ``q(k) = 1/2``), then applies
the rule to their exact ``S(k)``.
Every decision (pass, fail, exclusion) is that of a fully evaluated level.
(Since session 10 a fully evaluated ``LB`` is the engine's certified value:
the computed one minus a bound on what its row recurrence, dropped rank-0
mass and row cut can add, ``_tight_bounds._TightBounds._certified``; the argument
above holds for it unchanged, and the user guide's "The engine of session
10" shows the plan is never further from ``1 - alpha`` than before.)

The plan depends on no path of the search: ``q(k)`` is a function of ``k``
(the smallest passing float, under the monotonicity above) and ``LB(q, k)``
of ``(q, k)``, and the rule gives the same ``k*`` over any set of contenders
holding every ``k`` not certified out. So the search may ask less: the ``k``
above the largest contender are out for good (their lower ends only rise),
and a level probed next to another one (a crossing being refined) is
evaluated for the ``k`` up to the aimed one only; ``_tight_bounds._TightBounds``
then keeps the DP's states ``0..cap - 1``, whose bits do not depend on the
states above (``LB(q, k)`` for ``k <= cap`` is the full DP's).
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache

import numpy as np

from . import _tight, _tight_prune
from ._tight_prune import _S_SLACK, _TIE

#: Bracket width below which the Illinois steps give way to the secant on the
#: ends' own values (``LB`` is linear there up to its rounding) and the float
#: on the other side of it (``_LevelSearch._finish``).
_SNAP_WIDTH = 2.0**-30
#: Bracket width (in level) a first narrowing of the likeliest ``k`` stops at.
_COARSE = 1e-3
#: A probe this close (in level) to a probed level skips the k above the
#: aimed one (``_LevelSearch.probe``).
_NARROW = 1e-3
#: Exclusion probes of one ``k`` before it is resolved instead.
_EXCLUDE_TRIES = 2
#: Probes of the whole search before every contender is resolved in turn
#: (a guard: the aim normally needs far fewer).
_MAX_PROBES = 400


class _LevelSearch:
    """Probed levels, per-``k`` brackets of ``q(k)`` and ``S(k)`` (see above)."""

    def __init__(self, bounds, target, simulate, ks):
        self.bounds = bounds
        self.target = target
        self.simulate = simulate  # level -> S(level, k) for k = 1..m
        self.ks = np.asarray(ks, dtype=np.int64)  # the candidate k (1..m)
        self.m = bounds.m
        self.lb = {}  # level -> LB over k = 1..m (NaN: not settled)
        # level -> S over k = 1..m, computed where asked only (at 1/2 from
        # the start: q(k) >= 1/2, so S(1/2, k) bounds S(k) below).
        self.s = {0.5: simulate(0.5)}
        self.tries = {}  # k -> exclusion probes

    def simulated(self, level):
        """``S(level, k)`` for every ``k`` (computed once per level)."""
        if level not in self.s:
            self.s[level] = self.simulate(level)
        return self.s[level]

    def probe(self, level, aimed=None):
        """Evaluate ``LB`` at ``level`` for every ``k`` (not ``S``: on demand).

        ``LB(level, aimed)`` is settled in full; the other ``k`` use the
        passes made (two at least; NaN where they do not settle).
        """
        level = float(level)
        if level in self.lb:
            if aimed is not None and np.isnan(self.lb[level][aimed - 1]):
                self.lb[level][aimed - 1] = self.bounds(level, aimed)
            return
        # The k above the engine's cap are excluded for good (see contenders).
        # A level aimed next to a probed one (the steps that refine a
        # crossing) is probed for the k up to ``aimed`` only (the DP's states
        # 0..aimed-1): it informs the others little. NaN above, as a value
        # that does not settle (less information never changes the plan:
        # every decision stays certified, and the plan is the rule's, see the
        # module docstring).
        cap = self.bounds.cap
        if aimed is not None and self._narrow(level):
            cap = min(cap, aimed)
        kept, self.bounds.cap = self.bounds.cap, cap
        try:
            if aimed is not None:
                self.bounds(level, aimed)
            # Two passes at least (one on exact nodes, _TightBounds.within).
            passes = max(2, len(self.bounds._values.get(level, ())))
            self.lb[level] = np.array(
                [
                    self.bounds.within(level, k, passes) if k <= cap else np.nan
                    for k in range(1, self.m + 1)
                ],
                dtype=np.float64,
            )
        finally:
            self.bounds.cap = kept

    def _narrow(self, level):
        """Whether a probed level lies within ``_NARROW`` of ``level``."""
        return any(abs(x - level) <= _NARROW for x in self.lb)

    def bracket(self, k):
        """``(a, b)``: smallest known level passing ``k``, largest known level
        failing it below that one (None: only 1/2 is known to be below
        ``q(k)``).

        ``a < b`` always: were the computed ``LB`` to fall at the scale of
        its rounding between two levels (a failing level above a passing
        one), the bracket stays below the smallest passing level, so every
        narrowing step probes inside it and ends (with a monotone ``LB``,
        every failing level is below ``b``: the same bracket).
        """
        known = [
            (level, lb[k - 1])
            for level, lb in self.lb.items()
            if not np.isnan(lb[k - 1])
        ]
        passing = [level for level, value in known if value >= self.target]
        b = min(passing) if passing else None
        failing = [
            level
            for level, value in known
            if value < self.target and (b is None or level < b)
        ]
        return (max(failing) if failing else None), b

    def resolved(self, k):
        a, b = self.bracket(k)
        if b is None:
            return False
        return b == 0.5 or (a is not None and b == math.nextafter(a, 1.0))

    def infeasible(self, k):
        """``LB(1, k)`` fails: ``k`` has no plan."""
        return self.bracket(k)[0] == 1.0

    def _known_s(self, k, level, below):
        """``S(x, k)`` at the nearest level ``x`` at or below (above)
        ``level`` where ``S`` is known: a bound of ``S(level, k)``."""
        if below:
            x = max(x for x in self.s if x <= level)
        else:
            x = min(x for x in self.s if x >= level)
        return x, self.s[x][k - 1]

    def limits(self, k):
        """``(lower, upper)`` of ``S(k)``: ``S`` at levels at or below ``a_k``
        (1/2 if none) and at or above ``b_k`` (``S(k)`` itself if resolved;
        no upper end while no level is known to pass ``k``)."""
        a, b = self.bracket(k)
        if self.resolved(k):
            value = self.simulated(b)[k - 1]
            return value, value
        low = self._known_s(k, 0.5 if a is None else a, True)[1]
        return low, np.inf if b is None else self._known_s(k, b, False)[1]

    def guess(self, k):
        """A guess ``(x, S)`` of ``(q(k), S(k))`` (None without a failing
        level): linear interpolation of ``LB(., k)`` between the bracket's
        ends, of ``S(., k)`` between the nearest levels where it is known."""
        a, b = self.bracket(k)
        if a is None or b is None:
            return None
        fa, fb = self.lb[a][k - 1], self.lb[b][k - 1]
        x = a + (self.target - fa) / (fb - fa) * (b - a)
        (xa, sa), (xb, sb) = self._known_s(k, a, True), self._known_s(k, b, False)
        return x, sa + (x - xa) / (xb - xa) * (sb - sa) if xb > xa else sa

    # ------------------------------------------------------------------
    def resolve(self, k, width=0.0):
        """Narrow ``(a_k, b_k]`` to adjacent floats (or find ``q(k) = 1/2``);
        with ``width``, stop once ``b_k - a_k <= width``. A ``k`` no level
        passes is tried at level 1 first (its feasibility)."""
        a, b = self.bracket(k)
        if b is None:
            self.probe(1.0, k)
            a, b = self.bracket(k)
            if b is None:  # LB(1, k) fails: no plan for k
                return
        while a is None and b != 0.5:
            # No failing level yet: halve towards 1/2, then try 1/2.
            self.probe(self._lower_level(b), k)
            a, b = self.bracket(k)
        if b == 0.5:
            return
        fa = self.lb[a][k - 1] - self.target
        fb = self.lb[b][k - 1] - self.target
        side = 0
        while b - a > max(width, _SNAP_WIDTH):
            x = float(b - fb * (b - a) / (fb - fa)) if fb != fa else 0.5 * (a + b)
            if not a < x < b:  # an end at the crossing to the rounding
                break
            self.probe(x, k)
            fx = self.lb[x][k - 1] - self.target
            a, fa, b, fb, side = _tight._illinois_step(a, fa, b, fb, side, x, fx)
        if width <= 0.0 or b - a > max(width, _SNAP_WIDTH):  # (or it broke off)
            self._finish(k)

    def _finish(self, k):
        """From a narrow bracket (or one whose secant rounds to an end: that
        end is at the crossing to the rounding) to adjacent floats: the
        secant on the ends' own values (``LB`` is linear there up to its
        rounding), then the float on the other side of the secant's level,
        until a failing level and a passing one are adjacent."""
        a, b = self.bracket(k)
        while b != math.nextafter(a, 1.0):
            fa = self.lb[a][k - 1] - self.target
            fb = self.lb[b][k - 1] - self.target
            x = float(b - fb * (b - a) / (fb - fa)) if fb != fa else 0.5 * (a + b)
            x = min(max(x, math.nextafter(a, 1.0)), math.nextafter(b, 0.0))
            self.probe(x, k)
            if self.lb[x][k - 1] >= self.target:
                other = math.nextafter(x, 0.0)
            else:
                other = math.nextafter(x, 1.0)
            if a < other < b:
                self.probe(other, k)
            a, b = self.bracket(k)

    def _lower_level(self, b):
        """The next level tried below ``b`` when no level failing is known:
        ``1 - alpha`` first (most plans cross above it, and its rows serve
        the levels near it), then steps of 1/16 (a level far from the others
        brings new rows), then 1/2 itself."""
        if b > self.target + 2.0**-6 and self.target > 0.5:
            return self.target
        return 0.5 if b - 0.5 <= 2.0**-4 else b - 2.0**-4

    def exclusion_level(self, k, threshold, leader):
        """A level that should fail ``k`` with ``S(level, k) > threshold``
        (a guess), or None when ``k`` looks like a real contender.

        The window of such levels is ``(x_S, q(k))``, ``x_S`` where ``S(.,
        k)`` crosses ``threshold``. Above the leader (``k`` smaller, ``q(k)``
        larger) the windows of the ``k`` nearer the leader reach lower, so
        the probe sits low in ``k``'s window; below it, high: either way it
        falls in the windows of as many other ``k`` as it can.
        """
        a, b = self.bracket(k)
        if a is None:
            return self._lower_level(b) if b - 0.5 > 2.0**-4 else None
        x, s_x = self.guess(k)
        (xa, sa), (xb, sb) = self._known_s(k, a, True), self._known_s(k, b, False)
        if s_x <= threshold or sb <= sa:
            return None
        low = max(xa + (threshold - sa) / (sb - sa) * (xb - xa), a)  # S ~ threshold
        level = float(low + (0.3 if k < leader else 0.7) * (x - low))
        return level if a < level < b else None

    def contenders(self):
        """The ``k`` not known infeasible nor excluded (module docstring)."""
        below_cap = [k for k in self.ks if k <= self.bounds.cap]
        ks = np.array([k for k in below_cap if not self.infeasible(int(k))], dtype=int)
        if not ks.size:
            return ks, np.inf
        limits = np.array([self.limits(int(k)) for k in ks])
        threshold = limits[:, 1].min() + _TIE + 2 * _S_SLACK  # inf: none passes
        open_ = ks[limits[:, 0] <= threshold]
        if open_.size:
            # The k above the largest contender are excluded for good: their
            # lower ends bound S(k) whatever levels come later, so S(k) >
            # min S + 1e-9 (above). The search never asks their LB again,
            # and the DP drops their states (the plan is the rule's over any
            # set of contenders holding every k not so excluded: the same).
            self.bounds.cap = min(self.bounds.cap, int(open_.max()))
        return open_, threshold

    def run(self):
        """Resolve the contenders; returns them, every one resolved.

        The contender with the smallest guessed ``S`` is narrowed first (to
        ``_COARSE`` in level, then, if it is still the likeliest minimum, to
        adjacent floats); once it is resolved below every other guess, the
        others are excluded by aimed probes or resolved in turn.
        """
        while True:
            open_, threshold = self.contenders()
            todo = [int(k) for k in open_ if not self.resolved(int(k))]
            if not todo:
                return [int(k) for k in open_]
            if len(self.lb) >= _MAX_PROBES:
                self.resolve(todo[0])
                continue
            guesses = {k: self.guess(k) for k in todo}
            known = [k for k in todo if guesses[k] is not None]
            leader = min(known, key=lambda k: (guesses[k][1], k), default=None)
            bar = np.inf if leader is None else guesses[leader][1]
            # A k with no guess (no failing or no passing level yet) whose
            # lower end is below the leader's guess gets its levels first.
            unknown = [
                k for k in todo if guesses[k] is None and self.limits(k)[0] < bar
            ]
            if unknown:
                self.resolve(unknown[0], width=np.inf)
                continue
            if leader is None:  # every k without a guess is above every bar
                self.resolve(todo[0], width=np.inf)
                continue
            done = [int(k) for k in open_ if self.resolved(int(k))]
            best, best_k = min(
                ((self.limits(k)[1], k) for k in done), default=(np.inf, 0)
            )
            if guesses[leader][1] < best:
                a, b = self.bracket(leader)
                self.resolve(leader, width=0.0 if b - a <= _COARSE else _COARSE)
                for level in self.bracket(leader):  # its guess of S, sharper
                    self.simulated(level)
                continue
            # Every guess is above the best resolved plan: exclude the others
            # (the farthest first), or resolve them where aiming fails. (Only
            # the k with a guess: one without, its lower end at or above the
            # leader's guess, waits until the others are done, then is
            # resolved as the first todo without a leader; ranking it by its
            # missing guess raised a TypeError before session 9's H7.)
            k = max(known, key=lambda k: (guesses[k][1], k))
            level = self.exclusion_level(k, threshold, best_k)
            tries = self.tries.get(k, 0)
            if level is None or tries >= _EXCLUDE_TRIES or level in self.lb:
                self.resolve(k)
                continue
            self.tries[k] = tries + 1
            self.probe(level, k)
            self.simulated(level)  # the bound that may exclude k

    def level(self, k):
        """``q(k)`` of a resolved ``k``."""
        return self.bracket(k)[1]


def _choose(groups, bounds, ks, target, epsilon, n_bins, utility):
    """``(S, level, k, LB)`` of the plan (module docstring): the contenders
    resolved, then the smallest ``k`` within 1e-9 of their smallest ``S``."""
    counts_of = _tight._simulation_counts(groups, n_bins)

    def simulate(level):
        return _tight_prune._simulated_coverage_all_k(
            groups, level, epsilon, n_bins, utility, counts_of
        )

    search = _LevelSearch(bounds, target, simulate, ks)
    # A first level at 1 - alpha (most plans cross above it; the level 1,
    # whose composite rule settles slowly, is evaluated only for the k no
    # probed level passes: a k that passes a level passes at 1).
    search.probe(max(0.5, float(target)))
    search.simulated(max(0.5, float(target)))
    search.simulated(1.0)  # S(1, k) bounds S(k) above for every feasible k
    scored = []
    for k in search.run():
        q = search.level(k)
        expected = _tight._simulated_coverage(groups, q, k, epsilon, n_bins, utility)
        scored.append((expected, q, k, bounds(q, k)))
    if not scored:
        return None
    least = min(expected for expected, *_ in scored)
    return next(plan for plan in scored if plan[0] <= least + _TIE)


@lru_cache(maxsize=256)
def _dpqq_tight_search(sizes, alpha, epsilon, n_bins, utility="quantile"):
    """Plan of rule="tight": a guaranteed coverage of ``1 - alpha``, no more.

    Every client runs the mechanism at one common level ``q`` in [1/2, 1]
    (any real number: the level is a public parameter, not a rank) and the
    server keeps the ``k``-th smallest release. The guaranteed coverage
    ``LB(q, k)`` increases in ``q`` and in ``k``; for each feasible ``k``,
    ``q(k)`` is the smallest float level with ``LB >= 1 - alpha`` (every
    feasible ``k`` gives a plan with ``LB`` at ``1 - alpha``), and the plan
    is the ``k`` with the smallest expected coverage on public uniform
    scores (:func:`~._tight._simulated_coverage`; ties within 1e-9: the smaller
    ``k``). Only the ``k`` that can still be chosen are resolved
    (this module, whose docstring proves that this plan is never further
    from ``1 - alpha`` than the chained one,
    :func:`~._tight._dpqq_tight_search_chained`).
    """
    groups = tuple(sorted(Counter(sizes).items()))
    target = 1.0 - alpha + _tight._BOUND_MARGIN
    bounds = _tight._TightBounds(groups, epsilon, n_bins, utility)
    ks = range(1, len(sizes) + 1)
    best = _choose(groups, bounds, ks, target, epsilon, n_bins, utility)
    return _tight._tight_plan_items(sizes, alpha, epsilon, n_bins, utility, best)
