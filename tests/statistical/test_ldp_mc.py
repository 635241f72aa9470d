"""Monte Carlo checks of LDP-L and LDP-S (spec ldp_conformal.md, section 6.3).

Synthetic calibrated model: ``p ~ Dirichlet(0.2 * 1_k)`` and ``y ~ Cat(p)``.
The coverage of a threshold ``q`` is computed without test labels:

* LAC (``1 - p_y``): exactly. The marginal of ``p_y`` is Beta(a, b) with
  ``a = 0.2``, ``b = 0.2 (k - 1)``, so
  ``F(q) = P(p_y >= 1 - q) = k E[p_1 1{p_1 >= 1 - q}] = sf_{Beta(a+1, b)}(1 - q)``.
* APS: ``mean_i sum_y p_iy 1{S(x_i, y) <= q}`` over a fixed set of
  ``N_TEST`` rows (exact per row). Its uniform error over ``q`` is below
  ``APS_SLACK`` with probability ``1 - 1e-6`` (Hoeffding on a grid of
  ``1 / GRID`` probability steps, union bound over the grid, plus the grid
  step), and that slack is added to every APS comparison.

The guarantees hold with probability ``>= 1 - delta`` per calibration draw,
so the number of violations in ``R`` runs is at most Binomial(R, delta): we
allow ``floor(delta R + 4.5 sqrt(delta (1 - delta) R))``, a one-sided
false-alarm rate of about 3.4e-6 under the normal approximation (4.5 SE).
"""

import math

import numpy as np
import pytest
from scipy import special

from skfedcp.calibrators import (
    LDPLabelCalibrator,
    LDPLabelStarCalibrator,
    LDPScoreCalibrator,
    LDPScoreStarCalibrator,
    ldp_correction,
)
from skfedcp.calibrators._ldp._label_search import _debiased_coverage
from skfedcp.privacy import binary_randomized_response, k_ary_randomized_response

pytestmark = pytest.mark.slow

Z = 4.5
ALPHA = 0.1
CONC = 0.2
N_TEST = 400_000
GRID = 1000
APS_SLACK = math.sqrt(math.log(2 * GRID / 1e-6) / (2 * N_TEST)) + 1 / GRID
BOUNDS = (0.0, 1.0)


def allowed_failures(delta, reps):
    return math.floor(delta * reps + Z * math.sqrt(delta * (1 - delta) * reps))


