"""Central split conformal prediction: the reference and the test oracle."""

from __future__ import annotations

from numbers import Real
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..utils._docstrings import fill_doc
from ..utils._quantile import conformal_quantile, conformal_rank
from ..utils._sklearn_compat import Interval
from ._base import CoverageBounds
from ._messages import check_client_sizes, client_share_problems
from ._plan_free import _PlanFreeCalibrator

__all__ = ["CentralCalibrator"]


@fill_doc
class CentralCalibrator(_PlanFreeCalibrator):
    """Split conformal prediction on the pooled scores of all clients.

    Every client sends its raw scores; the server pools the ``N`` scores and
    returns the ``ceil((N + 1)(1 - alpha))``-th smallest. It is the reference
    every federated strategy is compared with, and leaks every score.

    **Message** (one per client): ``{"n": n_j, "scores": array of n_j floats}``.
    The server checks that each client sends exactly its announced number of
    finite scores.

    Parameters
    ----------
    max_client_share : float in (0, 1] or None, default=None
        Public cap on one client's share of the pooled rows: a client
        announcing more than ``max_client_share * N`` rows (``N`` the pooled
        total, its own rows included) sends an invalid message (named, or
        excluded with ``fit_from_messages(on_invalid="exclude")``). With the
        cap ``s``, ``c`` dishonest clients hold at most ``c * s * N`` of the
        pooled scores, so they move the threshold by at most that many ranks
        (see the threat model in the user guide). None: no cap (one client
        sending ``10**5`` zero scores sets the threshold). No default cap fits
        every honest federation (one client holds all the rows of a
        single-client fit): choose it from the federation's public sizes,
        e.g. ``2 / m`` for ``m`` clients of similar size.

    Attributes
    ----------
    threshold_ : float
        The conformal quantile; ``+inf`` when ``N < 1/alpha - 1``.
    messages_ : dict of ndarray
        ``client``, ``n`` and ``scores`` (an object array holding each client's
        raw scores: what this strategy reveals).
    %(fitted_clients)s
    calibration_info_ : dict
        ``rank`` used and the ``coverage`` ``rank / (N + 1)``.

    Notes
    -----
    If the ``N`` calibration scores and the test score are exchangeable,
    ``P(score <= threshold_) >= ceil((N+1)(1-alpha)) / (N+1) >= 1 - alpha``,
    with equality for continuous scores [1]_.

    References
    ----------
    .. [1] V. Vovk, A. Gammerman, G. Shafer. Algorithmic Learning in a Random
       World. Springer, 2005.

    Examples
    --------
    >>> import numpy as np
    >>> cal = CentralCalibrator().fit(np.arange(1.0, 20.0), alpha=0.1)
    >>> cal.threshold_
    18.0
    >>> cal.calibration_info_["coverage"]
    0.9
    """

    _message_fields = {"n": "size", "scores": "scores"}
    _parameter_constraints = {
        "max_client_share": [Interval(Real, 0, 1, closed="right"), None],
    }

    def __init__(self, *, max_client_share: float | None = None) -> None:
        self.max_client_share = max_client_share

    def plan(self, n_per_client: ArrayLike, alpha: float) -> dict[str, Any]:
        """Return the pooled rank and its exact coverage for continuous scores."""
        n_total = int(check_client_sizes(n_per_client).sum())
        rank = conformal_rank(n_total, alpha)
        feasible = rank <= n_total
        return {
            "feasible": feasible,
            "rank": rank,
            "coverage": rank / (n_total + 1) if feasible else 1.0,
        }

    def _client_message(self, scores, alpha, n_per_client, random_state):
        """Send this client's raw scores (the strategy has no privacy)."""
        return {"n": scores.shape[0], "scores": scores}

    def _check_messages(self, stacked, *, sizes, plan, alpha, valid):
        return client_share_problems(sizes, self.max_client_share, valid=valid)

    def _aggregate(self, received, *, alpha, random_state):
        """Pool the scores and return their conformal quantile."""
        if received.pooled is not None:
            # In-process: every client's rows, already in one (caller's,
            # never written) array; the order does not matter to a quantile.
            return conformal_quantile(received.pooled["scores"], alpha, warn=False)
        parts = received.stacked["scores"]
        # Two or more clients: _pooled concatenates into a fresh array, which
        # is partitioned in place (one copy of the scores, not two).
        fresh = parts.dtype == object and len(parts) >= 2
        return conformal_quantile(
            _pooled(received.stacked), alpha, warn=False, overwrite_input=fresh
        )

    def _simulated_pool(self, scores):
        return {"scores": scores}

    def _simulate_clients(self, partition, scores, *, alpha, rngs, n_jobs=None):
        return {"n": partition.sizes, "scores": _split_scores(partition, scores)}

    def coverage_bounds(self, n_per_client: ArrayLike, alpha: float) -> CoverageBounds:
        """Return ``(rank/(N+1), rank/(N+1))``; ``(1, 1)`` if infeasible."""
        coverage = self.plan(n_per_client, alpha)["coverage"]
        return CoverageBounds(coverage, coverage)


def _split_scores(partition, scores):
    """Each client's scores (views of ``scores``), in an object array."""
    groups = np.empty(partition.n_clients, dtype=object)
    groups[:] = partition.split(scores)
    return groups


def _pooled(stacked):
    """All clients' score arrays, concatenated."""
    if stacked["scores"].dtype != object:  # equal sizes, stacked (n_clients, size)
        return np.asarray(stacked["scores"], dtype=np.float64).ravel()
    parts = list(stacked["scores"])
    if not parts:
        return np.empty(0)
    if len(parts) == 1:  # one client: its array as is (never written)
        return np.asarray(parts[0], dtype=np.float64).ravel()
    return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])
