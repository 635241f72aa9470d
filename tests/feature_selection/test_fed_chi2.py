"""FedChi2Selector: oracle equality with sklearn, invariances, bad input."""

import math
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import special
from scipy.sparse import csr_matrix
from scipy.stats import chi2_contingency
from sklearn import config_context
from sklearn.base import clone
from sklearn.datasets import load_digits
from sklearn.feature_selection import SelectKBest, chi2
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.utils import check_random_state

from skfedcp.exceptions import SingleClientWarning
from skfedcp.feature_selection import (
    FedChi2Selector,
    fed_chi2,
    fed_chi2_test,
    required_projection_dim,
    stable_projection,
)
from skfedcp.federated._secure_aggregation import _draw_seeds


def _leaks(obj, seed, projection, path="sel", seen=None):
    """Paths under ``obj`` that hold the seed, a random generator or ``P``."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    words = {seed, seed & (2**64 - 1), seed >> 64}
    words |= {(seed >> s) & (2**32 - 1) for s in (0, 32, 64, 96)}
    found = []
    if isinstance(
        obj,
        np.random.SeedSequence
        | np.random.Generator
        | np.random.BitGenerator
        | np.random.RandomState,
    ):
        return [path]
    if isinstance(obj, int | np.integer) and not isinstance(obj, bool):
        return [path] if int(obj) in words else []
    if isinstance(obj, bytes | bytearray):
        return [path] if seed.to_bytes(16, "little")[:8] in obj else []
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "iu" and np.isin(obj.astype(object), list(words)).any():
            found.append(path)
        if obj.dtype.kind == "f" and obj.shape == projection.shape:
            if np.allclose(obj, projection):
                found.append(path)
        if obj.dtype == object:
            for i, v in enumerate(obj.ravel()):
                found += _leaks(v, seed, projection, f"{path}[{i}]", seen)
        return found
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += _leaks(v, seed, projection, f"{path}[{k!r}]", seen)
        return found
    if isinstance(obj, list | tuple | set):
        for i, v in enumerate(obj):
            found += _leaks(v, seed, projection, f"{path}[{i}]", seen)
        return found
    if hasattr(obj, "__dict__"):
        found += _leaks(vars(obj), seed, projection, f"{path}.__dict__", seen)
    return found


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    clients = np.random.default_rng(0).integers(0, 10, len(y))
    return X, y, clients


@pytest.fixture(scope="module")
def counts():
    rng = np.random.default_rng(1)
    n, d, C = 1200, 40, 4
    y = rng.integers(0, C, n)
    effect = np.where(rng.random((C, d)) < 0.3, rng.lognormal(0, 0.5, (C, d)), 1.0)
    X = rng.poisson(rng.gamma(0.5, 1.0, d) * effect[y]).astype(float)
    clients = rng.integers(0, 8, n)
    return X, y, clients


class TestPlainOracle:
    @pytest.mark.parametrize("k", [1, 5, 20, 64])
    @pytest.mark.parametrize("sparse", [False, True])
    def test_plain_equals_sklearn_chi2(self, digits, k, sparse):
        X, y, clients = digits
        Xin = csr_matrix(X) if sparse else X
        sel = FedChi2Selector(k=k, method="plain").fit(Xin, y, client_ids=clients)
        ref_scores, ref_p = chi2(X, y)
        # sklearn's class priors are a sparse mean (N_c copies of 1/N summed),
        # ours are N_c / N: equal to ~1e-15, hence rtol rather than bit equality.
        np.testing.assert_allclose(sel.scores_, ref_scores, rtol=1e-12, atol=0)
        np.testing.assert_allclose(sel.pvalues_, ref_p, rtol=1e-9, atol=1e-300)
        assert np.array_equal(np.isnan(sel.scores_), np.isnan(ref_scores))
        pooled = SelectKBest(chi2, k=k).fit(X, y)
        assert np.array_equal(sel.get_support(), pooled.get_support())

    def test_plain_non_integer_and_binary(self, seed):
        rng = np.random.default_rng(seed)
        X = rng.random((300, 6)) * 3
        y = rng.integers(0, 2, 300)
        sel = FedChi2Selector(k=3, method="plain").fit(X, y, client_ids=y * 0 + 1)
        np.testing.assert_allclose(sel.scores_, chi2(X, y)[0], rtol=1e-6)
        assert np.all(sel.dof_ == 1)

    def test_plain_with_dropout_is_chi2_of_survivors(self, counts):
        X, y, clients = counts
        sel = FedChi2Selector(method="plain", dropout=[0, 3]).fit(
            X, y, client_ids=clients
        )
        keep = ~np.isin(clients, [0, 3])
        np.testing.assert_allclose(sel.scores_, chi2(X[keep], y[keep])[0], rtol=1e-12)
        assert sel.dropped_clients_.tolist() == [0, 3]


class TestLargeTotals:
    """Issue 11: fixed point chosen from the public range, never a wrap."""

    @pytest.mark.parametrize("clients", [1, 7])
    def test_issue_case_matches_sklearn(self, clients):
        # A feature of 2.362e6 + 0.25 on 1,000 rows: its total 2.36e9 wrapped
        # with 32 fixed fractional bits (feature_totals_ -1.93e9, score -9.5e9).
        rng = np.random.default_rng(0)
        X = np.column_stack([np.full(1000, 2.362e6 + 0.25), rng.random(1000)])
        y = rng.integers(0, 3, 1000)
        ids = np.arange(1000) % clients
        sel = FedChi2Selector(k="all", method="plain").fit(X, y, client_ids=ids)
        assert sel.feature_totals_[0] == 2362000250.0  # exact
        # sklearn's score of the constant feature is 0 up to its own rounding
        # (~1e-21), hence the atol.
        np.testing.assert_allclose(sel.scores_, chi2(X, y)[0], rtol=1e-9, atol=1e-9)
        sketch = FedChi2Selector(k="all", random_state=0).fit(X, y, client_ids=ids)
        assert sketch.feature_totals_[0] == 2362000250.0
        assert np.all(sketch.scores_ >= 0)

    @pytest.mark.parametrize("frac", [0.0, 0.25, 0.1])
    @pytest.mark.parametrize("clients", [1, 20])
    def test_totals_up_to_2_52_match_sklearn(self, frac, clients):
        rng = np.random.default_rng(1)
        n = 1000
        y = rng.integers(0, 3, n)
        big = np.floor((2.0**52 / n) * (0.3 + 0.7 * (y == 0))) + frac
        X = np.column_stack([big, np.floor(big / 9) + frac, rng.random(n) * 1e3])
        assert 2.0**51 < X[:, 0].sum() <= 2.0**52
        ids = rng.integers(0, clients, n)
        sel = FedChi2Selector(k="all", method="plain").fit(X, y, client_ids=ids)
        np.testing.assert_allclose(sel.scores_, chi2(X, y)[0], rtol=1e-9)
        exact = [math.fsum(X[:, j]) for j in range(X.shape[1])]
        np.testing.assert_allclose(sel.feature_totals_, exact, rtol=1e-14)


class TestSketch:
    def test_pvalues_are_chdtrc_of_scores(self, counts):
        X, y, clients = counts
        sel = FedChi2Selector(random_state=0).fit(X, y, client_ids=clients)
        assert np.array_equal(
            sel.pvalues_, special.chdtrc(3, sel.scores_), equal_nan=True
        )

    def test_accuracy_with_many_projections(self, counts):
        # mean_square with l = 20000: relative sd sqrt(2 / l) = 0.01; 0.06 is
        # 6 sd per feature (40 features: false alarm ~ 1e-7).
        X, y, clients = counts
        sel = FedChi2Selector(
            k="all", estimator="mean_square", n_projections=20000, random_state=0
        ).fit(X, y, client_ids=clients)
        ref = chi2(X, y)[0]
        ok = np.isfinite(ref)
        assert np.all(np.abs(sel.scores_[ok] / ref[ok] - 1) < 0.06)
        assert np.array_equal(np.isnan(sel.scores_), ~ok)

    def test_zero_feature_is_nan_and_never_selected_first(self, digits):
        X, y, clients = digits
        sel = FedChi2Selector(k=61, random_state=0).fit(X, y, client_ids=clients)
        zero = X.sum(axis=0) == 0
        assert np.all(np.isnan(sel.scores_[zero]))
        assert not np.any(sel.get_support()[zero])

    def test_deterministic_given_random_state(self, counts):
        X, y, clients = counts
        a = FedChi2Selector(random_state=3).fit(X, y, client_ids=clients)
        b = FedChi2Selector(random_state=3).fit(X, y, client_ids=clients)
        c = FedChi2Selector(random_state=4).fit(X, y, client_ids=clients)
        assert np.array_equal(a.scores_, b.scores_, equal_nan=True)
        ok = np.isfinite(a.scores_)
        assert np.all(a.scores_[ok] != c.scores_[ok])

    def test_secure_agg_variants_are_bit_identical(self, counts):
        X, y, clients = counts
        out = [
            FedChi2Selector(secure_agg=s, random_state=5, dropout=0.25)
            .fit(X, y, client_ids=clients)
            .sketch_
            for s in ("harary", "complete", "none")
        ]
        assert np.array_equal(out[0], out[1]) and np.array_equal(out[0], out[2])

    def test_client_label_permutation_is_bit_identical(self, counts):
        X, y, clients = counts
        perm = np.array([5, 2, 7, 0, 1, 6, 4, 3])
        a = FedChi2Selector(random_state=2).fit(X, y, client_ids=clients)
        b = FedChi2Selector(random_state=2).fit(X, y, client_ids=perm[clients])
        assert np.array_equal(a.sketch_, b.sketch_)
        assert np.array_equal(a.scores_, b.scores_, equal_nan=True)

    def test_single_client_default(self, counts):
        X, y, _ = counts
        a = FedChi2Selector(random_state=1).fit(X, y)
        b = FedChi2Selector(random_state=1).fit(X, y, client_ids=np.zeros(len(y)))
        assert np.array_equal(a.scores_, b.scores_, equal_nan=True)
        assert a.n_clients_ == 1

    def test_repartition_changes_only_rounding(self, counts):
        X, y, clients = counts
        a = FedChi2Selector(random_state=1).fit(X, y, client_ids=clients)
        b = FedChi2Selector(random_state=1).fit(X, y, client_ids=clients % 3)
        ok = np.isfinite(a.scores_)
        diff = np.abs(a.scores_[ok] - b.scores_[ok])
        assert np.all(diff <= 1e-6 * np.nanmax(a.scores_))

    def test_doubling_the_data_doubles_the_scores(self, counts):
        X, y, clients = counts
        a = FedChi2Selector(random_state=1).fit(X, y, client_ids=clients)
        b = FedChi2Selector(random_state=1).fit(
            np.vstack([X, X]), np.r_[y, y], client_ids=np.r_[clients, clients]
        )
        np.testing.assert_allclose(b.scores_, 2 * a.scores_, rtol=1e-6)

    def test_independent_data_scores_vanish(self, seed):
        rng = np.random.default_rng(seed)
        X = np.tile(rng.integers(0, 9, 7), (500, 1)).astype(float)
        y = rng.integers(0, 3, 500)
        sel = FedChi2Selector(k="all", random_state=0).fit(
            X, y, client_ids=rng.integers(0, 6, 500)
        )
        ok = np.isfinite(sel.scores_)
        assert np.all(sel.scores_[ok] <= 1e-9)

    def test_duplicate_columns_get_independent_sketches(self, counts):
        X, y, clients = counts
        X2 = np.hstack([X[:, :3], X[:, :3]])
        sel = FedChi2Selector(
            k="all", estimator="mean_square", n_projections=2000, random_state=0
        ).fit(X2, y, client_ids=clients)
        assert not np.any(sel.sketch_[:, :3] == sel.sketch_[:, 3:])
        ref = chi2(X2, y)[0]
        # relative sd sqrt(2 / 2000) = 0.032: 0.2 is > 6 sd.
        assert np.all(np.abs(sel.scores_ / ref - 1) < 0.2)

    def test_sparse_equals_dense(self, counts):
        X, y, clients = counts
        a = FedChi2Selector(random_state=0).fit(X, y, client_ids=clients)
        b = FedChi2Selector(random_state=0).fit(csr_matrix(X), y, client_ids=clients)
        assert np.array_equal(a.sketch_, b.sketch_)

    def test_eps_delta_target(self, counts):
        X, y, clients = counts
        sel = FedChi2Selector(n_projections=(0.3, 0.1), estimator="mean_square")
        sel.fit(X, y, client_ids=clients)
        assert sel.n_projections_ == required_projection_dim(
            0.3, 0.1, estimator="mean_square"
        )
        assert sel.sketch_.shape == (sel.n_projections_, X.shape[1])

    def test_projection_seed_is_not_stored(self, counts):
        X, y, clients = counts
        sel = FedChi2Selector(random_state=9).fit(X, y, client_ids=clients)
        secret = _draw_seeds(check_random_state(9), 1)[0]
        blob = pickle.dumps(sel)
        for width in (16, 8):
            assert secret.to_bytes(16, "little")[:width] not in blob
        assert all(v != secret for v in vars(sel).values() if isinstance(v, int))

    def test_default_fit_holds_nothing_that_regenerates_the_projection(
        self, counts, monkeypatch
    ):
        # Issue 11, item 5: with random_state=None nothing in the fitted object
        # or its pickle can regenerate the clients' projection seed. Record the
        # seed the fit really used, then scan the unpickled object for it.
        import skfedcp.feature_selection._chi2 as chi2_module

        used = []
        real = chi2_module._projection_seed

        def spy(random_state):
            seed, rng = real(random_state)
            used.append((seed, rng))
            return seed, rng

        monkeypatch.setattr(chi2_module, "_projection_seed", spy)
        X, y, clients = counts
        sel = FedChi2Selector().fit(X, y, client_ids=clients)
        ((seed, _),) = used
        blob = pickle.dumps(sel)
        again = pickle.loads(blob)
        P0 = stable_projection(seed, (0,), sel.n_projections_, 4)
        assert _leaks(again, seed, P0) == []
        for width in (16, 8):
            assert seed.to_bytes(16, "little")[:width] not in blob
        # The scan can fail: a planted seed, generator or matrix is found.
        for planted in ({"nested": [seed]}, np.random.default_rng(0), P0.copy()):
            again.planted_ = planted
            assert _leaks(again, seed, P0) != []
        # Fresh entropy: a second default fit draws another projection.
        other = FedChi2Selector().fit(X, y, client_ids=clients)
        assert used[1][0] != seed
        assert not np.array_equal(other.sketch_, sel.sketch_)

    def test_default_fit_ignores_numpy_global_state(self, counts):
        X, y, clients = counts
        # Were the seed drawn from NumPy's global state, re-seeding it would
        # make the two fits identical.
        state = np.random.get_state()  # noqa: NPY002
        sketches = []
        try:
            for _ in range(2):
                np.random.seed(123)  # noqa: NPY002
                fitted = FedChi2Selector().fit(X, y, client_ids=clients)
                sketches.append(fitted.sketch_)
        finally:
            np.random.set_state(state)  # noqa: NPY002
        assert not np.array_equal(*sketches)

    def test_single_client_warning_points_at_the_caller(self, counts):
        X, y, _ = counts
        with pytest.warns(SingleClientWarning, match="all rows form one client") as rec:
            FedChi2Selector(random_state=0).fit(X, y)
        assert rec[0].filename == __file__
        with warnings.catch_warnings():
            warnings.simplefilter("error", SingleClientWarning)
            FedChi2Selector(method="plain").fit(X, y)  # plain: nothing to protect

    def test_fitted_attributes(self, counts):
        X, y, clients = counts
        sel = FedChi2Selector(k=5, random_state=0).fit(X, y, client_ids=clients + 10)
        assert sel.clients_.tolist() == list(range(10, 18))
        assert sel.n_clients_ == 8 and sel.n_projections_ == 50
        assert np.array_equal(sel.class_counts_, np.bincount(y))
        assert np.array_equal(sel.feature_totals_, X.sum(axis=0))
        assert sel.get_support().sum() == 5
        assert sel.dropped_clients_.size == 0

    def test_refit_starts_from_scratch(self, counts):
        X, y, clients = counts
        sel = FedChi2Selector(random_state=0).fit(X, y, client_ids=clients)
        sel.set_params(method="plain").fit(X, y, client_ids=clients)
        assert not hasattr(sel, "sketch_") and sel.n_projections_ is None
        sel.set_params(statistic="contingency").fit(X, y)
        assert not hasattr(sel, "feature_totals_") and len(sel.categories_) == 40

    def test_dropout_fraction(self, counts):
        X, y, clients = counts
        sel = FedChi2Selector(dropout=0.25, random_state=0).fit(
            X, y, client_ids=clients
        )
        assert sel.dropped_clients_.size == 2


class TestContingency:
    def test_plain_equals_scipy(self, seed):
        rng = np.random.default_rng(seed)
        X = rng.integers(1, 5, size=(500, 3)).astype(float) * 10
        y = (X[:, 0] / 10 + rng.integers(0, 2, 500)) % 3
        sel = FedChi2Selector(k=2, statistic="contingency", method="plain")
        sel.fit(X, y, client_ids=rng.integers(0, 4, 500))
        for j in range(3):
            ref = chi2_contingency(pd.crosstab(X[:, j], y), correction=False)
            np.testing.assert_allclose(sel.scores_[j], ref.statistic, rtol=1e-10)
            np.testing.assert_allclose(sel.pvalues_[j], ref.pvalue, rtol=1e-8)
            assert sel.dof_[j] == ref.dof
        assert [c.tolist() for c in sel.categories_][0] == [10.0, 20.0, 30.0, 40.0]

    def test_sketch_close_and_constant_feature(self, seed):
        rng = np.random.default_rng(seed)
        X = np.column_stack([rng.integers(0, 5, 800), np.zeros(800)]).astype(float)
        y = (X[:, 0] + rng.integers(0, 3, 800)) % 4
        sel = FedChi2Selector(
            k="all",
            statistic="contingency",
            estimator="mean_square",
            n_projections=5000,
            random_state=0,
        ).fit(X, y, client_ids=rng.integers(0, 5, 800))
        ref = chi2_contingency(pd.crosstab(X[:, 0], y), correction=False).statistic
        # relative sd sqrt(2 / 5000) = 0.02: 0.12 is 6 sd.
        assert abs(sel.scores_[0] / ref - 1) < 0.12
        assert sel.scores_[1] == 0 and sel.pvalues_[1] == 1 and sel.dof_[1] == 0
        assert len(sel.level_counts_) == 2

    def test_sparse_input(self, seed):
        rng = np.random.default_rng(seed)
        X = rng.integers(0, 3, size=(200, 4)).astype(float)
        y = rng.integers(0, 2, 200)
        sel = FedChi2Selector(k="all", statistic="contingency", random_state=0)
        a = clone(sel).fit(X, y)
        b = clone(sel).fit(csr_matrix(X), y)
        assert np.array_equal(a.scores_, b.scores_)


class TestBadInput:
    def test_negative_x(self, counts):
        X, y, _ = counts
        with pytest.raises(ValueError, match="Negative values"):
            FedChi2Selector().fit(-X, y)

    def test_standard_scaler_in_front_names_a_non_negative_scaling(self, counts):
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        X, y, _ = counts
        pipe = make_pipeline(StandardScaler(), FedChi2Selector(k=2))
        with pytest.raises(ValueError, match="Negative values.*MinMaxScaler"):
            pipe.fit(X.astype(float), y)

    def test_single_class_warns_and_gives_nan(self, counts):
        X, y, _ = counts
        with pytest.warns(UserWarning, match="single class"):
            sel = FedChi2Selector(random_state=0).fit(X, np.zeros_like(y))
        assert np.all(np.isnan(sel.scores_)) and np.all(np.isnan(sel.pvalues_))
        with pytest.warns(UserWarning, match="single class"):
            plain = FedChi2Selector(method="plain").fit(X, np.zeros_like(y))
        assert np.all(np.isnan(plain.scores_))

    def test_k_larger_than_n_features(self, counts):
        X, y, _ = counts
        with pytest.warns(UserWarning, match="greater than n_features"):
            sel = FedChi2Selector(k=100, random_state=0).fit(X, y)
        assert sel.get_support().all()

    def test_k_zero_and_all(self, counts):
        X, y, _ = counts
        assert not FedChi2Selector(k=0, random_state=0).fit(X, y).get_support().any()
        assert FedChi2Selector(k="all", random_state=0).fit(X, y).get_support().all()

    def test_geometric_needs_two_projections(self, counts):
        X, y, _ = counts
        with pytest.raises(ValueError, match="n_projections must be >= 2"):
            FedChi2Selector(n_projections=1).fit(X, y)
        FedChi2Selector(n_projections=1, estimator="mean_square").fit(X, y)

    @pytest.mark.parametrize("dropout", [0.99, [0, 1, 2, 3, 4, 5, 6, 7]])
    def test_dropout_of_every_client(self, counts, dropout):
        X, y, clients = counts
        with pytest.raises(ValueError, match="dropout.*every client"):
            FedChi2Selector(dropout=dropout).fit(X, y, client_ids=clients)

    def test_dropout_unknown_label(self, counts):
        X, y, clients = counts
        with pytest.raises(ValueError, match="dropout must list client labels"):
            FedChi2Selector(dropout=[42]).fit(X, y, client_ids=clients)

    def test_contingency_needs_integers(self, counts):
        X, y, _ = counts
        with pytest.raises(ValueError, match="integer-coded"):
            FedChi2Selector(statistic="contingency").fit(X + 0.5, y)

    @pytest.mark.parametrize("target", [(0.1,), (0.1, 2.0), ("a", 0.1)])
    def test_bad_eps_delta(self, counts, target):
        X, y, _ = counts
        with pytest.raises(ValueError, match="n_projections"):
            FedChi2Selector(n_projections=target).fit(X, y)

    def test_bad_client_ids(self, counts):
        X, y, _ = counts
        with pytest.raises(ValueError, match="client_ids"):
            FedChi2Selector().fit(X, y, client_ids=[0, 1])

    def test_constructor_params(self):
        from sklearn.utils._param_validation import InvalidParameterError

        with pytest.raises(InvalidParameterError, match="estimator"):
            FedChi2Selector(estimator="median").fit(np.ones((4, 2)), [0, 1, 0, 1])
        with pytest.raises(InvalidParameterError, match="k"):
            FedChi2Selector(k=-1).fit(np.ones((4, 2)), [0, 1, 0, 1])


class TestIntegration:
    def test_pipeline_routes_client_ids(self, digits):
        X, y, clients = digits
        pipe = Pipeline(
            [
                ("select", FedChi2Selector(k=20, random_state=0)),
                ("clf", MultinomialNB()),
            ]
        )
        pipe.fit(X, y, select__client_ids=clients)
        alone = FedChi2Selector(k=20, random_state=0).fit(X, y, client_ids=clients)
        assert np.array_equal(pipe[0].get_support(), alone.get_support())

    def test_metadata_routing(self, digits):
        X, y, clients = digits
        with config_context(enable_metadata_routing=True):
            pipe = make_pipeline(
                FedChi2Selector(k=20, random_state=0).set_fit_request(client_ids=True),
                MultinomialNB(),
            )
            pipe.fit(X, y, client_ids=clients)
        alone = FedChi2Selector(k=20, random_state=0).fit(X, y, client_ids=clients)
        assert np.array_equal(pipe[0].get_support(), alone.get_support())

    def test_pandas_output_and_feature_names(self, counts):
        X, y, clients = counts
        df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
        sel = FedChi2Selector(k=4, random_state=0).set_output(transform="pandas")
        out = sel.fit(df, y, client_ids=clients).transform(df)
        assert isinstance(out, pd.DataFrame)
        assert list(out.columns) == list(sel.get_feature_names_out())
        assert list(sel.feature_names_in_) == list(df.columns)

    def test_clone_and_pickle(self, counts):
        X, y, clients = counts
        sel = FedChi2Selector(k=3, random_state=0).fit(X, y, client_ids=clients)
        again = pickle.loads(pickle.dumps(sel))
        assert np.array_equal(again.transform(X), sel.transform(X))
        assert not hasattr(clone(sel), "scores_")


class TestFunctions:
    def test_fed_chi2(self, counts):
        X, y, clients = counts
        scores, pvalues = fed_chi2(X, y, clients, method="plain")
        np.testing.assert_allclose(scores, chi2(X, y)[0], rtol=1e-12)
        with pytest.raises(TypeError, match="k"):
            fed_chi2(X, y, clients, k=3)

    def test_fed_chi2_test(self, seed):
        rng = np.random.default_rng(seed)
        a = rng.choice(["x", "y", "z"], 600)
        b = np.where(rng.random(600) < 0.3, "u", a)
        res = fed_chi2_test(a, b, rng.integers(0, 5, 600), method="plain")
        stat, p, dof = res
        ref = chi2_contingency(pd.crosstab(a, b), correction=False)
        np.testing.assert_allclose(stat, ref.statistic, rtol=1e-10)
        assert dof == ref.dof == 6 and res.pvalue == p
        sk = fed_chi2_test(a, b, rng.integers(0, 5, 600), random_state=0)
        assert sk.dof == 6 and 0.2 < sk.statistic / ref.statistic < 5
