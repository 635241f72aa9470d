"""Monte Carlo coverage of FedCQRRegressor: every variant x {central, qq}.

The data law is a finite pool of inputs ``x`` (drawn once, uniform on
[0, 1]) with ``Y | x ~ N(mu(x), sigma(x)^2)``, heteroscedastic and with a
mean the linear-ish quantile models miss. Calibration rows are i.i.d. draws
from this law (``x`` uniform over the pool, fresh ``Y``), so the conformal
guarantees apply exactly, and the coverage of a calibrated interval is
computed exactly as ``mean over the pool of P(l(x) <= Y <= u(x))`` (no test
draw, Rao-Blackwellised). Each repetition redraws the calibration set and
goes through the public ``fit`` / ``predict_interval``.

The mean of R per-repetition coverages has standard error sd / sqrt(R).
Tolerances are 4.5 SE: a one- or two-sided false-alarm rate below 7e-6 per
assertion (spec section 6), about 1e-4 over the assertions of this file.
The expected values are exact theory, not fitted numbers:

* central, one threshold: ``ceil((N+1)(1-alpha)) / (N+1)``;
* QQ, one threshold: ``M(l*, k*)`` from the calibrator's plan;
* asymmetric: each side misses with probability ``1 - c(alpha/2)`` (``c``
  the one-threshold coverage above); as long as no interval is empty the two
  misses are disjoint, so coverage is ``1 - 2 (1 - c(alpha/2))``.
"""

import numpy as np
import pytest
from quantile_forest import RandomForestQuantileRegressor
from scipy.special import ndtr
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.frozen import FrozenEstimator

from skfedcp.calibrators import get_calibrator
from skfedcp.regression import FedCQRRegressor

Z = 4.5
ALPHA = 0.1
POOL_SIZE = 4000


def _mu(x):
    return np.sin(2 * np.pi * x) + 2 * x


def _sigma(x):
    return 0.1 + x


@pytest.fixture(scope="module")
def pool():
    return np.random.default_rng(2024).uniform(size=(POOL_SIZE, 1))


@pytest.fixture(scope="module")
def frozen_pair():
    rng = np.random.default_rng(7)
    x = rng.uniform(size=(1000, 1))
    y = _mu(x[:, 0]) + _sigma(x[:, 0]) * rng.standard_normal(1000)
    return tuple(
        FrozenEstimator(
            GradientBoostingRegressor(
                loss="quantile", alpha=a, n_estimators=40, max_depth=2, random_state=0
            ).fit(x, y)
        )
        for a in (ALPHA / 2, 1 - ALPHA / 2)
    )


def _draw(pool, size, rng):
    x = pool[rng.integers(pool.shape[0], size=size)]
    return x, _mu(x[:, 0]) + _sigma(x[:, 0]) * rng.standard_normal(size)


def _exact_coverage(intervals, pool):
    """P(l(x) <= Y <= u(x)) averaged over the pool; 0 for empty intervals."""
    mu, sigma = _mu(pool[:, 0]), _sigma(pool[:, 0])
    p = ndtr((intervals[:, 1] - mu) / sigma) - ndtr((intervals[:, 0] - mu) / sigma)
    return np.maximum(p, 0.0).mean(), bool(np.all(intervals[:, 0] <= intervals[:, 1]))


def _expected(calibrator, variant, m, n):
    sizes = [n] * m
    cal = get_calibrator(calibrator)
    if variant == "asymmetric":
        side = cal.coverage_bounds(sizes, ALPHA / 2).lower
        return 1 - 2 * (1 - side)
    return cal.coverage_bounds(sizes, ALPHA).lower


def _run(make_reg, pool, m, n, reps, seed, *, fresh_data=False):
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(m), n)
    cov = np.empty(reps)
    nonempty = True
    for r in range(reps):
        X, y = _draw(pool, m * n, rng)
        reg = make_reg(r).fit(X, y, client_ids=ids)
        cov[r], ok = _exact_coverage(reg.predict_interval(pool), pool)
        nonempty &= ok
    return cov, nonempty


def _check(cov, expected, nonempty, *, two_sided=True):
    se = cov.std(ddof=1) / np.sqrt(cov.size)
    # Never significantly below the target (one-sided, 4.5 SE).
    assert cov.mean() >= 1 - ALPHA - Z * se, (cov.mean(), se)
    if two_sided and nonempty:
        # Exact theory (two-sided, 4.5 SE).
        assert abs(cov.mean() - expected) <= Z * se, (cov.mean(), expected, se)


def test_cqr_coverage_quick(pool, frozen_pair, seed):
    lo, hi = frozen_pair
    cov, nonempty = _run(
        lambda r: FedCQRRegressor(estimator_lower=lo, estimator_upper=hi),
        pool,
        20,
        20,
        300,
        seed,
    )
    _check(cov, _expected("qq", "symmetric", 20, 20), nonempty)


@pytest.mark.slow
@pytest.mark.parametrize("calibrator", ["central", "qq"])
@pytest.mark.parametrize("variant", ["symmetric", "asymmetric", "normalized"])
def test_every_variant_covers(pool, frozen_pair, seed, variant, calibrator):
    # The section 5.1 sizes: 50 clients of 20 calibration rows.
    m, n, reps = 50, 20, 2000
    lo, hi = frozen_pair
    cov, nonempty = _run(
        lambda r: FedCQRRegressor(
            estimator_lower=lo,
            estimator_upper=hi,
            conformity_score=variant,
            calibrator=calibrator,
        ),
        pool,
        m,
        n,
        reps,
        seed,
    )
    assert nonempty  # the models never cross here: the asymmetric formula is exact
    _check(cov, _expected(calibrator, variant, m, n), nonempty)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["symmetric", "asymmetric"])
def test_unfrozen_forest_end_to_end(pool, seed, variant):
    # Each repetition draws a fresh data set, splits every client 50/50,
    # trains a quantile forest on the training halves and calibrates with QQ
    # on the other halves (20 clients of 20 calibration rows).
    m, n_rows, reps = 20, 40, 300
    cov, nonempty = _run(
        lambda r: FedCQRRegressor(
            RandomForestQuantileRegressor(
                n_estimators=20, min_samples_leaf=10, random_state=r
            ),
            conformity_score=variant,
            random_state=r,
        ),
        pool,
        m,
        n_rows,
        reps,
        seed,
    )
    _check(cov, _expected("qq", variant, m, n_rows // 2), nonempty)
