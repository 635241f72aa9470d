"""LDP-S's answer checks: each round's answers against the queries the server posed."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...exceptions import InvalidMessageError
from ._score_groups import public_groups
from ._score_protocol import RoundQueries, _concat, _Transcript

#: One round's answers: one message (or None) per client, or all stacked.
RoundAnswers = Sequence[Mapping[str, Any] | None] | Mapping[str, Any]


def _check_round(
    queries: RoundQueries, messages: RoundAnswers
) -> tuple[NDArray[np.intp], NDArray[np.int64]]:
    """One round's answers, a list (one per client) or stacked, checked.

    Returns the users each client named (local rows) and their 0/1 reports,
    client after client. Each client must answer for exactly as many users
    as it has in the round's group, distinct and among its announced users
    (see :func:`_check_answer` and :func:`_check_stacked_answers`): work in
    proportion to the answers, never to the announced sizes. Which of its
    users a client names is its own bookkeeping (the server could not tell
    a user from another); :meth:`fit_from_messages` checks it against the
    public assignment afterwards.
    """
    if isinstance(messages, Mapping):
        return _check_stacked_answers(queries, messages)
    if not isinstance(messages, list | tuple) or len(messages) != len(queries):
        raise InvalidMessageError(
            f"expected a list with one message (or None) per client "
            f"({len(queries)}); got {_describe(messages)}."
        )
    counts = queries.counts()
    checked = (
        _check_answer(j, queries.round, int(counts[j]), int(queries.sizes[j]), m)
        for j, m in enumerate(messages)
    )
    answers = [a for a in checked if a is not None]
    return (
        _concat([a[0] for a in answers], np.intp),
        _concat([a[1] for a in answers], np.int64),
    )


def _name_client(
    exc: InvalidMessageError, clients: NDArray[Any]
) -> InvalidMessageError:
    """``exc``, about the client of index ``j``, naming it by its label instead."""
    j = exc.client
    if not isinstance(j, int):  # not an index set by these checks: as it is
        return exc
    label = clients[j]
    label = label.item() if isinstance(label, np.generic) else label
    return InvalidMessageError(
        str(exc).replace(f"client {j}", f"client {label!r}", 1),
        client=label,
        field=exc.field,
    )


def _check_users(query: Mapping[str, Any], n_users: int) -> NDArray[np.intp]:
    try:
        users = np.asarray(query["users"])
        query["threshold"], query["round"]
    except (KeyError, TypeError) as exc:
        raise ValueError(
            "query must be a dict with 'round', 'threshold' and 'users'."
        ) from exc
    if users.ndim != 1 or (users.size and users.dtype.kind not in "iu"):
        raise ValueError("query['users'] must be a 1-D array of row indices.")
    users = users.astype(np.intp)
    if users.size and (users.min() < 0 or users.max() >= n_users):
        raise ValueError(f"query['users'] must lie in 0..{n_users - 1}.")
    if np.unique(users).size != users.size:
        raise ValueError("query['users'] asks a user twice in one round.")
    return users


def _describe(value: object) -> str:
    if isinstance(value, list | tuple):
        return f"{len(value)} message(s)"
    return type(value).__name__


_STACKED_FIELDS = ("round", "counts", "users", "reports")


def _is_integer(value: object) -> bool:
    """An integer (Python or NumPy), not a bool."""
    return isinstance(value, Integral | np.integer) and not isinstance(value, bool)


def _client_error(j: Hashable, field: str, problem: str) -> InvalidMessageError:
    """The error for client ``j``'s bad ``field``: ``problem`` says what is wrong."""
    return InvalidMessageError(
        f"invalid message from client {j}: field {field!r} {problem}.",
        client=j,
        field=field,
    )


def _stacked_error(field: str, problem: str) -> InvalidMessageError:
    """The error for a bad ``field`` of the stacked answers (no client to name)."""
    return InvalidMessageError(
        f"invalid stacked answers: field {field!r} {problem}.", field=field
    )


def _first_wrong_client(wrong: NDArray[np.bool_], offsets: NDArray[Any]) -> int | None:
    """The client whose stacked entries hold the first ``True`` of ``wrong``."""
    positions = np.flatnonzero(wrong)
    if not positions.size:
        return None
    return int(np.searchsorted(offsets, positions[0], side="right") - 1)


