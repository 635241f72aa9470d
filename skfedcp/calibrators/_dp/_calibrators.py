"""Differentially private calibration: DP split conformal and FedCP²-QQ."""

from __future__ import annotations

import math
import warnings
from collections import Counter
from functools import lru_cache
from numbers import Integral, Real
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special
from scipy.special import gammaln, xlog1py, xlogy

from ..._typing import ClientIds, SecureRandomStateLike
from ...exceptions import ClippedScoresWarning, InfiniteThresholdWarning
from ...privacy import (
    check_privacy_params,
    dp_qq_local_correction,
    private_conformal_gamma,
    private_conformal_level,
    private_conformal_n_bins,
    private_quantile,
    private_quantile_probabilities,
)
from ...privacy._quantile import (
    _rank_law,
    _release_log_probabilities,
    _release_many,
    _tight_central,
)
from ...utils._quantile import conformal_rank
from ...utils._sklearn_compat import Interval, StrOptions
from ...utils._validation import check_alpha, check_scores
from ...utils._warnings import warn_user
from .._base import BaseCalibrator, CoverageBounds
from .._central import _pooled
from .._messages import Problem
from .._qq._calibrator import _EXCLUDED_AS_INF, _exclude_as_inf
from .._qq._coverage import (
    _coverage_unequal_batch,
    _poisbin_pmf_groups,
    qq_coverage,
    qq_coverage_unequal,
)
from .._qq._selection import _FEASIBILITY_TOL, select_qq_ranks

__all__ = [
    "PrivateCentralCalibrator",
    "PrivateQuantileOfQuantilesCalibrator",
    "ThresholdDistribution",
]

#: gamma grid of FedCP²-QQ when ``gamma="auto"`` (the paper leaves it open).
GAMMA_GRID = tuple(round(0.01 * i, 2) for i in range(1, 100))
#: Candidate numbers of bins of FedCP²-QQ when ``n_bins="auto"``: 100 to 1e5,
#: then 10 to 75 only if none of those is feasible (on uniform simulations a
#: coarse grid "wins" when an edge happens to sit on the target quantile).
DPQQ_BINS_GRID = tuple(int(b) for b in np.unique(np.logspace(2, 5, 25).astype(int)))
_DPQQ_SMALL_BINS = tuple(int(b) for b in np.unique(np.logspace(1, 2, 9).astype(int)))
_DPQQ_SMALL_BINS = _DPQQ_SMALL_BINS[:-1]  # 10 .. 74
# Coverages within this tolerance are tied (ties go to the smaller gamma).
_TIE = 1e-10

_PRIVACY_CONSTRAINTS = {
    "epsilon": [Interval(Real, 0, np.inf, closed="neither")],
    "score_bounds": ["array-like", None],
    "n_bins": [Interval(Integral, 2, None, closed="left"), StrOptions({"auto"})],
    "gamma": [Interval(Real, 0, 1, closed="neither"), StrOptions({"auto"})],
    "rule": [StrOptions({"paper", "tight"})],
}


class ThresholdDistribution(NamedTuple):
    """Exact law of a private threshold: ``P(threshold == values[i])``.

    ``values`` are bin edges in increasing order; the last one is ``+inf``
    (the top bin, i.e. the trivial set).
    """

    values: NDArray[np.float64]
    probabilities: NDArray[np.float64]


# --------------------------------------------------------------------------
# Shared checks


def _check_epsilon(epsilon):
    return check_privacy_params(epsilon=epsilon).epsilon


def _check_bounds(score_bounds, owner):
    if score_bounds is None:
        raise ValueError(
            f"{owner} needs score_bounds=(low, high): public bounds of the "
            "conformity scores, fixed without looking at the calibration data "
            "(e.g. (0, 1) for probability scores, (0, B) for a residual clipped "
            "at B). Pass them to the calibrator or to the wrapper."
        )
    if isinstance(score_bounds, np.ndarray):
        score_bounds = score_bounds.tolist()
    return check_privacy_params(
        bounds=score_bounds, names={"bounds": "score_bounds"}
    ).bounds


def _edges(bounds, n_bins):
    # The same construction as private_quantile(bounds=..., n_bins=...).
    return np.linspace(bounds[0], bounds[1], n_bins + 1)


def _clip_scores(scores, bounds):
    """Clip scores into the public bounds, warning with the number clipped."""
    scores = check_scores(scores, allow_inf=True)
    low, high = bounds
    n_below = int(np.count_nonzero(scores < low))
    n_above = int(np.count_nonzero(scores > high))
    if n_below or n_above:
        warn_user(
            f"{n_below + n_above} of {scores.shape[0]} scores lie outside "
            f"score_bounds=({low:g}, {high:g}) and were clipped ({n_below} below, "
            f"{n_above} above). Clipping below is conservative; scores above fall "
            "in the top bin, whose release means an infinite threshold. The count "
            "is a local diagnostic computed from private data: do not release it.",
            ClippedScoresWarning,
        )
    return np.clip(scores, low, high)


def _after_private_fit(calibrator, received):
    """``epsilon_spent_`` and a warning that says why a threshold is +inf."""
    info = received.plan
    calibrator.epsilon_spent_ = info["epsilon"] if info["feasible"] else 0.0
    if np.isposinf(calibrator.threshold_):
        if info["feasible"]:
            reason = (
                "the mechanism released the top bin (scores at or above the upper "
                "score bound, or privacy noise with little data)"
            )
        else:
            reason = info["reason"]
        warn_user(
            f"{type(calibrator).__name__}: the threshold is +inf because {reason}; "
            "every prediction set is trivial (valid, uninformative).",
            InfiniteThresholdWarning,
        )


# --------------------------------------------------------------------------
# DP split conformal (Angelopoulos et al.)


