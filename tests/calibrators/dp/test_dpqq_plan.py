"""The dp-qq plan: shortcuts that must not change it, and the per-step memo."""

import math

import numpy as np
import pytest

from skfedcp.calibrators import PrivateQuantileOfQuantilesCalibrator
from skfedcp.calibrators._dp import _plan
from skfedcp.calibrators._dp import _qq as _dpqq
from skfedcp.calibrators._qq._selection import select_qq_ranks
from skfedcp.privacy import dp_qq_local_correction


def _reference_search(sizes, alpha, epsilon, n_bins):
    """The gamma search of the spec (section 2.11) with no shortcut at all."""
    m = len(sizes)
    rule = "auto" if len(set(sizes)) == 1 else "fixed"
    best = None
    for g in _plan.GAMMA_GRID:
        target_alpha = alpha * (1.0 - g) / (1.0 - g * alpha)
        sel = select_qq_ranks(sizes, target_alpha, local_rank=rule)
        if not sel.feasible:
            continue
        correction = dp_qq_local_correction(epsilon, n_bins, g, alpha, m)
        ranks = tuple(r + correction for r in sel.local_ranks)
        if sum(r <= n for r, n in zip(ranks, sizes, strict=True)) < sel.k:
            continue
        score = _plan._qq_score(sizes, ranks, sel.k)
        if best is None or score < best[0] - 1e-10:
            best = (score, g, sel, correction)
    return best


def _clear():
    _plan._dpqq_gamma_search.cache_clear()
    _plan._PLAN_MEMO._entries = {}


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

    monkeypatch.setattr(_plan, "select_qq_ranks", forbidden)
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
            _dpqq, "_dpqq_plan", lambda *a, **k: calls.append(a) or first
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
    search = _plan._dpqq_plan

    def counting(*args, **kwargs):
        calls.append(args[0])
        return search(*args, **kwargs)

    monkeypatch.setattr(_dpqq, "_dpqq_plan", counting)
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


# --------------------------------------------------------------------------
# The simulation: one plan, vectorised releases, bit-identical to client_step


def _client_by_client(cal, scores, ids, alpha, seed):
    """What every client's own ``client_step`` sends, with fit's streams."""
    from skfedcp.federated import ClientPartition
    from skfedcp.utils._random import spawn_random_states

    part = ClientPartition(ids, scores.shape[0])
    streams = spawn_random_states(seed, part.n_clients + 1)[1:]
    return [
        cal.client_step(g, alpha=alpha, n_per_client=part.sizes, random_state=s)[
            "quantile"
        ]
        for g, s in zip(part.split(scores), streams, strict=True)
    ]


@pytest.mark.filterwarnings("ignore::skfedcp.exceptions.ClippedScoresWarning")
@pytest.mark.filterwarnings("ignore::skfedcp.exceptions.InfiniteThresholdWarning")
@pytest.mark.parametrize(
    "sizes, epsilon, rule, n_bins",
    [
        ([200] * 5, 10.0, "paper", 100),
        ([200] * 5, 5.0, "tight", 100),
        ([40, 50, 60, 50], 20.0, "paper", 100),
        ([2, 40, 40, 40], 50.0, "paper", 100),  # the small client sends +inf
        ([30] * 4, 5.0, "paper", 7),
        ([30] * 4, 0.5, "paper", 100),  # infeasible: every client sends +inf
        ([60] * 6, 8.0, "paper", 3),  # few bins: the top bin is often drawn
    ],
)
def test_simulation_is_client_step_bit_for_bit(sizes, epsilon, rule, n_bins):
    rng = np.random.default_rng(len(sizes) + int(epsilon))
    sizes = np.asarray(sizes)
    # Scores slightly outside the bounds (clipped) and rows in shuffled order.
    scores = rng.uniform(-0.01, 1.005, size=int(sizes.sum()))
    ids = rng.permutation(np.repeat(np.arange(sizes.shape[0]), sizes))
    cal = PrivateQuantileOfQuantilesCalibrator(
        epsilon=epsilon, score_bounds=(0, 1), rule=rule, n_bins=n_bins
    )
    cal.fit(scores, ids, alpha=0.1, random_state=7)
    expected = _client_by_client(cal, scores, ids, 0.1, 7)
    np.testing.assert_array_equal(cal.messages_["quantile"], expected)


