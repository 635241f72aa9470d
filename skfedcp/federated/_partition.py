"""Group rows by client, in the order of the sorted client labels."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

try:  # pandas' O(n) counting sort (what groupby uses); argsort otherwise
    from pandas._libs.algos import groupsort_indexer as _groupsort_indexer
except ImportError:  # pragma: no cover - private pandas API
    _groupsort_indexer = None

from .._typing import ClientIds
from ..utils._validation import check_client_ids

__all__ = ["ClientPartition", "split_by_client"]


class ClientPartition:
    """Which rows belong to which client, ordered by sorted client label.

    Built once per fit: the labels are factorized once (a count and a
    lookup table for small-range integer labels, ``pandas.factorize`` for
    any other labels). Rows that arrive already grouped (integer labels
    non-decreasing, the usual case when client tables are concatenated) are
    never copied; shuffled rows are grouped by a counting sort the first
    time a caller needs them moved (:meth:`grouped`, :meth:`split`), and
    each split costs one gather afterwards.

    Parameters
    ----------
    client_ids : array-like of shape (n_samples,) or None
        Client label of each row; ``None`` means one client labelled ``0``.
    n_samples : int, optional
        Expected length of ``client_ids``; inferred when omitted.

    Attributes
    ----------
    clients : ndarray of shape (n_clients,)
        Sorted unique client labels.
    sizes : ndarray of shape (n_clients,)
        Number of rows of each client.
    codes : ndarray of shape (n_samples,) or None
        Position of each row's client in ``clients`` (read-only); ``None``
        when the rows arrived grouped (see :meth:`client_codes`).

    Examples
    --------
    >>> part = ClientPartition(["b", "a", "b"])
    >>> part.clients.tolist(), part.sizes.tolist()
    (['a', 'b'], [1, 2])
    >>> [g.tolist() for g in part.split([10, 20, 30])]
    [[20], [10, 30]]
    """

    def __init__(self, client_ids: ClientIds, n_samples: int | None = None) -> None:
        if n_samples is None:
            n_samples = 1 if client_ids is None else len(client_ids)  # type: ignore[arg-type]  # a scalar raises TypeError here
        ids = (
            np.zeros(1, dtype=np.intp)  # only its label is read (see below)
            if client_ids is None
            else check_client_ids(client_ids, n_samples)
        )
        if n_samples == 0 or ids.shape[0] == 0:
            raise ValueError("client_ids is empty: there are no calibration rows.")
        self._order: NDArray[np.intp] | None = None  # grouping permutation (lazy)
        if client_ids is None or (ids.strides == (0,) and ids.dtype.kind in "iu"):
            # One client (None, or one label broadcast over the rows): no
            # pass over the labels, and no n zeros allocated and read.
            self._bounds = np.array([0, n_samples], dtype=np.intp)
            self.clients = ids[:1].copy()
            self.codes = None
            self._grouped = True
        elif ids.dtype.kind in "iu" and _is_sorted(ids):
            # Already grouped by client, in sorted order: no sort, no copy.
            self._bounds = _sorted_bounds(ids)
            self.clients = ids[self._bounds[:-1]]
            self.codes = None
            self._grouped = True
        else:
            codes, uniques, counts = _factorize(ids)
            self.clients = np.asarray(uniques)
            # The codes may be a view of the caller's labels: never written.
            self.codes = codes.view()
            self.codes.flags.writeable = False
            self._bounds = np.concatenate(([0], np.cumsum(counts)))
            self._grouped = False
        self.sizes = np.diff(self._bounds)

    @property
    def is_grouped(self) -> bool:
        """Whether the rows arrived grouped (``grouped`` then returns a view)."""
        return self._grouped

    @property
    def n_clients(self) -> int:
        """Number of clients."""
        return self.clients.shape[0]

    @property
    def offsets(self) -> NDArray[np.intp]:
        """Start of each client's rows in grouped order, then ``n_samples``."""
        return self._bounds

    def client_codes(self) -> NDArray[np.intp]:
        """Return the position of each row's client in ``clients``."""
        if self.codes is None:
            return np.repeat(np.arange(self.n_clients), self.sizes)
        return self.codes

    def grouped(self, values: ArrayLike) -> NDArray[Any]:
        """Return ``values`` reordered so that each client's rows are contiguous."""
        values = np.asarray(values)
        if self._grouped:
            return values
        if self._order is None:
            # A counting sort, only when a caller needs the rows moved (the
            # order statistics of shuffled rows never do).
            self._order = _group_order(self.codes, self.n_clients)
        return values.take(self._order, axis=0)

    def split(self, values: ArrayLike) -> list[NDArray[Any]]:
        """Split a per-row array into one array per client (views when possible)."""
        grouped = self.grouped(values)
        b = self._bounds
        return [grouped[b[i] : b[i + 1]] for i in range(self.n_clients)]

    def as_matrix(self, values: ArrayLike) -> NDArray[Any] | None:
        """Return an ``(n_clients, n)`` array if all clients have n rows, else None."""
        if self.n_clients == 0 or np.any(self.sizes != self.sizes[0]):
            return None
        return self.grouped(values).reshape(self.n_clients, self.sizes[0])


