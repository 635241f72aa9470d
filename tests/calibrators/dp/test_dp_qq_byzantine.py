"""dp-qq against dishonest clients: certified plans, exact and Monte Carlo checks."""

import itertools
import math
import warnings
from collections import Counter

import numpy as np
import pytest

from skfedcp.calibrators import (
    PrivateQuantileOfQuantilesCalibrator,
    qq_coverage,
    qq_coverage_unequal,
)
from skfedcp.calibrators._dp import _byzantine as _byz
from skfedcp.calibrators._dp._common import _edges
from skfedcp.calibrators._dp._laws import _client_pmf, _kth_smallest_law
from skfedcp.calibrators._dp._tight import _tight_lower_bound
from skfedcp.calibrators._qq._byzantine import _equal_best
from skfedcp.exceptions import InfiniteThresholdWarning

TOL = 1e-10  # the feasibility tolerance of the rank selection


def _coverage_table(h, n, r_max):
    """``M_h(l, r)`` of ``h`` clients of ``n`` scores, ``l <= n``, ``r <= r_max``:
    the whole table, the reference the staircase reads a few cells of."""
    ls, rs = range(1, n + 1), range(1, r_max + 1)
    return np.array([[qq_coverage(h, n, l, r) for r in rs] for l in ls])


def _cal(**kw):
    return PrivateQuantileOfQuantilesCalibrator(score_bounds=(0, 1), **kw)


# ---------------------------------------------------------------------------
# 1. n_byzantine=0 is today's calibrator, bit for bit.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("rule", ["paper", "tight"])
def test_n_byzantine_zero_is_bit_identical(rule):
    rng = np.random.default_rng(0)
    scores = rng.uniform(size=5 * 200)
    ids = np.repeat(np.arange(5), 200)
    kw = {"epsilon": 10.0, "rule": rule}
    a = _cal(**kw).fit(scores, ids, alpha=0.1, random_state=0)
    b = _cal(n_byzantine=0, **kw).fit(scores, ids, alpha=0.1, random_state=0)
    assert a.threshold_ == b.threshold_
    np.testing.assert_array_equal(a.messages_["quantile"], b.messages_["quantile"])
    assert a.calibration_info_.keys() == b.calibration_info_.keys()
    for key, value in a.calibration_info_.items():
        np.testing.assert_array_equal(value, b.calibration_info_[key])
    assert "n_byzantine" not in a.calibration_info_
    assert a.coverage_bounds_.lower == a.calibration_info_["coverage_lower"]
    if rule == "paper":  # the values of the class docstring, unchanged
        info = b.calibration_info_
        assert (info["gamma"], int(info["local_ranks"][0])) == (0.02, 179)
        assert (info["k"], info["correction"]) == (4, 3)


# ---------------------------------------------------------------------------
# 2. The certified bounds, by enumeration of every honest set.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("h,n,r_max", [(3, 4, 3), (9, 10, 7), (19, 20, 15)])
def test_equal_coverage_table_is_qq_coverage(h, n, r_max):
    table = _coverage_table(h, n, r_max)
    for l in range(1, n + 1):
        for r in range(1, r_max + 1):
            assert table[l - 1, r - 1] == pytest.approx(
                qq_coverage(h, n, l, r), abs=1e-11
            )


@pytest.mark.parametrize("c", [1, 2])
def test_paper_bound_holds_for_every_honest_set(c):
    sizes = [20, 25, 30, 20, 40, 25, 30, 35]
    m, alpha = len(sizes), 0.2
    cal = _cal(epsilon=50.0, n_bins=20, n_byzantine=c)
    plan = cal.plan(sizes, alpha)
    g, k, ranks = plan["gamma"], plan["k"], plan["local_ranks"]
    assert c < k <= m - c
    lower = plan["coverage_lower"]
    assert lower >= 1 - alpha - TOL
    for honest in itertools.combinations(range(m), m - c):
        h_sizes = [sizes[j] for j in honest]
        h_ranks = [int(ranks[j]) for j in honest]
        exact = (1 - g * alpha) * qq_coverage_unequal(h_sizes, h_ranks, k - c)
        assert exact >= lower - 1e-9


def test_paper_bound_is_exact_for_equal_sizes():
    m, n, c, alpha = 12, 30, 3, 0.2
    plan = _cal(epsilon=50.0, n_bins=20, n_byzantine=c).plan([n] * m, alpha)
    g, l, k = plan["gamma"], int(plan["local_ranks"][0]), plan["k"]
    expected = (1 - g * alpha) * qq_coverage(m - c, n, l, k - c)
    assert plan["coverage_lower"] == pytest.approx(expected, abs=1e-11)
    assert plan["score"] == pytest.approx(
        qq_coverage(m, n, l + plan["correction"], k), abs=1e-11
    )


