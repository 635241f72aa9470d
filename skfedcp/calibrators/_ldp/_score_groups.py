"""LDP-S's public group assignment, held as counts per (client, group).

The protocol splits the ``N`` users, numbered client by client, uniformly at
random into ``T`` groups of ``n' = floor(N / T)`` users and an unused rest
(group ``T``). The law of such a split factors exactly into

1. the **counts** ``K[j, g]`` of client ``j``'s users in group ``g``: the
   ``(m, T + 1)`` table with row sums ``n_j`` and column sums
   ``(n', ..., n', N - T n')`` of a uniformly random assignment (a
   multivariate hypergeometric law), which the server draws in
   ``O(m T)`` work and memory (:func:`draw_group_counts`), whatever the
   announced sizes; and
2. given the counts, **which** of client ``j``'s users fall in each group:
   a uniformly random arrangement of its ``n_j`` users, independent across
   clients, which each client derives for itself in ``O(n_j)`` from a public
   key (:func:`client_groups`): a uniformly random permutation of its users
   drawn from its own disjoint stream of a counter-based generator (Philox,
   keyed by the public key, counter ``j * 2^192``) fills group 0 with the
   first ``K[j, 0]``, group 1 with the next ``K[j, 1]``, and so on.

So the server keeps ``O(m T)`` numbers; the per-user assignment is never
built on the server, except when a caller asks a client's query for its
``users`` (built on access, ``O(n_j)``) or when :meth:`fit_from_messages`
checks a transcript (at most ``T`` times the answers it holds).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: ``Generator.hypergeometric`` takes populations below 10**9 per colour.
_HG_LIMIT = 10**9 - 1


def draw_group_counts(
    rng: np.random.Generator | np.random.RandomState,
    sizes: NDArray[np.int64],
    columns: NDArray[np.int64],
) -> NDArray[np.int64]:
    """Counts ``K[j, g]`` of client ``j``'s users in group ``g``, drawn exactly.

    ``K`` has the law of the counts of a uniformly random assignment of the
    ``sum(sizes)`` users (numbered client by client) to slots, ``columns[g]``
    of them in group ``g``. Drawn by halving the clients: the users of the
    left half's clients are a uniformly random subset of the node's users,
    so their counts per group are multivariate hypergeometric given the
    node's counts, and each half is split the same way, independently given
    its counts. Every level is vectorised over its nodes: ``log2(m)`` levels
    of ``len(columns) - 1`` hypergeometric draws each, ``O(m T)`` in all.

    Parameters
    ----------
    rng : Generator or RandomState
    sizes : ndarray of shape (m,)
        Users of each client.
    columns : ndarray of shape (k,)
        Users of each group; ``columns.sum() == sizes.sum()``.

    Returns
    -------
    counts : ndarray of shape (m, k), dtype int64

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> K = draw_group_counts(rng, np.array([3, 5, 0, 4]), np.array([4, 4, 4]))
    >>> K.sum(axis=1).tolist(), K.sum(axis=0).tolist()
    ([3, 5, 0, 4], [4, 4, 4])
    """
    m = sizes.shape[0]
    counts = np.empty((m, columns.shape[0]), dtype=np.int64)
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    # Nodes: client ranges [a, b) and their users' counts per group.
    a, b = np.array([0]), np.array([m])
    node = columns.astype(np.int64)[None, :]
    while a.size:
        leaf = b - a == 1
        counts[a[leaf]] = node[leaf]
        a, b, node = a[~leaf], b[~leaf], node[~leaf]
        if not a.size:
            break
        mid = (a + b) // 2
        left = _multivariate_hypergeometric(rng, node, bounds[mid] - bounds[a])
        a, b = np.concatenate((a, mid)), np.concatenate((mid, b))
        node = np.concatenate((left, node - left))
    return counts


def _multivariate_hypergeometric(rng, colours, draws):
    """One draw per row: ``draws[i]`` items from an urn of ``colours[i]``.

    The marginal method: colour ``g``'s count is hypergeometric among what
    is left of the draws and of the colours ``>= g``.
    """
    out = np.zeros_like(colours)
    left = draws.astype(np.int64)
    rest = colours[:, ::-1].cumsum(axis=1)[:, ::-1]  # colours g, g+1, ... in all
    for g in range(colours.shape[1] - 1):
        out[:, g] = _hypergeometric(rng, colours[:, g], rest[:, g + 1], left)
        left = left - out[:, g]
    out[:, -1] = left
    return out


def _hypergeometric(rng, good, bad, nsample):
    """Good items among ``nsample`` drawn from ``good + bad``; vectorised, exact.

    Degenerate entries are set without a draw (the legacy ``RandomState``
    sampler needs ``nsample >= 1``). Populations above the limit of
    ``Generator.hypergeometric`` go to the legacy sampler, which has none,
    seeded from ``rng``.
    """
    out = np.where(bad == 0, nsample, 0).astype(np.int64)
    live = (nsample > 0) & (good > 0) & (bad > 0)
    if not live.any():
        return out
    g, b, s = good[live], bad[live], nsample[live]
    big = (g > _HG_LIMIT) | (b > _HG_LIMIT)
    got = np.empty(g.shape, dtype=np.int64)
    if (~big).any():
        got[~big] = rng.hypergeometric(g[~big], b[~big], s[~big])
    if big.any():
        legacy = rng
        if not isinstance(rng, np.random.RandomState):
            legacy = np.random.RandomState(rng.integers(0, 2**32, dtype=np.uint64))
        got[big] = legacy.hypergeometric(g[big], b[big], s[big])
    out[live] = got
    return out


class _ClientStreams:
    """Client ``j``'s public stream: Philox keyed by the assignment key.

    Philox is counter-based: client ``j``'s stream starts at the counter
    ``j * 2^192``, so the streams are disjoint and each client reads its own
    without the others'. One bit generator is reused, its state set per
    client (as a fresh ``Philox(counter=[0, 0, 0, j], key=key)``).
    """

    def __init__(self, key: NDArray[np.uint64]) -> None:
        self._key = np.asarray(key, dtype=np.uint64)
        self._bits = np.random.Philox(key=self._key)
        self._generator = np.random.Generator(self._bits)

    def shuffle(self, j: int, users: NDArray[np.intp]) -> None:
        """Shuffle ``users`` in place with client ``j``'s stream.

        The draws depend only on ``len(users)``: shuffling ``arange(n)``
        gives :meth:`permutation`.
        """
        self._bits.state = {
            "bit_generator": "Philox",
            "state": {
                "counter": np.array([0, 0, 0, j], dtype=np.uint64),
                "key": self._key,
            },
            "buffer": np.zeros(4, dtype=np.uint64),
            "buffer_pos": 4,
            "has_uint32": 0,
            "uinteger": 0,
        }
        self._generator.shuffle(users)

    def permutation(self, j: int, n: int) -> NDArray[np.intp]:
        """A uniformly random permutation of client ``j``'s ``n`` users."""
        order = np.arange(n, dtype=np.intp)
        self.shuffle(j, order)
        return order


