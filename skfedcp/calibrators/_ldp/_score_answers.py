"""LDP-S's answer checks: each round's answers against the queries the server posed."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...exceptions import InvalidMessageError
from ._score_protocol import RoundQueries, _concat

#: One round's answers: one message (or None) per client, or all stacked.
RoundAnswers = Sequence[Mapping[str, Any] | None] | Mapping[str, Any]


def _check_round(
    queries: Sequence[Mapping[str, Any]], messages: RoundAnswers
) -> NDArray[Any]:
    """One round's answers, a list (one per client) or stacked: the 0/1 reports.

    Each client's answer is checked against its query (see
    :func:`_check_answer` and :func:`_check_stacked_answers`); the reports
    come client after client.
    """
    if isinstance(messages, Mapping):
        return _check_stacked_answers(queries, messages)
    if not isinstance(messages, list | tuple) or len(messages) != len(queries):
        raise InvalidMessageError(
            f"expected a list with one message (or None) per client "
            f"({len(queries)}); got {_describe(messages)}."
        )
    reports = [
        _check_answer(j, query, message)
        for j, (query, message) in enumerate(zip(queries, messages, strict=True))
    ]
    return _concat([r for r in reports if r is not None], np.float64)


def _name_client(
    exc: InvalidMessageError, clients: NDArray[Any]
) -> InvalidMessageError:
    """``exc``, about the client of index ``j``, naming it by its label instead."""
    j = exc.client
    if not isinstance(j, int):  # not an index set by these checks: as it is
        return exc
    return InvalidMessageError(
        str(exc).replace(f"client {j}", f"client {clients[j]!r}", 1),
        client=clients[j],
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
    queries: Sequence[Mapping[str, Any]], message: Mapping[str, Any]
) -> NDArray[np.int64]:
    """One round's answers of every client, stacked: the 0/1 reports, checked.

    The same rules as :func:`_check_answer` for each client, in one pass;
    an error names the first offending client.
    """
    if isinstance(queries, RoundQueries):
        asked, offsets, round_ = queries.users, queries.offsets, queries.round
    else:  # a state built by hand: stack its per-client queries
        parts = [np.asarray(q["users"], dtype=np.int64) for q in queries]
        asked = _concat(parts, np.int64)
        offsets = np.concatenate(([0], np.cumsum([p.size for p in parts])))
        round_ = int(queries[0]["round"])
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
    users = np.asarray(message["users"])
    if users.shape != asked.shape:
        raise _stacked_error(
            "users",
            f"must list the {asked.size} users asked in round {round_}; got "
            f"shape {users.shape}",
        )
    j_users = _first_wrong_client(users != asked, offsets)
    if j_users is not None:
        raise _client_error(
            j_users, "users", f"does not list the users asked in round {round_}"
        )
    bits = np.asarray(message["reports"])
    if bits.shape != asked.shape or bits.dtype.kind not in "iub":
        raise _stacked_error(
            "reports", f"must hold one 0/1 bit per asked user ({asked.size})"
        )
    j_bits = _first_wrong_client((bits != 0) & (bits != 1), offsets)
    if j_bits is not None:
        raise _client_error(
            j_bits, "reports", f"must hold one 0/1 bit per asked user ({want[j_bits]})"
        )
    return bits.astype(np.int64)


def _check_answer(
    j: int, query: Mapping[str, Any], message: Mapping[str, Any] | None
) -> NDArray[np.int64] | None:
    """One client's answer to one round's query: its 0/1 reports, checked."""
    asked = np.asarray(query["users"])
    if message is None:
        if asked.size:
            raise InvalidMessageError(
                f"invalid message from client {j}: {asked.size} user(s) were asked "
                f"in round {query['round']} but it sent no message.",
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
    round_ = message["round"]
    if not _is_integer(round_):
        raise _client_error(j, "round", f"must be an integer; got {round_!r}")
    if int(round_) != query["round"]:
        raise _client_error(
            j, "round", f"is {round_} but the query was for round {query['round']}"
        )
    users = np.asarray(message["users"])
    if users.shape != asked.shape or not np.array_equal(users, asked):
        raise _client_error(
            j, "users", f"does not list the users asked in round {query['round']}"
        )
    bits = np.asarray(message["reports"])
    if (
        bits.shape != asked.shape
        or bits.dtype.kind not in "iub"
        or not np.isin(bits, (0, 1)).all()
    ):
        raise _client_error(
            j, "reports", f"must hold one 0/1 bit per asked user ({asked.size})"
        )
    return bits.astype(np.int64)