@pytest.mark.filterwarnings("ignore::skfedcp.exceptions.InfiniteThresholdWarning")
def test_simulation_searches_the_plan_once_and_ignores_n_jobs(monkeypatch):
    # n_jobs made dp-qq slower: every joblib worker searched the plan again.
    import skfedcp.calibrators._base as base

    def forbidden(*args, **kwargs):
        raise AssertionError("the simulation must not start joblib workers")

    monkeypatch.setattr(base, "Parallel", forbidden)
    _clear()
    calls = []
    search = _plan._dpqq_gamma_search.__wrapped__

    def counting(*args):
        calls.append(args)
        return search(*args)

    monkeypatch.setattr(_plan, "_dpqq_gamma_search", counting)
    rng = np.random.default_rng(0)
    sizes = np.r_[np.full(30, 40), np.full(20, 55)]
    scores = rng.uniform(size=int(sizes.sum()))
    ids = np.repeat(np.arange(sizes.shape[0]), sizes)
    cal = PrivateQuantileOfQuantilesCalibrator(epsilon=20.0, score_bounds=(0, 1))
    one = cal.fit(scores, ids, alpha=0.1, random_state=1, n_jobs=1).threshold_
    assert len(calls) == 1  # then the memo serves the server's lookups
    two = cal.fit(scores, ids, alpha=0.1, random_state=1, n_jobs=2).threshold_
    assert one == two


# --------------------------------------------------------------------------
# Unequal sizes: batched exact coverage, certified decisions


@pytest.mark.parametrize(
    "sizes, ranks, k",
    [
        ((40, 50, 60), (38, 47, 57), 2),
        ((5, 10, 20, 40, 15, 8, 30, 12), (5, 10, 19, 37, 15, 8, 28, 12), 3),
        ((2, 40, 40, 40), (3, 39, 39, 39), 2),  # an inactive client
        ((30, 31, 33, 35), (29, 30, 32, 34), 4),
        ((3, 4), (5, 5), 1),  # nobody sends a finite value: M = 1
    ],
)
def test_batched_score_matches_the_quad_value(sizes, ranks, k):
    from skfedcp.calibrators._qq._coverage import (
        qq_coverage_unequal,
        qq_coverage_unequal_fraction,
    )

    value = _plan._qq_score(sizes, ranks, k)
    assert value == pytest.approx(qq_coverage_unequal(sizes, ranks, k), abs=1e-13)
    if sum(sizes) <= 200:  # and with the exact rational value
        exact = float(qq_coverage_unequal_fraction(sizes, ranks, k))
        assert value == pytest.approx(exact, abs=1e-13)


@pytest.mark.parametrize(
    "sizes, alpha, epsilon, n_bins",
    [
        ([40, 50, 60], 0.1, 20.0, 100),
        ([2, 40, 40, 40], 0.1, 50.0, 100),
        ([30, 31, 33, 35], 0.2, 10.0, 20),
        ([150, 180, 200, 230, 250, 170], 0.1, 5.0, 100),
        ([59, 60, 61, 60, 61, 59, 60, 60, 61, 60], 0.1, 10.0, 100),
    ],
)
def test_unequal_plan_is_the_one_of_quad_scores(
    sizes, alpha, epsilon, n_bins, monkeypatch
):
    # The batched scores give the plan that the adaptive-quadrature scores
    # (the previous implementation) give: same gamma, ranks, k, levels.
    cal = PrivateQuantileOfQuantilesCalibrator(
        epsilon=epsilon, score_bounds=(0, 1), n_bins=n_bins
    )
    _clear()
    fast = cal.plan(list(sizes), alpha)
    _clear()
    monkeypatch.setattr(_plan, "_qq_score", _plan._qq_score_quad)
    slow = cal.plan(list(sizes), alpha)
    assert fast["feasible"] == slow["feasible"]
    if fast["feasible"]:
        for key in ("gamma", "k", "correction"):
            assert fast[key] == slow[key]
        assert fast["local_ranks"].tolist() == slow["local_ranks"].tolist()
        assert fast["levels"].tolist() == slow["levels"].tolist()
        assert fast["score"] == pytest.approx(slow["score"], abs=1e-13)


