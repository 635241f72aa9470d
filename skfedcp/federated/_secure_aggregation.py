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
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from numbers import Integral
from typing import Literal, NamedTuple

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from .._typing import RandomStateLike
from ..exceptions import InvalidMessageError
from ..utils._random import check_seed_sequence

__all__ = [
    "FixedPointPlan",
    "MaskingSetup",
    "fixed_point_decode",
    "fixed_point_encode",
    "fixed_point_plan",
    "make_masking_setup",
    "mask_input",
    "secure_aggregation_graph",
    "secure_sum",
    "unmask_sum",
]

_TWO64 = 2.0**64
_TWO63 = 2.0**63
_MINUS_ONE = np.uint64(2**64 - 1)  # -1 in the ring


def fixed_point_encode(x: ArrayLike, frac_bits: ArrayLike) -> NDArray[np.uint64]:
    """Encode reals in fixed point as elements of the ring Z/2^64.

    ``q(x) = round(x * 2**frac_bits) mod 2**64``, stored as ``uint64``. Only
    the final aggregate must lie in ``(-2**63, 2**63) / 2**frac_bits`` to be
    decoded; individual values and partial sums may wrap around.

    Parameters
    ----------
    x : array-like of float
        Values to encode. Must be finite (a ValueError names ``x``
        otherwise). Values so large that ``x * 2**f`` overflows float64 are
        reduced modulo ``2**(64 - f)`` first, exactly. Which scale keeps a
        *sum* from wrapping is the business of the public plan
        (``fixed_point_plan``).
    frac_bits : int or array-like of int
        Number of fractional bits ``f`` (broadcast against ``x``), between 0
        and 62. The rounding error is at most ``2**(-f - 1)`` per value.

    Returns
    -------
    q : ndarray of uint64
        Encoded values, with the shape of ``x`` broadcast with ``frac_bits``.

    See Also
    --------
    fixed_point_decode : The inverse map.

    Examples
    --------
    >>> q = fixed_point_encode([1.5, -0.25], 8)
    >>> q
    array([                 384, 18446744073709551552], dtype=uint64)
    >>> fixed_point_decode(q, 8)
    array([ 1.5 , -0.25])
    """
    x = _as_float_array(x, "x")
    frac_bits = _check_frac_bits(frac_bits)
    # Scaling by a power of two is exact; rounding is half to even.
    scaled = np.asarray(np.multiply(x, np.exp2(frac_bits.astype(np.float64))))
    np.rint(scaled, out=scaled)
    top = max(np.max(scaled, initial=0.0), -np.min(scaled, initial=0.0))
    if top < _TWO63:  # common case (NaN fails the test): no wrap-around
        return np.asarray(scaled.astype(np.int64)).view(np.uint64)
    if not np.all(np.isfinite(x)):
        raise ValueError(
            "fixed_point_encode: x must be finite; got NaN or infinite values."
        )
    # Reduce modulo 2**(64 - f) *before* scaling (fmod is exact), so that a
    # finite x whose x * 2**f overflows float64 still encodes exactly.
    x, frac_bits = np.broadcast_arrays(x, frac_bits)
    reduced = np.fmod(x, np.exp2((64 - frac_bits).astype(np.float64)))
    scaled = np.rint(reduced * np.exp2(frac_bits.astype(np.float64)))
    scaled = np.fmod(scaled, _TWO64)  # exact
    scaled = np.where(scaled >= _TWO63, scaled - _TWO64, scaled)
    scaled = np.where(scaled < -_TWO63, scaled + _TWO64, scaled)
    return np.asarray(scaled.astype(np.int64)).view(np.uint64)