class PrivateCentralCalibrator(BaseCalibrator):
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
    rule : {"paper", "tight"}, default="paper"
        ``"paper"``: the level ``q~`` of eq. (3). ``"tight"`` (skfedcp
        extension): the smallest level whose exact worst-case tail bound
        (:func:`~skfedcp.privacy.private_quantile_rank_tail`) guarantees
        ``1 - alpha``, for any score law; same mechanism and privacy, lower
        levels (e.g. 0.910 instead of 0.925 at ``N = 1000``, ``epsilon =
        1``); ``gamma`` is unused. See the user guide, "Tight corrections".

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
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels.
    n_clients_ : int
        Number of clients.
    n_per_client_ : ndarray of shape (n_clients,)
        Calibration size of each client.
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
    (790, 0.9011)
    >>> cal.epsilon_spent_, sorted(cal.messages_)
    (8.0, ['client', 'n'])
    """

    _parameter_constraints = dict(_PRIVACY_CONSTRAINTS)
    _randomized = True
    _message_fields = {"n": "size", "scores": "scores"}

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        score_bounds: tuple[float, float] | None = None,
        n_bins: int | Literal["auto"] = "auto",
        gamma: float | Literal["auto"] = "auto",
        rule: Literal["paper", "tight"] = "paper",
    ) -> None:
        self.epsilon = epsilon
        self.score_bounds = score_bounds
        self.n_bins = n_bins
        self.gamma = gamma
        self.rule = rule

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
        epsilon = _check_epsilon(self.epsilon)
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

    def _mechanism_args(self, plan):
        return {
            "level": plan["level"],
            "epsilon": plan["epsilon"],
            "edges": _edges(plan["score_bounds"], plan["n_bins"]),
            "top_bin": "inf",
        }

    def client_step(
        self,
        scores: ArrayLike,
        *,
        alpha: float,
        n_per_client: ArrayLike | None = None,
        random_state: SecureRandomStateLike = None,
    ) -> dict[str, Any]:
        """Send this client's scores, clipped to ``score_bounds``, to the curator."""
        scores, _, _ = self._check_client_input(scores, check_alpha(alpha), None)
        bounds = _check_bounds(self.score_bounds, type(self).__name__)
        scores = _clip_scores(scores, bounds)
        return {"n": scores.shape[0], "scores": scores}

    def _check_messages(self, stacked, *, sizes, plan, alpha, valid):
        low, high = plan["score_bounds"]
        column = stacked["scores"][valid]
        if column.dtype != object:  # equal sizes, stacked (n_clients, size)
            pooled = column.ravel()
        else:
            rows = [np.asarray(s).ravel() for s in column]
            pooled = np.concatenate(rows) if rows else np.empty(0)
        if pooled.size == 0 or (pooled.min() >= low and pooled.max() <= high):
            return []  # one vectorised pass in the common case
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
            **self._mechanism_args(plan),
        )

    def _public_messages(self, received):
        # The curator releases only the threshold: keep the public sizes.
        return {"n": received.stacked["n"]}

    def _after_fit(self, received, *, alpha, details=None):
        _after_private_fit(self, received)

    def threshold_probabilities(
        self,
        scores: ArrayLike,
        client_ids: ClientIds = None,
        *,
        alpha: float,
        log: bool = False,
    ) -> ThresholdDistribution:
        """Exact law of the threshold :meth:`fit` would release on ``scores``.

        Parameters
        ----------
        scores : array-like of shape (n_samples,)
            Calibration scores.
        client_ids : array-like of shape (n_samples,), default=None
            Ignored (the curator pools the scores); accepted for symmetry.
        alpha : float
            Miscoverage level in (0, 0.5].
        log : bool, default=False
            Return natural-log probabilities, computed in log space: finite
            where the probabilities underflow to 0, so that privacy ratios
            between neighbouring data sets stay finite.

        Returns
        -------
        law : ThresholdDistribution
            Candidate thresholds (bin edges ``e_1..e_{B-1}``, then ``+inf``)
            and their probabilities (their logs with ``log=True``).

        Examples
        --------
        >>> cal = PrivateCentralCalibrator(epsilon=50.0, score_bounds=(0, 1),
        ...                                n_bins=4)
        >>> law = cal.threshold_probabilities([0.1, 0.3, 0.6, 0.7], alpha=0.5)
        >>> law.values
        array([0.25, 0.5 , 0.75,  inf])
        """
        scores = check_scores(scores, allow_inf=True)
        plan = self.plan([scores.shape[0]], alpha)
        if not plan["feasible"]:
            return ThresholdDistribution(
                np.array([np.inf]), np.array([0.0 if log else 1.0])
            )
        args = self._mechanism_args(plan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ClippedScoresWarning)
            clipped = _clip_scores(scores, plan["score_bounds"])
        values = args["edges"][1:].copy()
        values[-1] = np.inf
        return ThresholdDistribution(
            values, private_quantile_probabilities(clipped, log=log, **args)
        )

    def _check_fit_scores(self, scores):
        return check_scores(scores, allow_inf=True)  # clipped to the bounds

    def _simulate_clients(self, partition, scores, *, alpha, rngs, n_jobs=None):
        scores = _clip_scores(
            scores, _check_bounds(self.score_bounds, type(self).__name__)
        )
        groups = partition.as_matrix(scores)  # equal sizes: no per-client loop
        if groups is None:
            groups = np.empty(partition.n_clients, dtype=object)
            groups[:] = partition.split(scores)
        return {"n": partition.sizes, "scores": groups}

    def fit(
        self,
        scores: ArrayLike,
        client_ids: ClientIds = None,
        *,
        alpha: float,
        random_state: SecureRandomStateLike = None,
        n_jobs: int | None = None,
    ) -> PrivateCentralCalibrator:
        """Simulate the round: clients send scores, the curator releases an edge.

        Parameters
        ----------
        scores : array-like of shape (n_samples,)
            Conformity scores of all calibration rows.
        client_ids : array-like of shape (n_samples,) or None, default=None
            Client label of each row (only the sizes are kept).
        alpha : float
            Miscoverage level in (0, 0.5].
        random_state : int, Generator, RandomState, SeedSequence, "secure" \
                or None, default=None
            Randomness of the mechanism (the curator's stream, spawned from
            one ``SeedSequence``; ``None``: fresh operating-system entropy);
            ``"secure"`` draws from the operating system's secure generator
            (not reproducible, for deployment).
        n_jobs : int, default=None
            Unused (the clients' step is a copy).

        Returns
        -------
        self : PrivateCentralCalibrator
            The fitted calibrator.
        """
        super().fit(
            scores, client_ids, alpha=alpha, random_state=random_state, n_jobs=n_jobs
        )
        return self

    def coverage_bounds(self, n_per_client: ArrayLike, alpha: float) -> CoverageBounds:
        """Return ``(1 - alpha, nan)``, or ``(1, 1)`` when the set is trivial."""
        if not self.plan(n_per_client, alpha)["feasible"]:
            return CoverageBounds(1.0, 1.0)
        return CoverageBounds(1.0 - alpha, np.nan)


def _check_utility(utility, rule):
    if utility not in ("quantile", "rank"):
        raise ValueError(f'utility must be "quantile" or "rank"; got {utility!r}.')
    if utility == "rank" and rule != "tight":
        raise ValueError(
            'utility="rank" needs rule="tight" (the paper\'s corrections are '
            f"derived for its quantile utility only); got rule={rule!r}."
        )
    return utility


