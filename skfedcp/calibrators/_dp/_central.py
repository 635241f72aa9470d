"""Central DP split conformal (Angelopoulos et al.): calibrator and public plan."""

from __future__ import annotations

import math
from functools import lru_cache
from numbers import Real
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from ...privacy import (
    private_conformal_gamma,
    private_conformal_level,
    private_conformal_n_bins,
    private_quantile,
    private_quantile_probabilities,
)
from ...privacy._tight import _tight_central
from ...utils._docstrings import fill_doc
from ...utils._sklearn_compat import Interval
from ...utils._validation import check_alpha
from .._base import CoverageBounds
from .._central import _pooled, _split_scores
from .._messages import Problem, client_share_problems
from .._plan_free import _PlanFreeCalibrator
from ._common import (
    _PRIVACY_CONSTRAINTS,
    _check_bounds,
    _check_epsilon_range,
    _check_rule,
    _DPMixin,
    _plan_sizes,
)

__all__ = ["PrivateCentralCalibrator"]


@fill_doc
class PrivateCentralCalibrator(_DPMixin, _PlanFreeCalibrator):
    """Differentially private split conformal calibration by a trusted curator.

    The curator pools the ``N`` calibration scores of all clients, rounds
    them up to ``n_bins`` equal bins on the public ``score_bounds`` and
    releases one bin edge with the exponential mechanism at the corrected
    level ``q~`` of Angelopoulos et al. [1]_ (eq. 3): the released threshold
    is ``epsilon``-DP and still covers with probability ``>= 1 - alpha``.

    **Message** (one per client, to the trusted curator): ``{"n": n_j,
    "scores": the client's scores clipped to score_bounds}``. Only the
    threshold is released: ``messages_`` keeps the public sizes only.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter of the released threshold, ``> 0``.
    score_bounds : tuple of two floats, default=None
        Public range ``(low, high)`` of the scores, fixed before seeing the
        data. Required (wrappers fill in natural bounds, e.g. ``(0, 1)`` for
        probability scores). Scores outside are clipped, with a
        :class:`~skfedcp.exceptions.ClippedScoresWarning`.
    n_bins : int or "auto", default="auto"
        Number of equal bins (candidate thresholds), ``>= 2``. ``"auto"``:
        :func:`~skfedcp.privacy.private_conformal_n_bins` (deterministic
        variant of Algorithm 5 of [1]_, computed from ``N``, ``alpha`` and
        ``epsilon`` only).
    gamma : float or "auto", default="auto"
        Share of ``alpha`` spent on the mechanism's failure, in (0, 1).
        ``"auto"``: the minimiser of ``q~``
        (:func:`~skfedcp.privacy.private_conformal_gamma`).
    rule : {"tight", "paper"}, default="tight"
        ``"tight"`` (skfedcp extension): the smallest level whose exact
        worst-case tail bound
        (:func:`~skfedcp.privacy.private_quantile_rank_tail`) guarantees
        ``1 - alpha``, for any score law; same mechanism and privacy as the
        paper, lower levels (e.g. 0.910 instead of 0.925 at ``N = 1000``,
        ``epsilon = 1``); ``gamma`` is unused. ``"paper"``: the level ``q~``
        of eq. (3) of [1]_, for reproductions. See the user guide, "Tight
        corrections" and "Choosing the rule".
    max_client_share : float in (0, 1] or None, default=None
        Public cap on one client's share of the pooled rows, as in
        :class:`~skfedcp.calibrators.CentralCalibrator`: a client announcing
        more than ``max_client_share * N`` rows is invalid, so ``c``
        dishonest clients hold at most ``c * s * N`` of the pooled scores.
        None: no cap.

    Attributes
    ----------
    threshold_ : float
        The released bin edge; ``+inf`` for the top bin or when ``N`` is too
        small for ``epsilon`` (trivial sets).
    epsilon_spent_ : float
        Privacy loss of the pooled calibration data: ``epsilon``, or 0 when
        the trivial threshold was returned without reading the scores.
    messages_ : dict of ndarray
        ``client`` and ``n``: the public part of what the curator received.
    %(fitted_clients)s
    calibration_info_ : dict
        The public plan: ``level`` (``q~``), ``n_bins``, ``gamma``,
        ``epsilon``, ``score_bounds``, ``feasible`` (``q~ < 1``) and, when not
        feasible, ``min_n`` and ``reason``.

    See Also
    --------
    PrivateQuantileOfQuantilesCalibrator : no trusted curator; each client
        privatises its own message.
    skfedcp.privacy.private_quantile : the mechanism.

    Notes
    -----
    **Privacy.** Central ``epsilon``-DP with respect to one calibration
    record (replace-one neighbours, ``N`` public): the released threshold,
    and every prediction set computed from it, is ``epsilon``-DP. The curator
    sees the raw scores and must be trusted. The client partition is ignored;
    if a whole client is the unit of privacy and holds ``k`` records, the
    guarantee is ``k * epsilon`` (group privacy). Each fit on the same data
    spends ``epsilon`` again; choosing ``alpha`` or ``epsilon`` by validation
    on private data spends budget too.

    **Coverage.** If the ``N`` calibration scores and the test score are
    i.i.d. and ``alpha <= 0.5``, ``P(score <= threshold_) >= 1 - alpha``
    (Theorem 2 of [1]_), over the data and the mechanism, for any score law,
    ``n_bins`` and ``gamma``. The released value is an edge ``e_b`` and the
    set uses the raw score: ``score <= e_b`` iff the rounded-up score is.
    When ``q~ >= 1`` (too little data for ``epsilon``) the threshold is
    ``+inf`` without reading the scores: 0-DP, coverage 1. Releasing the top
    bin also gives ``+inf``, which keeps the guarantee for scores above
    ``score_bounds``.

    References
    ----------
    .. [1] A. N. Angelopoulos, S. Bates, T. Zrnic, M. I. Jordan. Private
       Prediction Sets. Harvard Data Science Review, 2022.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(size=5000)
    >>> cal = PrivateCentralCalibrator(epsilon=8.0, score_bounds=(0, 1))
    >>> cal = cal.fit(scores, alpha=0.1, random_state=0)
    >>> cal.calibration_info_["n_bins"], round(cal.calibration_info_["level"], 4)
    (790, 0.9006)
    >>> cal.epsilon_spent_, sorted(cal.messages_)
    (8.0, ['client', 'n'])
    """

    _parameter_constraints = {
        **_PRIVACY_CONSTRAINTS,
        "max_client_share": [Interval(Real, 0, 1, closed="right"), None],
    }
    _pooled_release = True
    _message_fields = {"n": "size", "scores": "scores"}

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        score_bounds: tuple[float, float] | None = None,
        n_bins: int | Literal["auto"] = "auto",
        gamma: float | Literal["auto"] = "auto",
        rule: Literal["paper", "tight"] = "tight",
        max_client_share: float | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.score_bounds = score_bounds
        self.n_bins = n_bins
        self.gamma = gamma
        self.rule = rule
        self.max_client_share = max_client_share

    def plan(self, n_per_client: ArrayLike, alpha: float) -> dict[str, Any]:
        """Return the public plan: corrected level ``q~``, bins and ``gamma``.

        Parameters
        ----------
        n_per_client : array-like of int
            Calibration size of each client (only the total ``N`` matters).
        alpha : float
            Miscoverage level in (0, 0.5].

        Returns
        -------
        plan : dict
            See ``calibration_info_``.
        """
        epsilon = _check_epsilon_range(self.epsilon)
        bounds = _check_bounds(self.score_bounds, type(self).__name__)
        n_total = int(_plan_sizes(n_per_client).sum())
        rule = _check_rule(getattr(self, "rule", "paper"))
        plan = dict(
            _central_plan(
                n_total, check_alpha(alpha), epsilon, self.n_bins, self.gamma, rule
            )
        )
        plan["score_bounds"] = bounds
        return plan

    def _client_message(self, scores, alpha, n_per_client, random_state):
        """Send this client's scores, clipped to ``score_bounds``, to the curator."""
        scores = self._clip_to_bounds(scores)
        return {"n": scores.shape[0], "scores": scores}

    def _check_messages(self, stacked, *, sizes, plan, alpha, valid):
        bounds = self._bound_problems(stacked, plan, valid)
        kept = valid.copy()
        kept[[p.index for p in bounds]] = False  # not counted in the total
        return client_share_problems(sizes, self.max_client_share, valid=kept) + bounds

    def _check_pooled(self, stacked, pooled, *, sizes, plan, alpha):
        """The trusted path: the bounds checked on the pooled rows in one pass
        (they were clipped by each client step, so this only guards against a
        caller's mistake); per client, naming it, only if that pass fails."""
        low, high = plan["score_bounds"]
        scores = pooled["scores"]
        if scores.size == 0 or (scores.min() >= low and scores.max() <= high):
            return client_share_problems(sizes, self.max_client_share)
        return super()._check_pooled(
            stacked, pooled, sizes=sizes, plan=plan, alpha=alpha
        )

    @staticmethod
    def _bound_problems(stacked, plan, valid):
        low, high = plan["score_bounds"]
        column = stacked["scores"][valid]
        if column.dtype != object:  # equal sizes, stacked (n_clients, size)
            if column.size == 0 or (column.min() >= low and column.max() <= high):
                return []  # one vectorised pass in the common case
        # Unequal sizes: per client (no copy of the N pooled scores).
        problems = []
        for j in np.flatnonzero(valid):
            scores = stacked["scores"][j]
            if scores.size and (scores.min() < low or scores.max() > high):
                problems.append(
                    Problem(
                        int(j),
                        "scores",
                        f"must lie within score_bounds=({low:g}, {high:g}) (each "
                        "client clips its scores before sending them)",
                    )
                )
        return problems

    def _aggregate(self, received, *, alpha, random_state):
        """Pool the scores and release a private bin edge (``+inf``: trivial)."""
        plan = received.plan
        if not plan["feasible"]:  # q~ >= 1: the scores are not read
            return math.inf
        return private_quantile(
            _pooled(received.stacked),
            random_state=random_state,
            **self._mechanism_args(plan, plan["level"]),
        )

    def _public_messages(self, received):
        # The curator releases only the threshold: keep the public sizes.
        return {"n": received.stacked["n"]}

    def _release_law(self, clipped, partition, plan, log):
        args = self._mechanism_args(plan, plan["level"])
        return private_quantile_probabilities(clipped, log=log, **args)

    def _simulate_clients(self, partition, scores, *, alpha, rngs, n_jobs=None):
        scores = self._clip_to_bounds(scores)
        groups = partition.as_matrix(scores)  # equal sizes: no per-client loop
        if groups is None:
            groups = _split_scores(partition, scores)
        return {"n": partition.sizes, "scores": groups}

    def coverage_bounds(self, n_per_client: ArrayLike, alpha: float) -> CoverageBounds:
        """Return ``(1 - alpha, nan)``, or ``(1, 1)`` when the set is trivial."""
        if not self.plan(n_per_client, alpha)["feasible"]:
            return CoverageBounds(1.0, 1.0)
        return CoverageBounds(1.0 - alpha, np.nan)


