"""FedCP-Avg: the mean of local conformal quantiles (a baseline, no guarantee)."""

import numpy as np

from ..utils._quantile import conformal_rank
from ..utils._sklearn_compat import StrOptions
from ._base import BaseCalibrator, stack_messages
from ._order_statistics import local_order_statistics

__all__ = ["AveragingCalibrator"]


class AveragingCalibrator(BaseCalibrator):
    """Average of the clients' local split-conformal quantiles (FedCP-Avg).

    Each client sends its local conformal quantile, the
    ``ceil((n_j + 1)(1 - alpha))``-th smallest of its scores; the server
    returns their (weighted) mean. This is the baseline of Lu &
    Kalpathy-Cramer (2021) used in [1]_: **it has no coverage guarantee**. It
    over-covers when clients are small and is not robust to outliers.

    **Message** (one per client): ``{"n": n_j, "quantile": float}``.

    Parameters
    ----------
    weights : {"uniform", "size"}, default="uniform"
        Unweighted mean (the paper) or weights ``n_j / N``.
    local_quantile : {"rank", "clip"}, default="rank"
        ``"rank"``: a client whose rank exceeds ``n_j`` sends ``+inf`` (and
        the mean is ``+inf``). ``"clip"``: use rank ``min(rank, n_j)``.

    Attributes
    ----------
    threshold_ : float
        Mean of the local quantiles.
    messages_ : dict of ndarray
        ``client``, ``n`` and ``quantile`` of each client.
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels.
    n_clients_ : int
        Number of clients.
    n_per_client_ : ndarray of shape (n_clients,)
        Calibration size of each client.
    calibration_info_ : dict
        ``feasible`` is False when some client would send ``+inf``.

    See Also
    --------
    QuantileOfQuantilesCalibrator : the one-shot strategy with exact coverage.

    References
    ----------
    .. [1] P. Humbert, B. Le Bars, A. Bellet, S. Arlot. One-Shot Federated
       Conformal Prediction. ICML 2023.

    Examples
    --------
    >>> import numpy as np
    >>> scores = np.arange(1.0, 21.0)
    >>> client_ids = np.repeat([0, 1], 10)
    >>> AveragingCalibrator().fit(scores, client_ids, alpha=0.1).threshold_
    15.0
    """

    _parameter_constraints = {
        "weights": [StrOptions({"uniform", "size"})],
        "local_quantile": [StrOptions({"rank", "clip"})],
    }

    def __init__(self, *, weights="uniform", local_quantile="rank"):
        self.weights = weights
        self.local_quantile = local_quantile

    def _rank(self, n, alpha):
        rank = conformal_rank(n, alpha)
        return min(rank, n) if self.local_quantile == "clip" else rank

    def plan(self, n_per_client, alpha):
        """Return each client's local rank; infeasible if one exceeds its size."""
        sizes = np.asarray(n_per_client)
        ranks = np.array([self._rank(int(n), alpha) for n in sizes])
        return {"feasible": bool(np.all(ranks <= sizes)), "local_ranks": ranks}

    def client_step(self, scores, *, alpha, n_per_client=None, random_state=None):
        """Send ``(n_j, local conformal quantile)``."""
        scores = np.asarray(scores, dtype=np.float64)
        n = scores.shape[0]
        (value,) = local_order_statistics([scores], [self._rank(n, alpha)])
        return {"n": n, "quantile": float(value)}

    def server_step(self, messages, *, alpha, n_per_client=None, random_state=None):
        """Return the (weighted) mean of the local quantiles."""
        stacked = stack_messages(messages)
        nonempty = stacked["n"] > 0  # clients without rows do not count
        if not nonempty.any():
            raise ValueError("messages: no client holds any calibration row.")
        values = stacked["quantile"][nonempty].astype(np.float64)
        if np.isposinf(values).any():
            return np.inf
        if self.weights == "size":
            return float(np.average(values, weights=stacked["n"][nonempty]))
        return float(np.mean(values))

    def _simulate_clients(self, partition, scores, *, alpha, rngs):
        ranks = [self._rank(int(n), alpha) for n in partition.sizes]
        values = local_order_statistics(partition, ranks, scores=scores)
        return {"n": partition.sizes, "quantile": values}