def _check_rule(rule):
    if rule not in ("paper", "tight"):
        raise ValueError(f'rule must be "paper" or "tight"; got {rule!r}.')
    return rule


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
        min_n = _central_min_n(alpha, epsilon, n_bins, gamma)
        plan["min_n"] = min_n
        plan["reason"] = (
            f"N={n_total} calibration scores are too few for epsilon={epsilon:g} "
            f"and alpha={alpha:g} (corrected level {level:.4f} >= 1); N >= {min_n} "
            f"is needed with n_bins={n_bins}"
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

        min_n = _smallest_feasible(feasible)
        plan["min_n"] = min_n
        plan["reason"] = (
            f"N={n_total} calibration scores are too few for epsilon={epsilon:g} "
            f"and alpha={alpha:g} (no level guarantees 1 - alpha); N >= {min_n} "
            f"is needed with n_bins={n_bins}"
        )
    return tuple(plan.items())


def _smallest_feasible(feasible):
    hi = 1
    while not feasible(hi):
        hi *= 2
        if hi > 2**40:  # pragma: no cover - a fixed setting that never covers
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

    hi = 1
    while not feasible(hi):
        hi *= 2
        if hi > 2**62:  # pragma: no cover - gamma fixed so high that q~ >= 1
            return math.inf
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


# --------------------------------------------------------------------------
# FedCP²-QQ (Humbert et al.)


class PrivateQuantileOfQuantilesCalibrator(BaseCalibrator):
    """Locally private quantile of quantiles (FedCP²-QQ), one round.

    Each client releases an ``epsilon``-DP quantile of its own scores (the
    binned exponential mechanism of Angelopoulos et al. at a corrected rank
    ``l_gamma + l_cor``); the server returns the ``k_gamma``-th smallest of the
    ``m`` released values (Algorithm 3 and Theorem 4.1 of [1]_). The ranks,
    the correction ``l_cor`` and ``gamma`` depend only on public metadata
    (sizes, ``alpha``, ``epsilon``, bins).

    **Message** (one per client): ``{"n": n_j, "quantile": float}``, a bin
    edge on ``score_bounds`` (``+inf`` for the top bin). This is all the
    server sees, and all ``messages_`` stores.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy parameter of each client's message, ``> 0``.
    score_bounds : tuple of two floats, default=None
        Public range ``(low, high)`` of the scores, fixed before seeing the
        data. Required (wrappers fill in natural bounds, e.g. ``(0, 1)`` for
        probability scores). Scores outside are clipped, with a
        :class:`~skfedcp.exceptions.ClippedScoresWarning`.
    n_bins : int or "auto", default=100
        Number ``B >= 2`` of equal bins (the paper uses 100). ``"auto"``:
        the ``B`` in 25 log-spaced values on [100, 1e5] minimising the
        expected threshold on public uniform scores ``i / (n_j + 1)`` (the
        deterministic rule of
        :func:`~skfedcp.privacy.private_conformal_n_bins`, applied to the
        whole protocol; 10 to 75 bins are tried only when 100 is
        infeasible, since the correction ``l_cor`` grows with ``B``). It
        never reads the data.
    gamma : float or "auto", default="auto"
        Share of ``alpha`` spent on the mechanisms' failure, in (0, 1).
        ``"auto"``: the ``gamma`` in ``{0.01, ..., 0.99}`` minimising the
        coverage ``M(l_gamma + l_cor, k_gamma)`` of the corrected ranks, ties
        to the smaller ``gamma`` (the rule of [1]_; the grid is a skfedcp
        choice).
    rule : {"paper", "tight"}, default="paper"
        ``"paper"``: the corrections of [1]_ above. ``"tight"`` (skfedcp
        extension, equal or unequal client sizes): every client runs the
        mechanism at one common level ``q`` (any real in [1/2, 1]) and the
        server keeps the ``k``-th smallest release; for each ``k``, ``q`` is
        the smallest level whose guaranteed coverage (from the exact
        worst-case tail of the mechanism at every rank) reaches ``1 -
        alpha``, and the ``k`` with the lowest expected coverage on public
        uniform scores is kept. Same mechanism, messages and privacy;
        coverage closer to ``1 - alpha`` (about 0.912 / 0.925 instead of
        0.929 / 0.950 at 5 x 200 scores, ``epsilon = 10 / 5``); ``gamma``
        is unused. See the user guide, "Tight corrections".
    utility : {"quantile", "rank"}, default="quantile"
        Utility of each client's exponential mechanism. ``"quantile"``: the
        paper's ``max(L_b / q, G_b / (1 - q))``, scaled by its sensitivity.
        ``"rank"`` (skfedcp extension, ``rule="tight"`` only): the symmetric
        rank utility ``max(L_b - t + 1, G_b - n + t)`` with target rank ``t =
        q n`` and sensitivity 1, so each message is still ``epsilon``-DP; it
        removes the upward drift of the asymmetric utility (coverage about
        0.908 / 0.911 instead of 0.912 / 0.925 for ``rule="tight"`` at 5 x
        200 uniform scores, ``epsilon = 10 / 5``). The tight plan's proof
        covers it with its own tail bound (user guide, "Tight corrections").

    Attributes
    ----------
    threshold_ : float
        The ``k_gamma``-th smallest released value; ``+inf`` when no
        ``gamma`` is feasible (trivial sets, no data read).
    epsilon_spent_ : float
        Privacy loss of each client's calibration data: ``epsilon``, or 0
        when the clients sent nothing data-dependent.
    messages_ : dict of ndarray
        ``client``, ``n`` and ``quantile`` of each client: all the server saw.
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels.
    n_clients_ : int
        Number of clients.
    n_per_client_ : ndarray of shape (n_clients,)
        Calibration size of each client.
    calibration_info_ : dict
        The public plan: ``gamma``, ``local_ranks`` (``l_gamma`` per
        client), ``k``, ``correction`` (``l_cor``), ``levels`` (each client's
        mechanism level), ``score`` (``M(l_gamma + l_cor, k_gamma)``),
        ``coverage_lower`` (``(1 - gamma alpha) M(l_gamma, k_gamma)``),
        ``n_bins``, ``epsilon``, ``score_bounds``, ``feasible`` and, when not
        feasible, ``reason``.

    See Also
    --------
    QuantileOfQuantilesCalibrator : the non-private protocol.
    PrivateCentralCalibrator : central DP with a trusted curator.

    Notes
    -----
    **Privacy.** Each client's message is ``epsilon``-DP with respect to its
    own calibration set (replace-one neighbours; sizes, bins, ``alpha`` and
    ``epsilon`` public; with either ``utility``), i.e. ``epsilon``-LDP per
    client data set; the server
    output is post-processing. ``score_bounds`` must be public: the paper's
    experiments use the largest observed score, which is not private.

    **Coverage.** If, given the model, all calibration scores and the test
    score are i.i.d., then ``P(score <= threshold_) >= (1 - gamma alpha)
    M(l_gamma, k_gamma) >= 1 - alpha`` (Theorem 4.1 of [1]_): with
    probability ``>= 1 - gamma alpha`` every client releases a value above
    its ``l_gamma``-th score, and the non-private pair ``(l_gamma, k_gamma)``
    targets ``(1 - alpha) / (1 - gamma alpha)``. Scores are rounded up to bin
    edges; releasing the top bin gives ``+inf``, so scores above
    ``score_bounds`` do not break the guarantee. A ``gamma`` with
    ``l_gamma + l_cor > n`` is infeasible; with unequal sizes (experimental,
    fixed ranks ``ceil(tau (n_j + 1))``) a client whose corrected rank
    exceeds its size sends ``+inf`` without reading its data, which keeps the
    bound. When no ``gamma`` is feasible the threshold is ``+inf``.

    References
    ----------
    .. [1] P. Humbert, B. Le Bars, A. Bellet, S. Arlot. One-Shot Federated
       Conformal Prediction. ICML 2023.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.uniform(size=5 * 200)
    >>> client_ids = np.repeat(np.arange(5), 200)
    >>> cal = PrivateQuantileOfQuantilesCalibrator(epsilon=10.0, score_bounds=(0, 1))
    >>> cal = cal.fit(scores, client_ids, alpha=0.1, random_state=0)
    >>> info = cal.calibration_info_
    >>> info["gamma"], int(info["local_ranks"][0]), info["k"], info["correction"]
    (0.02, 179, 4, 3)
    >>> round(info["score"], 5)
    0.91622
    >>> sorted(cal.messages_), cal.epsilon_spent_
    (['client', 'n', 'quantile'], 10.0)
    """

    _parameter_constraints = {
        **_PRIVACY_CONSTRAINTS,
        "utility": [StrOptions({"quantile", "rank"})],
    }
    _randomized = True
    _message_fields = {"n": "size", "quantile": "value"}
    _federated = True

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        score_bounds: tuple[float, float] | None = None,
        n_bins: int | Literal["auto"] = 100,
        gamma: float | Literal["auto"] = "auto",
        rule: Literal["paper", "tight"] = "paper",
        utility: Literal["quantile", "rank"] = "quantile",
    ) -> None:
        self.epsilon = epsilon
        self.score_bounds = score_bounds
        self.n_bins = n_bins
        self.gamma = gamma
        self.rule = rule
        self.utility = utility

    def plan(self, n_per_client: ArrayLike, alpha: float) -> dict[str, Any]:
        """Return the public plan: ``gamma``, ranks, correction and levels.

        Parameters
        ----------
        n_per_client : array-like of int
            Calibration size of each client.
        alpha : float
            Miscoverage level in (0, 1).

        Returns
        -------
        plan : dict
            See ``calibration_info_``.
        """
        epsilon = _check_epsilon(self.epsilon)
        bounds = _check_bounds(self.score_bounds, type(self).__name__)
        alpha = check_alpha(alpha)
        rule = _check_rule(getattr(self, "rule", "paper"))
        utility = _check_utility(getattr(self, "utility", "quantile"), rule)
        key = ("dp-qq", alpha, epsilon, self.n_bins, self.gamma, rule, utility)
        plan = _PLAN_MEMO.get(n_per_client, key)
        if plan is None:
            sizes = tuple(_plan_sizes(n_per_client).tolist())
            plan = _dpqq_plan(
                sizes, alpha, epsilon, self.n_bins, self.gamma, rule, utility
            )
            _PLAN_MEMO.put(n_per_client, key, plan)
        plan = _copy_plan(plan)
        plan["score_bounds"] = bounds
        return plan

    def _level_of(self, n, plan, n_per_client):
        sizes = np.asarray(n_per_client)
        matches = np.flatnonzero(sizes == n)
        if matches.size == 0:
            raise ValueError(
                f"this client holds {n} scores but n_per_client lists no client of "
                "that size; pass the sizes the server announced."
            )
        return plan["levels"][matches[0]]

    def _mechanism_args(self, plan, level):
        return {
            "level": level,
            "epsilon": plan["epsilon"],
            "edges": _edges(plan["score_bounds"], plan["n_bins"]),
            "top_bin": "inf",
            "utility": plan.get("utility", "quantile"),
        }

    def client_step(
        self,
        scores: ArrayLike,
        *,
        alpha: float,
        n_per_client: ArrayLike,
        random_state: SecureRandomStateLike = None,
    ) -> dict[str, Any]:
        """Release a private bin edge at this client's corrected level.

        Sends ``+inf`` without reading the scores when the plan is infeasible
        or this client's corrected rank exceeds its size.
        """
        scores, alpha, n_per_client = self._check_client_input(
            scores, alpha, n_per_client, sizes=True
        )
        n = scores.shape[0]
        plan = self.plan(n_per_client, alpha)
        level = self._level_of(n, plan, n_per_client) if plan["feasible"] else None
        if level is None or not np.isfinite(level):
            return {"n": n, "quantile": math.inf}
        scores = _clip_scores(scores, plan["score_bounds"])
        value = private_quantile(
            scores, random_state=random_state, **self._mechanism_args(plan, level)
        )
        return {"n": n, "quantile": float(value)}

    def _server_plan(self, sizes, alpha, stacked):
        plan = self.plan(sizes, alpha)
        edges = _edges(plan["score_bounds"], plan["n_bins"])
        # What a client may release: an inner edge e_1..e_{B-1} or +inf (the
        # top bin); a client whose corrected rank exceeds its size sends +inf.
        return {**plan, "release_grid": np.r_[edges[1:-1], np.inf]}

    def _check_messages(self, stacked, *, sizes, plan, alpha, valid):
        values = stacked["quantile"]
        if not plan["feasible"]:
            must_inf = np.ones(sizes.shape[0], dtype=bool)
        else:
            must_inf = ~np.isfinite(np.asarray(plan["levels"], dtype=np.float64))
        grid = plan["release_grid"]
        on_grid = np.isin(values, grid)
        problems = []
        for j in np.flatnonzero(valid & (~on_grid | (must_inf & np.isfinite(values)))):
            if not on_grid[j]:
                reason = (
                    f"is {float(values[j])!r}, not a bin edge of the announced grid "
                    f"({plan['n_bins']} bins on score_bounds="
                    f"{tuple(plan['score_bounds'])}) nor +inf"
                )
            else:
                reason = f"is {float(values[j])!r}; it must be +inf because " + (
                    "the plan is infeasible"
                    if not plan["feasible"]
                    else "the client's corrected rank exceeds its size"
                )
            problems.append(Problem(int(j), "quantile", reason))
        return problems

    def _exclude(self, stacked, *, clients, sizes, plan, bad, alpha):
        return _exclude_as_inf(stacked, clients, sizes, plan, bad)

    def _exclusion_note(self):
        return _EXCLUDED_AS_INF

    def _aggregate(self, received, *, alpha, random_state):
        """Return the ``k_gamma``-th smallest released value."""
        plan = received.plan
        if not plan["feasible"]:
            return math.inf
        k = plan["k"]
        return float(np.partition(received.stacked["quantile"], k - 1)[k - 1])

    def _after_fit(self, received, *, alpha, details=None):
        _after_private_fit(self, received)

    def threshold_probabilities(
        self,
        scores: ArrayLike,
        client_ids: ClientIds = None,
        *,
        alpha: float,
        log: bool = False,
    ) -> ThresholdDistribution:
        """Exact law of the threshold :meth:`fit` would release on ``scores``.

        The clients' releases are independent; the law of their ``k``-th
        smallest follows from their exact laws, as sums of non-negative terms
        (accurate for tiny probabilities, as privacy checks need).

        Parameters
        ----------
        scores : array-like of shape (n_samples,)
            Calibration scores.
        client_ids : array-like of shape (n_samples,), default=None
            Client label of each row; ``None`` means one client.
        alpha : float
            Miscoverage level in (0, 1).
        log : bool, default=False
            Return natural-log probabilities, computed in log space from the
            clients' log-laws: finite where the probabilities underflow to 0
            (about ``exp(-745)``), so privacy ratios stay finite.

        Returns
        -------
        law : ThresholdDistribution
            Candidate thresholds (bin edges ``e_1..e_{B-1}``, then ``+inf``)
            and their probabilities (their logs with ``log=True``).

        Examples
        --------
        >>> cal = PrivateQuantileOfQuantilesCalibrator(
        ...     epsilon=10.0, score_bounds=(0, 1), n_bins=10)
        >>> rng = np.random.default_rng(0)
        >>> law = cal.threshold_probabilities(
        ...     rng.uniform(size=200), np.repeat([0, 1], 100), alpha=0.2)
        >>> law.values.shape, round(float(law.probabilities.sum()), 12)
        ((10,), 1.0)
        """
        from ...federated import ClientPartition

        scores = check_scores(scores, allow_inf=True)
        partition = ClientPartition(client_ids, scores.shape[0])
        plan = self.plan(partition.sizes, alpha)
        if not plan["feasible"]:
            return ThresholdDistribution(
                np.array([np.inf]), np.array([0.0 if log else 1.0])
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ClippedScoresWarning)
            groups = partition.split(_clip_scores(scores, plan["score_bounds"]))
        args = self._mechanism_args(plan, None)
        del args["level"]
        pmfs = np.array(
            [
                _client_pmf(group, level, args, log=log)
                for group, level in zip(groups, plan["levels"], strict=True)
            ]
        )
        values = args["edges"][1:].copy()
        values[-1] = np.inf
        law = _kth_smallest_log_law if log else _kth_smallest_law
        return ThresholdDistribution(values, law(pmfs, plan["k"]))

    def _check_fit_scores(self, scores):
        return check_scores(scores, allow_inf=True)  # clipped to the bounds

    def _simulate_clients(self, partition, scores, *, alpha, rngs, n_jobs=None):
        """Every client's :meth:`client_step`, with the public plan computed once.

        Bit-identical to calling :meth:`client_step` on each client with its
        stream: the same clipped scores, the plan's level of each size, the
        same losses and one draw from each client's own stream. The plan is
        searched once here (not once per client, nor once per joblib
        worker), clients of one size are binned in one vectorised pass, and
        a client's remaining work is a single draw, so ``n_jobs`` is unused.
        """
        # One clipping warning for the whole simulation, not one per client.
        scores = _clip_scores(
            scores, _check_bounds(self.score_bounds, type(self).__name__)
        )
        sizes = partition.sizes
        plan = self.plan(sizes, alpha)
        quantiles = np.full(partition.n_clients, np.inf)
        if not plan["feasible"]:
            return {"n": sizes, "quantile": quantiles}
        # client_step takes the level of the first client of its size.
        distinct, first = np.unique(sizes, return_index=True)
        level_of = dict(
            zip(
                distinct.tolist(),
                np.asarray(plan["levels"])[first].tolist(),
                strict=True,
            )
        )
        edges = _edges(plan["score_bounds"], plan["n_bins"])
        matrix = partition.as_matrix(scores)
        groups = None if matrix is not None else partition.split(scores)
        # Rows per vectorised pass: at most ~4e6 logits in memory at a time.
        chunk = max(1, 4_000_000 // plan["n_bins"])
        for n, level in level_of.items():
            if not np.isfinite(level):
                continue  # corrected rank above the size: +inf, scores unread
            rows = np.flatnonzero(sizes == n)
            for start in range(0, rows.size, chunk):
                block = rows[start : start + chunk]
                if matrix is not None:
                    values = matrix[block]
                else:
                    values = np.stack([groups[j] for j in block.tolist()])
                quantiles[block] = _release_many(
                    values,
                    level,
                    plan["epsilon"],
                    edges,
                    [rngs[j] for j in block.tolist()],
                    plan.get("utility", "quantile"),
                )
        return {"n": sizes, "quantile": quantiles}

    def fit(
        self,
        scores: ArrayLike,
        client_ids: ClientIds = None,
        *,
        alpha: float,
        random_state: SecureRandomStateLike = None,
        n_jobs: int | None = None,
    ) -> PrivateQuantileOfQuantilesCalibrator:
        """Simulate the round: each client releases a private quantile.

        Parameters
        ----------
        scores : array-like of shape (n_samples,)
            Conformity scores of all calibration rows.
        client_ids : array-like of shape (n_samples,) or None, default=None
            Client label of each row; ``None`` means one client.
        alpha : float
            Miscoverage level in (0, 1).
        random_state : int, Generator, RandomState, SeedSequence, "secure" \
                or None, default=None
            Root of one independent stream per client (spawned from one
            ``SeedSequence``, in sorted-client order; ``None``: fresh
            operating-system entropy); ``"secure"`` makes every client draw
            from the operating system's secure generator (not reproducible,
            for deployment).
        n_jobs : int, default=None
            Unused: the plan is searched once and the clients' releases are
            vectorised (a client's own work is one draw from its stream), so
            parallel workers would only add overhead. Results never depend
            on it.

        Returns
        -------
        self : PrivateQuantileOfQuantilesCalibrator
            The fitted calibrator.
        """
        super().fit(
            scores, client_ids, alpha=alpha, random_state=random_state, n_jobs=n_jobs
        )
        return self

    def coverage_bounds(self, n_per_client: ArrayLike, alpha: float) -> CoverageBounds:
        """Return ``((1 - gamma alpha) M(l_gamma, k_gamma), nan)``; trivial: (1, 1)."""
        plan = self.plan(n_per_client, alpha)
        if not plan["feasible"]:
            return CoverageBounds(1.0, 1.0)
        return CoverageBounds(plan["coverage_lower"], np.nan)


def _plan_sizes(n_per_client):
    """``n_per_client`` as a validated 1-D int64 array (vectorised checks).

    The same checks and messages as ``_sizes_tuple``, at C speed: every
    client step calls ``plan``, so an O(m) Python loop here makes a fit
    quadratic in the number of clients.
    """
    sizes = np.asarray(n_per_client)
    if sizes.ndim != 1 or sizes.shape[0] < 1:
        raise ValueError("n_per_client must list the size of at least one client.")
    if sizes.dtype.kind not in "iu" or (sizes < 0).any():
        raise ValueError("n_per_client must hold non-negative integers.")
    return sizes.astype(np.int64, copy=False)


class _PlanMemo:
    """The last plans, keyed by the *identity* of the sizes array.

    ``fit`` passes the same ``n_per_client`` array to every client step, and
    each step asks for the plan: hashing an m-tuple per step would make a fit
    quadratic in m. A hit needs the same array object with the same content
    (one vectorised comparison against a private snapshot, so a mutated
    array is never served a stale plan) and the same public parameters.
    Lists and tuples always miss (their conversion is O(m) anyway) and fall
    through to the ``lru_cache`` of the plan functions. Entries are replaced
    whole (one assignment), so concurrent fits never see a torn entry.
    """

    def __init__(self, size=8):
        self._size = size
        self._entries = {}

    def get(self, sizes, key):
        if not isinstance(sizes, np.ndarray):
            return None
        entry = self._entries.get(key)
        if entry is None:
            return None
        array, snapshot, plan = entry
        if array is not sizes or not np.array_equal(snapshot, sizes):
            return None
        return plan

    def put(self, sizes, key, plan):
        if not isinstance(sizes, np.ndarray):
            return
        if len(self._entries) >= self._size:
            self._entries = {}
        self._entries[key] = (sizes, sizes.copy(), plan)


_PLAN_MEMO = _PlanMemo()


def _copy_plan(plan):
    """A fresh dict with fresh arrays: callers may modify what they get."""
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in plan.items()}


