"""The fixed-rank plans on canonical nodes against the plans on each profile's own.

``_select_unequal`` runs its sinh passes on nodes snapped to a grid
(``_batch._canonical_features``) so that the folds of a cross-validation, the
groups of a grouped calibration and the neighbouring passes of one search share
each client's probabilities and the count's law (``_poisbin``'s caches).
``canonical=False`` keeps the rule on the profile's own nodes, nothing cached:
the plans must be the same, k for k, with coverages within 1e-12. A sample
runs in the fast suite, 500 profiles in the slow one.
"""

import numpy as np
import pytest

from skfedcp.calibrators._qq import _poisbin
from skfedcp.calibrators._qq import _selection as _qq_selection
from skfedcp.utils._quantile import conformal_rank

ALPHAS = (0.01, 0.05, 0.1, 0.2, 0.3)


def _profile(rng):
    """Client sizes from one of several families, 2-400 clients."""
    m = int(rng.integers(2, 401))
    family = int(rng.integers(5))
    if family == 0:  # uniform 10-1,000, the benchmarks' family
        sizes = rng.integers(10, 1001, size=m)
    elif family == 1:  # small clients
        sizes = rng.integers(1, 60, size=m)
    elif family == 2:  # heavy tail
        sizes = np.ceil(10 * rng.pareto(1.2, size=m) + 5)
    elif family == 3:  # a few distinct sizes
        sizes = rng.choice([20, 50, 200, 1000], size=m)
    else:  # wide: 10-20,000, one large client
        sizes = rng.integers(10, 20_001, size=m)
        sizes[0] = 10**6
    sizes = np.minimum(sizes, 10**7).astype(np.int64)
    return tuple(int(n) for n in sizes), float(rng.choice(ALPHAS))


def _check(sizes, alpha):
    ranks = tuple(conformal_rank(n, alpha) for n in sizes)
    new = _qq_selection._select_unequal(sizes, ranks, alpha)
    reference = _qq_selection._select_unequal(sizes, ranks, alpha, canonical=False)
    if reference is None:
        assert new is None
        return
    assert new is not None
    assert new[0] == reference[0]
    assert abs(new[1] - reference[1]) <= 1e-12


@pytest.mark.parametrize("seed", range(40))
def test_canonical_plans_match_the_reference(seed):
    _check(*_profile(np.random.default_rng(seed)))


def test_folds_share_the_cached_probabilities():
    rng = np.random.default_rng(7)
    sizes = rng.integers(10, 1001, size=100)
    fold_a, fold_b = tuple(sizes[:80].tolist()), tuple(sizes[20:].tolist())
    _poisbin._PROB_CACHE.clear()
    _check(fold_a, 0.1)
    first = set(_poisbin._PROB_CACHE)
    _check(fold_b, 0.1)
    # Both folds land on the same canonical nodes: the second one adds a
    # column only for its sizes the first fold did not hold (one per size
    # here), and reads every other one.
    added = set(_poisbin._PROB_CACHE) - first
    assert first and len(added) == len(set(fold_b) - set(fold_a))
    assert {key[0] for key in added} == set(fold_b) - set(fold_a)


@pytest.mark.slow
def test_canonical_plans_match_the_reference_500_profiles():
    rng = np.random.default_rng(2026)
    for _ in range(500):
        _check(*_profile(rng))