@lru_cache(maxsize=256)
def _central_plan(n_total, alpha, epsilon, n_bins, gamma, rule="paper"):
    if isinstance(n_bins, str):  # "auto": from (N, alpha, epsilon) only
        n_bins = private_conformal_n_bins(n_total, alpha, epsilon=epsilon)
    if rule == "tight":
        return _central_tight_plan(n_total, alpha, epsilon, int(n_bins))
    gamma_value = (
        private_conformal_gamma(n_total, alpha, epsilon=epsilon)
        if isinstance(gamma, str)
        else float(gamma)
    )
    level = private_conformal_level(
        n_total, alpha, epsilon=epsilon, n_bins=n_bins, gamma=gamma_value
    )
    plan = {
        "feasible": level < 1.0,
        "level": level,
        "n_bins": int(n_bins),
        "gamma": gamma_value,
        "epsilon": epsilon,
        "n_total": n_total,
        "rule": "paper",
    }
    if not plan["feasible"]:
        _too_few(
            plan,
            alpha,
            f"corrected level {level:.4f} >= 1",
            _central_min_n(alpha, epsilon, n_bins, gamma),
        )
    return tuple(plan.items())


def _central_tight_plan(n_total, alpha, epsilon, n_bins):
    """Plan of rule="tight": the smallest level whose exact-tail bound covers."""
    found = _tight_central(n_total, alpha, epsilon, n_bins)
    plan = {
        "feasible": found is not None,
        "level": found[0] if found else math.inf,
        "n_bins": n_bins,
        "gamma": None,
        "epsilon": epsilon,
        "n_total": n_total,
        "rule": "tight",
        "coverage_lower": found[1] if found else 1.0,
    }
    if found is None:

        def feasible(n):
            return _tight_central(n, alpha, epsilon, n_bins) is not None

        # The paper's level also passes the exact bound, so the paper's N
        # bounds the tight one. Past _TIGHT_MIN_N_SEARCH rows each search step
        # would cost O(min(N, log(1e17) / epsilon)) (minutes at tiny epsilon):
        # the paper's N is reported as the bound instead.
        bound = _central_min_n(alpha, epsilon, n_bins, "auto")
        why = "no level guarantees 1 - alpha"
        if bound <= _TIGHT_MIN_N_SEARCH:
            min_n = _smallest_feasible(feasible, cap=2 * bound)
        else:
            min_n = bound
            why += "; the N below is the paper's rule's, enough for this one"
        _too_few(plan, alpha, why, min_n)
    return tuple(plan.items())


