"""Partitioners: sizes, determinism by seed, and Dirichlet label skew."""

import os

import numpy as np
import pandas as pd
import pytest

from skfedcp.datasets import partition_by_column, partition_dirichlet, partition_iid


@pytest.fixture
def seed():
    """Default 42; set SKFEDCP_TEST_SEED to sweep other seeds."""
    return int(os.environ.get("SKFEDCP_TEST_SEED", 42))


class TestPartitionIID:
    @pytest.mark.parametrize("n_samples, n_clients", [(10, 3), (100, 10), (7, 7)])
    def test_equal_sizes(self, n_samples, n_clients, seed):
        client_ids = partition_iid(n_samples, n_clients, random_state=seed)
        assert client_ids.shape == (n_samples,) and client_ids.dtype.kind == "i"
        counts = np.bincount(client_ids, minlength=n_clients)
        assert counts.sum() == n_samples and counts.max() - counts.min() <= 1
        assert counts.min() >= 1

    def test_given_sizes(self, seed):
        client_ids = partition_iid(10, 3, sizes=[5, 3, 2], random_state=seed)
        assert np.bincount(client_ids).tolist() == [5, 3, 2]

    def test_seed_determinism(self, seed):
        a = partition_iid(50, 5, random_state=seed)
        np.testing.assert_array_equal(a, partition_iid(50, 5, random_state=seed))
        assert not np.array_equal(a, partition_iid(50, 5, random_state=seed + 1))

    def test_rows_are_shuffled(self, seed):
        # Not a block split: client 0 does not just take the first rows.
        client_ids = partition_iid(1000, 2, random_state=seed)
        assert 0 < client_ids[:500].sum() < 500

    @pytest.mark.parametrize(
        "kwargs, error, match",
        [
            ({"n_samples": 3, "n_clients": 4}, ValueError, "n_clients"),
            ({"n_samples": 3, "n_clients": 0}, ValueError, "n_clients"),
            ({"n_samples": 3.0, "n_clients": 2}, TypeError, "n_samples"),
            ({"n_samples": 10, "n_clients": 2, "sizes": [5, 4]}, ValueError, "sum"),
            ({"n_samples": 10, "n_clients": 2, "sizes": [10, 0]}, ValueError, ">= 1"),
            ({"n_samples": 10, "n_clients": 3, "sizes": [5, 5]}, ValueError, "shape"),
        ],
    )
    def test_errors(self, kwargs, error, match):
        with pytest.raises(error, match=match):
            partition_iid(**kwargs)


class TestPartitionByColumn:
    def test_dataframe_name_and_position(self):
        df = pd.DataFrame({"x": [0.1, 0.2, 0.3, 0.4], "site": ["b", "a", "c", "a"]})
        expected = [1, 0, 2, 0]
        assert partition_by_column(df, "site").tolist() == expected
        assert partition_by_column(df, 1).tolist() == expected
        assert partition_by_column(df, -1).tolist() == expected

    def test_array_codes_follow_sorted_values(self):
        X = np.array([[10.0, 1], [2.0, 1], [10.0, 2], [5.0, 3]])
        client_ids = partition_by_column(X, 0)
        assert client_ids.tolist() == [2, 0, 2, 1]
        assert client_ids.dtype.kind == "i"

    def test_categorical_column(self):
        df = pd.DataFrame({"g": pd.Categorical(["z", "y", "z"])})
        assert partition_by_column(df, "g").tolist() == [1, 0, 1]

    def test_boolean_column(self):
        df = pd.DataFrame({"female": [True, False, True]})
        assert partition_by_column(df, "female").tolist() == [1, 0, 1]

    @pytest.mark.parametrize(
        "X, column, error, match",
        [
            (np.zeros((3, 2)), "site", TypeError, "not a DataFrame"),
            (np.zeros((3, 2)), 2, ValueError, "out of range"),
            (np.zeros(3), 0, ValueError, "2-D"),
            (pd.DataFrame({"a": [1, 2]}), "b", ValueError, "not a column"),
            (pd.DataFrame({"a": [1, 2]}), 1.0, TypeError, "column"),
            (np.array([[1.0], [np.nan]]), 0, ValueError, "NaN"),
        ],
    )
    def test_errors(self, X, column, error, match):
        with pytest.raises(error, match=match):
            partition_by_column(X, column)


def _label_skew(y, client_ids):
    """Mean total-variation distance between client and pooled label laws."""
    classes = np.unique(y)
    pooled = np.array([np.mean(y == c) for c in classes])
    distances = []
    for k in np.unique(client_ids):
        yk = y[client_ids == k]
        local = np.array([np.mean(yk == c) for c in classes])
        distances.append(0.5 * np.abs(local - pooled).sum())
    return float(np.mean(distances))


