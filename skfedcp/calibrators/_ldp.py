"""Local-DP calibration: LDP-L (k-RR labels) and LDP-S (interactive bisection)."""

import math
import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from ..exceptions import InfiniteThresholdWarning, VacuousGuaranteeWarning
from ..federated import ClientPartition
from ..privacy import (
    binary_randomized_response,
    check_privacy_params,
    debias_fraction,
    k_ary_randomized_response,
)
from ..privacy._randomness import SECURE
from ..utils._sklearn_compat import Interval, StrOptions
from ..utils._validation import check_alpha, check_scores
from ._base import BaseCalibrator, CoverageBounds, stack_messages

__all__ = [
    "LDPCorrection",
    "LDPLabelCalibrator",
    "LDPLabelStarCalibrator",
    "LDPSampleSize",
    "LDPScoreCalibrator",
    "LDPScoreStarCalibrator",
    "ldp_correction",
    "ldp_sample_size",
]


# --------------------------------------------------------------------------
# Analysis: correction terms and sample sizes (numbers only, no data)
# --------------------------------------------------------------------------


class LDPCorrection(NamedTuple):
    """Coverage corrections ``Delta_L`` (LDP-L) and ``Delta_S`` (LDP-S)."""

    label: float
    score: float


class LDPSampleSize(NamedTuple):
    """Smallest calibration sizes reaching a correction, for LDP-L and LDP-S."""

    label: int
    score: int


def _krr_beta(n_classes, epsilon):
    """``beta = k / (k - 1 + e^eps)``, the k-RR resampling probability."""
    tail = np.exp(-epsilon)
    return n_classes * tail / (1.0 + (n_classes - 1) * tail)


def _rr_constant(epsilon):
    """``c = (e^eps + 1) / (e^eps - 1)``, the binary-RR de-biasing gain."""
    return (1.0 + np.exp(-epsilon)) / -np.expm1(-epsilon)


def _label_correction(n, n_classes, epsilon, delta):
    beta = _krr_beta(n_classes, epsilon)
    h = (1.0 - beta) / (1.0 + beta)
    return np.sqrt(np.log(4.0 / delta) / (2.0 * n * h**2))