#: Largest N for which an infeasible tight plan searches its exact minimum N.
_TIGHT_MIN_N_SEARCH = 2**20


def _too_few(plan, alpha, why, min_n):
    """Mark an infeasible plan: the smallest feasible ``N``, and why in words."""
    plan["min_n"] = min_n
    plan["reason"] = (
        f"N={plan['n_total']} calibration scores are too few for "
        f"epsilon={plan['epsilon']:g} and alpha={alpha:g} ({why}); N >= {min_n} "
        f"is needed with n_bins={plan['n_bins']}"
    )


def _smallest_feasible(feasible, cap=2**40):
    """Smallest ``n >= 1`` with ``feasible(n)`` (monotone): doubling, bisection."""
    hi = 1
    while not feasible(hi):
        hi *= 2
        if hi > cap:  # pragma: no cover - a fixed setting that never covers
            return math.inf
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


def _central_min_n(alpha, epsilon, n_bins, gamma):
    """Smallest N with ``q~ < 1`` (``q~`` decreases in N at fixed bins)."""

    def feasible(n):
        g = (
            private_conformal_gamma(n, alpha, epsilon=epsilon)
            if gamma == "auto"
            else gamma
        )
        level = private_conformal_level(
            n, alpha, epsilon=epsilon, n_bins=n_bins, gamma=g
        )
        return level < 1.0

    return _smallest_feasible(feasible, cap=2**62)  # gamma fixed high: q~ >= 1
