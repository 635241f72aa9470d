"""Server side of the skfedcp deployment protocol (plain dicts, no flwr import).

The server talks to the nodes through an ``exchange`` callable that sends one
request per node and returns, per node, the decoded reply or a
:class:`NodeFailure`, plus the bytes sent and received. :mod:`.flower`
builds it on a Flower ``Grid``; tests can build it on anything.

The nodes do not trust each other and may be dishonest; the server is honest
but curious. What a node announces in the hello round (its label, sizes,
keys, data fingerprint) is checked before it reaches any plan: against the
planned node set (``planned_clients``), against public bounds
(``max_client_size``, ``max_clients``), for duplicates (two nodes with one
label, one public key or the same rows: Sybils), and every reply must carry
the nonce the server sent with that node's request of that round (a reply
replayed from another node or round is refused). A node that fails a check
is left out with a warning naming it; the others go on. Nodes with the same
rows whose node ids the plan pins (authenticated SuperNodes) are planned
participants, not Sybils: one of them is used (the smallest label), so that
the rows count once, and the others are left out with a warning.
"""

from __future__ import annotations

import secrets
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping
from numbers import Integral
from typing import NamedTuple

import numpy as np

from .._config import _DEFAULTS, _check_policy_int
from ..exceptions import (
    InvalidMessageWarning,
    NodeExcludedWarning,
)
from ._protocol import (
    PROTOCOL_VERSION,
)

__all__ = [
    "MAX_CLIENTS",
    "MAX_CLIENT_SIZE",
    "DeploymentReport",
    "NodeFailure",
    "RoundRecord",
    "ServerSession",
    "check_planned_clients",
]

#: The plan policy's default bound on the rows a node may announce
#: (calibration or selection); the server's bound is the policy in force
#: (:func:`skfedcp.get_config`) unless a run passes its own.
MAX_CLIENT_SIZE = _DEFAULTS["max_client_size"]

#: The plan policy's default bound on the number of nodes (and planned
#: clients).
MAX_CLIENTS = _DEFAULTS["max_clients"]

#: Longest client label (characters) a node may announce.
_MAX_LABEL_CHARS = 256

#: Raw X25519 public keys are 32 bytes.
_KEY_BYTES = 32


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


def _check_label(label):
    """``(label, None)`` for an int or str label (NumPy scalars unwrapped), else
    ``(None, reason)``: a label is a public identifier, never a container."""
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, bool) or not isinstance(label, int | str):
        return None, (
            f"its client label is {type(label).__name__} {_short(label)}, not an "
            "int or a string"
        )
    if isinstance(label, str) and len(label) > _MAX_LABEL_CHARS:
        return None, f"its client label has more than {_MAX_LABEL_CHARS} characters"
    return label, None


def _short(value, limit=60):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_planned_clients(planned_clients, *, max_clients=None):
    """Validate the planned node set; return ``(pinned, labels)``.

    ``planned_clients`` is ``None`` (no plan: ``(None, None)``), a sequence of
    client labels (``pinned`` is ``None``) or a mapping from Flower node id
    to client label (``pinned`` is that mapping, with int keys). Labels are
    ints or strings, all of one type, distinct, at most ``max_clients``
    (None: the plan policy's).
    """
    max_clients = _check_policy_int(max_clients, "max_clients")
    if planned_clients is None:
        return None, None
    pinned = None
    if isinstance(planned_clients, Mapping):
        pinned = {}
        for node, label in planned_clients.items():
            if isinstance(node, bool) or not isinstance(node, Integral):
                raise TypeError(
                    "planned_clients: a mapping's keys are Flower node ids (ints); "
                    f"got {_short(node)}."
                )
            pinned[int(node)] = label
        labels = list(pinned.values())
    elif isinstance(planned_clients, str | bytes) or not hasattr(
        planned_clients, "__iter__"
    ):
        raise TypeError(
            "planned_clients must be a sequence of client labels or a mapping "
            f"{{node id: client label}}; got {type(planned_clients).__name__}."
        )
    else:
        labels = list(planned_clients)
    checked = []
    for label in labels:
        value, problem = _check_label(label)
        if problem:
            raise ValueError(f"planned_clients: {problem.replace('its ', 'a ', 1)}.")
        checked.append(value)
    if not checked:
        raise ValueError("planned_clients is empty: plan at least one client.")
    if len(checked) > max_clients:
        raise ValueError(
            f"planned_clients has {len(checked)} clients > max_clients={max_clients}."
        )
    repeated = sorted({repr(v) for v, c in Counter(checked).items() if c > 1})
    if repeated:
        raise ValueError(f"planned_clients repeats client label(s) {repeated}.")
    if len({type(v) for v in checked}) > 1:
        raise ValueError("planned_clients mixes int and string labels; use one type.")
    if pinned is not None:
        pinned = dict(zip(pinned, checked, strict=True))
    return pinned, frozenset(checked)


