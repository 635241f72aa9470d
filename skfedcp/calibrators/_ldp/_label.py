"""Local-DP calibration with randomized labels (LDP-L and LDP-L*).

The threshold searches are in :mod:`._label_search`, the pieces LDP-L shares
with LDP-S in :mod:`._common`, the correction terms in
:mod:`skfedcp.privacy._ldp_analysis`.
"""

from __future__ import annotations

import math
from numbers import Integral
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._typing import ClientIds, SecureRandomStateLike
from ...exceptions import InvalidMessageError
from ...federated import ClientPartition
from ...privacy import k_ary_randomized_response
from ...privacy._ldp_analysis import (
    LDPCorrection,
    LDPSampleSize,
    _check_int_array,
    _krr_beta,
    _label_correction,
    ldp_correction,
    ldp_sample_size,
)
from ...utils._docstrings import fill_doc
from ...utils._sklearn_compat import Interval, StrOptions
from ...utils._validation import as_real_array, check_alpha
from .._base import BaseCalibrator, CoverageBounds
from .._messages import (
    Problem,
    _label,
    check_client_sizes,
    invalid_message_error,
    sizes_from_messages,
)
from ._common import (
    _LDP_CONSTRAINTS,
    _bisection_update,
    _check_bounds,
    _LDPMixin,
    _per_client_rows,
)
from ._label_search import _coverage_from_counts, _first_covering_unsorted

# The correction terms are re-exported with the calibrators that use them.
__all__ = [
    "LDPCorrection",
    "LDPLabelCalibrator",
    "LDPLabelStarCalibrator",
    "LDPSampleSize",
    "ldp_correction",
    "ldp_sample_size",
]


# --------------------------------------------------------------------------
# LDP-L: users send (features, k-RR label); the server de-biases the CDF
# --------------------------------------------------------------------------