def fixed_point_decode(q: ArrayLike, frac_bits: ArrayLike) -> NDArray[np.float64]:
    """Decode a fixed-point aggregate from Z/2^64 to reals.

    The ``uint64`` value is read as a two's-complement ``int64`` and divided
    by ``2**frac_bits``.

    Parameters
    ----------
    q : array-like of uint64
        Encoded values (typically a secure sum).
    frac_bits : int or array-like of int
        Number of fractional bits used by the encoder.

    Returns
    -------
    x : ndarray of float64

    Examples
    --------
    >>> q = fixed_point_encode([0.1, 0.2], 40) + fixed_point_encode([0.3, 0.4], 40)
    >>> fixed_point_decode(q, 40)
    array([0.4, 0.6])
    """
    q = np.asarray(q)
    if q.dtype != np.uint64:
        raise TypeError(f"q must be an array of uint64; got dtype {q.dtype}.")
    frac_bits = _check_frac_bits(frac_bits)
    return np.ldexp(q.view(np.int64).astype(np.float64), -frac_bits)


def _check_frac_bits(frac_bits):
    f = np.asarray(frac_bits)
    if f.dtype.kind not in "iu" or np.any(f < 0) or np.any(f > 62):
        raise ValueError(f"frac_bits must be integers in [0, 62]; got {frac_bits!r}.")
    return f.astype(np.int64)


def _as_float_array(x, name):
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:  # ragged nested sequences
        raise ValueError(
            f"{name} must be an array of real numbers; got {x!r}."
        ) from exc
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must be an array of real numbers; got dtype {arr.dtype}."
        )
    return arr.astype(np.float64, copy=False)


# --------------------------------------------------------------------------
# The public fixed-point plan

# Honest totals stay below 2**62 in magnitude: one bit of headroom below the
# int64 limit 2**63, so that rounding (at most n / 2 quanta) can never wrap.
_PLAN_LIMIT = 2.0**62


class FixedPointPlan(NamedTuple):
    """Public plan of one fixed-point secure sum.

    Everything here is announced before any value is encoded, and is the same
    for the clients and the server: the ring ``Z/2**modulus_bits``, the
    number of fractional bits of each coordinate and a bound on the absolute
    value of every client's coordinate. The plan guarantees that the sum of
    ``n_clients`` values within ``bound`` can never wrap around the ring:
    ``n_clients * bound * 2**frac_bits <= 2**62``. Build it with
    ``fixed_point_plan``.

    Attributes
    ----------
    frac_bits : ndarray of int64
        Fractional bits of each coordinate (or one value for all).
    bound : ndarray of float64
        Public bound on ``|x|`` of each coordinate of one client's vector.
    n_clients : int
        Number of clients whose vectors are summed.
    modulus_bits : int
        The ring is ``Z/2**modulus_bits`` (always 64 here).

    Examples
    --------
    >>> plan = fixed_point_plan([1000.0, 2.0**40], n_clients=4, max_frac_bits=32)
    >>> plan.frac_bits.tolist()
    [32, 20]
    >>> q = [plan.encode([3.25, 7.0]), plan.encode([1.5, 2.0**39])]
    >>> plan.decode(q[0] + q[1]).tolist()
    [4.75, 549755813895.0]
    """

    frac_bits: np.ndarray
    bound: np.ndarray
    n_clients: int
    modulus_bits: int = 64

    def encode(self, x: ArrayLike, *, name: str = "x") -> NDArray[np.uint64]:
        """Client step: check ``x`` against the announced bound and encode it.

        Parameters
        ----------
        x : array-like of float
            One client's vector, of the plan's length.
        name : str, default="x"
            Name used in error messages.

        Returns
        -------
        q : ndarray of uint64
        """
        x = _as_float_array(x, name)
        k = self.bound.ndim
        if x.ndim < k or x.shape[x.ndim - k :] != self.bound.shape:
            raise ValueError(
                f"{name} must have shape {self.bound.shape} (the public plan), "
                f"or a stack of such vectors; got {x.shape}."
            )
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{name} must be finite; got NaN or infinite values.")
        over = np.abs(x) > self.bound
        if np.any(over):
            j = int(np.flatnonzero(over.ravel())[0])
            b = np.broadcast_to(self.bound, x.shape).ravel()[j]
            raise ValueError(
                f"{name}: value {float(x.ravel()[j])!r} exceeds the announced bound "
                f"{float(b)!r} "
                "of the fixed-point plan: it could make the secure sum wrap around."
            )
        return fixed_point_encode(x, self.frac_bits)

    def check_message(
        self, q: ArrayLike, *, client: Hashable | None = None, field: str = "q"
    ) -> NDArray[np.uint64]:
        """Server step: validate one *unmasked* encoded vector.

        Raises :class:`~skfedcp.exceptions.InvalidMessageError` unless ``q``
        is a ``uint64`` array of the plan's shape whose values (read as
        two's-complement integers) encode numbers within the bound.
        """
        q = _check_ring_message(q, self.bound.shape, client=client, field=field)
        limit = np.ldexp(self.bound, self.frac_bits) + 0.5
        if np.any(np.abs(q.view(np.int64).astype(np.float64)) > limit):
            raise InvalidMessageError(
                f"client {client!r}: field {field!r} encodes values beyond the "
                "announced bound of the fixed-point plan.",
                client=client,
                field=field,
            )
        return q

    def decode(self, total: ArrayLike, *, field: str = "total") -> NDArray[np.float64]:
        """Server step: decode a secure sum and check it against the plan.

        Raises :class:`~skfedcp.exceptions.InvalidMessageError` when the
        decoded sum exceeds ``n_clients * bound``: some client sent values
        beyond the announced bound (it cannot be named behind the masks).
        """
        total = _check_ring_message(total, self.bound.shape, client=None, field=field)
        x = fixed_point_decode(total, self.frac_bits)
        slack = self.n_clients * np.ldexp(1.0, -self.frac_bits)
        if np.any(np.abs(x) > self.n_clients * self.bound + slack):
            raise InvalidMessageError(
                f"field {field!r}: the secure sum exceeds n_clients * bound; a "
                "client sent values beyond the announced bound of the plan.",
                client=None,
                field=field,
            )
        return x


