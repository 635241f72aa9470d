"""The Flower ServerApp factory: hello, every strategy, FED-chi2, results saved."""

from __future__ import annotations

import json
import os
import pickle
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .._config import config_context, get_config
from .._typing import ConformityScoreLike
from ..calibrators import BaseCalibrator, get_calibrator
from ..calibrators._grouped import check_grouped_calibrator
from ..feature_selection import FedChi2Selector
from ..utils._validation import check_alpha
from ._app import PlannedClients, _session
from ._calibrate_groups import calibrate, check_public_groups
from ._fingerprint import model_fingerprint
from ._protocol import _alias_of
from ._select import select_chi2_nodes
from ._session import DeploymentReport, check_planned_clients
from ._wire import _require_flwr

if TYPE_CHECKING:  # flwr is an optional extra, imported inside the functions
    from flwr.app import Context
    from flwr.serverapp import ServerApp

__all__ = ["DeploymentResult", "make_server_app", "save_result"]


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
        "thresholds": {  # one per group with group-conditional calibration
            alias: np.asarray(cal.threshold_).tolist()
            for alias, cal in result.calibrators.items()
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
    >>> import numpy as np
    >>> from skfedcp.flower import DeploymentReport
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
    groups: ArrayLike | None = None,
    min_group_size: int | None = None,
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
    groups, min_group_size
        Group-conditional calibration: the public group list (the nodes run
        ``make_client_app(group_by=...)``), as in :func:`run_calibration`.
        Every strategy then runs once per group; its fitted object is a
        :class:`~skfedcp.calibrators.GroupedCalibrator`.
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
    if groups is not None:
        groups = check_public_groups(groups, max_groups=policy["max_classes"])
        for cal in calibrators:  # fail now on a strategy with no per-group round
            check_grouped_calibrator(cal, owner="make_server_app")
    # What the app serves, fixed when it is built (the run config tunes the
    # rest, see _settings).
    task = {
        "selector": selector,
        "load_model": load_model,
        "conformity_score": conformity_score,
        "classes": classes,
        "n_features": n_features,
        "max_value": max_value,
        "groups": groups,
        "min_group_size": min_group_size,
    }
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
            result = _serve(grid, context, settings, **task)
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
    groups,
    min_group_size,
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
        groups=bool(cals) and groups is not None,
    )
    fitted, used = {}, set()
    if cals:
        cal_nodes = session.usable(nodes, "n")
        cal_nodes, fingerprint = session.check_fingerprints(cal_nodes, fingerprint)
        for cal in cals:
            estimator, nodes_used = calibrate(
                session,
                cal_nodes,
                cal,
                alpha=float(settings["alpha"]),
                fingerprint=fingerprint,
                random_state=settings["random-state"],
                n_classes=n_classes,
                groups=groups,
                min_group_size=min_group_size,
            )
            fitted[_alias_of(get_calibrator(cal))] = estimator
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
