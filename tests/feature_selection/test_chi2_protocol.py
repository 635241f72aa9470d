"""FED-chi2 protocol steps: recast identities and client/server functions."""

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.stats import chi2_contingency
from sklearn.feature_selection import chi2

from skfedcp.feature_selection import (
    Chi2Marginals,
    FedChi2Selector,
    chi2_client_encode,
    chi2_client_marginals,
    chi2_frac_bits,
    chi2_server_decode,
    chi2_server_marginals,
)
from skfedcp.feature_selection._ranges import _marginals_bound, _marginals_plan
from skfedcp.feature_selection._tables import _offsets, _residual_rows
from skfedcp.federated import fixed_point_decode, fixed_point_encode


@pytest.fixture(scope="module")
def count_data():
    rng = np.random.default_rng(0)
    n, d, C = 400, 12, 3
    y = rng.integers(0, C, n)
    X = rng.poisson(2.0 * (1 + (y[:, None] == np.arange(d) % C)), size=(n, d))
    X[:, 4] = 0  # a zero-sum feature
    clients = rng.integers(0, 5, n)
    return X.astype(float), y, clients


def _split(X, y, clients):
    return [(X[clients == c], y[clients == c]) for c in np.unique(clients)]


def _global_marginals(X, y, classes, n_levels=None):
    msgs = [
        chi2_client_marginals(X, y, classes=classes, n_levels=n_levels),
    ]
    return chi2_server_marginals(
        np.sum(msgs, axis=0), n_classes=len(classes), n_levels=n_levels
    )


class TestRecast:
    @pytest.mark.parametrize("split", ["class", "uniform"])
    def test_sum_of_residuals_is_sklearn_chi2(self, count_data, split):
        X, y, clients = count_data
        classes = np.unique(y)
        m = _global_marginals(X, y, classes)
        parts = _split(X, y, clients)
        rows = slice(0, X.shape[1])
        w = 0.0
        for Xi, yi in parts:
            msg = chi2_client_marginals(Xi, yi, classes=classes)
            counts_i = msg[: len(classes)]
            table = np.stack([Xi[yi == c].sum(axis=0) for c in classes], axis=0)
            w = w + _residual_rows(table, counts_i, m, rows, split, len(parts))
        ref = chi2(X, y)[0]
        ok = np.isfinite(ref)
        np.testing.assert_allclose((w**2).sum(axis=1)[ok], ref[ok], rtol=1e-10)

    @pytest.mark.parametrize("split", ["class", "uniform"])
    def test_sum_of_residuals_is_contingency_chi2(self, split, seed):
        rng = np.random.default_rng(seed)
        a = rng.integers(0, 4, 500)
        y = (a + rng.integers(0, 3, 500)) % 3
        clients = rng.integers(0, 6, 500)
        n_levels = np.array([4])
        classes = np.arange(3)
        m = _global_marginals(a[:, None], y, classes, n_levels)
        w = 0.0
        for c in np.unique(clients):
            ai, yi = a[clients == c], y[clients == c]
            counts_i = chi2_client_marginals(
                ai[:, None], yi, classes=classes, n_levels=n_levels
            )[:3]
            table = np.array(
                [[np.sum((ai == v) & (yi == k)) for k in classes] for v in range(4)],
                dtype=float,
            )
            w = w + _residual_rows(table.T, counts_i, m, slice(0, 4), split, 6)
        ref = chi2_contingency(np.histogram2d(a, y, bins=[4, 3])[0], correction=False)[
            0
        ]
        np.testing.assert_allclose((w**2).sum(), ref, rtol=1e-10)

    def test_contingency_is_sum_over_one_hot_levels(self, seed):
        rng = np.random.default_rng(seed)
        X = rng.integers(0, 4, size=(300, 3)).astype(float)
        y = rng.integers(0, 3, 300)
        cont = FedChi2Selector(k="all", statistic="contingency", method="plain")
        cont.fit(X, y)
        for j in range(3):
            onehot = (X[:, [j]] == np.arange(4)).astype(float)
            np.testing.assert_allclose(
                cont.scores_[j], chi2(onehot, y)[0].sum(), rtol=1e-10
            )
        assert np.all(cont.dof_ == (4 - 1) * (3 - 1))

    def test_binary_feature_identity(self, seed):
        rng = np.random.default_rng(seed)
        X = (rng.random((400, 5)) < [0.1, 0.3, 0.5, 0.7, 0.9]).astype(float)
        y = rng.integers(0, 4, 400)
        cont = FedChi2Selector(k="all", statistic="contingency", method="plain")
        sk = chi2(X, y)[0]
        F = X.sum(axis=0)
        np.testing.assert_allclose(
            cont.fit(X, y).scores_, sk * 400 / (400 - F), rtol=1e-10
        )