def fixed_point_plan(
    bound: ArrayLike,
    n_clients: int,
    *,
    max_frac_bits: ArrayLike = 52,
    name: str = "bound",
) -> FixedPointPlan:
    """Choose the fixed-point scale of a secure sum from public bounds.

    Coordinate ``j`` gets ``f_j = min(max_frac_bits, floor(log2(2**62 /
    (n_clients * bound_j))))`` fractional bits: the largest precision (up to
    ``max_frac_bits``) with which the sum of ``n_clients`` values of
    magnitude at most ``bound_j`` cannot wrap around ``Z/2**64``. When even
    ``f = 0`` cannot hold such a sum the plan is refused.

    Parameters
    ----------
    bound : float or array-like of float
        Public bound on the absolute value of each coordinate of one client's
        vector (non-negative, finite).
    n_clients : int
        Number of clients summed.
    max_frac_bits : int or array-like of int, default=52
        Upper limit on the fractional bits (``0`` for integers summed
        exactly), between 0 and 62.
    name : str, default="bound"
        Name of the quantity the bound comes from, used in error messages.

    Returns
    -------
    plan : FixedPointPlan

    Raises
    ------
    ValueError
        If a bound is negative or not finite, or if ``n_clients * bound``
        reaches ``2**62``: such totals cannot be summed in a 64-bit ring.

    Examples
    --------
    >>> fixed_point_plan(2.0**52, n_clients=8, max_frac_bits=32).frac_bits.tolist()
    7
    >>> fixed_point_plan(2.0**60, n_clients=8)
    Traceback (most recent call last):
    ...
    ValueError: bound: n_clients * bound reaches 2**62 (coordinate 0: 8 * 1.15...e+18): such totals cannot be summed exactly in the 64-bit ring; rescale the data.
    """  # noqa: E501
    if isinstance(n_clients, bool) or not isinstance(n_clients, Integral | np.integer):
        raise TypeError(f"n_clients must be an int >= 1; got {n_clients!r}.")
    if n_clients < 1:
        raise ValueError(f"n_clients must be >= 1; got {n_clients}.")
    b = _as_float_array(bound, name)
    if not np.all(np.isfinite(b)) or np.any(b < 0):
        raise ValueError(f"{name} must be finite and non-negative; got {bound!r}.")
    cap = _check_frac_bits(max_frac_bits)
    reach = int(n_clients) * b
    bad = reach >= _PLAN_LIMIT
    if np.any(bad):
        j = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(
            f"{name}: n_clients * bound reaches 2**62 (coordinate {j}: "
            f"{int(n_clients)} * {b.ravel()[j]:.3g}): such totals cannot be summed "
            "exactly in the 64-bit ring; rescale the data."
        )
    with np.errstate(divide="ignore"):
        room = np.floor(np.log2(_PLAN_LIMIT / np.maximum(reach, 2.0**-60)))
    f = np.minimum(cap, room).astype(np.int64)
    # log2 rounding could leave n * bound * 2**f a hair above the limit.
    f = np.where(np.ldexp(reach, f) > _PLAN_LIMIT, f - 1, f)
    return FixedPointPlan(np.maximum(f, 0), b, int(n_clients))


