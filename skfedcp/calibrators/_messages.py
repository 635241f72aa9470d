"""What a server receives: messages checked against the public plan.

A server step never trusts a client. Before any value is used, every message
is checked against what the round announced: the fields of the strategy's
message, one plain number where a number is due, the client's announced size,
arrays of the announced length, no NaN, no ``-inf``. Strategy-specific checks
(``+inf`` only where the plan allows it, values on the announced grid) follow
in each calibrator's ``_check_messages``.

Problems are collected per client as ``(index, field, reason)`` so that the
server can either raise :class:`~skfedcp.exceptions.InvalidMessageError`
naming the first offender or exclude the offenders with a warning.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._config import get_config
from .._typing import Messages
from ..exceptions import InvalidMessageError
from ..utils._validation import as_real_array

__all__ = [
    "Problem",
    "Received",
    "check_client_labels",
    "check_client_sizes",
    "client_share_problems",
    "collect_messages",
    "invalid_message_error",
    "sizes_from_messages",
    "stack_messages",
]

#: Field kinds a strategy can declare in ``_message_fields``:
#: ``"size"``: the client's row count, a non-negative integer equal to the
#: announced size; ``"value"``: one real number (no NaN, no -inf);
#: ``"scores"``: a 1-D array of ``n_j`` finite reals; ``"score_matrix"``: a
#: ``(n_j, n_classes)`` array of finite reals; ``"labels"``: a 1-D array of
#: ``n_j`` non-negative integers.
FIELD_KINDS = ("size", "value", "scores", "score_matrix", "labels")


class Problem(NamedTuple):
    """One invalid field of one client's message."""

    # The field shadows tuple.index (a method): the name is the public API.
    index: int  # type: ignore[assignment]
    field: str | None
    reason: str


class Received(NamedTuple):
    """Messages a server accepted, with the public plan they were checked against.

    ``stacked`` maps each field to one entry per client (in the order of
    ``clients`` and ``sizes``); ``excluded`` lists the labels of clients left
    out (``on_invalid="exclude"``). ``pooled`` (trusted in-process path
    only, else ``None``): the same per-row fields as single arrays, the
    clients' rows one after another, of which the per-client entries of
    ``stacked`` are views; aggregation may use them instead of concatenating.
    """

    stacked: dict
    clients: np.ndarray
    sizes: np.ndarray
    plan: dict
    excluded: np.ndarray
    pooled: dict | None = None


def check_client_sizes(
    n_per_client: ArrayLike | None, *, name: str = "n_per_client"
) -> NDArray[np.int64]:
    """Return announced client sizes as a 1-D int64 array, or raise.

    Parameters
    ----------
    n_per_client : array-like of int
        Calibration size of each client; at least one client.
    name : str, default="n_per_client"
        Name used in error messages.

    Returns
    -------
    sizes : ndarray of shape (n_clients,), dtype int64

    Examples
    --------
    >>> check_client_sizes([3, 0, 5])
    array([3, 0, 5])
    """
    if n_per_client is None or isinstance(n_per_client, str | bytes | Mapping):
        raise TypeError(
            f"{name} must be a 1-D array-like of non-negative integers (one size "
            f"per client); got {n_per_client!r}."
        )
    try:
        sizes = np.asarray(n_per_client)
    except (TypeError, ValueError) as exc:  # ragged nested sequences
        raise TypeError(
            f"{name} must be a 1-D array-like of non-negative integers; got "
            f"{n_per_client!r}."
        ) from exc
    if sizes.ndim == 0:
        sizes = sizes.reshape(1)
    if sizes.ndim != 1 or sizes.shape[0] == 0:
        raise ValueError(
            f"{name} must list the size of at least one client (1-D); got shape "
            f"{sizes.shape}."
        )
    if sizes.dtype.kind in "iu":
        pass
    elif sizes.dtype.kind == "f" and np.isfinite(sizes).all():
        if (sizes != np.round(sizes)).any():
            raise ValueError(f"{name} must hold integers; got {sizes.tolist()}.")
    elif sizes.dtype.kind == "O" and all(
        isinstance(v, Integral) and not isinstance(v, bool) for v in sizes
    ):
        pass
    else:
        raise TypeError(
            f"{name} must hold non-negative integers; got dtype {sizes.dtype} "
            f"({sizes.tolist()[:5]}...)."
        )
    _check_announced(sizes, name)
    return sizes.astype(np.int64, copy=False)  # an int64 array is kept as is


