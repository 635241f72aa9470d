"""FedCP-QQ: one-shot federated conformal prediction by a quantile of quantiles."""

from __future__ import annotations

from functools import lru_cache
from numbers import Integral, Real
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from sklearn.utils.validation import check_is_fitted

from ...exceptions import SmallCalibrationSetWarning
from ...utils._docstrings import fill_doc
from ...utils._sklearn_compat import Interval, StrOptions
from ...utils._validation import check_scores
from ...utils._warnings import warn_user
from .._base import BaseCalibrator, CoverageBounds
from .._messages import Problem, check_client_sizes
from ._byzantine import (
    ByzantinePlan,
    ByzantineSelection,
    byzantine_fit_plan,
    max_byzantine,
    select_byzantine_ranks,
)
from ._certified import _fixed_rank_plan, _RankPlan
from ._order_statistics import local_order_statistics
from ._selection import select_qq_ranks

__all__ = ["QuantileOfQuantilesCalibrator"]


class _QuantileOfQuantilesProtocol(BaseCalibrator):
    """The message and exclusion rule of QQ and DP-QQ (private base).

    Each client sends its size and one quantile of its scores; the ranks it
    used were computed for every announced client, so a client whose message
    is invalid is not dropped (that would change the others' plan): with
    ``on_invalid="exclude"`` it counts as having sent ``+inf``.
    """

    _federated = True
    _message_fields = {"n": "size", "quantile": "value"}

    def _exclude(self, stacked, *, clients, sizes, plan, bad, alpha):
        """Keep the announced plan; an excluded client's value becomes ``+inf``."""
        stacked = dict(stacked)
        stacked["quantile"] = np.where(bad, np.inf, stacked["quantile"])
        stacked["n"] = np.where(bad, sizes, stacked["n"])
        return stacked, clients, sizes, plan, clients[bad]

    def _exclusion_note(self):
        return (
            "Each excluded client counts as having sent +inf under the announced "
            "plan: the threshold can only rise, and the announced coverage still "
            "holds for the other clients' data."
        )


