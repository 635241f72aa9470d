"""FedCP-Avg: the mean of local conformal quantiles (a baseline, no guarantee)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from ..utils._docstrings import fill_doc
from ..utils._quantile import conformal_rank
from ..utils._sklearn_compat import StrOptions
from ._messages import Problem, check_client_sizes
from ._plan_free import _PlanFreeCalibrator
from ._qq._order_statistics import local_order_statistics

__all__ = ["AveragingCalibrator"]


@fill_doc
class AveragingCalibrator(_PlanFreeCalibrator):
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
    %(fitted_clients)s
    calibration_info_ : dict
        ``feasible`` is False when some client would send ``+inf``.

    See Also
    --------
    QuantileOfQuantilesCalibrator : the one-shot strategy with exact coverage.

    Notes
    -----
    **Not robust to dishonest clients.** The server checks that each value
    is a number (no NaN, ``+inf`` only where the client's rank exceeds its
    size), but one client can still move the mean anywhere by sending a
    huge finite value: with ``c`` dishonest clients the threshold is
    unbounded. Use ``"qq"`` when clients may be dishonest.

    %(references_humbert)s

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

    _federated = True
    _message_fields = {"n": "size", "quantile": "value"}
    _simulation_checks_finite = True

    def __init__(
        self,
        *,
        weights: Literal["uniform", "size"] = "uniform",
        local_quantile: Literal["rank", "clip"] = "rank",
    ) -> None:
        self.weights = weights
        self.local_quantile = local_quantile

    def _rank(self, n, alpha):
        rank = conformal_rank(n, alpha)
        return min(rank, n) if self.local_quantile == "clip" else rank

    def _ranks(self, sizes, alpha):
        """Each client's local rank (computed once per distinct size)."""
        distinct, inverse = np.unique(np.asarray(sizes), return_inverse=True)
        ranks = np.array([self._rank(int(n), alpha) for n in distinct], dtype=int)
        return ranks[inverse.reshape(-1)]

    def plan(self, n_per_client: ArrayLike, alpha: float) -> dict[str, Any]:
        """Return each client's local rank; infeasible if one exceeds its size."""
        sizes = check_client_sizes(n_per_client)
        ranks = self._ranks(sizes, alpha)
        return {"feasible": bool(np.all(ranks <= sizes)), "local_ranks": ranks}

    def _client_message(self, scores, alpha, n_per_client, random_state):
        """Send ``(n_j, local conformal quantile)``."""
        n = scores.shape[0]
        (value,) = local_order_statistics([scores], [self._rank(n, alpha)])
        return {"n": n, "quantile": float(value)}

    def _check_messages(self, stacked, *, sizes, plan, alpha, valid):
        # A client sends +inf exactly when its rank exceeds its size.
        ranks = plan["local_ranks"]
        values = stacked["quantile"]
        problems = []
        for j in np.flatnonzero(valid & (np.isposinf(values) != (ranks > sizes))):
            if sizes[j] == 0:
                continue  # clients without rows are ignored
            problems.append(
                Problem(
                    int(j),
                    "quantile",
                    f"is {float(values[j])!r} but the client's rank {ranks[j]} "
                    + ("exceeds" if ranks[j] > sizes[j] else "is within")
                    + f" its {sizes[j]} rows: it must send "
                    + ("+inf" if ranks[j] > sizes[j] else "a finite number"),
                )
            )
        return problems

    def _aggregate(self, received, *, alpha, random_state):
        """Return the (weighted) mean of the local quantiles."""
        nonempty = received.sizes > 0  # clients without rows do not count
        if not nonempty.any():
            raise ValueError("messages: no client holds any calibration row.")
        values = received.stacked["quantile"][nonempty]
        if np.isposinf(values).any():
            return np.inf
        weights = received.sizes[nonempty] if self.weights == "size" else None
        # Finite values can still overflow in a plain sum (two clients at
        # 1e308): average the values scaled by their largest magnitude.
        scale = float(np.max(np.abs(values)))
        if scale == 0.0:
            return 0.0
        return float(scale * np.average(values / scale, weights=weights))

    def _simulate_clients(
        self, partition, scores, *, alpha, rngs, n_jobs=None, check_finite=False
    ):
        ranks = self._ranks(partition.sizes, alpha)
        values = local_order_statistics(
            partition, ranks, scores=scores, check_finite=check_finite
        )
        return {"n": partition.sizes, "quantile": values}
