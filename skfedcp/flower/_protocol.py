"""Node side of the skfedcp deployment protocol (plain dicts, no flwr import).

A request or a reply is a flat ``dict`` whose values are Python scalars
(``int``, ``float``, ``bool``, ``str``, ``bytes``), lists of ``bytes`` or
NumPy arrays; :mod:`skfedcp.flower` turns it into a Flower
``RecordDict`` and back. Every request names its ``kind``:

``"hello"``
    The node reports its label, its number of rows and, when asked, its
    model fingerprint, whether its features are integer-valued, its label
    set and the public key it uses for secure sums.
``"calibrate"``
    The node computes its own conformity scores and answers with the
    calibrator's ``client_step`` message (the scores never leave the node,
    except for the strategies that send them: ``"central"``,
    ``"dp-central"``, refused unless the node allows raw scores).
``"secure_sum"``
    The node computes a FED-chi2 vector (round-one marginals or round-two
    sketch), encodes it in fixed point and masks it with pairwise masks
    (:mod:`skfedcp.flower._secagg`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any, Literal, cast

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .._typing import ConformityScoreLike
from ..calibrators import CALIBRATORS, BaseCalibrator
from ..calibrators._ldp._score_groups import asked_users
from ..feature_selection import (
    Chi2Marginals,
    chi2_client_encode,
    chi2_client_marginals,
)
from ..feature_selection._ranges import _marginals_bound
from ..federated import FixedPointPlan, fixed_point_encode
from ..privacy._randomness import SECURE
from ..scores import (
    BaseClassificationScore,
)
from ..utils._random import check_seed_sequence
from ._cells import cell_messages, node_groups
from ._fingerprint import data_fingerprint, model_fingerprint, resolve_node_score
from ._secagg import generate_keypair, mask_vector

__all__ = [
    "PROTOCOL_VERSION",
    "RAW_SCORE_STRATEGIES",
    "NodeConfig",
    "calibrator_from_spec",
    "calibrator_to_spec",
    "handle_request",
    "node_label",
    "node_random_state",
    "simulation_seeds",
]

PROTOCOL_VERSION = 4

#: Strategies whose client message holds the node's per-row scores (LDP-L:
#: the score of every class, which reveals the features; only labels are
#: privatised).
RAW_SCORE_STRATEGIES = frozenset({"central", "dp-central", "ldp-l", "ldp-l*"})

# Keys of the node's persistent state (Flower's ``context.state``).
_KEY_STATE = "secagg_key"
_TAGS_STATE = "secagg_tags"


# --------------------------------------------------------------------------
# Shared by nodes and server


def _alias_of(calibrator):
    for alias, cls in CALIBRATORS.items():
        if type(calibrator) is cls:
            return alias
    raise ValueError(
        f"calibrator: {type(calibrator).__name__} is not in the registry "
        f"{sorted(CALIBRATORS)}; only registered strategies can be deployed (the "
        "nodes rebuild the strategy from its alias)."
    )


def _encode_param(value):
    if isinstance(value, tuple):
        return {"__tuple__": [_encode_param(v) for v in value]}
    if isinstance(value, list):
        return [_encode_param(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(
        f"calibrator parameters must be plain values to be sent to the nodes; got "
        f"{type(value).__name__}."
    )


def _decode_param(value):
    if isinstance(value, dict) and set(value) == {"__tuple__"}:
        return tuple(_decode_param(v) for v in value["__tuple__"])
    if isinstance(value, list):
        return [_decode_param(v) for v in value]
    return value


def calibrator_to_spec(calibrator):
    """JSON text naming a registered calibrator and its parameters.

    Examples
    --------
    >>> from skfedcp.calibrators import QuantileOfQuantilesCalibrator
    >>> calibrator_to_spec(QuantileOfQuantilesCalibrator(local_rank=3))[:40]
    '{"alias": "qq", "params": {"clip_local_r'
    """
    if not isinstance(calibrator, BaseCalibrator):
        raise TypeError(
            "calibrator must be a registry alias or a BaseCalibrator instance; got "
            f"{type(calibrator).__name__}."
        )
    params = {k: _encode_param(v) for k, v in calibrator.get_params(deep=False).items()}
    return json.dumps({"alias": _alias_of(calibrator), "params": params})


def calibrator_from_spec(spec):
    """Rebuild the calibrator described by :func:`calibrator_to_spec`."""
    data = json.loads(spec)
    alias = data["alias"]
    if alias not in CALIBRATORS:
        raise ValueError(
            f"unknown calibrator {alias!r}: this node knows {sorted(CALIBRATORS)}; "
            "install the same skfedcp version on the server and the nodes."
        )
    params = {k: _decode_param(v) for k, v in data["params"].items()}
    return alias, CALIBRATORS[alias](**params)


def simulation_seeds(
    random_state: int | np.random.SeedSequence,
    n_clients: int,
    *,
    grouped: bool = False,
) -> list[str]:
    """Node-config ``seed`` values that reproduce an in-process fit's client streams.

    An in-process ``fit(..., random_state=random_state)`` spawns its streams
    from one :class:`~numpy.random.SeedSequence`: stream 0 is the server's,
    stream ``j + 1`` client ``j``'s (clients in sorted-label order). Giving
    node ``j`` the ``j``-th value returned here as its node config ``seed``
    makes its noise that stream, so that a deployed run with the same
    ``random_state`` on the server equals the in-process fit bit for bit
    (LDP-L and LDP-S with several clients: equals ``fit_from_messages`` on
    the per-client messages, since their in-process ``fit`` draws every
    simulated user's noise from one shared stream).

    **A simulation convenience only.** Whoever knows a node's seed can
    regenerate, and remove, that node's privacy noise. In a real deployment
    leave ``seed`` out of the node config: the node then draws its noise from
    the operating system's secure generator, and nobody else (the server
    included) learns it. The server never sends a seed to a node.

    Parameters
    ----------
    random_state : int or SeedSequence
        The ``random_state`` of the in-process fit being reproduced.
    n_clients : int
        Number of calibrating clients (nodes), in sorted-label order.
    grouped : bool, default=False
        For group-conditional calibration (``groups`` on the server): each
        group's round spawns its own client streams, and a node's position
        differs from group to group, so every node gets the root seed and
        derives the stream of its cell of group round ``u`` at position
        ``j`` (both public, sent with the plan) as ``spawn_key + (u, j +
        1)``, as the in-process
        :class:`~skfedcp.calibrators.GroupedCalibrator` does.

    Returns
    -------
    seeds : list of str
        ``"<entropy>:<spawn key>"``, one per client: the full-width child
        seed, not a 31-bit integer.

    Examples
    --------
    >>> seeds = simulation_seeds(7, 3)
    >>> seeds
    ['7:1', '7:2', '7:3']
    >>> rng = node_random_state(seeds[0])
    >>> from skfedcp.utils._random import spawn_random_states
    >>> bool(rng.random_sample() == spawn_random_states(7, 2)[1].random_sample())
    True
    """
    seed = check_seed_sequence(random_state, allow_secure=False)
    if isinstance(n_clients, bool) or not isinstance(n_clients, Integral):
        raise TypeError(f"n_clients must be an int; got {n_clients!r}.")
    if n_clients < 1:
        raise ValueError(f"n_clients must be >= 1; got {n_clients}.")
    if seed.pool_size != 4:  # pragma: no cover - numpy's default
        raise ValueError("random_state must use SeedSequence's default pool size.")
    entropy = seed.entropy
    if not isinstance(entropy, Integral):
        raise ValueError(
            "random_state must be an int or a SeedSequence with integer entropy."
        )
    prefix = ",".join(str(k) for k in seed.spawn_key)
    if grouped:
        return [f"{entropy}:{prefix}" if prefix else f"{entropy}"] * n_clients
    return [
        f"{entropy}:{prefix + ',' if prefix else ''}{j + 1}" for j in range(n_clients)
    ]


def node_random_state(
    seed: int | str | None,
) -> np.random.RandomState | Literal["secure"]:
    """The random stream of a node's private steps, from its node config ``seed``.

    Parameters
    ----------
    seed : None, int or str
        ``None`` (the default and the only choice for a real deployment):
        the operating system's secure generator. An ``int``: the stream of
        ``SeedSequence(seed)``. A string ``"<entropy>"`` or
        ``"<entropy>:<k1>,<k2>,..."`` (see :func:`simulation_seeds`): the
        stream of ``SeedSequence(entropy, spawn_key=(k1, k2, ...))``.

    Returns
    -------
    random_state : RandomState or "secure"
        A ``RandomState`` over ``PCG64`` seeded by the full-width seed, as
        the in-process fit builds its client streams.

    Examples
    --------
    >>> node_random_state(None)
    'secure'
    >>> type(node_random_state("7:1")).__name__
    'RandomState'
    """
    sequence = _seed_sequence(seed)
    if sequence is None:
        return SECURE
    return np.random.RandomState(np.random.PCG64(sequence))


def _seed_sequence(seed: int | str | None) -> np.random.SeedSequence | None:
    """The ``SeedSequence`` a node config ``seed`` names; None for the secure
    generator (no seed). See :func:`node_random_state`."""
    if seed is None or (isinstance(seed, str) and seed.strip() == ""):
        return None
    if isinstance(seed, bool):
        raise TypeError(f"node config seed must be an int or a string; got {seed!r}.")
    if isinstance(seed, Integral):
        sequence = np.random.SeedSequence(int(seed)) if seed >= 0 else None
    elif isinstance(seed, str):
        sequence = _parse_seed(seed)
    else:
        raise TypeError(
            f"node config seed must be an int or a string; got {type(seed).__name__}."
        )
    if sequence is None:
        raise ValueError(
            "node config seed must be a non-negative int or '<entropy>:<k1>,...' "
            f"(see skfedcp.flower.simulation_seeds); got {seed!r}."
        )
    return sequence


def _parse_seed(text: str) -> np.random.SeedSequence | None:
    head, _, key = text.strip().partition(":")
    try:
        entropy = int(head, 0)
        spawn_key = tuple(int(k, 0) for k in key.split(",")) if key else ()
    except ValueError:
        return None
    if entropy < 0 or any(k < 0 for k in spawn_key):
        return None
    return np.random.SeedSequence(entropy, spawn_key=spawn_key)


def node_label(node_config: Mapping[str, Any], node_id: int) -> Any:
    """Client label of a node: ``client-id``, else ``partition-id``, else its id."""
    for key in ("client-id", "partition-id"):
        if key in node_config:
            return node_config[key]
    return int(node_id)


# --------------------------------------------------------------------------
# Node side


@dataclass
class NodeConfig:
    """What a node needs to answer requests (built by ``make_client_app``).

    Parameters
    ----------
    load_data : callable
        ``load_data(context) -> (X, y)``: the node's calibration rows.
    load_model : callable or None
        ``load_model(context) -> model``: the shared fitted model.
    load_selection_data : callable or None
        ``load_selection_data(context) -> (X, y)`` for feature selection;
        ``None`` reuses ``load_data``.
    conformity_score : str, BaseRegressionScore or callable
        A registry name, a (fitted) score object, or
        ``score(model, X, y) -> scores``.
    allow_raw_scores : bool
        Whether this node answers strategies that send raw scores.
    group_by : None, "class", str, int or callable, default=None
        The group of each calibration row (group-conditional calibration),
        as the wrappers' ``group_by``.
    """

    load_data: Callable[[Any], tuple[Any, Any]]
    load_model: Callable[[Any], Any] | None
    load_selection_data: Callable[[Any], tuple[Any, Any]] | None
    conformity_score: ConformityScoreLike
    allow_raw_scores: bool
    group_by: Any = None


def _check_xy(data, what):
    if not isinstance(data, tuple | list) or len(data) != 2:
        raise TypeError(
            f"{what} must return a tuple (X, y); got {type(data).__name__}."
        )
    X, y = data
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{what} returned y of shape {y.shape}; expected (n_rows,).")
    if getattr(X, "shape", (len(X),))[0] != y.shape[0]:
        raise ValueError(f"{what} returned X and y with different numbers of rows.")
    return X, y


@dataclass
class _NodeSession:
    """One request on one node: lazy loading, then the requested step."""

    config: NodeConfig
    context: Any
    node_id: int
    node_config: Mapping[str, Any]
    state: MutableMapping[str, dict[str, Any]]
    _calibration: Any = field(default=None, init=False)
    _selection: Any = field(default=None, init=False)

    # -- data ------------------------------------------------------------------

    def calibration(self):
        if self._calibration is None:
            if self.config.load_model is None:
                raise ValueError(
                    "this node has no load_model: it cannot calibrate (pass "
                    "load_model to make_client_app)."
                )
            X, y = _check_xy(self.config.load_data(self.context), "load_data")
            model = self.config.load_model(self.context)
            fingerprint = model_fingerprint(model, self.config.conformity_score)
            self._calibration = (X, y, model, fingerprint)
        return self._calibration

    def scores(self, *, matrix=False):
        """This node's scores (and encoded labels when ``matrix``).

        ``matrix=True`` gives the score of every class, shape
        ``(n_rows, n_classes)``, for strategies such as LDP-L.
        """
        X, y, model, _ = self.calibration()
        score = resolve_node_score(self.config.conformity_score)
        if isinstance(score, BaseClassificationScore):
            if getattr(score, "randomized", False):
                raise ValueError(
                    "randomized classification scores are not deployed; use a "
                    "deterministic score (e.g. 'lac' or APSScore())."
                )
            proba = model.predict_proba(X)
            labels = _encode_labels(np.asarray(model.classes_), y)
            if matrix:
                return np.asarray(score.label_scores(proba), dtype=np.float64), labels
            return np.asarray(score.conformity_score(labels, proba), float), None
        if matrix:
            raise ValueError(
                "this strategy needs the score of every class (LDP-L): give the "
                "node a classification score ('lac', 'aps' or a score object)."
            )
        if score is None:
            # resolve_node_score returns None for a user's callable only.
            score_fn = cast(Callable[..., Any], self.config.conformity_score)
            scores = score_fn(model, X, y)
        else:
            if getattr(score, "requires_fit", False):
                _check_score_fitted(score)
            if getattr(score, "requires_estimator", False):
                score.set_estimator(model)
            scores = score.conformity_score(y, model.predict(X), X)
        return np.asarray(scores, dtype=np.float64), None

    def groups(self):
        """The group of each calibration row (the node's ``group_by``)."""
        X, y, _, _ = self.calibration()
        return node_groups(self.config.group_by, X, y)

    def selection(self):
        if self._selection is None:
            load = self.config.load_selection_data or self.config.load_data
            X, y = _check_xy(load(self.context), "load_selection_data")
            self._selection = (np.asarray(X, dtype=np.float64), y)
        return self._selection

    def random_source(self):
        return node_random_state(self.node_config.get("seed"))

    # -- steps -----------------------------------------------------------------

    def hello(self, request):
        reply = {
            "protocol": PROTOCOL_VERSION,
            "label": node_label(self.node_config, self.node_id),
        }
        if request.get("calibration", False):
            X, y, _, fingerprint = self.calibration()
            reply["n"] = int(y.shape[0])
            reply["fingerprint"] = fingerprint
            if request.get("groups", False):
                cells = np.unique(self.groups(), return_counts=True)
                reply["group_labels"], reply["group_n"] = cells
        if request.get("selection", False):
            X, y = self.selection()
            reply["selection_n"] = int(y.shape[0])
            reply["n_features"] = int(X.shape[1])
            reply["integer_x"] = bool(np.all(X == np.floor(X)))
            # Round one's public fixed-point plan: the power-of-two bound of
            # each column total of X (as the simulation's clients announce).
            own = chi2_client_marginals(X, y, classes=np.unique(y))
            reply["column_bound"] = _marginals_bound(own[own.shape[0] - X.shape[1] :])
            if request.get("classes", False):
                reply["classes"] = np.unique(y)
            reply["public_key"] = self._public_key()
        rows = (*(self._calibration or (None, None))[:2], *(self._selection or ()))
        salt = str(request.get("salt", ""))
        reply["data_fingerprint"] = data_fingerprint(*rows, salt=salt)
        return reply

    def _strategy(self, request):
        alias, calibrator = calibrator_from_spec(request["calibrator"])
        allowed = self.node_config.get("allow-raw-scores", self.config.allow_raw_scores)
        if alias in RAW_SCORE_STRATEGIES and not allowed:
            raise PermissionError(
                f"strategy {alias!r} sends the node's per-row scores; this node "
                "refuses it (allow it with make_client_app(..., "
                "allow_raw_scores=True) or the node config allow-raw-scores=true)."
            )
        _, _, _, fingerprint = self.calibration()
        expected = request.get("fingerprint", "")
        if expected and expected != fingerprint:
            raise ValueError(
                f"model fingerprint mismatch: the server expects {expected}, this "
                f"node holds {fingerprint}; load the model version the server uses."
            )
        return calibrator, fingerprint

    def calibrate(self, request):
        calibrator, fingerprint = self._strategy(request)
        needs_matrix = getattr(calibrator, "requires_score_matrix", False)
        scores, labels = self.scores(matrix=needs_matrix)
        extra = {"labels": labels} if needs_matrix else {}
        if "cell_units" in request:  # group-conditional: one message per cell
            message = cell_messages(
                calibrator,
                scores,
                self.groups(),
                request,
                seed=_seed_sequence(self.node_config.get("seed")),
            )
            return _reply(fingerprint, message)
        random_state = self.random_source() if calibrator._randomized else None
        message = calibrator.client_step(
            scores,
            alpha=float(request["alpha"]),
            n_per_client=np.asarray(request["n_per_client"]),
            random_state=random_state,
            **extra,
        )
        return _reply(fingerprint, message)

    def respond(self, request):
        """One round of an interactive strategy (LDP-S): answer the query.

        The server sends the public assignment, not the asked users: this
        node's index ``client``, its row of ``group_counts`` and the
        ``assignment_key``, from which the node derives which of its users
        are asked (``O(n_j)`` here; the message has ``O(T)`` numbers). The
        node remembers the assignment, the rounds it answered and the state
        of its random stream: within one calibration a round answered twice
        or a changed assignment is refused (the groups are disjoint, so no
        user answers twice), and the stream continues across rounds as in
        the simulation.
        """
        calibrator, fingerprint = self._strategy(request)
        slot = f"respond/{request['calibration_id']}"
        saved = self.state.get(slot)
        scores, _ = self.scores()
        round_, key, client, row = _check_assignment(request, scores.shape[0])
        text = _assignment_text(key, client, row)
        if saved is not None and saved["assignment"] != text:
            raise PermissionError(
                "the group assignment changed within this calibration: users "
                "already answered could be asked again; each user answers at most "
                "once (start a new calibration)."
            )
        answered = [] if saved is None else list(saved["rounds"])
        if round_ in answered:
            raise PermissionError(
                f"round {round_} already answered in this calibration: each user "
                "answers at most once."
            )
        rng = self.random_source() if saved is None else _load_stream(saved)
        query = {
            "round": round_,
            "threshold": float(request["threshold"]),
            "users": asked_users(key, client, row, round_),
        }
        message = calibrator.client_respond(scores, query, random_state=rng)
        self.state[slot] = {
            "assignment": text,
            "rounds": [*answered, round_],
            **_dump_stream(rng),
        }
        return _reply(fingerprint, message)

    def secure_sum(self, request):
        tag = str(request["tag"])
        keys = list(request["public_keys"])
        if len(keys) < 2:
            raise ValueError(
                "a secure sum needs at least two participants; this node does not "
                "send its vector unmasked."
            )
        used = self.state.get(_TAGS_STATE, {}).get("tags", [])
        if tag in used:
            raise ValueError(f"secure sum {tag!r} was already answered by this node.")
        key = self.state.get(_KEY_STATE)
        if key is None:
            raise ValueError("this node has no key pair: the server skipped hello.")
        try:
            index = keys.index(key["public"])
        except ValueError:
            raise ValueError(
                "this node's public key is not among the participants."
            ) from None
        task = request["task"]
        if task == "chi2_marginals":
            q = self._chi2_marginals(request)
        elif task == "chi2_sketch":
            q = self._chi2_sketch(request)
        else:
            raise ValueError(f"unknown secure-sum task {task!r}.")
        masked = mask_vector(
            q, index=index, private_key=key["private"], public_keys=keys, tag=tag
        )
        self.state[_TAGS_STATE] = {"tags": [*used, tag]}
        return {"masked": masked}

    def _public_key(self):
        key = self.state.get(_KEY_STATE)
        if key is None:
            private, public = generate_keypair()
            key = {"private": private, "public": public}
            self.state[_KEY_STATE] = key
        return key["public"]

    def _chi2_marginals(self, request):
        X, y = self.selection()
        message = chi2_client_marginals(X, y, classes=np.asarray(request["classes"]))
        plan = FixedPointPlan(
            np.asarray(request["frac_bits"], dtype=np.int64),
            np.asarray(request["bound"], dtype=np.float64),
            int(request["n_clients"]),
        )
        return plan.encode(message, name="X")

    def _chi2_sketch(self, request):
        X, y = self.selection()
        seed = self.node_config.get("projection-seed")
        if seed is None:
            raise ValueError(
                "node config has no 'projection-seed': the nodes must share a "
                "secret projection seed that the server does not know (e.g. "
                "--node-config 'projection-seed=\"<int>\"')."
            )
        seed = int(seed, 0) if isinstance(seed, str) else int(seed)
        marginals = Chi2Marginals(
            np.asarray(request["class_counts"], dtype=np.float64),
            np.asarray(request["row_totals"], dtype=np.float64),
            None,
        )
        sketch = chi2_client_encode(
            X,
            y,
            marginals,
            classes=np.asarray(request["classes"]),
            seed=seed,
            n_projections=int(request["n_projections"]),
            # A wire string; chi2_client_encode rejects anything else.
            expected_split=cast(
                Literal["class", "uniform"], str(request["expected_split"])
            ),
            n_clients=int(request["n_clients"]),
        )
        bits = np.asarray(request["frac_bits"], dtype=np.int64)
        return fixed_point_encode(sketch.T, bits[:, None]).ravel()


def _check_assignment(request, n_users):
    """``(round, key, client, counts row)`` of a ``respond`` request: the
    round and the public assignment, checked against this node's ``n_users``."""
    fields = ("assignment_key", "group_counts", "client", "round", "threshold")
    missing = [f for f in fields if f not in request]
    if missing:
        raise ValueError(
            f"the respond request lacks {missing}: install the same skfedcp "
            "version on the server and the nodes."
        )
    key = np.asarray(request["assignment_key"])
    row = np.asarray(request["group_counts"])
    client, round_ = request["client"], request["round"]
    if key.shape != (2,) or key.dtype != np.uint64:
        raise ValueError("assignment_key must hold two uint64 words.")
    if row.ndim != 1 or row.shape[0] < 2 or row.dtype.kind not in "iu":
        raise ValueError("group_counts must be a 1-D integer array (T + 1 groups).")
    if (row < 0).any() or int(row.sum()) != n_users:
        raise ValueError(
            f"group_counts place {int(row.sum())} users in the groups; this node "
            f"has {n_users} (its announced n)."
        )
    if not _is_index(client) or client < 0:
        raise ValueError(f"client must be a non-negative int; got {client!r}.")
    if not _is_index(round_) or not 1 <= round_ < row.shape[0]:
        raise ValueError(f"round must be in 1..{row.shape[0] - 1}; got {round_!r}.")
    return int(round_), key, int(client), row.astype(np.int64)


def _is_index(value):
    return isinstance(value, Integral | np.integer) and not isinstance(value, bool)


def _assignment_text(key, client, row):
    """The assignment as one string (node state holds no 64-bit unsigned words)."""
    return f"{key[0]},{key[1]}|{client}|{','.join(map(str, row.tolist()))}"


def _check_score_fitted(score):
    try:
        check_is_fitted(score)
    except NotFittedError as exc:
        raise ValueError(
            f"conformity_score {type(score).__name__} learns from data: pass it "
            "fitted (nodes only evaluate it)."
        ) from exc


def _reply(fingerprint, message):
    reply = {"fingerprint": fingerprint}
    for key, value in message.items():
        reply[f"message.{key}"] = _plain(value)
    return reply


def _encode_labels(classes, y):
    index = np.searchsorted(classes, y)
    index = np.clip(index, 0, classes.shape[0] - 1)
    if not np.all(classes[index] == y):
        raise ValueError("y holds labels the model has not seen (not in classes_).")
    return index


def _dump_stream(rng):
    """A node's random stream as plain values (to persist between rounds).

    The bit generator's full state (PCG64: two 128-bit integers) goes into
    one JSON string: Flower's records hold no integers that wide.
    """
    if isinstance(rng, str):  # the secure source has no state
        return {"stream": rng}
    state = rng.get_state(legacy=False)
    return {"stream": "numpy", "state": json.dumps(state, default=_json_array)}


def _json_array(value):
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype)}
    raise TypeError(f"cannot persist {type(value).__name__} in a stream state")