@fill_doc
class QuantileOfQuantilesCalibrator(_QuantileOfQuantilesProtocol):
    """Quantile-of-quantiles calibration (FedCP-QQ), one round, exact coverage.

    Each client sends one order statistic of its scores, the ``l``-th
    smallest; the server returns the ``k``-th smallest of the ``m`` values it
    receives. The ranks ``(l*, k*)`` depend only on ``alpha`` and the client
    sizes, never on the scores: they are chosen so that the exact coverage
    ``M(l, k)`` of Theorem 3.2 of [1]_ is the smallest value ``>= 1 - alpha``.

    **Message** (one per client): ``{"n": n_j, "quantile": float}``, the
    client's size and its ``l_j``-th smallest score (``+inf`` if
    ``l_j > n_j``).

    Parameters
    ----------
    local_rank : "paper", "fixed", "auto", "joint" or int, default="paper"
        ``"paper"``: the rules of [1]_, with equal client sizes the search
        of all ``(l, k)`` for the smallest exact coverage ``>= 1 - alpha``
        (its eq. (6)), with unequal sizes ``"fixed"`` (its Appendix A.1;
        if that has no valid ``k``, its clipped ranks ``min(l_j, n_j)``,
        valid whenever any pair is).
        ``"fixed"``: ``l_j = ceil((1 - alpha)(n_j + 1))`` and the smallest
        valid ``k`` (Appendix A.1, with any sizes). ``"auto"`` (opt-in):
        with equal sizes as ``"paper"``; with unequal sizes one common
        level ``c``, ``l_j = ceil(c (n_j + 1))``, searched with ``k`` for
        the smallest exact coverage ``>= 1 - alpha`` (over every ``k``
        while ``m x (distinct sizes) <= 400``, over the ``k`` within 4 of
        ``"fixed"``'s while it is ``<= 12,000``, beyond that ``"fixed"``
        itself; see :func:`select_qq_ranks`). Its ``k`` is chosen from the
        sizes alone and often lands on an extreme client (``k = 1`` or
        ``k = m``), which makes it fragile when the clients differ; it
        warns when it does (the user guide gives the evidence).
        ``"joint"``: every level jointly with every ``k`` (seconds from
        about 50 clients on). An int: the same ``l`` for every client,
        smallest valid ``k``.
    clip_local_rank : bool, default=False
        With ``"fixed"`` ranks, use ``min(l_j, n_j)`` so that small clients
        send a finite value. Coverage stays exact: ``M`` is recomputed.
    conditional : bool or "exact", default=False
        ``True``: training-conditional guarantee of Theorem 3.3 of [1]_,
        ``P(miscoverage <= alpha) >= 1 - delta`` (very conservative).
        ``"exact"``: a skfedcp extension using the exact binomial tail of the
        conditional miscoverage for continuous scores (far less
        conservative). Both need equal client sizes.
    delta : float, default=0.1
        Failure probability of the training-conditional guarantee.
    n_byzantine : int, default=0
        Number ``c`` of dishonest clients to tolerate: clients that may send
        any value passing validation, even after seeing the others'. With
        ``c > 0`` the ranks are chosen so that ``k <= m - c`` (``c`` clients
        sending ``+inf`` cannot make the threshold infinite) and the coverage
        of the honest clients at rank ``k - c`` is ``>= 1 - alpha`` for every
        honest set (:func:`select_byzantine_ranks`; exact with equal sizes, a
        proved lower bound otherwise). ``0``: the usual plan, bit for bit.
        Not with ``conditional``, nor with ``"auto"`` / ``"joint"`` and
        unequal sizes.

    Attributes
    ----------
    threshold_ : float
        The calibrated threshold ``Q_k*(Q_l*(S_1), ..., Q_l*(S_m))``.
    messages_ : dict of ndarray
        ``client``, ``n`` and ``quantile`` of each client: all the server saw.
    %(fitted_clients)s
    calibration_info_ : dict
        ``local_ranks``, ``k``, exact ``coverage`` ``M(l*, k*)`` (all
        clients honest; computed when first read, the same value as
        :meth:`plan`'s) and ``feasible``; with ``n_byzantine > 0`` also
        ``coverage_lower`` and ``coverage_upper``. ``local_ranks`` is the
        plan, one rank per client that holds rows (the clients the coverage
        ``M`` counts); ``client_ranks`` is the rank each *announced* client
        was asked for, in ``clients_`` order, ``0`` for a client without
        rows. The two arrays are equal when every client holds rows.
    coverage_bounds_ : CoverageBounds
        ``(lower, upper)`` coverage of the fitted plan: ``(M, M)``, or with
        ``n_byzantine > 0`` the coverage certified against that many
        dishonest clients and the most they can push it up to
        (:meth:`coverage_bounds` at the fitted sizes and ``alpha``,
        computed when first read).

    See Also
    --------
    qq_coverage : the exact coverage ``M(l, k)``.
    select_qq_ranks : the rank selection, cached per ``(sizes, alpha)``.
    max_byzantine : how many dishonest clients a plan tolerates.

    Notes
    -----
    If, given the model, the ``N`` calibration scores and the test score are
    i.i.d. (the clients' raw data may differ as long as their *score* laws do
    not), then ``P(score <= threshold_) >= M(l*, k*) >= 1 - alpha``, with
    equality for continuous scores; ties only raise the coverage. Which
    client a row belongs to must not depend on its score. With heterogeneous
    score laws, coverage can drop by a total-variation term (Proposition 3.4
    of [1]_). When no pair is valid (``alpha < 1/(N+1)``) the threshold is
    ``+inf``. With one client, this is exactly split conformal prediction.

    %(references_humbert)s

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.exponential(size=5 * 10)
    >>> client_ids = np.repeat(np.arange(5), 10)
    >>> cal = QuantileOfQuantilesCalibrator().fit(scores, client_ids, alpha=0.1)
    >>> int(cal.calibration_info_["local_ranks"][0]), cal.calibration_info_["k"]
    (10, 3)
    >>> round(cal.calibration_info_["coverage"], 6)
    0.925626
    """

    _simulation_checks_finite = True

    _parameter_constraints = {
        "local_rank": [
            StrOptions({"paper", "auto", "fixed", "joint"}),
            Interval(Integral, 1, None, closed="left"),
        ],
        "clip_local_rank": ["boolean"],
        "conditional": ["boolean", StrOptions({"exact"})],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "n_byzantine": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        *,
        local_rank: Literal["paper", "auto", "fixed", "joint"] | int = "paper",
        clip_local_rank: bool = False,
        conditional: bool | Literal["exact"] = False,
        delta: float = 0.1,
        n_byzantine: int = 0,
    ) -> None:
        self.local_rank = local_rank
        self.clip_local_rank = clip_local_rank
        self.conditional = conditional
        self.delta = delta
        self.n_byzantine = n_byzantine

    def _plan_key(self, n_per_client, alpha):
        """What the plan depends on: the sizes, ``alpha`` and the parameters."""
        sizes = _nonempty(n_per_client)
        return (
            sizes.tobytes(),
            float(alpha),
            self.local_rank,
            self.clip_local_rank,
            self.conditional,
            self.delta,
            int(self.n_byzantine),
        )

    def _selection(self, n_per_client, alpha):
        """The cached plan ``(selection, local ranks as a read-only array)``.

        Stateless: the plan is cached per (sizes, alpha, parameters) at
        module level, so several threads may fit one instance.
        """
        return _cached_selection(*self._plan_key(n_per_client, alpha))

    def _fit_selection(self, n_per_client, alpha):
        """:meth:`_selection` as a fit needs it: its coverage may be left out
        (a :class:`_RankPlan`, see :func:`_cached_fit_selection`)."""
        return _cached_fit_selection(*self._plan_key(n_per_client, alpha))

    def plan(self, n_per_client: ArrayLike, alpha: float) -> dict[str, Any]:
        """Return the public ranks ``(l_j, k)`` and the exact coverage ``M``."""
        sel, ranks = self._selection(n_per_client, alpha)
        return _plan_dict(sel, ranks.copy())

    def _server_plan(self, sizes, alpha, stacked):
        key = self._plan_key(sizes, alpha)
        sel, ranks = _cached_fit_selection(*key)
        plan = _plan_dict(sel, ranks.copy(), key)
        # The rank of every announced client, 0 for those without rows.
        if not sel.feasible:
            client_ranks = np.zeros(sizes.shape[0], dtype=np.intp)
        elif ranks.shape[0] == sizes.shape[0]:  # every client holds rows
            client_ranks = ranks.copy()
        else:
            client_ranks = np.zeros(sizes.shape[0], dtype=np.intp)
            client_ranks[sizes > 0] = ranks
        return {**plan, "client_ranks": client_ranks}

    def _local_rank_of(self, n, n_per_client, alpha):
        sel, ranks = self._fit_selection(n_per_client, alpha)
        if not sel.feasible:
            return None
        return int(ranks[_client_of_size(n, _nonempty(n_per_client))])

    def _client_message(self, scores, alpha, n_per_client, random_state):
        """Send ``(n_j, l_j-th smallest score)``; ``l_j`` follows from the sizes."""
        n = scores.shape[0]
        rank = None if n == 0 else self._local_rank_of(n, n_per_client, alpha)
        if rank is None:  # no rows or no valid pair: send nothing data-dependent
            return {"n": n, "quantile": np.inf}
        (value,) = local_order_statistics([scores], [rank])
        return {"n": n, "quantile": float(value)}

    def _check_messages(self, stacked, *, sizes, plan, alpha, valid):
        return _check_rank_values(stacked, sizes, plan, valid)

    def _aggregate(self, received, *, alpha, random_state):
        """Return the ``k*``-th smallest of the non-empty clients' quantiles."""
        plan = received.plan
        empty = received.sizes == 0
        if empty.any():
            warn_user(
                f"{int(empty.sum())} client(s) hold no calibration rows; they are "
                "dropped and not counted in the number of clients m.",
                SmallCalibrationSetWarning,
            )
        if not plan["feasible"]:
            return np.inf
        values = received.stacked["quantile"][~empty]
        k = plan["k"]
        return float(np.partition(values, k - 1)[k - 1])

    def _simulate_clients(
        self, partition, scores, *, alpha, rngs, n_jobs=None, check_finite=False
    ):
        sel, ranks = self._fit_selection(partition.sizes, alpha)
        if not sel.feasible:
            if check_finite:
                check_scores(scores)
            values = np.full(partition.n_clients, np.inf)
        else:
            values = local_order_statistics(
                partition, ranks, scores=scores, check_finite=check_finite
            )
        return {"n": partition.sizes, "quantile": values}

    def _after_fit(self, received, *, alpha, details=None):
        super()._after_fit(received, alpha=alpha, details=details)
        plan = received.plan
        if isinstance(plan["coverage"], _LazyCoverage):
            self.coverage_bounds_ = plan["coverage"]  # computed on first read
        else:
            self.coverage_bounds_ = self.coverage_bounds(received.sizes, alpha)
        sizes = received.sizes[received.sizes > 0]
        m = int(sizes.shape[0])
        if (
            self.local_rank == "auto"
            and plan["feasible"]
            and m > 1
            and np.any(sizes != sizes[0])
            and plan["k"] in (1, m)
        ):
            warn_user(
                f"QuantileOfQuantilesCalibrator: local_rank='auto' chose k={plan['k']} "
                f"of m={m} clients from the sizes alone, so the threshold is the "
                f"{'smallest' if plan['k'] == 1 else 'largest'} client's value: "
                "fragile when the clients' score laws differ. The default "
                "local_rank='paper' (Appendix A.1 for unequal sizes) does not lean "
                "on one client.",
                UserWarning,
            )

    @property
    def calibration_info_(self) -> dict[str, Any]:
        """The fitted plan; its exact coverage is computed on first read."""
        info = _fitted_value(self, "calibration_info_")
        for name in ("coverage", "coverage_upper"):
            if isinstance(info.get(name), _LazyCoverage):
                info[name] = info[name].value()
        return info

    @calibration_info_.setter
    def calibration_info_(self, info):
        self.__dict__["calibration_info_"] = info

    @property
    def coverage_bounds_(self) -> CoverageBounds:
        """:meth:`coverage_bounds` of the fit, computed on first read."""
        bounds = _fitted_value(self, "coverage_bounds_")
        if isinstance(bounds, _LazyCoverage):
            bounds = _bounds_of(bounds.selection())
            self.__dict__["coverage_bounds_"] = bounds
        return bounds

    @coverage_bounds_.setter
    def coverage_bounds_(self, bounds):
        self.__dict__["coverage_bounds_"] = bounds

    def coverage_bounds(
        self, n_per_client: ArrayLike | None = None, alpha: float | None = None
    ) -> CoverageBounds:
        """Return ``(M, M)``: exact for continuous scores, a lower bound otherwise.

        With ``n_byzantine = c > 0``: ``(lower, upper)``, ``lower`` the
        coverage certified against ``c`` dishonest clients (any score law),
        ``upper`` the coverage when they push the threshold as high as they
        can (continuous scores). ``(1, 1)`` when the plan is infeasible. On
        a fitted calibrator the arguments default to the fitted sizes and
        ``alpha`` (``coverage_bounds_``).
        """
        assert n_per_client is not None and alpha is not None  # filled if fitted
        return _bounds_of(self._selection(n_per_client, alpha)[0])

    def max_byzantine(self) -> int:
        """Largest number of dishonest clients the fitted plan tolerates.

        The largest ``c`` for which the coverage of the fitted ranks stays
        certified ``>= 1 - alpha`` (:func:`~skfedcp.calibrators.max_byzantine`
        on the fitted sizes, ``alpha`` and plan), whatever ``n_byzantine``
        the plan was chosen for; ``n_clients_`` when the threshold is
        ``+inf`` (nothing can lower it), ``-1`` if the plan is not valid even
        with honest clients.
        """
        check_is_fitted(self)
        plan = _fitted_value(self, "calibration_info_")  # no lazy coverage read
        sizes = _nonempty(self.n_per_client_)
        if not plan["feasible"]:
            return int(sizes.shape[0])
        return max_byzantine(sizes, self._fitted_alpha, plan["local_ranks"], plan["k"])