def draw(n, k, rng):
    proba = rng.dirichlet(np.full(k, CONC), size=n)
    labels = (proba.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return proba, labels


def lac(proba):
    return 1.0 - proba


def aps(proba):
    # Mass of the labels at least as likely (ties included, spec section 1).
    order = np.argsort(-proba, axis=1, kind="stable")
    sorted_p = np.take_along_axis(proba, order, axis=1)
    scores = np.empty_like(proba)
    np.put_along_axis(scores, order, np.cumsum(sorted_p, axis=1), axis=1)
    return np.clip(scores, 0.0, 1.0)


SCORES = {"lac": lac, "aps": aps}


class Coverage:
    """Exact (LAC) or fixed-test-set (APS) coverage ``P(S(x, y) <= q)``."""

    def __init__(self, k, score, seed=12345):
        self.k, self.score = k, score
        if score == "aps":
            proba = np.random.default_rng(seed).dirichlet(np.full(k, CONC), size=N_TEST)
            values = aps(proba).ravel()
            order = np.argsort(values, kind="stable")
            self.values = values[order]
            self.cumw = np.cumsum(proba.ravel()[order]) / N_TEST
            self.slack = APS_SLACK
        else:
            self.slack = 0.0

    def __call__(self, q):
        q = np.asarray(q, dtype=np.float64)
        if self.score == "lac":
            # sf_{Beta(a+1, b)}(1 - q) = I_q(b, a + 1), regularized.
            inside = special.betainc(CONC * (self.k - 1), CONC + 1, np.clip(q, 0, 1))
            return np.where(q >= 1, 1.0, np.where(q <= 0, 0.0, inside))
        idx = np.searchsorted(self.values, q, side="right")
        return np.where(idx > 0, self.cumw[np.maximum(idx - 1, 0)], 0.0)

    def strict(self, q):
        """``P(S(x, y) < q)`` (the event LDP-S users report)."""
        if self.score == "lac":
            return self(q)  # continuous
        q = np.asarray(q, dtype=np.float64)
        idx = np.searchsorted(self.values, q, side="left")
        return np.where(idx > 0, self.cumw[np.maximum(idx - 1, 0)], 0.0)


# --------------------------------------------------------------------------
# 6.3.1 and 6.3.2: unbiasedness of the two estimators


def test_debiased_cdf_is_unbiased():
    # Fixed calibration set, 500 k-RR redraws: the mean of Fc_hat(q) equals
    # the clean empirical CDF at q in {0.3, 0.6, 0.9} within 4.5 SE.
    rng = np.random.default_rng(0)
    n, k, eps, reps = 2000, 10, 2.0, 500
    proba, labels = draw(n, k, rng)
    M = lac(proba)
    q = np.array([0.3, 0.6, 0.9])
    clean = (M[np.arange(n), labels][:, None] <= q).mean(axis=0)
    beta = k / (k - 1 + math.exp(eps))
    sorted_all = np.sort(M, axis=None)
    est = np.empty((reps, q.size))
    for r in range(reps):
        noisy = k_ary_randomized_response(
            labels, n_classes=k, epsilon=eps, random_state=rng
        )
        est[r] = _debiased_coverage(
            sorted_all, np.sort(M[np.arange(n), noisy]), q, beta, k
        )
    se = est.std(axis=0, ddof=1) / math.sqrt(reps)
    assert (np.abs(est.mean(axis=0) - clean) <= Z * se).all()


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_rr_estimate_is_unbiased(eps):
    # 1e6 bits of known mean: |Z - mean| <= 4.5 c * 0.5 / sqrt(N) (the
    # report's standard deviation is at most 1/2, scaled by c).
    rng = np.random.default_rng(1)
    n = 1_000_000
    bits = rng.random(n) < 0.37
    reports = binary_randomized_response(bits, epsilon=eps, random_state=rng)
    c = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    z = c * reports.mean() - 1 / math.expm1(eps)
    assert abs(z - bits.mean()) <= Z * c * 0.5 / math.sqrt(n)


# --------------------------------------------------------------------------
# 6.3.3: the uniform bound of Theorem 2.1 (G3)


@pytest.mark.parametrize("n", [2000, 5000])
@pytest.mark.parametrize("eps", [2.0, 4.0])
def test_uniform_bound(n, eps):
    # With LAC, F^c is exact and continuous: the supremum of |Fc_hat - F^c|
    # is attained at the jumps of Fc_hat, from the right or from the left.
    k, delta, reps = 10, 0.1, 300
    rng = np.random.default_rng(int(n * eps))
    cov = Coverage(k, "lac")
    correction = ldp_correction(n, k, eps, delta).label
    beta = k / (k - 1 + math.exp(eps))
    failures = 0
    for _ in range(reps):
        proba, labels = draw(n, k, rng)
        M = lac(proba)
        noisy = k_ary_randomized_response(
            labels, n_classes=k, epsilon=eps, random_state=rng
        )
        sorted_all = np.sort(M, axis=None)
        jumps = np.unique(sorted_all)
        fc = _debiased_coverage(
            sorted_all, np.sort(M[np.arange(n), noisy]), jumps, beta, k
        )
        left = np.concatenate(([0.0], fc[:-1]))
        truth = cov(jumps)
        sup = max(np.abs(fc - truth).max(), np.abs(left - truth).max())
        failures += sup > correction
    assert failures <= allowed_failures(delta, reps)


# --------------------------------------------------------------------------
# 6.3.4: LDP-L coverage


def _label_runs(k, n, eps, score, reps, seed, delta=0.1):
    """Coverage of L / L* in exact and bisection modes over ``reps`` draws."""
    rng = np.random.default_rng(seed)
    cov = Coverage(k, score)
    variants = {
        (cls, search): cls(epsilon=eps, delta=delta, search=search, score_bounds=BOUNDS)
        for cls in (LDPLabelCalibrator, LDPLabelStarCalibrator)
        for search in ("exact", "bisection")
    }
    out = {key: np.empty(reps) for key in variants}
    for r in range(reps):
        proba, labels = draw(n, k, rng)
        M = SCORES[score](proba)
        seed_r = int(rng.integers(2**31))
        for key, cal in variants.items():
            cal.fit(M, labels=labels, alpha=ALPHA, random_state=seed_r)
            out[key][r] = cov(cal.threshold_)
    return out, cov, ldp_correction(n, k, eps, delta).label


@pytest.mark.parametrize("score", ["lac", "aps"])
@pytest.mark.parametrize("eps", [1.0, 2.0, 4.0, 8.0])
def test_ldp_l_coverage(score, eps):
    delta, reps, n, k = 0.1, 200, 5000, 10
    out, cov, corr = _label_runs(k, n, eps, score, reps, seed=int(10 * eps))
    allowed = allowed_failures(delta, reps)
    slack = cov.slack
    exact = out[LDPLabelCalibrator, "exact"]
    bisect = out[LDPLabelCalibrator, "bisection"]
    star = out[LDPLabelStarCalibrator, "exact"]
    star_bisect = out[LDPLabelStarCalibrator, "bisection"]
    # Exact mode: >= 1 - alpha - Delta_L (Theorem 3.1), with prob. 1 - delta.
    assert np.sum(exact + slack < 1 - ALPHA - corr) <= allowed
    # Bisection mode: band Delta_L / 2 plus estimation error (spec A5).
    assert np.sum(bisect + slack < 1 - ALPHA - 1.5 * corr) <= allowed
    if 1 - ALPHA + corr < 1:
        # Starred, exact: >= 1 - alpha; bisection: >= 1 - alpha - Delta_L / 2.
        assert np.sum(star + slack < 1 - ALPHA) <= allowed
        assert np.sum(star_bisect + slack < 1 - ALPHA - corr / 2) <= allowed
    else:
        assert (star >= 1 - 1e-9).all()  # +inf: every label
    # Exact mode, continuous scores (LAC): also <= 1 - alpha + Delta_L.
    if score == "lac":
        assert np.sum(exact > 1 - ALPHA + corr) <= allowed
    # Marginal bounds implied by the PAC statement: the mean coverage lies in
    # [(1 - delta)(1 - alpha - Delta), (1 - delta)(1 - alpha + Delta) + delta]
    # (upper for LAC), up to 4.5 Monte Carlo SE.
    se = exact.std(ddof=1) / math.sqrt(reps)
    assert exact.mean() + slack >= (1 - delta) * (1 - ALPHA - corr) - Z * se
    if score == "lac":
        assert exact.mean() <= (1 - delta) * (1 - ALPHA + corr) + delta + Z * se
    se = star.std(ddof=1) / math.sqrt(reps) if star.std() > 0 else 0.0
    assert star.mean() + slack >= (1 - delta) * (1 - ALPHA) - Z * se


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_ldp_l_coverage_binary(eps):
    # k = 2 (Warner's randomized response on the label).
    delta, reps, n, k = 0.1, 200, 5000, 2
    out, cov, corr = _label_runs(k, n, eps, "lac", reps, seed=int(100 * eps))
    allowed = allowed_failures(delta, reps)
    assert np.sum(out[LDPLabelCalibrator, "exact"] < 1 - ALPHA - corr) <= allowed
    assert (
        np.sum(out[LDPLabelCalibrator, "bisection"] < 1 - ALPHA - 1.5 * corr) <= allowed
    )
    assert np.sum(out[LDPLabelStarCalibrator, "exact"] < 1 - ALPHA) <= allowed


# --------------------------------------------------------------------------
# 6.3.5: LDP-S coverage


@pytest.mark.parametrize("score", ["lac", "aps"])
@pytest.mark.parametrize("eps", [2.0, 4.0, 8.0])
def test_ldp_s_coverage(score, eps):
    # search="paper": every round of LDP-S estimates P(S < q_j) within
    # t_S = Delta_S / 2 with probability 1 - delta (two-sided Hoeffding +
    # union bound over T rounds). search="tight" (the default): every round
    # over-estimates P(S < q_j) by at most Delta_S (one-sided). This checks
    # the coverage statements of G4 and, directly, those events.
    delta, reps, n, k, T = 0.1, 300, 20_000, 10, 10
    rng = np.random.default_rng(int(eps * 7))
    cov = Coverage(k, score)
    common = {"epsilon": eps, "delta": delta, "n_groups": T, "score_bounds": BOUNDS}
    cals = {
        (cls, search): cls(search=search, **common)
        for cls in (LDPScoreCalibrator, LDPScoreStarCalibrator)
        for search in ("paper", "tight")
    }
    # final="paper" also needs every interval of length 2^-T to hold at most
    # Delta_S of score mass: true for LAC here (density of the Beta law of
    # p_y below 2, so at most 0.002 per 2^-10), not checkable for APS.
    if score == "lac":
        cals["paper"] = LDPScoreCalibrator(search="paper", final="paper", **common)
    corr = {
        search: ldp_correction(n, k, eps, delta, T, search=search).score
        for search in ("paper", "tight")
    }
    res = {key: np.empty(reps) for key in cals}
    step_failures = {"paper": 0, "tight": 0}
    for r in range(reps):
        proba, labels = draw(n, k, rng)
        scores = SCORES[score](proba)[np.arange(n), labels]
        seed_r = int(rng.integers(2**31))
        for key, cal in cals.items():
            cal.fit(scores, alpha=ALPHA, random_state=seed_r)
            res[key][r] = cov(cal.threshold_)
            if key in ((LDPScoreCalibrator, "paper"), (LDPScoreCalibrator, "tight")):
                search = key[1]
                truth = cov.strict(cal.history_["threshold"])
                err = cal.history_["estimate"] - truth
                if search == "paper":
                    step_failures[search] += np.abs(err).max() > corr[search] / 2 + (
                        cov.slack
                    )
                else:
                    step_failures[search] += err.max() > corr[search] + cov.slack
    allowed = allowed_failures(delta, reps)
    slack = cov.slack
    for search in ("paper", "tight"):
        assert step_failures[search] <= allowed
        plain = res[LDPScoreCalibrator, search]
        assert np.sum(plain + slack < 1 - ALPHA - corr[search]) <= allowed
        star = res[LDPScoreStarCalibrator, search]
        if 1 - ALPHA + corr[search] < 1:
            assert np.sum(star + slack < 1 - ALPHA) <= allowed
        else:
            assert (star >= 1 - 1e-9).all()  # every label
    if "paper" in res:
        assert np.sum(res["paper"] < 1 - ALPHA - corr["paper"]) <= allowed


@pytest.mark.parametrize(
    ("search", "axis", "exact_mean"),
    [
        ("tight", "linear", 0.93579),
        ("paper", "linear", 0.99536),
        ("tight", "logit", 0.93722),
    ],
)
def test_ldp_s_star_conditional_coverage_beta(search, axis, exact_mean):
    # Issue 14, item 2: Beta(2, 5) scores (exact coverage F = Beta(2, 5) cdf),
    # n = 20,000, eps = 4, delta = 0.1, T = 10, R = 400 seeded runs of fresh
    # scores and noise. The guarantee P(F(q) < 1 - alpha) <= delta per run
    # makes the failure count at most Binomial(R, delta): allowed
    # floor(delta R + 4.5 sqrt(delta (1 - delta) R)) = 67 (4.5 binomial SE
    # above the mean, false alarm ~3.4e-6). The mean coverage must match
    # the exact law of the threshold (tests/calibrators/test_ldp_tight.py)
    # within 4.5 Monte Carlo SE.
    from scipy import stats

    delta, reps, n, T = 0.1, 400, 20_000, 10
    dist = stats.beta(2, 5)
    common = {
        "epsilon": 4.0,
        "delta": delta,
        "n_groups": T,
        "score_bounds": BOUNDS,
        "search": search,
        "axis": axis,
    }
    star = LDPScoreStarCalibrator(**common)
    plain = LDPScoreCalibrator(**common)
    corr = ldp_correction(n, 10, 4.0, delta, T, search=search).score
    rng = np.random.default_rng(2024)
    cov_star, cov_plain = np.empty(reps), np.empty(reps)
    for r in range(reps):
        scores = dist.rvs(size=n, random_state=rng)
        seed_r = int(rng.integers(2**31))
        cov_star[r] = dist.cdf(
            star.fit(scores, alpha=ALPHA, random_state=seed_r).threshold_
        )
        cov_plain[r] = dist.cdf(
            plain.fit(scores, alpha=ALPHA, random_state=seed_r).threshold_
        )
    allowed = allowed_failures(delta, reps)
    assert allowed == 67
    assert np.sum(cov_star < 1 - ALPHA) <= allowed
    assert np.sum(cov_plain < 1 - ALPHA - corr) <= allowed
    # Power: plain LDP-S aims at 1 - alpha itself, so the same count against
    # 1 - alpha (no correction) must exceed the allowance: the check can fail.
    assert np.sum(cov_plain < 1 - ALPHA) > allowed
    se = cov_star.std(ddof=1) / math.sqrt(reps)
    assert abs(cov_star.mean() - exact_mean) <= Z * se + 5e-5


def test_ldp_s_star_full_set_at_eps_1():
    # Spec 6.3.5: at eps = 1, the paper's Delta_S = 0.158 > alpha: S* returns
    # +inf. The tight correction, 0.0734 < alpha, gives a finite threshold.
    corr = ldp_correction(20_000, 10, 1.0, 0.1, 10, search="paper").score
    assert corr == pytest.approx(0.158, abs=1e-3)
    proba, labels = draw(20_000, 10, np.random.default_rng(3))
    scores = lac(proba)[np.arange(20_000), labels]
    kwargs = {"epsilon": 1.0, "delta": 0.1, "score_bounds": BOUNDS}
    with pytest.warns(UserWarning, match="every label"):
        cal = LDPScoreStarCalibrator(search="paper", **kwargs)
        cal.fit(scores, alpha=ALPHA, random_state=0)
    assert cal.threshold_ == np.inf
    tight = LDPScoreStarCalibrator(**kwargs).fit(scores, alpha=ALPHA, random_state=0)
    assert tight.correction_ == pytest.approx(0.0734, abs=1e-4)
    assert np.isfinite(tight.threshold_)


# --------------------------------------------------------------------------
# 6.3.6: convergence to non-private conformal prediction


def test_convergence_to_non_private():
    # As n grows, Delta_L and the coverage error shrink. Exact LDP-L's
    # threshold does not depend on delta, so the bound may be evaluated at
    # any delta: with prob. >= 1 - 2 d, |cov_L - cov_clean| <= Delta_L(d) +
    # t_DKW(d), the clean split-CP coverage being within the DKW radius
    # sqrt(ln(2/d)/(2n)) + 1/(n+1) of 1 - alpha. We take d = 1e-3.
    k, eps, d = 10, 4.0, 1e-3
    cov = Coverage(k, "lac")
    rng = np.random.default_rng(11)
    corrections, errors = [], []
    for n, reps in [(5000, 40), (20_000, 20), (200_000, 8)]:
        corr = ldp_correction(n, k, eps, d).label
        dkw = math.sqrt(math.log(2 / d) / (2 * n)) + 1 / (n + 1)
        gaps = np.empty(reps)
        dev = np.empty(reps)
        for r in range(reps):
            proba, labels = draw(n, k, rng)
            M = lac(proba)
            cal = LDPLabelCalibrator(epsilon=eps).fit(
                M, labels=labels, alpha=ALPHA, random_state=r
            )
            clean = np.sort(M[np.arange(n), labels])[math.ceil((n + 1) * 0.9) - 1]
            gaps[r] = abs(cov(cal.threshold_) - cov(clean))
            dev[r] = abs(cov(cal.threshold_) - (1 - ALPHA))
        assert np.sum(gaps > corr + dkw) <= allowed_failures(2 * d, reps)
        # E|cov - (1 - alpha)| <= Delta_L(0.1) + 0.1 (two-sided G3 at delta = 0.1).
        se = dev.std(ddof=1) / math.sqrt(reps)
        assert dev.mean() <= ldp_correction(n, k, eps, 0.1).label + 0.1 + Z * se
        corrections.append(corr)
        errors.append(dev.mean())
    assert corrections == sorted(corrections, reverse=True)
