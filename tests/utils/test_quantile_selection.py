"""The filtered selection behind order_statistic equals numpy.partition, bit for bit."""

import math

import numpy as np
import pytest

from skfedcp.utils import _quantile
from skfedcp.utils._quantile import (
    _SELECT_MIN_SIZE,
    _filtered_select,
    conformal_quantile,
    conformal_rank,
    order_statistic,
)

N = _SELECT_MIN_SIZE + 12_345  # above the size where the filter is used


def _inputs():
    rng = np.random.default_rng(0)
    with_inf = np.abs(rng.standard_t(3, size=N))
    with_inf[rng.choice(N, size=N // 5, replace=False)] = np.inf  # a fifth +inf
    return {
        "normal": rng.normal(size=N),
        "heavy-tailed": np.abs(rng.standard_t(2, size=N)),
        "sorted": np.sort(rng.random(N)),
        "sorted descending": np.sort(rng.random(N))[::-1].copy(),
        "few ties": rng.integers(0, 5, size=N).astype(float),
        "constant": np.full(N, 2.5),
        "+inf": with_inf,
        "negative and -inf": np.concatenate(([-np.inf] * 7, -rng.random(N - 7))),
    }


INPUTS = _inputs()


def _ranks(n):
    """0-based ranks at the ends, at conformal levels and at the quartiles."""
    levels = [conformal_rank(n, a) - 1 for a in (0.01, 0.05, 0.1, 0.2)]
    return sorted({0, 1, n // 10, n // 4, 3 * n // 4, n - 2, n - 1, *levels})


def _same(a, b):
    """Equal values with equal bits (tells -0.0 from 0.0)."""
    return np.float64(a).tobytes() == np.float64(b).tobytes()


@pytest.mark.parametrize("name", list(INPUTS))
def test_order_statistic_equals_partition(name):
    values = INPUTS[name]
    before = values.copy()
    for k in _ranks(values.shape[0]):
        expected = np.partition(values, k)[k]
        assert _same(order_statistic(values, k + 1), expected), k
        found = _filtered_select(values, k)
        assert found is None or _same(found, expected), k
    np.testing.assert_array_equal(values, before)  # never written


@pytest.mark.parametrize("name", ["normal", "heavy-tailed", "sorted", "+inf"])
def test_filter_answers_at_conformal_levels(name):
    # The filter itself (not the fallback) answers on these inputs.
    values = INPUTS[name]
    for alpha in (0.05, 0.1, 0.2):
        k = conformal_rank(values.shape[0], alpha) - 1
        assert _filtered_select(values, k) == np.partition(values, k)[k]


def test_nan_ranks_last_as_in_partition():
    rng = np.random.default_rng(1)
    values = rng.normal(size=N)
    values[rng.choice(N, size=50, replace=False)] = np.nan
    for k in (N // 10, N - 100, N - 51, N - 50, N - 1):
        expected = np.partition(values, k)[k]
        got = order_statistic(values, k + 1)
        assert _same(got, expected) or (math.isnan(got) and math.isnan(expected))


@pytest.mark.parametrize("n", [0, 1, 2, 7, 1000, _SELECT_MIN_SIZE - 1])
def test_tiny_inputs_use_the_partition(n, monkeypatch):
    def fail(values, k):
        raise AssertionError("the filter is for large inputs")

    monkeypatch.setattr(_quantile, "_filtered_select", fail)
    values = np.random.default_rng(n).random(n)
    for rank in range(1, n + 2, max(1, n // 7)):
        expected = np.inf if rank > n else np.partition(values, rank - 1)[rank - 1]
        assert order_statistic(values, rank) == expected


def test_huge_input():
    values = np.random.default_rng(2).exponential(size=2_000_003)
    k = conformal_rank(values.shape[0], 0.1) - 1
    assert order_statistic(values, k + 1) == np.partition(values, k)[k]
    assert conformal_quantile(values, 0.1) == np.partition(values, k)[k]


def test_a_failed_pivot_falls_back_to_the_partition():
    # The strided sample is unlike the other values: huge sample points put
    # the pivot above an upper-tail answer, tiny ones put it below a
    # lower-tail answer. The filter declines; the partition answers.
    n = N
    step = n // _quantile._SELECT_SAMPLE
    upper, lower = conformal_rank(n, 0.1) - 1, n // 10
    for sample_value, k in ((1e9, upper), (-1e9, lower)):
        values = np.random.default_rng(3).random(n)
        values[::step] = sample_value
        assert _filtered_select(values, k) is None
        assert order_statistic(values, k + 1) == np.partition(values, k)[k]


def test_zero_answer_is_left_to_the_partition():
    # -0.0 and 0.0 compare equal: which one the partition returns is its own
    # choice, so the filter declines and order_statistic partitions.
    values = np.zeros(N)
    values[::2] = -0.0
    values[: N // 20] = -1.0
    k = N // 2 + 1000
    assert _filtered_select(values, k) is None
    assert _same(order_statistic(values, k + 1), np.partition(values, k)[k])


def test_overwrite_input_gives_the_same_value():
    values = np.random.default_rng(4).normal(size=N)
    k = conformal_rank(N, 0.1)
    expected = np.partition(values, k - 1)[k - 1]
    assert order_statistic(values.copy(), k, overwrite_input=True) == expected
