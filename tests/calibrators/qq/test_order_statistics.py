"""Per-client order statistics: every path equals a brute-force sort."""

import zlib

import numpy as np
import pytest

from skfedcp.calibrators import CentralCalibrator, QuantileOfQuantilesCalibrator
from skfedcp.calibrators._qq._order_statistics import (
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


def _bits(values):
    return np.asarray(values, dtype=np.float64).view(np.int64)


@pytest.mark.parametrize(
    "kind", ["exponential", "ties", "zeros", "subnormal", "huge", "posinf", "mixed"]
)
def test_rowwise_select_integer_path_bit_identical(kind):
    # Non-negative blocks are selected on their int64 bit patterns; the value
    # must be the float selection's, bit for bit (a block with a sign bit
    # set, e.g. -0.0, takes the float path).
    rng = np.random.default_rng(zlib.crc32(kind.encode()))
    shape = (700, 300)  # several row blocks
    if kind == "exponential":
        matrix = rng.exponential(size=shape)
    elif kind == "ties":
        matrix = rng.integers(0, 5, size=shape) / 4.0
    elif kind == "zeros":
        matrix = np.where(rng.random(shape) < 0.95, 0.0, rng.random(shape))
    elif kind == "subnormal":
        matrix = rng.integers(0, 1000, size=shape) * 5e-324
    elif kind == "huge":
        matrix = rng.random(shape) * 1.7e308
    elif kind == "posinf":
        matrix = np.where(rng.random(shape) < 0.2, np.inf, rng.random(shape))
    else:  # -0.0 and negatives in some blocks only
        matrix = rng.exponential(size=shape)
        matrix[5, 3] = -0.0
        matrix[650, :10] = -rng.random(10)
    before = matrix.copy()
    for rank in (1, 2, 150, 271, 300):
        expected = np.partition(matrix, rank - 1, axis=1)[:, rank - 1]
        got = _rowwise_select(matrix, rank)
        np.testing.assert_array_equal(_bits(got), _bits(expected))
    np.testing.assert_array_equal(matrix, before)


@pytest.mark.parametrize(
    "bad", [np.nan, -np.nan, np.inf, -np.inf], ids=["nan", "-nan", "inf", "-inf"]
)
@pytest.mark.parametrize("position", ["low", "high", "last"])
@pytest.mark.parametrize("negative", [False, True])
def test_rowwise_select_check_finite(bad, position, negative):
    # The fused check finds a non-finite value wherever it sits: below or
    # above the selected rank, in a non-negative (integer path) or a signed
    # (float path) block.
    rng = np.random.default_rng(0)
    matrix = rng.exponential(size=(400, 200)) - (1.0 if negative else 0.0)
    row = {"low": 3, "high": 200, "last": 399}[position]
    col = int(np.argmin(matrix[row])) if position == "low" else 17
    matrix[row, col] = bad
    with pytest.raises(ValueError, match="scores must be finite"):
        _rowwise_select(matrix, 150, check_finite=True)
    # Without the check, +inf is a legal value of the selection.
    if bad == np.inf:
        expected = np.partition(matrix, 149, axis=1)[:, 149]
        np.testing.assert_array_equal(_rowwise_select(matrix, 150), expected)


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("sizes", [50, "unequal"])
def test_local_order_statistics_check_finite(shuffled, sizes):
    rng = np.random.default_rng(5)
    m = 400
    sizes = 50 if sizes == 50 else rng.integers(30, 80, size=m)
    ids = np.repeat(np.arange(m), sizes)
    scores = rng.exponential(size=ids.shape[0])
    if shuffled:
        perm = rng.permutation(ids.shape[0])
        ids, scores = ids[perm], scores[perm]
    part = ClientPartition(ids)
    ranks = np.full(m, 45)
    got = local_order_statistics(part, ranks, scores=scores, check_finite=True)
    np.testing.assert_array_equal(got, _brute(scores, ids, ranks))
    for bad in (np.nan, np.inf, -np.inf):
        broken = scores.copy()
        broken[ids.shape[0] // 2] = bad
        with pytest.raises(ValueError, match="scores must be finite"):
            local_order_statistics(part, ranks, scores=broken, check_finite=True)
    # Ranks above every size: +inf for all, and still checked.
    broken[0] = np.nan
    with pytest.raises(ValueError, match="scores must be finite"):
        local_order_statistics(
            part, np.full(m, 10**6), scores=broken, check_finite=True
        )


@pytest.mark.parametrize("calibrator", ["qq", "avg", "looped_qq"])
@pytest.mark.parametrize("layout", ["grouped", "shuffled", "negative"])
def test_fit_rejects_non_finite_scores_once_checked_in_simulation(calibrator, layout):
    # fit leaves the finiteness check to the strategy's simulation when that
    # simulation declares it; a subclass with its own simulation keeps the
    # separate check. Either way a NaN or an infinity is the same error.
    from skfedcp.calibrators import AveragingCalibrator
    from skfedcp.calibrators._base import BaseCalibrator

    class LoopedQQ(QuantileOfQuantilesCalibrator):
        _simulate_clients = BaseCalibrator._simulate_clients

    make = {
        "qq": QuantileOfQuantilesCalibrator,
        "avg": AveragingCalibrator,
        "looped_qq": LoopedQQ,
    }[calibrator]
    rng = np.random.default_rng(2)
    ids = np.repeat(np.arange(40), 1000)
    scores = rng.exponential(size=ids.shape[0]) - (2.0 if layout == "negative" else 0)
    if layout == "shuffled":
        ids = rng.permutation(ids)
    reference = make().fit(list(scores), ids, alpha=0.1).threshold_
    assert make().fit(scores, ids, alpha=0.1).threshold_ == reference
    for bad in (np.nan, np.inf, -np.inf):
        broken = scores.copy()
        broken[12345] = bad
        with pytest.raises(ValueError, match="scores must be finite"):
            make().fit(broken, ids, alpha=0.1)


@pytest.mark.parametrize("dist", ["exponential", "ties", "constant", "inf_tail"])
@pytest.mark.parametrize("level", [0.02, 0.5, 0.9, 0.999])
def test_sample_band_bounds_are_the_sample_order_statistics(dist, level):
    # The band's bounds are the k_lo-th and k_hi-th smallest of the strided
    # sample, whichever selection computes them (reference: a full sort).
    from skfedcp.calibrators._qq import _order_statistics as o

    rng = np.random.default_rng(zlib.crc32(f"{dist}{level}".encode()))
    n, m = 200_000, 200
    scores = {
        "exponential": rng.exponential(size=n),
        "ties": rng.integers(0, 3, size=n) * 1.0,
        "constant": np.full(n, 2.5),
        "inf_tail": np.where(rng.random(n) < 0.05, np.inf, rng.random(n)),
    }[dist]
    sizes = np.full(m, n // m)
    ranks = np.full(m, max(1, int(np.ceil(level * (n // m + 1)))))
    ranks = np.minimum(ranks, sizes)
    band = o._sample_band(scores, ranks, sizes)
    # The reference: the same ranks read off a sorted copy of the sample.
    level_ = ranks / (sizes + 1.0)
    sd = np.sqrt(level_ * (1.0 - level_) / (sizes + 2.0))
    q_lo = min(max(float(np.min(level_ - o._BAND_Z * sd)), 0.0), 1.0)
    q_hi = min(max(float(np.max(level_ + o._BAND_Z * sd)), 0.0), 1.0)
    sample = np.sort(scores[:: max(1, n // o._BAND_SAMPLE)])
    s = sample.shape[0]
    k_lo = int(np.floor(s * q_lo - o._BAND_Z * np.sqrt(s * q_lo * (1 - q_lo))))
    k_hi = int(np.ceil(s * q_hi + o._BAND_Z * np.sqrt(s * q_hi * (1 - q_hi))))
    k_lo, k_hi = max(k_lo, -1), min(k_hi, s)
    if (k_lo < 0 and k_hi >= s) or (k_hi - k_lo) / s > o._BAND_MAX_FRACTION:
        assert band is None
        return
    lo, hi, _ = band
    assert lo == (sample[k_lo] if k_lo >= 0 else -np.inf)
    assert hi == (sample[k_hi] if k_hi < s else np.inf)
    assert lo <= hi