@pytest.mark.parametrize(
    "sizes,c", [([30] * 6, 1), ([30] * 8, 2), ([20, 30, 20, 30, 40, 20], 1)]
)
def test_tight_bound_holds_for_every_honest_set(sizes, c):
    m, alpha, eps, bins = len(sizes), 0.2, 20.0, 10
    plan = _cal(epsilon=eps, n_bins=bins, rule="tight", n_byzantine=c).plan(
        sizes, alpha
    )
    q, k = float(plan["levels"][0]), plan["k"]
    assert c < k <= m - c
    worst = min(
        _tight_lower_bound(
            tuple(sorted(Counter(sizes[j] for j in honest).items())),
            q,
            k - c,
            eps,
            bins,
        )
        for honest in itertools.combinations(range(m), m - c)
    )
    assert worst >= 1 - alpha - 1e-9
    assert plan["coverage_lower"] == pytest.approx(worst, abs=1e-9)


def _marginal_release_law(n, level, args, n_bins):
    """Law of one honest client's release over its i.i.d. uniform scores, exact.

    The mechanism reads the bin counts only, so each multiset of bins (one
    representative score at each bin's midpoint) is weighted by its
    multinomial probability ``n! / prod(counts!) / B^n``.
    """
    mids = (np.arange(n_bins) + 0.5) / n_bins
    law = np.zeros(n_bins)
    for bins in itertools.combinations_with_replacement(range(n_bins), n):
        weight = math.factorial(n) / n_bins**n
        for count in Counter(bins).values():
            weight /= math.factorial(count)
        law += weight * _client_pmf(mids[list(bins)], level, args)
    return law


@pytest.mark.parametrize(
    "rule,m,n,alpha,eps,bins",
    [("paper", 5, 5, 0.3, 50.0, 4), ("tight", 4, 3, 0.4, 20.0, 4)],
)
def test_minimal_attack_exact_coverage_is_above_the_bound(rule, m, n, alpha, eps, bins):
    # Exact enumeration on a tiny case: under the minimal attack (every
    # dishonest client sends the smallest edge e_1), T is the (k - c)-th
    # smallest of the h = m - c honest releases, i.i.d. with the exact
    # marginal law above; P(S <= T) = E[T] for a uniform test score
    # (+inf: 1).
    c = 1
    cal = _cal(epsilon=eps, n_bins=bins, rule=rule, n_byzantine=c)
    plan = cal.plan([n] * m, alpha)
    args = cal._mechanism_args(plan, None)
    del args["level"]
    law = _marginal_release_law(n, float(plan["levels"][0]), args, bins)
    threshold_law = _kth_smallest_law(np.tile(law, (m - c, 1)), plan["k"] - c)
    values = np.r_[_edges((0, 1), bins)[1:-1], 1.0]
    exact = float(threshold_law @ values)
    lower = plan["coverage_lower"]
    assert lower >= 1 - alpha - TOL
    assert exact >= lower - 1e-12


