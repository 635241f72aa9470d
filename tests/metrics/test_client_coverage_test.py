"""client_coverage_test: exact p-values, the corrections, error rates."""

import itertools

import numpy as np
import pytest
from scipy import stats

from skfedcp.metrics import client_coverage_test


def _hits(counts):
    """covered vector and client ids from [(n_j, c_j), ...]."""
    covered, ids = [], []
    for j, (n, c) in enumerate(counts):
        covered += [1] * c + [0] * (n - c)
        ids += [j] * n
    return np.array(covered), np.array(ids)


@pytest.mark.parametrize("n, c", [(1, 0), (1, 1), (10, 7), (50, 45), (200, 150)])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.3])
def test_pvalue_is_the_exact_binomial_lower_tail(n, c, alpha):
    covered, ids = _hits([(n, c)])
    res = client_coverage_test(covered, ids, alpha=alpha, correction="none")
    expected = stats.binomtest(c, n, 1 - alpha, alternative="less").pvalue
    assert res.pvalues[0] == pytest.approx(expected, rel=1e-12, abs=1e-300)
    # and against the sum of the binomial pmf, by hand
    by_hand = sum(stats.binom.pmf(k, n, 1 - alpha) for k in range(c + 1))
    assert res.pvalues[0] == pytest.approx(by_hand, rel=1e-10)


def _holm_brute(p):
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adj = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, (m - rank) * p[i])
        adj[i] = min(running, 1.0)
    return adj


def _bh_brute(p):
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adj = [0.0] * m
    for rank, i in enumerate(order):
        adj[i] = min(min(m / (r + 1) * p[order[r]] for r in range(rank, m)), 1.0)
    return adj


@pytest.mark.parametrize("seed", range(5))
def test_corrections_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    counts = [(int(n), int(rng.integers(0, n + 1))) for n in rng.integers(5, 60, 7)]
    covered, ids = _hits(counts)
    raw = client_coverage_test(covered, ids, alpha=0.1, correction="none").pvalues
    holm = client_coverage_test(covered, ids, alpha=0.1, correction="holm")
    bh = client_coverage_test(covered, ids, alpha=0.1, correction="bh")
    np.testing.assert_allclose(holm.adjusted_pvalues, _holm_brute(raw), rtol=1e-12)
    np.testing.assert_allclose(bh.adjusted_pvalues, _bh_brute(raw), rtol=1e-12)
    assert np.array_equal(holm.below, holm.adjusted_pvalues <= 0.05)


def test_holm_family_wise_error_over_every_outcome():
    # Three clients of 20 rows, each exactly at the target 0.75: enumerate every
    # outcome (c_1, c_2, c_3) and add up the probability of any flag. Holm keeps
    # it at most the significance level; with no correction it is larger.
    n, target = 20, 0.75
    pmf = stats.binom.pmf(np.arange(n + 1), n, target)
    fwer = {"holm": 0.0, "none": 0.0}
    for cs in itertools.product(range(n + 1), repeat=3):
        covered, ids = _hits([(n, c) for c in cs])
        prob = float(np.prod(pmf[list(cs)]))
        for correction in fwer:
            res = client_coverage_test(
                covered, ids, alpha=0.25, significance=0.1, correction=correction
            )
            fwer[correction] += prob * bool(res.below.any())
    assert fwer["holm"] <= 0.1
    assert fwer["none"] > fwer["holm"]  # the correction is what keeps it


def test_detects_an_undercovering_client_and_spares_the_others():
    # 20 clients of 400 rows at coverage 0.9, one at 0.75. Monte Carlo over 200
    # draws: the honest clients are flagged in at most 5% of draws (+ 3 MC SE
    # of a proportion at 0.05 over 200 draws: 3 * sqrt(.05 * .95 / 200) = 0.046),
    # and the shifted one in at least 95% of draws. Its power is ~1: Holm
    # flags the smallest p-value when it is <= 0.05 / 21, i.e. when it covers
    # at most 341 of its 400 rows (P(Binom(400, 0.9) <= 341) <= 0.05 / 21),
    # and P(Binom(400, 0.75) > 341) = 2e-7, so a miss in any of the 200
    # draws has probability <= 4e-5: it is caught in every draw.
    rng = np.random.default_rng(0)
    false, caught = 0, 0
    for _ in range(200):
        rates = np.r_[np.full(20, 0.9), 0.75]
        covered = (rng.uniform(size=(21, 400)) < rates[:, None]).ravel()
        ids = np.repeat(np.arange(21), 400)
        res = client_coverage_test(covered, ids, alpha=0.1)
        false += bool(res.below[:20].any())
        caught += bool(res.below[20])
    assert false / 200 <= 0.05 + 0.046
    assert caught / 200 >= 0.95
    assert caught == 200


def test_tolerance_lowers_the_target():
    covered, ids = _hits([(1000, 890)])
    strict = client_coverage_test(covered, ids, alpha=0.1)
    loose = client_coverage_test(covered, ids, alpha=0.1, tolerance=0.02)
    assert loose.target == pytest.approx(0.88)
    assert loose.pvalues[0] > strict.pvalues[0]


def test_table_and_frame():
    covered, ids = _hits([(100, 90), (100, 60)])
    res = client_coverage_test(covered, ids, alpha=0.1)
    text = repr(res)
    assert "1 of 2 clients below 0.9" in text
    assert text.splitlines()[-1].split()[0] == "1"
    frame = res.to_frame()
    assert list(frame.columns) == [
        "n_samples",
        "coverage",
        "pvalue",
        "adjusted_pvalue",
        "below",
    ]
    assert frame["below"].tolist() == [False, True]
    none = client_coverage_test(*_hits([(100, 95)]), alpha=0.1)
    assert repr(none).startswith("ClientCoverageTest: 0 of 1 clients")


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"covered": [[1, 0]]}, ValueError, "covered must be 1-D"),
        ({"covered": [2, 1]}, ValueError, "booleans or 0/1"),
        ({"covered": ["a", "b"]}, ValueError, "booleans or 0/1"),
        ({"alpha": 1.5}, ValueError, "alpha"),
        ({"tolerance": 0.95}, ValueError, "tolerance must be in"),
        ({"tolerance": -0.1}, ValueError, "tolerance must be in"),
        ({"tolerance": "x"}, TypeError, "tolerance must be a number"),
        ({"significance": 0.0}, ValueError, "significance must be in"),
        ({"correction": "bonf"}, ValueError, "correction must be one of"),
        ({"client_ids": [0]}, ValueError, "client_ids"),
    ],
)
def test_bad_inputs(kwargs, error, match):
    args = {"covered": [1, 0], "client_ids": [0, 1], "alpha": 0.1, **kwargs}
    covered, ids = args.pop("covered"), args.pop("client_ids")
    with pytest.raises(error, match=match):
        client_coverage_test(covered, ids, **args)