def _check_announced(sizes: NDArray[Any], name: str) -> None:
    """Sizes are non-negative and within the public plan policy.

    Checked on the announced values before any cast (a uint64 of 2**63 would
    turn negative in int64) and before any work that grows with them.
    """
    limits = get_config()
    if sizes.shape[0] > limits["max_clients"]:
        raise InvalidMessageError(
            f"{name} announces {sizes.shape[0]} clients, more than the public "
            f"max_clients={limits['max_clients']} of this server; a server that "
            "expects more raises it with skfedcp.config_context(max_clients=...).",
            field=name,
        )
    negative = sizes < 0 if sizes.dtype.kind != "u" else np.zeros(sizes.shape, bool)
    if negative.any():
        raise ValueError(
            f"{name} must hold non-negative integers; got {sizes.tolist()[:10]}."
        )
    above = np.asarray(sizes > limits["max_client_size"], dtype=bool)
    if above.any():
        j = int(np.flatnonzero(above)[0])
        raise InvalidMessageError(
            f"client {j} announced {name}={sizes[j]}, above the public "
            f"max_client_size={limits['max_client_size']} of this server; a "
            "server that expects larger clients raises it with "
            "skfedcp.config_context(max_client_size=...).",
            client=j,
            field=name,
        )
    # An exact sum: a raised max_client_size must not let int64 wrap it.
    total = sum(sizes.tolist())
    if total > limits["max_total_size"]:
        raise InvalidMessageError(
            f"{name} announces {total} rows in all, more than the public "
            f"max_total_size={limits['max_total_size']} of this server; a server "
            "that expects more raises it with "
            "skfedcp.config_context(max_total_size=...).",
            field=name,
        )


def sizes_from_messages(messages: Messages, *, field: str = "n") -> NDArray[np.int64]:
    """The sizes the messages carry, each checked before it is used, or raise.

    For a server that needs no plan before the round (LDP-L's
    ``server_step`` without ``n_per_client``): the sizes come from the
    messages themselves, so they are client input like any field. Each is
    checked on its own, before any other use: a plain non-negative integer
    (an integer-valued real is accepted, as in a message's size field; not a
    bool, a string, an array or ``None``) within the public
    ``max_client_size``. The first offender raises
    :class:`~skfedcp.exceptions.InvalidMessageError` naming the client (its
    index) and ``field``, as ``server_step`` does for any invalid message.

    Examples
    --------
    >>> sizes_from_messages([{"n": 3}, {"n": 5.0}])
    array([3, 5])
    >>> try:
    ...     sizes_from_messages([{"n": 3}, {"n": "abc"}])
    ... except InvalidMessageError as exc:
    ...     print(exc.client, exc.field)
    1 n
    """
    if isinstance(messages, Mapping):
        if field not in messages:
            raise InvalidMessageError(
                f"the stacked messages carry no field {field!r} (each client's size).",
                field=field,
            )
        column = messages[field]
        if isinstance(column, np.ndarray) and column.ndim == 1:
            column = column.tolist()
        if isinstance(column, str | bytes) or not isinstance(column, Sequence):
            raise InvalidMessageError(
                f"the stacked field {field!r} must hold one size per client; got "
                f"{_short_repr(column)}.",
                field=field,
            )
        messages = [{field: value} for value in column]
    elif isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TypeError(
            "messages must be a list of dicts (one per client) or a dict of "
            f"arrays; got {type(messages).__name__}."
        )
    limit = get_config()["max_client_size"]
    clients = np.arange(len(messages))
    sizes = np.zeros(len(messages), dtype=np.int64)
    for j, message in enumerate(messages):
        if not isinstance(message, Mapping):
            reason = f"must be a dict; got {type(message).__name__}"
            raise invalid_message_error(Problem(j, None, reason), clients)
        value = message.get(field, _MISSING)
        reason = _size_reason(value, limit)
        if reason is not None:
            raise invalid_message_error(Problem(j, field, reason), clients)
        sizes[j] = int(value)
    return check_client_sizes(sizes, name=field)


