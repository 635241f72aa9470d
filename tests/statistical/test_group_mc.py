"""Monte Carlo: group-conditional coverage on a label-shift federation.

The clients differ only in their mix of groups (label shift): within a group
every client's scores follow the same law, ``Exp(scale s_g)``. Each
repetition draws fresh scores on a fixed design (fixed cell sizes, so the
exact ``M_g`` is fixed) and records the exact conditional coverage
``F_g(q_g) = 1 - exp(-q_g / s_g)`` of each group's threshold
(Rao-Blackwellised: no test draw); a client's coverage is the mix of its
groups', ``sum_g pi_jg F_g(q_g)``, ``pi_j`` its own group mix. The mean over
R repetitions has standard error sd / sqrt(R); tolerances are Z = 4.5 SE, a
two-sided false-alarm rate of about 7e-6 per assertion (spec section 6).
"""

import numpy as np
import pytest
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression

from skfedcp import PrivateConformalClassifier
from skfedcp.calibrators import (
    GroupedCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
)

Z = 4.5
ALPHA = 0.1
SCALES = np.array([1.0, 2.0, 4.0])


def _design(m=10, n=40, seed=0):
    """Cell sizes: each client's n rows split by a Dirichlet(0.5) group mix."""
    rng = np.random.default_rng(seed)
    mix = rng.dirichlet(np.full(SCALES.size, 0.5), size=m)
    counts = np.array([rng.multinomial(n, p) for p in mix])
    clients = np.repeat(np.repeat(np.arange(m), SCALES.size), counts.ravel())
    groups = np.repeat(np.tile(np.arange(SCALES.size), m), counts.ravel())
    return clients, groups, counts / n


def _coverage(q, scales):
    return 1.0 - np.exp(-q / scales)


@pytest.mark.parametrize("strategy", ["qq", "central"])
def test_every_group_and_every_client_covers_under_label_shift(strategy, seed):
    clients, groups, pi = _design()
    rng = np.random.default_rng(seed)
    reps = 400
    per_group = np.empty((reps, SCALES.size))
    per_client = np.empty((reps, pi.shape[0]))
    marginal_client = np.empty((reps, pi.shape[0]))
    for r in range(reps):
        scores = rng.exponential(size=groups.size) * SCALES[groups]
        cal = GroupedCalibrator(strategy).fit(
            scores, clients, group_ids=groups, alpha=ALPHA
        )
        per_group[r] = _coverage(cal.threshold_, SCALES)
        per_client[r] = pi @ per_group[r]
        q = QuantileOfQuantilesCalibrator().fit(scores, clients, alpha=ALPHA)
        marginal_client[r] = pi @ _coverage(q.threshold_, SCALES)
    M = cal.coverage_bounds_.lower
    assert np.all(M >= 1 - ALPHA - 1e-12)
    mean, se = per_group.mean(0), per_group.std(0, ddof=1) / np.sqrt(reps)
    # Exact per group (continuous scores): the mean is M_g within Z SE.
    np.testing.assert_array_less(np.abs(mean - M), Z * se)
    # Corollary: every client covers >= 1 - alpha, with no weights.
    c_mean = per_client.mean(0)
    c_se = per_client.std(0, ddof=1) / np.sqrt(reps)
    assert np.all(c_mean >= 1 - ALPHA - Z * c_se)
    # Power: the marginal threshold leaves some client well below target,
    # by more than Z SE of its own Monte Carlo mean (its mean is ~0.838 with
    # SE ~0.0015 on this design, ~40 SE below 1 - alpha and ~8 SE below 0.85).
    m_mean = marginal_client.mean(0)
    m_se = marginal_client.std(0, ddof=1) / np.sqrt(reps)
    assert np.min(m_mean + Z * m_se) < 1 - ALPHA
    assert m_mean.min() < 0.85


def test_dp_qq_groups_cover(seed):
    clients, groups, _ = _design(m=5, n=600, seed=1)
    rng = np.random.default_rng(seed)
    reps = 100
    base = PrivateQuantileOfQuantilesCalibrator(epsilon=10.0, score_bounds=(0, 60))
    cov = np.empty((reps, SCALES.size))
    for r in range(reps):
        scores = rng.exponential(size=groups.size) * SCALES[groups]
        cal = GroupedCalibrator(base).fit(
            scores, clients, group_ids=groups, alpha=ALPHA, random_state=r
        )
        cov[r] = _coverage(cal.threshold_, SCALES)
    lower = cal.coverage_bounds_.lower
    se = cov.std(0, ddof=1) / np.sqrt(reps)
    # Theorem 4.1 per group: >= (1 - gamma alpha) M(l_gamma, k_gamma).
    assert np.all(cov.mean(0) >= lower - Z * se)
    assert np.all(lower >= 1 - ALPHA - 1e-12)


def test_class_conditional_classifier_covers_every_class(seed):
    """Wrapper level: per-class coverage of class-conditional sets, label skew."""
    rng = np.random.default_rng(seed)
    n_classes, m = 4, 10

    def draw(n, p=None):
        y = rng.choice(n_classes, size=n, p=p)
        return rng.normal(size=(n, 2)) + np.c_[np.cos(y), np.sin(y)] * 1.2, y

    X0, y0 = draw(2000)
    model = FrozenEstimator(LogisticRegression().fit(X0, y0))
    mix = rng.dirichlet(np.full(n_classes, 0.5), size=m)
    X_test, y_test = draw(20000)
    reps = 150
    cov = np.empty((reps, n_classes))
    for r in range(reps):
        parts = [draw(60, p) for p in mix]
        X = np.vstack([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        clients = np.repeat(np.arange(m), 60)
        clf = PrivateConformalClassifier(
            model, calibrator="qq", epsilon=None, group_by="class"
        ).fit(X, y, client_ids=clients)
        sets = clf.predict_set(X_test)
        hit = sets[np.arange(y_test.size), y_test]
        cov[r] = [hit[y_test == c].mean() for c in range(n_classes)]
    se = cov.std(0, ddof=1) / np.sqrt(reps)
    # The test rows are drawn once, so their own sampling error is shared by
    # every repetition and does not shrink with reps (se does not measure
    # it): the mean over reps estimates the coverage on this test set, which
    # is the class's coverage within SE sqrt(p (1 - p) / n_c) <=
    # sqrt(alpha (1 - alpha) / n_c) ~ 0.004 for p >= 1 - alpha (a hit's
    # variance given the test row is part of p (1 - p)). The two independent
    # errors add in quadrature.
    n_c = np.bincount(y_test, minlength=n_classes)
    test_se = np.sqrt(ALPHA * (1 - ALPHA) / n_c)
    assert np.all(cov.mean(0) >= 1 - ALPHA - Z * np.sqrt(se**2 + test_se**2))
