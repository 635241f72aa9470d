"""Per-client order statistics, vectorised when client sizes allow it."""

import numpy as np

from ..federated import ClientPartition

__all__ = ["local_order_statistics"]


def local_order_statistics(groups, ranks, *, scores=None):
    """Return the ``ranks[j]``-th smallest value of each client (``+inf`` past n_j).

    Parameters
    ----------
    groups : ClientPartition or list of ndarray
        The clients' scores: a partition (then ``scores`` holds all rows) or
        one array per client.
    ranks : sequence of int
        1-based rank for each client.
    scores : ndarray of shape (n_samples,), optional
        All rows' scores, required with a partition.

    Returns
    -------
    values : ndarray of shape (n_clients,)
    """
    ranks = np.asarray(ranks, dtype=np.intp)
    # Shuffled rows are gathered into a fresh array by the partition: that
    # copy may be partitioned in place (the caller's scores never are).
    in_place = False
    if isinstance(groups, ClientPartition):
        in_place = not groups.is_grouped
        matrix = groups.as_matrix(scores)
        if (
            matrix is not None
            and np.all(ranks == ranks[0])
            and ranks[0] <= matrix.shape[1]
        ):
            # Equal sizes and ranks: one partition along the rows.
            r = ranks[0] - 1
            if in_place:
                matrix.partition(r, axis=1)
            else:
                matrix = np.partition(matrix, r, axis=1)
            return matrix[:, r].astype(np.float64)
        groups = groups.split(scores)
    values = np.full(len(groups), np.inf)
    for j, (g, r) in enumerate(zip(groups, ranks, strict=True)):
        if r <= g.shape[0]:
            if in_place:
                g.partition(r - 1)
            else:
                g = np.partition(g, r - 1)
            values[j] = g[r - 1]
    return values
