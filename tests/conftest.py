"""Shared fixtures: seeds and small data sets."""

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
