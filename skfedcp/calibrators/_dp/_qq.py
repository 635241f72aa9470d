"""FedCP²-QQ (Humbert et al.): the locally private quantile of quantiles."""

from __future__ import annotations

import math
from numbers import Integral
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

from ...privacy import private_quantile
from ...privacy._quantile import _release_many
from ...utils._docstrings import fill_doc
from ...utils._sklearn_compat import Interval, StrOptions
from ...utils._validation import check_alpha
from .._base import CoverageBounds
from .._messages import Problem
from .._qq._calibrator import _client_of_size, _QuantileOfQuantilesProtocol
from ._byzantine import check_n_byzantine, dpqq_byzantine_plan, dpqq_max_byzantine
from ._common import (
    _PRIVACY_CONSTRAINTS,
    _check_bounds,
    _check_epsilon_range,
    _check_rule,
    _check_utility,
    _clip_scores,
    _DPMixin,
    _edges,
    _plan_sizes,
)
from ._laws import _client_pmf, _kth_smallest_law, _kth_smallest_log_law
from ._plan import _PLAN_MEMO, _copy_plan, _dpqq_plan

__all__ = ["PrivateQuantileOfQuantilesCalibrator"]


@fill_doc
class PrivateQuantileOfQuantilesCalibrator(_DPMixin, _QuantileOfQuantilesProtocol):
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
        is unused. Its plan (computed once per sizes and ``alpha``, then
        cached) costs more than the paper's: about 0.07 s at 8 clients, 1 s
        at 40 and 5-8 s at 100 clients of 10-1,000 rows, cold, against
        0.02-0.05 s; past a few hundred clients prefer ``"paper"``. See the
        user guide, "Tight corrections".
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
    n_byzantine : int, default=0
        Number ``c`` of dishonest clients to tolerate: clients that may send
        any value passing validation (a bin edge of the announced grid or
        ``+inf``), even after seeing the others'. With ``c > 0`` the plan
        keeps ``c < k <= m - c`` (``c`` clients sending ``+inf`` cannot make
        the threshold infinite on their own) and certifies the coverage of
        the honest clients at rank ``k - c``, DP noise included, ``>= 1 -
        alpha`` for every honest set: ``rule="paper"``, ``(1 - gamma alpha)
        min_H M_H(l_gamma, k - c)`` (exact with equal sizes, a proved bound
        otherwise, as :class:`QuantileOfQuantilesCalibrator`); ``rule="tight"``,
        the tight bound of the worst ``m - c`` honest clients (exact; with
        unequal sizes every honest mix of sizes is enumerated, refused beyond
        64 mixes). ``c >= m / 2``, or a ``c`` no plan certifies, raises
        ``ValueError``. ``0``: the usual plan, bit for bit.

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
    %(fitted_clients)s
    calibration_info_ : dict
        The public plan: ``gamma``, ``local_ranks`` (``l_gamma`` per
        client), ``k``, ``correction`` (``l_cor``), ``levels`` (each client's
        mechanism level), ``score`` (``M(l_gamma + l_cor, k_gamma)``),
        ``coverage_lower`` (``(1 - gamma alpha) M(l_gamma, k_gamma)``),
        ``n_bins``, ``epsilon``, ``score_bounds``, ``feasible`` and, when not
        feasible, ``reason``. With ``n_byzantine > 0`` also ``n_byzantine``;
        ``coverage_lower`` is then the bound certified against that many
        dishonest clients and ``score`` the coverage of the plan when every
        client is honest.
    coverage_bounds_ : CoverageBounds
        ``(coverage_lower, nan)`` of the fitted plan (:meth:`coverage_bounds`
        at the fitted sizes and ``alpha``): the certified lower bound, and no
        upper bound (the privacy noise has none); ``(1, 1)`` when the plan
        is infeasible.

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

    %(references_humbert)s

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

    Certified against 2 dishonest clients among 20:

    >>> scores = rng.uniform(size=20 * 100)
    >>> client_ids = np.repeat(np.arange(20), 100)
    >>> cal = PrivateQuantileOfQuantilesCalibrator(
    ...     epsilon=10.0, score_bounds=(0, 1), n_byzantine=2)
    >>> cal = cal.fit(scores, client_ids, alpha=0.1, random_state=0)
    >>> cal.calibration_info_["k"], round(cal.coverage_bounds_.lower, 4)
    (16, 0.9026)
    >>> cal.max_byzantine()
    3
    """

    _parameter_constraints = {
        **_PRIVACY_CONSTRAINTS,
        "utility": [StrOptions({"quantile", "rank"})],
        "n_byzantine": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        score_bounds: tuple[float, float] | None = None,
        n_bins: int | Literal["auto"] = 100,
        gamma: float | Literal["auto"] = "auto",
        rule: Literal["paper", "tight"] = "paper",
        utility: Literal["quantile", "rank"] = "quantile",
        n_byzantine: int = 0,
    ) -> None:
        self.epsilon = epsilon
        self.score_bounds = score_bounds
        self.n_bins = n_bins
        self.gamma = gamma
        self.rule = rule
        self.utility = utility
        self.n_byzantine = n_byzantine

    def plan(self, n_per_client: ArrayLike, alpha: float) -> dict[str, Any]:
        """Return the public plan: ``gamma``, ranks, correction and levels.

        Its keys are those listed under ``calibration_info_``.
        """
        epsilon = _check_epsilon_range(self.epsilon)
        bounds = _check_bounds(self.score_bounds, type(self).__name__)
        alpha = check_alpha(alpha)
        rule = _check_rule(getattr(self, "rule", "paper"))
        utility = _check_utility(getattr(self, "utility", "quantile"), rule)
        c = check_n_byzantine(getattr(self, "n_byzantine", 0))
        key: tuple[Any, ...] = (
            "dp-qq",
            alpha,
            epsilon,
            self.n_bins,
            self.gamma,
            rule,
            utility,
        )
        if c:
            key = (*key, c)
        plan = _PLAN_MEMO.get(n_per_client, key)
        if plan is None:
            sizes = tuple(_plan_sizes(n_per_client).tolist())
            args = (sizes, alpha, epsilon, self.n_bins, self.gamma, rule, utility)
            plan = dpqq_byzantine_plan(*args, c) if c else _dpqq_plan(*args)
            _PLAN_MEMO.put(n_per_client, key, plan)
        plan = _copy_plan(plan)
        plan["score_bounds"] = bounds
        return plan

    def _client_message(self, scores, alpha, n_per_client, random_state):
        """Release a private bin edge at this client's corrected level.

        Sends ``+inf`` without reading the scores when the plan is infeasible
        or this client's corrected rank exceeds its size.
        """
        n = scores.shape[0]
        plan = self.plan(n_per_client, alpha)
        level = None
        if plan["feasible"]:
            level = plan["levels"][_client_of_size(n, n_per_client)]
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

    def _aggregate(self, received, *, alpha, random_state):
        """Return the ``k_gamma``-th smallest released value."""
        plan = received.plan
        if not plan["feasible"]:
            return math.inf
        k = plan["k"]
        return float(np.partition(received.stacked["quantile"], k - 1)[k - 1])

    def _after_fit(self, received, *, alpha, details=None):
        super()._after_fit(received, alpha=alpha, details=details)
        self.coverage_bounds_ = self.coverage_bounds(received.sizes, alpha)

    def max_byzantine(self) -> int:
        """Largest number of dishonest clients the fitted plan tolerates.

        The largest ``c`` for which the fitted plan's coverage stays
        certified ``>= 1 - alpha`` with ``c`` dishonest clients, whatever
        ``n_byzantine`` it was chosen for: ``rule="paper"``, ``(1 - gamma
        alpha) min_H M_H(l_gamma, k - c)``; ``rule="tight"``, the tight
        bound of the worst ``m - c`` honest clients at rank ``k - c`` (see
        the user guide, "Dishonest clients"). ``n_clients_`` when the plan
        is infeasible (the threshold is ``+inf``), ``-1`` if the plan is not
        certified even with honest clients. As for
        :meth:`QuantileOfQuantilesCalibrator.max_byzantine`, ``c > m - k``
        clients sending ``+inf`` make the threshold (validly) infinite.
        """
        check_is_fitted(self, "calibration_info_")
        plan = self.calibration_info_
        sizes = np.asarray(self.n_per_client_)
        if not plan["feasible"]:
            return int(sizes.shape[0])
        return dpqq_max_byzantine(tuple(sizes.tolist()), self._fitted_alpha, plan)

    def _release_law(self, clipped, partition, plan, log):
        args = self._mechanism_args(plan, None)
        del args["level"]
        pmfs = np.array(
            [
                _client_pmf(group, level, args, log=log)
                for group, level in zip(
                    partition.split(clipped), plan["levels"], strict=True
                )
            ]
        )
        law = _kth_smallest_log_law if log else _kth_smallest_law
        return law(pmfs, plan["k"])

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
        scores = self._clip_to_bounds(scores)
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
        groups = [] if matrix is not None else partition.split(scores)
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

    def coverage_bounds(self, n_per_client: ArrayLike, alpha: float) -> CoverageBounds:
        """Return ``((1 - gamma alpha) M(l_gamma, k_gamma), nan)``; trivial: (1, 1)."""
        plan = self.plan(n_per_client, alpha)
        if not plan["feasible"]:
            return CoverageBounds(1.0, 1.0)
        return CoverageBounds(plan["coverage_lower"], np.nan)
