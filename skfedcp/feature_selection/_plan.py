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

from .._config import get_config
from ..exceptions import InvalidMessageError, InvalidMessageWarning
from ..federated._fixed_point import FixedPointPlan
from ..utils._warnings import warn_user
from ._ranges import _marginals_bound, _marginals_plan, _pow2_ceil
from ._sketch import _check_positive_int

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
    max_client_size]``, or its bounds are not ``n_features`` finite
    non-negative numbers, exceed ``max_value`` times its size (rounded up to
    a power of two), or are so large that the totals of the announced
    clients could wrap around the 64-bit ring. Within these bounds a
    dishonest client still chooses its own numbers: the plan bounds how
    far, not whether, it can move the marginals (see the threat model in
    the user guide).

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
    max_client_size = _check_positive_int(
        policy["max_client_size"] if max_client_size is None else max_client_size,
        "max_client_size",
    )
    max_clients = _check_positive_int(
        policy["max_clients"] if max_clients is None else max_clients, "max_clients"
    )
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
    kept, kept_sizes, kept_bounds, bad = [], [], [], []
    valid = _all_valid(sizes, bounds, n_features, max_client_size, cap, ring)
    if valid is not None:  # one vectorised pass: nobody to name
        kept = list(range(n_clients))
        kept_sizes, kept_bounds = valid
    for j in range(0 if valid is None else n_clients, n_clients):
        try:
            size, bound = _check_announcement(
                sizes[j],
                bounds[j],
                n_features,
                max_client_size,
                cap,
                ring,
            )
        except _Invalid as exc:
            client = (
                labels[j].item() if isinstance(labels[j], np.generic) else labels[j]
            )
            error = InvalidMessageError(
                f"client {client!r}: field {exc.field!r} {exc.reason}.",
                client=client,
                field=exc.field,
            )
            if on_invalid == "raise":
                raise error from None
            warn_user(
                f"chi2_server_plan: {error} The client is left out of the round.",
                InvalidMessageWarning,
            )
            bad.append(j)
            continue
        kept.append(j)
        kept_sizes.append(size)
        kept_bounds.append(bound)
    if not kept:
        raise InvalidMessageError(
            "chi2_server_plan: no client is left to run the round ("
            + (
                "none announced itself)."
                if n_clients == 0
                else "every announcement is invalid)."
            )
        )
    count_bound = _marginals_bound(np.array([float(max(kept_sizes))]))
    bound = np.concatenate(
        [np.full(n_classes, count_bound[0]), np.max(kept_bounds, axis=0)]
    )
    plan = _marginals_plan(bound, len(kept), integer_x=integer_x, frac_bits=frac_bits)
    return Chi2RoundOnePlan(
        plan,
        np.asarray(kept, dtype=np.intp),
        labels[kept],
        labels[bad],
        int(sum(kept_sizes)),
    )


def _check_policy_int(value, name, limit):
    """A positive int parameter of the round, at most the policy's limit."""
    value = _check_positive_int(value, name)
    if value > limit:
        raise ValueError(
            f"{name}={value} is above the plan policy's max_{name[2:]}={limit} "
            "(raise it with skfedcp.config_context for a larger round)."
        )
    return value


class _Invalid(Exception):
    """One client's announcement is out of the plan: ``field`` and ``reason``."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(field, reason)
        self.field = field
        self.reason = reason


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


def _all_valid(sizes, bounds, n_features, max_client_size, cap, ring):
    """``(sizes, bounds)`` as lists when every announcement is valid, else None.

    The same checks as :func:`_check_announcement`, on whole arrays (the
    common case, and what keeps ``10**5`` clients cheap); None sends the
    caller to the per-client checks, which name the offenders.
    """
    if not isinstance(sizes, np.ndarray) and any(
        isinstance(v, bool | np.bool_) for v in sizes
    ):
        return None  # a bool is not a row count (named by the per-client checks)
    size = np.asarray(sizes)
    if size.ndim != 1 or size.dtype.kind not in "iu" or not size.size:
        return None
    if size.min() < 0 or size.max() > max_client_size:  # in their own dtype
        return None
    try:
        b = np.asarray(bounds, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if b.shape != (size.shape[0], n_features):
        return None
    if not np.all(np.isfinite(b)) or np.any(b < 0) or np.any(b >= ring):
        return None
    size = size.astype(np.int64)
    if cap is not None and np.any(b > _pow2_ceil(cap[None, :] * size[:, None])):
        return None
    return size.tolist(), list(b)


def _check_announcement(size, bound, n_features, max_client_size, cap, ring):
    """One client's ``(size, bound)``, checked; raises :class:`_Invalid`."""
    if isinstance(size, bool | np.bool_) or not isinstance(size, Integral):
        raise _Invalid("n", f"must be an integer number of rows; got {size!r}")
    size = int(size)
    if not 0 <= size <= max_client_size:
        raise _Invalid(
            "n", f"is {size}, outside [0, max_client_size={max_client_size}]"
        )
    try:
        b = np.asarray(bound, dtype=np.float64)
    except (TypeError, ValueError):
        raise _Invalid("bound", "must hold real numbers") from None
    if b.shape != (n_features,):
        raise _Invalid(
            "bound", f"must hold n_features={n_features} values; got shape {b.shape}"
        )
    if not np.all(np.isfinite(b)) or np.any(b < 0):
        raise _Invalid("bound", "must hold finite non-negative numbers")
    if cap is not None:
        allowed = _pow2_ceil(cap * float(size))
        over = b > allowed
        if np.any(over):
            j = int(np.flatnonzero(over)[0])
            raise _Invalid(
                "bound",
                f"announces {b[j]:.6g} for feature {j}, more than {size} rows of "
                f"values at most max_value={cap[j]:.6g} can reach ({allowed[j]:.6g})",
            )
    if np.any(b >= ring):
        j = int(np.flatnonzero(b >= ring)[0])
        raise _Invalid(
            "bound",
            f"announces {b[j]:.6g} for feature {j}: the announced clients' totals "
            "could wrap around the 64-bit ring of the secure sum",
        )
    return size, b