def test_near_ties_are_decided_with_the_quad_values(monkeypatch):
    sizes, ranks, k = (40, 50, 60), (38, 47, 57), 2
    other = (39, 48, 58)
    quad = _plan._qq_score_quad(sizes, ranks, k)
    quad_other = _plan._qq_score_quad(sizes, other, k)
    best = (quad_other, 0.5, select_qq_ranks(sizes, 0.1, local_rank="fixed"), 0, other)
    k_best = best[2].k
    # A batched value that sits on the tie line is not trusted: the decision
    # is the one of the quad values (whatever the batched value says).
    on_the_line = best[0] - _plan._TIE
    expected = quad < _plan._qq_score_quad(sizes, other, k_best) - _plan._TIE
    assert _plan._beats(sizes, on_the_line, ranks, k, best) is expected
    assert _plan._beats(sizes, on_the_line + 5e-13, ranks, k, best) is expected
    # Far from the line, the batched value decides alone.
    calls = []
    monkeypatch.setattr(_plan, "_qq_score_quad", lambda *a: calls.append(a) or quad)
    assert _plan._beats(sizes, best[0] - 1e-9, ranks, k, best)
    assert not _plan._beats(sizes, best[0], ranks, k, best)
    assert calls == []


@pytest.mark.parametrize(
    "sizes, ranks, shift, k",
    [
        ((40, 50, 60), (36, 45, 54), 3, 2),
        ((20, 25, 30, 35, 40, 45), (18, 22, 27, 31, 36, 40), 2, 3),
        ((100, 120, 150, 180), (90, 108, 135, 162), 6, 1),
        ((100, 120, 150, 180), (90, 108, 135, 162), 6, 4),
    ],
)
def test_min_shift_gain_bounds_the_score_increase(sizes, ranks, shift, k):
    # The pruning bound of the gamma search: M(l + c, k) >= M(l, k) + gain,
    # with gain <= E[min_j Beta(c, n_j + 1 - c)] (computed here by quad).
    from scipy import integrate, special

    from skfedcp.calibrators._qq._coverage import qq_coverage_unequal

    counts = tuple(sorted((n, sizes.count(n)) for n in set(sizes)))
    gain = _plan._min_shift_gain(counts, shift)
    expected, _ = integrate.quad(
        lambda x: np.prod(
            [1 - special.betainc(shift, n + 1 - shift, x) for n in sizes]
        ),
        0,
        1,
        epsabs=1e-13,
    )
    assert 0 < gain <= expected
    assert gain >= 0.95 * expected  # a useful bound, not just a valid one
    before = qq_coverage_unequal(sizes, ranks, k)
    after = qq_coverage_unequal(sizes, tuple(r + shift for r in ranks), k)
    assert after >= before + gain - 1e-12


