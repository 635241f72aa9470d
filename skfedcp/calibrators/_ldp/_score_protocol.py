"""LDP-S's rounds: the queries posed, the search axis, the transcript of answers."""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from ..._typing import RandomStateLike
from ...exceptions import InfiniteThresholdWarning
from ...federated._partition import _group_order
from ...privacy import binary_randomized_response
from ...utils._random import check_seed_sequence, spawn_random_states
from ...utils._warnings import warn_user
from ._common import _per_client_rows
from ._score_groups import asked_users, public_groups


def _pose_query(state: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``state`` with the next round's per-client queries."""
    round_ = state["round"] + 1
    query = _axis_score(state, (state["lo"] + state["hi"]) / 2.0)
    queries = RoundQueries(
        round_,
        query,
        state["group_counts"],
        key=state["assignment_key"],
        sizes=state["n_per_client"],
    )
    return {**state, "queries": queries}


class RoundQueries(Sequence[Mapping[str, Any]]):
    """One round's queries, one mapping per client, built when accessed.

    ``queries[j]`` is ``{"round": r, "threshold": q_r, "count": k, "users":
    local row indices}`` for client ``j``: ``count`` is ``K[j, r - 1]``, the
    number of its users in group ``r - 1`` (the server's whole knowledge),
    and ``users`` which ones (sorted), derived from the public key only
    when that entry is read (``O(n_j)``; see :mod:`._score_groups`). The
    round's counts are also held stacked: ``offsets`` (client ``j``'s
    answers are entries ``offsets[j]:offsets[j + 1]`` of a stacked message,
    see :meth:`LDPScoreCalibrator.server_update`).
    """

    def __init__(
        self,
        round_: int,
        threshold: float,
        group_counts: NDArray[np.int64],
        *,
        key: NDArray[np.uint64],
        sizes: NDArray[np.int64],
    ) -> None:
        self.round = int(round_)
        self.threshold = threshold
        self.group_counts = group_counts
        self.key = key
        self.sizes = sizes
        self.starts = np.cumsum(sizes) - sizes
        self.offsets = np.concatenate(([0], np.cumsum(group_counts[:, self.round - 1])))

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    @overload
    def __getitem__(self, j: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, j: slice) -> list[Mapping[str, Any]]: ...

    def __getitem__(
        self, j: int | slice
    ) -> Mapping[str, Any] | list[Mapping[str, Any]]:
        if isinstance(j, slice):
            return [self[i] for i in range(len(self))[j]]
        n = len(self)
        j = operator.index(j)
        if j < 0:
            j += n
        if not 0 <= j < n:
            raise IndexError("client index out of range")
        return _ClientQuery(self, j)

    def counts(self) -> NDArray[np.int64]:
        """Number of asked users of each client."""
        return np.diff(self.offsets)

    def owner(self) -> NDArray[np.intp]:
        """The client of each entry of a stacked answer (``O(n')``)."""
        return np.repeat(np.arange(len(self)), self.counts())

    def client_users(self, j: int) -> NDArray[np.intp]:
        """Client ``j``'s asked users (local rows, sorted), from the public key."""
        return asked_users(self.key, j, self.group_counts[j], self.round)

    @property
    def users(self) -> NDArray[np.intp]:
        """Every asked user's local row, client after client (``O(N)``)."""
        parts = [self.client_users(j) for j in range(len(self))]
        return _concat(parts, np.intp)


class _ClientQuery(Mapping[str, Any]):
    """Client ``j``'s query: ``users`` is derived when read (see RoundQueries)."""

    _keys = ("round", "threshold", "count", "users")

    def __init__(self, queries: RoundQueries, j: int) -> None:
        self._queries, self._j = queries, j

    def __getitem__(self, key: str) -> Any:
        q, j = self._queries, self._j
        if key == "round":
            return q.round
        if key == "threshold":
            return q.threshold
        if key == "count":
            return int(q.offsets[j + 1] - q.offsets[j])
        if key == "users":
            return q.client_users(j)
        raise KeyError(key)

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        q = self._queries
        return (
            f"{{'round': {q.round}, 'threshold': {q.threshold!r}, "
            f"'count': {self['count']}, 'users': <{self['count']} rows>}}"
        )


def _axis_range(axis, bounds, n_groups):
    """Search interval on the axis (see :func:`_axis_score`)."""
    reach = 2.0 * n_groups * math.log(2.0)  # a gap of 4^-T of the range
    if axis == "log":
        return 0.0, reach
    if axis == "logit":
        return -reach, reach
    return bounds


def _axis_score(state, point):
    """Score threshold of a point of the search axis (``+inf`` at its top).

    With ``score_bounds = (lo, hi)`` and ``x = (s - lo) / (hi - lo)``:
    ``"linear"``: the point is the score. ``"log"``: ``u = -ln(1 - x)`` on
    ``[0, 2 T ln 2]``. ``"logit"``: ``u = ln(x / (1 - x))`` on
    ``[-2 T ln 2, 2 T ln 2]``. The top of the axis means ``+inf``.
    """
    axis = state.get("axis", "linear")
    if axis == "linear":
        return point
    if point >= state["axis_range"][1]:
        return np.inf
    lo, hi = state["bounds"]
    if axis == "log":
        return hi - (hi - lo) * math.exp(-point)
    # logit, written so that a gap to either end keeps its precision
    if point >= 0:
        return hi - (hi - lo) / (1.0 + math.exp(point))
    return lo + (hi - lo) / (1.0 + math.exp(-point))


def _warn_top(state):
    if state.get("axis", "linear") == "linear":
        advice = (
            "use axis='logit' (the default) or 'log', which resolve gaps down "
            "to 4^-T of the range, or a randomized APS score"
        )
    else:
        advice = "use a randomized APS score or more users"
    warn_user(
        "LDP-S: no round found the coverage above the target below the upper "
        f"score bound {state['bounds'][1]:g}, so the threshold is +inf (every "
        "label). If scores pile up just below that bound (e.g. deterministic "
        f"APS of a confident model), {advice}.",
        InfiniteThresholdWarning,
    )


class _Transcript:
    """What the server learns over the rounds: who answered, and the bits.

    Fed round by round with the round's queries and its checked answers
    (the users each client named and their bits, client after client), by
    :meth:`LDPScoreCalibrator.fit` as the rounds run and by
    :meth:`LDPScoreCalibrator.fit_from_messages` as it replays them.
    """

    def __init__(self, clients):
        self.clients = clients
        self._owners, self._answers = [], []
        self._log: dict[str, list[Any]] = {"round": [], "client": [], "user": []}

    def add(self, queries, messages):
        users, reports = _round_answers(messages)
        owner = queries.owner()
        self._owners.append(owner)
        self._answers.append(reports)
        self._log["round"].append(np.full(owner.size, queries.round))
        self._log["client"].append(self.clients[owner])
        self._log["user"].append(users.astype(np.intp, copy=False))

    def log(self):
        """The ``(round, client, user)`` of every answer, in answer order."""
        return {
            "round": _concat(self._log["round"], np.intp),
            "client": _concat(self._log["client"], self.clients.dtype),
            "user": _concat(self._log["user"], np.intp),
        }

    def entries(self):
        """The ``(round, client index, user)`` of every answer, in answer order."""
        return (
            _concat(self._log["round"], np.intp),
            _concat(self._owners, np.intp),
            _concat(self._log["user"], np.intp),
        )

    def reports_per_client(self, n_clients):
        """Each client's bits in round order (a stable grouping by client)."""
        owner = _concat(self._owners, np.intp)
        order = _group_order(owner, n_clients)  # a stable counting sort
        pooled = _concat(self._answers, np.int64)[order]
        n_reports = np.bincount(owner, minlength=n_clients)
        return n_reports, _per_client_rows(pooled, n_reports)


class _SimulatedUsers:
    """Every client's users in one piece, answering as :meth:`client_respond` would.

    The users' groups are those every client derives from the public key
    (:func:`~._score_groups.public_groups`, all clients at once). Each
    round, the asked users of every client compare their score with the
    query and report the bit through binary randomized response, all from
    one noise stream, in one stacked message (see
    :meth:`LDPScoreCalibrator.server_update`). The users remember that they
    answered: a user asked twice raises ``RuntimeError``.
    """

    def __init__(self, scores, epsilon, random_state, state):
        self._scores = scores  # client after client, as the users are numbered
        self._epsilon = epsilon
        self._random_state = random_state
        self._answered = np.zeros(scores.shape[0], dtype=np.intp)
        sizes = state["n_per_client"]
        groups = public_groups(state["assignment_key"], state["group_counts"])
        # Users sorted by group (stably: by row within a group, so client
        # after client, each client's rows ascending).
        self._by_group = np.argsort(groups, kind="stable")
        per_group = np.bincount(groups, minlength=state["n_groups"] + 1)
        self._group_bounds = np.concatenate(([0], np.cumsum(per_group)))
        self._starts = np.cumsum(sizes) - sizes

    def answer(self, queries):
        """The stacked answers of every asked user to one round's queries."""
        g = queries.round - 1
        rows = self._by_group[self._group_bounds[g] : self._group_bounds[g + 1]]
        users = rows - self._starts[queries.owner()]
        np.add.at(self._answered, rows, 1)  # repeats within the round count too
        if self._answered[rows].max(initial=0) > 1:
            raise RuntimeError(
                "LDP-S simulation: a user was queried twice; each user "
                "answers at most once."
            )
        bits = (self._scores[rows] < float(queries.threshold)).astype(np.int64)
        return {
            "round": queries.round,
            "counts": queries.counts(),
            "users": users,
            "reports": binary_randomized_response(
                bits, epsilon=self._epsilon, random_state=self._random_state
            ),
        }


def _concat(parts, dtype):
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def _assignment_rng(
    random_state: RandomStateLike,
) -> np.random.Generator | np.random.RandomState:
    """The generator of the public group assignment (never NumPy's global one)."""
    if isinstance(random_state, np.random.Generator | np.random.RandomState):
        return random_state
    seed = check_seed_sequence(random_state, allow_secure=False)
    return np.random.default_rng(seed)


def _server_stream(seed):
    """Stream 0 of ``seed`` (the server's), as in every other strategy."""
    return spawn_random_states(seed, 1)[0]


def _round_answers(messages):
    """A checked round's named users and 0/1 reports, client after client."""
    if isinstance(messages, Mapping):
        parts = [messages]
    else:
        parts = [m for m in messages if m is not None]
    users = [np.asarray(m["users"], dtype=np.intp) for m in parts]
    reports = [np.asarray(m["reports"], dtype=np.int64) for m in parts]
    return _concat(users, np.intp), _concat(reports, np.int64)
