"""Validation of privacy parameters: one helper shared by every mechanism."""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..utils._validation import check_int

__all__ = ["EPSILON_RANGE", "PrivacyParams", "check_privacy_params"]

#: The public range of ``epsilon`` the private calibrators accept (dp-central,
#: dp-qq, ldp-l, ldp-s). Below 1e-6 a per-user or per-client budget lets
#: nothing through (the threshold is +inf, the label or bit noise uniform, for
#: any federation below 10**12 rows) and ``exp(epsilon) - 1`` loses the
#: precision the plans divide by; above 1e6 the mechanisms are deterministic in
#: float64 (``exp(-epsilon * gap)`` underflows for every utility gap above
#: ``1e-3``), so a larger value changes nothing but overflows the plans'
#: arithmetic. The mechanisms of :mod:`skfedcp.privacy` keep accepting any
#: finite positive epsilon.
EPSILON_RANGE = (1e-6, 1e6)


class PrivacyParams(NamedTuple):
    """Validated privacy parameters (``None`` where not given)."""

    epsilon: float | None
    delta: float | None
    bounds: tuple[float, float] | None
    edges: NDArray[np.float64] | None


def check_privacy_params(
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    bounds: tuple[float, float] | None = None,
    edges: ArrayLike | None = None,
    names: Mapping[str, str] | None = None,
) -> PrivacyParams:
    """Validate privacy parameters and return them in canonical form.

    Only the arguments that are not ``None`` are checked; the others come back
    as ``None``. Errors name the argument, so a caller that exposes a parameter
    under another name (for example ``score_bounds``) passes ``names``.

    Parameters
    ----------
    epsilon : float, default=None
        Privacy parameter; must be a finite number ``> 0``.
    delta : float, default=None
        Approximate-DP parameter; must satisfy ``0 <= delta < 1``.
    bounds : tuple of two floats, default=None
        Public range ``(low, high)`` of the values; finite with ``low < high``.
        It must be fixed before seeing the data.
    edges : array-like of shape (n_edges,), default=None
        Public bin edges: finite, strictly increasing, at least two of them.
    names : dict, default=None
        Names to use in error messages, e.g. ``{"bounds": "score_bounds"}``.

    Returns
    -------
    params : PrivacyParams
        Named tuple ``(epsilon, delta, bounds, edges)``: ``epsilon`` and
        ``delta`` as floats, ``bounds`` as a tuple of two floats, ``edges`` as
        a float64 array.

    Raises
    ------
    TypeError
        If an argument is not a number (or an array of numbers).
    ValueError
        If an argument is out of range, non-finite or not increasing.

    Examples
    --------
    >>> from skfedcp.privacy import check_privacy_params
    >>> check_privacy_params(epsilon=1, bounds=(0, 1))
    PrivacyParams(epsilon=1.0, delta=None, bounds=(0.0, 1.0), edges=None)
    >>> check_privacy_params(epsilon=0)
    Traceback (most recent call last):
    ...
    ValueError: epsilon must be a finite number > 0; got 0.
    """
    names = {} if names is None else dict(names)
    if epsilon is not None:
        name = names.get("epsilon", "epsilon")
        epsilon = _check_real(epsilon, name, "a finite number > 0")
        if not (math.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"{name} must be a finite number > 0; got {epsilon:g}.")
    if delta is not None:
        name = names.get("delta", "delta")
        delta = _check_real(delta, name, "a number in [0, 1)")
        if not 0.0 <= delta < 1.0:
            raise ValueError(f"{name} must satisfy 0 <= {name} < 1; got {delta!r}.")
    if bounds is not None:
        bounds = _check_bounds(bounds, names.get("bounds", "bounds"))
    if edges is not None:
        edges = _check_edges(edges, names.get("edges", "edges"))
    return PrivacyParams(epsilon, delta, bounds, edges)


def _check_real(value: object, name: str, expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be {expected}; got {value!r}.")
    return float(value)


def _check_bounds(bounds: Any, name: str) -> tuple[float, float]:
    try:
        low, high = bounds
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be a pair (low, high) of finite numbers; got {bounds!r}."
        ) from exc
    low = _check_real(low, name, "a pair (low, high) of finite numbers")
    high = _check_real(high, name, "a pair (low, high) of finite numbers")
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"{name} must be finite; got ({low!r}, {high!r}).")
    if not low < high:
        raise ValueError(
            f"{name} must be increasing (low < high); got ({low!r}, {high!r})."
        )
    return (low, high)


def _check_edges(edges: ArrayLike, name: str) -> NDArray[np.float64]:
    try:
        arr = np.asarray(edges, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be an array of numbers; got {edges!r}.") from exc
    if arr.ndim != 1 or arr.shape[0] < 2:
        raise ValueError(
            f"{name} must be 1-D with at least 2 entries; got shape {arr.shape}."
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (no NaN or inf).")
    if not (np.diff(arr) > 0).all():
        raise ValueError(f"{name} must be strictly increasing.")
    return arr


_check_int = check_int  # the package-wide integer check


def _check_open_unit(value: object, name: str) -> float:
    """A float in the open interval (0, 1)."""
    value = _check_real(value, name, "a number in (0, 1)")
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in the open interval (0, 1); got {value!r}.")
    return value
