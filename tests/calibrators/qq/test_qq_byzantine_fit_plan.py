"""A Byzantine fit's plan (ranks, k, certified bound; the rest read later).

With ``n_byzantine > 0`` and ranks from a rule (unequal sizes, ``"fixed"`` or
an int), a fit computes the ranks, ``k`` and the certified lower bound only
(``byzantine_fit_plan``); the all-honest coverage and the upper bound are
computed when ``calibration_info_`` or ``coverage_bounds_`` is read, from
the full selection: the same bits as :meth:`plan`'s, also through pickling.
"""

import pickle

import numpy as np
import pytest
from _byzantine_caches import clear_byzantine_caches

from skfedcp.calibrators import QuantileOfQuantilesCalibrator, select_byzantine_ranks
from skfedcp.calibrators._qq import _byzantine as _byz
from skfedcp.calibrators._qq import _calibrator

_clear_caches = clear_byzantine_caches


def _fit(sizes, alpha, c, rule="paper", clip=False, seed=0):
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(len(sizes)), sizes)
    cal = QuantileOfQuantilesCalibrator(
        n_byzantine=c, local_rank=rule, clip_local_rank=clip
    )
    return cal.fit(rng.random(int(np.sum(sizes))), ids, alpha=alpha)


def _bits(*values):
    return tuple(float(v).hex() for v in values)


PROFILES = [
    (tuple(np.random.default_rng(1).integers(10, 400, 30).tolist()), 0.1, 2, "paper"),
    (tuple(np.random.default_rng(2).integers(10, 1001, 60).tolist()), 0.1, 3, "fixed"),
    (tuple(np.random.default_rng(3).integers(5, 60, 25).tolist()), 0.2, 1, "paper"),
    ((40,) * 20, 0.1, 2, "fixed"),  # equal sizes, A.1's ranks: a rule too
    (tuple(np.random.default_rng(4).integers(10, 200, 20).tolist()), 0.1, 2, 150),
]


@pytest.mark.parametrize("sizes,alpha,c,rule", PROFILES)
def test_lazy_reports_are_the_plans_bits(sizes, alpha, c, rule):
    _clear_caches()
    cal = _fit(sizes, alpha, c, rule)
    stored = cal.__dict__["calibration_info_"]
    if not stored["feasible"]:  # pragma: no cover (the profiles are feasible)
        pytest.skip("infeasible profile")
    # The fit computed neither the upper bound nor the all-honest coverage.
    assert _calibrator._cached_selection.cache_info().currsize == 0
    assert _byz._select_cached.cache_info().currsize == 0
    assert isinstance(stored["coverage"], _calibrator._LazyCoverage)
    assert isinstance(stored["coverage_upper"], _calibrator._LazyCoverage)
    assert isinstance(cal.__dict__["coverage_bounds_"], _calibrator._LazyCoverage)
    assert isinstance(stored["coverage_lower"], float)
    assert cal.max_byzantine() >= c  # reads no lazy value
    assert isinstance(stored["coverage"], _calibrator._LazyCoverage)
    before = pickle.loads(pickle.dumps(cal))  # pickled before any read
    plan = QuantileOfQuantilesCalibrator(n_byzantine=c, local_rank=rule).plan(
        sizes, alpha
    )
    expected = _bits(plan["coverage"], plan["coverage_lower"], plan["coverage_upper"])
    for fitted in (cal, before):
        info = fitted.calibration_info_
        assert info["local_ranks"].tolist() == plan["local_ranks"].tolist()
        assert info["k"] == plan["k"]
        got = _bits(info["coverage"], info["coverage_lower"], info["coverage_upper"])
        assert got == expected
        assert _bits(*fitted.coverage_bounds_) == expected[1:]
    assert isinstance(stored["coverage"], float)  # kept once read
    after = pickle.loads(pickle.dumps(cal))  # pickled after the read
    assert _bits(*after.coverage_bounds_) == expected[1:]
    assert after.calibration_info_["coverage"] == plan["coverage"]


def test_bounds_read_first():
    # coverage_bounds_ read before calibration_info_: the same bits.
    sizes = PROFILES[0][0]
    _clear_caches()
    cal = _fit(sizes, 0.1, 2)
    bounds = cal.coverage_bounds_
    sel = select_byzantine_ranks(sizes, 0.1, 2)
    assert _bits(*bounds) == _bits(sel.lower, sel.upper)
    assert cal.calibration_info_["coverage"] == sel.coverage
    assert cal.calibration_info_["coverage_upper"] == sel.upper


def test_fit_plan_is_the_selection_without_its_reports():
    rng = np.random.default_rng(11)
    for _ in range(12):
        sizes = tuple(rng.integers(5, 300, int(rng.integers(6, 40))).tolist())
        alpha = float(rng.choice([0.05, 0.1, 0.2]))
        c = int(rng.integers(1, max(2, len(sizes) // 6)))
        rule = str(rng.choice(["paper", "fixed"]))
        clip = bool(rule == "fixed" and rng.random() < 0.3)
        fast = _byz.byzantine_fit_plan(
            sizes, alpha, c, local_rank=rule, clip_local_rank=clip
        )
        full = select_byzantine_ranks(
            sizes, alpha, c, local_rank=rule, clip_local_rank=clip
        )
        if isinstance(fast, _byz.ByzantinePlan):
            assert fast.feasible and full.feasible
            assert (fast.local_ranks, fast.k) == (full.local_ranks, full.k)
            assert float(fast.lower).hex() == float(full.lower).hex()
        else:  # infeasible: the full selection itself
            assert fast == full and not fast.feasible


def test_equal_sizes_search_is_eager():
    # Equal sizes with the searched l: the full selection, coverage at once.
    _clear_caches()
    cal = _fit((30,) * 12, 0.1, 1)
    stored = cal.__dict__["calibration_info_"]
    assert isinstance(stored["coverage"], float)
    assert isinstance(stored["coverage_upper"], float)
    sel = select_byzantine_ranks((30,) * 12, 0.1, 1)
    assert cal.coverage_bounds_ == (sel.lower, sel.upper)


def test_zero_byzantine_does_not_take_this_path(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("byzantine_fit_plan called with n_byzantine=0")

    monkeypatch.setattr(_calibrator, "byzantine_fit_plan", refuse)
    _clear_caches()
    sizes = PROFILES[1][0]
    cal = _fit(sizes, 0.1, 0)
    assert "coverage_upper" not in cal.calibration_info_
    value = cal.calibration_info_["coverage"]
    assert cal.coverage_bounds_ == (value, value)


def test_conditional_with_byzantine_still_refused():
    cal = QuantileOfQuantilesCalibrator(n_byzantine=1, conditional=True)
    with pytest.raises(ValueError, match="n_byzantine > 0 certifies"):
        cal.fit(np.arange(40.0), np.repeat(np.arange(4), 10), alpha=0.1)
