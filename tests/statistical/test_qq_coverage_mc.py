"""Monte Carlo checks of the exact QQ coverage M(l, k) and its rank selection.

Each repetition draws fresh calibration scores and one test score, computes
the quantile-of-quantiles threshold and records whether the test score is
below it: a Bernoulli(p) draw. Over R repetitions the frequency has standard
error sqrt(p (1 - p) / R) with p the theoretical value; every tolerance is
4.5 such SE, a two-sided false-alarm rate of about 7e-6 per assertion
(spec section 6). Seeds come from the ``seed`` fixture (SKFEDCP_SEEDS sweeps).
"""

import math

import numpy as np
import pytest

from skfedcp.calibrators._qq._coverage import (
    qq_conditional_tail,
    qq_coverage,
    qq_coverage_unequal,
)
from skfedcp.calibrators._qq._selection import select_qq_ranks

Z = 4.5
CHUNK = 4_000_000  # scores drawn at once, to bound memory


def binomial_tolerance(p, reps):
    """4.5 standard errors of a frequency with success probability p."""
    return Z * math.sqrt(p * (1 - p) / reps)


def qq_thresholds(scores, l, k):
    """Q_k(Q_l(client 1), ..., Q_l(client m)) for scores of shape (R, m, n)."""
    local = np.partition(scores, l - 1, axis=2)[:, :, l - 1]
    return np.partition(local, k - 1, axis=1)[:, k - 1]


def draw(rng, shape, law):
    if law == "exp":
        return rng.exponential(size=shape)
    if law == "uniform":
        return rng.random(size=shape)
    if law == "discrete":  # integers 0..3: many ties
        return rng.integers(0, 4, size=shape).astype(np.float64)
    raise ValueError(law)