def _dpqq_plan(sizes, alpha, epsilon, n_bins, gamma, rule="paper", utility="quantile"):
    if rule == "tight":
        if isinstance(n_bins, str):  # "auto": any data-free choice is valid
            n_bins = _dpqq_auto_bins(sizes, alpha, epsilon, "auto")
        plan = dict(_dpqq_tight_search(sizes, alpha, epsilon, int(n_bins), utility))
        for key in ("local_ranks", "levels"):
            if key in plan:
                plan[key] = np.array(plan[key])
        return plan
    if isinstance(n_bins, str):  # "auto"
        n_bins = _dpqq_auto_bins(sizes, alpha, epsilon, gamma)
    plan = dict(_dpqq_gamma_search(sizes, alpha, epsilon, int(n_bins), gamma))
    plan["rule"] = "paper"
    plan["utility"] = "quantile"
    for key in ("local_ranks", "levels"):
        if key in plan:
            plan[key] = np.array(plan[key])
    return plan


@lru_cache(maxsize=1024)
def _qq_score(sizes, ranks, k):
    """Exact coverage ``M(ranks, k)`` of the corrected ranks.

    Equal sizes: :func:`qq_coverage`. Unequal sizes: the clients are grouped
    by ``(n_j, l_j)`` (the integrand only depends on that multiset, so the
    value is cached per multiset) and integrated by the batched composite
    Gauss-Legendre rule of ``_qq_coverage`` (panels doubled until two passes
    agree to 5e-14, ``quad`` for any pair that does not converge): the same
    value as :func:`qq_coverage_unequal` to ~1e-14, several times faster.
    Decisions closer than ``_CERTIFY`` to a tie are re-made with
    :func:`_qq_score_quad` (see :func:`_beats`).
    """
    if len(set(sizes)) == 1:
        return qq_coverage(len(sizes), sizes[0], ranks[0], k)
    return _grouped_score(
        tuple(sorted(Counter(zip(sizes, ranks, strict=True)).items())), k
    )


