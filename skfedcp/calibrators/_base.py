"""BaseCalibrator: the client step / server step protocol and its simulation."""

from __future__ import annotations

from functools import partial, wraps
from typing import Any, ClassVar, Literal, NamedTuple, TypeVar

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from .._typing import ClientIds, Messages, SecureRandomStateLike
from ..exceptions import (
    InfiniteThresholdWarning,
    InvalidMessageError,
    InvalidMessageWarning,
    SingleClientWarning,
)
from ..federated import ClientPartition
from ..utils._atomic import atomic_fit
from ..utils._docstrings import fill_doc
from ..utils._random import spawn_random_states
from ..utils._sklearn_compat import ParamNamesCacheMixin
from ..utils._validation import check_alpha, check_scores
from ..utils._warnings import warn_user
from ._messages import (
    Received,
    check_client_labels,
    check_client_sizes,
    collect_messages,
    invalid_message_error,
    stack_messages,
)

__all__ = ["BaseCalibrator", "CoverageBounds", "stack_messages"]

_Calibrator = TypeVar("_Calibrator", bound="BaseCalibrator")


class CoverageBounds(NamedTuple):
    """Coverage implied by theory for given client sizes and ``alpha``.

    ``lower`` holds for any score law (ties included); ``upper`` holds for
    continuous scores (almost surely distinct). ``nan`` where theory gives
    nothing.
    """

    lower: float
    upper: float