def _group_order(codes, n_groups):
    """A stable permutation grouping rows by code.

    A counting sort (O(n), pandas' ``groupsort_indexer``) when available,
    else a stable (radix) argsort of the codes.
    """
    if _groupsort_indexer is not None:
        return _groupsort_indexer(np.asarray(codes, dtype=np.intp), n_groups)[0]
    small = np.int16 if n_groups < 2**15 else np.intp
    return np.argsort(codes.astype(small), kind="stable")


def _is_sorted(ids):
    """Whether ``ids`` is non-decreasing (a short prefix rejects most shuffles)."""
    head = ids[:1024]
    if not np.all(head[1:] >= head[:-1]):
        return False
    return bool(np.all(ids[1:] >= ids[:-1]))


def _factorize(ids):
    """Codes into the sorted unique labels, the labels and their counts.

    Integer labels of a small range (the usual client numbering) take an
    O(n) count and lookup table; the codes are then the labels themselves
    when these are ``0..m-1`` (no copy). Any other labels (strings, objects,
    sparse integers) go through ``pandas.factorize``.
    """
    n = ids.shape[0]
    base: int | NDArray[np.intp]  # 0, or the smallest label as a 0-d intp array
    if ids.dtype.kind in "iu":
        hi = int(ids.max())
        counts = None
        if 0 <= hi < 2 * n + 1024:
            try:  # labels in 0..hi: count them directly (no min pass)
                counts = np.bincount(ids.astype(np.intp, copy=False), minlength=hi + 1)
                base, shifted = 0, ids.astype(np.intp, copy=False)
            except ValueError:  # a negative label
                counts = None
        if counts is None:
            lo = int(ids.min())
            if hi - lo >= 2 * n + 1024:
                return _factorize_general(ids)
            # Offsets of at most ~2n: exact in wrapping intp arithmetic,
            # whatever the labels' own dtype (uint64 above 2**63, int8, ...).
            base = np.array(lo, dtype=ids.dtype).astype(np.intp)
            shifted = ids.astype(np.intp, copy=False) - base
            counts = np.bincount(shifted, minlength=hi - lo + 1)
        present = counts > 0
        first = int(np.argmax(present))
        if present[first:].all():  # labels first..hi all used: shift only
            if first:
                shifted = shifted - first
            uniques = (np.arange(counts.shape[0] - first) + (base + first)).astype(
                ids.dtype
            )
            return shifted, uniques, counts[first:]
        offsets = np.flatnonzero(present)
        lookup = np.cumsum(present) - 1
        uniques = (offsets + base).astype(ids.dtype)
        return lookup[shifted], uniques, counts[offsets]
    return _factorize_general(ids)


def _factorize_general(ids):
    codes, uniques = pd.factorize(ids, sort=True)
    codes = codes.astype(np.intp, copy=False)
    return codes, np.asarray(uniques), np.bincount(codes, minlength=len(uniques))


def _sorted_bounds(ids):
    """Start of each run of equal labels in sorted ``ids``, plus ``len(ids)``."""
    n = ids.shape[0]
    first = int(np.searchsorted(ids, ids[0], side="right"))
    if n % first == 0:
        # Equal-size blocks are recognised from the block ends alone: O(n_clients).
        blocks = ids.reshape(-1, first)
        if np.all(blocks[:, 0] == blocks[:, -1]) and np.all(
            blocks[1:, 0] > blocks[:-1, -1]
        ):
            return np.arange(0, n + 1, first)
    starts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    return np.concatenate(([0], starts, [n]))


def split_by_client(
    values: ArrayLike, client_ids: ClientIds = None
) -> tuple[NDArray[Any], list[NDArray[Any]]]:
    """Split a per-row array by client.

    Parameters
    ----------
    values : array-like of shape (n_samples,)
        Per-row values (e.g. conformity scores).
    client_ids : array-like of shape (n_samples,) or None
        Client label of each row; ``None`` means one client.

    Returns
    -------
    clients : ndarray of shape (n_clients,)
        Sorted unique client labels.
    groups : list of ndarray
        ``groups[j]`` holds the values of client ``clients[j]``, in row order.

    Examples
    --------
    >>> clients, groups = split_by_client([1.0, 2.0, 3.0], [1, 0, 1])
    >>> clients.tolist(), [g.tolist() for g in groups]
    ([0, 1], [[2.0], [1.0, 3.0]])
    """
    values = np.asarray(values)
    part = ClientPartition(client_ids, values.shape[0])
    return part.clients, part.split(values)