def _bounds_of(sel):
    """``coverage_bounds`` of a full selection: ``(lower, upper)`` against
    dishonest clients, else ``(M, M)``."""
    if isinstance(sel, ByzantineSelection):
        return CoverageBounds(sel.lower, sel.upper)
    return CoverageBounds(sel.coverage, sel.coverage)


def _client_of_size(n, sizes):
    """Index of the first announced client of ``n`` rows: a client's own plan entry.

    Clients of one size get the same ranks, so a client finds its entry from
    its size alone.
    """
    matches = np.flatnonzero(np.asarray(sizes) == n)
    if matches.size == 0:
        raise ValueError(
            f"this client holds {n} scores but n_per_client lists no client of "
            "that size; pass the sizes the server announced."
        )
    return matches[0]


def _nonempty(n_per_client):
    """Client sizes without the clients that hold no rows (spec section 2.6)."""
    sizes = check_client_sizes(n_per_client)  # the public plan policy first
    if sizes.shape[0] and sizes.min() > 0:
        return sizes
    sizes = sizes[sizes > 0]
    if sizes.size == 0:
        raise ValueError("n_per_client: no client holds any calibration row.")
    return sizes


@lru_cache(maxsize=64)
def _cached_selection(
    sizes_bytes, alpha, local_rank, clip, conditional, delta, n_byzantine=0
):
    """The selection and its local ranks as a read-only intp array (shared)."""
    sizes = np.frombuffer(sizes_bytes, dtype=np.int64)
    if n_byzantine:
        if conditional is not False:
            raise ValueError(
                "n_byzantine > 0 certifies the marginal coverage only; it cannot "
                f"be combined with conditional={conditional!r}."
            )
        byz = select_byzantine_ranks(
            tuple(sizes.tolist()),
            alpha,
            n_byzantine,
            local_rank=local_rank,
            clip_local_rank=clip,
        )
        return byz, _read_only_ranks(byz)
    rule = local_rank
    if rule == "paper":  # eq. (6) with equal sizes, Appendix A.1 otherwise
        rule = "auto" if np.all(sizes == sizes[0]) else "fixed"

    def select(clip_local_rank):
        return select_qq_ranks(
            tuple(sizes.tolist()),
            alpha,
            local_rank=rule,
            clip_local_rank=clip_local_rank,
            conditional=conditional,
            delta=delta,
        )

    if rule == "fixed":
        sel = _appendix_a1(select, local_rank, clip)
    else:
        sel = select(clip)
    return sel, _read_only_ranks(sel)