class TestClientServerSteps:
    @pytest.mark.parametrize("split", ["class", "uniform"])
    def test_steps_reproduce_the_simulation_bit_for_bit(self, count_data, split):
        X, y, clients = count_data
        classes = np.unique(y)
        parts = _split(X, y, clients)
        total = sum(chi2_client_marginals(Xi, yi, classes=classes) for Xi, yi in parts)
        m = chi2_server_marginals(total, n_classes=len(classes))
        # The shared projection seed the simulation draws from random_state=7.
        from sklearn.utils import check_random_state

        from skfedcp.federated._secure_aggregation import _draw_seeds

        seed = _draw_seeds(check_random_state(7), 1)[0]
        f = chi2_frac_bits(m)
        q = sum(
            fixed_point_encode(
                chi2_client_encode(
                    Xi,
                    yi,
                    m,
                    classes=classes,
                    seed=seed,
                    expected_split=split,
                    n_clients=len(parts),
                ),
                f[None, :],
            )
            for Xi, yi in parts
        )
        sketch = fixed_point_decode(q, f[None, :])
        sel = FedChi2Selector(k="all", expected_split=split, random_state=7)
        sel.fit(X, y, client_ids=clients)
        assert np.array_equal(sketch, sel.sketch_)
        scores, pvalues = chi2_server_decode(sketch, m)
        np.testing.assert_array_equal(scores, sel.scores_)
        np.testing.assert_array_equal(pvalues, sel.pvalues_)

    def test_sparse_client_input(self, count_data):
        X, y, _ = count_data
        classes = np.unique(y)
        dense = chi2_client_marginals(X, y, classes=classes)
        assert np.array_equal(
            chi2_client_marginals(csr_matrix(X), y, classes=classes), dense
        )
        m = chi2_server_marginals(dense, n_classes=3)
        e1 = chi2_client_encode(X, y, m, classes=classes, seed=3)
        e2 = chi2_client_encode(csr_matrix(X), y, m, classes=classes, seed=3)
        assert np.array_equal(e1, e2)

    def test_server_decode_nan_conventions(self):
        m = chi2_server_marginals([5.0, 5.0, 0.0, 3.0], n_classes=2)
        res = chi2_server_decode(np.ones((10, 2)), m, estimator="mean_square")
        assert np.isnan(res.scores[0]) and np.isnan(res.pvalues[0])
        single = chi2_server_marginals([10.0, 0.0, 4.0, 3.0], n_classes=2)
        assert np.all(np.isnan(chi2_server_decode(np.ones((10, 2)), single).scores))

    def test_frac_bits_bounds(self):
        # f = clip(62 - ceil(log2(8 sqrt(2 max(B, 1)))), 8, 52), except that a
        # statistic too large for 8 bits gets fewer (never a wrap-around), and
        # one too large for 0 bits is refused (issue 11: never silently wrong;
        # this test used to expect the clip to 8 for B = 1e36, a silent wrap).
        m = chi2_server_marginals([1.0, 1e6, 1e27, 1e9, 0.0], n_classes=2)
        f = chi2_frac_bits(m)
        bound = np.array([1e27, 1e9]) * 1e6
        expect = 62 - np.ceil(np.log2(8 * np.sqrt(2 * bound)))
        assert expect[0] < 8
        assert f.tolist() == [int(expect[0]), int(expect[1]), 52]
        huge = chi2_server_marginals([1.0, 1e6, 1e30, 1.0], n_classes=2)
        with pytest.raises(
            ValueError, match="X: the chi-square statistic of feature 0"
        ):
            chi2_frac_bits(huge)

    def test_errors(self, count_data):
        X, y, _ = count_data
        with pytest.raises(ValueError, match="not in classes"):
            chi2_client_marginals(X, y, classes=[0, 1])
        with pytest.raises(ValueError, match="non-negative"):
            chi2_client_marginals(-X, y, classes=[0, 1, 2])
        with pytest.raises(ValueError, match="level codes"):
            chi2_client_marginals(X, y, classes=[0, 1, 2], n_levels=[2] * 12)
        with pytest.raises(ValueError, match="sum to 0"):
            chi2_server_marginals([0.0, 0.0, 1.0], n_classes=2)
        with pytest.raises(TypeError, match="Chi2Marginals"):
            chi2_frac_bits((np.ones(2), np.ones(3)))
        m = Chi2Marginals(np.ones(3) * 10, np.ones(12), None)
        with pytest.raises(ValueError, match="n_clients"):
            chi2_client_encode(
                X, y, m, classes=[0, 1, 2], seed=1, expected_split="uniform"
            )
        with pytest.raises(ValueError, match="sketch must have shape"):
            chi2_server_decode(np.ones((10, 3)), m)

    def test_offsets(self):
        assert _offsets(3, None).tolist() == [0, 1, 2, 3]
        assert _offsets(2, np.array([3, 2])).tolist() == [0, 3, 5]


