"""Secure aggregation: a simulation of the arithmetic of pairwise-masked sums.

This module simulates, in one process, the arithmetic of the secure
aggregation protocols of Bonawitz et al. (2017) and Bell et al. (2020) as
used by FED-chi2 (Pang et al., 2023, App. B):

1. every client encodes its real vector in fixed point, as unsigned 64-bit
   integers (the ring Z/2^64; numpy ``uint64`` arithmetic wraps);
2. every edge ``{i, j}`` of a communication graph gets a pairwise seed
   (key agreement in the real protocol, a random draw here) from which both
   ends expand the same mask; client ``i`` adds the masks shared with larger
   indices and subtracts those shared with smaller ones, plus a self mask;
3. the server adds the masked vectors of the surviving clients; the pairwise
   masks cancel modulo 2^64, the self masks of survivors and the pairwise
   masks between survivors and dropped clients are removed after being
   "reconstructed" (from Shamir shares in the real protocol; looked up here).

What is *not* simulated: key agreement, authenticated encryption, Shamir
secret sharing, thresholds and abort rules, and any real network. The point
of the simulation is that the server-side code only ever combines masked
vectors, the dropped set and the recovered masks, and that the result is
bit-exact: ``sum of the survivors' inputs mod 2^64``.

The fixed-point encoding lives in :mod:`._fixed_point`, the batched
simulation that the estimators run in :mod:`._masked_sum`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from numbers import Integral
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._typing import RandomStateLike
from ..utils._random import check_seed_sequence
from ._fixed_point import _check_ring_message, fixed_point_decode, fixed_point_encode

__all__ = [
    "MaskingSetup",
    "make_masking_setup",
    "mask_input",
    "secure_aggregation_graph",
    "secure_sum",
    "unmask_sum",
]


def secure_aggregation_graph(
    n_clients: int,
    *,
    graph: Literal["complete", "harary"] = "complete",
    degree: int | None = None,
    random_state: RandomStateLike = None,
) -> NDArray[np.intp]:
    """Edges of the communication graph of pairwise masks.

    Parameters
    ----------
    n_clients : int
        Number of clients ``n >= 1``.
    graph : {"complete", "harary"}, default="complete"
        ``"complete"``: every pair of clients shares a mask (Bonawitz et al.,
        2017). ``"harary"``: a Harary graph of even degree ``k`` with nodes
        randomly relabelled (Bell et al., 2020), so each client masks with
        only ``k`` neighbours.
    degree : int, optional
        Degree ``k`` of the Harary graph; by default ``2 * ceil(log2(n))``.
        Capped at ``n - 1`` (which gives the complete graph); must be even
        otherwise.
    random_state : None, int, SeedSequence, Generator or RandomState, default=None
        Relabelling of the Harary graph; None draws fresh operating-system
        entropy (never NumPy's global state).

    Returns
    -------
    edges : ndarray of shape (n_edges, 2), dtype intp
        Pairs ``(i, j)`` with ``i < j``, sorted.

    Examples
    --------
    >>> secure_aggregation_graph(3).tolist()
    [[0, 1], [0, 2], [1, 2]]
    >>> secure_aggregation_graph(100, graph="harary", random_state=0).shape
    (700, 2)
    """
    return _circulant_graph(
        n_clients, graph=graph, degree=degree, random_state=random_state
    ).edges()


class _CirculantGraph(NamedTuple):
    """A masking graph as a relabelled circulant graph.

    Both graphs of :func:`secure_aggregation_graph` are circulant: client
    ``label[p]`` sits at position ``p`` of a cycle and is joined to the
    clients at positions ``p + s (mod n)`` for every ``s`` in ``offsets``
    (the Harary graph: ``s = 1..k/2`` with ``label`` a random permutation;
    the complete graph: ``s = 1..(n-1)//2`` with ``label`` the identity, plus
    ``s = n/2`` for the first ``n/2`` positions when ``n`` is even, the
    ``half`` layer). Each *layer* (one offset) pairs every position with one
    other, which lets the simulation add all of its masks with two slices.
    """

    label: np.ndarray
    offsets: tuple
    half: bool = False

    @property
    def n_clients(self):
        return self.label.shape[0]

    def layers(self):
        """Yield ``(s, m)``: layer ``s`` joins positions ``i`` and ``(i + s) % n``
        for ``i < m``."""
        n = self.n_clients
        for s in self.offsets:
            yield s, n
        if self.half:
            yield n // 2, n // 2

    def edges(self):
        """Pairs ``(i, j)``, ``i < j``, sorted: the edge list of the graph."""
        n = self.n_clients
        parts = [np.empty((0, 2), dtype=np.intp)]
        for s, m in self.layers():
            i = np.arange(m)
            parts.append(np.column_stack([self.label[i], self.label[(i + s) % n]]))
        pairs = np.sort(np.concatenate(parts), axis=1)
        order = np.lexsort((pairs[:, 1], pairs[:, 0]))
        return pairs[order].astype(np.intp)


def _circulant_graph(n_clients, *, graph="complete", degree=None, random_state=None):
    # The graph of secure_aggregation_graph, as a _CirculantGraph.
    if isinstance(n_clients, bool) or not isinstance(n_clients, Integral):
        raise TypeError(f"n_clients must be an int; got {n_clients!r}.")
    if n_clients < 1:
        raise ValueError(f"n_clients must be >= 1; got {n_clients}.")
    n = int(n_clients)
    if graph not in ("complete", "harary"):
        raise ValueError(f"graph must be 'complete' or 'harary'; got {graph!r}.")
    if graph == "harary":
        if degree is None:
            k = 2 * int(np.ceil(np.log2(max(n, 2))))
        elif isinstance(degree, bool) or not isinstance(degree, Integral) or degree < 1:
            raise ValueError(f"degree must be a positive int; got {degree!r}.")
        else:
            k = int(degree)
        k = min(k, n - 1)
        if k < n - 1:
            if k % 2:
                raise ValueError(f"degree must be even (Harary graph); got {k}.")
            rng = _as_generator(random_state)
            # k / 2 < n / 2: the layers are distinct edges.
            return _CirculantGraph(rng.permutation(n), tuple(range(1, k // 2 + 1)))
    return _CirculantGraph(
        np.arange(n), tuple(range(1, (n - 1) // 2 + 1)), half=n % 2 == 0 and n > 1
    )


class MaskingSetup(NamedTuple):
    """Public graph and simulated secrets of one secure aggregation.

    Built by :func:`make_masking_setup`. In the real protocol the pairwise
    seeds come from key agreement and only their two ends know them; the
    self-mask seeds are known to their owner and secret-shared. Here they are
    simply stored, and the client and server steps look them up.

    Attributes
    ----------
    n_clients : int
        Number of clients.
    edges : ndarray of shape (n_edges, 2)
        Pairs ``(i, j)``, ``i < j``, that share a mask.
    edge_seeds : tuple of int
        One 128-bit seed per edge.
    self_seeds : tuple of int or None
        One 128-bit self-mask seed per client, or None for no self masks.

    Examples
    --------
    >>> setup = make_masking_setup(4, random_state=0)
    >>> setup.n_clients, setup.edges.shape
    (4, (6, 2))
    >>> setup.neighbours(0).tolist()
    [1, 2, 3]
    """

    n_clients: int
    edges: np.ndarray
    edge_seeds: tuple
    self_seeds: tuple | None = None

    def neighbours(self, client: int) -> NDArray[np.intp]:
        """Return the sorted neighbours of ``client`` in the masking graph."""
        i, j = self.edges[:, 0], self.edges[:, 1]
        return np.sort(np.concatenate([j[i == client], i[j == client]]))


def _edges_of(setup, client):
    # (edge index, other end) for every edge touching ``client``.
    a, b = setup.edges[:, 0], setup.edges[:, 1]
    idx = np.flatnonzero((a == client) | (b == client))
    return idx, np.where(a[idx] == client, b[idx], a[idx])


def _as_generator(random_state):
    """A Generator for ``random_state``; None means fresh OS entropy."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    # Anything else (a RandomState included) is turned into a SeedSequence.
    return np.random.default_rng(check_seed_sequence(random_state, allow_secure=False))


def _draw_seeds(rng, size):
    # 128-bit integer seeds from four 32-bit words of the caller's generator
    # (a Generator, or a RandomState instance: never the global state).
    if isinstance(rng, np.random.RandomState):
        words = rng.randint(0, 2**32, size=(size, 4), dtype=np.uint64)
    else:
        words = rng.integers(0, 2**32, size=(size, 4), dtype=np.uint64)
    w = words.astype(object)
    return list(w[:, 0] | (w[:, 1] << 32) | (w[:, 2] << 64) | (w[:, 3] << 96))


def make_masking_setup(
    n_clients: int,
    *,
    graph: Literal["complete", "harary"] = "complete",
    degree: int | None = None,
    self_masks: bool = True,
    random_state: RandomStateLike = None,
) -> MaskingSetup:
    """Draw the graph and the simulated seeds of one secure aggregation.

    Parameters
    ----------
    n_clients : int
        Number of clients.
    graph : {"complete", "harary"}, default="complete"
        Masking graph, see :func:`secure_aggregation_graph`.
    degree : int, optional
        Degree of the Harary graph.
    self_masks : bool, default=True
        Whether each client also adds a self mask ``PRG(b_i)`` (Bonawitz et
        al.), removed by the server for survivors.
    random_state : None, int, SeedSequence, Generator or RandomState, default=None
        Source of the graph relabelling and of every seed; None draws fresh
        operating-system entropy (never NumPy's global state).

    Returns
    -------
    setup : MaskingSetup

    Examples
    --------
    >>> setup = make_masking_setup(10, graph="harary", random_state=0)
    >>> setup.edges.shape, len(setup.self_seeds)
    ((40, 2), 10)
    """
    rng = _as_generator(random_state)
    edges = secure_aggregation_graph(
        n_clients, graph=graph, degree=degree, random_state=rng
    )
    edge_seeds = _draw_seeds(rng, edges.shape[0])
    self_seeds = _draw_seeds(rng, int(n_clients)) if self_masks else None
    return MaskingSetup(
        int(n_clients),
        edges,
        tuple(edge_seeds),
        None if self_seeds is None else tuple(self_seeds),
    )


def _prg(seed, length, offset=0):
    """Mask words ``offset .. offset + length - 1`` of the stream of ``seed``.

    A cryptographic pseudorandom generator, as secure aggregation requires
    (a statistical one such as PCG64 can be predicted from its outputs):
    AES-128 in counter mode keyed by the first 16 bytes of SHA-256 of the
    seed (an integer below 2**256), counter from zero; each 16-byte block
    gives two little-endian 64-bit words of the ring.
    """
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    seed, length, offset = int(seed), int(length), int(offset)
    if not 0 <= seed < 2**256:
        raise ValueError(f"mask seeds are integers in [0, 2**256); got {seed}.")
    key = hashlib.sha256(b"skfedcp-mask/" + seed.to_bytes(32, "little")).digest()
    first, skip = divmod(offset, 2)
    n_blocks = (skip + length + 1) // 2
    encryptor = Cipher(
        algorithms.AES(key[:16]), modes.CTR(first.to_bytes(16, "big"))
    ).encryptor()
    stream = encryptor.update(bytes(16 * n_blocks))
    words = np.frombuffer(stream, dtype="<u8").astype(np.uint64, copy=False)
    return words[skip : skip + length].copy()


def _as_ring_vector(q: ArrayLike, name: str = "q") -> NDArray[np.uint64]:
    q = np.asarray(q)
    if q.dtype != np.uint64:
        raise TypeError(
            f"{name} must be an array of uint64 (use fixed_point_encode); "
            f"got dtype {q.dtype}."
        )
    return q


def mask_input(
    q: ArrayLike, client: int, setup: MaskingSetup, *, offset: int = 0
) -> NDArray[np.uint64]:
    """Client step: mask one client's encoded vector.

    ``y_i = q_i + t_i + sum_{j > i} m_ij - sum_{j < i} m_ij (mod 2**64)`` over
    the neighbours ``j`` of ``i`` in the masking graph, where ``t_i`` is the
    self mask and ``m_ij`` the pairwise mask expanded from the seed of edge
    ``{i, j}``. Masks are uniform on Z/2^64, so ``y_i`` alone reveals nothing
    about ``q_i``. Simulation of the protocol's arithmetic only.

    Parameters
    ----------
    q : ndarray of uint64, shape (length,)
        The client's fixed-point vector (or a slice of it).
    client : int
        Index of the client, in ``range(setup.n_clients)``.
    setup : MaskingSetup
        Graph and seeds.
    offset : int, default=0
        Position of ``q[0]`` in the full vector, for vectors sent in slices:
        the masks are taken from that position of their streams.

    Returns
    -------
    y : ndarray of uint64, shape (length,)

    Examples
    --------
    >>> setup = make_masking_setup(2, random_state=0)
    >>> q = [fixed_point_encode([1.0, 2.0], 8), fixed_point_encode([3.0, 4.0], 8)]
    >>> y = [mask_input(q[i], i, setup) for i in range(2)]
    >>> bool(np.all(y[0] != q[0]))
    True
    >>> fixed_point_decode(unmask_sum(y, [0, 1], setup), 8)
    array([4., 6.])
    """
    q = _as_ring_vector(q).ravel()
    client = _check_client(client, setup)
    y = q.copy()
    if setup.self_seeds is not None:
        y += _prg(setup.self_seeds[client], q.shape[0], offset)
    idx, other = _edges_of(setup, client)
    for e, j in zip(idx, other, strict=True):
        mask = _prg(setup.edge_seeds[e], q.shape[0], offset)
        if j > client:
            y += mask
        else:
            y -= mask
    return y


def _check_client(client: object, setup: MaskingSetup) -> int:
    if isinstance(client, bool) or not isinstance(client, Integral | np.integer):
        raise TypeError(f"client must be an int; got {client!r}.")
    client = int(client)
    if not 0 <= client < setup.n_clients:
        raise ValueError(f"client must be in [0, {setup.n_clients}); got {client}.")
    return client


def _check_survivors(survivors, setup):
    surv = np.unique(np.asarray(survivors, dtype=np.intp).ravel())
    if surv.size == 0:
        raise ValueError(
            "survivors is empty: every client dropped out, there is "
            "nothing to aggregate."
        )
    if surv[0] < 0 or surv[-1] >= setup.n_clients:
        raise ValueError(f"survivors must be client indices in [0, {setup.n_clients}).")
    return surv


def _remove_masks(total, survivors, setup, *, offset=0):
    # Server recovery: remove survivors' self masks and the pairwise masks
    # shared between survivors and dropped clients.
    total = total.copy()
    length = total.shape[0]
    alive = np.zeros(setup.n_clients, dtype=bool)
    alive[survivors] = True
    if setup.self_seeds is not None:
        for i in survivors:
            total -= _prg(setup.self_seeds[i], length, offset)
    a, b = setup.edges[:, 0], setup.edges[:, 1]
    for e in np.flatnonzero(alive[a] != alive[b]):
        mask = _prg(setup.edge_seeds[e], length, offset)
        # The survivor s added +m if the dropped end d > s, else -m.
        if alive[a[e]]:
            total -= mask  # s = a < b = d
        else:
            total += mask  # s = b > a = d
    return total


def unmask_sum(
    masked_inputs: Sequence[ArrayLike] | NDArray[np.uint64],
    survivors: ArrayLike,
    setup: MaskingSetup,
    *,
    offset: int = 0,
    length: int | None = None,
) -> NDArray[np.uint64]:
    """Server step: sum the masked vectors of the survivors and unmask.

    Computes ``z = sum_{i in S} (y_i - t_i) - sum_{i in S, j in N(i) \\ S, j > i}
    m_ij + sum_{i in S, j in N(i) \\ S, j < i} m_ij (mod 2**64)``, which equals
    ``sum_{i in S} q_i`` exactly. The self masks of survivors and the pairwise
    masks of dropped clients would be reconstructed from Shamir shares in the
    real protocol; the simulation looks their seeds up in ``setup``.

    Parameters
    ----------
    masked_inputs : sequence of uint64 ndarray, or ndarray of shape (n_surv, length)
        The vectors ``y_i`` received from the survivors, in the order of
        ``survivors``.
    survivors : array-like of int
        Indices of the clients whose masked vectors arrived.
    setup : MaskingSetup
        Graph and seeds.
    offset : int, default=0
        Position of the slice in the full vectors (see :func:`mask_input`).
    length : int, default=None
        The public length of the vectors (the plan's). Every masked vector is
        checked against it, so a client sending another length is the one
        named, wherever it stands. None: the first survivor's vector sets
        the length the others must have (a first vector of the wrong length
        then names the next client; pass ``length`` whenever it is known).

    Returns
    -------
    z : ndarray of uint64, shape (length,)
        ``sum_{i in survivors} q_i (mod 2**64)``.

    Examples
    --------
    >>> setup = make_masking_setup(3, random_state=1)
    >>> q = [np.array([i + 1], dtype=np.uint64) for i in range(3)]
    >>> y = [mask_input(q[i], i, setup) for i in (0, 2)]   # client 1 drops out
    >>> unmask_sum(y, [0, 2], setup)
    array([4], dtype=uint64)
    """
    surv = np.asarray(survivors).ravel()
    if surv.size and surv.dtype.kind not in "iu":
        raise TypeError(
            f"survivors must hold client indices (ints); got {survivors!r}."
        )
    surv = surv.astype(np.intp)
    checked = _check_survivors(surv, setup)
    if checked.size != surv.size:
        raise ValueError("survivors must not contain duplicates.")
    rows = list(masked_inputs)
    if len(rows) != surv.size:
        raise ValueError(f"Got {len(rows)} masked vectors for {surv.size} survivors.")
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, Integral | np.integer):
            raise TypeError(f"length must be an int >= 0; got {length!r}.")
        if length < 0:
            raise ValueError(f"length must be an int >= 0; got {length}.")
        shape = (int(length),)
    else:
        shape = np.asarray(rows[0]).ravel().shape if rows else None
    for i, y in zip(surv, rows, strict=True):
        # Masked vectors are uniform on the ring: any uint64 value is valid,
        # but the dtype and the length are part of the plan.
        _check_ring_message(np.ravel(y), shape, client=int(i), field="masked_inputs")
    total = np.sum(np.stack([np.ravel(y) for y in rows]), axis=0, dtype=np.uint64)
    return _remove_masks(total, checked, setup, offset=offset)