def _appendix_a1(select, local_rank, clip):
    """Appendix A.1's selection, ``select(clip_local_rank)``, with the
    ``"paper"`` rule's fallback: when A.1 has no valid k (e.g. every ``l_j >
    n_j`` at a tiny alpha), its clipped ranks ``min(l_j, n_j)``, valid
    whenever any pair is. None when ``select`` leaves it undecided."""
    sel = select(clip)
    if sel is not None and not sel.feasible and local_rank == "paper" and not clip:
        sel = select(True)
    return sel


@lru_cache(maxsize=64)
def _cached_fit_selection(
    sizes_bytes, alpha, local_rank, clip, conditional, delta, n_byzantine=0
):
    """:func:`_cached_selection` as a fit needs it: ``(selection, ranks)``.

    With Appendix A.1's ranks and unequal sizes (``"fixed"``, and
    ``"paper"``), the selection is a :class:`_RankPlan` (ranks and k, no
    coverage) when certified brackets of M decide k (:func:`_fixed_rank_plan`,
    the same ranks and k, see _certified.py): a fit needs no coverage, and the exact one
    (``_cached_selection``'s, the same bits) is computed only when
    ``calibration_info_["coverage"]`` or ``coverage_bounds_`` is read. A
    grid search over 5 folds and 3 alphas pays 16 plans and reads none.
    """
    if n_byzantine and conditional is False:  # the Byzantine rule's fit plan
        sizes = tuple(np.frombuffer(sizes_bytes, dtype=np.int64).tolist())
        fast = byzantine_fit_plan(
            sizes, alpha, n_byzantine, local_rank=local_rank, clip_local_rank=clip
        )
        return fast, _read_only_ranks(fast)
    if n_byzantine == 0 and conditional is False and local_rank in ("paper", "fixed"):
        sizes = tuple(np.frombuffer(sizes_bytes, dtype=np.int64).tolist())
        fast = _appendix_a1(
            lambda clip_local_rank: _fixed_rank_plan(sizes, alpha, clip_local_rank),
            local_rank,
            clip,
        )
        if fast is not None:
            return fast, _read_only_ranks(fast)
    return _cached_selection(
        sizes_bytes, alpha, local_rank, clip, conditional, delta, n_byzantine
    )


