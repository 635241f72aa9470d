"""Per-client order statistics: every path equals a brute-force sort."""

import zlib

import numpy as np
import pytest

from skfedcp.calibrators import CentralCalibrator, QuantileOfQuantilesCalibrator
from skfedcp.calibrators._order_statistics import (
    _banded_order_statistics,
    _rowwise_select,
    local_order_statistics,
)
from skfedcp.federated import ClientPartition
from skfedcp.utils._quantile import conformal_rank, order_statistic


def _brute(scores, ids, ranks):
    out = []
    for j, label in enumerate(np.unique(ids)):
        values = np.sort(scores[ids == label])
        out.append(values[ranks[j] - 1] if ranks[j] <= values.size else np.inf)
    return np.array(out)


def _case(rng, *, m, sizes, dist, shuffled):
    sizes = np.broadcast_to(sizes, (m,))
    ids = np.repeat(np.arange(m), sizes)
    n = ids.shape[0]
    if dist == "exponential":
        scores = rng.exponential(size=n)
    elif dist == "negative":
        scores = rng.normal(size=n) - 3.0
    elif dist == "heterogeneous":  # each client its own scale: not exchangeable
        scores = rng.exponential(size=n) * (1.0 + (ids % 5) ** 3)
    elif dist == "one_outlier_client":  # client 0 far below the others
        scores = rng.exponential(size=n) - 50.0 * (ids == 0)
    elif dist == "ties":
        scores = rng.integers(0, 40, n) / 8.0
    elif dist == "tiny":
        scores = rng.exponential(size=n) * 1e-300
    elif dist == "cauchy":
        scores = rng.standard_cauchy(size=n)
    else:
        raise AssertionError(dist)
    if shuffled:
        perm = rng.permutation(n)
        ids, scores = ids[perm], scores[perm]
    return ids, scores, sizes


@pytest.mark.parametrize("shuffled", [True, False])
@pytest.mark.parametrize(
    "dist",
    [
        "exponential",
        "negative",
        "heterogeneous",
        "one_outlier_client",
        "ties",
        "tiny",
        "cauchy",
    ],
)
@pytest.mark.parametrize("level", [0.02, 0.5, 0.9, 0.999])
def test_large_inputs_match_a_sort(shuffled, dist, level):
    rng = np.random.default_rng(zlib.crc32(f"{shuffled}-{dist}-{level}".encode()))
    m = 60
    sizes = rng.integers(300, 1500, m)
    ids, scores, sizes = _case(rng, m=m, sizes=sizes, dist=dist, shuffled=shuffled)
    ranks = np.clip(np.ceil(level * (sizes + 1)).astype(np.intp), 1, None)
    ranks[[3, 7]] = sizes[[3, 7]] + 1  # past the client's size: +inf
    ranks[5] = 1
    ranks[9] = sizes[9]
    before = scores.copy()
    got = local_order_statistics(ClientPartition(ids), ranks, scores=scores)
    np.testing.assert_array_equal(got, _brute(scores, ids, ranks))
    np.testing.assert_array_equal(scores, before)  # never partitioned in place


@pytest.mark.parametrize("shuffled", [True, False])
@pytest.mark.parametrize("dist", ["exponential", "one_outlier_client", "negative"])
def test_band_path_is_taken_and_exact(shuffled, dist):
    # Inputs the band filter must accept (so that this test exercises it),
    # including a client whose answer falls outside the band.
    rng = np.random.default_rng(7)
    m = 50
    ids, scores, sizes = _case(rng, m=m, sizes=900, dist=dist, shuffled=shuffled)
    part = ClientPartition(ids)
    for level in (0.9, 0.1):
        ranks = np.full(m, int(np.ceil(level * 901)), dtype=np.intp)
        got = _banded_order_statistics(part, ranks, scores)
        assert got is not None
        np.testing.assert_array_equal(got, _brute(scores, ids, ranks))


def test_band_declines_small_or_tiny_client_inputs():
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(100), 20)
    scores = rng.normal(size=ids.shape[0])
    part = ClientPartition(ids)
    assert _banded_order_statistics(part, np.full(100, 18), scores) is None
    ids = rng.permutation(np.repeat(np.arange(5000), 10))
    part = ClientPartition(ids)
    scores = rng.normal(size=ids.shape[0])
    assert _banded_order_statistics(part, np.full(5000, 9), scores) is None
    got = local_order_statistics(part, np.full(5000, 9), scores=scores)
    np.testing.assert_array_equal(got, _brute(scores, ids, np.full(5000, 9)))


def test_rowwise_select_matches_partition_and_keeps_input():
    rng = np.random.default_rng(1)
    matrix = rng.normal(size=(301, 157))
    before = matrix.copy()
    for rank in (1, 80, 157):
        expected = np.partition(matrix, rank - 1, axis=1)[:, rank - 1]
        np.testing.assert_array_equal(_rowwise_select(matrix, rank), expected)
    np.testing.assert_array_equal(matrix, before)


def test_qq_threshold_identical_across_layouts():
    rng = np.random.default_rng(3)
    m, size = 200, 250
    ids = np.repeat(np.arange(m), size)
    scores = rng.exponential(size=m * size)
    perm = rng.permutation(m * size)
    labels = np.array([f"c{j:03d}" for j in range(m)])
    grouped = QuantileOfQuantilesCalibrator().fit(scores, ids, alpha=0.1)
    shuffled = QuantileOfQuantilesCalibrator().fit(
        scores[perm], labels[ids[perm]], alpha=0.1
    )
    assert grouped.threshold_ == shuffled.threshold_
    np.testing.assert_array_equal(
        grouped.messages_["quantile"], shuffled.messages_["quantile"]
    )


@pytest.mark.parametrize("rank", [1, 7, 50, 51])
def test_order_statistic_overwrite_input(rank):
    # In place or on a copy: the same value; only the caller's array moves.
    values = np.random.default_rng(rank).normal(size=50)
    kept = values.copy()
    expected = order_statistic(values, rank)
    assert np.array_equal(values, kept)  # default: the input is untouched
    assert order_statistic(values, rank, overwrite_input=True) == expected
    assert np.array_equal(np.sort(values), np.sort(kept))


def test_central_leaves_the_clients_scores_untouched():
    # Several clients: the pooled copy is partitioned in place, never the
    # arrays the clients sent (kept in messages_).
    rng = np.random.default_rng(0)
    scores = rng.exponential(size=300)
    ids = np.repeat(np.arange(3), 100)
    cal = CentralCalibrator().fit(scores, ids, alpha=0.1)
    sent = np.concatenate(list(cal.messages_["scores"]))
    assert np.array_equal(sent, scores)
    assert cal.threshold_ == np.sort(scores)[conformal_rank(300, 0.1) - 1]
