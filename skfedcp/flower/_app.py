"""The Flower apps: ClientApp and ServerApp factories and one-task runners."""

from __future__ import annotations

import json
import os
import pickle
import time
import warnings
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .._config import config_context, get_config
from .._typing import ConformityScoreLike, SecureRandomStateLike
from ..calibrators import BaseCalibrator, get_calibrator
from ..feature_selection import FedChi2Selector
from ..utils._validation import check_alpha
from ._fingerprint import model_fingerprint
from ._protocol import NodeConfig, _alias_of, handle_request
from ._server import (
    DeploymentReport,
    NodeFailure,
    ServerSession,
    calibrate_nodes,
    check_planned_clients,
    select_chi2_nodes,
)

if TYPE_CHECKING:  # flwr is an optional extra, imported inside the functions
    from flwr.app import Context
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp

__all__ = [
    "MESSAGE_TYPE",
    "DeploymentResult",
    "make_client_app",
    "make_server_app",
    "run_calibration",
    "run_chi2_selection",
    "save_result",
]

#: Flower message type of every skfedcp query (``@app.query("skfedcp")``).
MESSAGE_TYPE = "query.skfedcp"

_SCALARS = "skfedcp"
_ARRAYS = "skfedcp.arrays"
_STATE = "skfedcp.state."


def _require_flwr():
    try:
        import flwr  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "skfedcp.flower needs Flower; install it with "
            'pip install "skfedcp[flower]".'
        ) from exc


# --------------------------------------------------------------------------
# Plain dict <-> Flower RecordDict


def _to_record_dict(payload):
    from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

    scalars, arrays = {}, {}
    for key, value in payload.items():
        if isinstance(value, np.ndarray):
            arrays[key] = Array(np.ascontiguousarray(value))
        elif isinstance(value, np.generic):
            scalars[key] = value.item()
        elif isinstance(value, bool | int | float | str | bytes | list):
            scalars[key] = value
        else:
            raise TypeError(f"cannot send {key}={type(value).__name__}.")
    records: dict[str, Any] = {_SCALARS: ConfigRecord(scalars)}
    if arrays:
        records[_ARRAYS] = ArrayRecord(arrays)
    return RecordDict(records)


def _from_record_dict(content):
    payload = dict(content.config_records.get(_SCALARS, {}))
    for key, array in content.array_records.get(_ARRAYS, {}).items():
        payload[key] = array.numpy()
    return payload


def _wire_bytes(content):
    """Bytes of ``content`` as Flower serializes it (all objects of its tree)."""
    try:
        from flwr.supercore.inflatable.inflatable_object import (
            get_all_nested_objects,
        )
    except ImportError:  # pragma: no cover - other Flower versions
        return sum(record.count_bytes() for record in content.values())
    return sum(len(obj.deflate()) for obj in get_all_nested_objects(content).values())


class _ContextState(MutableMapping):
    """Node-local persistent state in Flower's ``context.state`` (scalars only)."""

    def __init__(self, state):
        self._state = state

    def __getitem__(self, key):
        return dict(self._state.config_records[_STATE + key])

    def __setitem__(self, key, value):
        from flwr.app import ConfigRecord

        self._state[_STATE + key] = ConfigRecord(dict(value))

    def __delitem__(self, key):
        del self._state[_STATE + key]

    def __iter__(self):
        return (
            k[len(_STATE) :] for k in self._state.config_records if k.startswith(_STATE)
        )

    def __len__(self):
        return sum(1 for _ in self)


#: Seconds between two pulls of replies (Flower's ``send_and_receive`` waits
#: 3 s between pulls; a round of small messages is much faster than that).
POLL_INTERVAL = 0.2