def _size_problem(reply, key, max_size):
    """Why ``reply[key]`` is not a row count within ``[0, max_size]``, or None."""
    n = reply.get(key)
    if isinstance(n, bool) or not isinstance(n, Integral):
        return f"its field {key!r} is {_short(n)}, not an integer"
    if n < 0:
        return f"its field {key!r} is negative ({n})"
    if n > max_size:
        return (
            f"its field {key!r} announces {n} rows > max_client_size={max_size} "
            "(the public bound; refused before any plan is made)"
        )
    return None


def _hello_problem(reply, request, max_size, max_classes):
    """Why a hello reply cannot be used (a malformed field), or None."""
    if request["calibration"]:
        problem = _size_problem(reply, "n", max_size)
        if problem:
            return problem
        if not isinstance(reply.get("fingerprint"), str):
            return "its field 'fingerprint' is not a string"
    if request["selection"]:
        problem = _size_problem(reply, "selection_n", max_size)
        if problem:
            return problem
        width = reply.get("n_features")
        if isinstance(width, bool) or not isinstance(width, Integral) or width < 1:
            return f"its field 'n_features' is {_short(width)}, not a positive int"
        if not isinstance(reply.get("integer_x"), bool | np.bool_):
            return "its field 'integer_x' is not a boolean"
        key = reply.get("public_key")
        if not isinstance(key, bytes) or len(key) != _KEY_BYTES:
            return f"its field 'public_key' is not {_KEY_BYTES} bytes"
        if request["classes"]:
            classes = reply.get("classes")
            if (
                not isinstance(classes, np.ndarray)
                or classes.ndim != 1
                or classes.dtype.kind not in "iub" + "U"
                or classes.shape[0] > max_classes
                or classes.dtype.itemsize > 4 * _MAX_LABEL_CHARS
            ):
                return (
                    "its field 'classes' is not a vector of at most "
                    f"max_classes={max_classes} int or string labels (strings of "
                    f"at most {_MAX_LABEL_CHARS} characters)"
                )
    if not isinstance(reply.get("data_fingerprint", ""), str):
        return "its field 'data_fingerprint' is not a string"
    return None


def _is_text(value, expected):
    """``value`` is the string ``expected``; checked on the type first, so that
    a node's array (compared element-wise) cannot stop the run."""
    return isinstance(value, str) and value == expected


