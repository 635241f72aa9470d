"""FED-chi2's shared arithmetic: tables, residuals, projections, scores.

Used identically by the public protocol steps (:mod:`._protocol`) and the
in-process simulation (:class:`FedChi2Selector`), so that both give the same
numbers bit for bit.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy import special

__all__ = ["Chi2Marginals", "Chi2Scores"]

# Projection matrices are generated in blocks of features of at most this
# many entries (fixed, so that every client builds bit-identical blocks).
_BLOCK_ENTRIES = 2**21


class Chi2Marginals(NamedTuple):
    """Public marginals broadcast by the server after round 1.

    Attributes
    ----------
    class_counts : ndarray of shape (n_classes,)
        Number of rows of each class, ``N_c``.
    row_totals : ndarray of shape (n_rows,)
        ``statistic="sklearn"``: the feature totals ``F_j`` (``n_rows =
        n_features``). ``statistic="contingency"``: the level counts of every
        feature, feature after feature (``n_rows = sum(n_levels)``).
    n_levels : ndarray of shape (n_features,) or None
        Number of levels of each categorical feature; None for the
        ``"sklearn"`` statistic.
    """

    class_counts: np.ndarray
    row_totals: np.ndarray
    n_levels: np.ndarray | None = None


class Chi2Scores(NamedTuple):
    """Estimated chi-square statistics and their p-values."""

    scores: np.ndarray
    pvalues: np.ndarray


def _offsets(n_features, n_levels):
    if n_levels is None:
        return np.arange(n_features + 1)
    return np.concatenate(([0], np.cumsum(n_levels)))


def _n_features(marginals):
    if marginals.n_levels is None:
        return marginals.row_totals.shape[0]
    return marginals.n_levels.shape[0]


def _client_tables(X, y_codes, client_codes, n_clients, n_classes, n_levels):
    """Per-client tables, shape (n_clients, n_classes, n_rows), float64.

    ``"sklearn"``: column ``j`` holds the class-wise sums of feature ``j``
    (``O_i = Y_i^T X_i``). ``"contingency"``: column ``offset_j + a`` counts
    the rows of level ``a`` of feature ``j`` in each class.
    """
    n_samples = X.shape[0]
    cell = client_codes.astype(np.intp) * n_classes + y_codes
    if n_levels is None:
        # The (client, class) x sample indicator, built as CSR directly (half
        # the memory of going through COO); each row lists its samples in
        # increasing order, so every cell sums its rows in sample order.
        n_cells = n_clients * n_classes
        indptr = np.zeros(n_cells + 1, dtype=np.intp)
        np.cumsum(np.bincount(cell, minlength=n_cells), out=indptr[1:])
        onehot = sp.csr_matrix(
            (np.ones(n_samples), np.argsort(cell, kind="stable"), indptr),
            shape=(n_cells, n_samples),
        )
        obs = onehot @ X
        obs = obs.toarray() if sp.issparse(obs) else np.asarray(obs)
        obs = obs.reshape(n_clients, n_classes, X.shape[1])
        return obs.astype(np.float64, copy=False)
    codes = np.asarray(X.toarray() if sp.issparse(X) else X).astype(np.intp)
    offsets = _offsets(codes.shape[1], n_levels)
    n_rows = int(offsets[-1])
    idx = cell[:, None] * n_rows + offsets[:-1] + codes
    counts = np.bincount(idx.ravel(), minlength=n_clients * n_classes * n_rows)
    return counts.reshape(n_clients, n_classes, n_rows).astype(np.float64)


def _class_counts(y_codes, client_codes, n_clients, n_classes):
    cell = client_codes.astype(np.intp) * n_classes + y_codes
    counts = np.bincount(cell, minlength=n_clients * n_classes)
    return counts.reshape(n_clients, n_classes).astype(np.float64)


def _residual_rows(table, class_counts_i, marginals, rows, expected_split, n_clients):
    """``(O_i - S_i) / sqrt(E)`` on a slice of rows; cells with E = 0 give 0.

    ``table`` is the client's ``(n_classes, n_rows)`` table restricted to
    ``rows``; the result is ``(n_rows, n_classes)``, C-contiguous.
    """
    class_counts = marginals.class_counts
    n_total = class_counts.sum()
    totals = marginals.row_totals[rows][None, :]
    expected = (class_counts / n_total)[:, None] * totals
    if expected_split == "class":
        share = (class_counts_i / n_total)[:, None] * totals
    else:
        share = expected / n_clients
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (table - share) / np.sqrt(expected)
    u[expected == 0] = 0.0
    return np.ascontiguousarray(u.T)


def _residual_stack(tables, class_counts, marginals, rows, expected_split, n_clients):
    """:func:`_residual_rows` of several clients at once, bit for bit.

    ``tables`` is ``(n, n_classes, n_rows)`` and ``class_counts`` ``(n,
    n_classes)``; the result is ``(n, n_rows, n_classes)``. The arithmetic is
    elementwise and identical to the one-client function.
    """
    counts = marginals.class_counts
    n_total = counts.sum()
    totals = marginals.row_totals[rows][None, :]
    expected = (counts / n_total)[:, None] * totals
    if expected_split == "class":
        share = (class_counts / n_total)[:, :, None] * totals[None]
    else:
        share = (expected / n_clients)[None]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = (tables - share) / np.sqrt(expected)[None]
    u[:, expected == 0] = 0.0
    return np.ascontiguousarray(u.transpose(0, 2, 1))


def _blocks(marginals, n_projections, max_entries=None):
    """Feature blocks ``(start, stop)`` with equal level counts, bounded size."""
    n_classes = marginals.class_counts.shape[0]
    n_feat = _n_features(marginals)
    levels = (
        np.ones(n_feat, dtype=np.intp)
        if marginals.n_levels is None
        else marginals.n_levels
    )
    start = 0
    while start < n_feat:
        width = int(levels[start]) * n_classes
        size = max(1, _BLOCK_ENTRIES // max(n_projections * width, 1))
        if max_entries is not None:
            size = min(size, max(1, max_entries // max(n_projections, width, 1)))
        stop = start + 1
        while stop < n_feat and stop - start < size and levels[stop] == levels[start]:
            stop += 1
        yield start, stop
        start = stop


def _project_block(proj, u_rows):
    """``e_j = P_j u_j`` for a block of features: (J, l, M) x (J, M) -> (J, l).

    ``u_rows`` may also hold several clients, ``(n, J, M)`` -> ``(n, J, l)``:
    one matrix-vector product per (client, feature), the same as one client
    at a time.
    """
    lead = np.shape(u_rows)[:-2] if np.ndim(u_rows) == 3 else ()
    u = np.ascontiguousarray(u_rows).reshape(*lead, proj.shape[0], proj.shape[2], 1)
    return np.matmul(proj, u)[..., 0]


def _dof(marginals):
    n_eff = int(np.count_nonzero(marginals.class_counts))
    if marginals.n_levels is None:
        return np.full(marginals.row_totals.shape[0], max(n_eff, 2) - 1.0)
    offsets = _offsets(marginals.n_levels.shape[0], marginals.n_levels)
    nonzero = (marginals.row_totals > 0).astype(np.intp)
    m_eff = np.add.reduceat(nonzero, offsets[:-1]).astype(np.float64)
    return (m_eff - 1.0) * max(n_eff - 1, 1)


def _finalize_scores(scores, marginals):
    """NaN/zero conventions of sklearn's chi2, then p-values."""
    scores = np.asarray(scores, dtype=np.float64).copy()
    dof = _dof(marginals)
    if np.count_nonzero(marginals.class_counts) < 2:
        scores[:] = np.nan
    elif marginals.n_levels is None:
        scores[marginals.row_totals == 0] = np.nan
    else:
        scores[dof == 0] = 0.0
    with np.errstate(invalid="ignore"):
        pvalues = special.chdtrc(dof, scores)
    # A table with one level: statistic 0, p-value 1 (as scipy's
    # chi2_contingency).
    pvalues[(dof == 0) & ~np.isnan(scores)] = 1.0
    return Chi2Scores(scores, pvalues)


def _exact_scores(marginals, table):
    """Exact statistics from the summed ``(n_classes, n_rows)`` table."""
    counts = marginals.class_counts
    keep = counts > 0
    n_total = counts.sum()
    if keep.sum() < 2:
        return _finalize_scores(np.full(_n_features(marginals), np.nan), marginals)
    obs = np.ascontiguousarray(table[keep])
    prob = counts[keep] / n_total
    if marginals.n_levels is None:
        # sklearn's arithmetic, operation for operation (class-by-feature).
        expected = np.dot(prob.reshape(-1, 1), marginals.row_totals.reshape(1, -1))
        chisq = obs
        chisq -= expected
        chisq **= 2
        with np.errstate(invalid="ignore", divide="ignore"):
            chisq /= expected
        scores = chisq.sum(axis=0)
    else:
        expected = prob[:, None] * marginals.row_totals[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            cells = np.where(expected > 0, (obs - expected) ** 2 / expected, 0.0)
        offsets = _offsets(marginals.n_levels.shape[0], marginals.n_levels)
        scores = np.add.reduceat(cells.sum(axis=0), offsets[:-1])
    return _finalize_scores(scores, marginals)
