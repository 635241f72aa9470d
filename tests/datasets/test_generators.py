"""Synthetic generators: shapes, seeds, and the structure they promise."""

import os

import numpy as np
import pytest

from skfedcp.datasets import make_federated_regression, make_romano_regression
from skfedcp.datasets._generators import _romano_draw


@pytest.fixture
def seed():
    """Default 42; set SKFEDCP_TEST_SEED to sweep other seeds."""
    return int(os.environ.get("SKFEDCP_TEST_SEED", 42))


class TestFederatedRegression:
    def test_shapes(self, seed):
        X, y, client_ids = make_federated_regression(
            n_clients=4, n_per_client=25, n_features=3, random_state=seed
        )
        assert X.shape == (100, 3) and y.shape == (100,)
        assert np.bincount(client_ids).tolist() == [25] * 4
        assert np.all(np.diff(client_ids) >= 0)  # grouped by client

    def test_unequal_clients(self, seed):
        _, _, client_ids = make_federated_regression(
            n_clients=3, n_per_client=[5, 1, 9], random_state=seed
        )
        assert np.bincount(client_ids).tolist() == [5, 1, 9]

    def test_seed_determinism(self, seed):
        a = make_federated_regression(heterogeneity=1.0, random_state=seed)
        b = make_federated_regression(heterogeneity=1.0, random_state=seed)
        c = make_federated_regression(heterogeneity=1.0, random_state=seed + 1)
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v)
        assert not np.array_equal(a[0], c[0])

    def test_heterogeneity_shifts_client_means(self, seed):
        # Per-client means of X: with heterogeneity 0 they scatter with
        # standard error 1 / sqrt(200) ~ 0.07 per coordinate; with 3 the
        # offsets have standard deviation 3.
        def spread(h):
            X, _, ids = make_federated_regression(
                n_clients=20, n_per_client=200, heterogeneity=h, random_state=seed
            )
            means = np.array([X[ids == k].mean(axis=0) for k in range(20)])
            return means.std(axis=0).mean()

        assert spread(0.0) < 0.15
        assert spread(3.0) > 1.5

    def test_shared_linear_model(self, seed):
        # Same coefficients everywhere: one pooled least-squares fit leaves
        # residuals of standard deviation ~noise on every client.
        X, y, ids = make_federated_regression(
            n_clients=5, n_per_client=400, noise=0.5, heterogeneity=2.0,
            random_state=seed,
        )  # fmt: skip
        design = np.column_stack([np.ones(len(y)), X])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        residuals = y - design @ coef
        for k in range(5):
            # Sample sd of 400 normal draws: relative standard error ~3.5%.
            assert abs(residuals[ids == k].std() - 0.5) < 0.1

    @pytest.mark.parametrize(
        "kwargs, error, match",
        [
            ({"n_clients": 0}, ValueError, "n_clients"),
            ({"n_per_client": 0}, ValueError, "n_per_client"),
            ({"n_clients": 2, "n_per_client": [3]}, ValueError, "shape"),
            ({"n_clients": 2, "n_per_client": [3, 0]}, ValueError, ">= 1"),
            ({"noise": -1.0}, ValueError, "noise"),
            ({"heterogeneity": "big"}, TypeError, "heterogeneity"),
            ({"n_features": 1.5}, TypeError, "n_features"),
        ],
    )
    def test_errors(self, kwargs, error, match):
        with pytest.raises(error, match=match):
            make_federated_regression(**kwargs)


class TestRomanoRegression:
    def test_shapes_and_support(self, seed):
        X, y = make_romano_regression(1000, random_state=seed)
        assert X.shape == (1000, 1) and y.shape == (1000,)
        assert X.min() >= 1.0 and X.max() <= 5.0

    def test_seed_determinism(self, seed):
        X1, y1 = make_romano_regression(50, random_state=seed)
        X2, y2 = make_romano_regression(50, random_state=seed)
        np.testing.assert_array_equal(X1, X2)
        np.testing.assert_array_equal(y1, y2)
        _, y3 = make_romano_regression(50, random_state=seed + 1)
        assert not np.array_equal(y1, y3)

    def test_outlier_fraction(self, seed):
        # The outlier indicator 1{U < 0.01} is Bernoulli(0.01): over n = 200,000
        # rows its mean has binomial standard error sqrt(0.01 * 0.99 / n) =
        # 2.2e-4. A 4-standard-error tolerance gives a false-alarm rate of
        # about 6e-5 per seed.
        n = 200_000
        X, y, outlier = _romano_draw(n, np.random.RandomState(seed))
        se = np.sqrt(0.01 * 0.99 / n)
        assert abs(outlier.mean() - 0.01) < 4 * se
        # The public generator makes the same draws.
        X_pub, y_pub = make_romano_regression(n, random_state=seed)
        np.testing.assert_array_equal(X_pub, X)
        np.testing.assert_array_equal(y_pub, y)
        # Rows without the outlier term are a Poisson(<= 1.1) count plus noise
        # of sd <= 0.15, so they stay well inside [-2, 15]; the outlier term
        # (sd 25) reaches far beyond.
        assert np.abs(y[~outlier]).max() < 15
        assert np.abs(y[outlier]).max() > 20

    @pytest.mark.parametrize("n_samples", [0, -3])
    def test_bad_n_samples(self, n_samples):
        with pytest.raises(ValueError, match="n_samples"):
            make_romano_regression(n_samples)