@pytest.mark.parametrize(
    "sizes, ranks",
    [
        ((40, 50, 60), (36, 45, 54)),
        ((20, 25, 30, 35, 40, 45), (18, 22, 27, 31, 36, 40)),
        ((100, 120, 150, 180), (95, 110, 140, 170)),
    ],
)
def test_riemann_brackets_contain_the_exact_coverage(sizes, ranks):
    # The second pruning bound of the gamma search: every k's bracket holds
    # the exact M (rational arithmetic) and is narrow enough to prune.
    from collections import Counter

    from skfedcp.calibrators._qq._coverage import qq_coverage_unequal_fraction

    groups = sorted(Counter(zip(sizes, ranks, strict=True)).items())
    lower, upper = _plan._riemann_brackets(groups)
    for k in range(1, len(sizes) + 1):
        exact = float(qq_coverage_unequal_fraction(sizes, ranks, k))
        assert lower[k - 1] <= exact <= upper[k - 1]
        assert upper[k - 1] - lower[k - 1] < 5e-3


def test_score_lower_bound_is_below_the_score():
    sizes = (40, 50, 60, 45, 55)
    counts = tuple(sorted(Counter_(sizes).items()))
    checked = []
    for gamma in (0.02, 0.1, 0.3):
        alpha = 0.1
        target_alpha = alpha * (1 - gamma) / (1 - gamma * alpha)
        tau = 1 - target_alpha
        sel = select_qq_ranks(sizes, target_alpha, local_rank="fixed")
        fixed = dict(zip(sizes, sel.local_ranks, strict=True))
        for correction in (1, 2, 3):
            ranks = tuple(r + correction for r in sel.local_ranks)
            if any(r > n for r, n in zip(ranks, sizes, strict=True)):
                continue  # the search bounds only all-active candidates
            checked.append(ranks)
            score = _plan._qq_score(sizes, ranks, sel.k)
            bound = _plan._score_lower_bound(counts, fixed, correction, tau)
            assert bound <= score
            assert bound >= score - 5e-3
    assert len(checked) >= 5


def Counter_(values):
    from collections import Counter

    return Counter(values)


def test_tight_plan_rows_window_follows_the_ranks_asked_not_the_client_size():
    # The tight engine's per-size rows are a window over the ranks the rank
    # law asks for (near q n), never a dense (n + 2, nodes) matrix: 20 clients
    # of 10^5 rows asked numpy for 24 GiB. A small plan shows the window.
    from skfedcp.calibrators._dp._tight import _TightBounds

    bounds = _TightBounds(((300, 4),), 1.0, 100, "quantile")
    bounds(0.9, 3)
    [(first, matrix, done)] = bounds._rows[0][300]  # one window of rows
    assert done.any()
    assert matrix.shape[0] < 300 + 2  # only the asked ranks' span
    assert first > 0


def _random_profiles(seed, count, clients=(30, 40, 60), epsilons=(0.5, 1.0, 5.0)):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        m = int(rng.choice(clients))
        low, high = [(10, 1000), (20, 400), (10, 200)][rng.integers(3)]
        sizes = tuple(int(x) for x in rng.integers(low, high + 1, size=m))
        alpha = float(rng.choice([0.05, 0.1, 0.2]))
        epsilon = float(rng.choice(epsilons))
        yield sizes, alpha, epsilon, int(rng.choice([50, 100, 1000]))


def _unpruned_search(monkeypatch, *args):
    """The gamma search with the packed bound switched off (the old search)."""
    _plan._dpqq_gamma_search.cache_clear()
    with monkeypatch.context() as patch:
        patch.setattr(_plan, "_BOUND_MIN_DISTINCT", math.inf)
        plan = _plan._dpqq_gamma_search(*args)
    _plan._dpqq_gamma_search.cache_clear()
    return plan


@pytest.mark.parametrize("seed", [0, 1])
def test_packed_bound_keeps_the_gamma_search_bit_identical(seed, monkeypatch):
    # A gamma skipped by the packed bound could not have beaten the best so
    # far: the plan (gamma, ranks, k, levels, score) is the search's without
    # the bound, bit for bit (benchmarks: 220 profiles against main too).
    for sizes, alpha, epsilon, n_bins in _random_profiles(seed, 4):
        args = (sizes, alpha, epsilon, n_bins, "auto")
        assert _plan._dpqq_gamma_search(*args) == _unpruned_search(monkeypatch, *args)