def client_groups(
    key: NDArray[np.uint64],
    j: int,
    counts_row: NDArray[np.int64],
    streams: _ClientStreams | None = None,
) -> NDArray[np.intp]:
    """The group of each of client ``j``'s users (group ``T``: not asked).

    The client's users in the order of a uniformly random permutation drawn
    from its public stream fill group 0 with the first ``K[j, 0]``, group 1
    with the next ``K[j, 1]``, and so on: a uniformly random arrangement
    given the counts. ``O(n_j)``.
    """
    n = int(counts_row.sum())
    groups = np.empty(n, dtype=np.intp)
    if n:
        order = (streams or _ClientStreams(key)).permutation(j, n)
        groups[order] = np.repeat(np.arange(counts_row.shape[0]), counts_row)
    return groups


def asked_users(
    key: NDArray[np.uint64],
    j: int,
    counts_row: NDArray[np.int64],
    round_: int,
) -> NDArray[np.intp]:
    """Client ``j``'s users asked in round ``round_`` (group ``round_ - 1``), sorted.

    What :func:`client_groups` puts in that group: the entries
    ``K[j, 0] + ... + K[j, g - 1]`` to ``K[j, 0] + ... + K[j, g] - 1`` of
    the client's permutation. ``O(n_j)`` on the client; the server needs
    only ``counts_row`` and ``key`` to pose the query.

    Examples
    --------
    >>> key = draw_key(np.random.default_rng(0))
    >>> row = np.array([2, 3, 1])
    >>> groups = client_groups(key, 4, row)
    >>> [bool((np.flatnonzero(groups == r - 1) == asked_users(key, 4, row, r)).all())
    ...  for r in (1, 2, 3)]
    [True, True, True]
    """
    counts_row = np.asarray(counts_row, dtype=np.int64)
    g = int(round_) - 1
    end = int(counts_row[: g + 1].sum())
    start = end - int(counts_row[g])
    if start == end:
        return np.empty(0, dtype=np.intp)
    order = _ClientStreams(key).permutation(j, int(counts_row.sum()))
    return np.sort(order[start:end])


def public_groups(
    key: NDArray[np.uint64], counts: NDArray[np.int64]
) -> NDArray[np.intp]:
    """The group of every user, numbered client by client (``O(N + m)``).

    What every client derives with :func:`client_groups`, for all at once:
    the in-process simulation's side, and the transcript check of
    :meth:`fit_from_messages`. The placing is vectorised; each client's
    shuffle stays one call on its own stream (a client whose users all fall
    in one group needs none: its groups do not depend on the order, and the
    streams are disjoint, so skipping it changes no other client's draws).
    """
    counts = np.asarray(counts, dtype=np.int64)
    m, k = counts.shape
    sizes = counts.sum(axis=1)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    groups = np.empty(int(ends[-1]) if m else 0, dtype=np.intp)
    mixed = np.count_nonzero(counts, axis=1) > 1
    streams = _ClientStreams(key)
    # Clients in chunks of about _CHUNK users, so that the temporaries stay
    # small (one large array, the result, as with one client at a time).
    firsts = np.flatnonzero(np.diff(starts // _CHUNK, prepend=-1))
    first, last = starts.tolist(), ends.tolist()
    for a, b in pairwise([*firsts.tolist(), m]):
        base = int(starts[a])
        # The chunk's rows; each mixed client's segment shuffled in place with
        # its stream is then its start plus its permutation (client_groups).
        order = np.arange(base, int(ends[b - 1]), dtype=np.intp)
        for j in (a + np.flatnonzero(mixed[a:b])).tolist():
            streams.shuffle(j, order[first[j] - base : last[j] - base])
        labels = np.tile(np.arange(k, dtype=np.intp), b - a)
        groups[order] = np.repeat(labels, counts[a:b].ravel())
    return groups


#: Users per chunk of :func:`public_groups` (its temporaries' size).
_CHUNK = 2**16


def draw_key(rng: Any) -> NDArray[np.uint64]:
    """A fresh public 128-bit key for :func:`user_keys`."""
    return np.asarray(
        rng.randint(0, 2**64, size=2, dtype=np.uint64)
        if isinstance(rng, np.random.RandomState)
        else rng.integers(0, 2**64, size=2, dtype=np.uint64),
        dtype=np.uint64,
    )