def _check_ring_message(q, shape, *, client, field):
    arr = np.asarray(q)
    if arr.dtype != np.uint64:
        raise InvalidMessageError(
            f"client {client!r}: field {field!r} must be an array of uint64 (ring "
            f"elements); got dtype {arr.dtype}.",
            client=client,
            field=field,
        )
    if shape is not None and arr.shape != tuple(shape):
        raise InvalidMessageError(
            f"client {client!r}: field {field!r} must have shape {tuple(shape)}; "
            f"got {arr.shape}.",
            client=client,
            field=field,
        )
    return arr


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
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(check_seed_sequence(random_state))
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


def _as_ring_vector(q, name="q"):
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


def _check_client(client, setup):
    if isinstance(client, bool) or not isinstance(client, Integral | np.integer):
        raise TypeError(f"client must be an int; got {client!r}.")
    if not 0 <= client < setup.n_clients:
        raise ValueError(f"client must be in [0, {setup.n_clients}); got {client}.")
    return int(client)


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
    first = np.asarray(rows[0]).ravel().shape if rows else None
    for i, y in zip(surv, rows, strict=True):
        # Masked vectors are uniform on the ring: any uint64 value is valid,
        # but the dtype and the length are part of the plan.
        _check_ring_message(np.ravel(y), first, client=int(i), field="masked_inputs")
    total = np.sum(np.stack([np.ravel(y) for y in rows]), axis=0, dtype=np.uint64)
    return _remove_masks(total, checked, setup, offset=offset)