@pytest.mark.slow
def test_packed_bound_keeps_the_gamma_search_bit_identical_many(monkeypatch):
    for sizes, alpha, epsilon, n_bins in _random_profiles(7, 200, (30, 60, 100)):
        args = (sizes, alpha, epsilon, n_bins, "auto")
        assert _plan._dpqq_gamma_search(*args) == _unpruned_search(monkeypatch, *args)


def test_packed_score_bound_is_below_the_score():
    # The bound of one gamma (some clients turn to +inf) never exceeds the
    # score that the search would compute for it, and is tight enough to
    # prune (within 5e-3 here, where the scores of gammas differ by 1e-2).
    from collections import Counter

    from skfedcp.utils._quantile import conformal_rank

    checked = 0
    for sizes, alpha, epsilon, n_bins in _random_profiles(3, 8, (40, 100), (2.0, 5.0)):
        counts = tuple(sorted(Counter(sizes).items()))
        for gamma in (0.05, 0.2, 0.5):
            correction = dp_qq_local_correction(
                epsilon, n_bins, gamma, alpha, len(sizes)
            )
            tau = (1.0 - alpha) / (1.0 - gamma * alpha)
            target_alpha = alpha * (1.0 - gamma) / (1.0 - gamma * alpha)
            fixed = {n: conformal_rank(n, target_alpha) for n, _ in counts}
            bound = _plan._packed_score_bound(counts, fixed, correction, tau)
            sel = select_qq_ranks(sizes, target_alpha, local_rank="fixed")
            if not sel.feasible:
                assert bound == math.inf or bound == -math.inf or bound <= 1.0
                continue
            ranks = tuple(r + correction for r in sel.local_ranks)
            if sum(r <= n for r, n in zip(ranks, sizes, strict=True)) < sel.k:
                continue  # the search skips this gamma whatever the bound
            score = _plan._qq_score(sizes, ranks, sel.k)
            assert bound <= score
            if bound > -math.inf:
                checked += 1
                assert bound >= score - 5e-3
    assert checked >= 12


def test_block_bound_is_below_every_score_of_the_block():
    # One bound for the gammas of one l_cor between two levels: below the
    # score of each (their ranks lie between the block's first and last).
    from collections import Counter

    from skfedcp.utils._quantile import conformal_rank

    checked = 0
    for sizes, alpha, epsilon, n_bins in _random_profiles(5, 6, (40, 100), (2.0, 5.0)):
        m, counts = len(sizes), tuple(sorted(Counter(sizes).items()))
        grid = [g for g in _plan.GAMMA_GRID if g <= 0.6]
        corr = {g: dp_qq_local_correction(epsilon, n_bins, g, alpha, m) for g in grid}
        for first, last in zip(grid, grid[5:], strict=False):
            if corr[first] != corr[last]:
                continue
            ta = {g: alpha * (1 - g) / (1 - g * alpha) for g in (first, last)}
            fixed, top = (
                {n: conformal_rank(n, ta[g]) for n, _ in counts} for g in (first, last)
            )
            tau = (1.0 - alpha) / (1.0 - first * alpha)
            bound = _plan._packed_score_bound(counts, fixed, corr[first], tau, top=top)
            for g in grid[grid.index(first) : grid.index(last) + 1]:
                target_alpha = alpha * (1 - g) / (1 - g * alpha)
                sel = select_qq_ranks(sizes, target_alpha, local_rank="fixed")
                if not sel.feasible:
                    continue
                ranks = tuple(r + corr[g] for r in sel.local_ranks)
                if sum(r <= n for r, n in zip(ranks, sizes, strict=True)) < sel.k:
                    continue
                assert bound <= _plan._qq_score(sizes, ranks, sel.k)
                checked += bound > -math.inf
            break  # one block per profile
    assert checked >= 10