def _grid_exchange(grid, poll_interval=POLL_INTERVAL):
    """The server's ``exchange`` over a Flower ``Grid`` (push, then pull)."""
    from flwr.app import Message

    def exchange(requests, timeout):
        messages, sent = [], {}
        for node, request in requests.items():
            content = _to_record_dict(request)
            sent[node] = _wire_bytes(content)
            # A message expires when the server stops waiting for its reply:
            # a node that comes back later does not answer a finished round.
            messages.append(
                Message(
                    content,
                    dst_node_id=int(node),
                    message_type=MESSAGE_TYPE,
                    ttl=float(timeout),
                )
            )
        nodes = list(requests)
        ids = list(grid.push_messages(messages))
        owner = dict(zip(ids, nodes, strict=True))
        pending = set(ids)
        replies, sizes = {}, {}
        deadline = time.monotonic() + timeout
        while pending:
            for reply in grid.pull_messages(list(pending)):
                message_id = reply.metadata.reply_to_message_id
                if message_id not in pending:
                    continue
                pending.discard(message_id)
                node = owner[message_id]
                if reply.has_error():
                    replies[node] = NodeFailure(
                        f"the node raised an error ({reply.error.reason})"
                    )
                    sizes[node] = (sent[node], 0)
                    continue
                try:
                    replies[node] = _from_record_dict(reply.content)
                except Exception as exc:  # malformed reply
                    replies[node] = NodeFailure(f"malformed reply ({exc})")
                sizes[node] = (sent[node], _wire_bytes(reply.content))
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(poll_interval)
        for node in nodes:
            sizes.setdefault(node, (sent[node], 0))
        return replies, sizes

    return exchange


# --------------------------------------------------------------------------
# ClientApp


def make_client_app(
    load_data: Callable[[Context], tuple[Any, Any]],
    *,
    load_model: Callable[[Context], Any] | None = None,
    load_selection_data: Callable[[Context], tuple[Any, Any]] | None = None,
    conformity_score: ConformityScoreLike = "absolute",
    allow_raw_scores: bool = False,
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


# --------------------------------------------------------------------------
# Server side


class DeploymentResult(NamedTuple):
    """What a deployed ``ServerApp`` run produced.

    Attributes
    ----------
    calibrators : dict of str to BaseCalibrator
        Fitted calibrator per strategy alias (``threshold_``, ...).
    selector : FedChi2Selector or None
        The fitted selector (``scores_``, ``get_support()``, ...).
    report : DeploymentReport
        Nodes used and excluded, and every round with its message sizes.
    """

    calibrators: dict[str, BaseCalibrator]
    selector: FedChi2Selector | None
    report: DeploymentReport


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
) -> tuple[BaseCalibrator, DeploymentReport]:
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
        one public key or the same rows are all left out (duplicates,
        Sybils), and a reply must carry its own request's nonce (no
        replays).
    max_client_size : int, default=None
        Public bound on the rows a node may announce; above it the node is
        left out before any plan is made. None: the plan policy's
        (:func:`skfedcp.get_config`, ``10**9`` unless changed), so that a
        server sets its bounds in one place (:func:`skfedcp.config_context`).
    max_clients : int, default=None
        Public bound on the number of nodes (and planned clients); more
        connected nodes without a pinned plan is an error. None: the plan
        policy's (``10**5`` by default).

    Returns
    -------
    calibrator : BaseCalibrator
        Fitted: the same attributes as its in-process ``fit``
        (``threshold_``, ``messages_``, ``clients_``, ...).
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
    _require_flwr()
    session = _session(
        grid,
        timeout,
        min_rows,
        planned_clients=planned_clients,
        max_client_size=max_client_size,
        max_clients=max_clients,
    )
    nodes = session.hello(calibration=True)
    nodes = session.usable(nodes, "n")
    nodes, expected = session.check_fingerprints(nodes, model_fingerprint)
    fitted, used = calibrate_nodes(
        session,
        nodes,
        calibrator,
        alpha=alpha,
        fingerprint=expected,
        random_state=random_state,
        max_attempts=max_attempts,
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
    _require_flwr()
    selector = FedChi2Selector() if selector is None else selector
    session = _session(
        grid,
        timeout,
        min_rows,
        planned_clients=planned_clients,
        max_client_size=max_client_size,
        max_clients=max_clients,
    )
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


_RUN_CONFIG_KEYS = (
    "alpha",
    "calibrators",
    "feature-selection",
    "random-state",
    "output",
    "timeout",
    "min-nodes",
    "min-rows",
    "model-fingerprint",
    "planned-clients",
    "max-client-size",
    "max-clients",
)


def _parse_planned_clients(text):
    """Run config ``planned-clients``: ``"0,1,2"`` (labels) or ``"101=0,102=1"``
    (node id = label). Labels that all read as ints are ints; ``""``: no plan."""
    if not isinstance(text, str):
        return text
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        return None
    pinned = all("=" in item for item in items)
    pairs = [item.partition("=")[::2] if pinned else ("", item) for item in items]
    labels: list[int | str] = [label.strip() for _, label in pairs]
    if all(_is_int(label) for label in labels):
        labels = [int(label) for label in labels]
    if not pinned:
        return labels
    try:
        return {
            int(node): label for (node, _), label in zip(pairs, labels, strict=True)
        }
    except ValueError:
        raise ValueError(
            f"run config planned-clients: node ids must be ints; got {text!r}."
        ) from None


def _is_int(text):
    try:
        int(text)
    except ValueError:
        return False
    return True


def _settings(defaults, run_config, configured):
    """Factory defaults overridden by the run config."""
    settings = dict(defaults)
    for key in _RUN_CONFIG_KEYS:
        if key in run_config:
            settings[key] = run_config[key]
    names = settings["calibrators"]
    if isinstance(names, str):
        names = [name.strip() for name in names.split(",") if name.strip()]
    settings["calibrators"] = [
        configured.get(name, name) if isinstance(name, str) else name for name in names
    ]
    seed = settings["random-state"]
    if seed == "" or (isinstance(seed, int) and seed < 0):
        settings["random-state"] = None
    if not settings["output"]:
        settings["output"] = None
    plan = _parse_planned_clients(run_config.get("planned-clients"))
    settings["planned-clients"] = defaults["planned-clients"] if plan is None else plan
    return settings


def _wait_for_nodes(grid, min_nodes, timeout):
    deadline = time.monotonic() + timeout
    while True:
        n = len(list(grid.get_node_ids()))
        if n >= min_nodes:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"only {n} node(s) connected within {timeout:g} s; min-nodes is "
                f"{min_nodes}."
            )
        time.sleep(0.5)


