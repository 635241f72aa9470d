"""Stacked numeric message columns: the one-pass checks flag what the general
path flags, naming the same client and field."""

import numpy as np
import pytest

from skfedcp.calibrators import QuantileOfQuantilesCalibrator
from skfedcp.calibrators._messages import collect_messages
from skfedcp.exceptions import InvalidMessageError

FIELDS = {"n": "size", "quantile": "value"}


def _stacked(n, q):
    return {"n": np.asarray(n), "quantile": np.asarray(q)}


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64, np.float64])
def test_size_column_valid_and_invalid(dtype):
    sizes = np.array([10, 20, 30], dtype=np.int64)
    stacked, problems = collect_messages(
        _stacked(sizes.astype(dtype), [1.0, 2.0, 3.0]), FIELDS, sizes
    )
    assert problems == []
    assert stacked["n"].dtype == np.int64
    np.testing.assert_array_equal(stacked["n"], sizes)
    assert stacked["n"] is not sizes
    wrong = sizes.astype(dtype)
    wrong[1] = 21
    _, problems = collect_messages(_stacked(wrong, [1.0, 2.0, 3.0]), FIELDS, sizes)
    assert [(p.index, p.field) for p in problems] == [(1, "n")]
    assert "announced 20 rows" in problems[0].reason


def test_negative_size_in_int_column():
    sizes = np.array([10, 20, 30])
    _, problems = collect_messages(
        _stacked([10, -20, 30], [1.0, 2.0, 3.0]), FIELDS, sizes
    )
    assert [(p.index, p.field) for p in problems] == [(1, "n")]
    assert "non-negative integer" in problems[0].reason


@pytest.mark.parametrize("bad", [np.nan, -np.inf])
def test_value_column_nan_and_minus_inf(bad):
    sizes = np.array([10, 20, 30])
    values = np.array([1.0, 2.0, 3.0])
    stacked, problems = collect_messages(_stacked(sizes, values), FIELDS, sizes)
    assert problems == []
    assert stacked["quantile"] is not values
    values[2] = bad
    _, problems = collect_messages(_stacked(sizes, values), FIELDS, sizes)
    assert [(p.index, p.field) for p in problems] == [(2, "quantile")]


def test_fit_from_stacked_messages_names_the_client():
    cal = QuantileOfQuantilesCalibrator()
    sizes = [10] * 5
    messages = {"n": np.array(sizes), "quantile": np.arange(1.0, 6.0)}
    assert cal.fit_from_messages(messages, alpha=0.1, n_per_client=sizes).threshold_
    messages["n"] = np.array([10, 10, 10, 11, 10])
    with pytest.raises(InvalidMessageError) as info:
        cal.fit_from_messages(messages, alpha=0.1, n_per_client=sizes)
    assert (info.value.client, info.value.field) == (3, "n")
    messages["n"] = np.array(sizes)
    messages["quantile"] = np.array([1.0, np.nan, 3.0, 4.0, 5.0])
    with pytest.raises(InvalidMessageError) as info:
        cal.fit_from_messages(messages, alpha=0.1, n_per_client=sizes)
    assert (info.value.client, info.value.field) == (1, "quantile")


@pytest.mark.parametrize(
    "labels, ok",
    [
        (np.arange(5), True),
        (np.array([4, 0, 3, 1, 2]), True),
        (np.array([0, 1, 2, 2, 3]), False),
        (np.array([3, 1, 3, 0, 2]), False),
        (np.array([2**63 + 5, 1, 2**63 + 4, 0, 7], dtype=np.uint64), True),
        (np.array(["b", "a", "c", "d", "e"]), True),
        (np.array(["b", "a", "b", "d", "e"]), False),
    ],
)
def test_check_client_labels_uniqueness(labels, ok):
    from skfedcp.calibrators._messages import check_client_labels

    if ok:
        assert check_client_labels(labels, 5) is not None
    else:
        with pytest.raises(ValueError, match="must not repeat a label"):
            check_client_labels(labels, 5)