# ---------------------------------------------------------------------------
# 3. Monte Carlo: every attack keeps the certified coverage.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("rule", ["paper", "tight"])
@pytest.mark.parametrize("kind", ["min", "max", "inf", "copy", "noise"])
def test_attacks_keep_the_certified_coverage_monte_carlo(rule, kind):
    # 20 clients of 30 uniform scores, 3 dishonest (the last three), whose
    # messages pass validation (edges of the announced grid or +inf). For
    # uniform scores the coverage given T is min(T, 1) exactly, so the mean
    # over R repetitions estimates the coverage with SE = std / sqrt(R)
    # (about 0.002 for R = 300, std ~ 0.04): it must not fall 4.5 SE below
    # the certified bound (a false alarm has probability ~3e-6).
    m, n, c, alpha, reps = 20, 30, 3, 0.2, 300
    cal = _cal(epsilon=20.0, n_bins=20, rule=rule, n_byzantine=c)
    sizes = np.full(m, n)
    ids = np.repeat(np.arange(m), n)
    plan = cal.plan(sizes, alpha)
    grid = np.r_[_edges((0, 1), 20)[1:-1], np.inf]
    lower = cal.coverage_bounds(sizes, alpha).lower
    rng = np.random.default_rng(3)
    cover = np.empty(reps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        for r in range(reps):
            fitted = cal.fit(rng.uniform(size=m * n), ids, alpha=alpha, random_state=r)
            values = fitted.messages_["quantile"].copy()
            honest = values[: m - c]
            if kind == "min":
                values[m - c :] = grid[0]
            elif kind == "max":
                values[m - c :] = grid[-2]
            elif kind == "inf":
                values[m - c :] = np.inf
            elif kind == "copy":
                values[m - c :] = honest[0]
            else:
                values[m - c :] = rng.choice(grid, size=c)
            messages = [{"n": n, "quantile": float(v)} for v in values]
            t = cal.server_step(messages, alpha=alpha, n_per_client=sizes)
            if kind == "min":  # the certified worst case: the (k - c)-th honest
                assert t == np.sort(honest)[plan["k"] - c - 1]
            if kind == "inf" and np.isfinite(honest).all():
                assert np.isfinite(t)  # k <= m - c: +inf senders cannot blow it up
            cover[r] = min(t, 1.0)
    mean, se = cover.mean(), cover.std(ddof=1) / np.sqrt(reps)
    assert lower >= 1 - alpha - TOL
    assert mean >= lower - 4.5 * se


def test_one_inf_sender_trivialises_the_plain_plan_but_not_the_certified_one():
    # The observation: with k = m, a single client sending +inf makes
    # the threshold infinite; n_byzantine=1 keeps k <= m - 1.
    sizes, alpha = [50] * 20, 0.1
    plain = _cal(epsilon=10.0, rule="tight").plan(sizes, alpha)
    byz = _cal(epsilon=10.0, rule="tight", n_byzantine=1).plan(sizes, alpha)
    assert byz["k"] <= len(sizes) - 1
    assert byz["coverage_lower"] >= 1 - alpha - TOL
    if plain["k"] == len(sizes):
        assert byz["k"] < plain["k"]


# ---------------------------------------------------------------------------
# 4. max_byzantine, coverage_bounds_ and invalid parameters.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("rule", ["paper", "tight"])
def test_max_byzantine_of_a_certified_plan(rule):
    m, n, c, alpha = 12, 30, 2, 0.2
    ids = np.repeat(np.arange(m), n)
    scores = np.random.default_rng(0).uniform(size=m * n)
    cal = _cal(epsilon=20.0, n_bins=20, rule=rule, n_byzantine=c)
    cal.fit(scores, ids, alpha=alpha, random_state=0)
    tolerated = cal.max_byzantine()
    assert tolerated >= c
    assert cal.coverage_bounds_.lower == cal.calibration_info_["coverage_lower"]
    assert np.isnan(cal.coverage_bounds_.upper)
    assert cal.calibration_info_["n_byzantine"] == c
    # One more than tolerated is not certified by the fitted plan.
    plan = cal.calibration_info_
    if rule == "paper" and tolerated + 1 < plan["k"]:
        g, l, k = plan["gamma"], int(plan["local_ranks"][0]), plan["k"]
        above = (1 - g * alpha) * qq_coverage(
            m - tolerated - 1, n, l, k - tolerated - 1
        )
        assert above < 1 - alpha - TOL


def test_invalid_n_byzantine():
    sizes = [30] * 10
    with pytest.raises(ValueError, match="below half"):
        _cal(epsilon=20.0, n_bins=20, n_byzantine=5).plan(sizes, 0.2)
    with pytest.raises(ValueError, match="n_byzantine must be"):
        _cal(n_byzantine=-1).plan(sizes, 0.2)
    with pytest.raises(TypeError, match="n_byzantine must be an integer"):
        _cal(n_byzantine=1.5).plan(sizes, 0.2)
    with pytest.raises(ValueError, match="no dp-qq plan"):
        _cal(epsilon=0.5, n_byzantine=2).plan(sizes, 0.1)
    with pytest.raises(ValueError, match="hold calibration rows"):
        _cal(epsilon=20.0, n_byzantine=1).plan([30, 0, 30, 30], 0.2)
    ids = np.repeat(np.arange(10), 30)
    with pytest.raises(ValueError, match="below half"):
        _cal(epsilon=20.0, n_byzantine=5).fit(
            np.zeros(300) + 0.5, ids, alpha=0.2, random_state=0
        )


def _brute_mixes(sizes, c):
    groups = sorted(Counter(sizes).items())
    mixes = []
    for removed in itertools.product(*[range(min(n, c) + 1) for _, n in groups]):
        if sum(removed) == c:
            mix = zip(groups, removed, strict=True)
            mixes.append(tuple((s, n - d) for (s, n), d in mix if n > d))
    return mixes


def test_honest_mixes_match_enumeration():
    """The pruned walk lists exactly the product's mixes, each once, and
    refuses exactly when there are more than ``_MAX_HONEST_MIXES``."""
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(300):
        m = int(rng.integers(2, 16))
        c = int(rng.integers(1, (m + 1) // 2 + 1))
        sizes = rng.choice([5, 7, 9, 11, 13, 15, 17], size=m).tolist()
        want = _brute_mixes(sizes, c)
        if len(want) > _byz._MAX_HONEST_MIXES:
            refused += 1
            with pytest.raises(ValueError, match="honest size mixes"):
                _byz._honest_mixes(sizes, c)
            continue
        got = _byz._honest_mixes(sizes, c)
        assert sorted(got) == sorted(want)
        assert len(set(got)) == len(got)
    assert refused > 0  # the refusal branch was exercised


def test_honest_mixes_distinct_sizes_stay_cheap():
    """m distinct sizes with c = 1 have m mixes: the product over the groups
    (2^m steps, 46 s for 26 sizes) is never walked. 200 distinct sizes are
    refused at once, 40 are listed (one mix per removed size)."""
    with pytest.raises(ValueError, match="honest size mixes"):
        _byz._honest_mixes(list(range(200, 400)), 1)
    mixes = _byz._honest_mixes(list(range(200, 240)), 1)
    assert len(mixes) == 40
    assert all(sum(n for _, n in mix) == 39 for mix in mixes)


# ---------------------------------------------------------------------------
# 5. The fast plan: the staircase, the gamma pruning, former slow cases.
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "m,n,tau,correction,c",
    [
        (12, 30, 0.9, 2, 1),
        (10, 20, 0.85, 0, 2),
        (20, 15, 0.92, 3, 3),
        (7, 40, 0.8, 5, 1),
    ],
)
def test_equal_pair_is_the_full_table_rule(m, n, tau, correction, c):
    # The rule on the whole tables (every l, every r), as it was computed
    # before only the staircase's cells were read.
    h, r_max = m - c, m - 2 * c
    honest = _coverage_table(h, n, r_max)[: n - correction]
    passing = honest >= tau - TOL
    rows = np.flatnonzero(passing[:, -1])
    got = _equal_best(m, n, tau - TOL, correction, c, 1e-10)
    if rows.size == 0:
        assert got is None
        return
    r_of = passing[rows].argmax(axis=1)
    benign = _coverage_table(m, n, m)[rows + correction, r_of + c]
    best = int(np.flatnonzero(benign <= benign.min() + 1e-10)[-1])
    l, r = int(rows[best]) + 1, int(r_of[best]) + 1
    assert got[:2] == (l, r)
    assert got[2] == pytest.approx(benign[best], abs=1e-14)
    lower = _byz._equal_cell(h, n, l, r)
    assert lower == pytest.approx(honest[l - 1, r - 1], abs=1e-14)


@pytest.mark.parametrize("sizes", [[30] * 12, [20, 25, 30, 20, 40, 25]])
def test_gamma_pruning_keeps_the_plan_of_every_gamma(sizes):
    # The pruned search returns the plan of least score over the whole grid
    # (ties to the smaller gamma), each gamma planned on its own.
    from skfedcp.calibrators._dp._plan import GAMMA_GRID

    alpha, eps, bins, c = 0.2, 50.0, 20, 1
    best = None
    for g in GAMMA_GRID:
        plan = _byz._paper_plan(tuple(sizes), alpha, eps, bins, g, c)
        if plan is not None and (best is None or plan["score"] < best["score"] - 1e-10):
            best = plan
    got = _byz._paper_plan(tuple(sizes), alpha, eps, bins, "auto", c)
    assert best is not None and got is not None
    for key in ("gamma", "k", "local_ranks", "correction"):
        assert got[key] == best[key]
    assert got["score"] == best["score"]


def test_equal_hundred_clients_plan():
    # Formerly 5 s (two Gauss-Legendre tables of 5,000 nodes per row).
    plan = _cal(epsilon=10.0, n_byzantine=1).plan(np.full(100, 100), 0.1)
    assert (plan["gamma"], int(plan["local_ranks"][0]), plan["k"]) == (0.04, 85, 98)
    assert plan["coverage_lower"] >= 0.9 - TOL


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["unequal", "equal"])
def test_former_slow_plans_complete(kind):
    # Formerly > 300 s (unequal: a rank selection per gamma, each root-
    # finding every pair of Beta CDFs) and 158 s (200 clients of 200 rows).
    if kind == "unequal":
        sizes, c = np.random.default_rng(0).integers(10, 1001, 100), 5
    else:
        sizes, c = np.full(200, 200), 1
    plan = _cal(epsilon=10.0, n_byzantine=c).plan(sizes, 0.1)
    assert c < plan["k"] <= len(sizes) - c
    assert plan["coverage_lower"] >= 0.9 - TOL


def test_tight_worst_bounds_share_one_row_budget():
    # Review, session 10: the 2 GiB row budget was per honest mix (up to 64
    # mixes: 128 GiB in all); the mixes of one plan now count their kept
    # rows together.
    from skfedcp.calibrators._dp import _byzantine

    bounds = _byzantine._worst_bounds([40, 60, 80, 80], 1.0, 20, "quantile", 1)
    parts = bounds.parts
    assert len(parts) > 1
    assert all(part._budget is parts[0]._budget for part in parts)
    parts[0](0.9, 2)
    assert parts[0]._budget.kept > 0
    kept = parts[0]._budget.kept
    parts[1](0.9, 2)
    assert parts[1]._budget.kept > kept  # one counter for both mixes