def _score_correction(group_size, epsilon, delta, n_groups):
    """``Delta_S = 2 c sqrt(ln(2T/delta) / (2 n'))``; ``inf`` when ``n' = 0``."""
    group_size = np.asarray(group_size, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return _rr_constant(epsilon) * np.sqrt(
            2.0 * np.log(2.0 * n_groups / delta) / group_size
        )


def _check_int_array(values, name, low):
    arr = np.asarray(values)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be an integer (or an array of them) >= {low}.")
    if arr.dtype.kind == "f" and not (
        np.isfinite(arr).all() and (arr == np.round(arr)).all()
    ):
        raise ValueError(f"{name} must hold integers >= {low}.")
    if (arr < low).any():
        raise ValueError(f"{name} must be >= {low}; got {arr.min()}.")
    return arr.astype(np.int64)


def _check_analysis_params(n_classes, epsilon, delta, n_groups):
    n_classes = _check_int_array(n_classes, "n_classes", 2)
    eps = np.asarray(epsilon, dtype=np.float64)
    if not (np.isfinite(eps).all() and (eps > 0).all()):
        raise ValueError(f"epsilon must be finite and > 0; got {epsilon!r}.")
    delta = np.asarray(delta, dtype=np.float64)
    if not ((delta > 0) & (delta < 1)).all():
        raise ValueError(f"delta must be in the open interval (0, 1); got {delta!r}.")
    n_groups = _check_int_array(n_groups, "n_groups", 1)
    return n_classes, eps, delta, n_groups


def _maybe_scalar(*arrays):
    arrays = np.broadcast_arrays(*arrays)
    if arrays[0].ndim == 0:
        return tuple(a.item() for a in arrays)
    return arrays


def ldp_correction(n, n_classes, epsilon, delta=0.001, n_groups=10):
    """Coverage corrections of LDP-L and LDP-S before spending any budget.

    ``Delta_L`` (Penso et al., Theorem 2.1) and ``Delta_S`` (the explicit
    Hoeffding constant of the skfedcp spec) depend only on public numbers, so
    they tell which method to pick, and whether the starred variant is
    informative (``Delta < alpha``), before any user answers.

    Parameters
    ----------
    n : int or array-like of int
        Number of calibration users (rows), ``>= 1``.
    n_classes : int or array-like of int
        Number of classes ``k >= 2`` (only ``Delta_L`` depends on it).
    epsilon : float or array-like
        Local privacy parameter of each user, ``> 0``.
    delta : float or array-like, default=0.001
        Failure probability of the guarantee, in (0, 1).
    n_groups : int or array-like of int, default=10
        Number ``T`` of LDP-S groups (bisection steps).

    Returns
    -------
    correction : LDPCorrection
        Named tuple ``(label, score)``: floats, or arrays broadcast over the
        inputs. ``score`` is ``inf`` when ``n < n_groups``.

    See Also
    --------
    ldp_sample_size : The inverse: users needed for a given correction.

    Notes
    -----
    With ``beta = k / (k - 1 + e^eps)``, ``h = (1 - beta) / (1 + beta)``,
    ``c = (e^eps + 1) / (e^eps - 1)`` and ``n' = floor(n / T)``:

    * ``Delta_L = sqrt(ln(4 / delta) / (2 n h^2))``;
    * ``Delta_S = c sqrt(2 ln(2 T / delta) / n')``.

    Both shrink as ``1 / sqrt(n)``, so for ``n`` a multiple of ``T`` their
    ratio does not depend on ``n``:
    ``Delta_S / Delta_L = 2 c h sqrt(T ln(2T/delta) / ln(4/delta))``. LDP-S
    wins only when ``h`` is small, i.e. many classes or a small
    ``epsilon`` (at ``T = 10``, ``delta = 0.001``: ``k > 25`` at
    ``epsilon = 2``, ``k > 165`` at ``epsilon = 4``).

    Examples
    --------
    >>> from skfedcp.calibrators import ldp_correction
    >>> corr = ldp_correction(23640, 8, 4.0, 0.001)
    >>> round(corr.label, 5), round(corr.score, 4)
    (0.0172, 0.095)
    >>> ldp_correction([1000, 100000], 10, 4.0).label.round(4)
    array([0.0884, 0.0088])
    """
    n = _check_int_array(n, "n", 1)
    n_classes, eps, delta, n_groups = _check_analysis_params(
        n_classes, epsilon, delta, n_groups
    )
    label = _label_correction(n, n_classes, eps, delta)
    score = _score_correction(n // n_groups, eps, delta, n_groups)
    return LDPCorrection(*_maybe_scalar(label, score))


def ldp_sample_size(correction, n_classes, epsilon, delta=0.001, n_groups=10):
    """Smallest numbers of users for which ``Delta_L`` and ``Delta_S`` reach a target.

    Parameters
    ----------
    correction : float or array-like
        Target correction ``Delta`` in (0, 1].
    n_classes : int or array-like of int
        Number of classes ``k >= 2``.
    epsilon : float or array-like
        Local privacy parameter, ``> 0``.
    delta : float or array-like, default=0.001
        Failure probability, in (0, 1).
    n_groups : int or array-like of int, default=10
        Number ``T`` of LDP-S groups.

    Returns
    -------
    sizes : LDPSampleSize
        Named tuple ``(label, score)`` of the smallest ``n`` with
        ``ldp_correction(n, ...) <= correction``. The LDP-S size is a multiple
        of ``n_groups``: ``Delta_S`` depends on ``n`` through
        ``floor(n / T)``.

    See Also
    --------
    ldp_correction : The corrections for a given ``n``.

    Notes
    -----
    ``n_L = ceil(ln(4/delta) / (2 Delta^2 h^2))`` and
    ``n_S = T ceil(2 c^2 ln(2T/delta) / Delta^2)``.

    Examples
    --------
    >>> from skfedcp.calibrators import ldp_sample_size
    >>> ldp_sample_size(0.05, 10, 4.0, delta=0.1)
    LDPSampleSize(label=1392, score=45610)
    """
    corr = np.asarray(correction, dtype=np.float64)
    if not ((corr > 0) & (corr <= 1)).all():
        raise ValueError(f"correction must be in (0, 1]; got {correction!r}.")
    n_classes, eps, delta, n_groups = _check_analysis_params(
        n_classes, epsilon, delta, n_groups
    )
    beta = _krr_beta(n_classes, eps)
    h = (1.0 - beta) / (1.0 + beta)
    n_label = np.ceil(np.log(4.0 / delta) / (2.0 * corr**2 * h**2))
    group = np.ceil(
        2.0 * _rr_constant(eps) ** 2 * np.log(2.0 * n_groups / delta) / corr**2
    )
    # Guard the float ceilings: step to the exact smallest size.
    n_label = np.maximum(n_label, 1)
    n_label = np.where(
        _label_correction(np.maximum(n_label - 1, 1), n_classes, eps, delta) <= corr,
        np.maximum(n_label - 1, 1),
        n_label,
    )
    n_label = np.where(
        _label_correction(n_label, n_classes, eps, delta) > corr, n_label + 1, n_label
    )
    group = np.maximum(group, 1)
    group = np.where(
        _score_correction(np.maximum(group - 1, 1), eps, delta, n_groups) <= corr,
        np.maximum(group - 1, 1),
        group,
    )
    group = np.where(
        _score_correction(group, eps, delta, n_groups) > corr, group + 1, group
    )
    label, score = _maybe_scalar(
        n_label.astype(np.int64), (group * n_groups).astype(np.int64)
    )
    return LDPSampleSize(label, score)


# --------------------------------------------------------------------------
# Shared search pieces
# --------------------------------------------------------------------------


def _bisection_update(lo, hi, query, estimate, target, band):
    """One step of the banded bisection: ``(lo, hi, stop)``.

    Over-covering (``estimate > target + band``) moves the upper end down,
    under-covering moves the lower end up, and an estimate inside the band
    stops the search at ``query``.
    """
    if estimate > target + band:
        return lo, query, False
    if estimate < target - band:
        return query, hi, False
    return lo, hi, True


def _check_bounds(score_bounds, owner):
    if score_bounds is None:
        raise ValueError(
            f"{owner} needs score_bounds=(low, high): the public range to search "
            "(e.g. (0, 1) for LAC and APS scores), fixed without looking at the "
            "calibration data. Pass it to the calibrator or to the wrapper."
        )
    if isinstance(score_bounds, np.ndarray):
        score_bounds = score_bounds.tolist()
    return check_privacy_params(
        bounds=score_bounds, names={"bounds": "score_bounds"}
    ).bounds


def _check_sizes(n_per_client):
    sizes = np.asarray(n_per_client)
    if sizes.ndim != 1 or sizes.shape[0] == 0:
        raise ValueError(
            f"n_per_client must be a non-empty 1-D array; got shape {sizes.shape}."
        )
    return _check_int_array(sizes, "n_per_client", 0)


def _debiased_coverage(sorted_all, sorted_noisy, thresholds, beta, n_classes):
    """``Fc_hat(q) = (Fn_hat(q) - beta Fr_hat(q)) / (1 - beta)`` at each ``q``.

    ``sorted_all`` holds the ``n k`` entries of the score matrix and
    ``sorted_noisy`` the ``n`` scores of the noisy labels, both sorted.
    """
    n = sorted_noisy.shape[0]
    count_all = np.searchsorted(sorted_all, thresholds, side="right")
    count_noisy = np.searchsorted(sorted_noisy, thresholds, side="right")
    noisy_cdf = count_noisy / n
    uniform_cdf = count_all / (n * n_classes)
    return (noisy_cdf - beta * uniform_cdf) / (1.0 - beta)


class _LDPMixin:
    """Parameters and fitted-attribute helpers shared by LDP-L and LDP-S."""

    # Whether this is the starred variant (target 1 - alpha + Delta).
    _star = False

    def _target(self, alpha, correction):
        return 1.0 - alpha + (correction if self._star else 0.0)

    def _warn_guarantee(self, alpha, correction, name):
        if not self._star and correction >= 1.0 - alpha:
            warnings.warn(
                f"{type(self).__name__}: the correction {name}={correction:.4g} is "
                f">= 1 - alpha = {1 - alpha:.4g}, so the guarantee "
                f"1 - alpha - {name} is vacuous; the threshold is still computed. "
                "Use more users, a larger epsilon or a larger delta.",
                VacuousGuaranteeWarning,
                stacklevel=3,
            )

    def _random_streams(self, random_state, n_clients):
        # "secure": every user's noise from the OS's secure generator; the
        # server's group assignment is public and uses a fresh NumPy generator.
        if isinstance(random_state, str) and random_state == SECURE:
            return np.random.RandomState(), [SECURE] * n_clients
        return BaseCalibrator._random_streams(self, random_state, n_clients)

    def _warn_infinite(self, alpha, correction, name):
        warnings.warn(
            f"{type(self).__name__}: the target 1 - alpha + {name} = "
            f"{1 - alpha + correction:.4g} is >= 1 ({name}={correction:.4g} >= "
            f"alpha={alpha:g}); the threshold is +inf and prediction sets hold "
            "every label. Use more users, a larger epsilon or a larger delta.",
            InfiniteThresholdWarning,
            stacklevel=3,
        )


_LDP_CONSTRAINTS = {
    "epsilon": [Interval(Real, 0, None, closed="neither")],
    "delta": [Interval(Real, 0, 1, closed="neither")],
    "score_bounds": ["array-like", None],
}


# --------------------------------------------------------------------------
# LDP-L: users send (features, k-RR label); the server de-biases the CDF
# --------------------------------------------------------------------------


class LDPLabelCalibrator(_LDPMixin, BaseCalibrator):
    """Local-DP calibration with randomized labels (LDP-L of Penso et al.).

    Each calibration user privatises its label with k-ary randomized response
    (k-RR) and sends its features and the noisy label. The server scores
    every class of every row with the model, removes the known label noise
    from the empirical score CDF, and returns the smallest threshold whose
    de-biased coverage reaches the target ``1 - alpha``.

    Users are the rows; ``client_ids`` only groups them (each client forwards
    its users' messages). The calibrator needs the **score of every class**
    for every calibration row, an ``(n, k)`` matrix, and the labels
    (``requires_score_matrix = True``).

    **Message** (one per client): ``{"n": n_j, "scores": (n_j, k) floats,
    "noisy_labels": n_j ints}``. ``scores`` is a deterministic function of the
    features, which LDP-L sends in the clear: in a deployment the users send
    ``x`` and the server computes the scores itself. Only the labels are
    protected.

    Parameters
    ----------
    epsilon : float, default=1.0
        Local privacy parameter of each user's label, ``> 0``.
    delta : float, default=0.001
        Failure probability of the guarantee, in (0, 1). Enters only the
        correction ``Delta_L``.
    search : {"exact", "bisection"}, default="exact"
        ``"exact"``: the smallest score value whose de-biased coverage reaches
        the target (searching every distinct score is exhaustive because the
        estimate only changes there). ``"bisection"``: the paper's banded
        bisection on ``score_bounds`` with band ``Delta_L / 2`` and
        ``n_steps`` steps (its guarantee is weaker, see Notes).
    n_steps : int, default=20
        Number of bisection steps ``T`` (``"bisection"`` only; no privacy
        cost, the search is post-processing).
    score_bounds : tuple of two floats, default=None
        Public range searched by ``"bisection"``, e.g. ``(0, 1)`` for LAC and
        APS scores (:class:`~skfedcp.classification.PrivateConformalClassifier`
        fills in its score's natural bounds). Unused by ``"exact"``.

    Attributes
    ----------
    threshold_ : float
        Calibrated threshold; ``+inf`` means every label.
    correction_ : float
        The correction ``Delta_L``.
    target_coverage_ : float
        ``1 - alpha`` (``1 - alpha + Delta_L`` for the starred variant).
    beta_ : float
        Probability that k-RR resamples a label, ``k / (k - 1 + e^epsilon)``.
    epsilon_eff_ : float
        ``epsilon / sqrt(n)``: the heuristic shuffle-model level the paper
        reports. Informational only, not a certified guarantee.
    epsilon_spent_ : float
        Privacy level of each user's release (``epsilon``).
    n_classes_ : int
        Number of classes ``k`` (columns of the score matrix).
    n_steps_used_ : int
        Bisection steps made (0 with ``search="exact"``).
    stopped_early_ : bool
        Whether the bisection stopped inside the band.
    messages_ : dict of ndarray
        ``client``, ``n``, ``scores`` and ``noisy_labels`` of each client.
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels.
    n_clients_ : int
        Number of clients.
    n_per_client_ : ndarray of shape (n_clients,)
        Calibration users of each client.
    calibration_info_ : dict
        The public plan: ``correction``, ``target``, ``beta``, ``h``,
        ``coverage_lower`` (guaranteed with probability ``confidence``).

    See Also
    --------
    LDPLabelStarCalibrator : The variant guaranteeing ``1 - alpha``.
    LDPScoreCalibrator : Protects features and labels, needs more users.
    ldp_correction : ``Delta_L`` and ``Delta_S`` before spending budget.

    Notes
    -----
    **Privacy.** Each user's label is ``epsilon``-LDP (k-RR's output
    probabilities differ by exactly ``e^epsilon`` across labels); everything
    the server does is post-processing. Features are **not** protected. The
    privacy unit is one row: a client holding ``m`` rows releases ``m``
    independent k-RR labels (``m * epsilon`` for the client by composition).

    **Coverage.** With ``beta`` as above, ``F^n = (1 - beta) F^c + beta F^r``
    (noisy-label CDF, true-label CDF, uniform-label CDF), so
    ``Fc_hat = (Fn_hat - beta Fr_hat) / (1 - beta)`` is unbiased, and with
    probability ``>= 1 - delta`` over the calibration draw and the noise,
    ``sup_q |Fc_hat(q) - F^c(q)| <= Delta_L`` with
    ``Delta_L = sqrt(ln(4/delta) / (2 n h^2))``, ``h = (1-beta)/(1+beta)``.
    Hence, for i.i.d. users and test point and with that probability:

    * ``"exact"``: ``P(y in C(x) | calibration) >= 1 - alpha - Delta_L``
      (and ``<= 1 - alpha + Delta_L`` for continuous scores);
    * ``"bisection"``: ``>= 1 - alpha - 1.5 Delta_L`` (band plus error; the
      paper claims ``Delta_L``, spec A5).

    The guarantee is conditional on the calibration set (PAC-style), not
    the marginal one of split conformal prediction.

    References
    ----------
    .. [1] C. Penso, B. Mahpud, J. Goldberger, O. Sheffet. Privacy-Preserving
       Conformal Prediction Under Local Differential Privacy. arXiv
       2505.15721, 2025.
    .. [2] C. Penso, J. Goldberger. A Conformal Prediction Score that is
       Robust to Label Noise. 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedcp.calibrators import LDPLabelCalibrator
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.dirichlet(np.full(4, 0.3), size=5000)
    >>> labels = np.array([rng.choice(4, p=p) for p in proba])
    >>> scores = 1.0 - proba                     # LAC score of every class
    >>> cal = LDPLabelCalibrator(epsilon=4.0).fit(
    ...     scores, labels=labels, alpha=0.1, random_state=0)
    >>> round(cal.correction_, 4), round(cal.threshold_, 2)
    (0.0331, 0.82)
    """

    _parameter_constraints = {
        **_LDP_CONSTRAINTS,
        "search": [StrOptions({"exact", "bisection"})],
        "n_steps": [Interval(Integral, 1, None, closed="left")],
    }

    _randomized = True

    #: The calibrator needs the ``(n, k)`` score matrix and the labels.
    requires_score_matrix = True

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=0.001,
        search="exact",
        n_steps=20,
        score_bounds=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.search = search
        self.n_steps = n_steps
        self.score_bounds = score_bounds

    def plan(self, n_per_client, alpha, *, n_classes=None):
        """Public, data-free quantities: ``beta``, ``Delta_L``, target, guarantee.

        Parameters
        ----------
        n_per_client : array-like of int
            Calibration users of each client.
        alpha : float
            Miscoverage level in (0, 1).
        n_classes : int, default=None
            Number of classes; ``None`` uses the fitted ``n_classes_``.

        Returns
        -------
        plan : dict
            ``feasible`` (False when the target reaches 1), ``n``,
            ``n_classes``, ``beta``, ``h``, ``correction``, ``target``,
            ``coverage_lower`` and ``confidence`` (``1 - delta``).
        """
        self._validate_params()
        alpha = check_alpha(alpha)
        if n_classes is None:
            n_classes = getattr(self, "n_classes_", None)
            if n_classes is None:
                raise ValueError(
                    "n_classes is required before fit (the number of columns of "
                    "the score matrix)."
                )
        n_classes = int(_check_int_array(n_classes, "n_classes", 2))
        n = int(_check_sizes(n_per_client).sum())
        if n < 1:
            raise ValueError("LDP-L needs at least one calibration user; got 0.")
        beta = float(_krr_beta(n_classes, self.epsilon))
        correction = float(_label_correction(n, n_classes, self.epsilon, self.delta))
        target = self._target(alpha, correction)
        slack = correction * (1.5 if self.search == "bisection" else 1.0)
        feasible = target < 1.0
        return {
            "feasible": feasible,
            "n": n,
            "n_classes": n_classes,
            "beta": beta,
            "h": (1.0 - beta) / (1.0 + beta),
            "correction": correction,
            "target": target,
            "coverage_lower": min(max(target - slack, 0.0), 1.0) if feasible else 1.0,
            "confidence": 1.0 - self.delta,
        }

    def coverage_bounds(self, n_per_client, alpha, *, n_classes=None):
        """Marginal coverage implied by the PAC guarantee.

        With probability ``1 - delta`` the conditional coverage is at least
        ``coverage_lower`` of :meth:`plan`, so the marginal coverage is at
        least ``(1 - delta) * coverage_lower``; with ``"exact"`` and
        continuous scores it is at most ``(1 - delta)(target + Delta_L) +
        delta``.
        """
        plan = self.plan(n_per_client, alpha, n_classes=n_classes)
        if not plan["feasible"]:
            return CoverageBounds(1.0, 1.0)
        lower = (1.0 - self.delta) * plan["coverage_lower"]
        upper = np.nan
        if self.search == "exact":
            upper = min(
                1.0,
                (1.0 - self.delta) * (plan["target"] + plan["correction"]) + self.delta,
            )
        return CoverageBounds(lower, upper)

    def client_step(
        self, scores, *, labels, alpha=None, n_per_client=None, random_state=None
    ):
        """Privatise this client's labels with k-RR (the users' side).

        Parameters
        ----------
        scores : array-like of shape (n_j, n_classes)
            Score of every class for this client's rows (computed from the
            features, which LDP-L reveals).
        labels : array-like of int of shape (n_j,)
            True labels, encoded in ``0..n_classes-1``; never sent.
        alpha : float, default=None
            Unused (the users' step does not depend on it).
        n_per_client : array-like of int, default=None
            Unused.
        random_state : int, RandomState, Generator, "secure" or None
            Source of the k-RR noise.

        Returns
        -------
        message : dict
            ``{"n": n_j, "scores": (n_j, k) float array, "noisy_labels": n_j
            ints}``.
        """
        self._validate_params()
        matrix = _check_score_matrix(scores)
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.shape[0] != matrix.shape[0]:
            raise ValueError(
                f"labels must be 1-D with one entry per row of scores "
                f"({matrix.shape[0]}); got shape {labels.shape}."
            )
        noisy = k_ary_randomized_response(
            labels,
            n_classes=matrix.shape[1],
            epsilon=self.epsilon,
            random_state=random_state,
        )
        return {"n": matrix.shape[0], "scores": matrix, "noisy_labels": noisy}

    def server_step(self, messages, *, alpha, n_per_client=None, random_state=None):
        """De-bias the score CDF and search the threshold (the server's side).

        Parameters
        ----------
        messages : list of dict or dict of array-like
            The clients' messages (see :meth:`client_step`).
        alpha : float
            Miscoverage level in (0, 1).
        n_per_client : array-like of int, default=None
            Unused (the sizes are in the messages).
        random_state : None
            Unused: the server step is deterministic.

        Returns
        -------
        threshold : float
        """
        return self._server_search(messages, alpha=alpha)[0]

    def _server_search(self, messages, *, alpha):
        self._validate_params()
        alpha = check_alpha(alpha)
        stacked = stack_messages(messages)
        if not {"scores", "noisy_labels"} <= stacked.keys():
            raise ValueError(
                "LDP-L messages must carry 'scores' and 'noisy_labels' (see "
                "client_step)."
            )
        matrix = _check_score_matrix(
            np.concatenate(
                [
                    np.asarray(m, dtype=np.float64)
                    for m in _per_client(stacked["scores"])
                ]
            )
        )
        noisy = np.concatenate(
            [np.asarray(v).ravel() for v in _per_client(stacked["noisy_labels"])]
        )
        n, k = matrix.shape
        if noisy.shape[0] != n:
            raise ValueError("noisy_labels must have one entry per row of scores.")
        if noisy.dtype.kind not in "iu" or (
            n and (noisy.min() < 0 or noisy.max() >= k)
        ):
            raise ValueError(f"noisy_labels must be integers in 0..{k - 1}.")
        plan = self.plan([n], alpha, n_classes=k)
        correction, target = plan["correction"], plan["target"]
        info = {"n_steps_used": 0, "stopped_early": False}
        if not plan["feasible"]:
            self._warn_infinite(alpha, correction, "Delta_L")
            return np.inf, plan, info
        self._warn_guarantee(alpha, correction, "Delta_L")
        beta = plan["beta"]
        sorted_all = np.sort(matrix, axis=None)
        sorted_noisy = np.sort(matrix[np.arange(n), noisy])
        if self.search == "exact":
            candidates = np.unique(sorted_all)
            coverage = _debiased_coverage(sorted_all, sorted_noisy, candidates, beta, k)
            hits = np.flatnonzero(coverage >= target)
            # The estimate reaches 1 at the largest score, so hits is empty
            # only through rounding when the target is within 1e-16 of 1.
            threshold = float(candidates[hits[0]]) if hits.size else np.inf
            return threshold, plan, info
        lo, hi = _check_bounds(self.score_bounds, type(self).__name__)
        band = correction / 2.0
        for step in range(1, self.n_steps + 1):
            query = (lo + hi) / 2.0
            estimate = _debiased_coverage(
                sorted_all, sorted_noisy, np.array([query]), beta, k
            )[0]
            lo, hi, stop = _bisection_update(lo, hi, query, estimate, target, band)
            if stop:
                return query, plan, {"n_steps_used": step, "stopped_early": True}
        return query, plan, {"n_steps_used": self.n_steps, "stopped_early": False}

    def fit(
        self,
        scores,
        client_ids=None,
        *,
        labels=None,
        alpha,
        random_state=None,
        n_jobs=None,
    ):
        """Simulate the round: users randomize labels, the server calibrates.

        Parameters
        ----------
        scores : array-like of shape (n_samples, n_classes)
            Score of every class for every calibration row.
        client_ids : array-like of shape (n_samples,) or None, default=None
            Client of each row; ``None`` means one client.
        labels : array-like of int of shape (n_samples,)
            True labels encoded in ``0..n_classes-1`` (columns of
            ``scores``). Required; keyword-only so that the signature stays
            that of :meth:`BaseCalibrator.fit`.
        alpha : float
            Miscoverage level in (0, 1).
        random_state : int, RandomState instance, "secure" or None, \
                default=None
            Seeds the users' k-RR noise (one stream per client);
            ``"secure"`` draws it from the operating system's secure
            generator (not reproducible, for deployment).
        n_jobs : int, default=None
            Unused; the simulation is vectorised.

        Returns
        -------
        self : LDPLabelCalibrator
            The fitted calibrator.
        """
        self._validate_params()
        alpha = check_alpha(alpha)
        matrix = _check_score_matrix(scores)
        if labels is None:
            raise ValueError(
                f"{type(self).__name__}.fit needs labels= (the true labels, "
                "randomized on the users' side) with the score matrix."
            )
        labels = np.asarray(labels)
        if labels.ndim != 1 or labels.shape[0] != matrix.shape[0]:
            raise ValueError(
                f"labels must be 1-D with one entry per row of scores "
                f"({matrix.shape[0]}); got shape {labels.shape}."
            )
        partition = ClientPartition(client_ids, matrix.shape[0])
        _, rngs = self._random_streams(random_state, partition.n_clients)
        messages = [
            self.client_step(m, labels=y, random_state=r)
            for m, y, r in zip(
                partition.split(matrix), partition.split(labels), rngs, strict=True
            )
        ]
        stacked = stack_messages(messages)
        threshold, plan, info = self._server_search(stacked, alpha=alpha)
        self.threshold_ = float(threshold)
        self.correction_ = plan["correction"]
        self.target_coverage_ = plan["target"]
        self.beta_ = plan["beta"]
        self.n_classes_ = plan["n_classes"]
        self.epsilon_eff_ = self.epsilon / math.sqrt(plan["n"])
        self.epsilon_spent_ = float(self.epsilon)
        self.n_steps_used_ = info["n_steps_used"]
        self.stopped_early_ = info["stopped_early"]
        self.messages_ = {"client": partition.clients, **stacked}
        self.clients_ = partition.clients
        self.n_clients_ = partition.n_clients
        self.n_per_client_ = partition.sizes
        self.calibration_info_ = plan
        return self


class LDPLabelStarCalibrator(LDPLabelCalibrator):
    """LDP-L* : randomized labels, calibrated to guarantee ``1 - alpha``.

    Same protocol and parameters as :class:`LDPLabelCalibrator`, but the
    server targets ``1 - alpha + Delta_L``, so that with probability
    ``>= 1 - delta`` the coverage is at least ``1 - alpha`` (``"exact"``
    search). When ``1 - alpha + Delta_L >= 1`` (``Delta_L >= alpha``: too few
    users or too small an ``epsilon``) the threshold is ``+inf`` and every
    prediction set holds all labels.

    Parameters
    ----------
    epsilon : float, default=1.0
        Local privacy parameter of each user's label, ``> 0``.
    delta : float, default=0.001
        Failure probability of the guarantee, in (0, 1).
    search : {"exact", "bisection"}, default="exact"
        Threshold search (see :class:`LDPLabelCalibrator`). With
        ``"bisection"`` only ``1 - alpha - Delta_L / 2`` is provable.
    n_steps : int, default=20
        Bisection steps (``"bisection"`` only).
    score_bounds : tuple of two floats, default=None
        Public range searched by ``"bisection"``; unused by ``"exact"``.

    Attributes
    ----------
    threshold_ : float
        Calibrated threshold; ``+inf`` means every label.
    correction_ : float
        The correction ``Delta_L``.
    target_coverage_ : float
        ``1 - alpha + Delta_L``.
    beta_ : float
        k-RR resampling probability.
    epsilon_eff_ : float
        Heuristic shuffle-model level ``epsilon / sqrt(n)`` (informational).
    epsilon_spent_ : float
        Privacy level of each user's label (``epsilon``).
    n_classes_ : int
        Number of classes.
    n_steps_used_ : int
        Bisection steps made (0 with ``"exact"``).
    stopped_early_ : bool
        Whether the bisection stopped inside the band.
    messages_ : dict of ndarray
        What the server received from each client.
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels.
    n_clients_ : int
        Number of clients.
    n_per_client_ : ndarray of shape (n_clients,)
        Calibration users of each client.
    calibration_info_ : dict
        The public plan (see :meth:`LDPLabelCalibrator.plan`).

    See Also
    --------
    LDPLabelCalibrator : The variant with guarantee ``1 - alpha - Delta_L``.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedcp.calibrators import LDPLabelStarCalibrator
    >>> rng = np.random.default_rng(0)
    >>> proba = rng.dirichlet(np.full(4, 0.3), size=5000)
    >>> labels = np.array([rng.choice(4, p=p) for p in proba])
    >>> cal = LDPLabelStarCalibrator(epsilon=4.0).fit(
    ...     1.0 - proba, labels=labels, alpha=0.1, random_state=0)
    >>> round(cal.target_coverage_, 4)
    0.9331
    """

    _star = True


def _per_client(field):
    """The per-client entries of a stacked message field."""
    return list(np.asarray(field, dtype=object))


def _check_score_matrix(scores):
    try:
        matrix = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError("scores must be an array of numbers.") from exc
    if matrix.ndim != 2:
        raise ValueError(
            "scores must be 2-D, the score of every class for every row "
            f"(n_samples, n_classes); got shape {matrix.shape}. LDP-L needs the "
            "score matrix and the labels: use PrivateConformalClassifier or pass "
            "labels= to fit."
        )
    if matrix.shape[1] < 2:
        raise ValueError(
            f"scores must have n_classes >= 2 columns; got {matrix.shape[1]}."
        )
    if np.isnan(matrix).any():
        raise ValueError("scores must not contain NaN.")
    return matrix


# --------------------------------------------------------------------------
# LDP-S: users answer one randomized binary question each, in T rounds
# --------------------------------------------------------------------------


class LDPScoreCalibrator(_LDPMixin, BaseCalibrator):
    """Local-DP calibration by interactive bisection on private scores (LDP-S).

    Each user computes its own conformity score with the shipped model and
    answers **one** yes/no question, "is your score below ``q``?", through
    binary randomized response. The server splits the ``n`` users at random
    into ``T = n_groups`` disjoint groups of ``n' = floor(n / T)``; in round
    ``j`` it asks group ``j`` about the midpoint ``q_j`` of its current
    interval, de-biases the fraction of "yes" answers into an estimate
    ``Z_j`` of ``P(score < q_j)``, and halves the interval, stopping as soon
    as ``Z_j`` lies within ``Delta_S / 2`` of the target. Users are the rows;
    ``client_ids`` only groups them (each client forwards its users'
    answers).

    **Protocol** (interactive; the simulation in :meth:`fit` runs exactly
    these calls, and a network adapter can drive them remotely):

    1. ``state = server_init(n_per_client, alpha=..., random_state=...)``:
       groups, correction and the first query; ``state`` is a plain dict.
    2. While ``not state["done"]``: each client ``j`` receives
       ``state["queries"][j] = {"round": r, "threshold": q_r, "users":
       local row indices}`` and returns
       ``client_respond(scores_j, query) = {"round": r, "users": ...,
       "reports": one randomized bit per asked user}``; then
       ``state = server_update(state, messages)``.
    3. ``state["threshold"]`` is the calibrated threshold.

    **Message per round**: one bit per asked user (``n'`` bits in total per
    round); clients with no asked user send nothing (``None``).

    Parameters
    ----------
    epsilon : float, default=1.0
        Local privacy parameter of each user, ``> 0``; protects the user's
        whole example (features and label).
    delta : float, default=0.001
        Failure probability of the guarantee, in (0, 1).
    n_groups : int, default=10
        Number ``T`` of groups, i.e. the maximum number of bisection rounds;
        the resolution is ``(hi - lo) / 2^T``. Needs ``n >= T``.
    final : {"upper", "paper"}, default="upper"
        Threshold returned when no round stops inside the band: the current
        upper end, whose coverage is provably at least the target (``+inf``
        if the upper end never moved), or the last query ``q_T`` (the paper),
        which needs the paper's assumption that no interval of length
        ``(hi - lo) / 2^T`` holds more than ``Delta_S`` of score mass. The
        two differ by one resolution step; the assumption fails when scores
        pile up, e.g. deterministic APS scores of an over-confident model
        just below 1, where ``"paper"`` can under-cover badly.
    score_bounds : tuple of two floats, default=None
        Public range ``(lo, hi)`` searched, fixed without looking at the data:
        ``(0, 1)`` for LAC and APS scores (the wrapper fills in its score's
        natural bounds); required otherwise. Scores outside it need no
        clipping: a score above the range answers "no" to every query, which
        is conservative. A result at the upper end means ``+inf``.

    Attributes
    ----------
    threshold_ : float
        Calibrated threshold; ``+inf`` means every label (or an infinite
        interval).
    correction_ : float
        The correction ``Delta_S``.
    target_coverage_ : float
        ``1 - alpha`` (``1 - alpha + Delta_S`` for the starred variant).
    group_size_ : int
        Users per group, ``n' = floor(n / T)``.
    n_steps_used_ : int
        Rounds run (groups contacted).
    stopped_early_ : bool
        Whether a round stopped inside the band.
    epsilon_eff_ : float
        Heuristic shuffle-model level ``epsilon / sqrt(n)`` (informational).
    epsilon_spent_ : float
        Privacy level of each asked user (``epsilon``; 0 if no round ran).
    history_ : dict of ndarray
        ``threshold`` (query) and ``estimate`` (``Z_j``) of each round.
    transcript_ : dict of ndarray
        One entry per (user, query) pair: ``round``, ``client`` and ``user``
        (row index within its client). Each user appears at most once.
    messages_ : dict of ndarray
        ``client``, ``n_reports`` and ``reports`` (object array: the bits each
        client forwarded, in round order). No score is stored.
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels.
    n_clients_ : int
        Number of clients.
    n_per_client_ : ndarray of shape (n_clients,)
        Calibration users of each client.
    calibration_info_ : dict
        The public plan (see :meth:`plan`).

    See Also
    --------
    LDPScoreStarCalibrator : The variant guaranteeing ``1 - alpha``.
    LDPLabelCalibrator : Label-only privacy, smaller correction for few classes.
    ldp_correction : ``Delta_L`` and ``Delta_S`` before spending budget.

    Notes
    -----
    **Privacy.** A user's only output is one binary randomized response
    (``P(report b | bit b) = e^eps / (1 + e^eps)``), so its whole example is
    ``epsilon``-LDP; later queries depend only on other users' answers
    (sequential interaction, one message per user). The privacy unit is one
    row: a client with ``m`` rows releases up to ``m`` answers.

    **Coverage.** ``Z_j = c * mean(reports) - 1 / (e^eps - 1)`` with
    ``c = (e^eps + 1)/(e^eps - 1)`` is unbiased for ``P(S < q_j)``; by
    Hoeffding's inequality over ``n'`` fresh users and a union bound over the
    ``T`` rounds, with probability ``>= 1 - delta`` every round satisfies
    ``|Z_j - P(S < q_j)| <= t_S = c sqrt(ln(2T/delta) / (2 n'))``. With
    ``Delta_S = 2 t_S`` and i.i.d. users and test point, with that
    probability ``P(y in C(x) | calibration) >= 1 - alpha - Delta_S``
    (``1 - alpha`` for the starred variant) when a round stops in the band
    or with ``final="upper"``; with ``final="paper"`` a search that runs to
    the end also needs the paper's assumption that an interval of length
    ``(hi - lo) / 2^T`` holds at most ``Delta_S`` of score mass. The
    constant of ``Delta_S`` is derived in the skfedcp spec; the paper states
    only its order.

    Unlike LDP-L, ``Delta_S`` does not depend on the number of classes, so
    LDP-S also calibrates regression scores given public ``score_bounds``.

    References
    ----------
    .. [1] C. Penso, B. Mahpud, J. Goldberger, O. Sheffet. Privacy-Preserving
       Conformal Prediction Under Local Differential Privacy. arXiv
       2505.15721, 2025.
    .. [2] M. Gaboardi, R. Rogers, O. Sheffet. Locally Private Mean Estimation:
       Z-test and Tight Confidence Intervals. AISTATS 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedcp.calibrators import LDPScoreCalibrator
    >>> scores = np.random.default_rng(0).uniform(size=20000)
    >>> cal = LDPScoreCalibrator(epsilon=4.0, score_bounds=(0, 1))
    >>> cal = cal.fit(scores, alpha=0.1, random_state=0)
    >>> round(cal.correction_, 4), cal.threshold_, cal.n_steps_used_
    (0.1032, 0.875, 3)
    """

    _parameter_constraints = {
        **_LDP_CONSTRAINTS,
        "n_groups": [Interval(Integral, 1, None, closed="left")],
        "final": [StrOptions({"paper", "upper"})],
    }

    _randomized = True

    #: The protocol runs in rounds (server_init / client_respond /
    #: server_update) rather than one client_step / server_step exchange.
    interactive = True

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=0.001,
        n_groups=10,
        final="upper",
        score_bounds=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.n_groups = n_groups
        self.final = final
        self.score_bounds = score_bounds

    def plan(self, n_per_client, alpha):
        """Public, data-free quantities: group size, ``Delta_S``, target.

        Parameters
        ----------
        n_per_client : array-like of int
            Calibration users of each client.
        alpha : float
            Miscoverage level in (0, 1).

        Returns
        -------
        plan : dict
            ``feasible`` (False when the target reaches 1), ``n``,
            ``group_size``, ``c``, ``correction``, ``band``, ``target``,
            ``coverage_lower`` and ``confidence`` (``1 - delta``).
        """
        self._validate_params()
        alpha = check_alpha(alpha)
        n = int(_check_sizes(n_per_client).sum())
        if n < self.n_groups:
            raise ValueError(
                f"LDP-S needs at least n_groups={self.n_groups} users (one per "
                f"group); got n={n}. Lower n_groups or add users."
            )
        group_size = n // self.n_groups
        correction = float(
            _score_correction(group_size, self.epsilon, self.delta, self.n_groups)
        )
        target = self._target(alpha, correction)
        feasible = target < 1.0
        return {
            "feasible": feasible,
            "n": n,
            "group_size": group_size,
            "c": float(_rr_constant(self.epsilon)),
            "correction": correction,
            "band": correction / 2.0,
            "target": target,
            "coverage_lower": min(max(target - correction, 0.0), 1.0)
            if feasible
            else 1.0,
            "confidence": 1.0 - self.delta,
        }

    def coverage_bounds(self, n_per_client, alpha):
        """Marginal lower bound ``(1 - delta) * coverage_lower``; no upper bound."""
        plan = self.plan(n_per_client, alpha)
        if not plan["feasible"]:
            return CoverageBounds(1.0, 1.0)
        return CoverageBounds((1.0 - self.delta) * plan["coverage_lower"], np.nan)

    # -- the interactive protocol ------------------------------------------

    def server_init(self, n_per_client, *, alpha, random_state=None):
        """Start the protocol: assign users to groups and pose the first query.

        Parameters
        ----------
        n_per_client : array-like of int
            Number of users of each client (public).
        alpha : float
            Miscoverage level in (0, 1).
        random_state : int, RandomState instance or None, default=None
            Seeds the random assignment of users to groups.

        Returns
        -------
        state : dict
            Plain values and arrays: the plan (``correction``, ``band``,
            ``target``, ...), ``groups`` (``(T, n')`` global user indices,
            users numbered client by client), the interval ``lo``/``hi``,
            ``round`` (rounds completed), ``done``, ``threshold`` (set when
            done), ``stopped_early``, ``history`` and ``queries`` (one dict
            per client for the next round; empty when done).
        """
        plan = self.plan(n_per_client, alpha)
        alpha = check_alpha(alpha)
        sizes = _check_sizes(n_per_client)
        lo, hi = _check_bounds(self.score_bounds, type(self).__name__)
        if isinstance(random_state, str) and random_state == SECURE:
            rng = np.random.RandomState()  # the assignment is public
        else:
            rng = check_random_state(random_state)
        group_size, n_groups = plan["group_size"], self.n_groups
        groups = rng.permutation(plan["n"])[: n_groups * group_size]
        state = {
            **plan,
            "alpha": alpha,
            "epsilon": float(self.epsilon),
            "n_groups": n_groups,
            "final": self.final,
            "bounds": (lo, hi),
            "n_per_client": sizes,
            "groups": groups.reshape(n_groups, group_size),
            "lo": lo,
            "hi": hi,
            "round": 0,
            "done": False,
            "threshold": None,
            "stopped_early": False,
            "history": {"threshold": [], "estimate": []},
            "queries": [],
        }
        if not plan["feasible"]:
            self._warn_infinite(alpha, plan["correction"], "Delta_S")
            return {**state, "done": True, "threshold": np.inf}
        self._warn_guarantee(alpha, plan["correction"], "Delta_S")
        return _pose_query(state)

    def client_respond(self, scores, query, *, random_state=None):
        """Answer one query for the asked users of this client (users' side).

        Each asked user computes ``b = 1{score < threshold}`` (strict, as in
        the paper: conservative) and reports it through binary randomized
        response. A user must answer at most once over the whole protocol.

        Parameters
        ----------
        scores : array-like of shape (n_j,)
            Scores of this client's users (each user knows only its own).
        query : dict
            ``{"round", "threshold", "users"}`` from ``state["queries"]``.
        random_state : int, RandomState, Generator, "secure" or None
            Source of the users' randomized-response noise.

        Returns
        -------
        message : dict
            ``{"round": r, "users": asked rows, "reports": 0/1 ints}``.
        """
        self._validate_params()
        scores = check_scores(scores, allow_inf=True)
        users = _check_users(query, scores.shape[0])
        bits = (scores[users] < float(query["threshold"])).astype(np.int64)
        reports = binary_randomized_response(
            bits, epsilon=self.epsilon, random_state=random_state
        )
        return {"round": int(query["round"]), "users": users, "reports": reports}

    def server_update(self, state, messages):
        """Aggregate one round's answers and move the bisection (server's side).

        Parameters
        ----------
        state : dict
            From :meth:`server_init` or the previous :meth:`server_update`.
        messages : list of dict or None
            One entry per client, in the order of ``n_per_client``: the
            client's :meth:`client_respond` message, or ``None`` for a client
            with no asked user.

        Returns
        -------
        state : dict
            A new state (the argument is not modified).
        """
        if state["done"]:
            raise ValueError("the LDP-S protocol is already finished (done=True).")
        queries = state["queries"]
        if len(messages) != len(queries):
            raise ValueError(
                f"expected one message per client ({len(queries)}); got "
                f"{len(messages)}."
            )
        reports = []
        for query, message in zip(queries, messages, strict=True):
            asked = np.asarray(query["users"])
            if message is None:
                if asked.size:
                    raise ValueError(
                        f"a client asked {asked.size} user(s) in round "
                        f"{query['round']} sent no message."
                    )
                continue
            if int(message["round"]) != query["round"] or not np.array_equal(
                np.asarray(message["users"]), asked
            ):
                raise ValueError(
                    f"a message does not answer the round-{query['round']} query "
                    "(wrong round or users)."
                )
            bits = np.asarray(message["reports"])
            if bits.shape != asked.shape or not np.isin(bits, (0, 1)).all():
                raise ValueError("reports must hold one 0/1 bit per asked user.")
            reports.append(bits)
        reports = np.concatenate(reports) if reports else np.empty(0)
        if reports.shape[0] != state["group_size"]:
            raise ValueError(
                f"round {queries[0]['round']} received {reports.shape[0]} answers; "
                f"the group has {state['group_size']} users."
            )
        estimate = debias_fraction(float(reports.mean()), epsilon=state["epsilon"])
        query = queries[0]["threshold"]
        lo, hi, stop = _bisection_update(
            state["lo"], state["hi"], query, estimate, state["target"], state["band"]
        )
        history = {
            "threshold": [*state["history"]["threshold"], query],
            "estimate": [*state["history"]["estimate"], estimate],
        }
        new = {
            **state,
            "lo": lo,
            "hi": hi,
            "round": state["round"] + 1,
            "history": history,
            "queries": [],
        }
        if stop:
            threshold = query
        elif new["round"] == state["n_groups"]:
            threshold = query if state["final"] == "paper" else hi
        else:
            return _pose_query(new)
        if threshold >= state["bounds"][1]:
            threshold = np.inf
        return {
            **new,
            "done": True,
            "threshold": float(threshold),
            "stopped_early": bool(stop),
        }

    def client_step(self, scores, *, alpha=None, n_per_client=None, random_state=None):
        """Not available: LDP-S is interactive (see :meth:`client_respond`)."""
        raise NotImplementedError(
            "LDP-S runs in rounds: use server_init, client_respond and "
            "server_update (or fit to simulate them)."
        )

    def server_step(self, messages, *, alpha, n_per_client=None, random_state=None):
        """Not available: LDP-S is interactive (see :meth:`server_update`)."""
        raise NotImplementedError(
            "LDP-S runs in rounds: use server_init, client_respond and "
            "server_update (or fit to simulate them)."
        )

    def fit(self, scores, client_ids=None, *, alpha, random_state=None, n_jobs=None):
        """Simulate the interactive protocol in-process.

        Runs :meth:`server_init`, then rounds of :meth:`client_respond` and
        :meth:`server_update`, and checks on the users' side that no user is
        asked twice (a ``RuntimeError`` otherwise). The calibrator keeps only
        what the server sees (bits, queries, estimates), never the scores.

        Parameters
        ----------
        scores : array-like of shape (n_samples,)
            Each user's conformity score (of its true label).
        client_ids : array-like of shape (n_samples,) or None, default=None
            Client of each row; ``None`` means one client.
        alpha : float
            Miscoverage level in (0, 1).
        random_state : int, RandomState instance, "secure" or None, \
                default=None
            Seeds the group assignment and the users' noise (one stream per
            client); ``"secure"``: the users' noise comes from the operating
            system's secure generator (not reproducible).
        n_jobs : int, default=None
            Unused.

        Returns
        -------
        self : LDPScoreCalibrator
            The fitted calibrator.
        """
        self._validate_params()
        alpha = check_alpha(alpha)
        scores = check_scores(scores, allow_inf=True)
        partition = ClientPartition(client_ids, scores.shape[0])
        rng, rngs = self._random_streams(random_state, partition.n_clients)
        local = partition.split(scores)
        answered = [np.zeros(size, dtype=np.intp) for size in partition.sizes]
        received = [[] for _ in range(partition.n_clients)]
        log = {"round": [], "client": [], "user": []}
        state = self.server_init(partition.sizes, alpha=alpha, random_state=rng)
        while not state["done"]:
            messages = []
            for j, query in enumerate(state["queries"]):
                users = np.asarray(query["users"], dtype=np.intp)
                if users.size == 0:
                    messages.append(None)
                    continue
                answered[j][users] += 1  # the users' own memory
                if (answered[j][users] > 1).any():
                    raise RuntimeError(
                        "LDP-S simulation: a user was queried twice; each user "
                        "answers at most once."
                    )
                message = self.client_respond(local[j], query, random_state=rngs[j])
                messages.append(message)
                received[j].append(message["reports"])
                log["round"].append(np.full(users.size, query["round"]))
                log["client"].append(
                    np.repeat(partition.clients[j : j + 1], users.size)
                )
                log["user"].append(users)
            state = self.server_update(state, messages)
        reports = np.empty(partition.n_clients, dtype=object)
        reports[:] = [
            np.concatenate(r) if r else np.empty(0, dtype=np.int64) for r in received
        ]
        self.threshold_ = float(state["threshold"])
        self.correction_ = state["correction"]
        self.target_coverage_ = state["target"]
        self.group_size_ = state["group_size"]
        self.n_steps_used_ = state["round"]
        self.stopped_early_ = state["stopped_early"]
        self.epsilon_eff_ = self.epsilon / math.sqrt(state["n"])
        self.epsilon_spent_ = float(self.epsilon) if state["round"] else 0.0
        self.history_ = {
            k: np.asarray(v, dtype=np.float64) for k, v in state["history"].items()
        }
        self.transcript_ = {
            "round": _concat(log["round"], np.intp),
            "client": _concat(log["client"], partition.clients.dtype),
            "user": _concat(log["user"], np.intp),
        }
        self.messages_ = {
            "client": partition.clients,
            "n_reports": np.array([r.shape[0] for r in reports]),
            "reports": reports,
        }
        self.clients_ = partition.clients
        self.n_clients_ = partition.n_clients
        self.n_per_client_ = partition.sizes
        self.calibration_info_ = self.plan(partition.sizes, alpha)
        return self


class LDPScoreStarCalibrator(LDPScoreCalibrator):
    """LDP-S* : interactive private-score bisection guaranteeing ``1 - alpha``.

    Same protocol and parameters as :class:`LDPScoreCalibrator`, but the
    server targets ``1 - alpha + Delta_S``, so that with probability
    ``>= 1 - delta`` the coverage is at least ``1 - alpha``. When the target
    reaches 1 (``Delta_S >= alpha``) no user is contacted, the threshold is
    ``+inf`` and every prediction set holds all labels.

    Parameters
    ----------
    epsilon : float, default=1.0
        Local privacy parameter of each user, ``> 0``.
    delta : float, default=0.001
        Failure probability of the guarantee, in (0, 1).
    n_groups : int, default=10
        Number ``T`` of groups (maximum rounds). Needs ``n >= T``.
    final : {"upper", "paper"}, default="upper"
        Threshold when no round stops in the band: the upper end (safe) or
        ``q_T`` (the paper).
    score_bounds : tuple of two floats, default=None
        Public range searched (required; ``(0, 1)`` for LAC and APS).

    Attributes
    ----------
    threshold_ : float
        Calibrated threshold; ``+inf`` means every label.
    correction_ : float
        The correction ``Delta_S``.
    target_coverage_ : float
        ``1 - alpha + Delta_S``.
    group_size_ : int
        Users per group.
    n_steps_used_ : int
        Rounds run (0 when the target reaches 1).
    stopped_early_ : bool
        Whether a round stopped inside the band.
    epsilon_eff_ : float
        Heuristic shuffle-model level (informational).
    epsilon_spent_ : float
        Privacy level of each asked user (0 if no round ran).
    history_ : dict of ndarray
        Query and estimate of each round.
    transcript_ : dict of ndarray
        The (round, client, user) of every answer.
    messages_ : dict of ndarray
        The bits each client forwarded.
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels.
    n_clients_ : int
        Number of clients.
    n_per_client_ : ndarray of shape (n_clients,)
        Calibration users of each client.
    calibration_info_ : dict
        The public plan (see :meth:`LDPScoreCalibrator.plan`).

    See Also
    --------
    LDPScoreCalibrator : The variant with guarantee ``1 - alpha - Delta_S``.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedcp.calibrators import LDPScoreStarCalibrator
    >>> scores = np.random.default_rng(0).uniform(size=50000)
    >>> cal = LDPScoreStarCalibrator(epsilon=4.0, score_bounds=(0, 1))
    >>> cal = cal.fit(scores, alpha=0.1, random_state=0)
    >>> round(cal.target_coverage_, 4), cal.threshold_, cal.n_steps_used_
    (0.9653, 0.9375, 4)
    """

    _star = True


def _pose_query(state):
    """Return ``state`` with the next round's per-client queries."""
    round_ = state["round"] + 1
    query = (state["lo"] + state["hi"]) / 2.0
    members = np.sort(state["groups"][round_ - 1])
    sizes = state["n_per_client"]
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    owner = np.searchsorted(starts + sizes, members, side="right")
    queries = [
        {
            "round": round_,
            "threshold": query,
            "users": members[owner == j] - starts[j],
        }
        for j in range(sizes.shape[0])
    ]
    return {**state, "queries": queries}


def _check_users(query, n_users):
    try:
        users = np.asarray(query["users"])
        query["threshold"], query["round"]
    except (KeyError, TypeError) as exc:
        raise ValueError(
            "query must be a dict with 'round', 'threshold' and 'users'."
        ) from exc
    if users.ndim != 1 or (users.size and users.dtype.kind not in "iu"):
        raise ValueError("query['users'] must be a 1-D array of row indices.")
    users = users.astype(np.intp)
    if users.size and (users.min() < 0 or users.max() >= n_users):
        raise ValueError(f"query['users'] must lie in 0..{n_users - 1}.")
    if np.unique(users).size != users.size:
        raise ValueError("query['users'] asks a user twice in one round.")
    return users


def _concat(parts, dtype):
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