def _from_json(obj):
    if "__ndarray__" in obj:
        return np.asarray(obj["__ndarray__"], dtype=obj["dtype"])
    return obj


def _load_stream(saved):
    if saved["stream"] == SECURE:
        return SECURE
    state = json.loads(saved["state"], object_hook=_from_json)
    bit_generator = getattr(np.random, state["bit_generator"])()
    rng = np.random.RandomState(bit_generator)
    rng.set_state(state)
    return rng


def _plain(value):
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bool | Integral | float | str | bytes):
        return value
    if isinstance(value, list | tuple):
        return np.asarray(value)
    raise TypeError(f"cannot send a value of type {type(value).__name__}.")


_HANDLERS = {
    "hello": _NodeSession.hello,
    "calibrate": _NodeSession.calibrate,
    "respond": _NodeSession.respond,
    "secure_sum": _NodeSession.secure_sum,
}


def handle_request(
    request: Mapping[str, Any],
    *,
    config: NodeConfig,
    context: Any,
    node_id: int,
    node_config: Mapping[str, Any],
    state: MutableMapping[str, dict[str, Any]],
) -> dict[str, Any]:
    """Answer one server request on a node.

    Parameters
    ----------
    request : dict
        The decoded request; ``request["kind"]`` selects the step.
    config : NodeConfig
        Loaders, score and policy of this node.
    context : object
        Passed to the loaders (Flower's ``Context``).
    node_id : int
        Flower's node id (the label when the node config names none).
    node_config : mapping
        The node's configuration (``client-id``, ``seed``,
        ``projection-seed``, ...).
    state : mutable mapping of str to dict
        Persistent node-local state (key pair, answered secure sums).

    Returns
    -------
    reply : dict
    """
    if int(request.get("protocol", PROTOCOL_VERSION)) != PROTOCOL_VERSION:
        raise ValueError(
            f"protocol version {request.get('protocol')} != {PROTOCOL_VERSION}: "
            "install the same skfedcp version on the server and the nodes."
        )
    kind = request.get("kind")
    if kind not in _HANDLERS:
        raise ValueError(f"unknown request kind {kind!r}.")
    session = _NodeSession(config, context, node_id, node_config, state)
    return _HANDLERS[kind](session, request)
