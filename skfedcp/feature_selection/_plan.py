"""FED-chi2's round-one plan: what the clients announce, checked against public bounds.

Before round one each client announces its number of rows and a
power-of-two bound on each of its feature totals (:func:`_marginals_bound`);
the server builds the fixed-point plan of the secure sum from them. Those
announcements are messages too: :func:`chi2_server_plan` checks each one
against the public parameters of the round (the class count and the
feature count, fixed by the server; the largest client size, the most
clients, optionally the largest feature value), names or excludes the
clients whose announcement is out of them, and never lets one client's
numbers decide the shape of the round or the size of the server's work.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._config import _check_policy_int, get_config
from ..exceptions import InvalidMessageError, InvalidMessageWarning
from ..federated._fixed_point import FixedPointPlan
from ..utils._warnings import warn_user
from ._ranges import _marginals_bound, _marginals_plan, _pow2_ceil

__all__ = [
    "Chi2RoundOnePlan",
    "chi2_server_plan",
]


class Chi2RoundOnePlan(NamedTuple):
    """The public plan of FED-chi2's round one (:func:`chi2_server_plan`).

    Attributes
    ----------
    plan : FixedPointPlan
        Fixed-point plan of the ``n_classes + n_features`` coordinates
        (class counts, then feature totals) for the kept clients: they encode
        with ``plan.encode`` and the server decodes the secure sum with
        ``plan.decode``, which refuses a sum beyond ``n_clients * bound``.
    kept : ndarray of int
        Positions (in the order of the announcements) of the clients whose
        announcement is valid: the participants of round one.
    clients : ndarray
        Their labels.
    excluded : ndarray
        Labels of the clients left out (``on_invalid="exclude"``).
    n_samples : int
        Rows the kept clients announced: the class counts of the secure sum
        must add up to it (``chi2_server_marginals(..., n_samples=)``).
    """

    plan: FixedPointPlan
    kept: NDArray[np.intp]
    clients: NDArray[Any]
    excluded: NDArray[Any]
    n_samples: int


def chi2_server_plan(
    sizes: Sequence[int] | NDArray[np.integer],
    bounds: Sequence[ArrayLike] | NDArray[np.floating],
    *,
    n_classes: int,
    n_features: int,
    max_client_size: int | None = None,
    max_clients: int | None = None,
    max_value: float | ArrayLike | None = None,
    integer_x: bool = False,
    frac_bits: int | None = None,
    clients: ArrayLike | None = None,
    on_invalid: Literal["raise", "exclude"] = "raise",
) -> Chi2RoundOnePlan:
    """Round 1, server step: check the announcements and build the plan.

    Parameters
    ----------
    sizes : array-like of shape (n_clients,)
        Number of rows each client announced.
    bounds : sequence of array-like of shape (n_features,)
        Each client's announced bound on the magnitude of its feature totals
        (the last ``n_features`` entries of :func:`_marginals_bound` of its
        :func:`chi2_client_marginals` message).
    n_classes : int
        Number of classes of the public class list, fixed by the server
        before the round (never taken from the messages); at most the
        plan policy's ``max_classes`` (:func:`skfedcp.get_config`).
    n_features : int
        Public number of features, fixed by the server before the round.
        A client announcing bounds for another number is invalid. At most
        the plan policy's ``max_features``.
    max_client_size : int, default=None
        Largest number of rows a client may announce; None: the plan
        policy's ``max_client_size`` (:func:`skfedcp.get_config`, 10**9
        unless the server changed it).
    max_clients : int, default=None
        Most clients a round accepts; more announcements are refused before
        any of them is read. None: the plan policy's ``max_clients``
        (10**5 by default).
    max_value : float or array-like of shape (n_features,), optional
        Public upper bound on one row's value of each feature. Given, a
        client's bound may not exceed the smallest power of two at least its
        size times ``max_value``; None: only the ring's capacity limits it.
    integer_x : bool, default=False
        Whether every client's features are integers (summed exactly).
    frac_bits : int, optional
        The user's fixed precision (refused when too fine for the totals).
    clients : array-like of shape (n_clients,), optional
        Client labels used in errors and in the result; default
        ``0..n_clients-1``.
    on_invalid : {"raise", "exclude"}, default="raise"
        ``"raise"``: an invalid announcement raises
        :class:`~skfedcp.exceptions.InvalidMessageError` naming the client
        and field; ``"exclude"``: the client is left out of the round with an
        :class:`~skfedcp.exceptions.InvalidMessageWarning`.

    Returns
    -------
    result : Chi2RoundOnePlan
        The plan, the kept clients and the rows they announced.

    Raises
    ------
    InvalidMessageError
        For an invalid announcement (``on_invalid="raise"``), for more than
        ``max_clients`` announcements, or when no client is left.

    Notes
    -----
    A client is invalid when its size is not an integer in ``[0,
    max_client_size]`` (a bool, a float or an array is not one), or its
    bounds are not ``n_features`` finite non-negative real numbers (what
    :func:`numpy.asarray` makes a bool, int or float array: not strings nor
    complex numbers), exceed ``max_value`` times its size (rounded up to a
    power of two), or are so large that the totals of the announced clients
    could wrap around the 64-bit ring. No other client's announcement
    changes whether one is valid (only their number does, through the
    ring). Within these bounds a dishonest client still chooses its own
    numbers: the plan bounds how far, not whether, it can move the
    marginals (see the threat model in the user guide).

    Examples
    --------
    >>> r = chi2_server_plan([10, 12], [[16.0, 8.0], [32.0, 4.0]],
    ...                      n_classes=3, n_features=2, integer_x=True)
    >>> r.plan.bound.tolist(), r.n_samples
    ([16.0, 16.0, 16.0, 32.0, 8.0], 22)
    >>> chi2_server_plan([10, 12], [[16.0, 8.0], [32.0, 4.0, 1.0]],
    ...                  n_classes=3, n_features=2)
    Traceback (most recent call last):
    ...
    skfedcp.exceptions.InvalidMessageError: client 1: field 'bound' must hold n_features=2 values; got shape (3,).
    """  # noqa: E501
    policy = get_config()
    n_classes = _check_policy_int(n_classes, "n_classes", policy["max_classes"])
    n_features = _check_policy_int(n_features, "n_features", policy["max_features"])
    max_client_size = _check_policy_int(max_client_size, "max_client_size")
    max_clients = _check_policy_int(max_clients, "max_clients")
    if on_invalid not in ("raise", "exclude"):
        raise ValueError(
            f'on_invalid must be "raise" or "exclude"; got {on_invalid!r}.'
        )
    cap = _check_max_value(max_value, n_features)
    n_clients = len(sizes)
    if n_clients > max_clients:
        raise InvalidMessageError(
            f"{n_clients} clients announced themselves, more than the public "
            f"max_clients={max_clients}.",
            field="n",
        )
    if len(bounds) != n_clients:
        raise ValueError(
            f"sizes and bounds must have one entry per client; got {n_clients} "
            f"and {len(bounds)}."
        )
    labels = np.arange(n_clients) if clients is None else np.asarray(clients)
    if labels.shape != (n_clients,):
        raise ValueError(f"clients must hold {n_clients} labels; got {labels.shape}.")
    ring = 2.0**62 / max(n_clients, 1)
    size, bound, reasons = _check_announcements(
        sizes, bounds, n_features, max_client_size, cap, ring
    )
    for j, (field, reason) in sorted(reasons.items()):
        client = labels[j].item() if isinstance(labels[j], np.generic) else labels[j]
        error = InvalidMessageError(
            f"client {client!r}: field {field!r} {reason}.",
            client=client,
            field=field,
        )
        if on_invalid == "raise":
            raise error
        warn_user(
            f"chi2_server_plan: {error} The client is left out of the round.",
            InvalidMessageWarning,
        )
    bad = np.zeros(n_clients, dtype=bool)
    bad[list(reasons)] = True
    kept = np.flatnonzero(~bad)
    if not kept.size:
        raise InvalidMessageError(
            "chi2_server_plan: no client is left to run the round ("
            + (
                "none announced itself)."
                if n_clients == 0
                else "every announcement is invalid)."
            )
        )
    count_bound = _marginals_bound(np.array([float(size[kept].max())]))
    bound = np.concatenate(
        [np.full(n_classes, count_bound[0]), np.max(bound[kept], axis=0)]
    )
    plan = _marginals_plan(bound, kept.size, integer_x=integer_x, frac_bits=frac_bits)
    return Chi2RoundOnePlan(
        plan,
        kept,
        labels[kept],
        labels[np.flatnonzero(bad)],
        sum(size[kept].tolist()),  # exact: int64 could wrap at raised limits
    )


def _check_max_value(max_value, n_features):
    if max_value is None:
        return None
    cap = np.asarray(max_value, dtype=np.float64)
    if cap.ndim > 1 or (cap.ndim == 1 and cap.shape != (n_features,)):
        raise ValueError(
            f"max_value must be a number or one per feature ({n_features}); got "
            f"shape {cap.shape}."
        )
    if not np.all(np.isfinite(cap)) or np.any(cap < 0):
        raise ValueError(
            f"max_value must be finite and non-negative; got {max_value!r}."
        )
    return np.broadcast_to(cap, (n_features,))


def _check_announcements(sizes, bounds, n_features, max_client_size, cap, ring):
    """Check every client's ``(size, bound)``: the one definition of a valid one.

    A size is an integer (not a bool; a NumPy integer too, not an array) in
    ``[0, max_client_size]``. A bound is what :func:`numpy.asarray` makes an
    int or float array of shape ``(n_features,)``, finite, non-negative, at
    most what ``cap`` allows the client's size (rounded up to a power of two)
    and below ``ring``. Each check runs on every client at once (an int
    array of sizes and a 2-D int or float array of bounds are taken whole,
    other containers entry by entry), so one invalid client costs only its
    own message.

    Returns
    -------
    size : ndarray of int64 of shape (n_clients,)
        The sizes (0 for a client whose size is invalid).
    bound : ndarray of float64 of shape (n_clients, n_features)
        The bounds (0 for a client whose bound has no such row).
    reasons : dict
        ``{position: (field, reason)}`` of the invalid clients, for the
        first check each one fails.
    """
    n_clients = len(sizes)
    valid = np.ones(n_clients, dtype=bool)
    reasons = {}

    def reject(failed, field, reason):
        for j in np.flatnonzero(failed & valid).tolist():
            reasons[j] = (field, reason(j))
        valid[failed] = False

    integral, in_range, size = _announced_sizes(sizes, max_client_size)
    reject(
        ~integral,
        "n",
        lambda j: f"must be an integer number of rows; got {sizes[j]!r}",
    )
    reject(
        ~in_range,
        "n",
        lambda j: f"is {int(sizes[j])}, outside [0, max_client_size={max_client_size}]",
    )
    bound, real, shapes = _announced_rows(bounds, n_features)
    reject(~real, "bound", lambda j: "must hold real numbers")
    if shapes is not None:
        reject(
            np.array([shape != (n_features,) for shape in shapes], dtype=bool),
            "bound",
            lambda j: (
                f"must hold n_features={n_features} values; got shape {shapes[j]}"
            ),
        )
    reject(
        ~np.all(np.isfinite(bound) & (bound >= 0), axis=1),
        "bound",
        lambda j: "must hold finite non-negative numbers",
    )
    if cap is not None:
        allowed = _pow2_ceil(cap[None, :] * size[:, None].astype(np.float64))
        over = bound > allowed

        def too_large(j):
            k = int(np.argmax(over[j]))
            return (
                f"announces {bound[j, k]:.6g} for feature {k}, more than {size[j]} "
                f"rows of values at most max_value={cap[k]:.6g} can reach "
                f"({allowed[j, k]:.6g})"
            )

        reject(over.any(axis=1), "bound", too_large)
    wraps = bound >= ring

    def wrapping(j):
        k = int(np.argmax(wraps[j]))
        return (
            f"announces {bound[j, k]:.6g} for feature {k}: the announced clients' "
            "totals could wrap around the 64-bit ring of the secure sum"
        )

    reject(wraps.any(axis=1), "bound", wrapping)
    return size, bound, reasons


def _announced_sizes(sizes, max_client_size):
    """``(integral, in_range, size)``: which sizes are ints, which are in range.

    ``size`` holds them as int64 (0 where out of range). A bool, a float or
    an array (0-d too) is not a row count. Ints (Python or NumPy, in an
    int array or another container) are range-checked as one array when
    they fit one, else one by one.
    """
    values = sizes
    if not isinstance(sizes, np.ndarray) or sizes.ndim != 1:
        is_count = {
            kind: not issubclass(kind, bool | np.bool_) and issubclass(kind, Integral)
            for kind in set(map(type, sizes))
        }
        if all(is_count.values()):
            try:
                values = np.asarray(sizes)
            except OverflowError:  # a Python int beyond any NumPy int
                values = None
        else:
            values = None
    if values is not None and values.dtype.kind in "iu":  # every entry an int
        integral = np.ones(values.shape[0], dtype=bool)
        in_range = (values >= 0) & (values <= max_client_size)  # in their dtype
        return integral, in_range, np.where(in_range, values, 0).astype(np.int64)
    whole = [
        not isinstance(v, bool | np.bool_) and isinstance(v, Integral) for v in sizes
    ]
    bounded = [
        ok and 0 <= v <= max_client_size for v, ok in zip(sizes, whole, strict=True)
    ]
    size = [int(v) if ok else 0 for v, ok in zip(sizes, bounded, strict=True)]
    return (
        np.array(whole, dtype=bool),
        np.array(bounded, dtype=bool),
        np.array(size, dtype=np.int64),
    )


def _announced_rows(bounds, n_features):
    """``(bound, real, shapes)``: the bounds as float64 rows, checked for type.

    ``bound`` has shape ``(n_clients, n_features)`` (0 where a client's
    bound is not such a row); ``real`` tells whose bound
    :func:`numpy.asarray` makes a bool, int or float array (not strings,
    objects, complex numbers, ragged lists or ints beyond any dtype);
    ``shapes`` is None when every one is real and of shape
    ``(n_features,)``, else the shape of each (None where not real).
    Bounds that convert to one such 2-D array (every one does, alone) are
    taken whole, others one by one.
    """
    n_clients = len(bounds)
    whole = _real_array(bounds)
    if whole is not None and whole.ndim == 2:
        real = np.ones(n_clients, dtype=bool)
        if whole.shape[1] == n_features:
            return whole.astype(np.float64), real, None
        return np.zeros((n_clients, n_features)), real, [whole.shape[1:]] * n_clients
    rows = [_real_array(item) for item in bounds]
    shapes = [None if row is None else row.shape for row in rows]
    shaped = np.array([shape == (n_features,) for shape in shapes], dtype=bool)
    bound = np.zeros((n_clients, n_features))
    if shaped.any():
        bound[shaped] = [row for row, ok in zip(rows, shaped, strict=True) if ok]
    return bound, np.array([row is not None for row in rows], dtype=bool), shapes


def _real_array(value):
    """``numpy.asarray(value)`` when a bool, int or float array, else None."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError):  # ragged, mixed, beyond int64
        return None
    return array if array.dtype.kind in "biuf" else None
