"""Randomized response: exact channels, privacy ratio, sampling, de-biasing."""

import math

import numpy as np
import pytest

from skfedcp.privacy import (
    binary_randomized_response,
    binary_randomized_response_probabilities,
    debias_fraction,
    debias_frequencies,
    k_ary_randomized_response,
    k_ary_randomized_response_probabilities,
)

# Monte Carlo tolerance: 4.5 standard errors, a two-sided false-alarm rate of
# about 7e-6 per comparison under the normal approximation (fedcp_qq.md, 6).
Z = 4.5


class TestChannels:
    @pytest.mark.parametrize("k", [2, 3, 10, 100])
    @pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0, 8.0])
    def test_k_ary_channel(self, k, epsilon):
        channel = k_ary_randomized_response_probabilities(n_classes=k, epsilon=epsilon)
        beta = k / (k - 1 + math.exp(epsilon))
        assert channel.shape == (k, k)
        np.testing.assert_allclose(
            np.diag(channel),
            math.exp(epsilon) / (k - 1 + math.exp(epsilon)),
            atol=1e-12,
        )
        off = channel[~np.eye(k, dtype=bool)]
        np.testing.assert_allclose(off, 1 / (k - 1 + math.exp(epsilon)), atol=1e-12)
        np.testing.assert_allclose(off, beta / k, rtol=1e-12)
        np.testing.assert_allclose(channel.sum(axis=1), 1.0, atol=1e-12)
        # Privacy: the largest ratio over inputs i, i' and outputs j is e^eps,
        # not less (that would mean undeclared noise and wrong de-biasing).
        ratio = (channel[:, None, :] / channel[None, :, :]).max()
        assert ratio == pytest.approx(math.exp(epsilon), rel=1e-12)

    @pytest.mark.parametrize("epsilon", [0.01, 0.5, 1.0, 4.0])
    def test_binary_channel(self, epsilon):
        channel = binary_randomized_response_probabilities(epsilon=epsilon)
        p = math.exp(epsilon) / (1 + math.exp(epsilon))
        np.testing.assert_allclose(channel, [[p, 1 - p], [1 - p, p]], rtol=1e-12)
        ratio = (channel[:, None, :] / channel[None, :, :]).max()
        assert ratio == pytest.approx(math.exp(epsilon), rel=1e-12)

    def test_spec_reference_values(self):
        # ldp_conformal.md 6.1: beta(4, 8) = 0.12987; h = (1-beta)/(1+beta).
        channel = k_ary_randomized_response_probabilities(n_classes=8, epsilon=4.0)
        beta = channel[0, 1] * 8
        assert beta == pytest.approx(0.12987, rel=1e-3)
        assert (1 - beta) / (1 + beta) == pytest.approx(0.77011, rel=1e-3)
        # k = 2: h = (e^eps - 1)/(e^eps + 3).
        for eps in (0.5, 1.0, 4.0):
            beta = 2 * binary_randomized_response_probabilities(epsilon=eps)[0, 1]
            h = (math.exp(eps) - 1) / (math.exp(eps) + 3)
            assert (1 - beta) / (1 + beta) == pytest.approx(h, rel=1e-12)

    def test_large_epsilon_no_overflow(self):
        channel = k_ary_randomized_response_probabilities(n_classes=4, epsilon=1000.0)
        np.testing.assert_array_equal(channel, np.eye(4))


