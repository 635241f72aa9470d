"""Split a pooled data set over simulated clients: i.i.d., by column, label skew."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.multiclass import type_of_target

from .._typing import SklearnRandomState
from ..utils._random import check_random_state
from ..utils._validation import check_client_ids, check_int

__all__ = ["partition_by_column", "partition_dirichlet", "partition_iid"]

# Draws of partition_dirichlet before giving up on ``min_size``.
_MAX_DIRICHLET_TRIES = 1000


def partition_iid(
    n_samples: int,
    n_clients: int,
    *,
    sizes: ArrayLike | None = None,
    random_state: SklearnRandomState = None,
) -> NDArray[np.intp]:
    """Assign rows to clients uniformly at random (an i.i.d. federation).

    Parameters
    ----------
    n_samples : int
        Number of rows to assign.
    n_clients : int
        Number of clients, at most ``n_samples`` so that none is empty.
    sizes : array-like of int of shape (n_clients,), default=None
        Rows per client, each >= 1, summing to ``n_samples``. None gives
        sizes as equal as possible: the first ``n_samples % n_clients``
        clients get one row more.
    random_state : int, RandomState instance or None, default=None
        Seed of the random assignment; None draws fresh
        entropy from the operating system, never NumPy's global state.

    Returns
    -------
    client_ids : ndarray of shape (n_samples,), dtype int
        Client ``0 ... n_clients - 1`` of each row; client ``k`` holds exactly
        ``sizes[k]`` rows, drawn without replacement.

    Examples
    --------
    >>> from skfedcp.datasets import partition_iid
    >>> import numpy as np
    >>> client_ids = partition_iid(10, 3, random_state=0)
    >>> np.bincount(client_ids).tolist()
    [4, 3, 3]
    >>> np.bincount(partition_iid(10, 2, sizes=[8, 2], random_state=0)).tolist()
    [8, 2]
    """
    n_samples = check_int(n_samples, "n_samples", low=1)
    n_clients = check_int(n_clients, "n_clients", low=1)
    if sizes is None:
        if n_clients > n_samples:
            raise ValueError(
                f"n_clients={n_clients} exceeds n_samples={n_samples}: some "
                "clients would hold no rows."
            )
        base, extra = divmod(n_samples, n_clients)
        sizes = np.full(n_clients, base)
        sizes[:extra] += 1
    else:
        sizes = np.asarray(sizes)
        if sizes.shape != (n_clients,):
            raise ValueError(
                f"sizes must have shape ({n_clients},); got shape {sizes.shape}."
            )
        if sizes.dtype.kind not in "iu" or np.any(sizes < 1):
            raise ValueError(f"sizes must be integers >= 1; got {sizes.tolist()}.")
        if sizes.sum() != n_samples:
            raise ValueError(
                f"sizes must sum to n_samples={n_samples}; they sum to {sizes.sum()}."
            )
    rng = check_random_state(random_state)
    return rng.permutation(np.repeat(np.arange(n_clients), sizes))


def partition_by_column(
    X: pd.DataFrame | ArrayLike, column: str | int
) -> NDArray[np.intp]:
    """Use the values of one column of ``X`` as client labels.

    Parameters
    ----------
    X : DataFrame or array-like of shape (n_samples, n_features)
        The data.
    column : str or int
        A column name (DataFrame only) or a column position (any ``X``; as in
        scikit-learn's ``ColumnTransformer``, an int is always a position,
        negative values count from the end).

    Returns
    -------
    client_ids : ndarray of shape (n_samples,), dtype int
        Code of each row's value among the column's sorted distinct values:
        the smallest value gets client ``0``.

    Examples
    --------
    >>> import pandas as pd
    >>> from skfedcp.datasets import partition_by_column
    >>> df = pd.DataFrame({"site": ["b", "a", "c", "a"], "x": [1.0, 2, 3, 4]})
    >>> partition_by_column(df, "site").tolist()
    [1, 0, 2, 0]
    >>> partition_by_column([[5, 0.1], [3, 0.2], [5, 0.3]], 0).tolist()
    [1, 0, 1]
    """
    if isinstance(column, bool) or not isinstance(column, Integral | str):
        raise TypeError(
            f"column must be a column name (str) or position (int); got {column!r}."
        )
    if isinstance(X, pd.DataFrame):
        if isinstance(column, str):
            if column not in X.columns:
                raise ValueError(
                    f"column {column!r} is not a column of X; columns are "
                    f"{list(X.columns)}."
                )
            values = X[column]
            if isinstance(values, pd.DataFrame):
                raise ValueError(f"X has several columns named {column!r}.")
        else:
            n_columns = X.shape[1]
            if not -n_columns <= column < n_columns:
                raise ValueError(
                    f"column={column} is out of range for X with {n_columns} columns."
                )
            values = X.iloc[:, column]
        values = values.to_numpy()
    else:
        if isinstance(column, str):
            raise TypeError(
                f"column={column!r} is a name, but X is not a DataFrame: pass a "
                "column position (int) instead."
            )
        array = np.asarray(X)
        if array.ndim != 2:
            raise ValueError(f"X must be 2-D; got an array of shape {array.shape}.")
        n_columns = array.shape[1]
        if not -n_columns <= column < n_columns:
            raise ValueError(
                f"column={column} is out of range for X with {n_columns} columns."
            )
        values = array[:, column]
    if values.dtype.kind == "b":
        values = values.astype(np.intp)  # False -> client 0, True -> client 1
    values = check_client_ids(values, values.shape[0], name="column")
    codes, _ = pd.factorize(values, sort=True)
    return codes.astype(np.intp)


def _labels_for_skew(y: ArrayLike, n_bins: int) -> NDArray[np.intp]:
    """Return class codes of ``y``; continuous ``y`` is cut into quantile bins."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D; got an array of shape {y.shape}.")
    if y.shape[0] == 0:
        raise ValueError("y is empty.")
    if pd.isna(y).any():
        raise ValueError("y must not contain NaN.")
    kind = type_of_target(y, input_name="y")
    if kind == "continuous":
        y = y.astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError("y must be finite.")
        edges = np.quantile(y, np.linspace(0.0, 1.0, n_bins + 1)[1:-1])
        # Ties can merge bins: fewer than n_bins classes then.
        return np.searchsorted(np.unique(edges), y, side="right")
    if kind not in ("binary", "multiclass"):
        raise ValueError(
            f"y must hold class labels or continuous values; type_of_target gives "
            f"{kind!r}."
        )
    return pd.factorize(y, sort=True)[0]


