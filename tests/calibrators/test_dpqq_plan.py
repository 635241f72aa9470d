"""The dp-qq plan: shortcuts that must not change it, and the per-step memo."""

import math

import numpy as np
import pytest

from skfedcp.calibrators import PrivateQuantileOfQuantilesCalibrator, _private
from skfedcp.calibrators._qq_selection import select_qq_ranks
from skfedcp.privacy import dp_qq_local_correction


def _reference_search(sizes, alpha, epsilon, n_bins):
    """The gamma search of the spec (section 2.11) with no shortcut at all."""
    m = len(sizes)
    rule = "auto" if len(set(sizes)) == 1 else "fixed"
    best = None
    for g in _private.GAMMA_GRID:
        target_alpha = alpha * (1.0 - g) / (1.0 - g * alpha)
        sel = select_qq_ranks(sizes, target_alpha, local_rank=rule)
        if not sel.feasible:
            continue
        correction = dp_qq_local_correction(epsilon, n_bins, g, alpha, m)
        ranks = tuple(r + correction for r in sel.local_ranks)
        if sum(r <= n for r, n in zip(ranks, sizes, strict=True)) < sel.k:
            continue
        score = _private._qq_score(sizes, ranks, sel.k)
        if best is None or score < best[0] - 1e-10:
            best = (score, g, sel, correction)
    return best


def _clear():
    _private._dpqq_gamma_search.cache_clear()
    _private._PLAN_MEMO._entries = {}


@pytest.mark.parametrize(
    "sizes, alpha, epsilon, n_bins",
    [
        ([200] * 5, 0.1, 10.0, 100),
        ([200] * 5, 0.1, 5.0, 100),
        ([200] * 5, 0.1, 1.0, 100),
        ([60] * 10, 0.1, 5.0, 100),
        ([50, 50], 0.1, 1.0, 100),
        ([6, 6], 0.5, 50.0, 3),
        ([100] * 3, 0.2, 5.0, 8),
        ([40, 50, 60], 0.1, 20.0, 100),
        ([2, 40, 40, 40], 0.1, 50.0, 100),
        ([30, 31, 33, 35], 0.2, 10.0, 20),
    ],
)
def test_shortcuts_keep_the_plan(sizes, alpha, epsilon, n_bins):
    _clear()
    plan = PrivateQuantileOfQuantilesCalibrator(
        epsilon=epsilon, score_bounds=(0, 1), n_bins=n_bins
    ).plan(sizes, alpha)
    best = _reference_search(tuple(sizes), alpha, epsilon, n_bins)
    if best is None:
        assert not plan["feasible"]
        assert "no gamma is feasible" in plan["reason"]
        return
    score, g, sel, correction = best
    assert plan["feasible"]
    assert (plan["gamma"], plan["k"], plan["correction"]) == (g, sel.k, correction)
    assert plan["local_ranks"].tolist() == list(sel.local_ranks)
    assert plan["score"] == score
    assert plan["coverage_lower"] == (1.0 - g * alpha) * sel.coverage


def test_infeasible_plan_is_found_before_any_rank_selection(monkeypatch):
    # 10,000 clients of 5 rows at epsilon = 5: l_cor >= 7 > 5 for every gamma.
    _clear()

    def forbidden(*args, **kwargs):
        raise AssertionError("select_qq_ranks was called")

    monkeypatch.setattr(_private, "select_qq_ranks", forbidden)
    cal = PrivateQuantileOfQuantilesCalibrator(epsilon=5.0, score_bounds=(0, 1))
    plan = cal.plan(np.full(10_000, 5), 0.1)
    assert not plan["feasible"]
    assert "no gamma is feasible" in plan["reason"]


class TestPlanMemo:
    def test_same_array_is_served_from_the_memo(self, monkeypatch):
        _clear()
        cal = PrivateQuantileOfQuantilesCalibrator(epsilon=10.0, score_bounds=(0, 1))
        sizes = np.full(5, 200)
        first = cal.plan(sizes, 0.1)
        calls = []
        monkeypatch.setattr(
            _private, "_dpqq_plan", lambda *a, **k: calls.append(a) or first
        )
        second = cal.plan(sizes, 0.1)
        assert calls == []
        assert second["k"] == first["k"]
        # Callers get fresh arrays: modifying one plan leaves the memo intact.
        second["levels"][:] = 0.0
        assert (cal.plan(sizes, 0.1)["levels"] > 0.5).all()

    def test_a_mutated_array_gets_a_new_plan(self):
        _clear()
        cal = PrivateQuantileOfQuantilesCalibrator(epsilon=10.0, score_bounds=(0, 1))
        sizes = np.full(5, 200)
        before = cal.plan(sizes, 0.1)
        sizes[:] = 400  # the same object, new content
        after = cal.plan(sizes, 0.1)
        fresh = cal.plan([400] * 5, 0.1)
        assert after["local_ranks"].tolist() == fresh["local_ranks"].tolist()
        assert after["levels"].tolist() == fresh["levels"].tolist()
        assert after["local_ranks"].tolist() != before["local_ranks"].tolist()

    def test_other_parameters_miss_the_memo(self):
        _clear()
        sizes = np.full(5, 200)
        a = PrivateQuantileOfQuantilesCalibrator(epsilon=10.0, score_bounds=(0, 1))
        b = PrivateQuantileOfQuantilesCalibrator(epsilon=5.0, score_bounds=(0, 1))
        assert a.plan(sizes, 0.1)["correction"] == 3
        assert b.plan(sizes, 0.1)["correction"] == 5
        assert a.plan(sizes, 0.1)["rule"] == "paper"
        assert a.set_params(rule="tight").plan(sizes, 0.1)["rule"] == "tight"

    @pytest.mark.parametrize(
        "bad, message",
        [
            ([], "at least one client"),
            ([[200, 200]], "at least one client"),
            ([200.5, 200], "non-negative integers"),
            ([200, -1], "non-negative integers"),
        ],
    )
    def test_validation(self, bad, message):
        cal = PrivateQuantileOfQuantilesCalibrator(epsilon=10.0, score_bounds=(0, 1))
        with pytest.raises(ValueError, match=message):
            cal.plan(np.asarray(bad), 0.1)


def test_fit_calls_the_plan_search_once_for_many_clients(monkeypatch):
    # Every client step asks for the plan; the search itself runs once and
    # the lookups are one vectorised comparison each (no O(m) Python loop).
    _clear()
    calls = []
    search = _private._dpqq_plan

    def counting(*args, **kwargs):
        calls.append(args[0])
        return search(*args, **kwargs)

    monkeypatch.setattr(_private, "_dpqq_plan", counting)
    rng = np.random.default_rng(0)
    m, n = 300, 40
    cal = PrivateQuantileOfQuantilesCalibrator(epsilon=20.0, score_bounds=(0, 1))
    cal.fit(
        rng.uniform(size=m * n), np.repeat(np.arange(m), n), alpha=0.1, random_state=0
    )
    assert cal.calibration_info_["feasible"]
    # fit's own plan calls (server, calibration_info_) may pass other arrays.
    assert 1 <= len(calls) <= 3
    assert not math.isinf(cal.threshold_)
