"""Random sources: seeded NumPy for research, exact OS-secure sampling for use."""

import math

import numpy as np
import pytest
from scipy import stats

from skfedcp.privacy import exponential_mechanism, private_quantile
from skfedcp.privacy._randomness import check_random_source


class TestCheckRandomSource:
    def test_int_seeds_are_reproducible(self):
        a = check_random_source(7).random(5)
        b = check_random_source(np.int64(7)).random(5)
        np.testing.assert_array_equal(a, b)
        assert not check_random_source(7).secure

    def test_generators_are_used_in_place(self):
        rng = np.random.default_rng(0)
        first = check_random_source(rng).random(3)
        second = check_random_source(rng).random(3)
        assert not np.array_equal(first, second)
        legacy = np.random.RandomState(0)
        draws = check_random_source(legacy).integers(5, 100)
        assert draws.min() >= 0 and draws.max() < 5

    def test_none_is_fresh_and_not_global(self):
        # Reading the legacy global state is the point of this test.
        state = np.random.get_state()[1].copy()  # noqa: NPY002
        a = check_random_source(None).random(4)
        b = check_random_source(None).random(4)
        assert not np.array_equal(a, b)
        np.testing.assert_array_equal(np.random.get_state()[1], state)  # noqa: NPY002

    def test_secure_is_not_reproducible(self):
        source = check_random_source("secure")
        assert source.secure
        a, b = source.random(8), check_random_source("secure").random(8)
        assert not np.array_equal(a, b)  # equal with probability 2^-424
        kwargs = {"epsilon": 0.01, "bounds": (0, 1), "n_bins": 1000}
        draws = {private_quantile([0.5], 0.5, random_state="secure", **kwargs)}
        for _ in range(9):
            draws.add(private_quantile([0.5], 0.5, random_state="secure", **kwargs))
        assert len(draws) > 1  # 10 near-uniform draws on 1000 edges
        seeded = {
            private_quantile([0.5], 0.5, random_state=4, **kwargs) for _ in range(5)
        }
        assert len(seeded) == 1

    @pytest.mark.parametrize("bad", ["os", "SECURE", 1.5, True, [1, 2]])
    def test_bad_random_state(self, bad):
        with pytest.raises((TypeError, ValueError), match="random_state"):
            check_random_source(bad)

    def test_negative_seed(self):
        with pytest.raises(ValueError, match="random_state"):
            check_random_source(-1)


class TestSecureSampling:
    def test_exact_bernoulli_and_integers(self):
        source = check_random_source("secure")
        assert not source.bernoulli(0.0, 200).any()
        assert source.bernoulli(1.0, 200).all()
        ints = source.integers(3, 3000)
        assert set(np.unique(ints)) == {0, 1, 2}
        u = source.random(1000)
        assert ((u >= 0) & (u < 1)).all()

    def test_bernoulli_frequency(self):
        # 20000 secure draws at p = 0.3; 4.5 binomial standard errors
        # (false-alarm rate about 7e-6; the source cannot be seeded).
        draws = check_random_source("secure").bernoulli(0.3, 20_000)
        assert abs(draws.mean() - 0.3) <= 4.5 * math.sqrt(0.3 * 0.7 / 20_000)

    def test_tiny_probabilities_are_reachable(self):
        # Exact integer sampling: a candidate of probability ~4e-44 owns the
        # top of the integer range, unlike with a 53-bit uniform or Gumbel-max.
        source = check_random_source("secure")
        log_weights = np.array([0.0, -100.0])
        source._rng.randrange = lambda total: total - 1
        assert source.choice_from_log_weights(log_weights) == 1
        source._rng.randrange = lambda total: 0
        assert source.choice_from_log_weights(log_weights) == 0
        # Zero-probability (underflowed) candidates are never returned.
        source._rng.randrange = lambda total: total - 1
        assert source.choice_from_log_weights(np.array([0.0, -1e4, -1.0])) == 2

    def test_categorical_matches_law(self):
        # 4000 secure draws against the exact softmax; chi-square at 1e-6.
        log_weights = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
        source = check_random_source("secure")
        draws = [source.choice_from_log_weights(log_weights) for _ in range(4000)]
        observed = np.bincount(draws, minlength=4)
        assert (
            stats.chisquare(observed, 4000 * np.array([0.1, 0.2, 0.3, 0.4])).pvalue
            > 1e-6
        )

    def test_secure_with_many_candidates(self):
        utility = -np.abs(np.linspace(-5, 5, 100_001))
        index = exponential_mechanism(
            utility, epsilon=10.0, sensitivity=1.0, random_state="secure"
        )
        assert 0 <= index <= 100_000
