"""Fixed-point encoding of reals in the ring Z/2^64, and the plan of a secure sum."""

from __future__ import annotations

from collections.abc import Hashable
from numbers import Integral
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..exceptions import InvalidMessageError

__all__ = [
    "FixedPointPlan",
    "fixed_point_decode",
    "fixed_point_encode",
    "fixed_point_plan",
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
    # Scaling by a power of two is exact; rounding is half to even. A finite
    # x whose scaling overflows to inf is handled below (reduced first).
    with np.errstate(over="ignore"):
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


def _check_frac_bits(frac_bits: ArrayLike) -> NDArray[np.int64]:
    f = np.asarray(frac_bits)
    if f.dtype.kind not in "iu" or np.any(f < 0) or np.any(f > 62):
        raise ValueError(f"frac_bits must be integers in [0, 62]; got {frac_bits!r}.")
    return f.astype(np.int64)


def _as_float_array(x: ArrayLike, name: str) -> NDArray[np.float64]:
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


def _check_ring_message(
    q: ArrayLike,
    shape: tuple[int, ...] | None,
    *,
    client: Hashable | None,
    field: str,
) -> NDArray[np.uint64]:
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