@fill_doc
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
    n_classes : int, default=None
        Number of classes ``k``, public and fixed by the server before the
        round: a score matrix of another width is an invalid message (its
        client is named, or excluded with ``on_invalid="exclude"``). None:
        :meth:`fit` takes it from the width of ``scores``; the server side
        (:meth:`fit_from_messages`, :meth:`server_step`) accepts the width
        only when every client sends the same one, and otherwise refuses the
        round rather than let the messages vote (see Notes).

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
    %(fitted_users)s
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

    **Dishonest clients.** The number of classes is part of the public plan
    (``n_classes``), not something the messages decide: with it set, a
    client sending score matrices of another width or labels outside
    ``0..k-1`` is named (and left out with ``on_invalid="exclude"``), so
    hostile clients cannot get honest ones excluded by outnumbering them.
    Without it, clients that disagree on the width stop the round with an
    :class:`~skfedcp.exceptions.InvalidMessageError` and nobody is excluded.

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
        "n_classes": [Interval(Integral, 2, None, closed="left"), None],
    }

    _randomized = True

    #: The calibrator needs the ``(n, k)`` score matrix and the labels.
    requires_score_matrix = True

    _message_fields = {
        "n": "size",
        "scores": "score_matrix",
        "noisy_labels": "labels",
    }

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 0.001,
        search: Literal["exact", "bisection"] = "exact",
        n_steps: int = 20,
        score_bounds: tuple[float, float] | None = None,
        n_classes: int | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.search = search
        self.n_steps = n_steps
        self.score_bounds = score_bounds
        self.n_classes = n_classes

    def plan(
        self, n_per_client: ArrayLike, alpha: float, *, n_classes: int | None = None
    ) -> dict[str, Any]:
        """Public, data-free quantities: ``beta``, ``Delta_L``, target, guarantee.

        Parameters
        ----------
        n_per_client : array-like of int
            Calibration users of each client.
        alpha : float
            Miscoverage level in (0, 1).
        n_classes : int, default=None
            Number of classes; ``None`` uses the ``n_classes`` parameter, or
            the fitted ``n_classes_`` when that is None too.

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
            n_classes = self.n_classes
        if n_classes is None:
            n_classes = getattr(self, "n_classes_", None)
            if n_classes is None:
                raise ValueError(
                    "n_classes is required before fit (the number of columns of "
                    "the score matrix)."
                )
        n_classes = int(_check_int_array(n_classes, "n_classes", 2))
        n = int(check_client_sizes(n_per_client).sum())
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

    def coverage_bounds(
        self, n_per_client: ArrayLike, alpha: float, *, n_classes: int | None = None
    ) -> CoverageBounds:
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

    # A client also holds its labels (k-RR privatises them): the base step's
    # signature plus a required ``labels``, deliberately.
    def client_step(  # type: ignore[override]
        self,
        scores: ArrayLike,
        *,
        labels: ArrayLike,
        alpha: float | None = None,
        n_per_client: ArrayLike | None = None,
        random_state: SecureRandomStateLike = None,
    ) -> dict[str, Any]:
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
        random_state : int, RandomState, Generator, SeedSequence, "secure" \
                or None, default=None
            Source of the k-RR noise.

        Returns
        -------
        message : dict
            ``{"n": n_j, "scores": (n_j, k) float array, "noisy_labels": n_j
            ints}``.
        """
        self._validate_params()
        matrix = _check_score_matrix(scores, self.n_classes)
        labels = _check_true_labels(labels, matrix.shape)
        noisy = k_ary_randomized_response(
            labels,
            n_classes=matrix.shape[1],
            epsilon=self.epsilon,
            random_state=random_state,
        )
        return {"n": matrix.shape[0], "scores": matrix, "noisy_labels": noisy}

    def _sizes_from_messages(self, messages):
        # The server needs no plan before the round: the messages' own sizes.
        return sizes_from_messages(messages)

    def _server_plan(self, sizes, alpha, stacked):
        n_classes = self.n_classes
        if n_classes is None:
            n_classes = _announced_width(stacked["scores"])
        return self.plan([int(sizes.sum())], alpha, n_classes=n_classes)

    def _receive(self, messages, *, clients, **options):
        try:
            return super()._receive(messages, clients=clients, **options)
        except _WidthsDisagree as exc:
            raise exc.error(clients) from None

    def _check_messages(self, stacked, *, sizes, plan, alpha, valid):
        k = plan["n_classes"]
        matrices, labels = stacked["scores"], stacked["noisy_labels"]
        problems = []
        width_ok = []
        for j in np.flatnonzero(valid & (sizes > 0)):
            width = matrices[j].shape[1]
            if width == k:
                width_ok.append(j)
                continue
            problems.append(
                Problem(
                    int(j),
                    "scores",
                    f"has {width} columns; the plan has {k} (one per class)"
                    if self.n_classes is not None
                    else f"has {width} columns; the other clients send {k} "
                    "(one per class)",
                )
            )
        if not width_ok:
            return problems
        # One pass over the pooled labels; per client only if one is out of
        # range. A label below 0 can only be an unsigned one that the generic
        # check cast to int64 (2**64 - 1 became -1): refused, never wrapped.
        pooled = np.concatenate(list(labels[width_ok]))
        if pooled.max() >= k or pooled.min() < 0:
            problems += [
                Problem(int(j), "noisy_labels", f"must be integers in 0..{k - 1}")
                for j in width_ok
                if labels[j].max() >= k or labels[j].min() < 0
            ]
        return problems

    def _check_pooled(self, stacked, pooled, *, sizes, plan, alpha):
        k = plan["n_classes"]
        if pooled["scores"].shape[1] == k and (
            pooled["noisy_labels"].size == 0 or pooled["noisy_labels"].max() < k
        ):
            return []
        return super()._check_pooled(
            stacked, pooled, sizes=sizes, plan=plan, alpha=alpha
        )

    def _aggregate(self, received, *, alpha, random_state):
        if received.pooled is not None:  # trusted: the clients' rows in one piece
            matrix = received.pooled["scores"]  # read, never written
            noisy = received.pooled["noisy_labels"]
        else:
            rows = received.sizes > 0
            matrices = list(received.stacked["scores"][rows])
            noisy = np.concatenate(list(received.stacked["noisy_labels"][rows]))
            matrix = np.concatenate(matrices) if len(matrices) > 1 else matrices[0]
            del matrices
        n, k = matrix.shape
        sorted_noisy = np.sort(matrix[np.arange(n), noisy])
        del noisy
        values = matrix.reshape(-1)  # a view of a C-ordered (n, k) matrix
        return self._search(values, sorted_noisy, received.plan, alpha=alpha)

    def _search(self, values, sorted_noisy, plan, *, alpha):
        """The threshold search on checked scores: ``(threshold, details)``.

        ``values`` holds the ``n k`` entries of the score matrix (any order,
        never written) and ``sorted_noisy`` the ``n`` scores of the noisy
        labels, sorted.
        """
        k = plan["n_classes"]
        correction, target = plan["correction"], plan["target"]
        info = {"n_steps_used": 0, "stopped_early": False}
        if not plan["feasible"]:
            self._warn_infinite(alpha, correction, "Delta_L")
            return np.inf, info
        self._warn_guarantee(alpha, correction, "Delta_L")
        beta = plan["beta"]
        if self.search == "exact":
            threshold = _first_covering_unsorted(values, sorted_noisy, beta, k, target)
            return threshold, info
        lo, hi = _check_bounds(self.score_bounds, type(self).__name__)
        band = correction / 2.0
        n = sorted_noisy.shape[0]
        for step in range(1, self.n_steps + 1):
            query = (lo + hi) / 2.0
            # _debiased_coverage at one query, counting in one pass (no sort)
            estimate = _coverage_from_counts(
                np.searchsorted(sorted_noisy, query, side="right"),
                np.count_nonzero(values <= query),
                n,
                beta,
                k,
            )
            lo, hi, stop = _bisection_update(lo, hi, query, estimate, target, band)
            if stop:
                return query, {"n_steps_used": step, "stopped_early": True}
        return query, {"n_steps_used": self.n_steps, "stopped_early": False}

    def _after_fit(self, received, *, alpha, details=None):
        plan = received.plan
        self.correction_ = plan["correction"]
        self.target_coverage_ = plan["target"]
        self.beta_ = plan["beta"]
        self.n_classes_ = plan["n_classes"]
        self.epsilon_eff_ = self.epsilon / math.sqrt(plan["n"])
        self.epsilon_spent_ = float(self.epsilon)
        self.n_steps_used_ = details["n_steps_used"]
        self.stopped_early_ = details["stopped_early"]

    def fit(
        self,
        scores: ArrayLike,
        client_ids: ClientIds = None,
        *,
        labels: ArrayLike | None = None,
        alpha: float,
        random_state: SecureRandomStateLike = None,
        n_jobs: int | None = None,
    ) -> LDPLabelCalibrator:
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
        random_state : int, RandomState, Generator, SeedSequence, "secure" \
                or None, default=None
            Seeds the users' k-RR noise (see Notes); ``"secure"`` draws it
            from the operating system's secure generator (not reproducible,
            for deployment).
        n_jobs : int, default=None
            Unused; the simulation is vectorised.

        Returns
        -------
        self : LDPLabelCalibrator
            The fitted calibrator.

        Notes
        -----
        The simulation is vectorised: every user's k-RR noise is drawn in
        one call from **one** stream for all the simulated users (stream 1
        spawned from ``random_state``; stream 0 is the server's, as in
        :meth:`fit_from_messages`), in the order of the sorted clients. Each
        user's noise is still independent of every other user's, which is
        all the mechanism needs, but the draws are not those of per-client
        :meth:`client_step` calls with per-client streams (with a single
        client they are). In a deployment each client runs
        :meth:`client_step` with its own ``random_state``; the server side
        (:meth:`fit_from_messages`) is the same code either way.
        """
        self._validate_params()
        alpha = check_alpha(alpha)
        matrix = _check_score_matrix(scores, self.n_classes)
        if labels is None:
            raise ValueError(
                f"{type(self).__name__}.fit needs labels= (the true labels, "
                "randomized on the users' side) with the score matrix."
            )
        labels = _check_true_labels(labels, matrix.shape)
        partition = ClientPartition(client_ids, matrix.shape[0])
        server_rng, users_rng = self._simulation_streams(random_state)
        grouped = partition.grouped(matrix)
        noisy = k_ary_randomized_response(
            partition.grouped(labels),
            n_classes=matrix.shape[1],
            epsilon=self.epsilon,
            random_state=users_rng,
        )
        stacked = {
            "n": partition.sizes,
            "scores": _per_client_rows(grouped, partition.sizes),
            "noisy_labels": _per_client_rows(noisy, partition.sizes),
        }
        pooled = {"scores": grouped, "noisy_labels": noisy}
        return self._fit_simulated(stacked, partition, alpha, server_rng, pooled)


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
    target_coverage_ : float
        ``1 - alpha + Delta_L``; the other fitted attributes are those of
        :class:`LDPLabelCalibrator` (``threshold_``, ``correction_``,
        ``beta_``, ``calibration_info_``, ...).

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


def _check_score_matrix(scores, n_classes=None):
    matrix = as_real_array(scores)  # refuses complex and masked arrays
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
    if n_classes is not None and matrix.shape[1] != n_classes:
        raise ValueError(
            f"scores must have n_classes={n_classes} columns (one per class, "
            f"the public plan); got {matrix.shape[1]}."
        )
    if np.isnan(matrix).any():
        raise ValueError("scores must not contain NaN.")
    return matrix


def _check_true_labels(labels, shape):
    """The true labels, checked as integers in ``[0, k)`` before any cast.

    ``shape`` is the score matrix's ``(n, k)``. The comparison runs on the
    labels' own dtype, so an unsigned ``2**64 - 1`` (or a float ``2**64``)
    is refused rather than wrapped by a cast to a class.
    """
    n, k = shape
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(
            f"labels must be 1-D with one entry per row of scores ({n}); got "
            f"shape {arr.shape}."
        )
    values = arr.tolist() if arr.dtype == object else None
    if arr.size and (
        arr.dtype.kind not in "biufO"
        or (values is not None and not all(isinstance(v, Integral) for v in values))
    ):
        raise TypeError(
            f"labels must hold integer class codes in 0..{k - 1}; got dtype "
            f"{arr.dtype}."
        )
    if values is not None:
        arr = np.array(values)  # Python ints (huge ones stay exact objects)
    if arr.size:
        if arr.dtype.kind == "f" and not np.all(arr == np.floor(arr)):
            raise ValueError(
                f"labels must hold integer class codes in 0..{k - 1}; got "
                "non-integer values."
            )
        low, high = arr.min(), arr.max()
        if low < 0 or high > k - 1:
            raise ValueError(
                f"labels must lie in 0..{k - 1} (integer class codes, the "
                f"columns of scores); got values in [{low}, {high}]."
            )
    return arr


def _announced_width(matrices: NDArray[Any]) -> int:
    """The number of classes of the clients' score matrices (public).

    One width for all (stacked ``(n_clients, rows, n_classes)``, or every
    client with rows agreeing) is the common case; clients with rows that
    disagree raise :class:`_WidthsDisagree` (no vote of the messages decides
    which width is right), and no client with rows an InvalidMessageError.
    """
    if matrices.dtype != object and matrices.ndim == 3 and matrices.shape[2] >= 2:
        return int(matrices.shape[2])
    distinct = {m.shape[1] if m.ndim == 2 and m.size else 0 for m in matrices}
    distinct.discard(0)
    if len(distinct) == 1:
        n_classes = int(distinct.pop())
        if n_classes < 2:
            raise InvalidMessageError(
                "LDP-L: score matrices must have n_classes >= 2 columns; got "
                f"{n_classes}.",
                field="scores",
            )
        return n_classes
    if not distinct:
        raise InvalidMessageError(
            "LDP-L: no client sent a score matrix with rows.", field="scores"
        )
    widths = [m.shape[1] if m.ndim == 2 and m.size else 0 for m in matrices]
    raise _WidthsDisagree(widths)


class _WidthsDisagree(Exception):
    """Clients sent score matrices of different widths and ``n_classes`` is None.

    Raised by the plan (which sees client indices only) and turned into an
    :class:`InvalidMessageError` naming the clients by the server step.
    """

    def __init__(self, widths: list[int]) -> None:
        super().__init__(widths)
        self.widths = widths

    def error(self, clients: NDArray[Any]) -> InvalidMessageError:
        sent = [j for j, w in enumerate(self.widths) if w]
        first = sent[0]
        other = next(j for j in sent if self.widths[j] != self.widths[first])
        reason = (
            f"has {self.widths[other]} columns, but client "
            f"{_label(clients[first])} sends {self.widths[first]}. The number of "
            "classes is not public (n_classes=None), so the server cannot tell "
            "which width is right and excludes no client by a vote of the "
            "messages: set n_classes on the calibrator, fixed before the round"
        )
        named = invalid_message_error(Problem(other, "scores", reason), clients)
        # Which of the two is dishonest is unknown: the error blames neither.
        return InvalidMessageError(
            str(named).replace("invalid message from", "invalid messages:", 1),
            field="scores",
        )