def _dirichlet(
    rng: np.random.RandomState, concentration: float, size: int
) -> NDArray[np.float64]:
    """Draw Dir(concentration * 1) proportions, safe for tiny concentrations.

    ``RandomState.dirichlet`` returns NaN when every gamma draw underflows
    (concentration below ~0.01). Here each gamma is drawn on the log scale as
    ``G * U**(1 / a)`` with ``G ~ Gamma(a + 1)`` and ``U ~ U(0, 1)``, which is
    exactly ``Gamma(a)``, and normalised with a log-sum-exp.
    """
    log_gamma = (
        np.log(rng.gamma(concentration + 1.0, size=size))
        + np.log(rng.uniform(size=size)) / concentration
    )
    weights = np.exp(log_gamma - log_gamma.max())
    return weights / weights.sum()


def partition_dirichlet(
    y: ArrayLike,
    n_clients: int,
    *,
    concentration: float = 1.0,
    n_bins: int = 10,
    min_size: int = 1,
    random_state: SklearnRandomState = None,
) -> NDArray[np.intp]:
    r"""Assign rows to clients with label skew drawn from a Dirichlet law.

    The standard non-i.i.d. split of Hsu et al. (2019): for each class ``c``
    draw client proportions :math:`p_c \sim \mathrm{Dir}(\beta \mathbf{1})`
    (``beta = concentration``) and hand the class's rows, in random order, to
    the clients in those proportions. Small ``concentration`` gives each
    client few classes; large values approach an i.i.d. split. Continuous
    targets are first cut into ``n_bins`` quantile bins, which play the role
    of classes.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels, or continuous targets (as classified by
        :func:`sklearn.utils.multiclass.type_of_target`).
    n_clients : int
        Number of clients (>= 1).
    concentration : float, default=1.0
        Dirichlet concentration ``beta > 0``.
    n_bins : int, default=10
        Number of quantile bins for continuous ``y`` (>= 1); ignored for
        class labels. Tied values can leave fewer bins.
    min_size : int, default=1
        Every client must get at least this many rows (>= 0). Draws that miss
        it are redrawn, up to 1,000 times.
    random_state : int, RandomState instance or None, default=None
        Seed for the proportions and the row order; None draws fresh
        entropy from the operating system, never NumPy's global state.

    Returns
    -------
    client_ids : ndarray of shape (n_samples,), dtype int
        Client ``0 ... n_clients - 1`` of each row.

    Raises
    ------
    ValueError
        If ``n_clients * min_size > n_samples``, or if no draw in 1,000 gave
        every client ``min_size`` rows (lower ``min_size``, raise
        ``concentration`` or use fewer clients).

    Notes
    -----
    The ``n_c`` rows of class ``c``, shuffled, are cut at
    ``floor(cumsum(p_c) * n_c)``: client ``k`` receives the rounded share
    ``p_ck`` of the class and every row is assigned. Redrawing until every
    client has ``min_size`` rows makes the result a draw of this split
    conditioned on the size constraint.

    References
    ----------
    .. [1] T.-M. H. Hsu, H. Qi and M. Brown, "Measuring the Effects of
       Non-Identical Data Distribution for Federated Visual Classification",
       arXiv:1909.06335, 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedcp.datasets import partition_dirichlet
    >>> y = np.repeat([0, 1, 2], 100)
    >>> client_ids = partition_dirichlet(y, 4, concentration=0.5, random_state=0)
    >>> client_ids.shape, sorted(set(client_ids.tolist()))
    ((300,), [0, 1, 2, 3])
    """
    n_clients = check_int(n_clients, "n_clients", low=1)
    n_bins = check_int(n_bins, "n_bins", low=1)
    min_size = check_int(min_size, "min_size", low=0)
    if isinstance(concentration, bool) or not isinstance(concentration, Real):
        raise TypeError(f"concentration must be a float > 0; got {concentration!r}.")
    if not (np.isfinite(concentration) and concentration > 0):
        raise ValueError(f"concentration must be finite and > 0; got {concentration}.")
    classes = _labels_for_skew(y, n_bins)
    n_samples = classes.shape[0]
    if n_clients * min_size > n_samples:
        raise ValueError(
            f"{n_clients} clients with min_size={min_size} need at least "
            f"{n_clients * min_size} rows; y has {n_samples}."
        )
    rng = check_random_state(random_state)
    members = [np.flatnonzero(classes == c) for c in range(classes.max() + 1)]
    client_ids = np.empty(n_samples, dtype=np.intp)
    for _ in range(_MAX_DIRICHLET_TRIES):
        for rows in members:
            proportions = _dirichlet(rng, float(concentration), n_clients)
            cuts = np.floor(np.cumsum(proportions)[:-1] * rows.shape[0]).astype(int)
            sizes = np.diff(np.concatenate(([0], cuts, [rows.shape[0]])))
            client_ids[rng.permutation(rows)] = np.repeat(np.arange(n_clients), sizes)
        if np.bincount(client_ids, minlength=n_clients).min() >= min_size:
            return client_ids
    raise ValueError(
        f"No Dirichlet draw in {_MAX_DIRICHLET_TRIES} gave every one of the "
        f"{n_clients} clients at least min_size={min_size} rows at "
        f"concentration={concentration}; lower min_size, raise concentration or "
        "use fewer clients."
    )
