"""LDP-S's tight search (issue 14, items 2 and 3): closed form and exact law.

``search="tight"`` runs the bisection with no stopping band, returns the
interval's upper end and uses the one-sided per-round error
``Delta_S = c sqrt(ln(T/delta) / (2 n'))`` (proof in
docs/user_guide/local_privacy.rst). Besides the closed-form values, these
tests compute the **exact law** of the returned threshold for a known score
distribution: the search is a binary tree of depth ``T`` whose branch
probabilities are binomial tails of the ``n'`` randomized bits of each round,
so the probability that the conditional coverage falls below its guarantee
is a finite sum, compared with ``delta`` without Monte Carlo error. The
exact law itself is checked against the calibrator by simulation.
"""

import math

import numpy as np
import pytest
from scipy import stats

from skfedcp.calibrators import (
    LDPScoreCalibrator,
    LDPScoreStarCalibrator,
    ldp_correction,
    ldp_sample_size,
)
from skfedcp.calibrators._ldp._score_protocol import _axis_range, _axis_score
from skfedcp.exceptions import VacuousGuaranteeWarning
from skfedcp.privacy import debias_fraction

BOUNDS = (0.0, 1.0)
ALPHA = 0.1
# Monte Carlo tolerance: 4.5 standard errors (two-sided false alarm ~7e-6).
Z = 4.5


def _c(eps):
    return (math.exp(eps) + 1) / (math.exp(eps) - 1)


# --------------------------------------------------------------------------
# Closed form