@pytest.mark.parametrize("integer_x", [True, False])
def test_round_one_plan_from_the_clients_bounds(count_data, integer_x):
    # A deployment announces one power-of-two bound per client; the plan
    # built from their maximum is the simulation's, and the clients' encoded
    # marginals sum (in the ring) to the marginals FedChi2Selector learns.
    X, y, clients = count_data
    if not integer_x:
        X = X * 0.37
    classes = np.unique(y)
    msgs = [
        chi2_client_marginals(Xc, yc, classes=classes)
        for Xc, yc in _split(X, y, clients)
    ]
    bounds = np.array([_marginals_bound(m) for m in msgs])
    assert np.all((bounds == 0) | (np.log2(np.where(bounds > 0, bounds, 1)) % 1 == 0))
    bound = bounds.max(axis=0)
    assert np.array_equal(bound, _marginals_bound(np.stack(msgs)))
    plan = _marginals_plan(bound, len(msgs), integer_x=integer_x)
    assert np.all(plan.frac_bits == 0) if integer_x else np.all(plan.frac_bits > 0)
    total = plan.decode(np.sum([plan.encode(m) for m in msgs], axis=0, dtype=np.uint64))
    sel = FedChi2Selector(random_state=0).fit(X, y, client_ids=clients)
    assert np.array_equal(total[: classes.size], sel.class_counts_)
    assert np.array_equal(total[classes.size :], sel.feature_totals_)
    with pytest.raises(ValueError, match="bound"):
        plan.encode(2 * np.stack(msgs).max(axis=0) + 1)


def test_round_one_plan_refusals():
    with pytest.raises(ValueError, match="per-client sums of X reach"):
        _marginals_plan(np.array([2.0**60]), 8, integer_x=True)
    with pytest.raises(ValueError, match="frac_bits=40 is too fine"):
        _marginals_plan(np.array([2.0**30]), 4, integer_x=False, frac_bits=40)
    with pytest.raises(ValueError, match="overflow float64"):
        _marginals_bound(np.array([np.inf, 1.0]))
