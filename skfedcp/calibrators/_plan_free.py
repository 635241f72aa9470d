"""Strategies whose client message does not depend on the public plan."""

from __future__ import annotations

from typing import Any

from numpy.typing import ArrayLike

from .._typing import SecureRandomStateLike
from ..utils._docstrings import fill_doc
from ._base import BaseCalibrator


@fill_doc
class _PlanFreeCalibrator(BaseCalibrator):
    """A strategy whose client message does not depend on the public plan.

    A client computes what it sends from its own scores (and ``alpha``)
    without the other clients' sizes (central, DP central, Avg), so
    ``n_per_client`` is optional; an invalid message is dropped and the plan
    recomputed for the others (the default ``_exclude``).
    """

    def client_step(
        self,
        scores: ArrayLike,
        *,
        alpha: float,
        n_per_client: ArrayLike | None = None,
        random_state: SecureRandomStateLike = None,
    ) -> dict[str, Any]:
        """Compute the message this client sends (see the class's **Message**).

        The client checks the strategy's parameters, its scores and
        ``alpha``, then computes its message from its own scores only.

        Parameters
        ----------
        %(client_scores)s
        %(alpha)s
        n_per_client : array-like of int, default=None
            Unused: the message does not depend on the other clients' sizes.
        random_state : int, Generator, RandomState, SeedSequence, "secure" \
                or None, default=None
            Unused: the client's step is deterministic.

        Returns
        -------
        message : dict
            Plain numbers or arrays.
        """
        scores, alpha, _ = self._check_client_input(scores, alpha, None)
        return self._client_message(scores, alpha, None, random_state)
