"""Server side of the skfedcp deployment protocol (plain dicts, no flwr import).

The server talks to the nodes through an ``exchange`` callable that sends one
request per node and returns, per node, the decoded reply or a
:class:`NodeFailure`, plus the bytes sent and received. :mod:`.flower`
builds it on a Flower ``Grid``; tests can build it on anything.
"""

from __future__ import annotations

import secrets
import time
import warnings
from collections import Counter
from functools import partial
from numbers import Integral
from typing import NamedTuple

import numpy as np
from sklearn.base import clone

from ..calibrators import get_calibrator
from ..exceptions import (
    InvalidMessageError,
    InvalidMessageWarning,
    NodeExcludedWarning,
)
from ..feature_selection import (
    chi2_frac_bits,
    chi2_server_decode,
    chi2_server_marginals,
)
from ..feature_selection._chi2 import FedChi2Selector
from ..feature_selection._protocol import _dof, _marginals_bound, _marginals_plan
from ..federated import fixed_point_decode
from ..utils._random import check_seed_sequence, spawn_random_states
from ..utils._validation import check_alpha
from ._protocol import (
    PROTOCOL_VERSION,
    _alias_of,
    calibrator_to_spec,
)

__all__ = [
    "DeploymentReport",
    "NodeFailure",
    "RoundRecord",
    "ServerSession",
    "calibrate_nodes",
    "select_chi2_nodes",
]


class NodeFailure(NamedTuple):
    """A node that did not answer a request, and why."""

    reason: str


class RoundRecord(NamedTuple):
    """One request/reply round: what went where, and who failed.

    Attributes
    ----------
    name : str
        The step (``"hello"``, ``"calibrate:qq"``, ``"chi2_sketch"``, ...).
    seconds : float
        Wall time of the round, from sending to the last reply.
    bytes_sent : dict of int to int
        Serialized request size per node id (server to node).
    bytes_received : dict of int to int
        Serialized reply size per node id (node to server).
    failed : dict of int to str
        Node ids that failed or timed out, with the reason.
    """

    name: str
    seconds: float
    bytes_sent: dict[int, int]
    bytes_received: dict[int, int]
    failed: dict[int, str]


class DeploymentReport(NamedTuple):
    """What happened during a deployed run.

    Attributes
    ----------
    nodes : ndarray of shape (n_nodes,)
        Flower node ids whose messages were used, in client-label order.
    clients : ndarray of shape (n_nodes,)
        Their client labels (``client-id`` of the node config).
    excluded : dict of int to str
        Node ids left out, with the reason (failure, time-out, model
        fingerprint, too few rows).
    rounds : list of RoundRecord
        Every round, in order.
    warnings : tuple of str
        The warnings the server emitted during the run (``"Category:
        message"``), e.g. which node sent an invalid message; filled by
        :func:`~skfedcp.flower.make_server_app`'s app.
    """

    nodes: np.ndarray
    clients: np.ndarray
    excluded: dict[int, str]
    rounds: list[RoundRecord]
    warnings: tuple[str, ...] = ()


def _warn(message, category=NodeExcludedWarning):
    warnings.warn(message, category, stacklevel=4)