def secure_sum(
    values: Sequence[ArrayLike] | ArrayLike,
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
    values : sequence of array-like, or array-like of shape (n_clients, ...)
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
    total = unmask_sum(masked, survivors, setup).reshape(shape)
    if frac_bits is None:
        return total.view(np.int64)
    return fixed_point_decode(total, frac_bits)


# --------------------------------------------------------------------------
# Batched simulation (used by the in-process estimators)

# Mask words expanded at once (32 MB of uint64): bounds memory, keeps the
# arrays in cache-friendly chunks.
_MASK_CHUNK_WORDS = 2**22


class _MaskStream:
    """Uniform words of the ring Z/2^64 for the simulated masks.

    A keyed pseudorandom generator: AES-128 in counter mode (the PRG of the
    secure aggregation protocols, as :func:`_prg` for a deployment's masks)
    with a key drawn from ``rng``. Which key is drawn changes the masks, never
    a sum (the masks cancel).
    """

    def __init__(self, rng):
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        key = rng.bit_generator.random_raw(2).tobytes()
        self._cipher = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()

    def filler(self, buf, n_words):
        """A function that writes ``n_words`` fresh words to ``buf[:n_words]``.

        ``buf`` is a 1-D C-contiguous uint64 array with two spare words (the
        cipher may write up to one block past the end of its output),
        initially zero. Each call of the returned function draws new words:
        the cipher encrypts ``buf[:n_words]`` in place, so the words are the
        next ones of the key stream XOR the previous content of ``buf``. A
        one-time pad on any value independent of the pad is uniform: every
        call gives fresh uniform words (the first, the key stream itself),
        without reading a buffer of zeros.
        """
        dest = memoryview(buf).cast("B")
        source = dest[: 8 * n_words]
        update = self._cipher.update_into

        def fill():
            update(source, dest)

        return fill


# Words per client-by-column chunk of the circulant simulation (1 MB per
# buffer): large enough that the per-layer Python calls cost little, small
# enough to stay in the last-level cache (measured best on a 2-core EPYC).
_CIRCULANT_CHUNK_WORDS = 2**17


def _sum_rows(a):
    """``np.sum(a, axis=0)`` of a 2-D uint64 array. Exact in the ring, like
    any order of summation.

    Rows of 64 words or more: numpy's reduction (one pass, no temporary).
    Shorter rows: by halving (numpy's axis-0 reduction pays per row).
    """
    if a.shape[0] <= 64 or a.shape[1] >= 64:
        return np.add.reduce(a, axis=0, dtype=np.uint64)
    h = a.shape[0] // 2
    acc = a[:h] + a[h : 2 * h]
    if a.shape[0] % 2:
        acc[0] += a[-1]
    while acc.shape[0] > 64:
        h = acc.shape[0] // 2
        if acc.shape[0] % 2:
            acc[0] += acc[-1]
        acc[:h] += acc[h : 2 * h]
        acc = acc[:h]
    return np.sum(acc, axis=0, dtype=np.uint64)


def _circulant_masked_sum(
    enc, survivors, graph, rng, *, n_clients, self_masks, max_words, trace=None
):
    """:func:`_masked_sum_simulation` on a :class:`_CirculantGraph`.

    The clients sit in position order ``graph.label``. Layer ``s`` draws one
    uniform block ``D`` (a row per position): the mask of the edge between
    positions ``i`` and ``i + s`` is ``m = D[i]`` if ``label[i] < label[i +
    s]``, else ``-D[i]`` (uniform too), so that the smaller client adds
    ``m`` and the larger subtracts it exactly when position ``i`` adds
    ``D[i]`` and position ``i + s`` subtracts it: two slices per layer.

    ``trace`` (tests only): a list that receives, per column chunk, the
    messages ``y``, the self masks ``t`` and each layer's ``(s, D)``, all in
    position order.
    """
    surv = np.asarray(survivors, dtype=np.intp)
    n = graph.n_clients
    length = enc.shape[1]
    label = graph.label
    alive_client = np.zeros(n_clients, dtype=bool)
    alive_client[surv] = True
    alive = alive_client[label]  # by position
    alive_pos = np.flatnonzero(alive)
    everyone = alive_pos.shape[0] == n
    # The survivors' vectors in position order (zero rows for the dropped
    # clients: their messages are never sent).
    if enc.shape[0] == n_clients:
        rows = label[alive_pos]
    else:
        row_of = np.full(n_clients, -1, dtype=np.intp)
        row_of[surv] = np.arange(surv.shape[0])
        rows = row_of[label[alive_pos]]
    if everyone:
        q = enc[rows]
    else:
        q = np.zeros((n, length), dtype=np.uint64)
        q[alive_pos] = enc[rows]
    layers = list(graph.layers())
    # Edges between a survivor and a dropped client, per layer: the server
    # recovers their masks. ``plus``: the survivor (at i) added +D[i];
    # ``minus``: the survivor (at i + s) subtracted D[i].
    fixes = []
    for s, m in layers:
        here, there = alive[:m], alive[(np.arange(m) + s) % n]
        fixes.append((np.flatnonzero(here & ~there), np.flatnonzero(~here & there)))
    stream = _MaskStream(rng)
    width = max(1, min(length, int(max_words) // max(n, 1)))
    # The self masks are drawn straight into the message buffer (y = t,
    # then y += q): two buffers of a chunk instead of three.
    y_buf = np.zeros(n * width + 2, dtype=np.uint64)
    d_buf = np.zeros(n * width + 2, dtype=np.uint64)
    total = np.empty(length, dtype=np.uint64)
    plan_w = None
    for c0 in range(0, length, width):
        c1 = min(c0 + width, length)
        w = c1 - c0
        if w != plan_w:  # views and fillers for this chunk width
            plan_w = w
            y = y_buf[: n * w].reshape(n, w)
            fill_t = stream.filler(y_buf, n * w)
            steps = []
            for (s, m), (plus, minus) in zip(layers, fixes, strict=True):
                d = d_buf[: m * w].reshape(m, w)
                # Position i adds D[i]; position (i + s) % n subtracts it.
                if m == n:
                    sub = [(y[s:], d[: n - s]), (y[:s], d[n - s :])]
                else:  # the half layer of an even complete graph: s = m = n/2
                    sub = [(y[s:], d)]
                fill_d = stream.filler(d_buf, m * w)
                steps.append((s, fill_d, y[:m], d, sub, plus, minus))
        # ---- clients: y = q + t + (pairwise masks), position by position ----
        z = np.zeros(w, dtype=np.uint64)
        t = None
        if self_masks:
            fill_t()  # y = t: fresh words (key stream XOR the previous y)
            if trace is not None:
                t = y.copy()
            # ---- server: the survivors' self masks, recovered, removed ----
            z -= _sum_rows(y if everyone else y[alive_pos])
            y += q[:, c0:c1]
        else:
            y[...] = q[:, c0:c1]
        drawn = []
        for s, fill_d, y_add, d, sub, plus, minus in steps:
            fill_d()
            if trace is not None:
                drawn.append((s, d.copy()))
            np.add(y_add, d, out=y_add)
            for y_sub, d_sub in sub:
                np.subtract(y_sub, d_sub, out=y_sub)
            # ---- server: recovered masks of survivor-dropped edges ----
            if plus.size:
                z -= np.sum(d[plus], axis=0, dtype=np.uint64)
            if minus.size:
                z += np.sum(d[minus], axis=0, dtype=np.uint64)
        # ---- server: the survivors' messages (self masks removed above) ----
        z += _sum_rows(y if everyone else y[alive_pos])
        if trace is not None:
            trace.append((c0, y.copy(), t, drawn))
        total[c0:c1] = z
    return total


def _masked_sum_simulation(
    enc,
    survivors,
    edges,
    rng,
    *,
    n_clients=None,
    self_masks=True,
    max_words=None,
):
    """Simulate one pairwise-masked secure sum of the rows of ``enc``.

    Every survivor's message ``y_i = q_i + t_i + sum_{j > i} m_ij - sum_{j <
    i} m_ij (mod 2**64)`` is materialized (it is the server's whole view);
    the server adds the messages, then removes the survivors' self masks
    ``t_i`` and the pairwise masks shared with dropped clients. The
    arithmetic is that of :func:`mask_input` and :func:`unmask_sum`, batched
    over clients: each mask is expanded once, column chunk by column chunk,
    and used by both parties that know it (the two ends of an edge, or the
    owner of a self mask and the server after recovery). The masks are
    uniform words of a PRG keyed from ``rng`` (a simulation: no key
    agreement; see :class:`_MaskStream`).

    A :class:`_CirculantGraph` (what the estimators use) is simulated layer
    by layer with slices (:func:`_circulant_masked_sum`); an edge list, with
    a sparse incidence matrix (the reference for any graph).

    Parameters
    ----------
    enc : ndarray of uint64, shape (n_clients, length) or (n_survivors, length)
        Every client's encoded vector (rows of dropped clients are ignored),
        or, when ``n_clients`` is given, the survivors' vectors only.
    survivors : ndarray of int
        Sorted indices of the clients whose messages arrive.
    edges : _CirculantGraph or ndarray of shape (n_edges, 2)
        Masking graph: a circulant graph, or pairs ``(a, b)`` with ``a < b``.
    rng : numpy.random.Generator
        Source of the masks.
    n_clients : int, optional
        Number of clients; given, ``enc`` holds the survivors' rows only.
    self_masks : bool, default=True
        Whether clients add self masks.
    max_words : int, optional
        Mask words expanded at once (a bound on memory).

    Returns
    -------
    total : ndarray of uint64, shape (length,)
        ``sum_{i in survivors} enc[i] (mod 2**64)``, bit for bit.
    """
    if isinstance(edges, _CirculantGraph):
        return _circulant_masked_sum(
            enc,
            survivors,
            edges,
            rng,
            n_clients=enc.shape[0] if n_clients is None else n_clients,
            self_masks=self_masks,
            max_words=_CIRCULANT_CHUNK_WORDS if max_words is None else max_words,
        )
    if max_words is None:
        max_words = _MASK_CHUNK_WORDS
    surv = np.asarray(survivors, dtype=np.intp)
    length = enc.shape[1]
    if n_clients is None:
        n_clients = enc.shape[0]
        rows_of = surv
    else:
        rows_of = np.arange(surv.shape[0])
    alive = np.zeros(n_clients, dtype=bool)
    alive[surv] = True
    a, b = edges[:, 0], edges[:, 1]
    n_edges = a.shape[0]
    # Each survivor's mask sum, as a (n_survivors x n_edges) incidence matrix
    # over the ring: +1 where the survivor is the smaller end, -1 = 2**64 - 1
    # where it is the larger one (uint64 products wrap modulo 2**64).
    pos = np.full(n_clients, -1, dtype=np.intp)
    pos[surv] = np.arange(surv.shape[0])
    ends = np.concatenate([a, b])
    keep = alive[ends]
    sign = np.concatenate(
        [np.ones(n_edges, dtype=np.uint64), np.full(n_edges, _MINUS_ONE)]
    )
    incidence = sp.csr_matrix(
        (sign[keep], (pos[ends[keep]], np.tile(np.arange(n_edges), 2)[keep])),
        shape=(surv.shape[0], n_edges),
        dtype=np.uint64,
    )
    # Edges between a survivor and a dropped client: the server recovers them.
    plus_fix = np.flatnonzero(alive[a] & ~alive[b])  # survivor added +m
    minus_fix = np.flatnonzero(~alive[a] & alive[b])  # survivor added -m
    bitgen = rng.bit_generator
    width = max(1, int(max_words) // max(n_edges + surv.shape[0], 1))
    total = np.empty(length, dtype=np.uint64)
    for c0 in range(0, length, width):
        c1 = min(c0 + width, length)
        w = c1 - c0
        y = enc[rows_of, c0:c1]  # a copy: the messages
        if self_masks:
            t = bitgen.random_raw((surv.shape[0], w))
            y += t
        if n_edges:
            m = bitgen.random_raw((n_edges, w))
            y += incidence @ m
        # ---- server: only y, the dropped set and recovered masks ----
        z = np.sum(y, axis=0, dtype=np.uint64)
        if self_masks:
            z -= np.sum(t, axis=0, dtype=np.uint64)
        if n_edges:
            z -= np.sum(m[plus_fix], axis=0, dtype=np.uint64)
            z += np.sum(m[minus_fix], axis=0, dtype=np.uint64)
        total[c0:c1] = z
    return total
