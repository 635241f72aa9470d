"""Shared fixtures: seeds, small data sets, the dp-qq paper plan with switches,
random client sizes."""

import os

import numpy as np
import pytest


def _seeds():
    # SKFEDCP_SEEDS="0-9" sweeps a range; the default keeps CI deterministic.
    spec = os.environ.get("SKFEDCP_SEEDS", "42")
    if "-" in spec:
        lo, hi = (int(x) for x in spec.split("-"))
        return list(range(lo, hi + 1))
    return [int(spec)]


@pytest.fixture(params=_seeds())
def seed(request):
    """Random seed; sweep with SKFEDCP_SEEDS=0-9."""
    return request.param


@pytest.fixture(scope="module")
def linear_data():
    """Linear regression data: 10 clients of 60 rows plus a training set."""
    rng = np.random.default_rng(0)
    n_train, m, n = 300, 10, 60
    X = rng.normal(size=(n_train + m * n, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=X.shape[0])
    client_ids = np.repeat(np.arange(m), n)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:], client_ids


@pytest.fixture
def gamma_search(monkeypatch):
    """``gamma_search(args, **switches)``: the paper plan ``_dpqq_gamma_search(*args)``
    computed afresh with the module attributes of ``_plan`` named by
    ``switches`` set (fast paths off, counting wrappers), cache cleared
    before and after."""

    from skfedcp.calibrators._dp import _plan

    def search(args, **switches):
        _plan._dpqq_gamma_search.cache_clear()
        with monkeypatch.context() as patch:
            for name, value in switches.items():
                patch.setattr(_plan, name, value)
            plan = _plan._dpqq_gamma_search(*args)
        _plan._dpqq_gamma_search.cache_clear()
        return plan

    return search


def _draw_client_sizes(rng):
    """2-300 clients of 1-1,000 rows from one of four families (uniform
    10-1,000, small 1-59, three distinct sizes, uniform 1-1,000)."""
    m = int(rng.integers(2, 301))
    family = int(rng.integers(4))
    if family == 0:
        return rng.integers(10, 1001, size=m)
    if family == 1:
        return rng.integers(1, 60, size=m)
    if family == 2:
        return rng.choice(rng.integers(1, 1001, size=3), size=m)
    return rng.integers(1, 1001, size=m)


@pytest.fixture
def client_sizes():
    """``client_sizes(rng)``: random client sizes of one of four families
    (the QQ plans' fit-path and certified-k tests draw the same profiles)."""
    return _draw_client_sizes