def _replay_reason(nonce, tag, rounds, name):
    """The warning text for a reply whose nonce is not the one sent."""
    if not isinstance(nonce, str):
        return (
            "its reply carries no nonce binding it to this request (a replayed "
            "reply, or an older skfedcp on the node)"
        )
    parts = nonce.split("/")
    if len(parts) == 4 and parts[0] == tag and parts[1].isdigit():
        index = int(parts[1])
        round_name = rounds[index].name if index < len(rounds) else name
        return (
            f"its reply is bound to node {parts[2]}'s request of round {index} "
            f"({round_name!r}), not to its own request of round {len(rounds)} "
            f"({name!r}): a replayed reply"
        )
    return "its reply carries another run's or a forged nonce: a replayed reply"


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
    planned_clients : sequence of labels, mapping of int to label, or None
        The planned node set (see :func:`check_planned_clients`). A mapping
        pins each Flower node id to its client label: other connected nodes
        are left out without being asked. ``None`` checks nothing (a
        warning says so).
    max_client_size : int or None
        Largest row count a node may announce; None: the plan policy's
        (:func:`skfedcp.get_config`).
    max_clients : int or None
        Most nodes the server talks to (without a pinned plan: more connected
        nodes is an error); None: the plan policy's.

    The most classes a node may announce (FED-chi2 without public
    ``classes``) and the widest FED-chi2 round are the plan policy's
    ``max_classes`` and ``max_features``.
    """

    def __init__(
        self,
        exchange,
        node_ids,
        *,
        timeout,
        min_rows=1,
        planned_clients=None,
        max_client_size=None,
        max_clients=None,
    ):
        if min_rows < 1:
            raise ValueError(f"min_rows must be >= 1; got {min_rows}.")
        self.max_client_size = _check_policy_int(max_client_size, "max_client_size")
        self.max_clients = _check_policy_int(max_clients, "max_clients")
        self.max_classes = _check_policy_int(None, "max_classes")
        self.pinned, self.planned = check_planned_clients(
            planned_clients, max_clients=self.max_clients
        )
        self.exchange = exchange
        self.timeout = float(timeout)
        self.min_rows = int(min_rows)
        self.rounds = []
        self.excluded = {}
        self.failed = set()
        self.invalid = set()
        self.info = {}
        self.announced = {}  # labels of the nodes left out at hello
        self.tag = secrets.token_hex(8)
        connected = [int(n) for n in node_ids]
        if not connected:
            raise RuntimeError("no node is connected to the server.")
        if self.pinned is not None:
            self.node_ids = [n for n in connected if n in self.pinned]
            self._leave_out_unpinned([n for n in connected if n not in self.pinned])
            if not self.node_ids:
                raise RuntimeError(
                    "none of the planned nodes (planned_clients) is connected; "
                    f"connected: {_short(connected)}."
                )
            return
        if self.planned is None:
            _warn(
                "the node set is not checked: any node that connects to the "
                "SuperLink takes part under the client label it announces. Pass "
                "planned_clients (the client labels, or {node id: label} with "
                "SuperNode authentication) to leave unplanned nodes out.",
                UserWarning,
            )
        if len(connected) > self.max_clients:
            raise ValueError(
                f"{len(connected)} nodes are connected > max_clients="
                f"{self.max_clients}; refused before any node is asked (pin the "
                "planned node ids with planned_clients={node id: label} and "
                "SuperNode authentication)."
            )
        self.node_ids = connected

    def _leave_out_unpinned(self, nodes):
        """Connected nodes outside the pinned plan: left out, never asked."""
        if not nodes:
            return
        for node in nodes:
            self.exclude(
                node, "it is not in the planned node set", invalid=True, warn=False
            )
        _warn(
            f"{len(nodes)} connected node(s) not in the planned node set "
            f"(planned_clients) are left out without being asked: node(s) "
            f"{_short(sorted(nodes))}.",
            InvalidMessageWarning,
        )

    # -- plumbing --------------------------------------------------------------

    def query(self, name, requests):
        """Send one request per node; return ``(replies, failures, replays)``.

        Each request carries a fresh nonce naming the run, the round and the
        node; a reply must echo its own request's nonce. ``replays`` maps the
        nodes whose reply does not (a reply bound to another node or another
        round, or none) to the reason; the caller treats them as invalid.
        """
        index = len(self.rounds)
        nonces = {
            node: f"{self.tag}/{index}/{node}/{secrets.token_hex(8)}"
            for node in requests
        }
        requests = {
            node: {"protocol": PROTOCOL_VERSION, **req, "nonce": nonces[node]}
            for node, req in requests.items()
        }
        start = time.perf_counter()
        replies, sizes = self.exchange(requests, self.timeout)
        seconds = time.perf_counter() - start
        ok, failed, replays = {}, {}, {}
        for node in requests:
            reply = replies.get(
                node, NodeFailure(f"no reply within {self.timeout:g} s")
            )
            if isinstance(reply, NodeFailure):
                failed[node] = reply.reason
            elif not isinstance(reply, Mapping):
                replays[node] = f"its reply is a {type(reply).__name__}, not a record"
            elif not _is_text(reply.get("nonce"), nonces[node]):
                nonce = reply.get("nonce")
                replays[node] = _replay_reason(nonce, self.tag, self.rounds, name)
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
        return ok, failed, replays

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
            label = self.info.get(node, {}).get("label", self.announced.get(node, "?"))
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

    def hello(self, *, calibration=False, selection=False, classes=False, groups=False):
        """Ask every node for its label, sizes, fingerprints and key.

        Then keep the nodes that may take part: every field well formed and
        within the public bounds, the label planned (and, with a pinned plan,
        the one planned for that node id), no two nodes with one label, one
        public key, or the same rows. The others are left out of the run with
        an :class:`~skfedcp.exceptions.InvalidMessageWarning` naming them
        (nodes with the same rows whose node ids are pinned: the one with the
        smallest label is used, the others are left out with a
        :class:`~skfedcp.exceptions.NodeExcludedWarning`, so the rows count
        once).
        Returns the kept nodes in client-label order.
        """
        request = {
            "kind": "hello",
            "calibration": bool(calibration),
            "selection": bool(selection),
            "classes": bool(classes),
            "groups": bool(groups),  # each node's cells: group labels and sizes
            "salt": self.tag,  # of the data fingerprints: unlinkable across runs
        }
        ok, failed, replays = self.query("hello", dict.fromkeys(self.node_ids, request))
        for node, reason in failed.items():
            self.exclude(node, reason)
        for node, reason in replays.items():
            self.exclude(node, reason, invalid=True)
        for node, reply in ok.items():
            label, problem = _check_label(reply.get("label"))
            self.announced[node] = label if problem is None else "?"
            if problem is None:
                problem = _hello_problem(
                    reply, request, self.max_client_size, self.max_classes
                )
            if problem is not None:
                self.exclude(node, problem, invalid=True)
            else:
                self.info[node] = {**reply, "label": label}
        self._check_plan()
        self._leave_out_duplicates("label", "announce the same client label {!r}")
        if self.pinned is None:
            self._leave_out_duplicates(
                "data_fingerprint",
                "hold the same rows (one party running several nodes over the "
                "same data: Sybil nodes)",
            )
            self._leave_out_duplicates("public_key", "announce the same public key")
        else:
            # Keys first: the copy kept for its rows must be a node that stays
            # (kept, then left out for its key, its rows would count zero times).
            self._leave_out_duplicates("public_key", "announce the same public key")
            self._keep_one_of_same_rows()
        if not self.info:
            raise RuntimeError(
                "no node is left after the hello round (see the warnings for why "
                "each node was left out)."
            )
        return self.ordered(self.info)

    def _check_plan(self):
        """Leave out the nodes whose label the plan does not hold."""
        for node in list(self.info):
            label = self.info[node]["label"]
            if self.pinned is not None and self.pinned[node] != label:
                reason = (
                    f"it announces client label {label!r}, but the plan pins node "
                    f"{node} to client {self.pinned[node]!r}"
                )
            elif self.planned is not None and label not in self.planned:
                reason = "its client label is not in the planned node set"
            else:
                continue
            self._drop(node, reason)
        if self.planned is not None:
            return
        kinds = Counter(type(info["label"]) for info in self.info.values())
        if len(kinds) < 2:
            return
        (kind, count), (_, second) = kinds.most_common(2)
        if count == second:
            raise ValueError(
                "client labels mix types in equal numbers (ints and strings) and "
                "no plan says which is right; pass planned_clients."
            )
        reason = (
            f"its client label is not a{'n int' if kind is int else ' string'} as "
            "the other nodes' are (pass planned_clients to fix the labels)"
        )
        for node, info in list(self.info.items()):
            if type(info["label"]) is not kind:
                self._drop(node, reason)

    def _drop(self, node, reason):
        """Forget what ``node`` announced and leave it out of the run."""
        del self.info[node]
        self.exclude(node, reason, invalid=True)

    def _sharing(self, key):
        """``{value: nodes}`` for each value of ``key`` two or more nodes share."""
        groups: defaultdict[Hashable, list[int]] = defaultdict(list)
        for node, info in self.info.items():
            value = info.get(key)
            if value is not None and value != "":
                groups[value].append(node)
        return {value: nodes for value, nodes in groups.items() if len(nodes) > 1}

    def _keep_one_of_same_rows(self):
        """Pinned plan: of the nodes holding the same rows, one is used.

        With ``planned_clients={node id: label}`` and SuperNode
        authentication every node id is a registered key the server planned,
        so two nodes holding the same rows (two sites with one public data
        set, a test copy) are planned participants, not one party's Sybils,
        and neither is silenced. But their rows are one data set: used once
        per node they would enter every calibration (each of their cells,
        with ``groups``) and FED-chi2 twice, and duplicated rows are neither
        exchangeable with a new point nor independent clients, which the
        strategies' guarantees assume. So the node with the smallest client
        label is used and the others are left out, with a warning naming
        them: their messages would come from the same rows, so which one is
        kept changes no result, only the label in ``clients_``.
        """
        for nodes in self._sharing("data_fingerprint").values():
            kept, *copies = self.ordered(nodes)
            for node in copies:
                self.exclude(
                    node,
                    f"it holds the same rows as node {kept} (client "
                    f"{self.info[kept]['label']!r}), which is used: the plan pins "
                    "both node ids (planned participants, not Sybils), and the "
                    "rows count once",
                    failed=False,
                )
                del self.info[node]

    def _leave_out_duplicates(self, key, what):
        """Leave out every node that shares the value of ``key`` with another.

        The server cannot tell which of them is genuine, so none is used.
        """
        for value, nodes in self._sharing(key).items():
            for node in nodes:
                others = [n for n in nodes if n != node]
                self._drop(
                    node,
                    f"it and node(s) {others} {what.format(value)}; the server "
                    "cannot tell which is genuine and uses none of them",
                )

    def usable(self, nodes, size_key):
        """Nodes with at least ``min_rows`` rows (others excluded).

        ``size_key`` (``"n"`` or ``"selection_n"``) was checked by
        :meth:`hello` (an integer within ``max_client_size``) for every node
        it kept.
        """
        reasons = {
            node: f"it holds {n} row(s) < min_rows={self.min_rows}"
            for node in nodes
            if (n := self.info[node][size_key]) < self.min_rows
        }
        return self.leave_out(nodes, reasons, failed=False)

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
        reasons = {
            node: f"model fingerprint {prints[node]} differs from the expected "
            f"{expected} (another model version)"
            for node in nodes
            if prints[node] != expected
        }
        return self.leave_out(nodes, reasons, failed=False), expected

    def leave_out(self, nodes, reasons, **how):
        """Exclude the nodes ``reasons`` names (``how`` as in :meth:`exclude`);
        return the others, in order."""
        for node, reason in reasons.items():
            self.exclude(node, reason, **how)
        return [node for node in nodes if node not in reasons]
