"""Monte Carlo coverage of the calibrators against exact theory.

Each repetition draws fresh exponential calibration scores, calibrates, and
records the exact conditional coverage ``F(q) = 1 - exp(-q)`` of the
threshold (Rao-Blackwellised: no test draw needed). The mean over R
repetitions has standard error sd/sqrt(R); tolerances are 4.5 SE, a
two-sided false-alarm rate of about 7e-6 per assertion (spec section 6).
"""

import numpy as np
import pytest

from skfedcp.calibrators import (
    AveragingCalibrator,
    CentralCalibrator,
    QuantileOfQuantilesCalibrator,
)

Z = 4.5


def _mc_coverage(calibrator, m, n, alpha, reps, seed, law="exp"):
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(m), n)
    cov = np.empty(reps)
    for r in range(reps):
        if law == "exp":
            scores = rng.exponential(size=m * n)
        else:  # |N(0,1)| with 1% outliers, spec test 28
            scores = np.abs(rng.normal(size=m * n))
            out = rng.random(m * n) < 0.01
            scores[out] += 25 * np.abs(rng.normal(size=out.sum()))
        q = calibrator.fit(scores, ids, alpha=alpha).threshold_
        cov[r] = 1.0 - np.exp(-q) if law == "exp" else np.nan
    return cov


@pytest.mark.parametrize("m, n", [(5, 10), (10, 20), (20, 10)])
def test_qq_coverage_matches_exact_M_quick(m, n, seed):
    reps = 500
    cal = QuantileOfQuantilesCalibrator()
    cov = _mc_coverage(cal, m, n, 0.1, reps, seed)
    M = cal.calibration_info_["coverage"]
    se = cov.std(ddof=1) / np.sqrt(reps)
    assert abs(cov.mean() - M) <= Z * se
    assert cov.mean() >= 0.9 - Z * se  # never significantly below 1 - alpha
    assert M >= 0.9 - 1e-10


@pytest.mark.slow
@pytest.mark.parametrize("m, n", [(5, 10), (10, 20), (50, 20), (100, 10), (10, 100)])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
def test_qq_coverage_matches_exact_M(m, n, alpha, seed):
    reps = 4000
    cal = QuantileOfQuantilesCalibrator()
    cov = _mc_coverage(cal, m, n, alpha, reps, seed)
    M = cal.calibration_info_["coverage"]
    se = cov.std(ddof=1) / np.sqrt(reps)
    assert abs(cov.mean() - M) <= Z * se
    assert cov.mean() >= 1 - alpha - Z * se


@pytest.mark.slow
@pytest.mark.parametrize("m, n", [(5, 10), (50, 20)])
def test_central_coverage_is_rank_over_N_plus_1(m, n, seed):
    reps = 4000
    cal = CentralCalibrator()
    cov = _mc_coverage(cal, m, n, 0.1, reps, seed)
    se = cov.std(ddof=1) / np.sqrt(reps)
    assert abs(cov.mean() - cal.calibration_info_["coverage"]) <= Z * se


def test_avg_over_covers_where_qq_is_tight(seed):
    # Spec test 28: (m, n) = (100, 10); Avg ~0.938 vs QQ ~0.899 (M* = 0.90125).
    reps = 300
    qq = _mc_coverage(QuantileOfQuantilesCalibrator(), 100, 10, 0.1, reps, seed)
    avg = _mc_coverage(AveragingCalibrator(), 100, 10, 0.1, reps, seed)
    se = np.hypot(qq.std(ddof=1), avg.std(ddof=1)) / np.sqrt(reps)
    assert avg.mean() - qq.mean() > 0.02 + Z * se