class TestSampling:
    def test_k_ary_frequencies(self, seed):
        # k = 5, eps = 1: 100000 draws per input label; each of the 25 output
        # frequencies within Z binomial standard errors of the channel.
        k, eps, n = 5, 1.0, 100_000
        channel = k_ary_randomized_response_probabilities(n_classes=k, epsilon=eps)
        rng = np.random.default_rng(seed)
        for label in range(k):
            noisy = k_ary_randomized_response(
                np.full(n, label), n_classes=k, epsilon=eps, random_state=rng
            )
            freq = np.bincount(noisy, minlength=k) / n
            se = np.sqrt(channel[label] * (1 - channel[label]) / n)
            assert np.all(np.abs(freq - channel[label]) <= Z * se)
        # The spec's simulated row for label 2: [0.149, 0.149, 0.404, ...].
        np.testing.assert_allclose(
            channel[2], [0.149, 0.149, 0.404, 0.149, 0.149], atol=1e-3
        )

    def test_binary_frequencies(self, seed):
        eps, n = 0.8, 200_000
        p = math.exp(eps) / (1 + math.exp(eps))
        rng = np.random.default_rng(seed)
        for bit, expected in ((1, p), (0, 1 - p)):
            noisy = binary_randomized_response(
                np.full(n, bit), epsilon=eps, random_state=rng
            )
            se = math.sqrt(expected * (1 - expected) / n)
            assert abs(noisy.mean() - expected) <= Z * se

    def test_dtypes_and_reproducibility(self):
        bits = np.array([True, False, True, True])
        out = binary_randomized_response(bits, epsilon=0.5, random_state=1)
        assert out.dtype == bool and out.shape == (4,)
        ints = binary_randomized_response([1, 0, 1], epsilon=0.5, random_state=1)
        assert ints.dtype == np.int64
        labels = np.arange(200) % 7
        a = k_ary_randomized_response(labels, n_classes=7, epsilon=0.5, random_state=3)
        b = k_ary_randomized_response(labels, n_classes=7, epsilon=0.5, random_state=3)
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, labels)
        assert a.min() >= 0 and a.max() < 7
        assert k_ary_randomized_response([], n_classes=3, epsilon=1).shape == (0,)

    def test_secure_runs_and_is_not_reproducible(self):
        labels = np.arange(300) % 4
        a = k_ary_randomized_response(
            labels, n_classes=4, epsilon=0.1, random_state="secure"
        )
        b = k_ary_randomized_response(
            labels, n_classes=4, epsilon=0.1, random_state="secure"
        )
        assert a.min() >= 0 and a.max() < 4
        # Two independent runs agree with probability below 0.33^300.
        assert not np.array_equal(a, b)
        bits = binary_randomized_response(
            np.ones(300, dtype=int), epsilon=0.1, random_state="secure"
        )
        assert set(np.unique(bits)) <= {0, 1}
        # Secure k-RR draws follow the channel (1e4 draws, Z standard errors).
        noisy = k_ary_randomized_response(
            np.zeros(10_000, dtype=int), n_classes=3, epsilon=1.0, random_state="secure"
        )
        p = k_ary_randomized_response_probabilities(n_classes=3, epsilon=1.0)[0]
        freq = np.bincount(noisy, minlength=3) / 10_000
        assert np.all(np.abs(freq - p) <= Z * np.sqrt(p * (1 - p) / 10_000))


