"""FED-H: federated Shannon entropy by two stable sketches."""

import numpy as np
import pytest
from sklearn.utils import check_random_state

from skfedcp.feature_selection import (
    ENTROPY_FRAC_BITS,
    entropy_client_encode,
    entropy_server_decode,
    fed_entropy,
)
from skfedcp.federated import fixed_point_decode, fixed_point_encode
from skfedcp.federated._secure_aggregation import _draw_seeds


@pytest.fixture(scope="module")
def categorical():
    rng = np.random.default_rng(3)
    x = rng.choice(12, size=3000, p=np.arange(1, 13) / 78)
    clients = rng.integers(0, 6, 3000)
    return x, clients


def _entropy(x):
    p = np.bincount(x) / len(x)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


class TestFedEntropy:
    def test_close_to_the_entropy_when_coupled(self, categorical):
        # Coupled matrices, l = 20000: the sketch error is below 0.02 nats
        # and the finite-difference bias about 1e-3 (spec A10.6).
        x, clients = categorical
        h = fed_entropy(x, clients, n_projections=20000, coupled=True, random_state=0)
        assert abs(h - _entropy(x)) < 0.1

    def test_base(self, categorical):
        x, clients = categorical
        kw = {"n_projections": 500, "random_state": 1}
        nats = fed_entropy(x, clients, **kw)
        np.testing.assert_allclose(
            fed_entropy(x, clients, base=2, **kw), nats / np.log(2), rtol=1e-12
        )

    def test_string_labels_and_masks_do_not_matter(self, categorical):
        x, clients = categorical
        labels = np.array([f"c{v:02d}" for v in x])
        kw = {"n_projections": 300, "random_state": 2}
        a = fed_entropy(x, clients, **kw)
        b = fed_entropy(labels, clients, secure_agg="none", **kw)
        c = fed_entropy(labels, clients, secure_agg="complete", **kw)
        assert a == b == c

    def test_client_steps_reproduce_the_simulation(self, categorical):
        x, clients = categorical
        ell, n = 400, 6
        seed = _draw_seeds(check_random_state(5), 1)[0]
        limit = 2.0 ** (62 - ENTROPY_FRAC_BITS) / n
        q = sum(
            fixed_point_encode(
                np.clip(
                    entropy_client_encode(
                        np.bincount(x[clients == c], minlength=12),
                        n_total=len(x),
                        seed=seed,
                        n_projections=ell,
                    ),
                    -limit,
                    limit,
                ),
                ENTROPY_FRAC_BITS,
            )
            for c in range(n)
        )
        h = entropy_server_decode(fixed_point_decode(q, ENTROPY_FRAC_BITS))
        ref = fed_entropy(x, clients, n_projections=ell, random_state=5)
        np.testing.assert_allclose(h, ref, rtol=1e-9)

    def test_eps_delta_target(self, categorical):
        x, clients = categorical
        h = fed_entropy(x, clients, n_projections=(0.5, 0.5), random_state=0)
        assert np.isfinite(h)

    def test_errors(self, categorical):
        x, clients = categorical
        with pytest.raises(ValueError, match="step"):
            fed_entropy(x, clients, step=1.0)
        with pytest.raises(ValueError, match="secure_agg"):
            fed_entropy(x, clients, secure_agg="ring")
        with pytest.raises(ValueError, match="n_projections"):
            fed_entropy(x, clients, n_projections=1)
        with pytest.raises(ValueError, match="1-D"):
            fed_entropy(x.reshape(-1, 2))
        with pytest.raises(ValueError, match="missing"):
            fed_entropy(np.array(["a", None, "b"], dtype=object))
        with pytest.raises(ValueError, match="counts"):
            entropy_client_encode([-1, 2], n_total=3, seed=0)
        with pytest.raises(ValueError, match="shape"):
            entropy_server_decode(np.ones((3, 4)))
        with pytest.raises(ValueError, match="base"):
            entropy_server_decode(np.ones((2, 4)), base=1)