class _LazyCoverage(NamedTuple):
    """The exact coverage of a plan (or its Byzantine ``field``, ``"upper"``),
    computed when first read."""

    key: tuple
    field: str = "coverage"

    def value(self):
        return getattr(self.selection(), self.field)

    def selection(self):
        return _cached_selection(*self.key)[0]


def _fitted_value(estimator, name):
    """The fitted attribute ``name`` as stored (AttributeError before a fit)."""
    try:
        return estimator.__dict__[name]
    except KeyError:
        raise AttributeError(
            f"{type(estimator).__name__!r} object has no attribute {name!r}"
        ) from None


def _read_only_ranks(sel):
    ranks = np.asarray(sel.local_ranks, dtype=np.intp).reshape(-1)
    ranks.flags.writeable = False
    return ranks


def _plan_dict(sel, ranks, key=None):
    """The plan of a selection; a :class:`_RankPlan`'s coverage is a
    :class:`_LazyCoverage` of ``key`` (computed when read)."""
    lazy = isinstance(sel, (_RankPlan, ByzantinePlan))
    plan = {
        "feasible": sel.feasible,
        "local_ranks": ranks,
        "k": sel.k,
        "coverage": _LazyCoverage(key) if lazy else sel.coverage,
    }
    if isinstance(sel, ByzantinePlan):
        plan["coverage_lower"] = sel.lower
        plan["coverage_upper"] = _LazyCoverage(key, "upper")
    elif isinstance(sel, ByzantineSelection):
        plan["coverage_lower"] = sel.lower
        plan["coverage_upper"] = sel.upper
    return plan


def _check_rank_values(stacked, sizes, plan, valid):
    """QQ-type rule: ``+inf`` exactly where the client's rank exceeds its size.

    A client holding no rows, or any client when the plan is infeasible,
    sends ``+inf`` without reading its data.
    """
    values = stacked["quantile"]
    if plan["feasible"]:
        ranks = plan["client_ranks"]
        must_inf = (ranks > sizes) | (sizes == 0)
    else:
        ranks = np.zeros_like(sizes)
        must_inf = np.ones(sizes.shape[0], dtype=bool)
    problems = []
    for j in np.flatnonzero(valid & ((values == np.inf) != must_inf)):
        if must_inf[j]:
            why = (
                "the plan is infeasible"
                if not plan["feasible"]
                else "it holds no rows"
                if sizes[j] == 0
                else f"its rank {ranks[j]} exceeds its {sizes[j]} rows"
            )
            reason = f"is {float(values[j])!r}; it must be +inf because {why}"
        else:
            reason = (
                f"is +inf but the client's rank {ranks[j]} is within its "
                f"{sizes[j]} rows: it must send a finite number"
            )
        problems.append(Problem(int(j), "quantile", reason))
    return problems