def _summary(result):
    report = result.report
    return {
        "thresholds": {
            alias: float(cal.threshold_) for alias, cal in result.calibrators.items()
        },
        "selected_features": (
            None
            if result.selector is None
            else result.selector.get_support(indices=True).tolist()
        ),
        "nodes": report.nodes.tolist(),
        "clients": report.clients.tolist(),
        "excluded": {str(k): v for k, v in report.excluded.items()},
        "warnings": list(report.warnings),
        "rounds": [
            {
                "name": r.name,
                "seconds": r.seconds,
                "bytes_sent": {str(k): v for k, v in r.bytes_sent.items()},
                "bytes_received": {str(k): v for k, v in r.bytes_received.items()},
                "failed": {str(k): v for k, v in r.failed.items()},
            }
            for r in report.rounds
        ],
    }


def save_result(result: DeploymentResult, path: str | os.PathLike[str]) -> Path:
    """Pickle a :class:`DeploymentResult` and write a JSON summary next to it.

    Parameters
    ----------
    result : DeploymentResult
        What :func:`make_server_app`'s main function produced.
    path : str or path-like
        Pickle file; the summary goes to the same path with suffix ``.json``.

    Returns
    -------
    path : pathlib.Path
        The pickle file.

    Examples
    --------
    >>> import tempfile, os
    >>> report = DeploymentReport(np.array([1]), np.array([0]), {}, [])
    >>> result = DeploymentResult({}, None, report)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = save_result(result, os.path.join(tmp, "run.pkl"))
    ...     sorted(os.listdir(tmp))
    ['run.json', 'run.pkl']
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        pickle.dump(result, f)
    path.with_suffix(".json").write_text(json.dumps(_summary(result), indent=2))
    return path


def make_server_app(
    *,
    calibrators: Sequence[str | BaseCalibrator] = ("qq",),
    alpha: float = 0.1,
    selector: FedChi2Selector | None = None,
    load_model: Callable[[Context], Any] | None = None,
    conformity_score: ConformityScoreLike = "absolute",
    classes: ArrayLike | None = None,
    n_features: int | None = None,
    max_value: float | ArrayLike | None = None,
    output: str | os.PathLike[str] | None = None,
    on_result: Callable[[DeploymentResult, Context], Any] | None = None,
    timeout: float = 120.0,
    min_nodes: int = 1,
    min_rows: int = 1,
    random_state: int | None = None,
    planned_clients: PlannedClients = None,
    max_client_size: int | None = None,
    max_clients: int | None = None,
) -> ServerApp:
    """Build the Flower ``ServerApp`` that calibrates (and selects) over the nodes.

    It waits for ``min_nodes`` nodes, runs one hello round (every node's
    label, sizes, model fingerprint and public key), then each strategy
    (one round for one-shot strategies, several for LDP-S), then FED-chi2
    (two secure sums) if a ``selector`` is given. The fitted objects are
    saved to ``output`` and passed to ``on_result``.

    Parameters
    ----------
    calibrators : sequence of str or BaseCalibrator, default=("qq",)
        Strategies to run, e.g. ``("qq", "avg")``. Instances also configure
        their alias for the run config (e.g. ``dp-qq`` with its
        ``score_bounds``).
    alpha : float, default=0.1
        Target miscoverage.
    selector : FedChi2Selector, default=None
        Run FED-chi2 with these parameters; ``None`` skips it.
    load_model : callable, default=None
        ``load_model(context) -> model or None``: the server's copy of the
        shared model, to compute the fingerprint the nodes must match. Without
        it (or when it returns None) the run config ``model-fingerprint`` is
        used, else the nodes' most common fingerprint.
    conformity_score : str, score object or callable, default="absolute"
        The nodes' score (part of the fingerprint).
    classes : array-like, default=None
        Public label set for FED-chi2 (``None``: nodes report theirs, see
        :func:`run_chi2_selection`). With ``load_model``, LDP-L's number of
        classes is the model's (``len(model.classes_)``), fixed before the
        round.
    n_features, max_value
        FED-chi2's public feature count and value bound, as in
        :func:`run_chi2_selection`.
    output : str or path-like, default=None
        Where to pickle the :class:`DeploymentResult` (and a ``.json``
        summary), see :func:`save_result`.
    on_result : callable, default=None
        ``on_result(result, context)`` called at the end of the run.
    timeout : float, default=120.0
        Seconds to wait for the nodes to connect, and for the replies of one
        round.
    min_nodes : int, default=1
        Number of connected nodes to wait for before the first round.
    min_rows : int, default=1
        Nodes with fewer rows are left out.
    random_state : int or None, default=None
        The server's randomness for private strategies (each strategy starts
        from it, as separate in-process fits would). The nodes' noise never
        comes from it: each node draws its own (see :func:`simulation_seeds`).
    planned_clients, max_client_size, max_clients
        The planned node set and public bounds, as in :func:`run_calibration`.
        The plan policy (:func:`skfedcp.get_config`) in force when the app
        is built is the run's: the app's main function runs under it, in
        whichever thread Flower calls it.

    Returns
    -------
    app : flwr.serverapp.ServerApp

    Notes
    -----
    The run config (``flwr run --run-config``) overrides ``alpha``,
    ``calibrators`` (comma-separated aliases), ``random-state`` (negative:
    None), ``output``, ``timeout``, ``min-nodes``, ``min-rows``,
    ``model-fingerprint``, ``planned-clients`` (``"0,1,2"``: client labels;
    ``"101=0,102=1"``: node id = label; labels that all read as ints are
    ints), ``max-client-size`` and ``max-clients``;
    ``feature-selection = false`` skips FED-chi2.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("flwr")
    >>> app = make_server_app(calibrators=("qq", "avg"), alpha=0.1,
    ...                       selector=FedChi2Selector(k=5))
    >>> type(app).__name__
    'ServerApp'
    """
    _require_flwr()
    from flwr.serverapp import ServerApp

    configured = {}
    for cal in calibrators:
        instance = get_calibrator(cal)
        configured[_alias_of(instance)] = cal
    check_alpha(alpha)
    if selector is not None and not isinstance(selector, FedChi2Selector):
        raise TypeError(
            "selector must be a FedChi2Selector or None; got "
            f"{type(selector).__name__}."
        )
    for name, value in (("load_model", load_model), ("on_result", on_result)):
        if value is not None and not callable(value):
            raise TypeError(f"{name} must be callable; got {type(value).__name__}.")
    policy = get_config()  # the policy in force now is the run's
    if max_client_size is not None:
        policy["max_client_size"] = max_client_size
    if max_clients is not None:
        policy["max_clients"] = max_clients
    check_planned_clients(planned_clients, max_clients=policy["max_clients"])
    defaults = {
        "alpha": alpha,
        "calibrators": list(calibrators),
        "feature-selection": True,
        "random-state": random_state,
        "output": output,
        "timeout": timeout,
        "min-nodes": min_nodes,
        "min-rows": min_rows,
        "model-fingerprint": None,
        "planned-clients": planned_clients,
        "max-client-size": policy["max_client_size"],
        "max-clients": policy["max_clients"],
    }
    app = ServerApp()

    @app.main()
    def main(grid, context):
        settings = _settings(defaults, context.run_config, configured)
        limits = {
            **policy,
            "max_client_size": int(settings["max-client-size"]),
            "max_clients": int(settings["max-clients"]),
        }
        with config_context(**limits), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = _serve(
                grid,
                context,
                settings,
                selector=selector,
                load_model=load_model,
                conformity_score=conformity_score,
                classes=classes,
                n_features=n_features,
                max_value=max_value,
            )
        for w in caught:  # shown as usual, and kept in the report
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        notes = tuple(f"{w.category.__name__}: {w.message}" for w in caught)
        result = result._replace(report=result.report._replace(warnings=notes))
        if settings["output"]:
            save_result(result, settings["output"])
        if on_result is not None:
            on_result(result, context)

    return app


def _serve(
    grid,
    context,
    settings,
    *,
    selector,
    load_model,
    conformity_score,
    classes,
    n_features,
    max_value,
):
    """The ServerApp's work: hello, every strategy, then FED-chi2."""
    timeout = float(settings["timeout"])
    _wait_for_nodes(grid, int(settings["min-nodes"]), timeout)
    run_selection = selector is not None and bool(settings["feature-selection"])
    cals = settings["calibrators"]
    fingerprint = settings["model-fingerprint"] or None
    n_classes = None  # LDP-L's public class count: the shared model's
    if load_model is not None and cals:
        model = load_model(context)
        if model is not None:
            fingerprint = model_fingerprint(model, conformity_score)
            if getattr(model, "classes_", None) is not None:
                n_classes = len(model.classes_)
    session = _session(
        grid,
        timeout,
        int(settings["min-rows"]),
        planned_clients=settings["planned-clients"],
        max_client_size=settings["max-client-size"],
        max_clients=settings["max-clients"],
    )
    nodes = session.hello(
        calibration=bool(cals),
        selection=run_selection,
        classes=run_selection and classes is None,
    )
    fitted, used = {}, set()
    if cals:
        cal_nodes = session.usable(nodes, "n")
        cal_nodes, fingerprint = session.check_fingerprints(cal_nodes, fingerprint)
        for cal in cals:
            estimator, nodes_used = calibrate_nodes(
                session,
                cal_nodes,
                cal,
                alpha=float(settings["alpha"]),
                fingerprint=fingerprint,
                random_state=settings["random-state"],
                n_classes=n_classes,
            )
            fitted[_alias_of(estimator)] = estimator
            used.update(nodes_used)
    fitted_selector = None
    if run_selection:
        sel_nodes = session.usable(
            [n for n in nodes if n not in session.failed], "selection_n"
        )
        fitted_selector, nodes_used = select_chi2_nodes(
            session,
            sel_nodes,
            selector,
            classes=classes,
            n_features=n_features,
            max_value=max_value,
        )
        used.update(nodes_used)
    return DeploymentResult(
        fitted, fitted_selector, session.report(session.ordered(used))
    )