class ServerSession:
    """A conversation with the nodes: one hello, then any number of tasks.

    Parameters
    ----------
    exchange : callable
        ``exchange(requests, timeout) -> (replies, sizes)`` where
        ``requests`` maps node ids to request dicts, ``replies`` maps node ids
        to reply dicts or :class:`NodeFailure`, and ``sizes`` maps node ids to
        ``(bytes_sent, bytes_received)``.
    node_ids : sequence of int
        The nodes connected to the server.
    timeout : float
        Seconds to wait for the replies of one round.
    min_rows : int
        Nodes with fewer rows are excluded.
    """

    def __init__(self, exchange, node_ids, *, timeout, min_rows=1):
        if min_rows < 1:
            raise ValueError(f"min_rows must be >= 1; got {min_rows}.")
        self.exchange = exchange
        self.node_ids = [int(n) for n in node_ids]
        self.timeout = float(timeout)
        self.min_rows = int(min_rows)
        self.rounds = []
        self.excluded = {}
        self.failed = set()
        self.invalid = set()
        self.info = {}
        self.tag = secrets.token_hex(8)
        if not self.node_ids:
            raise RuntimeError("no node is connected to the server.")

    # -- plumbing --------------------------------------------------------------

    def query(self, name, requests):
        """Send one request per node; return ``(replies, failures)``."""
        requests = {
            node: {"protocol": PROTOCOL_VERSION, **req}
            for node, req in requests.items()
        }
        start = time.perf_counter()
        replies, sizes = self.exchange(requests, self.timeout)
        seconds = time.perf_counter() - start
        ok, failed = {}, {}
        for node in requests:
            reply = replies.get(
                node, NodeFailure(f"no reply within {self.timeout:g} s")
            )
            if isinstance(reply, NodeFailure):
                failed[node] = reply.reason
            else:
                ok[node] = reply
        self.rounds.append(
            RoundRecord(
                name,
                seconds,
                {n: int(sizes.get(n, (0, 0))[0]) for n in requests},
                {n: int(sizes.get(n, (0, 0))[1]) for n in requests},
                dict(failed),
            )
        )
        return ok, failed

    def exclude(
        self, node, reason, consequence="", *, failed=True, invalid=False, warn=True
    ):
        """Leave ``node`` out.

        ``failed``: it did not answer properly (left out of the later secure
        sums too); ``invalid``: it sent an invalid message (left out of every
        later task of the run; an :class:`InvalidMessageWarning` instead of a
        :class:`NodeExcludedWarning`); ``warn=False`` when the calibrator
        already warned.
        """
        self.excluded[node] = reason
        if failed or invalid:
            self.failed.add(node)
        if invalid:
            self.invalid.add(node)
        if warn:
            label = self.info.get(node, {}).get("label", "?")
            _warn(
                f"node {node} (client {label!r}) is left out: {reason}.{consequence}",
                InvalidMessageWarning if invalid else NodeExcludedWarning,
            )

    def ordered(self, nodes):
        """Nodes sorted by client label (the in-process client order)."""
        nodes = list(nodes)
        labels = np.asarray([self.info[n]["label"] for n in nodes])
        order = np.argsort(labels, kind="stable")
        return [nodes[i] for i in order]

    def labels(self, nodes):
        return np.asarray([self.info[n]["label"] for n in nodes])

    def report(self, nodes):
        nodes = list(nodes)
        return DeploymentReport(
            np.asarray(nodes, dtype=np.uint64),
            self.labels(nodes),
            dict(self.excluded),
            list(self.rounds),
        )

    # -- hello -----------------------------------------------------------------

    def hello(self, *, calibration=False, selection=False, classes=False):
        """Ask every node for its label, sizes, fingerprint and key."""
        request = {
            "kind": "hello",
            "calibration": bool(calibration),
            "selection": bool(selection),
            "classes": bool(classes),
        }
        ok, failed = self.query("hello", dict.fromkeys(self.node_ids, request))
        for node, reason in failed.items():
            self.exclude(node, reason)
        seen: dict[object, int] = {}
        for node, reply in ok.items():
            label = reply.get("label")
            if label in seen:
                raise ValueError(
                    f"nodes {seen[label]} and {node} both report client label "
                    f"{label!r}; give every node a distinct client-id."
                )
            seen[label] = node
            self.info[node] = reply
        if not self.info:
            raise RuntimeError("no node answered the hello round.")
        kinds = {type(reply["label"]) for reply in self.info.values()}
        if len(kinds) > 1:
            raise ValueError("client labels mix types; use all ints or all strings.")
        return self.ordered(self.info)

    def usable(self, nodes, size_key):
        """Nodes with at least ``min_rows`` rows (others excluded)."""
        kept = []
        for node in nodes:
            n = self.info[node].get(size_key)
            if n is None:
                self.exclude(node, "it did not report its number of rows")
            elif isinstance(n, bool) or not isinstance(n, Integral | np.integer):
                # The sizes feed the public plans: a dishonest value never
                # reaches them.
                self.exclude(
                    node, f"its field {size_key!r} is not an integer", invalid=True
                )
            elif n < self.min_rows:
                self.exclude(
                    node,
                    f"it holds {n} row(s) < min_rows={self.min_rows}",
                    failed=False,
                )
            else:
                kept.append(node)
        return kept

    def check_fingerprints(self, nodes, expected):
        """Keep the nodes whose model fingerprint is ``expected``.

        Without an expected fingerprint, the most common one is taken (a tie
        is an error) and nodes with another model are excluded.
        """
        prints = {node: self.info[node].get("fingerprint") for node in nodes}
        if not prints:
            return [], expected
        if expected is None:
            counts = Counter(prints.values()).most_common()
            if len(counts) > 1 and counts[0][1] == counts[1][1]:
                raise ValueError(
                    "the nodes hold different model versions in equal numbers "
                    f"({dict(counts)}); pass the expected model fingerprint."
                )
            expected = counts[0][0]
        kept = []
        for node in nodes:
            if prints[node] != expected:
                self.exclude(
                    node,
                    f"model fingerprint {prints[node]} differs from the expected "
                    f"{expected} (another model version)",
                    failed=False,
                )
            else:
                kept.append(node)
        return kept, expected