_MISSING = object()


def _size_reason(value: Any, limit: int) -> str | None:
    """Why ``value`` is not a client size in ``[0, limit]``, or None."""
    if value is _MISSING:
        return "is missing"
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not _is_number(value):
        return f"must be a non-negative integer; got {_short_repr(value)}"
    if not isinstance(value, Integral | np.integer):  # a real: never huge here
        as_float = float(value)
        if not (np.isfinite(as_float) and as_float.is_integer()):
            return f"must be a non-negative integer; got {as_float!r}"
    if value < 0:
        return f"must be a non-negative integer; got {int(value)}"
    if value > limit:
        return (
            f"announces {int(value)} rows, above the public max_client_size="
            f"{limit} of this server"
        )
    return None


def _short_repr(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def client_share_problems(
    sizes: NDArray[np.int64],
    max_client_share: float | None,
    *,
    unit: str = "rows",
    valid: NDArray[np.bool_] | None = None,
) -> list[Problem]:
    """The clients announcing more than ``max_client_share`` of the pooled total.

    ``max_client_share`` is a public cap on one client's influence where
    sizes weigh (central and dp-central pool rows, LDP-S users): a client is
    invalid, field ``"n"``, when its announced size ``n_j`` exceeds
    ``max_client_share * N``, ``N`` the total of the clients that are kept
    (``n_j`` included). Leaving a client out lowers ``N``, so the rule is
    applied until it holds: the largest client is left out while it is above
    the cap of what remains (a client above the cap stays above it when a
    larger one leaves). With the cap ``s``, ``c`` dishonest clients then
    hold at most ``c * s * N`` of the rows actually pooled, whatever they
    announce: one announcing a huge size cannot lift ``N`` for another and
    then be dropped itself. Clients marked False in ``valid`` (already
    invalid) are not counted. None: no cap.

    Examples
    --------
    >>> problem = client_share_problems(np.array([10, 10, 100]), 0.5)[0]
    >>> problem.index, problem.field, problem.reason[:43]
    (2, 'n', 'announces 100 rows, 0.833 of the pooled 120')
    >>> [p.index for p in client_share_problems(np.array([10, 10, 60, 100]), 0.5)]
    [2, 3]
    """
    if max_client_share is None or sizes.shape[0] == 0:
        return []
    live = np.arange(sizes.shape[0]) if valid is None else np.flatnonzero(valid)
    if live.size == 0:
        return []
    # Largest first; R_i = what remains when the i largest are left out. The
    # largest is left out while it is above the cap of what remains: the
    # first i with size_(i) <= s R_i stops it (exact integer sums).
    if float(sizes[live].max()) <= max_client_share * float(sizes[live].sum()):
        return []  # the common case, one pass (float: no int64 overflow)
    order = live[np.argsort(-sizes[live], kind="stable")]
    ordered = sizes[order]
    # R_i exactly: int64 while the total stays below 2^53 (exact as floats
    # too), Python integers beyond (announced sizes may be up to 2^62 each).
    exact = int(ordered[0]) * ordered.shape[0] < 2**53
    remaining = np.cumsum(ordered[::-1], dtype=np.int64 if exact else object)[::-1]
    within = ordered <= max_client_share * remaining
    stop = int(np.argmax(within)) if within.any() else ordered.shape[0]
    return [
        Problem(
            int(j),
            "n",
            f"announces {int(ordered[i])} {unit}, {ordered[i] / remaining[i]:.3g} of "
            f"the pooled {int(remaining[i])}, above "
            f"max_client_share={max_client_share:g} (a public cap on one "
            "client's influence)",
        )
        for i, j in sorted(enumerate(order[:stop].tolist()), key=lambda x: x[1])
    ]


def check_client_labels(
    clients: ArrayLike | None, n_clients: int, *, name: str = "clients"
) -> np.ndarray:
    """Return client labels (default ``0..m-1``): 1-D, one per client, unique.

    Examples
    --------
    >>> check_client_labels(None, 3)
    array([0, 1, 2])
    """
    if clients is None:
        return np.arange(n_clients)
    labels = np.asarray(clients)
    if labels.ndim != 1 or labels.shape[0] != n_clients:
        raise ValueError(
            f"{name} must hold one label per client ({n_clients}); got shape "
            f"{labels.shape}."
        )
    if labels.dtype.kind in "iu":
        # Integer labels: increasing (the usual 0..m-1 or sorted labels)
        # means unique in one pass; otherwise one sort.
        repeated = not np.all(labels[1:] > labels[:-1]) and (
            np.unique(labels).shape[0] != n_clients
        )
    else:
        repeated = len(set(labels.tolist())) != n_clients
    if repeated:
        raise ValueError(f"{name} must not repeat a label.")
    return labels


def invalid_message_error(
    problem: Problem, clients: Sequence[Hashable] | np.ndarray, n_problems: int = 1
) -> InvalidMessageError:
    """The :class:`InvalidMessageError` naming ``problem``'s client and field."""
    client = clients[problem.index] if problem.index is not None else None
    who = "the messages" if client is None else f"client {_label(client)}"
    what = "" if problem.field is None else f" field {problem.field!r}"
    more = f" ({n_problems - 1} other invalid field(s) too)" if n_problems > 1 else ""
    return InvalidMessageError(
        f"invalid message from {who}:{what} {problem.reason}{more}.",
        client=None if client is None else _plain(client),
        field=problem.field,
    )


def _label(client: Any) -> str:
    return repr(_plain(client))


def _plain(client: Any) -> Any:
    return client.item() if isinstance(client, np.generic) else client


def collect_messages(
    messages: Sequence[Mapping[str, Any]] | Mapping[str, ArrayLike],
    fields: Mapping[str, str] | None,
    sizes: NDArray[np.int64],
    *,
    trusted: bool = False,
) -> tuple[dict[str, np.ndarray], list[Problem]]:
    """Stack messages field by field and list what does not fit the plan.

    Parameters
    ----------
    messages : sequence of dict or dict of array-like
        One dict per client (in the order of ``sizes``), or the same already
        stacked field by field.
    fields : dict or None
        Field name -> kind (see ``FIELD_KINDS``) of the strategy's message;
        ``None`` for a strategy that declares none (messages are stacked and
        checked for NaN only).
    sizes : ndarray of int
        Announced client sizes.
    trusted : bool, default=False
        The messages come from the library's own in-process client steps on
        inputs already checked: skip the element-wise finiteness scans of
        per-row arrays (they were done once, on the scores).

    Returns
    -------
    stacked : dict of ndarray
        One entry per client for every field; invalid entries hold a
        placeholder (``0``, ``+inf`` or an empty array) and must not be used.
    problems : list of Problem
        The invalid fields, one per client at most.
    """
    n_clients = sizes.shape[0]
    if fields is None:
        return _collect_undeclared(messages, n_clients)
    if isinstance(messages, Mapping):
        columns = _columns_from_stacked(messages, fields, n_clients)
        present = np.ones(n_clients, dtype=bool)
        problems = []
    elif isinstance(messages, Sequence) and not isinstance(messages, str | bytes):
        if len(messages) != n_clients:
            raise InvalidMessageError(
                f"the server received {len(messages)} message(s) for "
                f"{n_clients} announced client(s) (n_per_client); send one "
                "message per client, in the order of n_per_client.",
                field=None,
            )
        columns, present, problems = _columns_from_list(messages, fields)
    else:
        raise TypeError(
            "messages must be a list of dicts (one per client) or a dict of "
            f"arrays; got {type(messages).__name__}."
        )
    stacked = {}
    for name, kind in fields.items():
        values, bad = _CHECKS[kind](columns[name], sizes, present, trusted)
        stacked[name] = values
        for index, reason in bad:
            problems.append(Problem(index, name, reason))
    return stacked, _first_per_client(problems)


def _collect_undeclared(messages, n_clients):
    """A strategy that declares no fields (e.g. a user's own): stack, no NaN."""
    try:
        stacked = stack_messages(messages)
    except (TypeError, ValueError) as exc:
        raise InvalidMessageError(f"invalid messages: {exc}") from exc
    problems = []
    for name, column in stacked.items():
        if column.shape[0] != n_clients:
            raise InvalidMessageError(
                f"field {name!r} holds {column.shape[0]} entries for {n_clients} "
                "announced client(s).",
                field=name,
            )
        if column.dtype.kind == "f":
            for j in np.flatnonzero(np.isnan(column)):
                problems.append(Problem(int(j), name, "must be a number, not nan"))
    return stacked, _first_per_client(problems)


def _first_per_client(problems: list[Problem]) -> list[Problem]:
    seen, kept = set(), []
    for problem in sorted(problems, key=lambda p: p.index):
        if problem.index not in seen:
            seen.add(problem.index)
            kept.append(problem)
    return kept


def _columns_from_stacked(messages, fields, n_clients):
    missing = sorted(set(fields) - set(messages))
    extra = sorted(set(messages) - set(fields) - {"client"})
    if missing or extra:
        raise InvalidMessageError(
            f"the stacked messages must carry exactly the fields {sorted(fields)}; "
            f"missing {missing}, unexpected {extra}.",
            field=(missing or extra)[0],
        )
    columns = {}
    for name in fields:
        value = messages[name]
        if not isinstance(value, np.ndarray) or value.dtype.kind == "O":
            value = _object_or_array(value)
        if value.ndim == 0 or value.shape[0] != n_clients:
            raise InvalidMessageError(
                f"the stacked field {name!r} must hold one entry per announced "
                f"client ({n_clients}); got shape {value.shape}.",
                field=name,
            )
        columns[name] = value
    return columns


def _object_or_array(value):
    if isinstance(value, list | tuple):
        if all(np.ndim(v) == 0 for v in value):
            return np.asarray(value)
        out = np.empty(len(value), dtype=object)
        out[:] = list(value)
        return out
    return np.asarray(value)


def _columns_from_list(messages, fields):
    n_clients = len(messages)
    present = np.ones(n_clients, dtype=bool)
    problems = []
    columns = {name: np.empty(n_clients, dtype=object) for name in fields}
    for j, message in enumerate(messages):
        if not isinstance(message, Mapping):
            problems.append(
                Problem(j, None, f"must be a dict; got {type(message).__name__}")
            )
            present[j] = False
            continue
        missing = [name for name in fields if name not in message]
        extra = sorted(str(k) for k in message if k not in fields)
        if missing:
            problems.append(Problem(j, missing[0], "is missing"))
            present[j] = False
            continue
        if extra:
            problems.append(
                Problem(
                    j,
                    extra[0],
                    f"is not a field of this strategy's message "
                    f"(expected exactly {sorted(fields)})",
                )
            )
            present[j] = False
            continue
        for name in fields:
            columns[name][j] = message[name]
    return columns, present, problems


def _is_number(value: object) -> bool:
    return isinstance(value, Real | np.number) and not isinstance(
        value, bool | np.bool_ | complex | np.complexfloating
    )


def _scalar_column(column, present, dtype):
    """Entries that are plain real scalars, as ``dtype``; the rest flagged."""
    if column.dtype.kind in "iuf" and column.ndim == 1:
        return column.astype(dtype, copy=False), []
    if column.ndim != 1:
        return np.zeros(column.shape[0], dtype=dtype), [
            (j, f"must be one number; got an array of shape {column.shape[1:]}")
            for j in range(column.shape[0])
        ]
    out = np.zeros(column.shape[0], dtype=dtype)
    bad = []
    for j, value in enumerate(column):
        if not present[j]:
            continue
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        if not _is_number(value):
            shape = getattr(value, "shape", None)
            got = f"an array of shape {shape}" if shape else repr(value)
            bad.append((j, f"must be one real number; got {got}"))
            continue
        if dtype is np.int64 and not float(value).is_integer():
            bad.append((j, f"must be an integer; got {float(value)!r}"))
            continue
        out[j] = value
    return out, bad


def _check_size(column, sizes, present, trusted):
    if column.dtype.kind in "iu" and column.ndim == 1 and present.all():
        # Integer sizes (the usual case): valid iff each equals the
        # announced size; one comparison decides, the general path below
        # only runs to name the offenders.
        if not (column != sizes).any():
            return column.astype(np.int64), []
    values, bad = _scalar_column(column, present, np.float64)
    flagged = {j for j, _ in bad}
    for j in np.flatnonzero(present & (values != sizes)):
        if j in flagged:
            continue
        value = values[j]
        if not np.isfinite(value) or value != np.round(value) or value < 0:
            bad.append(
                (int(j), f"must be a non-negative integer; got {float(value)!r}")
            )
        else:
            bad.append(
                (
                    int(j),
                    f"is {int(value)} but the client announced "
                    f"{int(sizes[j])} rows (n_per_client)",
                )
            )
    return np.where(np.isfinite(values), values, 0).astype(np.int64), bad


def _check_value(column, sizes, present, trusted):
    if column.dtype == np.float64 and column.ndim == 1 and present.all():
        # ``> -inf`` is False exactly for NaN and -inf: one pass decides.
        if (column > -np.inf).all():
            return column.copy(), []
    values, bad = _scalar_column(column, present, np.float64)
    flagged = {j for j, _ in bad}
    for j in np.flatnonzero(present & (np.isnan(values) | np.isneginf(values))):
        if j not in flagged:
            bad.append((int(j), f"must be a number, not {float(values[j])!r}"))
    values = values.copy()
    values[[j for j, _ in bad]] = np.inf  # placeholders, never used
    return values, bad


def _check_rows(column, sizes, present, trusted, *, ndim):
    if trusted and (column.dtype == object or column.ndim == ndim + 1):
        # The library's own client steps on checked scores: arrays of the
        # right length already (one partition of the rows; equal-size
        # clients may come as one (n_clients, size, ...) array).
        return column, []
    out = np.empty(column.shape[0], dtype=object)
    bad = []
    for j in range(column.shape[0]):
        value = column[j] if present[j] else None
        out[j] = np.empty((0,) * ndim)
        if value is None or not present[j]:
            continue
        try:
            arr = as_real_array(value)
        except TypeError:
            kind = (
                "a masked array"
                if isinstance(value, np.ma.MaskedArray)
                else f"dtype {np.asarray(value).dtype}"
            )
            bad.append((j, f"must be an array of real numbers; got {kind}"))
            continue
        if arr.ndim != ndim or arr.shape[0] != sizes[j]:
            want = f"({sizes[j]},)" if ndim == 1 else f"({sizes[j]}, n_classes)"
            bad.append((j, f"must have shape {want}; got {arr.shape}"))
            continue
        if not trusted and not np.isfinite(arr).all():
            bad.append((j, "must hold finite numbers (no NaN or inf)"))
            continue
        out[j] = arr
    return out, bad


def _check_scores(column, sizes, present, trusted):
    return _check_rows(column, sizes, present, trusted, ndim=1)


def _check_score_matrix(column, sizes, present, trusted):
    return _check_rows(column, sizes, present, trusted, ndim=2)


def _check_labels(column, sizes, present, trusted):
    if trusted and (column.dtype == object or column.ndim == 2):
        # The library's own client steps: int64 label arrays of the right
        # length already (drawn by the mechanism on checked labels).
        return column, []
    out = np.empty(column.shape[0], dtype=object)
    bad = []
    for j in range(column.shape[0]):
        out[j] = np.empty(0, dtype=np.int64)
        if not present[j]:
            continue
        if isinstance(column[j], np.ma.MaskedArray):
            bad.append((j, "must not be a masked array (its mask would be ignored)"))
            continue
        arr = np.asarray(column[j])
        if arr.ndim != 1 or arr.shape[0] != sizes[j]:
            bad.append((j, f"must have shape ({sizes[j]},); got {arr.shape}"))
            continue
        # Compared in the labels' own dtype before the int64 cast: a uint64
        # label of 2**64 - 1 must not wrap to -1 (or to any class).
        if arr.dtype.kind not in "iu" or (arr.size and arr.min() < 0):
            bad.append((j, "must hold non-negative integers"))
            continue
        if arr.size and arr.max() > _INT64_MAX:
            bad.append(
                (j, f"holds a label of {int(arr.max())}, beyond any class index")
            )
            continue
        out[j] = arr.astype(np.int64)
    return out, bad


_INT64_MAX = np.iinfo(np.int64).max

_CHECKS = {
    "size": _check_size,
    "value": _check_value,
    "scores": _check_scores,
    "score_matrix": _check_score_matrix,
    "labels": _check_labels,
}


def stack_messages(messages: Messages) -> dict[str, NDArray[Any]]:
    """Turn client messages into one dict of arrays (one entry per client).

    Parameters
    ----------
    messages : sequence of dict or dict of array-like
        Either what the clients sent, one dict per client, or the same already
        stacked column by column.

    Returns
    -------
    stacked : dict of ndarray
        Each key maps to an array with one entry per client.

    Examples
    --------
    >>> stack_messages([{"n": 3, "quantile": 1.5}, {"n": 4, "quantile": 2.0}])
    {'n': array([3, 4]), 'quantile': array([1.5, 2. ])}
    """
    if isinstance(messages, Mapping):
        stacked = {key: np.asarray(value) for key, value in messages.items()}
    elif isinstance(messages, Sequence) and not isinstance(messages, str):
        if len(messages) == 0:
            raise ValueError("messages is empty: the server received no message.")
        if not all(isinstance(msg, Mapping) for msg in messages):
            raise TypeError("messages must be a sequence of dicts, one per client.")
        keys = messages[0].keys()
        if any(msg.keys() != keys for msg in messages):
            raise ValueError("messages do not all carry the same fields.")
        stacked = {key: _stack_field([msg[key] for msg in messages]) for key in keys}
    else:
        raise TypeError(
            "messages must be a list of dicts (one per client) or a dict of arrays; "
            f"got {type(messages).__name__}."
        )
    lengths = {value.shape[0] if value.ndim else 1 for value in stacked.values()}
    if len(lengths) != 1:
        raise ValueError("every message field must have one entry per client.")
    return stacked


def _stack_field(values):
    if all(np.ndim(v) == 0 for v in values):
        return np.asarray(values)
    out = np.empty(len(values), dtype=object)  # e.g. raw scores of varying length
    out[:] = [np.asarray(v) for v in values]
    return out