class TestPartitionDirichlet:
    def test_sizes_and_labels(self, seed):
        y = np.repeat(np.arange(10), 50)
        client_ids = partition_dirichlet(y, 5, min_size=20, random_state=seed)
        assert client_ids.shape == y.shape and client_ids.dtype.kind == "i"
        counts = np.bincount(client_ids, minlength=5)
        assert counts.sum() == 500 and counts.min() >= 20

    def test_seed_determinism(self, seed):
        y = np.repeat(["cat", "dog", "eel"], 40)
        a = partition_dirichlet(y, 4, random_state=seed)
        np.testing.assert_array_equal(a, partition_dirichlet(y, 4, random_state=seed))
        assert not np.array_equal(a, partition_dirichlet(y, 4, random_state=seed + 1))

    def test_skew_decreases_with_concentration(self, seed):
        # Mean TV distance between client and pooled label laws, averaged over
        # 5 seeded draws (10 classes, 5 clients). Over 300 draws its mean was
        # 0.64 at concentration 0.1, 0.31 at 1 and 0.034 at 100, and the
        # standard deviation of a 5-draw average below 0.02: the bounds below
        # are more than 10 such deviations away, so any seed passes.
        rng = np.random.default_rng(seed)
        y = np.repeat(np.arange(10), 300)
        skew = {
            beta: np.mean(
                [
                    _label_skew(
                        y,
                        partition_dirichlet(
                            y,
                            5,
                            concentration=beta,
                            random_state=int(rng.integers(2**31 - 1)),
                        ),
                    )
                    for _ in range(5)
                ]
            )
            for beta in (0.1, 1.0, 100.0)
        }
        assert skew[0.1] > skew[1.0] > skew[100.0]
        assert skew[0.1] > 0.4 and skew[100.0] < 0.1

    def test_continuous_target_is_binned(self, seed):
        # A continuous y is split exactly as its quintile codes would be.
        rng = np.random.default_rng(seed)
        y = rng.standard_normal(2000)
        quintile = np.searchsorted(np.quantile(y, [0.2, 0.4, 0.6, 0.8]), y, "right")
        assert np.bincount(quintile).tolist() == [400] * 5
        client_ids = partition_dirichlet(y, 4, n_bins=5, random_state=seed)
        np.testing.assert_array_equal(
            client_ids, partition_dirichlet(quintile, 4, random_state=seed)
        )

    def test_single_bin_is_iid_like(self, seed):
        y = np.linspace(0.0, 1.0, 100)
        client_ids = partition_dirichlet(y, 3, n_bins=1, random_state=seed)
        assert client_ids.shape == (100,)

    def test_unreachable_min_size(self):
        # Two classes at concentration 0.001 go to about two clients, so ten
        # clients of two rows each essentially never happen.
        y = np.repeat([0, 1], 10)
        with pytest.raises(ValueError, match="No Dirichlet draw"):
            partition_dirichlet(y, 10, concentration=0.001, min_size=2, random_state=0)

    @pytest.mark.parametrize(
        "kwargs, error, match",
        [
            ({"n_clients": 30, "min_size": 1}, ValueError, "need at least"),
            ({"n_clients": 2, "concentration": 0.0}, ValueError, "concentration"),
            ({"n_clients": 2, "concentration": "x"}, TypeError, "concentration"),
            ({"n_clients": 0}, ValueError, "n_clients"),
            ({"n_clients": 2, "n_bins": 0}, ValueError, "n_bins"),
            ({"n_clients": 2, "min_size": -1}, ValueError, "min_size"),
        ],
    )
    def test_errors(self, kwargs, error, match):
        with pytest.raises(error, match=match):
            partition_dirichlet(np.repeat([0, 1], 10), **kwargs)

    def test_bad_y(self):
        with pytest.raises(ValueError, match="1-D"):
            partition_dirichlet(np.zeros((4, 2)), 2)
        with pytest.raises(ValueError, match="NaN"):
            partition_dirichlet([0.5, np.nan, 1.5], 2)


class TestNoGlobalState:
    """random_state=None draws fresh OS entropy: NumPy's global state is
    neither read (same global seed, different draws) nor advanced."""

    @pytest.mark.parametrize(
        "draw",
        [
            lambda: partition_iid(200, 5),
            lambda: partition_dirichlet(np.arange(200) % 4, 5, concentration=0.5),
        ],
        ids=["partition_iid", "partition_dirichlet"],
    )
    def test_partitioners(self, draw):
        self._check(draw)

    def test_generators(self):
        from skfedcp.datasets import make_federated_regression, make_romano_regression

        self._check(lambda: make_romano_regression(50)[1])
        self._check(lambda: make_federated_regression(n_clients=2, n_per_client=20)[1])

    @staticmethod
    def _check(draw):
        np.random.seed(0)  # noqa: NPY002 (the global state is the subject)
        before = np.random.get_state()[1].copy()  # noqa: NPY002
        first = draw()
        after = np.random.get_state()  # noqa: NPY002
        assert np.array_equal(after[1], before) and after[2] == 624
        np.random.seed(0)  # noqa: NPY002 (the global state is the subject)
        second = draw()
        assert not np.array_equal(first, second)

    def test_global_state_is_refused(self):
        with pytest.raises(ValueError, match="global state"):
            partition_iid(10, 2, random_state=np.random)