@fill_doc
class BaseCalibrator(ParamNamesCacheMixin, BaseEstimator):
    """Turn per-client conformity scores into a calibrated threshold.

    A strategy is two public, state-free steps that can run on separate
    machines:

    * :meth:`client_step` sees one client's scores and returns the message that
      client sends (plain numbers);
    * :meth:`server_step` sees only the messages and returns the threshold.

    Both may first call :meth:`plan`, the public, data-free computation that
    depends only on ``alpha`` and the client sizes (e.g. which ranks to use);
    a server can broadcast it before the round.

    :meth:`fit_from_messages` is the server's whole side: it checks every
    message against the plan, aggregates, and sets the fitted attributes.
    :meth:`fit` simulates one round in-process: it runs the clients' steps on
    the scores and hands their messages to the same server path. The
    prediction set for a new point is ``{y : score(x, y) <= threshold_}``.

    Attributes
    ----------
    threshold_ : float
        Calibrated threshold; ``+inf`` means the trivial (always covering) set.
    messages_ : dict of ndarray
        What the server received, one entry per client (``client`` holds the
        client labels); no raw scores unless the strategy sends them.
    clients_ : ndarray of shape (n_clients,)
        Client labels (sorted in :meth:`fit`).
    n_clients_ : int
        Number of clients.
    n_per_client_ : ndarray of shape (n_clients,)
        Calibration size of each client.
    calibration_info_ : dict
        The public plan used (ranks, exact coverage, feasibility, ...).
    excluded_clients_ : ndarray
        Labels of the clients whose invalid messages were left out
        (``on_invalid="exclude"``); empty otherwise.
    """

    _parameter_constraints: dict = {}

    # Whether client or server steps consume randomness.
    _randomized = False

    # Whether the strategy is federated (its result depends on the clients):
    # a fit without client_ids then warns that all rows form one client.
    _federated = False

    #: Fields of one client's message and their kinds (see
    #: ``skfedcp.calibrators._messages.FIELD_KINDS``). ``None`` (a strategy
    #: written against the older API that overrides ``server_step``): the
    #: messages are only stacked and checked for NaN.
    _message_fields: ClassVar[dict[str, str] | None] = None

    #: Whether ``fit`` takes the ``(n, n_classes)`` score matrix of every
    #: label plus ``labels=`` (LDP-L) instead of one score per row.
    requires_score_matrix = False

    #: Whether this class's ``_simulate_clients`` accepts
    #: ``check_finite=True`` and then checks the finiteness of the scores
    #: itself, inside its own pass over them (:meth:`fit` then skips the
    #: separate scan of :meth:`_check_fit_scores` for a 1-D float64 array).
    #: Read from the class that defines ``_simulate_clients``, so that a
    #: subclass overriding either method keeps the separate check.
    _simulation_checks_finite = False

    #: Whether the protocol runs in rounds (``server_init`` /
    #: ``client_respond`` / ``server_update``, LDP-S) rather than one
    #: ``client_step`` / ``server_step`` exchange.
    interactive = False

    #: Private attributes that belong to a fit (see ``atomic_fit``): the
    #: ``alpha`` that ``coverage_bounds()`` defaults to.
    _private_fit_state = frozenset({"_fitted_alpha"})

    def plan(self, n_per_client: ArrayLike, alpha: float) -> dict[str, Any]:
        """Public, data-free computation shared by clients and server.

        Parameters
        ----------
        %(n_per_client)s
        %(alpha)s

        Returns
        -------
        plan : dict
            Strategy-specific; always has the key ``"feasible"``.
        """
        return {"feasible": True}

    def client_step(
        self,
        scores: ArrayLike,
        *,
        alpha: float,
        n_per_client: ArrayLike,
        random_state: SecureRandomStateLike = None,
    ) -> dict[str, Any]:
        """Compute the message one client sends (see the class's **Message**).

        The client checks its own input (the strategy's parameters, its
        scores, ``alpha`` and the announced sizes), then computes its
        message from its own scores.

        Parameters
        ----------
        %(client_scores)s
        %(alpha)s
        n_per_client : array-like of int
            Public calibration sizes of all clients (some strategies need them
            to choose a rank).
        %(client_random_state)s

        Returns
        -------
        message : dict
            Plain numbers or arrays.
        """
        scores, alpha, sizes = self._check_client_input(
            scores, alpha, n_per_client, sizes=True
        )
        return self._client_message(scores, alpha, sizes, random_state)

    def _client_message(self, scores, alpha, n_per_client, random_state):
        """The message of one client, from its checked input.

        ``n_per_client`` is the checked sizes, or None for a strategy whose
        message does not depend on them. A strategy written against the
        older API overrides :meth:`client_step` instead.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement _client_message (or client_step)."
        )

    def server_step(
        self,
        messages: Messages,
        *,
        alpha: float,
        n_per_client: ArrayLike | None = None,
        random_state: SecureRandomStateLike = None,
    ) -> float:
        """Aggregate the clients' messages into a threshold.

        Every message is first checked against the public plan (see
        :meth:`fit_from_messages`); an invalid one raises
        :class:`~skfedcp.exceptions.InvalidMessageError`.

        Parameters
        ----------
        messages : list of dict or dict of array-like
            One message per client, in the order of ``n_per_client``.
        alpha : float
            Miscoverage level in (0, 1).
        n_per_client : array-like of int, default=None
            Public calibration sizes, in the order of ``messages``. Required,
            except by a strategy whose server needs no plan before the round
            (LDP-L), which then takes the sizes the messages carry.
        random_state : int, Generator, RandomState, SeedSequence, "secure" \
                or None, default=None
            Randomness of the server step, if any (unused by deterministic
            server steps).

        Returns
        -------
        threshold : float
        """
        if self.interactive:
            raise NotImplementedError(_interactive_message(self))
        if n_per_client is None:
            n_per_client = self._sizes_from_messages(messages)
        self._validate_params()
        alpha = check_alpha(alpha)
        sizes = check_client_sizes(n_per_client)
        received = self._receive(
            messages,
            clients=np.arange(sizes.shape[0]),
            sizes=sizes,
            alpha=alpha,
            on_invalid="raise",
        )
        threshold, _ = _split_details(
            self._aggregate(received, alpha=alpha, random_state=random_state)
        )
        return threshold

    def _sizes_from_messages(self, messages):
        """The sizes :meth:`server_step` uses when ``n_per_client`` is None.

        Default None: the sizes announced before the round are required
        (the plan is built from them), and their check refuses None.
        """
        return None

    def coverage_bounds(self, n_per_client: ArrayLike, alpha: float) -> CoverageBounds:
        """Coverage implied by theory (see :class:`CoverageBounds`).

        On a fitted calibrator both arguments may be left out: they default
        to the fitted ``n_per_client_`` and the ``alpha`` of the fit (every
        strategy's ``coverage_bounds`` accepts that, see
        :meth:`__init_subclass__`).
        """
        return CoverageBounds(np.nan, np.nan)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A strategy's own coverage_bounds(n_per_client, alpha) also answers
        # coverage_bounds() on a fitted instance, from its fitted sizes and
        # alpha (issue 24).
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("coverage_bounds")
        if own is not None and not getattr(own, "_fills_fitted_args", False):
            cls.coverage_bounds = _fill_fitted_args(own)  # type: ignore[method-assign]

    # -- the server's side -------------------------------------------------

    def fit_from_messages(
        self,
        messages: Messages,
        *,
        alpha: float,
        n_per_client: ArrayLike,
        clients: ArrayLike | None = None,
        random_state: SecureRandomStateLike = None,
        on_invalid: Literal["raise", "exclude"] = "raise",
    ) -> BaseCalibrator:
        """Fit from what the clients sent: the server's whole side of a round.

        Checks every message against the public plan, aggregates the valid
        ones with the strategy's server step and sets the fitted attributes.
        Both :meth:`fit` (in-process) and the Flower server go through here.

        Parameters
        ----------
        messages : list of dict or dict of array-like
            One message per client, in the order of ``n_per_client`` (as
            returned by :meth:`client_step`), or the same stacked field by
            field.
        alpha : float
            Miscoverage level in (0, 1).
        n_per_client : array-like of int
            The sizes the clients announced before the round (the public
            plan was computed from them).
        clients : array-like of shape (n_clients,), default=None
            Client labels, used in errors and in ``clients_``; default
            ``0..n_clients-1``.
        random_state : int, Generator, RandomState, SeedSequence, "secure" \
                or None, default=None
            Randomness of the server step, if any. The server's stream is
            the first stream spawned from ``random_state``, as in
            :meth:`fit`, so the same seed gives the same server draws.
        on_invalid : {"raise", "exclude"}, default="raise"
            ``"raise"``: an invalid message raises
            :class:`~skfedcp.exceptions.InvalidMessageError` naming the
            client and the field. ``"exclude"``: the offending clients are
            left out with an :class:`~skfedcp.exceptions.InvalidMessageWarning`
            (how depends on the strategy: see Notes).

        Returns
        -------
        self : object
            The fitted calibrator.

        Notes
        -----
        A message is valid when it has exactly the strategy's fields, plain
        numbers where numbers are due, the size its client announced, arrays
        of the announced length, no NaN and no ``-inf``, plus the strategy's
        own rules (``+inf`` only where the plan allows it, values on the
        announced grid). NaN never reaches a threshold.

        With ``on_invalid="exclude"``, strategies whose messages do not depend
        on the plan (central, Avg, DP central, LDP-L) drop the offenders and
        recompute the plan for the remaining clients; QQ and DP-QQ, whose
        clients used ranks computed for every announced client, count each
        offender as having sent ``+inf``, which can only raise the threshold:
        the announced coverage guarantee still holds for the honest clients'
        data. A deployment that prefers the tighter plan of the remaining
        clients runs a new round with them (as the Flower server does for
        non-private strategies).

        Examples
        --------
        >>> from skfedcp.calibrators import QuantileOfQuantilesCalibrator
        >>> cal = QuantileOfQuantilesCalibrator()
        >>> messages = [{"n": 10, "quantile": float(q)} for q in range(1, 6)]
        >>> cal = cal.fit_from_messages(messages, alpha=0.1, n_per_client=[10] * 5)
        >>> cal.threshold_, cal.calibration_info_["k"]
        (3.0, 3)
        """
        self._validate_params()
        alpha = check_alpha(alpha)
        sizes = check_client_sizes(n_per_client)
        clients = check_client_labels(clients, sizes.shape[0])
        if on_invalid not in ("raise", "exclude"):
            raise ValueError(
                f'on_invalid must be "raise" or "exclude"; got {on_invalid!r}.'
            )
        server_rng = None
        if self._randomized:
            server_rng = spawn_random_states(random_state, 1)[0]
        return self._fit_messages(
            messages,
            clients=clients,
            sizes=sizes,
            alpha=alpha,
            random_state=server_rng,
            on_invalid=on_invalid,
        )

    @atomic_fit  # the fitted attributes change only when the fit completes
    def _fit_messages(
        self,
        messages,
        *,
        clients,
        sizes,
        alpha,
        random_state,
        on_invalid,
        trusted=False,
        pooled=None,
    ):
        received = self._receive(
            messages,
            clients=clients,
            sizes=sizes,
            alpha=alpha,
            on_invalid=on_invalid,
            trusted=trusted,
            pooled=pooled if trusted else None,
        )
        threshold, details = _split_details(
            self._aggregate(received, alpha=alpha, random_state=random_state)
        )
        if np.isnan(threshold):  # defensive: aggregation of checked values
            raise RuntimeError(f"{type(self).__name__}: the threshold is NaN.")
        self.threshold_ = threshold
        self.messages_ = {"client": received.clients, **self._public_messages(received)}
        self.clients_ = received.clients
        self.n_clients_ = int(received.clients.shape[0])
        self.n_per_client_ = received.sizes
        self._fitted_alpha = alpha  # the default of coverage_bounds()
        self.calibration_info_ = received.plan
        self.excluded_clients_ = received.excluded
        self._after_fit(received, alpha=alpha, details=details)
        return self

    def _server_plan(self, sizes, alpha, stacked):
        """The plan the server checks messages against (default: :meth:`plan`)."""
        return self.plan(sizes, alpha)

    def _receive(
        self,
        messages,
        *,
        clients,
        sizes,
        alpha,
        on_invalid,
        trusted=False,
        pooled=None,
    ):
        """Check messages against the plan; raise, or exclude the offenders.

        ``pooled`` (trusted in-process path only): the per-row fields as
        single arrays, of which the messages' per-client arrays are views
        (see :class:`~skfedcp.calibrators._messages.Received`); the
        strategy's rules may then be checked on them in one pass
        (:meth:`_check_pooled`).
        """
        stacked, problems = collect_messages(
            messages, self._message_fields, sizes, trusted=trusted
        )
        if problems and on_invalid == "raise":
            raise invalid_message_error(problems[0], clients, len(problems))
        plan = self._server_plan(sizes, alpha, stacked)
        bad = np.zeros(sizes.shape[0], dtype=bool)
        bad[[p.index for p in problems]] = True
        if pooled is not None and not problems:
            found = self._check_pooled(
                stacked, pooled, sizes=sizes, plan=plan, alpha=alpha
            )
        else:
            pooled = None
            found = self._check_messages(
                stacked, sizes=sizes, plan=plan, alpha=alpha, valid=~bad
            )
        problems += [p for p in found if not bad[p.index]]
        excluded = clients[:0]
        if problems:
            problems.sort(key=lambda p: p.index)
            if on_invalid == "raise":
                raise invalid_message_error(problems[0], clients, len(problems))
            bad[[p.index for p in problems]] = True
            if bad.all():
                raise InvalidMessageError(
                    f"{type(self).__name__}: every client sent an invalid message "
                    f"(first: {invalid_message_error(problems[0], clients)}); "
                    "nothing is left to calibrate on."
                )
            listed = "; ".join(
                str(invalid_message_error(p, clients))
                .removeprefix("invalid message from ")
                .rstrip(".")
                for p in problems[:5]
            )
            more = "; ..." if len(problems) > 5 else ""
            stacked, clients, sizes, plan, excluded = self._exclude(
                stacked, clients=clients, sizes=sizes, plan=plan, bad=bad, alpha=alpha
            )
            warn_user(
                f"{type(self).__name__}: {len(problems)} client(s) sent an invalid "
                f"message and were excluded ({listed}{more}). "
                f"{self._exclusion_note()}",
                InvalidMessageWarning,
            )
            pooled = None
        return Received(stacked, clients, sizes, plan, excluded, pooled)

    def _check_messages(self, stacked, *, sizes, plan, alpha, valid):
        """Strategy rules beyond the field kinds; return a list of ``Problem``.

        ``valid`` marks the clients whose fields passed the generic checks;
        the others hold placeholders and must be skipped.
        """
        return []

    def _check_pooled(self, stacked, pooled, *, sizes, plan, alpha):
        """:meth:`_check_messages` for the trusted path, given the pooled rows.

        The default checks the per-client messages; a strategy may check the
        pooled arrays in one pass and fall back to :meth:`_check_messages`
        (which names the client) only when that pass finds a problem.
        """
        valid = np.ones(sizes.shape[0], dtype=bool)
        return self._check_messages(
            stacked, sizes=sizes, plan=plan, alpha=alpha, valid=valid
        )

    def _exclude(self, stacked, *, clients, sizes, plan, bad, alpha):
        """Leave out the clients flagged in ``bad``.

        Default: drop them and recompute the plan for the others (right for
        strategies whose messages do not depend on the plan).
        """
        keep = ~bad
        stacked = {key: value[keep] for key, value in stacked.items()}
        sizes = sizes[keep]
        plan = self._server_plan(sizes, alpha, stacked)
        return stacked, clients[keep], sizes, plan, clients[bad]

    def _exclusion_note(self):
        return "The plan was recomputed for the remaining clients."

    def _aggregate(self, received, *, alpha, random_state):
        """The server step proper, on checked messages: a float or a pair.

        Returns the threshold, or ``(threshold, details)`` where ``details``
        is handed to :meth:`_after_fit`. The default calls an overridden
        :meth:`server_step` (strategies written against the older API).
        """
        if type(self).server_step is BaseCalibrator.server_step:
            raise NotImplementedError(
                f"{type(self).__name__} must implement _aggregate (or server_step)."
            )
        return self.server_step(
            received.stacked,
            alpha=alpha,
            n_per_client=received.sizes,
            random_state=random_state,
        )

    def _public_messages(self, received):
        """What ``messages_`` keeps of the received messages (default: all)."""
        return received.stacked

    def _after_fit(self, received, *, alpha, details=None):
        """Warn about a trivial threshold; other strategies set more attributes.

        ``details`` is the second item when :meth:`_aggregate` returns a
        ``(threshold, details)`` pair.
        """
        if np.isposinf(self.threshold_):
            warn_user(
                f"{type(self).__name__}: the calibrated threshold is +inf "
                f"(alpha={alpha}, client sizes {_describe_sizes(received.sizes)}); "
                "prediction sets are trivial. Use more calibration data or a larger "
                "alpha.",
                InfiniteThresholdWarning,
            )

    # -- the in-process simulation -------------------------------------------

    def _random_streams(self, random_state, n_clients):
        """The server's stream and one independent stream per client.

        All are spawned from one ``SeedSequence`` (stream 0: the server;
        stream ``j + 1``: client ``j`` in sorted-client order); ``None`` means
        fresh operating-system entropy and ``"secure"`` is passed on as is.
        """
        if not self._randomized:
            return None, [None] * n_clients
        streams = spawn_random_states(random_state, n_clients + 1)
        return streams[0], streams[1:]

    def _simulate_clients(self, partition, scores, *, alpha, rngs, n_jobs=None):
        """Messages of every client, stacked; override to vectorize.

        Must return exactly what calling :meth:`client_step` on each client
        would, in the order of ``partition.clients``.
        """
        groups = partition.split(scores)
        step = partial(self.client_step, alpha=alpha, n_per_client=partition.sizes)
        if n_jobs is None or n_jobs == 1:
            messages = [
                step(g, random_state=r) for g, r in zip(groups, rngs, strict=True)
            ]
        else:  # expensive client steps: one joblib task per client
            messages = Parallel(n_jobs=n_jobs)(
                delayed(step)(g, random_state=r)
                for g, r in zip(groups, rngs, strict=True)
            )
        return stack_messages(messages)

    def _check_fit_scores(self, scores: ArrayLike) -> NDArray[np.float64]:
        return check_scores(scores)

    def _check_client_input(
        self,
        scores: ArrayLike,
        alpha: float,
        n_per_client: ArrayLike | None,
        *,
        sizes: bool = False,
    ) -> tuple[NDArray[np.float64], float, NDArray[np.int64] | None]:
        """A client's own checks before it computes its message.

        ``sizes=True``: the step needs the announced sizes (its rank depends
        on them), so ``n_per_client`` is required.
        """
        self._validate_params()
        scores = self._check_fit_scores(scores)
        alpha = check_alpha(alpha)
        checked = None
        if sizes or n_per_client is not None:
            checked = check_client_sizes(n_per_client)
        return scores, alpha, checked

    def fit(
        self: _Calibrator,
        scores: ArrayLike,
        client_ids: ClientIds = None,
        *,
        alpha: float,
        random_state: SecureRandomStateLike = None,
        n_jobs: int | None = None,
    ) -> _Calibrator:
        """Simulate one calibration round in-process.

        Runs every client's step on its own rows, then the server's side
        (:meth:`fit_from_messages`) on the messages; an interactive strategy
        (LDP-S) runs its rounds in turn (see its Notes). The calibrator
        keeps only what the server sees.

        Parameters
        ----------
        %(scores)s
        %(client_ids)s
        %(alpha)s
        random_state : int, Generator, RandomState, SeedSequence, "secure" \
                or None, default=None
            Root of the clients' and the server's randomness (independent
            streams spawned from one ``SeedSequence``, in sorted-client
            order; ``None``: fresh operating-system entropy, never NumPy's
            global state); ``"secure"`` makes every party draw from the
            operating system's secure generator (not reproducible, for
            deployment).
        n_jobs : int, default=None
            Run the clients' steps in parallel with joblib (``-1``: all cores).
            Only strategies without a vectorised simulation use it; results do
            not depend on it.

        Returns
        -------
        self : object
            The fitted calibrator.
        """
        self._validate_params()
        alpha = check_alpha(alpha)
        deferred = (
            isinstance(scores, np.ndarray)
            and scores.dtype == np.float64
            and scores.ndim == 1
            and _simulation_checks_finite(type(self))
        )
        # deferred: already a 1-D float64 array (np.asarray returns it as is).
        scores = np.asarray(scores) if deferred else self._check_fit_scores(scores)
        if client_ids is None and self._federated:
            _warn_single_client(self)
        partition = ClientPartition(client_ids, scores.shape[0])
        # A deferred finiteness check is done once, by the simulation, in
        # its own pass over the scores (a NaN still raises before any
        # message exists).
        extra = {"check_finite": True} if deferred else {}
        return self._fit_round(partition, scores, alpha, random_state, n_jobs, extra)

    def _fit_round(self, partition, scores, alpha, random_state, n_jobs, extra):
        """Run the round on the checked scores, then the server's side.

        One-shot protocol: every client's step (:meth:`_simulate_clients`)
        and :meth:`_fit_simulated`. An interactive strategy runs its rounds
        here instead.
        """
        server_rng, rngs = self._random_streams(random_state, partition.n_clients)
        stacked = self._simulate_clients(
            partition, scores, alpha=alpha, rngs=rngs, n_jobs=n_jobs, **extra
        )
        return self._fit_simulated(
            stacked, partition, alpha, server_rng, self._simulated_pool(scores)
        )

    def _fit_simulated(self, stacked, partition, alpha, server_rng, pooled):
        """The server's side of an in-process round, on the simulated messages.

        Trusted (the messages come from this process), so the generic field
        checks are skipped and the strategy's rules may be checked on the
        ``pooled`` rows in one pass.
        """
        return self._fit_messages(
            stacked,
            clients=partition.clients,
            sizes=partition.sizes,
            alpha=alpha,
            random_state=server_rng,
            on_invalid="raise",
            trusted=True,
            pooled=pooled,
        )

    def _simulated_pool(self, scores):
        """The per-row fields of the simulated messages as single arrays, or None.

        In-process only (the trusted path): a strategy whose aggregation
        pools the clients' rows may return them here, in any row order, so
        that it need not concatenate its messages (see
        :class:`~skfedcp.calibrators._messages.Received`). Never written.
        """
        return None


def _fill_fitted_args(method):
    """``method(self, n_per_client, alpha, ...)`` with both defaulting to the fit."""

    @wraps(method)
    def coverage_bounds(self, n_per_client=None, alpha=None, *args, **kwargs):
        if n_per_client is None or alpha is None:
            if not hasattr(self, "n_per_client_"):
                raise NotFittedError(
                    f"{type(self).__name__}.coverage_bounds() needs n_per_client "
                    "and alpha, or a fitted calibrator."
                )
            fitted_alpha = getattr(self, "_fitted_alpha", None)
            if alpha is None and fitted_alpha is None:
                raise TypeError(
                    f"{type(self).__name__} does not record the alpha of its fit: "
                    "pass coverage_bounds(n_per_client, alpha)."
                )
            n_per_client = self.n_per_client_ if n_per_client is None else n_per_client
            alpha = fitted_alpha if alpha is None else alpha
        return method(self, n_per_client, alpha, *args, **kwargs)

    coverage_bounds._fills_fitted_args = True  # type: ignore[attr-defined]
    return coverage_bounds


def _simulation_checks_finite(cls):
    """Whether ``fit`` may leave the finiteness check to the simulation."""
    if cls._check_fit_scores is not BaseCalibrator._check_fit_scores:
        return False
    for klass in cls.__mro__:
        if "_simulate_clients" in vars(klass):
            return vars(klass).get("_simulation_checks_finite", False) is True
    return False


def _warn_single_client(calibrator):
    warn_user(
        f"{type(calibrator).__name__} was fitted without client_ids: all rows form "
        "one client, so the federated calibration runs as if the data were "
        "pooled. Pass client_ids (the client of each calibration row).",
        SingleClientWarning,
    )


def _interactive_message(calibrator):
    return (
        f"{type(calibrator).__name__} runs in rounds: use server_init, "
        "client_respond and server_update (or fit to simulate them)."
    )


def _split_details(result):
    threshold, details = result if isinstance(result, tuple) else (result, None)
    return float(threshold), details


def _describe_sizes(sizes):
    sizes = np.asarray(sizes)
    if sizes.size <= 6:
        return sizes.tolist()
    return f"{sizes.size} clients, {sizes.min()}..{sizes.max()} rows"


# The base's own (nan, nan) answers coverage_bounds() too, for the
# strategies that inherit it.
BaseCalibrator.coverage_bounds = _fill_fitted_args(  # type: ignore[method-assign]
    BaseCalibrator.coverage_bounds
)
