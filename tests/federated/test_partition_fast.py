"""ClientPartition's fast paths against a brute-force boolean-mask grouping."""

import zlib

import numpy as np
import pandas as pd
import pytest

from skfedcp.federated import ClientPartition, split_by_client


def _labels(kind, n, rng):
    """Random client labels of many kinds (with repeats, unsorted)."""
    small = rng.integers(0, 7, n)
    if kind == "int64":
        return small.astype(np.int64)
    if kind == "int8_negative":
        return (small * 30 - 100).astype(np.int8)  # -100..80, spans the sign
    if kind == "int16_offset":
        return (small + 1000).astype(np.int16)  # labels not starting at 0
    if kind == "int32_gaps":
        return (small * 3).astype(np.int32)  # unused values in the range
    if kind == "uint8":
        return small.astype(np.uint8)
    if kind == "uint64_huge":
        return (small.astype(np.uint64) + np.uint64(2**63 + 5)).astype(np.uint64)
    if kind == "int64_sparse":
        return small.astype(np.int64) * 10**12 - 5 * 10**12  # a huge range
    if kind == "negative_dense":
        return small.astype(np.int64) - 3
    if kind == "str":
        return np.array(["client-" + "abcdefg"[i] for i in small])
    if kind == "object":
        return np.array(
            [("x", "y", "z", "w", "v", "u", "t")[i] for i in small], dtype=object
        )
    if kind == "float":
        return small.astype(np.float64) / 2
    if kind == "bool":
        return small % 2 == 0
    if kind == "category":
        cats = pd.Categorical.from_codes(small, ["g", "f", "e", "d", "c", "b", "a"])
        return pd.Series(cats)
    raise AssertionError(kind)


KINDS = [
    "int64",
    "int8_negative",
    "int16_offset",
    "int32_gaps",
    "uint8",
    "uint64_huge",
    "int64_sparse",
    "negative_dense",
    "str",
    "object",
    "float",
    "bool",
    "category",
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", ["shuffled", "sorted"])
def test_partition_matches_boolean_masks(kind, layout):
    rng = np.random.default_rng(zlib.crc32(f"{kind}-{layout}".encode()))
    n = 200
    labels = _labels(kind, n, rng)
    raw = np.asarray(labels.to_numpy() if isinstance(labels, pd.Series) else labels)
    if layout == "sorted":
        order = np.argsort(raw, kind="stable")
        raw = raw[order]
        labels = (
            labels.iloc[order].reset_index(drop=True)
            if isinstance(labels, pd.Series)
            else raw
        )
    values = rng.normal(size=n)
    part = ClientPartition(labels)
    expected_clients = np.unique(raw)
    assert part.clients.tolist() == expected_clients.tolist()
    masks = [raw == c for c in expected_clients]
    assert part.sizes.tolist() == [int(mk.sum()) for mk in masks]
    assert part.n_clients == len(expected_clients)
    groups = part.split(values)
    for mk, group in zip(masks, groups, strict=True):
        # Row order within a client is kept.
        np.testing.assert_array_equal(group, values[mk])
    codes = np.asarray(part.client_codes())
    for j, mk in enumerate(masks):
        assert np.all(codes[mk] == j)
    np.testing.assert_array_equal(part.grouped(values), np.concatenate(groups))
    np.testing.assert_array_equal(part.offsets, np.r_[0, np.cumsum(part.sizes)])
    clients, split = split_by_client(values, labels)
    assert clients.tolist() == expected_clients.tolist()
    for a, b in zip(split, groups, strict=True):
        np.testing.assert_array_equal(a, b)


def test_grouped_int_labels_are_not_copied():
    ids = np.repeat(np.arange(4), 3)
    part = ClientPartition(ids)
    assert part.is_grouped
    values = np.arange(12.0)
    assert np.shares_memory(part.grouped(values), values)
    assert part.as_matrix(values).shape == (4, 3)


def test_codes_are_read_only_and_labels_untouched():
    ids = np.array([2, 0, 1, 0, 2])
    before = ids.copy()
    part = ClientPartition(ids)
    assert not part.is_grouped
    with pytest.raises(ValueError):
        part.codes[0] = 5
    np.testing.assert_array_equal(ids, before)
    # The grouping order is built lazily, once, and reused.
    first = part.split(np.arange(5.0))
    assert [g.tolist() for g in first] == [[1.0, 3.0], [2.0], [0.0, 4.0]]
    assert part.grouped(np.arange(5)).tolist() == [1, 3, 2, 0, 4]


def test_many_clients_few_rows_and_few_clients_many_rows():
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.repeat(np.arange(10_000), 5))
    part = ClientPartition(ids)
    assert part.n_clients == 10_000 and np.all(part.sizes == 5)
    values = rng.normal(size=ids.shape[0])
    matrix = part.as_matrix(values)
    for j in (0, 1234, 9999):
        np.testing.assert_array_equal(matrix[j], values[ids == j])
    ids = rng.integers(0, 2, 100_000)
    part = ClientPartition(ids)
    assert part.sizes.tolist() == np.bincount(ids).tolist()


@pytest.mark.parametrize(
    "ids",
    [
        None,
        np.broadcast_to(np.intp(0), (5,)),
        np.broadcast_to(np.int8(-3), (5,)),
        np.zeros(5, dtype=np.int64),
    ],
    ids=["none", "broadcast_zero", "broadcast_int8", "zeros"],
)
def test_single_client_paths_agree(ids):
    # None and one label broadcast over the rows take the O(1) path (no
    # pass over the labels); they must describe the partition a plain
    # array of that label does.
    part = ClientPartition(ids, 5)
    label = 0 if ids is None else ids[0]
    assert part.clients.tolist() == [label]
    assert part.sizes.tolist() == [5]
    assert part.is_grouped
    assert part.client_codes().tolist() == [0] * 5
    values = np.arange(5.0)
    assert [g.tolist() for g in part.split(values)] == [values.tolist()]
    assert np.shares_memory(part.grouped(values), values)


def test_single_client_none_needs_rows():
    with pytest.raises(ValueError, match="empty"):
        ClientPartition(None, 0)


@pytest.mark.parametrize(
    "ids, kinds",
    [
        ([1, 1.0, True], "bool, float, int"),
        (np.array([1, 1.0, True], dtype=object), "bool, float, int"),
        ([1, "1"], "int, str"),
        (np.array(["a", 1], dtype=object), "int, str"),
        ((np.int64(0), 0.0), "float, int"),
        # pandas infers "integer-na" and "mixed" here: the Python fallback names them
        ([1, np.nan], "float, int"),
        ([b"a", "a"], "bytes, str"),
        ([1j, np.complex128(2j)], "complex, complex128"),
    ],
)
def test_mixed_label_types_are_refused_not_merged(ids, kinds):
    # 1, 1.0 and True are equal as dict keys and np.asarray turns [1, "1"]
    # into two '1' strings: either way two clients would silently become one.
    with pytest.raises(TypeError, match=rf"client_ids mixes label types \({kinds}\)"):
        ClientPartition(ids)


@pytest.mark.parametrize(
    "ids", [[1, 2, 1], ("a", "b"), [np.int64(1), 2], np.array([3, 1], dtype=object)]
)
def test_one_label_kind_is_accepted(ids):
    part = ClientPartition(ids)
    assert part.n_clients == 2