class TestDebiasing:
    @pytest.mark.parametrize("k", [2, 3, 10])
    @pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
    def test_exact_inverse_of_expectation(self, k, epsilon):
        # E[noisy frequencies] = f @ channel; de-biasing it returns f exactly.
        f = np.random.default_rng(k).dirichlet(np.ones(k))
        channel = k_ary_randomized_response_probabilities(n_classes=k, epsilon=epsilon)
        np.testing.assert_allclose(
            debias_frequencies(f @ channel, n_classes=k, epsilon=epsilon), f, atol=1e-9
        )
        counts = 1000 * f
        np.testing.assert_allclose(
            debias_frequencies(counts @ channel, n_classes=k, epsilon=epsilon),
            counts,
            atol=1e-7,
        )
        p = binary_randomized_response_probabilities(epsilon=epsilon)[0, 0]
        assert debias_fraction(0.3 * p + 0.7 * (1 - p), epsilon=epsilon) == (
            pytest.approx(0.3, abs=1e-9)
        )

    def test_frequencies_unbiased_monte_carlo(self, seed):
        # R = 2000 privatised copies of a fixed label set; the mean de-biased
        # count of each class within Z Monte Carlo standard errors of the truth.
        k, eps, reps = 4, 1.0, 2000
        labels = np.repeat(np.arange(k), [500, 300, 150, 50])
        rng = np.random.default_rng(seed)
        estimates = np.array(
            [
                debias_frequencies(
                    np.bincount(
                        k_ary_randomized_response(
                            labels, n_classes=k, epsilon=eps, random_state=rng
                        ),
                        minlength=k,
                    ),
                    n_classes=k,
                    epsilon=eps,
                )
                for _ in range(reps)
            ]
        )
        se = estimates.std(axis=0, ddof=1) / math.sqrt(reps)
        assert np.all(np.abs(estimates.mean(axis=0) - [500, 300, 150, 50]) <= Z * se)
        np.testing.assert_allclose(estimates.sum(axis=1), 1000.0)

    @pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
    def test_fraction_unbiased_monte_carlo(self, seed, epsilon):
        # Matches the Z_j estimator of LDP-S: c * mean(r) - 1/(e^eps - 1).
        reps, n = 2000, 500
        bits = (np.arange(n) < 150).astype(int)  # true fraction 0.3
        rng = np.random.default_rng(seed)
        noisy = np.array(
            [
                binary_randomized_response(
                    bits, epsilon=epsilon, random_state=rng
                ).mean()
                for _ in range(reps)
            ]
        )
        estimates = debias_fraction(noisy, epsilon=epsilon)
        c = (math.exp(epsilon) + 1) / (math.exp(epsilon) - 1)
        np.testing.assert_allclose(
            estimates, c * noisy - 1 / (math.exp(epsilon) - 1), rtol=1e-9
        )
        se = estimates.std(ddof=1) / math.sqrt(reps)
        assert abs(estimates.mean() - 0.3) <= Z * se

    def test_array_shapes(self):
        freqs = np.full((3, 4), 0.25)
        out = debias_frequencies(freqs, n_classes=4, epsilon=1.0)
        np.testing.assert_allclose(out, 0.25)
        assert isinstance(debias_fraction(0.5, epsilon=1.0), float)
        assert debias_fraction([0.5, 0.6], epsilon=1.0).shape == (2,)


class TestValidation:
    def test_bad_n_classes(self):
        for k in (1, 0):
            with pytest.raises(ValueError, match="n_classes"):
                k_ary_randomized_response([0], n_classes=k, epsilon=1)
            with pytest.raises(ValueError, match="n_classes"):
                k_ary_randomized_response_probabilities(n_classes=k, epsilon=1)
            with pytest.raises(ValueError, match="n_classes"):
                debias_frequencies([1.0], n_classes=k, epsilon=1)
        with pytest.raises(TypeError, match="n_classes"):
            k_ary_randomized_response([0], n_classes=2.0, epsilon=1)

    def test_bad_epsilon(self):
        for eps in (0, -1, math.inf, math.nan):
            with pytest.raises(ValueError, match="epsilon"):
                k_ary_randomized_response([0], n_classes=2, epsilon=eps)
            with pytest.raises(ValueError, match="epsilon"):
                binary_randomized_response([0], epsilon=eps)
            with pytest.raises(ValueError, match="epsilon"):
                debias_fraction(0.5, epsilon=eps)

    def test_bad_labels(self):
        with pytest.raises(ValueError, match="labels"):
            k_ary_randomized_response([0, 3], n_classes=3, epsilon=1)
        with pytest.raises(ValueError, match="labels"):
            k_ary_randomized_response([-1], n_classes=3, epsilon=1)
        with pytest.raises(ValueError, match="labels"):
            k_ary_randomized_response([0.5], n_classes=3, epsilon=1)
        with pytest.raises(ValueError, match="labels"):
            k_ary_randomized_response([[0, 1]], n_classes=3, epsilon=1)
        with pytest.raises(TypeError, match="labels"):
            k_ary_randomized_response(["a"], n_classes=3, epsilon=1)
        with pytest.raises(ValueError, match="bits"):
            binary_randomized_response([0, 2], epsilon=1)

    def test_bad_counts(self):
        with pytest.raises(ValueError, match="noisy_counts_or_freqs"):
            debias_frequencies([0.5, 0.5], n_classes=3, epsilon=1)
        with pytest.raises(ValueError, match="noisy_fraction"):
            debias_fraction(math.nan, epsilon=1)