class TestCorrection:
    def test_tight_closed_form(self):
        # Delta_S = c sqrt(ln(T/delta) / (2 n')), n' = floor(n / T).
        for n, eps, delta, T in [
            (20_000, 4.0, 0.1, 10),
            (20_000, 4.0, 1e-3, 10),
            (30_000, 1.0, 0.05, 7),
            (1234, 8.0, 0.2, 3),
        ]:
            expected = _c(eps) * math.sqrt(math.log(T / delta) / (2 * (n // T)))
            got = ldp_correction(n, 10, eps, delta, T).score
            assert got == pytest.approx(expected, rel=1e-12)
            cal = LDPScoreCalibrator(
                epsilon=eps, delta=delta, n_groups=T, score_bounds=BOUNDS
            )
            assert cal.plan([n], ALPHA)["correction"] == pytest.approx(
                expected, rel=1e-12
            )

    def test_reference_numbers(self):
        # The setting: n = 20,000, eps = 4, delta = 0.1, T = 10.
        # c = 1.0373147, n' = 2000: paper 2 c sqrt(ln(200) / 4000) = 0.0755057;
        # the review's t_S = 0.0377528; the one-sided tight Delta_S
        # c sqrt(ln(100) / 4000) = 0.0351968.
        tight = ldp_correction(20_000, 10, 4.0, 0.1, 10)
        paper = ldp_correction(20_000, 10, 4.0, 0.1, 10, search="paper")
        assert tight.score == pytest.approx(0.0351968, rel=1e-6)
        assert paper.score == pytest.approx(0.0755057, rel=1e-6)
        assert tight.label == paper.label  # Delta_L does not depend on it

    def test_users_needed(self):
        # Delta = 0.1, eps = 4, delta = 1e-3, T = 10:
        # paper T ceil(2 c^2 ln(2T/delta) / Delta^2) = 10 * 2132 = 21,320;
        # the review's t_S: T ceil(c^2 ln(2T/delta) / (2 Delta^2)) = 5,330;
        # tight: T ceil(c^2 ln(T/delta) / (2 Delta^2)) = 10 * 496 = 4,960.
        assert ldp_sample_size(0.1, 10, 4.0, 1e-3).score == 4960
        assert ldp_sample_size(0.1, 10, 4.0, 1e-3, search="paper").score == 21_320
        assert ldp_correction(4960, 10, 4.0, 1e-3).score <= 0.1
        assert ldp_correction(4959, 10, 4.0, 1e-3).score > 0.1

    def test_sample_size_is_smallest(self):
        corr = np.array([0.02, 0.05, 0.1, 0.3])
        for eps, T, delta in [(1.0, 10, 0.01), (4.0, 5, 0.1), (8.0, 20, 1e-4)]:
            n_s = ldp_sample_size(corr, 10, eps, delta, T).score
            assert (n_s % T == 0).all()
            assert (ldp_correction(n_s, 10, eps, delta, T).score <= corr).all()
            assert (ldp_correction(n_s - 1, 10, eps, delta, T).score > corr).all()

    def test_ratio_to_paper(self):
        # Delta_tight / Delta_paper = sqrt(ln(T/delta) / ln(2T/delta)) / 2 < 1/2.
        for delta, T in [(0.1, 10), (1e-3, 10), (0.5, 1)]:
            t = ldp_correction(10_000, 10, 2.0, delta, T).score
            p = ldp_correction(10_000, 10, 2.0, delta, T, search="paper").score
            ratio = math.sqrt(math.log(T / delta) / math.log(2 * T / delta)) / 2
            assert t / p == pytest.approx(ratio, rel=1e-12)

    def test_bad_search(self):
        with pytest.raises(ValueError, match="search"):
            ldp_correction(1000, 10, 1.0, search="exact")
        with pytest.raises(ValueError, match="search"):
            ldp_sample_size(0.1, 10, 1.0, search="banded")


class TestCalibrator:
    def test_plan(self):
        plan = LDPScoreStarCalibrator(epsilon=4.0, delta=0.1, score_bounds=BOUNDS).plan(
            [20_000], ALPHA
        )
        assert plan["search"] == "tight" and plan["band"] == 0.0
        assert plan["target"] == pytest.approx(0.9 + 0.0351968, rel=1e-6)
        assert plan["coverage_lower"] == pytest.approx(0.9)
        paper = LDPScoreCalibrator(
            epsilon=4.0, delta=0.1, score_bounds=BOUNDS, search="paper"
        ).plan([20_000], ALPHA)
        assert paper["band"] == pytest.approx(paper["correction"] / 2)

    def test_tight_needs_final_upper(self):
        cal = LDPScoreCalibrator(score_bounds=BOUNDS, final="paper")
        with pytest.raises(ValueError, match="final='upper'"):
            cal.fit(np.linspace(0, 1, 100), alpha=ALPHA)
        with pytest.warns(VacuousGuaranteeWarning):  # 10 users per group
            cal.set_params(search="paper").fit(np.linspace(0, 1, 100), alpha=ALPHA)

    def test_runs_every_round_and_returns_upper_end(self):
        # Nearly noiseless answers (eps = 60): Z_j is the fraction of group j
        # below q_j, within ~0.01 of q_j for equispaced scores; target 0.9, no
        # band: the search converges on 0.9 (within the sampling error of a
        # group, below Delta_S = 0.034) and returns the upper end, the last
        # query answered "over target".
        n = 20_000
        scores = (np.arange(n) + 0.5) / n
        for axis in ("linear", "log", "logit"):
            cal = LDPScoreCalibrator(
                epsilon=60.0, delta=0.1, score_bounds=BOUNDS, axis=axis
            )
            cal.fit(scores, alpha=ALPHA, random_state=0)
            assert cal.n_steps_used_ == 10 and not cal.stopped_early_
            q, z = cal.history_["threshold"], cal.history_["estimate"]
            over = z > cal.target_coverage_
            assert cal.threshold_ == q[over][-1]
            assert abs(cal.threshold_ - 0.9) <= cal.correction_
            if axis == "linear":  # dyadic
                assert cal.threshold_ * 2**10 == round(cal.threshold_ * 2**10)

    def test_all_above_gives_inf(self):
        cal = LDPScoreCalibrator(epsilon=60.0, delta=0.1, score_bounds=BOUNDS)
        for axis in ("linear", "log", "logit"):
            cal.set_params(axis=axis).fit(np.full(1000, 2.0), alpha=ALPHA)
            assert cal.threshold_ == np.inf and cal.n_steps_used_ == 10

    @pytest.mark.parametrize("axis", ["log", "logit"])
    def test_axis_queries(self, axis):
        # The log axis halves u = -ln(1 - x) on [0, R], the logit axis
        # u = ln(x / (1 - x)) on [-R, R], R = 2 T ln 2, x = (s - lo)/(hi - lo):
        # the query of round j is dyadic on the axis, u = a + (b - a) m / 2^j.
        for bounds, T in [((0.0, 1.0), 10), ((-1.0, 4.0), 6)]:
            cal = LDPScoreCalibrator(
                epsilon=60.0, delta=0.1, n_groups=T, score_bounds=bounds, axis=axis
            )
            scores = np.random.default_rng(0).uniform(*bounds, size=6000)
            cal.fit(scores, alpha=ALPHA, random_state=0)
            lo, hi = bounds
            x = (cal.history_["threshold"] - lo) / (hi - lo)
            reach = 2 * T * math.log(2)
            if axis == "log":
                u, a, b = -np.log1p(-x), 0.0, reach
                assert x[0] == pytest.approx(1 - 2.0**-T)
            else:
                u, a, b = np.log(x / (1 - x)), -reach, reach
                assert x[0] == 0.5
            m = (u - a) / (b - a) * 2.0 ** np.arange(1, u.size + 1)
            np.testing.assert_allclose(m, np.round(m), atol=1e-6)
            # The answer is one of the queries (the last one "over target").
            assert cal.threshold_ in cal.history_["threshold"]

    def test_log_axis_resolves_mass_near_one(self):
        # 13% of the scores within 2^-10 of 1 (like deterministic APS of a
        # confident model): the 0.9 + Delta quantile lies inside the last
        # linear bin, so "linear" returns +inf (every label); "log" and
        # "logit" find it.
        rng = np.random.default_rng(1)
        n = 30_000
        scores = np.where(
            rng.random(n) < 0.87,
            rng.uniform(0, 0.999, size=n),
            1 - 10 ** rng.uniform(-6, -3.1, size=n),
        )
        kwargs = {"epsilon": 4.0, "delta": 0.001, "score_bounds": BOUNDS}
        lin = LDPScoreStarCalibrator(axis="linear", **kwargs)
        assert lin.fit(scores, alpha=ALPHA, random_state=0).threshold_ == np.inf
        for axis in ("log", "logit"):
            cal = LDPScoreStarCalibrator(axis=axis, **kwargs)
            cal.fit(scores, alpha=ALPHA, random_state=0)
            assert 1 - 2**-10 < cal.threshold_ < 1
            assert (scores <= cal.threshold_).mean() >= 0.9


# --------------------------------------------------------------------------
# Exact law of the threshold


def exact_law(cal, n, cdf_lt):
    """Exact law of LDP-S's threshold, as ``{threshold: probability}``.

    Users are i.i.d. with ``P(S < q) = cdf_lt(q)``. Round ``j`` asks ``n'``
    fresh users; the number ``m`` of "1" reports is Binomial(n', p) with
    ``p = (1 + G (e^eps - 1)) / (1 + e^eps)``, ``G = cdf_lt(q_j)``, and the
    server's estimate is ``debias_fraction(m / n')`` (the float the
    calibrator computes), so each branch of the search tree has an exact
    probability.
    """
    plan = cal.plan([n], ALPHA)
    if not plan["feasible"]:
        return {math.inf: 1.0}
    bounds = tuple(float(b) for b in cal.score_bounds)
    state = {
        "axis": cal.axis,
        "bounds": bounds,
        "axis_range": _axis_range(cal.axis, bounds, cal.n_groups),
    }
    size = plan["group_size"]
    m = np.arange(size + 1)
    z = debias_fraction(m / size, epsilon=cal.epsilon)
    over = z > plan["target"] + plan["band"]
    under = z < plan["target"] - plan["band"]
    assert (np.diff(z) > 0).all()
    first_over = int(np.argmax(over)) if over.any() else size + 1
    last_under = int(np.nonzero(under)[0][-1]) if under.any() else -1
    e = math.exp(cal.epsilon)
    law = {}

    def add(threshold, prob):
        threshold = math.inf if threshold >= bounds[1] else float(threshold)
        law[threshold] = law.get(threshold, 0.0) + prob

    def walk(lo, hi, depth, prob, last):
        if depth == cal.n_groups:
            add(last if cal.final == "paper" else _axis_score(state, hi), prob)
            return
        point = (lo + hi) / 2
        query = _axis_score(state, point)
        p = (1 + cdf_lt(query) * (e - 1)) / (1 + e)
        # z increases with m: "over" is m >= first_over, "under" m <= last_under.
        p_over = stats.binom.sf(first_over - 1, size, p) if over.any() else 0.0
        p_under = stats.binom.cdf(last_under, size, p) if under.any() else 0.0
        p_stop = max(1.0 - p_over - p_under, 0.0)
        if p_stop > 0:
            add(query, prob * p_stop)
        if p_over > 0:
            walk(lo, point, depth + 1, prob * p_over, query)
        if p_under > 0:
            walk(point, hi, depth + 1, prob * p_under, query)

    walk(*state["axis_range"], 0, 1.0, None)
    return law


def failure_probability(law, cdf_le, level):
    """``P(coverage of the threshold < level)``; ``+inf`` covers everything."""
    return sum(
        p for t, p in law.items() if (1.0 if math.isinf(t) else cdf_le(t)) < level
    )


class TwoBlocks:
    """Adversarial law: mass ``a`` uniform on [0, w], ``1 - a`` on [1 - w, 1].

    ``P(S < q) = a`` on the whole middle ``[w, 1 - w]``: every query there
    sees the same coverage, just below the level the guarantee promises, so
    each round in the middle is a chance to fail (the union bound's worst
    case).
    """

    def __init__(self, a, w=1e-3):
        self.a, self.w = a, w

    def cdf(self, q):
        a, w = self.a, self.w
        if q <= 0:
            return 0.0
        if q < w:
            return a * q / w
        if q <= 1 - w:
            return a
        if q < 1:
            return a + (1 - a) * (q - 1 + w) / w
        return 1.0

    def sample(self, n, rng):
        low = rng.random(n) < self.a
        return np.where(low, rng.uniform(0, self.w, n), rng.uniform(1 - self.w, 1, n))


@pytest.mark.slow
def test_exact_law_matches_the_calibrator():
    # Brute force: the frequencies of the calibrator's thresholds over fresh
    # calibration draws and noise must match the exact law, each within 4.5
    # binomial standard errors (and never a threshold the law excludes).
    reps, n, T = 3000, 600, 4
    dist = stats.beta(2, 5)
    cal = LDPScoreCalibrator(epsilon=2.0, delta=0.2, n_groups=T, score_bounds=BOUNDS)
    law = exact_law(cal, n, dist.cdf)
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
    assert len(law) >= 8  # a law worth checking, not one atom
    rng = np.random.default_rng(0)
    seen = {}
    for _ in range(reps):
        seed = int(rng.integers(2**31))
        cal.fit(dist.rvs(size=n, random_state=rng), alpha=ALPHA, random_state=seed)
        seen[cal.threshold_] = seen.get(cal.threshold_, 0) + 1
    assert set(seen) <= set(law)
    for t, p in law.items():
        se = math.sqrt(p * (1 - p) / reps)
        assert abs(seen.get(t, 0) / reps - p) <= Z * se + 1e-12, t


@pytest.mark.parametrize("star", [True, False])
@pytest.mark.parametrize(
    ("eps", "delta", "T", "n", "axis"),
    [
        (4.0, 0.1, 10, 20_000, "linear"),
        (1.0, 0.1, 10, 20_000, "linear"),
        (2.0, 0.01, 5, 5_000, "linear"),
        (4.0, 0.1, 10, 20_000, "log"),
        (4.0, 0.1, 10, 20_000, "logit"),
        (1.0, 0.01, 8, 8_000, "logit"),
    ],
)
def test_exact_failure_probability_below_delta(star, eps, delta, T, n, axis):
    # The guarantee: P(coverage < 1 - alpha [- Delta_S]) <= delta, computed
    # exactly. Laws: Beta(2, 5), and the adversarial two-block law whose
    # coverage sits just below the promised level on the whole middle.
    cls = LDPScoreStarCalibrator if star else LDPScoreCalibrator
    cal = cls(epsilon=eps, delta=delta, n_groups=T, score_bounds=BOUNDS, axis=axis)
    corr = cal.plan([n], ALPHA)["correction"]
    level = 1 - ALPHA if star else 1 - ALPHA - corr
    laws = [stats.beta(2, 5).cdf]
    for gap in (1e-9, 1e-3, 0.01):
        laws.append(TwoBlocks(level - gap).cdf)
    for cdf in laws:
        law = exact_law(cal, n, cdf)
        assert sum(law.values()) == pytest.approx(1.0, abs=1e-9)
        assert failure_probability(law, cdf, level) <= delta


def test_exact_check_has_power():
    # The same exact computation flags an invalid rule: claiming the level
    # 1 - alpha for plain LDP-S (no correction) fails with probability far
    # above delta on the two-block law (about 0.76 on the logit axis), and
    # the paper's final rule q_T (which needs an assumption on the score law)
    # fails on it too.
    a = TwoBlocks(1 - ALPHA - 1e-3)
    cal = LDPScoreCalibrator(epsilon=4.0, delta=0.1, score_bounds=BOUNDS)
    assert failure_probability(exact_law(cal, 20_000, a.cdf), a.cdf, 1 - ALPHA) > 0.5
    atom = TwoBlocks(0.5, w=2**-12)  # half the mass within 2^-12 of 1
    paper = LDPScoreStarCalibrator(
        epsilon=4.0,
        delta=0.1,
        score_bounds=BOUNDS,
        search="paper",
        final="paper",
        axis="linear",
    )
    law = exact_law(paper, 20_000, atom.cdf)
    assert failure_probability(law, atom.cdf, 1 - ALPHA) > 0.9
    for axis in ("linear", "logit"):
        tight = paper.set_params(search="tight", final="upper", axis=axis)
        law = exact_law(tight, 20_000, atom.cdf)
        assert failure_probability(law, atom.cdf, 1 - ALPHA) <= 0.1


def test_mean_coverage_beta_2_5():
    # The figures, exactly (no Monte Carlo): Beta(2, 5) scores,
    # n = 20,000, eps = 4, delta = 0.1, T = 10, linear axis. Paper LDP-S*:
    # mean coverage 0.99536; tight: 0.93579 (the review's t_S: ~0.938);
    # tight on the default logit axis: 0.93722.
    dist = stats.beta(2, 5)
    means = {}
    for search, axis in [("tight", "linear"), ("paper", "linear"), ("tight", "logit")]:
        cal = LDPScoreStarCalibrator(
            epsilon=4.0, delta=0.1, score_bounds=BOUNDS, search=search, axis=axis
        )
        law = exact_law(cal, 20_000, dist.cdf)
        means[search, axis] = sum(
            p * (1.0 if math.isinf(t) else dist.cdf(t)) for t, p in law.items()
        )
    assert means["paper", "linear"] == pytest.approx(0.99536, abs=5e-5)
    assert means["tight", "linear"] == pytest.approx(0.93579, abs=5e-5)
    assert means["tight", "logit"] == pytest.approx(0.93722, abs=5e-5)
