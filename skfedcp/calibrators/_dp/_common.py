"""Shared pieces of the private calibrators: checks, clipping, the threshold law."""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._typing import ClientIds
from ...exceptions import ClippedScoresWarning, InfiniteThresholdWarning
from ...federated import ClientPartition
from ...privacy import check_privacy_params
from ...privacy._exponential import _check_epsilon
from ...privacy._validation import EPSILON_RANGE
from ...utils._docstrings import fill_doc
from ...utils._sklearn_compat import Interval, StrOptions
from ...utils._validation import check_scores
from ...utils._warnings import warn_user
from .._messages import check_client_sizes

__all__ = ["ThresholdDistribution"]

_PRIVACY_CONSTRAINTS = {
    "epsilon": [Interval(Real, EPSILON_RANGE[0], EPSILON_RANGE[1], closed="both")],
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


@fill_doc
class _DPMixin:
    """What the central-DP and DP-QQ calibrators share.

    Both release bin edges of the exponential mechanism on the public
    ``score_bounds``: the scores are clipped to the bounds (infinite scores
    allowed), the mechanism's arguments come from the plan, ``+inf`` is
    explained by :func:`_after_private_fit`, and the exact law of the
    released threshold follows from the mechanism's (:meth:`_release_law`).
    """

    _randomized = True
    score_bounds: tuple[float, float] | None

    #: Whether the release pools every row (a trusted curator, which ignores
    #: the client partition) rather than releasing one value per client.
    _pooled_release = False

    def _check_fit_scores(self, scores: ArrayLike) -> NDArray[np.float64]:
        return check_scores(scores, allow_inf=True)  # clipped to the bounds

    def _clip_to_bounds(self, scores):
        """The scores clipped to ``score_bounds`` (warned once per call)."""
        return _clip_scores(
            scores, _check_bounds(self.score_bounds, type(self).__name__)
        )

    def _mechanism_args(self, plan, level):
        """Keyword arguments of the exponential mechanism at ``level``."""
        return {
            "level": level,
            "epsilon": plan["epsilon"],
            "edges": _edges(plan["score_bounds"], plan["n_bins"]),
            "top_bin": "inf",
            "utility": plan.get("utility", "quantile"),
        }

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

        Computed from the mechanism's exact output law, without drawing; for
        DP-QQ the clients' releases are independent and the law of their
        ``k``-th smallest follows from theirs, as sums of non-negative terms
        (accurate for tiny probabilities, as privacy checks need).

        Parameters
        ----------
        %(scores)s
        client_ids : array-like of shape (n_samples,) or None, default=None
            Client label of each row; ``None`` means one client. Ignored by
            the central curator, which pools the scores.
        alpha : float
            Miscoverage level in (0, 0.5] for the central curator, (0, 1)
            for DP-QQ.
        log : bool, default=False
            Return natural-log probabilities, computed in log space: finite
            where the probabilities underflow to 0 (about ``exp(-745)``), so
            that privacy ratios between neighbouring data sets stay finite.

        Returns
        -------
        law : ThresholdDistribution
            Candidate thresholds (bin edges ``e_1..e_{B-1}``, then ``+inf``)
            and their probabilities (their logs with ``log=True``).

        Examples
        --------
        >>> import numpy as np
        >>> from skfedcp.calibrators import (
        ...     PrivateCentralCalibrator, PrivateQuantileOfQuantilesCalibrator)
        >>> cal = PrivateCentralCalibrator(epsilon=50.0, score_bounds=(0, 1),
        ...                                n_bins=4)
        >>> law = cal.threshold_probabilities([0.1, 0.3, 0.6, 0.7], alpha=0.5)
        >>> law.values
        array([0.25, 0.5 , 0.75,  inf])
        >>> cal = PrivateQuantileOfQuantilesCalibrator(
        ...     epsilon=10.0, score_bounds=(0, 1), n_bins=10)
        >>> rng = np.random.default_rng(0)
        >>> law = cal.threshold_probabilities(
        ...     rng.uniform(size=200), np.repeat([0, 1], 100), alpha=0.2)
        >>> law.values.shape, round(float(law.probabilities.sum()), 12)
        ((10,), 1.0)
        """
        scores = check_scores(scores, allow_inf=True)
        partition = None
        if not self._pooled_release:
            partition = ClientPartition(client_ids, scores.shape[0])
        sizes = [scores.shape[0]] if partition is None else partition.sizes
        plan = self.plan(sizes, alpha)  # type: ignore[attr-defined]
        if not plan["feasible"]:
            return ThresholdDistribution(
                np.array([np.inf]), np.array([0.0 if log else 1.0])
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ClippedScoresWarning)
            clipped = _clip_scores(scores, plan["score_bounds"])
        values = _edges(plan["score_bounds"], plan["n_bins"])[1:].copy()
        values[-1] = np.inf
        return ThresholdDistribution(
            values, self._release_law(clipped, partition, plan, log)
        )

    def _release_law(
        self, clipped: NDArray[np.float64], partition: Any, plan: dict, log: bool
    ) -> NDArray[np.float64]:
        """Probabilities (or logs) of the released edges ``e_1..e_B``."""
        raise NotImplementedError


def _check_epsilon_range(epsilon):
    """``epsilon`` within the private calibrators' public range, as a float.

    The same bounds as the ``epsilon`` constraint (:data:`EPSILON_RANGE`),
    for the steps that run without ``_validate_params`` (the plans).
    """
    epsilon = _check_epsilon(epsilon)
    low, high = EPSILON_RANGE
    if not low <= epsilon <= high:
        raise ValueError(
            f"epsilon must be in [{low:g}, {high:g}], the private calibrators' "
            f"public range; got {epsilon:g}."
        )
    return epsilon


_BOUNDS_HINT = (
    "public bounds of the conformity scores, fixed without looking at the "
    "calibration data (e.g. (0, 1) for probability scores, (0, B) for a "
    "residual clipped at B). Pass them to the calibrator or to the wrapper."
)


def _check_bounds(score_bounds, owner, hint=_BOUNDS_HINT):
    """The public ``score_bounds`` as ``(low, high)``; None raises with ``hint``.

    Shared by the central-DP, DP-QQ and local-DP calibrators (the hint says
    what the bounds are for).
    """
    if score_bounds is None:
        raise ValueError(f"{owner} needs score_bounds=(low, high): {hint}")
    if isinstance(score_bounds, np.ndarray):
        score_bounds = score_bounds.tolist()
    return check_privacy_params(
        bounds=score_bounds, names={"bounds": "score_bounds"}
    ).bounds


def _edges(bounds, n_bins):
    # The same construction as private_quantile(bounds=..., n_bins=...).
    return np.linspace(bounds[0], bounds[1], n_bins + 1)


def _clip_scores(scores: ArrayLike, bounds: tuple[float, float]) -> NDArray[np.float64]:
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


def _plan_sizes(n_per_client):
    """``n_per_client`` as a validated 1-D int64 array (vectorised checks).

    Stricter than :func:`check_client_sizes`, which it ends with (the public
    plan policy): a DP plan takes a 1-D integer array only, and refuses
    anything else with ValueError. All checks run at C speed: every client
    step calls ``plan``, so an O(m) Python loop here makes a fit quadratic
    in the number of clients.
    """
    sizes = np.asarray(n_per_client)
    if sizes.ndim != 1 or sizes.shape[0] < 1:
        raise ValueError("n_per_client must list the size of at least one client.")
    if sizes.dtype.kind not in "iu" or (sizes < 0).any():
        raise ValueError("n_per_client must hold non-negative integers.")
    return check_client_sizes(sizes)


def _describe(sizes):
    if len(set(sizes)) == 1:
        return f"{len(sizes)} x {sizes[0]}"
    return f"{min(sizes)}..{max(sizes)} ({len(sizes)} clients)"