def _check_stacked_answers(
    queries: RoundQueries, message: Mapping[str, Any]
) -> tuple[NDArray[np.intp], NDArray[np.int64]]:
    """One round's answers of every client, stacked: users and 0/1 reports, checked.

    The same rules as :func:`_check_answer` for each client, in one pass;
    an error names the first offending client.
    """
    offsets, round_ = queries.offsets, queries.round
    missing = [f for f in _STACKED_FIELDS if f not in message]
    extra = sorted(str(f) for f in message if f not in _STACKED_FIELDS)
    if missing or extra:
        field = (missing or extra)[0]
        raise InvalidMessageError(
            f"invalid stacked answers: must carry exactly the fields "
            f"{list(_STACKED_FIELDS)}; missing {missing}, unexpected {extra}.",
            field=field,
        )
    got_round = message["round"]
    if not _is_integer(got_round) or int(got_round) != round_:
        raise _stacked_error(
            "round", f"is {got_round!r} but the query was for round {round_}"
        )
    counts = np.asarray(message["counts"])
    want = np.diff(offsets)
    if counts.shape != want.shape or counts.dtype.kind not in "iu":
        raise _stacked_error(
            "counts",
            f"must hold one integer per client ({want.size}); got shape {counts.shape}",
        )
    wrong = np.flatnonzero(counts != want)
    if wrong.size:
        j = int(wrong[0])
        raise _client_error(
            j,
            "users",
            f"does not list the users asked in round {round_} ({want[j]} asked, "
            f"{counts[j]} answered)",
        )
    total = int(offsets[-1])
    users = np.asarray(message["users"])
    if users.shape != (total,) or (total and users.dtype.kind not in "iu"):
        raise _stacked_error(
            "users",
            f"must list the {total} users asked in round {round_}; got "
            f"shape {users.shape}",
        )
    owner = queries.owner()
    bad = _bad_users(users, queries.sizes[owner], queries.starts[owner])
    j_users = _first_wrong_client(bad, offsets)
    if j_users is not None:
        raise _client_error(
            j_users, "users", f"does not list the users asked in round {round_}"
        )
    bits = np.asarray(message["reports"])
    if bits.shape != (total,) or bits.dtype.kind not in "iub":
        raise _stacked_error(
            "reports", f"must hold one 0/1 bit per asked user ({total})"
        )
    j_bits = _first_wrong_client((bits != 0) & (bits != 1), offsets)
    if j_bits is not None:
        raise _client_error(
            j_bits, "reports", f"must hold one 0/1 bit per asked user ({want[j_bits]})"
        )
    return users.astype(np.intp), bits.astype(np.int64)


def _bad_users(
    users: NDArray[Any], sizes: NDArray[np.int64], starts: NDArray[np.int64] | int
) -> NDArray[np.bool_]:
    """Local rows outside their client's ``sizes`` users, or named twice in it.

    ``starts`` numbers the clients' users apart (entry by entry), so that a
    row named twice is the same global row; ``O(k log k)`` for ``k`` rows.
    """
    bad = (users < 0) | (users >= sizes)
    rows = np.where(bad, -1, starts + np.where(bad, 0, users))
    order = np.argsort(rows, kind="stable")
    twice = np.zeros(rows.shape, dtype=bool)
    twice[order[1:]] = (np.diff(rows[order]) == 0) & (rows[order[1:]] >= 0)
    return bad | twice


def _check_answer(
    j: int, round_: int, count: int, size: int, message: Mapping[str, Any] | None
) -> tuple[NDArray[np.intp], NDArray[np.int64]] | None:
    """One client's answer to one round's query: its users and 0/1 reports."""
    if message is None:
        if count:
            raise InvalidMessageError(
                f"invalid message from client {j}: {count} user(s) were asked "
                f"in round {round_} but it sent no message.",
                client=j,
            )
        return None
    if not isinstance(message, dict):
        raise InvalidMessageError(
            f"invalid message from client {j}: must be a dict with 'round', "
            f"'users' and 'reports'; got {type(message).__name__}.",
            client=j,
        )
    for field in ("round", "users", "reports"):
        if field not in message:
            raise _client_error(j, field, "is missing")
    got_round = message["round"]
    if not _is_integer(got_round):
        raise _client_error(j, "round", f"must be an integer; got {got_round!r}")
    if int(got_round) != round_:
        raise _client_error(
            j, "round", f"is {got_round} but the query was for round {round_}"
        )
    users = np.asarray(message["users"])
    if (
        users.shape != (count,)
        or (count and users.dtype.kind not in "iu")
        or _bad_users(users, np.full(count, size), 0).any()
    ):
        raise _client_error(
            j, "users", f"does not list the {count} users asked in round {round_}"
        )
    bits = np.asarray(message["reports"])
    if (
        bits.shape != (count,)
        or bits.dtype.kind not in "iub"
        or not np.isin(bits, (0, 1)).all()
    ):
        raise _client_error(
            j, "reports", f"must hold one 0/1 bit per asked user ({count})"
        )
    return users.astype(np.intp), bits.astype(np.int64)


def _check_public_users(
    state: Mapping[str, Any], transcript: _Transcript, clients: NDArray[Any]
) -> None:
    """Every answer came from a user of the asked group (the public assignment).

    The replay's check of the users each client named, against the groups
    every client derives from the public key (a client could not name
    another's users, and naming its own is its bookkeeping, which the live
    rounds leave to it). ``O(N + m)``, done once all rounds are in: at
    most ``T`` times the answers received, never a cost of announcements
    alone.
    """
    rounds, owner, users = transcript.entries()
    if not rounds.size:
        return
    sizes = state["n_per_client"]
    groups = public_groups(state["assignment_key"], state["group_counts"])
    starts = np.cumsum(sizes) - sizes
    wrong = np.flatnonzero(groups[starts[owner] + users] != rounds - 1)
    if wrong.size:
        i = int(wrong[0])
        j = int(owner[i])
        raise InvalidMessageError(
            f"invalid message from client {clients[j]!r}: field 'users' does not "
            f"list the users asked in round {rounds[i]} (user {users[i]} is not in "
            "that group of the public assignment; was the random_state the one "
            "given to server_init?).",
            client=clients[j],
            field="users",
        )