def secure_sum(
    values: Sequence[ArrayLike] | NDArray[Any],
    *,
    dropped: ArrayLike | None = None,
    frac_bits: int | None = None,
    graph: Literal["complete", "harary"] = "complete",
    degree: int | None = None,
    self_masks: bool = True,
    random_state: RandomStateLike = None,
) -> NDArray[np.int64] | NDArray[np.float64]:
    """Sum per-client vectors through simulated secure aggregation.

    Each client encodes its vector in fixed point (:func:`fixed_point_encode`)
    and masks it (:func:`mask_input`); the server sums what arrives and
    removes the masks of dropped clients (:func:`unmask_sum`). The result is
    the exact sum over the surviving clients of the encoded vectors. This is
    a simulation of the protocol's arithmetic, run in one process: no
    cryptography, network or Shamir sharing is involved.

    Parameters
    ----------
    values : sequence of array-like, or ndarray of shape (n_clients, ...)
        One vector (of any common shape) per client.
    dropped : array-like of int, optional
        Positions in ``values`` of the clients that drop out after the masks
        were set up; their vectors never reach the server.
    frac_bits : int, optional
        Fixed-point precision. ``None``: the values must be integers and are
        summed exactly (``int64`` result, modulo 2**64 two's complement).
    graph : {"complete", "harary"}, default="complete"
        Masking graph, see :func:`secure_aggregation_graph`.
    degree : int, optional
        Degree of the Harary graph.
    self_masks : bool, default=True
        Whether clients add self masks.
    random_state : None, int, SeedSequence, Generator or RandomState, default=None
        Seeds of the masks (they cancel: the result does not depend on it).

    Returns
    -------
    total : ndarray
        Sum over surviving clients: ``int64`` when ``frac_bits`` is None,
        else ``float64`` with rounding error at most ``n * 2**(-frac_bits-1)``.

    Examples
    --------
    >>> secure_sum([[1, 2], [3, 4], [5, 6]], dropped=[1], random_state=0)
    array([6, 8])
    >>> secure_sum([[0.5], [0.25]], frac_bits=16, random_state=0)
    array([0.75])
    """
    if isinstance(values, np.ndarray):
        rows = list(values)
    else:
        rows = [np.asarray(v) for v in values]
    n = len(rows)
    if n == 0:
        raise ValueError("values is empty: need at least one client.")
    shape = rows[0].shape
    if any(r.shape != shape for r in rows):
        raise ValueError("values must hold one array of the same shape per client.")
    dropped = np.asarray([] if dropped is None else dropped, dtype=np.intp).ravel()
    if dropped.size and (dropped.min() < 0 or dropped.max() >= n):
        raise ValueError(f"dropped must hold client positions in [0, {n}).")
    survivors = np.setdiff1d(np.arange(n), dropped)
    if survivors.size == 0:
        raise ValueError("dropped removes every client: nothing to aggregate.")
    if frac_bits is None:
        enc = []
        for r in rows:
            if r.dtype.kind not in "iub":
                raise TypeError(
                    "values must be integers when frac_bits is None; "
                    f"got dtype {r.dtype}."
                )
            enc.append(r.astype(np.int64).view(np.uint64).ravel())
    else:
        enc = [fixed_point_encode(r, frac_bits).ravel() for r in rows]
    setup = make_masking_setup(
        n, graph=graph, degree=degree, self_masks=self_masks, random_state=random_state
    )
    masked = [mask_input(enc[i], i, setup) for i in survivors]
    total = unmask_sum(
        masked, survivors, setup, length=int(np.prod(shape, dtype=np.int64))
    ).reshape(shape)
    if frac_bits is None:
        return total.view(np.int64)
    return fixed_point_decode(total, frac_bits)
