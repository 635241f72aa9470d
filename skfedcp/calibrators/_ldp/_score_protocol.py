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


def _pose_query(state: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``state`` with the next round's per-client queries."""
    round_ = state["round"] + 1
    query = _axis_score(state, (state["lo"] + state["hi"]) / 2.0)
    members = np.sort(state["groups"][round_ - 1])
    sizes = state["n_per_client"]
    ends = np.cumsum(sizes)
    starts = ends - sizes
    # Users are numbered client by client; members are sorted, so client j's
    # are members[offsets[j]:offsets[j + 1]]. The client of every user is
    # mapped once per protocol (server_init), then read for the asked users.
    owner = state["_user_owner"][members]
    counts = np.bincount(owner, minlength=sizes.shape[0])
    offsets = np.concatenate(([0], np.cumsum(counts)))
    queries = RoundQueries(
        round_, query, members - starts[owner], offsets, members=members, owner=owner
    )
    return {**state, "queries": queries}


class RoundQueries(Sequence[dict[str, Any]]):
    """One round's queries, one dict per client, built when accessed.

    ``queries[j]`` is ``{"round": r, "threshold": q_r, "users": local row
    indices}`` for client ``j``. The same queries are also held stacked:
    ``users`` (local indices, client after client) and ``offsets`` (client
    ``j``'s users are ``users[offsets[j]:offsets[j + 1]]``), which a
    vectorised client side answers with one stacked message (see
    :meth:`LDPScoreCalibrator.server_update`); ``members`` (the asked users,
    numbered client by client) and ``owner`` (the client of each) too.
    """

    def __init__(
        self,
        round_: int,
        threshold: float,
        users: NDArray[np.intp],
        offsets: NDArray[np.intp],
        *,
        members: NDArray[np.intp],
        owner: NDArray[np.intp],
    ) -> None:
        self.round = int(round_)
        self.threshold = threshold
        self.users = users
        self.offsets = offsets
        self.members = members
        self.owner = owner

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    @overload
    def __getitem__(self, j: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, j: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, j: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(j, slice):
            return [self[i] for i in range(len(self))[j]]
        n = len(self)
        j = operator.index(j)
        if j < 0:
            j += n
        if not 0 <= j < n:
            raise IndexError("client index out of range")
        return {
            "round": self.round,
            "threshold": self.threshold,
            "users": self.users[self.offsets[j] : self.offsets[j + 1]],
        }

    def counts(self) -> NDArray[np.intp]:
        """Number of asked users of each client."""
        return np.diff(self.offsets)


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

    Fed round by round with the round's queries and its checked answers,
    by :meth:`LDPScoreCalibrator.fit` as the rounds run and by
    :meth:`LDPScoreCalibrator.fit_from_messages` as it replays them.
    """

    def __init__(self, clients):
        self.clients = clients
        self._owners, self._answers = [], []
        self._log: dict[str, list[Any]] = {"round": [], "client": [], "user": []}

    def add(self, queries, round_messages):
        owner = queries.owner
        self._owners.append(owner)
        self._answers.append(_round_reports(round_messages))
        self._log["round"].append(np.full(owner.size, queries.round))
        self._log["client"].append(self.clients[owner])
        self._log["user"].append(queries.users.astype(np.intp, copy=False))

    def log(self):
        """The ``(round, client, user)`` of every answer, in answer order."""
        return {
            "round": _concat(self._log["round"], np.intp),
            "client": _concat(self._log["client"], self.clients.dtype),
            "user": _concat(self._log["user"], np.intp),
        }

    def reports_per_client(self, n_clients):
        """Each client's bits in round order (a stable grouping by client)."""
        owner = _concat(self._owners, np.intp)
        order = _group_order(owner, n_clients)  # a stable counting sort
        pooled = _concat(self._answers, np.int64)[order]
        n_reports = np.bincount(owner, minlength=n_clients)
        return n_reports, _per_client_rows(pooled, n_reports)


class _SimulatedUsers:
    """Every client's users in one piece, answering as :meth:`client_respond` would.

    Each round, the asked users of every client compare their score with the
    query and report the bit through binary randomized response, all from
    one noise stream, in one stacked message (see
    :meth:`LDPScoreCalibrator.server_update`). The users remember that they
    answered: a user asked twice raises ``RuntimeError``.
    """

    def __init__(self, scores, epsilon, random_state):
        self._scores = scores  # client after client, as the users are numbered
        self._epsilon = epsilon
        self._random_state = random_state
        self._answered = np.zeros(scores.shape[0], dtype=np.intp)

    def answer(self, queries):
        """The stacked answers of every asked user to one round's queries."""
        counts = queries.counts()
        rows = queries.members  # the asked users' rows in the scores
        np.add.at(self._answered, rows, 1)  # repeats within the round count too
        if self._answered[rows].max(initial=0) > 1:
            raise RuntimeError(
                "LDP-S simulation: a user was queried twice; each user "
                "answers at most once."
            )
        bits = (self._scores[rows] < float(queries.threshold)).astype(np.int64)
        return {
            "round": queries.round,
            "counts": counts,
            "users": queries.users,
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


def _round_reports(messages):
    """A checked round's 0/1 reports, client after client."""
    if isinstance(messages, Mapping):
        return np.asarray(messages["reports"]).astype(np.int64)
    parts = [
        np.asarray(m["reports"], dtype=np.int64) for m in messages if m is not None
    ]
    return _concat(parts, np.int64)
