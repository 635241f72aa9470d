"""Exponential mechanism: exact law, privacy ratio, log-space stability, sampler."""

import math

import numpy as np
import pytest
from scipy import stats

from skfedcp.privacy import exponential_mechanism, exponential_mechanism_probabilities


class TestProbabilities:
    def test_formula(self):
        utility = np.array([1.0, 3.0, -2.0, 0.5])
        p = exponential_mechanism_probabilities(utility, epsilon=0.7, sensitivity=2.0)
        expected = np.exp(0.7 * utility / (2 * 2.0))
        np.testing.assert_allclose(p, expected / expected.sum(), rtol=1e-14)
        log_p = exponential_mechanism_probabilities(
            utility, epsilon=0.7, sensitivity=2.0, log=True
        )
        np.testing.assert_allclose(np.exp(log_p), p, rtol=1e-14)

    def test_larger_utility_is_more_likely(self):
        p = exponential_mechanism_probabilities(
            [0.0, 1.0, 2.0], epsilon=1.0, sensitivity=1.0
        )
        assert p[0] < p[1] < p[2]

    def test_equal_utilities_are_uniform(self):
        p = exponential_mechanism_probabilities([4.0] * 5, epsilon=3.0, sensitivity=1.0)
        np.testing.assert_allclose(p, 0.2)

    def test_no_overflow(self):
        # eps * utility far beyond exp's range: finite log-probabilities.
        utility = -np.arange(100_000, dtype=float)
        log_p = exponential_mechanism_probabilities(
            utility, epsilon=1e9, sensitivity=1.0, log=True
        )
        assert log_p[0] == 0.0
        assert np.isfinite(log_p).all()
        huge = exponential_mechanism_probabilities(
            [0.0, -1e300], epsilon=1e300, sensitivity=1e-300, log=True
        )
        assert huge[0] == 0.0 and huge[1] == -math.inf

    def test_privacy_ratio(self, seed):
        # Utilities moving by at most the sensitivity: ratio <= e^eps.
        rng = np.random.default_rng(seed)
        for _ in range(200):
            k = int(rng.integers(2, 20))
            eps, sens = rng.uniform(0.05, 10), rng.uniform(0.1, 5)
            u = rng.normal(scale=5, size=k)
            v = u + rng.uniform(-sens, sens, size=k)
            a = exponential_mechanism_probabilities(
                u, epsilon=eps, sensitivity=sens, log=True
            )
            b = exponential_mechanism_probabilities(
                v, epsilon=eps, sensitivity=sens, log=True
            )
            assert np.abs(a - b).max() <= eps * (1 + 1e-12)
        u = np.zeros(3)
        v = np.array([1.0, -1.0, -1.0])
        a = exponential_mechanism_probabilities(
            u, epsilon=2.0, sensitivity=1.0, log=True
        )
        b = exponential_mechanism_probabilities(
            v, epsilon=2.0, sensitivity=1.0, log=True
        )
        # By hand: |log(1/3) - (-1 - log(e + 2/e))| = 1 + log(e + 2/e) - log 3.
        expected = 1 + math.log(math.e + 2 / math.e) - math.log(3)
        assert np.abs(a - b).max() == pytest.approx(expected, rel=1e-12)


class TestSampling:
    def test_sampler_matches_law(self, seed):
        # 20000 seeded draws; chi-square test at false-alarm rate 1e-4.
        utility = np.array([0.0, 1.0, 2.0, 2.0, -1.0])
        p = exponential_mechanism_probabilities(utility, epsilon=1.5, sensitivity=1.0)
        rng = np.random.default_rng(seed)
        draws = [
            exponential_mechanism(
                utility, epsilon=1.5, sensitivity=1.0, random_state=rng
            )
            for _ in range(20_000)
        ]
        observed = np.bincount(draws, minlength=5)
        assert stats.chisquare(observed, 20_000 * p).pvalue > 1e-4

    def test_secure_sampler_matches_law(self):
        # Not seedable: 3000 draws, chi-square at false-alarm rate 1e-6.
        utility = np.array([0.0, 1.0, 2.0, -1.0])
        p = exponential_mechanism_probabilities(utility, epsilon=2.0, sensitivity=1.0)
        draws = [
            exponential_mechanism(
                utility, epsilon=2.0, sensitivity=1.0, random_state="secure"
            )
            for _ in range(3000)
        ]
        observed = np.bincount(draws, minlength=4)
        assert stats.chisquare(observed, 3000 * p).pvalue > 1e-6

    def test_huge_epsilon_is_argmax(self, seed):
        utility = [0.0, 5.0, 1.0, 5.0]
        picks = {
            exponential_mechanism(
                utility, epsilon=1e9, sensitivity=1.0, random_state=seed + s
            )
            for s in range(40)
        }
        assert picks == {1, 3}  # ties split at random (each missed w.p. 2^-40)

    def test_reproducible(self):
        kwargs = {"epsilon": 0.3, "sensitivity": 1.0}
        utility = np.zeros(50)
        a = [
            exponential_mechanism(utility, random_state=s, **kwargs) for s in range(20)
        ]
        b = [
            exponential_mechanism(utility, random_state=s, **kwargs) for s in range(20)
        ]
        assert a == b
        rs = [
            exponential_mechanism(
                utility, random_state=np.random.RandomState(s), **kwargs
            )
            for s in range(20)
        ]
        assert all(0 <= r < 50 for r in rs)


class TestValidation:
    def test_bad_inputs(self):
        with pytest.raises(ValueError, match="epsilon"):
            exponential_mechanism([1.0, 2.0], epsilon=0, sensitivity=1)
        with pytest.raises(ValueError, match="epsilon"):
            exponential_mechanism([1.0, 2.0], epsilon=math.inf, sensitivity=1)
        with pytest.raises(ValueError, match="sensitivity"):
            exponential_mechanism([1.0, 2.0], epsilon=1, sensitivity=0)
        with pytest.raises(TypeError, match="sensitivity"):
            exponential_mechanism([1.0, 2.0], epsilon=1, sensitivity=None)
        with pytest.raises(ValueError, match="utility"):
            exponential_mechanism([1.0, math.nan], epsilon=1, sensitivity=1)
        with pytest.raises(ValueError, match="utility"):
            exponential_mechanism([], epsilon=1, sensitivity=1)
        with pytest.raises(ValueError, match="utility"):
            exponential_mechanism([[1.0, 2.0]], epsilon=1, sensitivity=1)
