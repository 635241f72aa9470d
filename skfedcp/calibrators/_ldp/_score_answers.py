"""LDP-S's answer checks: each round's answers against the queries the server posed."""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Integral

import numpy as np

from ...exceptions import InvalidMessageError
from ._score_protocol import RoundQueries, _concat


def _check_round(queries, messages):
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
    return np.concatenate([r for r in reports if r is not None] or [[]])


def _name_client(exc, clients):
    """``exc`` (about client index ``j``) naming the client by its label instead."""
    return InvalidMessageError(
        str(exc).replace(f"client {exc.client}", f"client {clients[exc.client]!r}", 1),
        client=clients[exc.client],
        field=exc.field,
    )


def _check_users(query, n_users):
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


def _first_client(offsets, position):
    """The client whose stacked entries hold ``position``."""
    return int(np.searchsorted(offsets, position, side="right") - 1)


def _check_stacked_answers(queries, message):
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
    if (
        not isinstance(got_round, Integral | np.integer)
        or isinstance(got_round, bool)
        or int(got_round) != round_
    ):
        raise InvalidMessageError(
            f"invalid stacked answers: field 'round' is {got_round!r} but the "
            f"query was for round {round_}.",
            field="round",
        )
    counts = np.asarray(message["counts"])
    want = np.diff(offsets)
    if counts.shape != want.shape or counts.dtype.kind not in "iu":
        raise InvalidMessageError(
            f"invalid stacked answers: field 'counts' must hold one integer per "
            f"client ({want.size}); got shape {counts.shape}.",
            field="counts",
        )
    wrong = np.flatnonzero(counts != want)
    if wrong.size:
        j = int(wrong[0])
        raise InvalidMessageError(
            f"invalid message from client {j}: field 'users' does not list the "
            f"users asked in round {round_} ({want[j]} asked, {counts[j]} "
            "answered).",
            client=j,
            field="users",
        )
    users = np.asarray(message["users"])
    if users.shape != asked.shape:
        raise InvalidMessageError(
            f"invalid stacked answers: field 'users' must list the "
            f"{asked.size} users asked in round {round_}; got shape "
            f"{users.shape}.",
            field="users",
        )
    wrong = np.flatnonzero(users != asked)
    if wrong.size:
        j = _first_client(offsets, wrong[0])
        raise InvalidMessageError(
            f"invalid message from client {j}: field 'users' does not list the "
            f"users asked in round {round_}.",
            client=j,
            field="users",
        )
    bits = np.asarray(message["reports"])
    if bits.shape != asked.shape or bits.dtype.kind not in "iub":
        raise InvalidMessageError(
            f"invalid stacked answers: field 'reports' must hold one 0/1 bit "
            f"per asked user ({asked.size}).",
            field="reports",
        )
    wrong = np.flatnonzero((bits != 0) & (bits != 1))
    if wrong.size:
        j = _first_client(offsets, wrong[0])
        raise InvalidMessageError(
            f"invalid message from client {j}: field 'reports' must hold one 0/1 "
            f"bit per asked user ({want[j]}).",
            client=j,
            field="reports",
        )
    return bits.astype(np.int64)


def _check_answer(j, query, message):
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
            raise InvalidMessageError(
                f"invalid message from client {j}: field {field!r} is missing.",
                client=j,
                field=field,
            )
    round_ = message["round"]
    if not isinstance(round_, Integral | np.integer) or isinstance(round_, bool):
        raise InvalidMessageError(
            f"invalid message from client {j}: field 'round' must be an integer; "
            f"got {round_!r}.",
            client=j,
            field="round",
        )
    if int(round_) != query["round"]:
        raise InvalidMessageError(
            f"invalid message from client {j}: field 'round' is {round_} but the "
            f"query was for round {query['round']}.",
            client=j,
            field="round",
        )
    users = np.asarray(message["users"])
    if users.shape != asked.shape or not np.array_equal(users, asked):
        raise InvalidMessageError(
            f"invalid message from client {j}: field 'users' does not list the "
            f"users asked in round {query['round']}.",
            client=j,
            field="users",
        )
    bits = np.asarray(message["reports"])
    if (
        bits.shape != asked.shape
        or bits.dtype.kind not in "iub"
        or not np.isin(bits, (0, 1)).all()
    ):
        raise InvalidMessageError(
            f"invalid message from client {j}: field 'reports' must hold one 0/1 "
            f"bit per asked user ({asked.size}).",
            client=j,
            field="reports",
        )
    return bits.astype(np.int64)
