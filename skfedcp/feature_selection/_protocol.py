"""FED-chi2 protocol steps: client and server functions over plain arrays.

Pang et al. (ICML 2023), Alg. 2, applied to one statistic per feature:

* round 1 -- each client sends its class counts and the row totals of its
  tables (feature totals, or level counts of categorical features) through
  secure aggregation; the server broadcasts the sums (:func:`chi2_client_marginals`,
  :func:`chi2_server_marginals`);
* round 2 -- each client projects its residual vectors
  ``u_i = (O_i - S_i) / sqrt(E)`` with shared stable matrices, one matrix per
  feature, and sends the ``(n_projections, n_features)`` sketch through
  secure aggregation (:func:`chi2_client_encode`, :func:`chi2_frac_bits`);
* the server estimates each statistic ``||w_j||**2`` from the summed sketch
  (:func:`chi2_server_decode`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from .._typing import MatrixLike
from ..exceptions import InvalidMessageError
from ._ranges import _check_sketch_range, _check_user_frac_bits, _frac_bits
from ._sketch import (
    _check_positive_int,
    _check_seed,
    _gaussian_projections,
    estimate_frequency_moment,
)
from ._tables import (
    Chi2Marginals,
    Chi2Scores,
    _blocks,
    _class_counts,
    _client_tables,
    _finalize_scores,
    _n_features,
    _offsets,
    _project_block,
    _residual_rows,
)

__all__ = [
    "Chi2Marginals",
    "Chi2Scores",
    "chi2_client_encode",
    "chi2_client_marginals",
    "chi2_frac_bits",
    "chi2_server_decode",
    "chi2_server_marginals",
]

# --------------------------------------------------------------------------
# Validation of the inputs of the public steps


def _check_client_data(X, y, classes, n_levels):
    classes = np.asarray(classes)
    if classes.ndim != 1 or classes.size == 0:
        raise ValueError("classes must be a non-empty 1-D array of class labels.")
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D; got shape {y.shape}.")
    order = np.argsort(classes, kind="stable")
    pos = np.searchsorted(classes[order], y)
    pos = np.clip(pos, 0, classes.size - 1)
    if not np.all(classes[order][pos] == y):
        raise ValueError("y holds labels that are not in classes.")
    y_codes = order[pos]
    if not sp.issparse(X):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D; got shape {X.shape}.")
    else:
        X = sp.csr_matrix(X, dtype=np.float64)
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}.")
    values = X.data if sp.issparse(X) else X
    if np.any(values < 0):
        raise ValueError("X must be non-negative.")
    if n_levels is not None:
        n_levels = np.asarray(n_levels, dtype=np.intp)
        if n_levels.shape != (X.shape[1],):
            raise ValueError("n_levels must have one entry per feature of X.")
        dense = X.toarray() if sp.issparse(X) else X
        if np.any(dense != np.floor(dense)) or np.any(dense >= n_levels[None, :]):
            raise ValueError(
                "With n_levels, X must hold integer level codes in [0, n_levels)."
            )
        X = dense
    return X, y_codes, classes.size, n_levels


def _check_marginals(marginals):
    if not isinstance(marginals, Chi2Marginals):
        raise TypeError("marginals must be the Chi2Marginals of chi2_server_marginals.")
    return marginals


# --------------------------------------------------------------------------
# Public protocol steps


def chi2_client_marginals(
    X: MatrixLike,
    y: ArrayLike,
    *,
    classes: ArrayLike,
    n_levels: ArrayLike | None = None,
) -> NDArray[np.float64]:
    """Round 1, client step: the local marginals to be securely summed.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The client's rows: non-negative values (``"sklearn"`` statistic) or,
        with ``n_levels``, integer level codes.
    y : array-like of shape (n_samples,)
        The client's class labels.
    classes : array-like of shape (n_classes,)
        The label set agreed by all clients (public).
    n_levels : array-like of shape (n_features,), optional
        Number of levels of each categorical feature (public schema). Given:
        the contingency statistic; None: sklearn's statistic.

    Returns
    -------
    message : ndarray of shape (n_classes + n_rows,)
        The class counts, then the row totals (feature totals, or the level
        counts of each feature in turn).

    Examples
    --------
    >>> X = np.array([[1, 0], [2, 1], [0, 3]])
    >>> chi2_client_marginals(X, [0, 1, 1], classes=[0, 1])
    array([1., 2., 3., 4.])
    """
    X, y_codes, n_classes, n_levels = _check_client_data(X, y, classes, n_levels)
    zeros = np.zeros(y_codes.shape[0], dtype=np.intp)
    table = _client_tables(X, y_codes, zeros, 1, n_classes, n_levels)[0]
    counts = _class_counts(y_codes, zeros, 1, n_classes)[0]
    return np.concatenate([counts, table.sum(axis=0)])


def _message_array(value, *, field, client=None, ndim=1) -> NDArray[np.float64]:
    """A received vector as float64, or InvalidMessageError naming the field."""
    who = "the secure sum" if client is None else f"client {client!r}"
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        arr = np.asarray(value, dtype=object)
    if arr.dtype.kind not in "biuf":
        raise InvalidMessageError(
            f"{who}: field {field!r} must hold real numbers; got dtype {arr.dtype}.",
            client=client,
            field=field,
        )
    if arr.ndim != ndim:
        raise InvalidMessageError(
            f"{who}: field {field!r} must be {ndim}-D; got shape {arr.shape}.",
            client=client,
            field=field,
        )
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise InvalidMessageError(
            f"{who}: field {field!r} holds NaN or infinite values.",
            client=client,
            field=field,
        )
    return arr


def _check_row_totals(rows, n_total, max_value, n_levels, who, client):
    """Feature totals within ``n_total`` rows of values at most ``max_value``."""
    if n_levels is not None:
        raise ValueError(
            "max_value bounds the feature values of sklearn's statistic; the "
            "level counts of a contingency table are bounded by n_samples."
        )
    cap = np.asarray(max_value, dtype=np.float64)
    if cap.ndim > 1 or (cap.ndim == 1 and cap.shape != rows.shape):
        raise ValueError(
            f"max_value must be a number or one per feature ({rows.shape[0]}); got "
            f"shape {cap.shape}."
        )
    if not np.all(cap >= 0):
        raise ValueError(f"max_value must be non-negative; got {max_value!r}.")
    over = rows > n_total * cap
    if np.any(over):
        j = int(np.flatnonzero(over)[0])
        raise InvalidMessageError(
            f"{who}: the total of feature {j} is {rows[j]:.6g}, more than "
            f"{n_total:.0f} rows of values at most max_value="
            f"{np.broadcast_to(cap, rows.shape)[j]:.6g} can give.",
            client=client,
            field="row_totals",
        )


def chi2_server_marginals(
    total: ArrayLike,
    *,
    n_classes: int,
    n_levels: ArrayLike | None = None,
    n_features: int | None = None,
    n_samples: int | None = None,
    max_samples: int | None = None,
    max_value: float | ArrayLike | None = None,
    client: Hashable | None = None,
) -> Chi2Marginals:
    """Round 1, server step: validate and split the securely summed marginals.

    Parameters
    ----------
    total : array-like of shape (n_classes + n_rows,)
        Secure sum of the clients' :func:`chi2_client_marginals` messages.
    n_classes : int
        Number of classes.
    n_levels : array-like of shape (n_features,), optional
        Level counts of the categorical features (contingency statistic).
    n_features : int, optional
        Number of features announced in the plan (``statistic="sklearn"``);
        None: whatever follows the class counts.
    n_samples : int, optional
        Total number of rows the clients announced; the class counts must add
        up to it.
    max_samples : int, optional
        Public upper bound on the total number of rows (for instance the
        number of clients times the largest size a client may announce);
        class counts adding up to more are refused.
    max_value : float or array-like of shape (n_features,), optional
        Public upper bound on one row's value of each feature (sklearn's
        statistic): a feature total above ``max_value`` times the number of
        rows cannot come from honest clients and is refused.
    client : object, optional
        Label of the sender when ``total`` is one client's message rather
        than a secure sum (named in errors).

    Returns
    -------
    marginals : Chi2Marginals
        What the server broadcasts to every client. Classes with a zero count
        contribute nothing (their expected counts are 0).

    Raises
    ------
    InvalidMessageError
        If ``total`` is not a finite 1-D vector of the announced length, if a
        class count is not a non-negative integer, if a row total is
        negative, if the class counts do not add up to ``n_samples`` or
        exceed ``max_samples``, or if a feature total exceeds what
        ``max_value`` allows.

    Notes
    -----
    The class list and the feature count are public, fixed by the server
    before the round: pass ``n_classes`` and ``n_features`` (or
    ``n_levels``) from the plan, never from the messages, so that a
    message of another shape is refused rather than obeyed.

    Examples
    --------
    >>> chi2_server_marginals([3.0, 4.0, 10.0, 2.0], n_classes=2)
    Chi2Marginals(class_counts=array([3., 4.]), row_totals=array([10.,  2.]),
                  n_levels=None)
    """
    n_classes = _check_positive_int(n_classes, "n_classes")
    total = _message_array(total, field="total", client=client)
    who = "the secure sum" if client is None else f"client {client!r}"
    if n_levels is not None:
        n_levels = np.asarray(n_levels)
        if (
            n_levels.ndim != 1
            or n_levels.dtype.kind not in "iu"
            or np.any(n_levels < 1)
        ):
            raise ValueError(
                f"n_levels must be a 1-D array of positive ints; got {n_levels!r}."
            )
        n_levels = n_levels.astype(np.intp)
        n_rows = int(n_levels.sum())
    elif n_features is not None:
        n_rows = _check_positive_int(n_features, "n_features")
    else:
        n_rows = total.shape[0] - n_classes
    if n_rows < 1 or total.shape[0] != n_classes + n_rows:
        raise InvalidMessageError(
            f"{who}: field 'total' must hold n_classes + n_rows = {n_classes} + "
            f"{max(n_rows, 1)} values; got {total.shape[0]}.",
            client=client,
            field="total",
        )
    counts, rows = total[:n_classes].copy(), total[n_classes:].copy()
    if np.any(counts < 0) or np.any(counts != np.floor(counts)):
        raise InvalidMessageError(
            f"{who}: the class counts (field 'total'[:{n_classes}]) must be "
            f"non-negative integers; got {counts!r}.",
            client=client,
            field="class_counts",
        )
    if np.any(rows < 0):
        raise InvalidMessageError(
            f"{who}: the row totals (field 'total'[{n_classes}:]) must be "
            "non-negative; X is non-negative.",
            client=client,
            field="row_totals",
        )
    if counts.sum() <= 0:
        raise InvalidMessageError(
            f"{who}: the class counts sum to 0: no rows were aggregated.",
            client=client,
            field="class_counts",
        )
    if n_samples is not None and counts.sum() != n_samples:
        raise InvalidMessageError(
            f"{who}: the class counts add up to {counts.sum():.0f} rows, but the "
            f"clients announced {n_samples}.",
            client=client,
            field="class_counts",
        )
    if max_samples is not None and counts.sum() > _check_positive_int(
        max_samples, "max_samples"
    ):
        raise InvalidMessageError(
            f"{who}: the class counts add up to {counts.sum():.0f} rows, more "
            f"than the public bound max_samples={max_samples}.",
            client=client,
            field="class_counts",
        )
    if max_value is not None:
        _check_row_totals(rows, counts.sum(), max_value, n_levels, who, client)
    if n_levels is not None:
        offsets = _offsets(n_levels.shape[0], n_levels)
        per_feature = np.add.reduceat(rows, offsets[:-1])
        if np.any(rows != np.floor(rows)) or np.any(per_feature != counts.sum()):
            raise InvalidMessageError(
                f"{who}: the level counts of each feature must be integers adding "
                "up to the number of rows.",
                client=client,
                field="row_totals",
            )
    return Chi2Marginals(counts, rows, n_levels)


def chi2_frac_bits(
    marginals: Chi2Marginals, *, frac_bits: int | None = None
) -> NDArray[np.int64]:
    """Fixed-point precision of each feature's sketch, from public marginals.

    ``f_j = clip(62 - ceil(log2(8 sqrt(2 max(B_j, 1)))), 8, 52)`` where
    ``B_j`` bounds the statistic: ``F_j (N / N_min - 1)`` for sklearn's
    statistic, ``N (min(m_j, C) - 1)`` for a contingency table. Sketch
    entries are ``N(0, 2 s_j)``, so the aggregate leaves the int64 range
    only on an 8-sigma event. Clients and server compute it alike.

    Parameters
    ----------
    marginals : Chi2Marginals
    frac_bits : int, optional
        A fixed precision chosen by the user for every feature, checked
        instead: refused (ValueError naming the feature and the largest safe
        value) if a feature's sum could wrap around the 64-bit ring.

    Returns
    -------
    frac_bits : ndarray of shape (n_features,), dtype int64

    Examples
    --------
    >>> m = chi2_server_marginals([300.0, 400.0, 1e5, 2e3], n_classes=2)
    >>> chi2_frac_bits(m)
    array([49, 52])
    """
    marginals = _check_marginals(marginals)
    if frac_bits is not None:
        return _check_user_frac_bits(frac_bits, marginals)
    return _frac_bits(marginals)


def chi2_client_encode(
    X: MatrixLike,
    y: ArrayLike,
    marginals: Chi2Marginals,
    *,
    classes: ArrayLike,
    seed: int,
    n_projections: int = 50,
    expected_split: Literal["class", "uniform"] = "class",
    n_clients: int | None = None,
) -> NDArray[np.float64]:
    """Round 2, client step: the client's sketch of every feature's residuals.

    For feature ``j`` the client forms ``u_j = (O_j - S_j) / sqrt(E_j)``
    (cells with ``E = 0`` omitted) and sends ``e_j = P_j u_j`` where ``P_j``
    is the ``(n_projections, m_j * n_classes)`` 2-stable matrix of key
    ``(j,)`` built from the shared ``seed`` (:func:`stable_projection`).
    Summed over clients, ``e_j = P_j w_j`` with ``||w_j||**2`` the statistic.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The client's rows (level codes when ``marginals.n_levels`` is set).
    y : array-like of shape (n_samples,)
        The client's labels.
    marginals : Chi2Marginals
        The broadcast of round 1.
    classes : array-like of shape (n_classes,)
        The agreed label set.
    seed : int
        Shared projection seed in ``[0, 2**128)``; never sent to the server.
    n_projections : int, default=50
        Sketch size ``l``.
    expected_split : {"class", "uniform"}, default="class"
        Share of the expected counts this client subtracts: ``"class"``,
        ``S_i = N_c^(i) r / N`` (the client's own class counts times the
        global row rate; robust to dropout), or ``"uniform"``, ``E / n``
        (the paper's; needs ``n_clients``).
    n_clients : int, optional
        Number of round-1 clients, required by ``"uniform"``.

    Returns
    -------
    sketch : ndarray of shape (n_projections, n_features)
        To be quantized with :func:`chi2_frac_bits` and securely summed.

    Examples
    --------
    >>> X = np.array([[1, 0], [2, 1], [0, 3]])
    >>> m = chi2_server_marginals(chi2_client_marginals(X, [0, 1, 1], classes=[0, 1]),
    ...                           n_classes=2)
    >>> e = chi2_client_encode(X, [0, 1, 1], m, classes=[0, 1], seed=7)
    >>> e.shape
    (50, 2)
    """
    marginals = _check_marginals(marginals)
    seed = _check_seed(seed)
    n_projections = _check_positive_int(n_projections, "n_projections")
    if expected_split not in ("class", "uniform"):
        raise ValueError(
            f"expected_split must be 'class' or 'uniform'; got {expected_split!r}."
        )
    if expected_split == "uniform":
        if n_clients is None:
            raise ValueError("n_clients is required with expected_split='uniform'.")
        n_clients = _check_positive_int(n_clients, "n_clients")
    X, y_codes, n_classes, _ = _check_client_data(X, y, classes, marginals.n_levels)
    if n_classes != marginals.class_counts.shape[0]:
        raise ValueError("classes and marginals.class_counts differ in length.")
    zeros = np.zeros(y_codes.shape[0], dtype=np.intp)
    table = _client_tables(X, y_codes, zeros, 1, n_classes, marginals.n_levels)[0]
    counts = _class_counts(y_codes, zeros, 1, n_classes)[0]
    offsets = _offsets(_n_features(marginals), marginals.n_levels)
    out = np.empty((_n_features(marginals), n_projections))
    for start, stop in _blocks(marginals, n_projections):
        rows = slice(offsets[start], offsets[stop])
        width = (offsets[start + 1] - offsets[start]) * n_classes
        proj = _gaussian_projections(seed, range(start, stop), n_projections, width)
        u = _residual_rows(
            table[:, rows], counts, marginals, rows, expected_split, n_clients
        )
        out[start:stop] = _project_block(proj, u)
    return np.ascontiguousarray(out.T)


def chi2_server_decode(
    sketch: ArrayLike,
    marginals: Chi2Marginals,
    *,
    estimator: Literal["geometric", "mean_square", "median"] = "geometric",
    n_projections: int | None = None,
) -> Chi2Scores:
    """Server step: estimate every feature's statistic from the summed sketch.

    Parameters
    ----------
    sketch : array-like of shape (n_projections, n_features)
        Secure sum of the clients' :func:`chi2_client_encode` outputs.
    marginals : Chi2Marginals
        The broadcast of round 1.
    estimator : {"geometric", "mean_square", "median"}, default="geometric"
        Decoder, see :func:`estimate_frequency_moment`.
    n_projections : int, optional
        Sketch size announced in the plan; None: the number of rows of
        ``sketch``.

    Returns
    -------
    result : Chi2Scores
        ``(scores, pvalues)``. As in ``sklearn.feature_selection.chi2``, a
        feature with zero total, or a single class, gives NaN; p-values are
        ``chdtrc(dof, score)`` with ``dof = n_classes - 1`` (sklearn's
        statistic) or ``(m_j - 1)(n_classes - 1)`` (contingency).

    Raises
    ------
    InvalidMessageError
        If the sketch is not a finite array of the announced shape, or if it
        is out of the range honest clients can produce (below).

    Notes
    -----
    *Range check.* Each honest coordinate of feature ``j`` is ``N(0, 2
    s_j)`` with ``s_j <= H_j``, a public bound from the marginals (``H_j =
    B_j + 2 T_j``: ``B_j`` the bound of :func:`chi2_frac_bits`, ``T_j`` the
    feature's total, ``F_j`` or ``N``, which covers dropout). A coordinate
    beyond ``8 sqrt(2 H_j)`` (the headroom of the fixed-point plan), or a
    squared norm ``||e_j||**2`` beyond ``2 H_j`` times the chi-square
    quantile of tail ``1.2e-15`` with ``n_projections`` degrees of freedom,
    is refused, naming the feature. Secure aggregation hides who sent what,
    so the sum is refused as a whole; what one dishonest client can still do
    within the range is in the threat-model page of the user guide.

    Examples
    --------
    >>> m = chi2_server_marginals([3.0, 4.0, 10.0, 2.0], n_classes=2)
    >>> e = np.ones((50, 2))
    >>> chi2_server_decode(e, m, estimator="mean_square").scores
    array([0.5, 0.5])
    """
    marginals = _check_marginals(marginals)
    if estimator not in ("geometric", "mean_square", "median"):
        raise ValueError(
            "estimator must be 'geometric', 'mean_square' or 'median'; got "
            f"{estimator!r}."
        )
    sketch = _message_array(sketch, field="sketch", ndim=2)
    n_feat = _n_features(marginals)
    ell = sketch.shape[0] if n_projections is None else n_projections
    ell = _check_positive_int(ell, "n_projections") if n_projections else ell
    if sketch.shape != (ell, n_feat):
        raise InvalidMessageError(
            "the secure sum: sketch must have shape (n_projections, "
            f"n_features) = ({ell}, {n_feat}); got {sketch.shape}.",
            field="sketch",
        )
    _check_sketch_range(sketch, marginals)
    scores = estimate_frequency_moment(sketch, alpha=2.0, estimator=estimator, axis=0)
    return _finalize_scores(scores, marginals)