@lru_cache(maxsize=4096)
def _grouped_score(groups, k):
    g_sizes = np.array([n for (n, _), _ in groups], dtype=np.int64)
    g_ranks = np.array([[r for (_, r), _ in groups]], dtype=np.int64)
    g_counts = np.array([c for _, c in groups], dtype=np.int64)
    return float(_coverage_unequal_batch(g_sizes, g_counts, g_ranks, [k])[0])


@lru_cache(maxsize=64)
def _qq_score_quad(sizes, ranks, k):
    """The reference value (adaptive quadrature) for near-tie decisions."""
    if len(set(sizes)) == 1:
        return qq_coverage(len(sizes), sizes[0], ranks[0], k)
    return qq_coverage_unequal(sizes, ranks, k)


# A comparison of two scores closer than this to the tie line is re-made
# with the quad values: the batched and the quad values agree to ~1e-14, so
# every other decision is the one the quad values would give.
_CERTIFY = 1e-12


def _beats(sizes, score, ranks, k, best):
    """``score < best_score - _TIE``, certified against the quad values."""
    if best is None:
        return True
    gap = score - (best[0] - _TIE)
    if abs(gap) >= _CERTIFY or len(set(sizes)) == 1:
        return gap < 0
    best_ranks, best_k = best[4], best[2].k
    return _qq_score_quad(sizes, ranks, k) < (
        _qq_score_quad(sizes, best_ranks, best_k) - _TIE
    )


