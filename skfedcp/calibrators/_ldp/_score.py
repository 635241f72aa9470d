"""LDP-S: interactive bisection on private scores, one randomized bit per user.

The rounds' queries and transcript are in :mod:`._score_protocol`, the checks
of the clients' answers in :mod:`._score_answers`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..._typing import RandomStateLike, SecureRandomStateLike
from ...exceptions import InvalidMessageError
from ...privacy import binary_randomized_response, debias_fraction
from ...privacy._ldp_analysis import _rr_constant, _score_correction
from ...utils._atomic import atomic_fit
from ...utils._docstrings import fill_doc
from ...utils._random import check_seed_sequence, spawn_random_states
from ...utils._sklearn_compat import Interval, StrOptions
from ...utils._validation import check_alpha, check_scores
from .._base import BaseCalibrator, CoverageBounds
from .._messages import (
    check_client_labels,
    check_client_sizes,
    client_share_problems,
    invalid_message_error,
)
from ._common import _LDP_CONSTRAINTS, _bisection_update, _check_bounds, _LDPMixin
from ._score_answers import (
    _check_public_users,
    _check_round,
    _check_users,
    _name_client,
)
from ._score_groups import draw_group_counts, draw_key
from ._score_protocol import (
    _assignment_rng,
    _axis_range,
    _axis_score,
    _pose_query,
    _server_stream,
    _SimulatedUsers,
    _Transcript,
    _warn_top,
)

__all__ = ["LDPScoreCalibrator", "LDPScoreStarCalibrator"]


# --------------------------------------------------------------------------
# LDP-S: users answer one randomized binary question each, in T rounds
# --------------------------------------------------------------------------


@fill_doc
class LDPScoreCalibrator(_LDPMixin, BaseCalibrator):
    """Local-DP calibration by interactive bisection on private scores (LDP-S).

    Each user computes its own conformity score with the shipped model and
    answers **one** yes/no question, "is your score below ``q``?", through
    binary randomized response. The server splits the ``n`` users at random
    into ``T = n_groups`` disjoint groups of ``n' = floor(n / T)``; in round
    ``j`` it asks group ``j`` about the midpoint ``q_j`` of its current
    interval, de-biases the fraction of "yes" answers into an estimate
    ``Z_j`` of ``P(score < q_j)``, and halves the interval (on the logit
    scale by default, see ``axis``); the default ``search="tight"`` runs all
    ``T`` rounds and returns the interval's upper end, the paper's rule stops
    as soon as ``Z_j`` lies within ``Delta_S / 2`` of the target. Users are the rows;
    ``client_ids`` only groups them (each client forwards its users'
    answers).

    **Protocol** (interactive; :meth:`fit` runs these rounds in-process with
    every client's answers stacked in one message per round, and a network
    adapter can drive them remotely):

    1. ``state = server_init(n_per_client, alpha=..., random_state=...)``:
       the public group assignment (counts per client and group, and a key
       from which each client derives which of its users are in each
       group: ``O(n_clients T)`` on the server, whatever the announced
       sizes), correction and the first query; ``state`` is a plain dict.
    2. While ``not state["done"]``: each client ``j`` receives
       ``state["queries"][j] = {"round": r, "threshold": q_r, "count": k,
       "users": its k asked rows}`` (``users`` derived when read) and
       returns ``client_respond(scores_j, query) = {"round": r, "users":
       ..., "reports": one randomized bit per asked user}``; then
       ``state = server_update(state, messages)``, which checks that each
       client answers for ``k`` distinct users of its own.
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
        just below 1, where ``"paper"`` can under-cover badly. ``"paper"``
        needs ``search="paper"``.
    score_bounds : tuple of two floats, default=None
        Public range ``(lo, hi)`` searched, fixed without looking at the data:
        ``(0, 1)`` for LAC and APS scores (the wrapper fills in its score's
        natural bounds); required otherwise. Scores outside it need no
        clipping: a score above the range answers "no" to every query, which
        is conservative. A result at the upper end means ``+inf``.
    search : {"tight", "paper"}, default="tight"
        ``"tight"``: no stopping band (all ``T`` rounds run) and the final
        upper end, with ``Delta_S = c sqrt(ln(T/delta) / (2 n'))``, the
        one-sided per-round error (proof in the user guide): about 0.47 of
        the paper's correction, so about 0.22 of its users for the same
        correction. ``"paper"``: band ``Delta_S / 2`` and
        ``Delta_S = 2 c sqrt(ln(2T/delta) / (2 n'))`` (Penso et al.).
    axis : {"logit", "log", "linear"}, default="logit"
        Scale on which the interval is halved, with
        ``x = (s - lo) / (hi - lo)``. ``"linear"`` (the paper): ``x`` itself,
        resolution ``2^-T`` of the range, so scores piled up within
        ``2^-T`` of ``hi`` (deterministic APS of a confident model) cannot be
        told apart and the answer can be ``+inf``. ``"logit"``:
        ``ln(x / (1 - x))`` on ``[-2 T ln 2, 2 T ln 2]``, which reaches gaps
        of ``4^-T`` at both ends with a resolution of at most
        ``4 T ln 2 / 2^T`` (2.7% at ``T = 10``) of the distance to the
        nearer end. ``"log"``: ``-ln(1 - x)`` on ``[0, 2 T ln 2]``, finer
        near ``hi`` but coarse near ``lo``. Users still compare their raw
        score with a threshold; the guarantee is the same for every axis.
    max_client_share : float in (0, 1] or None, default=None
        Public cap on one client's share of the users: :meth:`server_init`
        refuses a client announcing more than ``max_client_share * n``
        users (naming it) before any query, so ``c`` dishonest clients move
        each estimate by at most ``c * max_client_share``. None: no cap.

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
    %(fitted_users)s
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
    ``c = (e^eps + 1)/(e^eps - 1)`` is unbiased for ``P(S < q_j)``. With
    i.i.d. users and test point, with probability ``>= 1 - delta``,
    ``P(y in C(x) | calibration) >= 1 - alpha - Delta_S`` (``1 - alpha`` for
    the starred variant). ``search="tight"``: by Hoeffding's one-sided
    inequality over ``n'`` fresh users and a union bound over the ``T``
    rounds, every round satisfies ``Z_j <= P(S < q_j) + Delta_S`` with
    ``Delta_S = c sqrt(ln(T/delta) / (2 n'))``, and the returned upper end
    is a query with ``Z_j`` above the target (or ``+inf``); the proof is in
    the user guide. ``search="paper"``: every round satisfies
    ``|Z_j - P(S < q_j)| <= t_S = c sqrt(ln(2T/delta) / (2 n'))`` and
    ``Delta_S = 2 t_S`` covers a stop inside the band; with
    ``final="paper"`` a search that runs to the end also needs the paper's
    assumption that the last cell holds at most ``Delta_S`` of score mass.
    The paper states ``Delta_S`` only up to constants.

    Unlike LDP-L, ``Delta_S`` does not depend on the number of classes, so
    LDP-S also calibrates regression scores given public ``score_bounds``.

    **Simulation.** :meth:`fit` runs :meth:`server_init`, then the rounds,
    each round's asked users of every client answering in one stacked
    message (see :meth:`server_update`), checked by the server's live code
    as in a deployment; it also checks that no user is asked twice. All
    simulated users draw their randomized-response noise from **one**
    stream (stream 1 spawned from ``random_state``; stream 0 seeds the
    public group assignment; ``"secure"``: the users' noise comes from the
    operating system's secure generator), round after round, client after
    client. Each user's noise is still independent of every other user's,
    which is all the mechanism needs; the draws equal those of
    :meth:`client_respond` calls that share that one stream (with a single
    client: the client's own stream). In a deployment each client answers
    with :meth:`client_respond` and its own ``random_state``. The
    calibrator keeps only what the server sees (bits, queries, estimates),
    never the scores.

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
    >>> round(cal.correction_, 4), round(cal.threshold_, 4), cal.n_steps_used_
    (0.0498, 0.9021, 10)
    """

    _parameter_constraints = {
        **_LDP_CONSTRAINTS,
        "n_groups": [Interval(Integral, 1, None, closed="left")],
        "final": [StrOptions({"paper", "upper"})],
        "search": [StrOptions({"tight", "paper"})],
        "axis": [StrOptions({"linear", "log", "logit"})],
        "max_client_share": [Interval(Real, 0, 1, closed="right"), None],
    }

    _randomized = True

    #: The protocol runs in rounds (server_init / client_respond /
    #: server_update) rather than one client_step / server_step exchange.
    interactive = True

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 0.001,
        n_groups: int = 10,
        final: Literal["paper", "upper"] = "upper",
        score_bounds: tuple[float, float] | None = None,
        search: Literal["tight", "paper"] = "tight",
        axis: Literal["linear", "log", "logit"] = "logit",
        max_client_share: float | None = None,
    ) -> None:
        self.max_client_share = max_client_share
        self.epsilon = epsilon
        self.delta = delta
        self.n_groups = n_groups
        self.final = final
        self.score_bounds = score_bounds
        self.search = search
        self.axis = axis

    def plan(self, n_per_client: ArrayLike, alpha: float) -> dict[str, Any]:
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
            ``group_size``, ``c``, ``search``, ``axis``, ``correction``,
            ``band`` (0 for ``search="tight"``), ``target``,
            ``coverage_lower`` and ``confidence`` (``1 - delta``).
        """
        self._validate_params()
        if self.search == "tight" and self.final != "upper":
            raise ValueError(
                f"search='tight' returns the interval's upper end: its correction "
                f"is proved for final='upper' only; got final={self.final!r}. Use "
                "search='paper' with final='paper' for the paper's rule."
            )
        alpha = check_alpha(alpha)
        n = int(check_client_sizes(n_per_client).sum())
        if n < self.n_groups:
            raise ValueError(
                f"LDP-S needs at least n_groups={self.n_groups} users (one per "
                f"group); got n={n}. Lower n_groups or add users."
            )
        group_size = n // self.n_groups
        correction = float(
            _score_correction(
                group_size, self.epsilon, self.delta, self.n_groups, self.search
            )
        )
        target = self._target(alpha, correction)
        feasible = target < 1.0
        return {
            "feasible": feasible,
            "n": n,
            "group_size": group_size,
            "c": float(_rr_constant(self.epsilon)),
            "search": self.search,
            "axis": self.axis,
            "correction": correction,
            "band": 0.0 if self.search == "tight" else correction / 2.0,
            "target": target,
            "coverage_lower": min(max(target - correction, 0.0), 1.0)
            if feasible
            else 1.0,
            "confidence": 1.0 - self.delta,
        }

    def coverage_bounds(self, n_per_client: ArrayLike, alpha: float) -> CoverageBounds:
        """Marginal lower bound ``(1 - delta) * coverage_lower``; no upper bound."""
        plan = self.plan(n_per_client, alpha)
        if not plan["feasible"]:
            return CoverageBounds(1.0, 1.0)
        return CoverageBounds((1.0 - self.delta) * plan["coverage_lower"], np.nan)

    # -- the interactive protocol ------------------------------------------

    def server_init(
        self,
        n_per_client: ArrayLike,
        *,
        alpha: float,
        random_state: RandomStateLike = None,
    ) -> dict[str, Any]:
        """Start the protocol: assign users to groups and pose the first query.

        Parameters
        ----------
        n_per_client : array-like of int
            Number of users of each client (public).
        alpha : float
            Miscoverage level in (0, 1).
        random_state : int, Generator, RandomState, SeedSequence or None, \
                default=None
            Seeds the random assignment of users to groups (public; ``None``:
            fresh operating-system entropy). Give the same value to
            :meth:`fit_from_messages` to check the answers afterwards.

        Returns
        -------
        state : dict
            Plain values and arrays: the plan (``correction``, ``band``,
            ``target``, ...), ``group_counts`` (``(n_clients, T + 1)``: the
            users of each client in each group, the last column not asked)
            and ``assignment_key`` (the public key from which each client
            derives which of its users are in each group), the interval
            ``lo``/``hi``, ``round`` (rounds completed), ``done``,
            ``threshold`` (set when done), ``stopped_early``, ``history``
            and ``queries`` (one mapping per client for the next round, a
            read-only sequence whose mappings are built when accessed; empty
            when done). Its size and the work to build it are ``O(n_clients
            T)``, whatever the announced sizes.
        """
        plan = self.plan(n_per_client, alpha)
        alpha = check_alpha(alpha)
        sizes = check_client_sizes(n_per_client)
        over = client_share_problems(sizes, self.max_client_share, unit="users")
        if over:
            raise invalid_message_error(over[0], np.arange(sizes.shape[0]), len(over))
        lo, hi = _check_bounds(self.score_bounds, type(self).__name__)
        rng = _assignment_rng(random_state)
        group_size, n_groups = plan["group_size"], self.n_groups
        # The public assignment, as O(m T) numbers: how many of each client's
        # users fall in each group (the last column: not asked), and the key
        # from which each client derives which ones (see _score_groups).
        columns = np.full(n_groups + 1, group_size, dtype=np.int64)
        columns[-1] = plan["n"] - n_groups * group_size
        group_counts = draw_group_counts(rng, sizes, columns)
        key = draw_key(rng)
        axis_lo, axis_hi = _axis_range(self.axis, (lo, hi), n_groups)
        state = {
            **plan,
            "alpha": alpha,
            "epsilon": float(self.epsilon),
            "n_groups": n_groups,
            "final": self.final,
            "bounds": (lo, hi),
            "axis_range": (axis_lo, axis_hi),
            "n_per_client": sizes,
            "group_counts": group_counts,
            "assignment_key": key,
            "lo": axis_lo,
            "hi": axis_hi,
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

    def client_respond(
        self,
        scores: ArrayLike,
        query: Mapping[str, Any],
        *,
        random_state: SecureRandomStateLike = None,
    ) -> dict[str, Any]:
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
        random_state : int, RandomState, Generator, SeedSequence, "secure" \
                or None, default=None
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

    def server_update(
        self,
        state: Mapping[str, Any],
        messages: Sequence[Mapping[str, Any] | None] | Mapping[str, Any],
    ) -> dict[str, Any]:
        """Aggregate one round's answers and move the bisection (server's side).

        Parameters
        ----------
        state : dict
            From :meth:`server_init` or the previous :meth:`server_update`.
        messages : list of dict or None, or dict
            One entry per client, in the order of ``n_per_client``: the
            client's :meth:`client_respond` message, or ``None`` for a client
            with no asked user. Or the round's answers of every client
            stacked in one dict (what :meth:`fit` sends, and what a relay
            forwarding many clients' answers can send): ``{"round": r,
            "counts": answers per client, "users": the asked users' local
            indices, client after client, "reports": their 0/1 bits}``,
            checked against the queries as the list is.

        Returns
        -------
        state : dict
            A new state (the argument is not modified).
        """
        if state["done"]:
            raise ValueError("the LDP-S protocol is already finished (done=True).")
        queries = state["queries"]
        _, reports = _check_round(queries, messages)
        if reports.shape[0] != state["group_size"]:
            raise InvalidMessageError(
                f"round {queries.round} received {reports.shape[0]} answers; "
                f"the group has {state['group_size']} users.",
                field="reports",
            )
        estimate = debias_fraction(float(reports.mean()), epsilon=state["epsilon"])
        query = queries.threshold
        point = (state["lo"] + state["hi"]) / 2.0  # the query on the search axis
        lo, hi, stop = _bisection_update(
            state["lo"], state["hi"], point, estimate, state["target"], state["band"]
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
            # "upper": the last query answered "over target" (+inf if none).
            threshold = query if state["final"] == "paper" else _axis_score(new, hi)
        else:
            return _pose_query(new)
        if threshold >= state["bounds"][1]:
            threshold = np.inf
            _warn_top(state)
        return {
            **new,
            "done": True,
            "threshold": float(threshold),
            "stopped_early": bool(stop),
        }

    def client_step(
        self,
        scores: ArrayLike,
        *,
        alpha: float | None = None,
        n_per_client: ArrayLike | None = None,
        random_state: SecureRandomStateLike = None,
    ) -> dict[str, Any]:
        """Not available: LDP-S is interactive (see :meth:`client_respond`)."""
        raise NotImplementedError(
            "LDP-S runs in rounds: use server_init, client_respond and "
            "server_update (or fit to simulate them)."
        )

    def _check_fit_scores(self, scores: ArrayLike) -> NDArray[np.float64]:
        return check_scores(scores, allow_inf=True)  # above the range: "no"

    def _fit_round(self, partition, scores, alpha, random_state, n_jobs, extra):
        """The rounds in-process: the users' answers, the server's live checks.

        Runs :meth:`server_init`, then rounds in which every asked user
        answers (what :meth:`client_respond` computes, for all clients at
        once) and :meth:`server_update`, and checks on the users' side that
        no user is asked twice (a ``RuntimeError`` otherwise). The fitted
        attributes are set from the rounds as :meth:`fit_from_messages` sets
        them from a transcript (the same values: the rounds are not
        replayed).
        """
        # The group assignment is public: with "secure", a fresh seed that
        # the live run and the server's check share.
        seed = check_seed_sequence(random_state)
        public = np.random.SeedSequence() if isinstance(seed, str) else seed
        # All simulated users draw their noise from one stream (stream 1).
        users_rng = seed if isinstance(seed, str) else spawn_random_states(seed, 2)[1]
        grouped = partition.grouped(scores)
        transcript = _Transcript(partition.clients)
        state = self._named_init(partition.sizes, partition.clients, alpha, public)
        if not state["done"]:  # the clients' side: their users' public groups
            users = _SimulatedUsers(grouped, self.epsilon, users_rng, state)
        while not state["done"]:
            queries = state["queries"]
            message = users.answer(queries)
            new_state = self.server_update(state, message)  # the server's checks
            transcript.add(queries, message)
            state = new_state
        # The server's side ran live, on the same messages and with the same
        # checks as fit_from_messages' replay, which is not repeated.
        return self._set_fitted(state, transcript, partition.sizes, alpha)

    # Interactive: ``messages`` is the transcript of every round, and a
    # client cannot be excluded (the correction assumes full groups), so the
    # signature narrows the base one on purpose.
    def fit_from_messages(  # type: ignore[override]
        self,
        messages: Sequence[Sequence[Mapping[str, Any] | None] | Mapping[str, Any]],
        *,
        alpha: float,
        n_per_client: ArrayLike,
        clients: ArrayLike | None = None,
        random_state: RandomStateLike = None,
        on_invalid: Literal["raise"] = "raise",
    ) -> LDPScoreCalibrator:
        """Fit from the transcript of a protocol run: the server's whole side.

        Replays :meth:`server_init` and :meth:`server_update` on what the
        clients answered, checking every answer against the query the server
        posed, then checks that the users each client named are those of
        the public assignment (``O(n)`` once, at most ``T`` times the
        answers held), and sets the fitted attributes. The server sees only
        the bits.

        Parameters
        ----------
        messages : list of list
            One entry per round; each a list with one message per client (a
            :meth:`client_respond` dict, or ``None`` for a client with no
            asked user), in the order of ``n_per_client``.
        alpha : float
            Miscoverage level in (0, 1).
        n_per_client : array-like of int
            Number of users of each client (announced before the run).
        clients : array-like of shape (n_clients,), default=None
            Client labels (default ``0..n_clients-1``).
        random_state : int, Generator, RandomState or SeedSequence
            The seed the run's :meth:`server_init` used for the (public)
            group assignment: the answers are checked against those groups.
        on_invalid : "raise", default="raise"
            An invalid answer raises
            :class:`~skfedcp.exceptions.InvalidMessageError`. Excluding a
            client is not possible here: the correction assumed every
            group's full size.

        Returns
        -------
        self : LDPScoreCalibrator
            The fitted calibrator.
        """
        self._validate_params()
        alpha = check_alpha(alpha)
        sizes = check_client_sizes(n_per_client)
        clients = check_client_labels(clients, sizes.shape[0])
        if on_invalid != "raise":
            raise ValueError(
                f'on_invalid must be "raise" for the interactive LDP-S protocol '
                f"(an excluded answer would shrink a group below the size its "
                f"correction assumed); got {on_invalid!r}."
            )
        if isinstance(random_state, str) or random_state is None:
            raise ValueError(
                "random_state must be the seed given to server_init for the "
                "group assignment (an int or a SeedSequence), so that the answers "
                f"can be checked against the groups; got {random_state!r}."
            )
        if not isinstance(messages, list | tuple):
            raise InvalidMessageError(
                "messages must be a list of rounds, each a list with one message "
                f"(or None) per client; got {type(messages).__name__}."
            )
        seed = check_seed_sequence(random_state)
        state = self._named_init(sizes, clients, alpha, seed)
        transcript = _Transcript(clients)
        for round_messages in messages:
            if state["done"]:
                raise InvalidMessageError(
                    f"the transcript has {len(messages)} rounds; the protocol "
                    f"finished after {state['round']}."
                )
            try:
                new_state = self.server_update(state, round_messages)
            except InvalidMessageError as exc:
                if exc.client is None:
                    raise
                raise _name_client(exc, clients) from None
            transcript.add(state["queries"], round_messages)  # checked
            state = new_state
        if not state["done"]:
            raise InvalidMessageError(
                f"the transcript ends after {state['round']} round(s) but the "
                "protocol is not finished."
            )
        _check_public_users(state, transcript, clients)
        return self._set_fitted(state, transcript, sizes, alpha)

    def _named_init(self, sizes, clients, alpha, seed):
        """:meth:`server_init` on the server's stream of ``seed``; a refused
        announcement (e.g. above the share cap) names the client's label."""
        try:
            return self.server_init(
                sizes, alpha=alpha, random_state=_server_stream(seed)
            )
        except InvalidMessageError as exc:
            raise _name_client(exc, clients) from None

    @atomic_fit  # the fitted attributes change only when the fit completes
    def _set_fitted(self, state, transcript, sizes, alpha):
        """Set the fitted attributes from the final state and the checked rounds."""
        clients = transcript.clients
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
        self.transcript_ = transcript.log()
        n_reports, reports = transcript.reports_per_client(sizes.shape[0])
        self.messages_ = {
            "client": clients,
            "n_reports": n_reports,
            "reports": reports,
        }
        self.clients_ = clients
        self.n_clients_ = int(sizes.shape[0])
        self.n_per_client_ = sizes
        self._fitted_alpha = alpha  # the default of coverage_bounds()
        self.calibration_info_ = self.plan(sizes, alpha)
        self.excluded_clients_ = clients[:0]
        return self

    def _aggregate(self, received, *, alpha, random_state):
        raise NotImplementedError("LDP-S runs in rounds: see server_update.")


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
        ``q_T`` (the paper; needs ``search="paper"``).
    score_bounds : tuple of two floats, default=None
        Public range searched (required; ``(0, 1)`` for LAC and APS).
    search : {"tight", "paper"}, default="tight"
        No band, upper end and ``Delta_S = c sqrt(ln(T/delta) / (2 n'))``,
        or the paper's band and ``Delta_S = 2 c sqrt(ln(2T/delta) / (2 n'))``.
    axis : {"logit", "log", "linear"}, default="logit"
        Scale on which the interval is halved (see
        :class:`LDPScoreCalibrator`).
    max_client_share : float in (0, 1] or None, default=None
        Public cap on one client's share of the users (see
        :class:`LDPScoreCalibrator`).

    Attributes
    ----------
    target_coverage_ : float
        ``1 - alpha + Delta_S``; the other fitted attributes are those of
        :class:`LDPScoreCalibrator` (``threshold_``, ``correction_``,
        ``history_``, ``transcript_``, ...), with ``n_steps_used_ = 0`` when
        the target reaches 1.

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
    >>> round(cal.target_coverage_, 4), round(cal.threshold_, 4)
    (0.9315, 0.9308)
    """

    _star = True
