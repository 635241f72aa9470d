"""The level search of local_rank="auto" (_levels.py) against the joint search.

Between the joint tier and A.1, "auto" looks for the first valid level of the
k near A.1's. ``_levels._level_search`` finds those breakpoints from laws on
one node set (one tree per predicted crossing); ``_joint._first_feasible``,
the search it replaces, still runs when it does not fit and with
``_joint._FAST_LEVELS = False``. Both must return the same pair, bit for bit
(the same breakpoints, the same accurate values of the candidates).
"""

import numpy as np
import pytest

from skfedcp.calibrators._qq import _joint, _levels
from skfedcp.calibrators._qq import _selection as _qq_selection
from skfedcp.calibrators._qq._selection import select_qq_ranks


def _profile(seed):
    rng = np.random.default_rng([21, seed])
    family = seed % 4
    if family == 0:  # the benchmarks' family, in the level tier
        sizes = rng.integers(10, 1001, size=int(rng.integers(25, 110)))
    elif family == 1:  # small clients
        sizes = rng.integers(5, 80, size=int(rng.integers(30, 120)))
    elif family == 2:  # a few distinct sizes, many clients
        sizes = rng.choice([20, 50, 200, 1000], size=int(rng.integers(120, 300)))
    else:  # heavy tail
        sizes = np.ceil(10 * rng.pareto(1.2, size=int(rng.integers(30, 100))) + 5)
    alpha = float(rng.choice([0.05, 0.1, 0.2]))
    return tuple(int(n) for n in sizes), alpha, bool(seed % 5 == 0)


def _level_pair(sizes, alpha, clip):
    fixed = select_qq_ranks(sizes, alpha, local_rank="fixed", clip_local_rank=clip)
    m = len(sizes)
    k_a1 = fixed.k if fixed.feasible else m
    ks = list(range(max(1, k_a1 - 4), min(m, k_a1 + 4) + 1))
    return _joint._select_joint(sizes, alpha, clip, only_k=ks)


@pytest.mark.parametrize("seed", range(12))
def test_level_search_matches_the_joint_search(seed, monkeypatch):
    sizes, alpha, clip = _profile(seed)
    fast = _level_pair(sizes, alpha, clip)
    monkeypatch.setattr(_joint, "_FAST_LEVELS", False)
    reference = _level_pair(sizes, alpha, clip)
    assert fast == reference


def test_level_search_runs_on_the_benchmark_profile(monkeypatch):
    # 100 clients of 10-1,000 rows: the fast search settles every k (no
    # fallback), with one tree per k or so and no accurate decision.
    calls = {"fallback": 0, "trees": 0}
    first_feasible = _joint._first_feasible
    window = _levels._LevelLaws.window

    def counted_fallback(*args, **kwargs):
        calls["fallback"] += 1
        return first_feasible(*args, **kwargs)

    def counted_window(self, *args):
        calls["trees"] += 1
        return window(self, *args)

    monkeypatch.setattr(_joint, "_first_feasible", counted_fallback)
    monkeypatch.setattr(_levels._LevelLaws, "window", counted_window)
    sizes = tuple(np.random.default_rng(1).integers(10, 1001, size=100).tolist())
    _level_pair(sizes, 0.1, False)
    assert calls["fallback"] == 0
    assert calls["trees"] <= 20


def test_auto_plan_is_the_same_without_the_level_search(monkeypatch):
    sizes = tuple(np.random.default_rng(5).integers(10, 1001, size=60).tolist())
    select_qq_ranks.cache_clear()
    try:
        fast = select_qq_ranks(sizes, 0.1)
        monkeypatch.setattr(_joint, "_FAST_LEVELS", False)
        select_qq_ranks.cache_clear()
        assert select_qq_ranks(sizes, 0.1) == fast
        assert _qq_selection._LEVEL_MAX_WORK >= 60 * len(set(sizes)) > 400
    finally:
        select_qq_ranks.cache_clear()