@lru_cache(maxsize=256)
def _dpqq_gamma_search(sizes, alpha, epsilon, n_bins, gamma):
    """The public plan of FedCP²-QQ for given bins (section 2.11 of the spec)."""
    m = len(sizes)
    grid = GAMMA_GRID if isinstance(gamma, str) else (float(gamma),)
    equal = len(set(sizes)) == 1
    # Explicit rule (not "auto"): the plans must not move if the default of
    # select_qq_ranks changes. Equal sizes: the full search of eq. (6);
    # unequal sizes: the fixed ranks of Appendix A.1.
    local_rule = "auto" if equal else "fixed"
    n_max = max(sizes)
    distinct = sorted(set(sizes))
    n_total = sum(sizes)
    # A search costs a rank selection and an exact coverage per gamma.
    # Two data-free shortcuts keep the result identical:
    # * necessary condition: every corrected rank is l_gamma + l_cor >=
    #   1 + l_cor, so l_cor >= max(n_j) leaves no client with a finite
    #   value (the loop below would skip that gamma). l_cor decreases in
    #   gamma, so the largest gamma of the grid decides feasibility at once;
    # * pruning: score(gamma) = M(l_gamma + l_cor, k_gamma) >= M(l_gamma,
    #   k_gamma) + 1/(N + 1) (M = E[rank]/(N + 1) and every client value
    #   moves up at least one rank) >= tau_gamma - 1e-10 + 1/(N + 1), and
    #   tau_gamma increases in gamma: once that bound exceeds the best
    #   score, no larger gamma can win (ties need a score < best - 1e-10).
    corrections = {
        g: dp_qq_local_correction(epsilon, n_bins, g, alpha, m) for g in grid
    }
    if min(corrections.values()) >= n_max:
        grid = ()
    # (n_j, count) pairs for the pruning bounds of unequal sizes (after the
    # feasibility check: an infeasible plan costs no O(m) Python counting).
    size_counts = tuple(sorted(Counter(sizes).items())) if grid and not equal else ()
    best = None
    for g in grid:
        correction = corrections[g]
        if correction >= n_max:
            continue
        tau = (1.0 - alpha) / (1.0 - g * alpha)
        if best is not None and tau + 1.0 / (n_total + 1) - 3e-10 >= best[0]:
            break
        target_alpha = alpha * (1.0 - g) / (1.0 - g * alpha)  # 1 - tau_gamma
        if not equal:
            fixed = {n: conformal_rank(n, target_alpha) for n in distinct}
            finite = [fixed[n] + correction <= n for n in distinct]
            if not any(finite):
                continue  # the fixed ranks leave no client with a finite value
            if all(finite) and best is not None:
                # No client turns to +inf, so each client value moves up
                # l_cor of its own ranks: score >= tau - 1e-10 + gain, where
                # the gain is l_cor/(N+1) or E[min_j (spacings)], whichever
                # is larger (see _min_shift_gain).
                gain = max(
                    correction / (n_total + 1), _min_shift_gain(size_counts, correction)
                )
                if tau + gain - 3e-10 >= best[0]:
                    continue  # cannot win (nor tie: needs < best - 1e-10)
                # Sharper and still rigorous, at a fraction of the cost of
                # the rank selection and the exact score it avoids.
                bound = _score_lower_bound(size_counts, fixed, correction, tau)
                if bound - 3e-10 >= best[0]:
                    continue
        sel = select_qq_ranks(sizes, target_alpha, local_rank=local_rule)
        if not sel.feasible:
            continue
        ranks = tuple(r + correction for r in sel.local_ranks)
        if sum(r <= n for r, n in zip(ranks, sizes, strict=True)) < sel.k:
            continue  # fewer than k clients could send a finite value
        score = _qq_score(sizes, ranks, sel.k)
        if _beats(sizes, score, ranks, sel.k, best):
            best = (score, g, sel, correction, ranks)
    if best is None:
        reason = (
            f"no gamma is feasible: with client sizes {_describe(sizes)}, "
            f"epsilon={epsilon:g}, alpha={alpha:g} and n_bins={n_bins} the "
            "corrected ranks l_gamma + l_cor exceed the client sizes; use more "
            "data per client, a larger epsilon or fewer bins"
        )
        plan = {
            "feasible": False,
            "reason": reason,
            "n_bins": n_bins,
            "epsilon": epsilon,
        }
        return tuple(plan.items())
    score, g, sel, correction, ranks = best
    levels = tuple(
        max(r / n, 0.5) if r <= n else math.inf
        for r, n in zip(ranks, sizes, strict=True)
    )
    plan = {
        "feasible": True,
        "gamma": g,
        "local_ranks": sel.local_ranks,
        "k": sel.k,
        "correction": correction,
        "levels": levels,
        "score": score,
        "coverage_lower": (1.0 - g * alpha) * sel.coverage,
        "n_bins": n_bins,
        "epsilon": epsilon,
    }
    return tuple(plan.items())


@lru_cache(maxsize=1024)
def _min_shift_gain(size_counts, shift, n_nodes=512):
    """A lower bound on ``E[min_j (U^j_(l_j + c) - U^j_(l_j))]``, ``c = shift``.

    Client ``j`` holds ``n_j`` i.i.d. uniforms; the sum of ``c`` consecutive
    spacings ``U_(l + c) - U_(l)`` is ``Beta(c, n_j + 1 - c)`` whatever
    ``l`` (``l + c <= n_j``), independently across clients, so ``P(min_j >
    x) = prod_j (1 - I_x(c, n_j + 1 - c))``, a decreasing function whose
    lower Riemann sum on ``[0, x_max]`` bounds the expectation from below.

    Why it bounds the dp-qq score: with every client active, the ``k``-th
    smallest of the shifted values ``X_j + D_j`` is at least the ``k``-th
    smallest of the ``X_j`` plus ``min_j D_j`` (pointwise), so ``M(l + c,
    k) >= M(l, k) + E[min_j D_j]`` (``M = E[threshold]`` on uniform scores).
    Much larger than ``c / (N + 1)`` when each client holds a small share of
    the ``N`` scores, so the gamma search skips more candidates (the plan
    is unchanged: a skipped gamma cannot win).
    """
    c = float(shift)
    if c < 1:
        return 0.0
    sizes = np.array([n for n, _ in size_counts], dtype=np.float64)
    counts = np.array([k for _, k in size_counts], dtype=np.float64)
    x_max = float(np.min(special.betaincinv(c, sizes + 1.0 - c, 1.0 - 1e-9)))
    x = np.linspace(0.0, x_max, n_nodes + 1)[1:]  # right ends: a lower sum
    tail = special.betainc(c, sizes[:, None] + 1.0 - c, x[None, :])
    log_survival = (counts[:, None] * special.log1p(-tail)).sum(axis=0)
    return max(float(x_max / n_nodes * np.exp(log_survival).sum()) - 1e-12, 0.0)


def _riemann_brackets(groups, n_nodes=192):
    """Rigorous ``[lower, upper]`` brackets of ``M(ranks, k)`` for every ``k``.

    ``groups`` lists ``((n_j, l_j), count)`` (all active). The integrand
    ``f_k(t) = P(#{clients <= t} <= k - 1)`` decreases in ``t``, so on any
    nodes ``0 = t_0 < ... < t_G = 1`` the right and left Riemann sums bound
    ``M = int_0^1 f_k`` from below and above (whatever the nodes; they are
    packed where the client values live, so the brackets are ~1e-3 wide).
    One Poisson-binomial DP over the nodes serves every ``k``; 1e-12 covers
    its rounding.
    """
    ns = np.array([n for (n, _), _ in groups], dtype=np.float64)
    ls = np.array([r for (_, r), _ in groups], dtype=np.float64)
    a = float(special.betaincinv(ls, ns - ls + 1.0, 1e-13).min())
    b = float(special.betaincinv(ls, ns - ls + 1.0, 1.0 - 1e-13).max())
    t = np.unique(np.r_[0.0, np.linspace(a, b, n_nodes), 1.0])
    f = np.minimum(np.cumsum(_poisbin_pmf_groups(list(groups), t), axis=0), 1.0)
    width = np.diff(t)
    return f[:, 1:] @ width - 1e-12, f[:, :-1] @ width + 1e-12


