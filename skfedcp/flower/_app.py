"""The Flower ClientApp factory and the one-task server runners."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from numpy.typing import ArrayLike

from .._config import config_context
from .._typing import ConformityScoreLike, SecureRandomStateLike
from ..calibrators import BaseCalibrator, GroupedCalibrator
from ..feature_selection import FedChi2Selector
from ._calibrate_groups import calibrate
from ._protocol import NodeConfig, handle_request
from ._select import select_chi2_nodes
from ._session import DeploymentReport, ServerSession
from ._wire import (
    MESSAGE_TYPE,
    _ContextState,
    _from_record_dict,
    _grid_exchange,
    _require_flwr,
    _to_record_dict,
)

if TYPE_CHECKING:  # flwr is an optional extra, imported inside the functions
    from flwr.app import Context
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid

__all__ = [
    "make_client_app",
    "run_calibration",
    "run_chi2_selection",
]

# --------------------------------------------------------------------------
# ClientApp


def make_client_app(
    load_data: Callable[[Context], tuple[Any, Any]],
    *,
    load_model: Callable[[Context], Any] | None = None,
    load_selection_data: Callable[[Context], tuple[Any, Any]] | None = None,
    conformity_score: ConformityScoreLike = "absolute",
    allow_raw_scores: bool = False,
    group_by: str | int | Callable[[Any], ArrayLike] | None = None,
) -> ClientApp:
    """Build the Flower ``ClientApp`` a node runs.

    The app answers the server's ``query.skfedcp`` messages: it loads the
    node's rows and the shared model, computes the conformity scores on the
    node and replies with the strategy's client message (one float for
    ``"qq"`` and ``"avg"``), or with a pairwise-masked FED-chi2 vector.

    Parameters
    ----------
    load_data : callable
        ``load_data(context) -> (X, y)``: this node's calibration rows.
        ``context`` is Flower's ``Context``; ``context.node_config`` holds the
        node's settings (e.g. a data path).
    load_model : callable, default=None
        ``load_model(context) -> model``: the shared fitted model (same
        version on every node, checked by :func:`model_fingerprint`).
        Required for calibration.
    load_selection_data : callable, default=None
        ``load_selection_data(context) -> (X, y)``: non-negative features and
        class labels for :class:`~skfedcp.feature_selection.FedChi2Selector`.
        ``None`` uses ``load_data``.
    conformity_score : str, score object or callable, default="absolute"
        A score name (``"absolute"``, ...), a fitted score object, or
        ``score(model, X, y) -> scores``. Must match the server's.
    allow_raw_scores : bool, default=False
        Whether this node answers strategies that send its per-row scores
        (``"central"``, ``"dp-central"``, ``"ldp-l"``, ``"ldp-l*"``); the node
        config ``allow-raw-scores`` overrides it.
    group_by : None, "class", str, int or callable, default=None
        The group of each calibration row, for group-conditional calibration
        (the server's ``groups``), by the wrappers' rule: ``"class"`` (the
        row's label), a column of X (name or index) or a callable ``X ->
        labels``. The node then announces its cells (group labels and
        sizes) and sends one message per non-empty cell.

    Returns
    -------
    app : flwr.clientapp.ClientApp

    Notes
    -----
    Node config keys read by the app: ``client-id`` (the client label; else
    ``partition-id``, else Flower's node id), ``seed`` (the node's random
    stream for private strategies, see :func:`node_random_state`; leave it
    out in a real deployment: the node then draws from the operating
    system's secure generator and nobody else knows its noise;
    :func:`simulation_seeds` gives the values that reproduce an in-process
    fit) and ``projection-seed`` (FED-chi2's shared secret seed, the same on
    every node and unknown to the server). The server never sends a seed.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("flwr")
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> model = LinearRegression().fit([[0.0], [1.0]], [0.0, 1.0])
    >>> def load_data(context):
    ...     rng = np.random.default_rng(context.node_config["client-id"])
    ...     X = rng.normal(size=(50, 1))
    ...     return X, X[:, 0] + rng.normal(size=50)
    >>> app = make_client_app(load_data, load_model=lambda context: model)
    >>> type(app).__name__
    'ClientApp'
    """
    _require_flwr()
    from flwr.app import Message
    from flwr.clientapp import ClientApp

    for name, value in (
        ("load_data", load_data),
        ("load_model", load_model),
        ("load_selection_data", load_selection_data),
    ):
        if value is not None and not callable(value):
            raise TypeError(f"{name} must be callable; got {type(value).__name__}.")
    if load_data is None:
        raise TypeError("load_data must be callable; got None.")
    if load_model is not None:
        from ._fingerprint import resolve_node_score

        resolve_node_score(conformity_score)  # fail early on a bad score
    config = NodeConfig(
        load_data,
        load_model,
        load_selection_data,
        conformity_score,
        bool(allow_raw_scores),
        group_by,
    )
    app = ClientApp()

    @app.query(MESSAGE_TYPE.split(".", 1)[1])
    def skfedcp_query(message, context):
        request = _from_record_dict(message.content)
        reply = handle_request(
            request,
            config=config,
            context=context,
            node_id=context.node_id,
            node_config=context.node_config,
            state=_ContextState(context.state),
        )
        if "nonce" in request:  # binds the reply to this request (no replays)
            reply["nonce"] = request["nonce"]
        return Message(_to_record_dict(reply), reply_to=message)

    return app


#: Type of ``planned_clients``: client labels, or Flower node id -> label.
PlannedClients = Sequence[int | str] | Mapping[int, int | str] | None


def _session(grid, timeout, min_rows, **plan):
    return ServerSession(
        _grid_exchange(grid),
        list(grid.get_node_ids()),
        timeout=timeout,
        min_rows=min_rows,
        **plan,
    )


@contextmanager
def _task(grid, timeout, min_rows, plan):
    """The session of a one-task runner, under the run's plan policy.

    ``plan`` is ``(planned_clients, max_client_size, max_clients)``. The
    bounds the run passes are the plan policy (:func:`skfedcp.get_config`)
    of everything the task runs: the session's hello checks and the
    calibrators' and FED-chi2's own plans, as in
    :func:`~skfedcp.flower.make_server_app`'s app.
    """
    _require_flwr()
    planned_clients, max_client_size, max_clients = plan
    session = _session(
        grid,
        timeout,
        min_rows,
        planned_clients=planned_clients,
        max_client_size=max_client_size,
        max_clients=max_clients,
    )
    with config_context(
        max_client_size=session.max_client_size, max_clients=session.max_clients
    ):
        yield session


def run_calibration(
    grid: Grid,
    calibrator: str | BaseCalibrator = "qq",
    *,
    alpha: float = 0.1,
    model_fingerprint: str | None = None,
    random_state: SecureRandomStateLike = None,
    timeout: float = 120.0,
    min_rows: int = 1,
    max_attempts: int = 3,
    planned_clients: PlannedClients = None,
    max_client_size: int | None = None,
    max_clients: int | None = None,
    groups: ArrayLike | None = None,
    min_group_size: int | None = None,
) -> tuple[BaseCalibrator | GroupedCalibrator, DeploymentReport]:
    """Calibrate a threshold over the nodes of a Flower ``Grid``.

    Round 1 asks every node for its label, its number of calibration rows
    and its model fingerprint; round 2 sends the public sizes and collects
    each node's ``client_step`` message; the server then checks and
    aggregates them with the calibrator's
    :meth:`~skfedcp.calibrators.BaseCalibrator.fit_from_messages`. A node
    that fails, times out, holds another model version or fewer than
    ``min_rows`` rows is left out with a
    :class:`~skfedcp.exceptions.NodeExcludedWarning`, one that sends an
    invalid message with an
    :class:`~skfedcp.exceptions.InvalidMessageWarning`. Non-private
    strategies (``"qq"``, ``"avg"``, ``"central"``) then re-plan for the
    remaining nodes and ask them again; private one-shot strategies exclude
    an invalid message (``on_invalid="exclude"``) but stop with an error
    when a node fails (asking again would spend more budget); LDP-S stops
    with an error in both cases.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The ``grid`` of the ``ServerApp`` main function.
    calibrator : str or BaseCalibrator, default="qq"
        A registered strategy (alias or instance, never mutated).
    alpha : float, default=0.1
        Target miscoverage.
    model_fingerprint : str, default=None
        :func:`model_fingerprint` of the model the nodes must use. ``None``
        takes the most common fingerprint among the nodes.
    random_state : int, Generator, RandomState, SeedSequence, "secure" or \
            None, default=None
        The server's randomness (private strategies): stream 0 of it, as in
        the calibrator's in-process ``fit``; for LDP-S, the seed of the
        public group assignment (``None``: fresh entropy). The nodes' noise
        never comes from it (see :func:`simulation_seeds`).
    timeout : float, default=120.0
        Seconds to wait for the replies of one round.
    min_rows : int, default=1
        Nodes with fewer calibration rows are left out.
    max_attempts : int, default=3
        How many times a round is repeated when nodes fail.
    planned_clients : sequence of int or str, or mapping of int to int or str, \
            default=None
        The planned node set, fixed before the run. A sequence of client
        labels: a node whose announced label (node config ``client-id``) is
        not in it is left out. A mapping ``{Flower node id: client label}``
        (with SuperNode authentication, see the user guide): only those node
        ids are asked, each must announce its planned label. ``None``
        checks nothing and warns. In every case two nodes with one label,
        one public key are all left out (duplicates), and so are two nodes
        with the same rows (Sybils) unless the plan pins their node ids (a
        mapping: authenticated planned participants, both used with a
        warning); a reply must carry its own request's nonce (no replays).
    max_client_size : int, default=None
        Public bound on the rows a node may announce; above it the node is
        left out before any plan is made. None: the plan policy's
        (:func:`skfedcp.get_config`, ``10**9`` unless changed), so that a
        server sets its bounds in one place (:func:`skfedcp.config_context`).
    max_clients : int, default=None
        Public bound on the number of nodes (and planned clients); more
        connected nodes without a pinned plan is an error. None: the plan
        policy's (``10**5`` by default). Both bounds are the plan policy of
        the whole run (hello and the calibrator's own plan), as
        :func:`skfedcp.config_context` would set them.
    groups : array-like of int or str, default=None
        Group-conditional (Mondrian) calibration: the public group list,
        fixed by the server before the run (e.g. the model's ``classes_``
        for nodes grouping by class; at most the plan policy's
        ``max_classes``). Every node (``make_client_app(group_by=...)``)
        announces its cells (the groups it holds rows of, and how many: the
        server learns each node's group histogram), then sends one message
        per non-empty cell; the strategy (``"qq"``, ``"central"``, ``"avg"``
        or ``"dp-qq"``) runs once per group with that group's exact plan. A
        node announcing a group outside the list, a group twice (a
        duplicated cell) or cells that do not add up to its rows is left out
        before any plan, with an
        :class:`~skfedcp.exceptions.InvalidMessageWarning` naming it and
        the field. None: marginal calibration.
    min_group_size : int, default=None
        With ``groups``: groups with fewer rows (all nodes together) are
        calibrated together, as
        :class:`~skfedcp.calibrators.GroupedCalibrator`'s
        ``min_group_size``.

    Returns
    -------
    calibrator : BaseCalibrator or GroupedCalibrator
        Fitted: the same attributes as its in-process ``fit``
        (``threshold_``, ``messages_``, ``clients_``, ...); with ``groups``,
        the :class:`~skfedcp.calibrators.GroupedCalibrator` its in-process
        ``fit(scores, clients, group_ids=..., known_groups=groups)`` gives.
    report : DeploymentReport
        Nodes used and excluded, rounds and message sizes.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("flwr")
    >>> from flwr.serverapp import ServerApp
    >>> app = ServerApp()
    >>> @app.main()
    ... def main(grid, context):
    ...     calibrator, report = run_calibration(grid, "qq", alpha=0.1)
    ...     print(calibrator.threshold_)
    """
    plan = (planned_clients, max_client_size, max_clients)
    with _task(grid, timeout, min_rows, plan) as session:
        nodes = session.hello(calibration=True, groups=groups is not None)
        nodes = session.usable(nodes, "n")
        nodes, expected = session.check_fingerprints(nodes, model_fingerprint)
        fitted, used = calibrate(
            session,
            nodes,
            calibrator,
            alpha=alpha,
            fingerprint=expected,
            random_state=random_state,
            max_attempts=max_attempts,
            groups=groups,
            min_group_size=min_group_size,
        )
        return fitted, session.report(used)


def run_chi2_selection(
    grid: Grid,
    selector: FedChi2Selector | None = None,
    *,
    classes: ArrayLike | None = None,
    n_features: int | None = None,
    max_value: float | ArrayLike | None = None,
    timeout: float = 120.0,
    min_rows: int = 1,
    max_attempts: int = 3,
    planned_clients: PlannedClients = None,
    max_client_size: int | None = None,
    max_clients: int | None = None,
) -> tuple[FedChi2Selector, DeploymentReport]:
    """Fit a :class:`~skfedcp.feature_selection.FedChi2Selector` over a ``Grid``.

    Round 1 collects the nodes' labels, sizes and X25519 public keys; round
    2 securely sums the class counts and feature totals; round 3 securely
    sums the projected residuals (the FED-chi2 sketch), which the server
    decodes into chi-square scores. The secure sums use pairwise masks from
    real key agreement: the server learns the sums only. A node that fails
    during a secure sum makes the masks unrecoverable; the sum is then
    repeated among the remaining nodes (in round 3 this is FedChi2Selector's
    ``dropout``).

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The ``grid`` of the ``ServerApp`` main function.
    selector : FedChi2Selector, default=None
        Parameters of the selection (``k``, ``n_projections``,
        ``estimator``, ...); ``None`` means ``FedChi2Selector()``. Only
        ``method="sketch"`` and ``statistic="sklearn"`` are deployed.
    classes : array-like, default=None
        The public label set, fixed before the round (at most the plan
        policy's ``max_classes``). ``None`` asks every node for the labels
        it holds and takes their union (the server then learns which
        classes each node has, and every node can add labels): pass it.
    n_features : int, default=None
        The public feature count, fixed before the round (at most the
        policy's ``max_features``): a node announcing another count is left
        out. ``None``: the nodes must all announce one count (a node
        announcing another stops the run with an error naming it; never a
        vote).
    max_value : float or array-like of shape (n_features,), default=None
        Public bound on one row's value of each feature (1 for binary or
        min-max scaled features): a node's announced column bounds, and the
        decoded feature totals, above what its rows could reach are refused
        (see :func:`~skfedcp.feature_selection.chi2_server_plan`).
    timeout : float, default=120.0
        Seconds to wait for the replies of one round.
    min_rows : int, default=1
        Nodes with fewer rows are left out.
    max_attempts : int, default=3
        How many times a secure sum is repeated when nodes fail.
    planned_clients, max_client_size, max_clients
        The planned node set and public bounds, as in :func:`run_calibration`.

    Returns
    -------
    selector : FedChi2Selector
        Fitted: the same attributes as its in-process ``fit`` when every
        node's ``projection-seed`` is the seed the simulation draws.
    report : DeploymentReport
        Nodes used and excluded, rounds and message sizes.

    Examples
    --------
    The main function of a ``ServerApp``, registered as in
    :func:`run_calibration`'s example:

    >>> def main(grid, context):
    ...     selector, report = run_chi2_selection(grid, FedChi2Selector(k=5))
    ...     print(selector.get_support(indices=True))
    """
    selector = FedChi2Selector() if selector is None else selector
    plan = (planned_clients, max_client_size, max_clients)
    with _task(grid, timeout, min_rows, plan) as session:
        nodes = session.hello(selection=True, classes=classes is None)
        nodes = session.usable(nodes, "selection_n")
        fitted, used = select_chi2_nodes(
            session,
            nodes,
            selector,
            classes=classes,
            n_features=n_features,
            max_value=max_value,
            max_attempts=max_attempts,
        )
        return fitted, session.report(used)