# --------------------------------------------------------------------------
# Calibration


def _decode_message(reply):
    return {
        key[len("message.") :]: value
        for key, value in reply.items()
        if key.startswith("message.")
    }


def _check_replies(ok, failed, fingerprint):
    for node, reply in ok.items():
        if fingerprint and reply.get("fingerprint") != fingerprint:
            failed[node] = (
                f"its message carries model fingerprint {reply.get('fingerprint')}, "
                f"not {fingerprint}"
            )


def _private_failure(alias, failed):
    detail = "; ".join(f"node {n}: {r}" for n, r in failed.items())
    return RuntimeError(
        f"{alias}: {len(failed)} node(s) failed during the private round "
        f"({detail}). A private strategy cannot repeat a round without spending "
        "more privacy budget, and its plan assumed every node: fix the nodes and "
        "start a new run."
    )


def _is_interactive(calibrator):
    if getattr(calibrator, "interactive", False):
        return True
    return all(
        hasattr(calibrator, name)
        for name in ("server_init", "client_respond", "server_update")
    )


def calibrate_nodes(
    session,
    nodes,
    calibrator,
    *,
    alpha,
    fingerprint,
    random_state=None,
    max_attempts=3,
):
    """Run one calibration over ``nodes`` (already checked by hello).

    The server's side is the calibrator's own
    :meth:`~skfedcp.calibrators.BaseCalibrator.fit_from_messages`: every
    message is checked against the public plan before it is used. Nodes that
    fail, time out or send an invalid message are handled as the strategy
    allows (see the user guide, *When nodes fail*):

    * non-private strategies (``qq``, ``avg``, ``central``) leave the node
      out and ask the remaining nodes again with the plan recomputed for
      them, so the result equals the in-process fit on the remaining rows;
    * private one-shot strategies (``dp-qq``, ``dp-central``, ``ldp-l``)
      cannot ask again (budget): a failure is an error, an invalid message
      is excluded by ``fit_from_messages(on_invalid="exclude")``;
    * LDP-S (interactive) can neither ask again nor exclude: an error.

    Returns the fitted calibrator and the nodes whose messages it used.
    """
    calibrator = get_calibrator(calibrator)
    calibrator._validate_params()
    alpha = check_alpha(alpha)
    alias = _alias_of(calibrator)
    spec = calibrator_to_spec(calibrator)
    nodes = [n for n in nodes if n not in session.invalid]
    if _is_interactive(calibrator):
        return _calibrate_interactive(
            session,
            nodes,
            calibrator,
            alias=alias,
            spec=spec,
            alpha=alpha,
            fingerprint=fingerprint,
            random_state=random_state,
        )
    for _ in range(max_attempts):
        if not nodes:
            raise RuntimeError(f"{alias}: no node is left to calibrate.")
        sizes = np.asarray([_node_size(session, n) for n in nodes], dtype=np.int64)
        request = {
            "kind": "calibrate",
            "calibrator": spec,
            "alpha": alpha,
            "n_per_client": sizes,
            "fingerprint": fingerprint or "",
        }
        ok, failed = session.query(f"calibrate:{alias}", dict.fromkeys(nodes, request))
        _check_replies(ok, failed, fingerprint)
        if failed:
            if calibrator._randomized:
                raise _private_failure(alias, failed)
            for node, reason in failed.items():
                session.exclude(
                    node,
                    reason,
                    f" {alias} is recalibrated with the remaining "
                    f"{len(nodes) - len(failed)} node(s).",
                )
            nodes = [n for n in nodes if n not in failed]
            continue
        messages = [_decode_message(ok[n]) for n in nodes]
        labels = session.labels(nodes)
        fit = partial(
            calibrator.fit_from_messages,
            messages,
            alpha=alpha,
            n_per_client=sizes,
            clients=labels,
            random_state=random_state,
        )
        if calibrator._randomized:
            # No second round: exclude the offenders (the calibrator's own
            # InvalidMessageWarning says how).
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fitted = fit(on_invalid="exclude")
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            text = " ".join(
                str(w.message)
                for w in caught
                if issubclass(w.category, InvalidMessageWarning)
            )
            excluded = set(fitted.excluded_clients_.tolist())
            for node, label in zip(nodes, labels.tolist(), strict=True):
                if label in excluded:
                    session.exclude(
                        node,
                        f"it sent an invalid message ({_reason_of(label, text)})",
                        invalid=True,
                        warn=False,
                    )
            return fitted, [
                n for n in nodes if session.info[n]["label"] not in excluded
            ]
        invalid = _invalid_nodes(fit, nodes, labels)
        if not invalid:
            return fit(on_invalid="raise"), nodes
        for node, reason in invalid.items():
            session.exclude(
                node,
                reason,
                f" {alias} is recalibrated with the remaining "
                f"{len(nodes) - len(invalid)} node(s) (a new round with their plan).",
                invalid=True,
            )
        nodes = [n for n in nodes if n not in invalid]
    raise RuntimeError(f"{alias}: nodes kept failing after {max_attempts} attempts.")