def _score_lower_bound(size_counts, fixed, correction, tau):
    """A lower bound on the score of one gamma of the unequal-size search.

    The rank selection (fixed ranks ``l``) keeps the smallest ``k`` whose
    computed ``M(l, k)`` reaches ``tau - 1e-10``; where the upper bracket of
    ``M(l, k)`` is below that (by a 1e-9 margin for the selection's own
    rounding) ``k`` is rejected, so the kept ``k`` is at least the first
    ``kappa`` that is not. ``M`` increases in ``k``, so the score ``M(l +
    l_cor, k) >= M(l + l_cor, kappa) >=`` its lower bracket. ``+inf`` when
    no ``k`` can pass (the selection is infeasible: the gamma is skipped
    anyway). Every client is active here (the caller checked it).
    """
    groups = [((n, fixed[n]), count) for n, count in size_counts]
    _, upper = _riemann_brackets(groups)
    passing = np.flatnonzero(upper >= tau - _FEASIBILITY_TOL - 1e-9)
    if passing.size == 0:
        return math.inf
    shifted = [((n, fixed[n] + correction), count) for n, count in size_counts]
    lower, _ = _riemann_brackets(shifted)
    return float(lower[passing[0]])


def _describe(sizes):
    if len(set(sizes)) == 1:
        return f"{len(sizes)} x {sizes[0]}"
    return f"{min(sizes)}..{max(sizes)} ({len(sizes)} clients)"


def _client_pmf(scores, level, mechanism_args, log=False):
    """Law of one client's release over the bins (``+inf`` sender: the top)."""
    n_bins = mechanism_args["edges"].shape[0] - 1
    if not np.isfinite(level):
        pmf = np.r_[np.zeros(n_bins - 1), 1.0]
        if log:
            with np.errstate(divide="ignore"):
                return np.log(pmf)
        return pmf
    return private_quantile_probabilities(scores, level, log=log, **mechanism_args)


def _kth_smallest_log_law(log_pmfs, k):
    """:func:`_kth_smallest_law` in log space: no probability underflows.

    The same DP over clients with every product a sum of logs and every sum
    a ``logaddexp``, so a probability of 1e-400 stays ``-921`` instead of 0
    and privacy ratios between neighbouring data sets stay finite.
    """
    n_values = log_pmfs.shape[1]
    ninf = np.full((log_pmfs.shape[0], 1), -np.inf)
    below = np.logaddexp.accumulate(np.hstack([ninf, log_pmfs[:, :-1]]), axis=1)
    above = np.logaddexp.accumulate(np.hstack([ninf, log_pmfs[:, :0:-1]]), axis=1)
    above = above[:, ::-1]
    state = np.full((k, k + 1, n_values), -np.inf)
    state[0, 0] = 0.0
    with np.errstate(invalid="ignore"):
        for less, equal, greater in zip(below, log_pmfs, above, strict=True):
            new = state + greater
            new[1:] = np.logaddexp(new[1:], state[:-1] + less)
            new[:, 1:] = np.logaddexp(new[:, 1:], state[:, :-1] + equal)
            new[:, k] = np.logaddexp(new[:, k], state[:, k] + equal)
            state = new
    hit = np.add.outer(np.arange(k), np.arange(k + 1)) >= k
    return special.logsumexp(state[hit], axis=0)


def _kth_smallest_law(pmfs, k):
    """Exact law of the k-th smallest of independent discrete variables.

    ``pmfs[j, b] = P(X_j = v_b)`` on common sorted values. ``X_(k) = v_b``
    iff fewer than ``k`` variables are below ``v_b`` and at least ``k`` are
    at most ``v_b``; the joint law of these two counts is built client by
    client from non-negative terms only (no subtraction), so tiny
    probabilities keep their relative accuracy. ``O(m k^2 B)``.
    """
    zero = np.zeros((pmfs.shape[0], 1))
    below = np.cumsum(np.hstack([zero, pmfs[:, :-1]]), axis=1)
    above = np.cumsum(np.hstack([zero, pmfs[:, :0:-1]]), axis=1)[:, ::-1]
    # state[a, e, b]: a = #{X_j < v_b} (a >= k is dropped: X_(k) < v_b),
    # e = #{X_j = v_b}, capped at k.
    state = np.zeros((k, k + 1, pmfs.shape[1]))
    state[0, 0] = 1.0
    for less, equal, greater in zip(below, pmfs, above, strict=True):
        new = state * greater
        new[1:] += state[:-1] * less
        new[:, 1:] += state[:, :-1] * equal
        new[:, k] += state[:, k] * equal
        state = new
    hit = np.add.outer(np.arange(k), np.arange(k + 1)) >= k
    return state[hit].sum(axis=0)


def _binomial_pmf(count, p):
    """``P(Bin(count, p) = i)`` for ``i = 0..count``, each column of ``p``."""
    i = np.arange(count + 1)[:, None]
    log_comb = gammaln(count + 1) - gammaln(i + 1) - gammaln(count - i + 1)
    return np.exp(log_comb + xlogy(i, p) + xlog1py(count - i, -p))


def _expected_kth_smallest(groups, k, edges):
    """Expected k-th smallest of independent releases on ``edges[1:]``.

    ``groups`` lists ``(cdf, count)``: ``count`` clients whose release has
    CDF ``cdf`` over ``edges[1:]``. Uses ``E[X] = e_1 + sum_b (e_{b+1} -
    e_b) P(X > e_b)``, where ``X_(k) > e_b`` iff fewer than ``k`` releases
    are ``<= e_b``, a sum of independent binomial counts.
    """
    total = np.ones((1, edges.shape[0] - 1))  # law of the count so far
    for cdf, count in groups:
        pmf = _binomial_pmf(count, np.clip(cdf, 0.0, 1.0))
        new = np.zeros((total.shape[0] + count, total.shape[1]))
        for i in range(count + 1):
            new[i : i + total.shape[0]] += total * pmf[i]
        total = new
    above = total[:k].sum(axis=0)[:-1]  # P(X_(k) > e_b), b = 1..B-1
    return float(edges[1] + np.diff(edges[1:]) @ above)


@lru_cache(maxsize=64)
def _dpqq_auto_bins(sizes, alpha, epsilon, gamma):
    """Number of bins minimising the expected threshold on public uniform scores."""
    groups = sorted(Counter(sizes).items())
    simulated = {n: np.arange(1, n + 1) / (n + 1.0) for n, _ in groups}
    best, best_value = DPQQ_BINS_GRID[0], math.inf
    grid = DPQQ_BINS_GRID
    if not any(
        dict(_dpqq_gamma_search(sizes, alpha, epsilon, b, gamma))["feasible"]
        for b in grid[:1]
    ):
        grid = _DPQQ_SMALL_BINS + grid[:1]  # ranks only get larger with more bins
    for n_bins in grid:
        plan = dict(_dpqq_gamma_search(sizes, alpha, epsilon, n_bins, gamma))
        if not plan["feasible"]:
            value = 1.0  # the trivial threshold, on the [0, 1] scale
        else:
            edges = np.linspace(0.0, 1.0, n_bins + 1)
            args = {"epsilon": epsilon, "edges": edges}
            level_of = dict(zip(sizes, plan["levels"], strict=True))
            cdfs = [
                (np.cumsum(_client_pmf(simulated[n], level_of[n], args)), count)
                for n, count in groups
            ]
            value = _expected_kth_smallest(cdfs, plan["k"], edges)
        if value < best_value - 1e-12:
            best, best_value = n_bins, value
    return best


# --------------------------------------------------------------------------
# Tight corrections (rule="tight", a skfedcp extension; proof in the user
# guide, "Tight corrections")

_GAUSS_EXACT_MAX_N = 4000
# Slack on the numerical bound when the quadrature is not exact.
_QUADRATURE_SLACK = 1e-10
# A bound must exceed 1 - alpha by this much (float rounding of the sums).
_BOUND_MARGIN = 1e-12


def _rank_cdf_on(t, n, ranks, pmf):
    """``P(U_(D) <= t)`` for the uniform order statistics of ``n`` draws.

    ``D`` has law ``pmf`` on ``ranks`` (rank 0: ``-inf``, always below).
    """
    out = np.zeros_like(t)
    for r, p in zip(ranks.tolist(), pmf.tolist(), strict=True):
        if p == 0.0:
            continue
        out += p if r == 0 else p * special.betainc(r, n - r + 1, t)
    return np.minimum(out, 1.0)


