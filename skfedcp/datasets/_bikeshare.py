"""ISLP's hourly Capital Bikeshare table of 2011, clients by month or season."""

from __future__ import annotations

import functools
from typing import Literal

import numpy as np
import pandas as pd
from sklearn.utils import Bunch

from ._base import (
    XyClients,
    _assemble,
    _bunch,
    _check_columns,
    _fill_doc,
    _import_islp_load_data,
    _one_hot,
    _Table,
)

__all__ = ["load_bikeshare"]

_BIKESHARE_MONTHS = [
    "Jan", "Feb", "March", "April", "May", "June",
    "July", "Aug", "Sept", "Oct", "Nov", "Dec",
]  # fmt: skip


@functools.cache
def _bikeshare_table(clients):
    raw = _import_islp_load_data()("Bikeshare")
    _check_columns(
        raw,
        ["season", "mnth", "day", "hr", "holiday", "weekday", "workingday",
         "weathersit", "temp", "atemp", "hum", "windspeed", "casual",
         "registered", "bikers"],
        "ISLP Bikeshare",
        "ISLP",
    )  # fmt: skip
    month = raw["mnth"].astype(object)
    unknown = sorted(set(month) - set(_BIKESHARE_MONTHS), key=str)
    if unknown:
        raise ValueError(f"ISLP Bikeshare has unexpected month labels {unknown}.")
    month_number = month.map({m: i + 1 for i, m in enumerate(_BIKESHARE_MONTHS)})
    client_values = {"mnth": month_number, "season": raw["season"]}[clients]
    # casual + registered = bikers (leak); mnth and season are the two
    # client variables and stay out of X whichever one is used.
    numeric = ["day", "holiday", "weekday", "workingday", "temp", "atemp", "hum",
               "windspeed"]  # fmt: skip
    features = pd.concat([raw[numeric], _one_hot(raw, ["hr", "weathersit"])], axis=1)
    frame = _assemble(
        features,
        np.log1p(raw["bikers"].to_numpy(dtype=np.float64)),
        "log1p_bikers",
        client_values.to_numpy(dtype=np.int64),
        clients,
    )
    return _Table(frame, tuple(features.columns), "log1p_bikers", clients,
                  ("log1p_bikers",))  # fmt: skip


@_fill_doc
def load_bikeshare(
    *,
    clients: Literal["mnth", "season"] = "mnth",
    return_X_y: bool = False,
    as_frame: bool = False,
) -> Bunch | XyClients:
    """Load the hourly Capital Bikeshare table of 2011 (regression, 12 clients).

    Each row is one hour of 2011 in Washington, D.C. (8,645 rows). The target
    is ``log1p(bikers)``, the log of one plus the number of rentals in that
    hour. Clients are the calendar months (or seasons), so a federation of 12
    months has natural covariate shift (temperature, daylight).

    =================  ==============
    Samples            8,645
    Features           36 (float)
    Target             ``log1p(bikers)``
    Clients            12 months (``mnth``) or 4 seasons (``season``)
    =================  ==============

    Preprocessing, from ISLP's ``Bikeshare`` table:

    - dropped: ``casual`` and ``registered`` (they sum to ``bikers``, the
      target) and both client variables ``mnth`` and ``season`` (X is the same
      whichever client variable is chosen);
    - kept as numbers: ``day`` (day of the year, 1-365), ``holiday``,
      ``weekday`` (0-6), ``workingday``, ``temp``, ``atemp``, ``hum``,
      ``windspeed`` (the last four already scaled to [0, 1] by UCI);
    - one-hot encoded (``get_dummies``, all levels kept, sorted): the
      categorical columns ``hr`` (24 columns ``hr_0`` ... ``hr_23``) and
      ``weathersit`` (4 columns).

    Parameters
    ----------
    clients : {"mnth", "season"}, default="mnth"
        Client variable. ``"mnth"`` gives the month number 1-12 (January =
        1); ``"season"`` gives ISLP's season code 1-4 (1 = winter).
    %(return_X_y_as_frame)s

    %(returns)s

    Raises
    ------
    ImportError
        If ISLP is missing; the message names the ``skfedcp[datasets]``
        extra.

    Notes
    -----
    Needs ``ISLP==0.6.0`` (BSD-style licence; ``pip install --no-deps``
    avoids its heavy requirements). The data are the UCI Bike Sharing data set
    (Fanaee-T and Gama, 2013), CC BY 4.0. Rows within a month are consecutive
    hours, so they are not exchangeable in time; conformal experiments should
    split calibration rows at random within each client.

    References
    ----------
    .. [1] H. Fanaee-T and J. Gama, "Event labeling combining ensemble detectors
       and background knowledge", Progress in Artificial Intelligence, 2013.

    Examples
    --------
    >>> from skfedcp.datasets import load_bikeshare
    >>> X, y, client_ids = load_bikeshare(return_X_y=True)
    >>> X.shape, y.shape, len(set(client_ids))
    ((8645, 36), (8645,), 12)
    """
    if clients not in ("mnth", "season"):
        raise ValueError(f'clients must be "mnth" or "season"; got {clients!r}.')
    table = _bikeshare_table(clients)
    return _bunch(table, "bikeshare", return_X_y, as_frame)