def _invalid_nodes(fit, nodes, labels):
    """Nodes whose message ``fit`` finds invalid, with the reason for each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fitted = fit(on_invalid="exclude")
        except InvalidMessageError as exc:  # every message is invalid
            return dict.fromkeys(nodes, f"it sent an invalid message ({exc})")
    excluded = set(fitted.excluded_clients_.tolist())
    if not excluded:
        return {}
    text = " ".join(
        str(w.message) for w in caught if issubclass(w.category, InvalidMessageWarning)
    )
    return {
        node: f"it sent an invalid message ({_reason_of(label, text)})"
        for node, label in zip(nodes, labels.tolist(), strict=True)
        if label in excluded
    }


def _reason_of(label, text):
    """The part of an ``InvalidMessageWarning`` text that concerns ``label``."""
    marker = f"client {label!r}: "
    start = text.find(marker)
    if start < 0:
        return text
    stops = [i for i in (text.find("; client ", start), text.rfind(").")) if i > start]
    return text[start : min(stops)] if stops else text[start:]


def _calibrate_interactive(
    session, nodes, calibrator, *, alias, spec, alpha, fingerprint, random_state
):
    """Drive ``server_init`` / ``client_respond`` / ``server_update`` (LDP-S).

    The transcript (one list of messages per round) is then handed to the
    calibrator's ``fit_from_messages``, which replays the server's side on
    it and sets the fitted attributes, as the in-process ``fit`` does.
    """
    if not nodes:
        raise RuntimeError(f"{alias}: no node is left to calibrate.")
    sizes = np.asarray([_node_size(session, n) for n in nodes], dtype=np.int64)
    labels = session.labels(nodes)
    # The group assignment is public: with no seed (or "secure"), a fresh
    # one that the live run and the replay share, as in the in-process fit.
    seed = check_seed_sequence(random_state)
    public = np.random.SeedSequence() if isinstance(seed, str) else seed
    state = calibrator.server_init(
        sizes, alpha=alpha, random_state=spawn_random_states(public, 1)[0]
    )
    calibration_id = f"{session.tag}/{alias}"
    rounds = []
    while not state["done"]:
        requests = {}
        for node, query in zip(nodes, state["queries"], strict=True):
            users = np.asarray(query["users"], dtype=np.int64)
            if users.size:
                requests[node] = {
                    "kind": "respond",
                    "calibrator": spec,
                    "calibration_id": calibration_id,
                    "round": int(query["round"]),
                    "threshold": float(query["threshold"]),
                    "users": users,
                    "fingerprint": fingerprint or "",
                }
        ok, failed = session.query(f"{alias}:round{state['round'] + 1}", requests)
        _check_replies(ok, failed, fingerprint)
        if failed:
            raise _private_failure(alias, failed)
        messages = [
            _decode_message(ok[node]) if node in requests else None for node in nodes
        ]
        try:
            new_state = calibrator.server_update(state, messages)
        except InvalidMessageError as exc:
            if not isinstance(exc.client, Integral):
                raise
            node = nodes[int(exc.client)]
            session.exclude(node, f"it sent an invalid message ({exc})", invalid=True)
            raise InvalidMessageError(
                f"{alias}: node {node} (client {labels[int(exc.client)]!r}) sent an "
                f"invalid answer ({exc}). An interactive private strategy can "
                "neither exclude it (the correction assumed every group's full "
                "size) nor ask again (privacy budget): start a new run without "
                "that node.",
                client=labels[int(exc.client)].item(),
                field=exc.field,
            ) from None
        rounds.append(messages)
        state = new_state
    fitted = calibrator.fit_from_messages(
        rounds,
        alpha=alpha,
        n_per_client=sizes,
        clients=labels,
        random_state=public,
    )
    return fitted, nodes


def _node_size(session, node):
    return int(session.info[node]["n"])


# --------------------------------------------------------------------------
# FED-chi2


def _secure_sum(session, name, nodes, extra, length, max_attempts):
    """Pairwise-masked sum over ``nodes``; repeated among survivors on failure."""
    nodes = list(nodes)
    for attempt in range(max_attempts):
        if len(nodes) < 2:
            raise RuntimeError(
                f"{name}: a secure sum needs at least two nodes; {len(nodes)} left."
            )
        keys = [session.info[n]["public_key"] for n in nodes]
        request = {
            "kind": "secure_sum",
            "task": name,
            "tag": f"{session.tag}/{name}/{attempt}",
            "public_keys": keys,
            **extra(nodes),
        }
        ok, failed = session.query(name, dict.fromkeys(nodes, request))
        for node, reply in ok.items():
            masked = np.asarray(reply.get("masked", []))
            if masked.dtype != np.uint64 or masked.shape != (length,):
                failed[node] = f"malformed masked vector {masked.dtype}{masked.shape}"
        if not failed:
            total = np.zeros(length, dtype=np.uint64)
            for node in nodes:
                total += np.asarray(ok[node]["masked"])
            return total, nodes
        for node, reason in failed.items():
            session.exclude(
                node,
                reason,
                " The masks no longer cancel: the secure sum is repeated among "
                f"the remaining {len(nodes) - len(failed)} node(s).",
            )
        nodes = [n for n in nodes if n not in failed]
    raise RuntimeError(f"{name}: nodes kept failing after {max_attempts} attempts.")


def select_chi2_nodes(session, nodes, selector, *, classes=None, max_attempts=3):
    """Run FED-chi2 (two secure sums) over ``nodes``; return the fitted selector."""
    if not isinstance(selector, FedChi2Selector):
        raise TypeError(
            f"selector must be a FedChi2Selector; got {type(selector).__name__}."
        )
    selector = clone(selector)
    selector._validate_params()
    if selector.method != "sketch" or selector.statistic != "sklearn":
        raise ValueError(
            "the Flower deployment runs FedChi2Selector(method='sketch', "
            f"statistic='sklearn'); got method={selector.method!r}, "
            f"statistic={selector.statistic!r}."
        )
    ell = selector._resolve_n_projections()
    n_features = Counter(session.info[n]["n_features"] for n in nodes).most_common()
    width = n_features[0][0]
    kept = []
    for node in nodes:
        if session.info[node]["n_features"] != width:
            session.exclude(
                node,
                f"it has {session.info[node]['n_features']} features, the others "
                f"{width}",
                failed=False,
            )
        else:
            kept.append(node)
    nodes = kept
    if classes is None:
        classes = np.unique(np.concatenate([session.info[n]["classes"] for n in nodes]))
    classes = np.asarray(classes)
    n_classes = classes.shape[0]
    integer_x = all(bool(session.info[n]["integer_x"]) for n in nodes)
    nodes = _check_column_bounds(session, nodes, width)
    # Round one's public plan, as in the simulation: class counts are at most
    # a node's rows (integers: exact at any precision), column totals within
    # the largest power-of-two bound the nodes announced.
    count_bound = _marginals_bound(
        np.array([max(float(session.info[n]["selection_n"]) for n in nodes)])
    )
    bound = np.concatenate(
        [
            np.full(n_classes, count_bound[0]),
            np.max([session.info[n]["column_bound"] for n in nodes], axis=0),
        ]
    )
    plan = _marginals_plan(
        bound, len(nodes), integer_x=integer_x, frac_bits=selector.frac_bits
    )

    total, round1 = _secure_sum(
        session,
        "chi2_marginals",
        nodes,
        lambda _: {
            "classes": classes,
            "frac_bits": plan.frac_bits,
            "bound": plan.bound,
            "n_clients": plan.n_clients,
        },
        n_classes + width,
        max_attempts,
    )
    marginals = chi2_server_marginals(plan.decode(total), n_classes=n_classes)
    bits = (
        chi2_frac_bits(marginals)
        if selector.frac_bits is None
        else np.full(width, selector.frac_bits, dtype=np.int64)
    )
    sketch_request = {
        "classes": classes,
        "class_counts": marginals.class_counts,
        "row_totals": marginals.row_totals,
        "n_projections": ell,
        "expected_split": selector.expected_split,
        "n_clients": len(round1),
        "frac_bits": bits,
    }
    total, round2 = _secure_sum(
        session,
        "chi2_sketch",
        round1,
        lambda _: sketch_request,
        width * ell,
        max_attempts,
    )
    sketch = fixed_point_decode(total.reshape(width, ell), bits[:, None]).T.copy()
    selector.scores_, selector.pvalues_ = chi2_server_decode(
        sketch, marginals, estimator=selector.estimator
    )
    labels = session.labels(round1)
    selector.dof_ = _dof(marginals)
    selector.classes_ = classes
    selector.clients_ = labels
    selector.n_clients_ = len(round1)
    selector.dropped_clients_ = labels[[n not in round2 for n in round1]]
    selector.class_counts_ = marginals.class_counts
    selector.feature_totals_ = marginals.row_totals
    selector.n_projections_ = ell
    selector.sketch_ = sketch
    selector.n_features_in_ = width
    return selector, round1


def _check_column_bounds(session, nodes, width):
    """The nodes whose announced column bounds fit the public plan.

    A bound must be a vector of ``width`` non-negative finite numbers; a node
    that sends anything else is left out with a warning (a dishonest node
    cannot turn the plan's scale into NaN).
    """
    kept = []
    for node in nodes:
        try:
            value = np.asarray(session.info[node].get("column_bound"), dtype=np.float64)
        except (TypeError, ValueError):
            value = None
        if (
            value is None
            or value.shape != (width,)
            or not np.all(np.isfinite(value))
            or np.any(value < 0)
        ):
            session.exclude(
                node,
                f"its field 'column_bound' is not {width} non-negative finite numbers",
                invalid=True,
            )
            session.info[node]["column_bound"] = None
        else:
            session.info[node]["column_bound"] = value
            kept.append(node)
    return kept