def _poisbin_at_most(probs, counts, k):
    """``P(sum_g Bin(counts[g], probs[g]) <= k - 1)``, each column of ``probs``.

    ``probs`` is ``(groups, nodes)``; a DP over the groups on the counts
    ``0..k-1`` (larger counts are dropped: they never come back below k),
    with binomial blocks for groups of identical clients. Sums of
    non-negative terms only.
    """
    state = np.zeros((k, probs.shape[1]))
    state[0] = 1.0
    for p, count in zip(probs, counts, strict=True):
        p = np.clip(p, 0.0, 1.0)
        top = min(count, k - 1)
        block = _binomial_pmf(count, p)[: top + 1]
        new = state * block[0]
        for i in range(1, top + 1):
            new[i:] += state[: k - i] * block[i]
        state = new
    return np.minimum(state.sum(axis=0), 1.0)


def _tight_lower_bound(groups, level, k, epsilon, n_bins, utility="quantile"):
    """``E[M(D_1..D_m, k)]``: coverage guaranteed by FedCP²-QQ at ``level``.

    ``groups`` lists ``(n, count)``: ``count`` clients of ``n`` scores, all
    running the mechanism at ``level``. The bound is ``int_0^1
    P(sum_j 1{U^j_(D_j) <= t} <= k - 1) dt`` with independent ranks ``D_j``
    (:func:`~skfedcp.privacy._quantile._rank_law` of the client's size), i.e.
    a Poisson-binomial integrand with ``p_n(t) = P(U_(D) <= t)`` for the
    clients of size ``n``; a polynomial of degree ``N = sum_j n_j``:
    Gauss-Legendre with ``ceil((N + 1) / 2)`` nodes is exact up to rounding
    for ``N <= 4000``; above, a composite rule refined until two passes
    agree to 1e-13, and the result is lowered by 1e-10 (the search needs a
    bound, not an estimate).
    """
    laws = [
        (n, _rank_law(n, level, epsilon, n_bins, utility=utility)) for n, _ in groups
    ]
    counts = [c for _, c in groups]
    N = sum(n * c for n, c in groups)

    def integral(t, w):
        if len(groups) == 1:
            n, (ranks, pmf) = laws[0]
            p = _rank_cdf_on(t, n, ranks, pmf)
            return float(w @ special.bdtr(k - 1, counts[0], p))
        probs = np.array([_rank_cdf_on(t, n, r, pmf) for n, (r, pmf) in laws])
        return float(w @ _poisbin_at_most(probs, counts, k))

    if N <= _GAUSS_EXACT_MAX_N:
        return integral(*_gauss_nodes01(-(-(N + 1) // 2)))
    x, w = np.polynomial.legendre.leggauss(16)
    previous, panels = None, 64
    while True:
        edges = np.linspace(0.0, 1.0, panels + 1)
        width = edges[1] - edges[0]
        t = (edges[:-1, None] + width * (x + 1.0) / 2.0).ravel()
        value = integral(t, np.tile(w * width / 2.0, panels))
        if previous is not None and abs(value - previous) < 1e-13:
            return value - _QUADRATURE_SLACK
        if panels >= 8192:
            return min(value, previous) - 1e-8
        previous, panels = value, panels * 2


@lru_cache(maxsize=16)
def _gauss_nodes01(n_nodes):
    """Gauss-Legendre nodes and weights on [0, 1] (cached: the search
    evaluates the bound at many levels with the same degree)."""
    x, w = special.roots_legendre(n_nodes)
    x, w = (x + 1.0) / 2.0, w / 2.0
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


# Bisection steps on the level (precision 2**-31 on [1/2, 1]).
_TIGHT_LEVEL_STEPS = 30
# Public uniform client data sets (per size) that rank the feasible plans.
_TIGHT_SIMULATIONS = 200
_TIGHT_SEED = 20260101


def _simulated_coverage(groups, level, k, epsilon, n_bins, utility="quantile"):
    """Expected coverage of the plan ``(level, k)`` on i.i.d. uniform scores.

    Used only to choose among plans that all guarantee ``1 - alpha``: it
    reads no data (public uniform samples from a fixed seed), so it costs no
    privacy. Clients are independent, so ``P(threshold <= e_b) = P(at least
    k clients release <= e_b)`` follows exactly from one client's marginal
    release law (per size), which is averaged over the simulated data sets.
    """
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    rng = np.random.default_rng(_TIGHT_SEED)
    cdfs = []
    for n, _ in groups:
        scores = rng.uniform(size=(_TIGHT_SIMULATIONS, n))
        log_p = _release_log_probabilities(scores, level, epsilon, edges, utility)
        cdfs.append(np.cumsum(np.exp(log_p).mean(axis=0)))
    counts = [c for _, c in groups]
    above = _poisbin_at_most(np.array(cdfs), counts, k)  # P(T > e_b)
    # E[F(T)] = e_1 + sum_b (e_{b+1} - e_b) P(T > e_b), F(+inf) = 1.
    return float(edges[1] + np.diff(edges[1:]) @ above[:-1])


@lru_cache(maxsize=256)
def _dpqq_tight_search(sizes, alpha, epsilon, n_bins, utility="quantile"):
    """Plan of rule="tight": a guaranteed coverage of ``1 - alpha``, no more.

    Every client runs the mechanism at one common level ``q`` in [1/2, 1]
    (any real number: the level is a public parameter, not a rank) and the
    server keeps the ``k``-th smallest release. The guaranteed coverage
    ``LB(q, k)`` increases in ``q`` and in ``k``; for each ``k`` the smallest
    ``q`` with ``LB >= 1 - alpha`` is found by bisection (so every feasible
    ``k`` gives a plan with ``LB`` at ``1 - alpha``), and among these plans
    the one with the smallest expected coverage on public uniform scores is
    kept (:func:`_simulated_coverage`; ties: the smaller ``k``).
    """
    m = len(sizes)
    groups = tuple(sorted(Counter(sizes).items()))
    target = 1.0 - alpha + _BOUND_MARGIN

    def bound(q, k):
        return _tight_lower_bound(groups, q, k, epsilon, n_bins, utility)

    candidates = []
    q_hi = 1.0
    for k in range(1, m + 1):
        if bound(q_hi, k) < target:
            continue
        lo, hi = 0.5, q_hi
        if bound(lo, k) >= target:
            hi = lo
        else:
            for _ in range(_TIGHT_LEVEL_STEPS):
                mid = 0.5 * (lo + hi)
                lo, hi = (lo, mid) if bound(mid, k) >= target else (mid, hi)
        candidates.append((hi, k, bound(hi, k)))
        q_hi = hi  # the smallest level is non-increasing in k
    if not candidates:
        plan = {
            "feasible": False,
            "reason": (
                f"no plan is feasible: with client sizes {_describe(sizes)}, "
                f"epsilon={epsilon:g}, alpha={alpha:g} and n_bins={n_bins} even "
                "the largest level does not guarantee 1 - alpha; use more data "
                "per client, a larger epsilon or fewer bins"
            ),
            "n_bins": n_bins,
            "epsilon": epsilon,
            "rule": "tight",
            "utility": utility,
        }
        return tuple(plan.items())
    best = None
    for q, k, value in candidates:
        expected = _simulated_coverage(groups, q, k, epsilon, n_bins, utility)
        if best is None or expected < best[0] - 1e-9:
            best = (expected, q, k, value)
    _, q, k, value = best
    plan = {
        "feasible": True,
        "gamma": None,
        # The rank each client's level targets (informative; the level is
        # what the mechanism uses).
        "local_ranks": tuple(min(n, math.ceil(q * n - 1e-9)) for n in sizes),
        "k": k,
        "correction": 0,
        "levels": (q,) * m,
        "score": value,
        "coverage_lower": value,
        "n_bins": n_bins,
        "epsilon": epsilon,
        "rule": "tight",
        "utility": utility,
    }
    return tuple(plan.items())
