"""Input checks with early, named errors."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "as_real_array",
    "check_alpha",
    "check_client_ids",
    "check_int",
    "check_scores",
]


def check_alpha(alpha: float, *, name: str = "alpha") -> float:
    """Return ``alpha`` as a float after checking that it lies in (0, 1).

    Parameters
    ----------
    alpha : float
        Target miscoverage level.
    name : str, default="alpha"
        Name used in the error message.

    Returns
    -------
    alpha : float

    Examples
    --------
    >>> check_alpha(0.1)
    0.1
    """
    if isinstance(alpha, bool) or not isinstance(alpha, Real):
        raise TypeError(f"{name} must be a float in (0, 1); got {alpha!r}.")
    alpha = float(alpha)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"{name} must be in the open interval (0, 1); got {alpha!r}.")
    return alpha


def check_int(value: object, name: str, *, low: int, high: int | None = None) -> int:
    """Return ``value`` as an int after checking it lies in ``[low, high]``.

    Parameters
    ----------
    value : object
        The value to check: any integer (numpy integers included) passes the
        type check, anything else (bools included) raises a TypeError.
    name : str
        Name used in error messages.
    low : int
        Smallest accepted value.
    high : int, default=None
        Largest accepted value; ``None`` means no upper limit.

    Returns
    -------
    value : int

    Examples
    --------
    >>> check_int(3, "n_clients", low=1)
    3
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer >= {low}; got {value!r}.")
    value = int(value)
    if value < low or (high is not None and value > high):
        upper = "" if high is None else f" and <= {high}"
        raise ValueError(f"{name} must be >= {low}{upper}; got {value}.")
    return value


def as_real_array(values: ArrayLike, *, name: str = "scores") -> NDArray[np.float64]:
    """``values`` as a float64 array, refusing what a cast would silently change.

    A complex array (its imaginary part would be dropped) and a masked array
    (its mask would be ignored: the masked entries would be used) raise a
    TypeError naming ``name``; so does anything that is not numbers.

    Examples
    --------
    >>> as_real_array([1, 2.5])
    array([1. , 2.5])
    >>> as_real_array(np.array([1 + 2j]))
    Traceback (most recent call last):
    ...
    TypeError: scores must hold real numbers; got a complex array (dtype complex128).
    """
    if isinstance(values, np.ma.MaskedArray):
        raise TypeError(
            f"{name} must not be a masked array: its mask would be ignored and the "
            f"masked entries used. Pass {name}.compressed() (drop them) or "
            f"{name}.filled(value)."
        )
    try:
        arr = np.asarray(values)
        if arr.dtype.kind == "c":
            raise TypeError(
                f"{name} must hold real numbers; got a complex array (dtype "
                f"{arr.dtype})."
            )
        return arr.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        if str(exc).startswith(f"{name} must hold real numbers"):
            raise
        raise TypeError(f"{name} must be an array of numbers; got {values!r}.") from exc


def check_scores(
    scores: ArrayLike, *, name: str = "scores", allow_inf: bool = False
) -> NDArray[np.float64]:
    """Return conformity scores as a 1-D float64 array after checking them.

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Conformity scores.
    name : str, default="scores"
        Name used in error messages.
    allow_inf : bool, default=False
        Whether ``+inf`` / ``-inf`` values are accepted. NaN never is.

    Returns
    -------
    scores : ndarray of shape (n_samples,), dtype float64

    Examples
    --------
    >>> check_scores([0.5, 1, 2])
    array([0.5, 1. , 2. ])
    """
    arr = as_real_array(scores, name=name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got an array of shape {arr.shape}.")
    if allow_inf:
        if np.isnan(arr).any():
            raise ValueError(f"{name} must not contain NaN.")
    elif not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (no NaN or inf).")
    return arr


def check_client_ids(
    client_ids: ArrayLike | None, n_samples: int, *, name: str = "client_ids"
) -> NDArray[Any]:
    """Check a client-partition vector and return it as a 1-D array.

    Parameters
    ----------
    client_ids : array-like of shape (n_samples,) or None
        The client that holds each row. ``None`` means a single client,
        labelled ``0``. Labels may be integers or strings.
    n_samples : int
        Expected length.
    name : str, default="client_ids"
        Name used in error messages.

    Returns
    -------
    client_ids : ndarray of shape (n_samples,)

    Examples
    --------
    >>> check_client_ids(["a", "b", "a"], 3)
    array(['a', 'b', 'a'], dtype='<U1')
    >>> check_client_ids(None, 2)
    array([0, 0])
    """
    if client_ids is None:
        return np.zeros(n_samples, dtype=np.intp)
    if isinstance(client_ids, pd.DataFrame):
        raise ValueError(
            f"{name} must be 1-D of shape ({n_samples},); got a DataFrame of shape "
            f"{client_ids.shape}."
        )
    if isinstance(client_ids, pd.Series | pd.Index):
        ids = client_ids.to_numpy()
    else:
        if isinstance(client_ids, list | tuple):
            # np.asarray would turn [1, "1"] into two '1' strings and
            # [1, 1.0, True] into three 1.0: one client, silently.
            _check_one_label_kind(client_ids, name)
        ids = np.asarray(client_ids)
    if ids.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D of shape ({n_samples},); got {ids.shape}."
        )
    if ids.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {ids.shape[0]} entries but X has {n_samples} rows; "
            "give one client label per row."
        )
    if ids.dtype.kind in "fc":
        if np.isnan(ids).any():
            raise ValueError(f"{name} must not contain NaN.")
        if not np.all(np.isfinite(ids)):
            raise ValueError(f"{name} must not contain inf.")
    elif ids.dtype.kind == "O":
        if pd.isna(ids).any():
            raise ValueError(f"{name} must not contain NaN or None.")
        _check_one_label_kind(ids, name)
        ids = ids.astype(object)
    elif ids.dtype.kind not in "iubUS":
        raise TypeError(f"{name} must hold integer or string labels; got {ids.dtype}.")
    return ids


def _label_kind(label: object) -> str:
    if isinstance(label, bool | np.bool_):
        return "bool"
    if isinstance(label, Integral):
        return "int"
    if isinstance(label, Real):
        return "float"
    if isinstance(label, str | np.str_):
        return "str"
    if isinstance(label, bytes | np.bytes_):
        return "bytes"
    return type(label).__name__


# pandas' inferred kinds that guarantee a single _label_kind: the check then
# runs at C speed; any other answer ("mixed", "integer-na", "complex", ...)
# falls back to naming each label's kind in Python.
_ONE_LABEL_KIND = frozenset(
    {"empty", "integer", "floating", "boolean", "string", "bytes"}
)


def _check_one_label_kind(labels: Any, name: str) -> None:
    """Refuse labels of several kinds (equal values would merge clients)."""
    if pd.api.types.infer_dtype(labels, skipna=False) in _ONE_LABEL_KIND:
        return
    kinds = {_label_kind(label) for label in labels}
    if len(kinds) > 1:
        raise TypeError(
            f"{name} mixes label types ({', '.join(sorted(kinds))}); labels such "
            "as 1, 1.0, True or '1' would merge into one client or be "
            "converted. Use one type for every label (e.g. all int or all str)."
        )
