"""Fit-time data checks of the wrappers: fast validation and fit params."""

from __future__ import annotations

import numpy as np
from sklearn.utils import assert_all_finite

from ..utils._sklearn_compat import (
    _check_feature_names,
    _safe_indexing,
)

#: Fit parameters that hold one value per row (the last ``__`` part of the
#: name, so ``<step>__sample_weight`` of a pipeline counts).
_PER_ROW_FIT_PARAMS = frozenset({"sample_weight"})


def _is_per_row(name):
    return name.rpartition("__")[2] in _PER_ROW_FIT_PARAMS


def _check_fit_params(fit_params, n_samples):
    """Refuse a per-row fit parameter without one entry per row of ``X``.

    The wrapper splits the rows itself (at random, within each client), so
    a parameter sized for the training rows cannot be aligned with them.
    """
    for name, value in fit_params.items():
        if not _is_per_row(name) or value is None:
            continue
        n = _n_rows(value)
        if n != n_samples:
            got = "no length" if n is None else f"{n} entries"
            raise ValueError(
                f"fit parameter {name} has {got} but X has {n_samples} rows: give "
                f"one {name} value per row of X (the wrapper splits it with the "
                "rows between training and calibration)."
            )
    return fit_params


def _split_fit_params(fit_params, idx):
    """The fit parameters of rows ``idx``: per-row ones indexed, others as is."""
    return {
        name: _safe_indexing(value, idx)
        if _is_per_row(name) and value is not None
        else value
        for name, value in fit_params.items()
    }


def _feature_names(estimator, X, *, reset):
    """scikit-learn's ``_check_feature_names``, without its dataframe probes for
    a plain ndarray (which has no feature names): about 20 us per call.
    """
    if type(X) is not np.ndarray:
        _check_feature_names(estimator, X, reset=reset)
    elif reset:
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
    elif getattr(estimator, "feature_names_in_", None) is not None:
        _check_feature_names(estimator, X, reset=False)  # warns


def _assert_finite(a, *, allow_nan, estimator_name, input_name):
    """``assert_all_finite`` with its own first pass done directly.

    A float array whose sum is finite holds no NaN or inf (scikit-learn's
    own first pass, minus ~15 us of namespace and config look-ups); any
    other case, including a sum that overflowed, goes to scikit-learn for
    its element-wise check and its messages.
    """
    if a.dtype.kind in "biu":
        return  # nothing to check (as in scikit-learn)
    if not allow_nan and a.dtype.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            if np.isfinite(a.sum()):
                return
    assert_all_finite(
        a, allow_nan=allow_nan, estimator_name=estimator_name, input_name=input_name
    )


def _plain_arrays(X, y):
    """Whether ``X`` is a non-empty 2-D float ndarray and ``y`` a 1-D numeric one.

    For these, ``validate_data(dtype=None)`` converts nothing and only checks
    values, feature names and counts (see ``_validate_plain``). Lengths are
    already known to match (``_check_y_matches_X``).
    """
    return (
        type(X) is np.ndarray
        and X.ndim == 2
        and X.dtype.kind == "f"
        and X.shape[0] > 0
        and X.shape[1] > 0
        and type(y) is np.ndarray
        and y.ndim == 1
        and y.dtype.kind in "iuf"
    )


def _n_rows(a):
    """Number of rows of an array-like, or None when it has none."""
    shape = getattr(a, "shape", None)
    if shape is not None:
        return shape[0] if len(shape) else None
    if isinstance(a, str | bytes) or not hasattr(a, "__len__"):
        return None
    return len(a)


def _check_y_matches_X(X, y, *, y_numeric):
    """Errors that name ``y`` before scikit-learn's generic ones."""
    if y is None:
        return  # scikit-learn's "requires y to be passed" error names y
    n_X, n_y = _n_rows(X), _n_rows(y)
    if n_X is None or n_y is None:
        return  # let validate_data name the bad argument
    if n_X != n_y:
        raise ValueError(
            f"X has {n_X} rows but y has {n_y} (inconsistent numbers of "
            "samples); give one target per row of X."
        )
    if y_numeric:
        values = np.asarray(y)
        if values.dtype.kind in "OUS":
            try:
                values.astype(np.float64)
            except (TypeError, ValueError):
                raise ValueError(
                    "y must hold numbers (regression targets); got values such as "
                    f"{values.ravel()[:3].tolist()}."
                ) from None