def mc_coverage(rng, m, n, l, k, reps, law="exp"):
    """Frequency of {test score <= QQ threshold} over ``reps`` data sets."""
    covered = 0
    batch = max(CHUNK // (m * n), 1)
    for start in range(0, reps, batch):
        r = min(batch, reps - start)
        q = qq_thresholds(draw(rng, (r, m, n), law), l, k)
        covered += np.count_nonzero(draw(rng, r, law) <= q)
    return covered / reps


def mc_coverage_unequal(rng, sizes, ranks, k, reps):
    covered = 0
    batch = max(CHUNK // sum(sizes), 1)
    for start in range(0, reps, batch):
        r = min(batch, reps - start)
        local = np.full((r, len(sizes)), np.inf)  # l_j > n_j: the client sends +inf
        for j, (n_j, l_j) in enumerate(zip(sizes, ranks, strict=True)):
            if l_j <= n_j:
                x = rng.exponential(size=(r, n_j))
                local[:, j] = np.partition(x, l_j - 1, axis=1)[:, l_j - 1]
        q = np.partition(local, k - 1, axis=1)[:, k - 1]
        covered += np.count_nonzero(rng.exponential(size=r) <= q)
    return covered / reps


def mc_conditional_miscoverage(rng, m, n, l, k, reps):
    """alpha_P(D) = 1 - U_(l,k) for each of ``reps`` uniform data sets."""
    out = []
    batch = max(CHUNK // (m * n), 1)
    for start in range(0, reps, batch):
        r = min(batch, reps - start)
        out.append(1.0 - qq_thresholds(rng.random((r, m, n)), l, k))
    return np.concatenate(out)


# Spec test 21: (m, n, l, k) and M.
EXACT_CASES = [
    (5, 10, 9, 3, 0.83175),
    (10, 20, 15, 6, 0.73207),
    (3, 4, 2, 2, 0.39281),
    (20, 5, 4, 12, 0.72002),
]


@pytest.mark.parametrize(("m", "n", "l", "k", "value"), EXACT_CASES)
def test_reference_values(m, n, l, k, value):
    assert qq_coverage(m, n, l, k) == pytest.approx(value, abs=5e-6)


# --------------------------------------------------------------------------
# Quick versions (R = 2e4, a few tenths of a second in total)
# --------------------------------------------------------------------------
QUICK_REPS = 20_000


@pytest.mark.parametrize(("m", "n", "l", "k", "value"), EXACT_CASES)
def test_exact_coverage_quick(m, n, l, k, value, seed):
    rng = np.random.default_rng([seed, 21, m, n])
    M = qq_coverage(m, n, l, k)
    freq = mc_coverage(rng, m, n, l, k, QUICK_REPS)
    assert abs(freq - M) <= binomial_tolerance(M, QUICK_REPS)


def test_discrete_scores_quick(seed):
    # Ties only raise the coverage: about 0.976 against M = 0.832.
    rng = np.random.default_rng([seed, 22])
    M = qq_coverage(5, 10, 9, 3)
    freq = mc_coverage(rng, 5, 10, 9, 3, QUICK_REPS, law="discrete")
    assert freq >= M - binomial_tolerance(M, QUICK_REPS)
    assert freq > 0.95


def test_conditional_tail_quick(seed):
    rng = np.random.default_rng([seed, 25])
    m, n, l, k, alpha = 10, 20, 19, 5, 0.1
    tail = qq_conditional_tail(m, n, l, k, alpha)  # 0.3463
    freq = np.mean(mc_conditional_miscoverage(rng, m, n, l, k, QUICK_REPS) > alpha)
    assert abs(freq - tail) <= binomial_tolerance(tail, QUICK_REPS)


# --------------------------------------------------------------------------
# Full versions
# --------------------------------------------------------------------------
REPS = 200_000


@pytest.mark.slow
@pytest.mark.parametrize(("m", "n", "l", "k", "value"), EXACT_CASES)
def test_exact_coverage(m, n, l, k, value, seed):
    # Spec test 21: exponential scores, one test score per repetition.
    rng = np.random.default_rng([seed, 121, m, n])
    M = qq_coverage(m, n, l, k)
    freq = mc_coverage(rng, m, n, l, k, REPS)
    assert abs(freq - M) <= binomial_tolerance(M, REPS)


@pytest.mark.slow
@pytest.mark.parametrize(("m", "n", "l", "k", "value"), EXACT_CASES)
def test_discrete_scores(m, n, l, k, value, seed):
    # Spec test 22: integers 0..3, coverage >= M (one-sided, 4.5 SE).
    rng = np.random.default_rng([seed, 122, m, n])
    M = qq_coverage(m, n, l, k)
    freq = mc_coverage(rng, m, n, l, k, REPS, law="discrete")
    assert freq >= M - binomial_tolerance(M, REPS)


@pytest.mark.slow
@pytest.mark.parametrize(("m", "n"), [(5, 10), (50, 20), (10, 100)])
def test_selected_pair(m, n, seed):
    # Spec test 23: the selected pair covers M* (within 4.5 SE) and M* >= 0.9.
    reps = 100_000
    rng = np.random.default_rng([seed, 123, m, n])
    sel = select_qq_ranks([n] * m, 0.1)
    assert sel.coverage >= 0.9
    freq = mc_coverage(rng, m, n, sel.local_ranks[0], sel.k, reps)
    assert abs(freq - sel.coverage) <= binomial_tolerance(sel.coverage, reps)


@pytest.mark.slow
def test_unequal_sizes(seed):
    # Spec test 24: k = 3, M = 0.91004; clients of size 5 and 8 send +inf.
    sizes = [5, 10, 20, 40, 15, 8, 30, 12]
    rng = np.random.default_rng([seed, 124])
    sel = select_qq_ranks(sizes, 0.1, local_rank="fixed")  # A.1 ("auto": joint)
    assert sel.k == 3
    freq = mc_coverage_unequal(rng, sizes, sel.local_ranks, sel.k, REPS)
    assert abs(freq - sel.coverage) <= binomial_tolerance(sel.coverage, REPS)
    # A pair that misses the target, to show the test has power.
    M2 = qq_coverage_unequal(sizes, sel.local_ranks, 2)
    freq2 = mc_coverage_unequal(rng, sizes, sel.local_ranks, 2, REPS)
    assert abs(freq2 - M2) <= binomial_tolerance(M2, REPS)


@pytest.mark.slow
def test_unequal_sizes_joint_search(seed):
    # Issue 14, item 1: the joint (c, k) search picks l = [5, 9, 18, 34, 14,
    # 8, 26, 11], k = 6, M = 0.90029. Its empirical coverage over REPS data
    # sets must match M within 4.5 binomial SE (module docstring) and clear
    # 1 - alpha by the same margin; M(k = 5) < 0.9 shows the test has power.
    sizes = [5, 10, 20, 40, 15, 8, 30, 12]
    rng = np.random.default_rng([seed, 126])
    sel = select_qq_ranks(sizes, 0.1, local_rank="joint")
    assert sel.k == 6 and sel.coverage >= 0.9
    freq = mc_coverage_unequal(rng, sizes, sel.local_ranks, sel.k, REPS)
    tol = binomial_tolerance(sel.coverage, REPS)
    assert abs(freq - sel.coverage) <= tol
    assert freq >= 0.9 - tol
    M5 = qq_coverage_unequal(sizes, sel.local_ranks, 5)
    freq5 = mc_coverage_unequal(rng, sizes, sel.local_ranks, 5, REPS)
    assert abs(freq5 - M5) <= binomial_tolerance(M5, REPS)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("m", "n", "l", "k", "alpha"),
    [(10, 20, 19, 5, 0.1), (10, 20, 18, 8, 0.1), (5, 10, 9, 3, 0.2)],
)
def test_conditional_tail(m, n, l, k, alpha, seed):
    # Spec test 25, exact extension: P(alpha_P > alpha) = P(Bin(m, p) >= k).
    rng = np.random.default_rng([seed, 125, l, k])
    tail = qq_conditional_tail(m, n, l, k, alpha)
    freq = np.mean(mc_conditional_miscoverage(rng, m, n, l, k, REPS) > alpha)
    assert abs(freq - tail) <= binomial_tolerance(tail, REPS)


@pytest.mark.slow
@pytest.mark.parametrize("conditional", [True, "exact"])
def test_conditional_selection(conditional, seed):
    # Spec test 25: the selected pair meets P(alpha_P(D) > bound) <= delta, with
    # bound = alpha + sqrt(log(1/delta)/(2N)) for Theorem 3.3 and alpha for
    # the exact rule (where the tail is <= delta by construction).
    m, n, alpha, delta = 10, 20, 0.1, 0.1
    N = m * n
    reps = 100_000
    rng = np.random.default_rng([seed, 126])
    sel = select_qq_ranks([n] * m, alpha, conditional=conditional, delta=delta)
    l, k = sel.local_ranks[0], sel.k
    miscoverage = mc_conditional_miscoverage(rng, m, n, l, k, reps)
    if conditional is True:
        assert l * k >= (1 - alpha) * N
        bound = alpha + math.sqrt(math.log(1 / delta) / (2 * N))
    else:
        bound = alpha
    freq = np.mean(miscoverage > bound)
    assert freq <= delta + binomial_tolerance(delta, reps)
    # Marginal coverage is still M of the chosen pair.
    covered = np.mean(1.0 - miscoverage)  # E[U_(l,k)] = M
    assert abs(covered - sel.coverage) <= Z * miscoverage.std() / math.sqrt(reps)
