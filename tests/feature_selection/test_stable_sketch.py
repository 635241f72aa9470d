"""Stable projections, frequency-moment estimators and the sketch-size rule."""

import warnings

import numpy as np
import pytest

from skfedcp.feature_selection import (
    estimate_frequency_moment,
    required_projection_dim,
    stable_projection,
)
from skfedcp.feature_selection._sketch import (
    _gaussian_projections,
    _log_gm_constant,
    _stable_abs_moment,
)

GOLDEN = [
    [-0.196264308272, 0.443284561533],
    [0.803480920826, 0.809593368502],
    [-1.108875537302, -1.487330148648],
]


class TestProjection:
    def test_golden_values(self):
        # The spec prints 12 decimals: agreement to half a unit of the last
        # digit (rtol 1e-12 would be tighter than the printed precision).
        P = stable_projection(0, (0,), 3, 2)
        np.testing.assert_allclose(P, GOLDEN, rtol=0, atol=5e-13)

    def test_same_seed_and_key_identical_other_key_differs(self):
        a = stable_projection(2**127 + 5, (3,), 7, 5)
        assert np.array_equal(a, stable_projection(2**127 + 5, (3,), 7, 5))
        assert not np.any(a == stable_projection(2**127 + 5, (4,), 7, 5))
        assert not np.any(a == stable_projection(2**127 + 6, (3,), 7, 5))

    @pytest.mark.parametrize("shape", [(3, 5), (4, 4), (1, 1)])
    def test_batched_generation_is_bit_identical(self, shape):
        batch = _gaussian_projections(11, range(10, 14), *shape)
        for row, j in enumerate(range(10, 14)):
            assert np.array_equal(batch[row], stable_projection(11, (j,), *shape))

    def test_gaussian_law_has_variance_two(self, seed):
        # 10**6 draws: sd of the sample variance is 2 sqrt(2 / 10**6) = 0.0028,
        # so [1.99, 2.01] is +/- 3.5 SE; E|X|^(+/-0.3) has SE < 0.1 %.
        z = stable_projection(seed, (0,), 1000, 1000).ravel()
        assert 1.99 <= z.var() <= 2.01
        for lam in (-0.3, 0.3):
            np.testing.assert_allclose(
                np.mean(np.abs(z) ** lam), _stable_abs_moment(2.0, lam), rtol=5e-3
            )

    @pytest.mark.parametrize("alpha", [0.95, 1.05, 1.5])
    def test_cms_fractional_moments(self, alpha, seed):
        # 2 * 10**6 draws; E|X|^(+/-0.3) has a Monte Carlo SE below 0.2 %
        # (variance finite since 0.6 < alpha), so 1.5 % is > 7 SE.
        s = stable_projection(seed, (1,), 2000, 1000, alpha=alpha).ravel()
        for lam in (-0.3, 0.3):
            np.testing.assert_allclose(
                np.mean(np.abs(s) ** lam), _stable_abs_moment(alpha, lam), rtol=0.015
            )

    def test_cms_alpha_one_is_cauchy(self, seed):
        s = stable_projection(seed, (0,), 1000, 200, alpha=1.0).ravel()
        # Median of |Cauchy| is 1; SE of the sample median ~ 0.0025.
        assert abs(np.median(np.abs(s)) - 1.0) < 0.015

    def test_errors(self):
        with pytest.raises(ValueError, match="seed"):
            stable_projection(2**128, (0,), 2, 2)
        with pytest.raises(TypeError, match="seed"):
            stable_projection(1.5, (0,), 2, 2)
        with pytest.raises(ValueError, match="alpha"):
            stable_projection(0, (0,), 2, 2, alpha=2.5)
        with pytest.raises(ValueError, match="n_projections"):
            stable_projection(0, (0,), 0, 2)


class TestEstimators:
    @pytest.mark.parametrize(
        "ell, value", [(2, 1.273240), (10, 0.701160), (50, 0.589220)]
    )
    def test_gm_constant(self, ell, value):
        assert abs(np.exp(ell * _log_gm_constant(2.0, ell)) - value) < 1e-5

    def test_gm_constant_limit(self):
        assert abs(np.exp(1e5 * _log_gm_constant(2.0, 1e5)) - 0.561459) < 1e-4

    @pytest.mark.parametrize("estimator", ["geometric", "mean_square", "median"])
    def test_zero_sketch_gives_zero_silently(self, estimator):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert estimate_frequency_moment(np.zeros(20), estimator=estimator) == 0.0

    def test_geometric_needs_two_projections(self):
        with pytest.raises(ValueError, match="n_projections >= 2"):
            estimate_frequency_moment(np.ones(1))
        assert estimate_frequency_moment(np.ones(1), estimator="mean_square") == 0.5

    @pytest.mark.parametrize("estimator", ["geometric", "mean_square", "median"])
    def test_scale_equivariance(self, estimator, seed):
        e = np.random.default_rng(seed).normal(size=(30, 4))
        base = estimate_frequency_moment(e, estimator=estimator)
        scaled = estimate_frequency_moment(3.7 * e, estimator=estimator)
        np.testing.assert_allclose(scaled, 3.7**2 * base, rtol=1e-12)

    def test_scale_equivariance_fractional_alpha(self, seed):
        e = np.random.default_rng(seed).standard_cauchy(size=40)
        base = estimate_frequency_moment(e, alpha=1.05)
        np.testing.assert_allclose(
            estimate_frequency_moment(2 * e, alpha=1.05), 2**1.05 * base, rtol=1e-12
        )

    def test_axis_and_shapes(self, seed):
        e = np.random.default_rng(seed).normal(size=(4, 25))
        np.testing.assert_allclose(
            estimate_frequency_moment(e, axis=1), estimate_frequency_moment(e.T)
        )
        assert np.ndim(estimate_frequency_moment(e[0])) == 0

    def test_errors(self):
        with pytest.raises(ValueError, match="estimator"):
            estimate_frequency_moment(np.ones(4), estimator="harmonic")
        with pytest.raises(ValueError, match="alpha=2"):
            estimate_frequency_moment(np.ones(4), alpha=1.5, estimator="mean_square")


class TestRequiredProjectionDim:
    @pytest.mark.parametrize(
        "eps, delta, gm, am",
        [
            (0.5, 0.05, 205, 30),
            (0.3, 0.05, 501, 85),
            (0.2, 0.05, 1054, 191),
            (0.2, 0.01, 1513, 334),
            (0.1, 0.05, 3925, 768),
            (0.1, 0.01, 5637, 1330),
            (0.05, 0.05, 15127, 3073),
        ],
    )
    def test_spec_table(self, eps, delta, gm, am):
        assert required_projection_dim(eps, delta) == gm
        assert required_projection_dim(eps, delta, estimator="mean_square") == am

    def test_monotone(self):
        sizes = [required_projection_dim(e, 0.05) for e in (0.6, 0.4, 0.25)]
        assert sizes == sorted(sizes)

    def test_errors(self):
        with pytest.raises(ValueError, match="eps"):
            required_projection_dim(1.0, 0.05)
        with pytest.raises(ValueError, match="delta"):
            required_projection_dim(0.1, 0.0)
        with pytest.raises(TypeError, match="eps"):
            required_projection_dim("0.1", 0.05)
        with pytest.raises(ValueError, match="estimator"):
            required_projection_dim(0.1, 0.05, estimator="median")
        with pytest.raises(ValueError, match="alpha=2"):
            required_projection_dim(0.1, 0.05, alpha=1.5, estimator="mean_square")
