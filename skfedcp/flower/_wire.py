"""Flower wire format: plain dicts to RecordDicts and back, and the Grid exchange."""

from __future__ import annotations

import time
from collections.abc import MutableMapping
from typing import Any

import numpy as np

from ._session import NodeFailure

__all__ = ["MESSAGE_TYPE", "POLL_INTERVAL"]

#: Flower message type of every skfedcp query (``@app.query("skfedcp")``).
MESSAGE_TYPE = "query.skfedcp"

_SCALARS = "skfedcp"
_ARRAYS = "skfedcp.arrays"
_STATE = "skfedcp.state."


def _require_flwr():
    try:
        import flwr  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            "skfedcp.flower needs Flower; install it with "
            'pip install "skfedcp[flower]".'
        ) from exc


# --------------------------------------------------------------------------
# Plain dict <-> Flower RecordDict


def _to_record_dict(payload):
    from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

    scalars, arrays = {}, {}
    for key, value in payload.items():
        if isinstance(value, np.ndarray):
            arrays[key] = Array(np.ascontiguousarray(value))
        elif isinstance(value, np.generic):
            scalars[key] = value.item()
        elif isinstance(value, bool | int | float | str | bytes | list):
            scalars[key] = value
        else:
            raise TypeError(f"cannot send {key}={type(value).__name__}.")
    records: dict[str, Any] = {_SCALARS: ConfigRecord(scalars)}
    if arrays:
        records[_ARRAYS] = ArrayRecord(arrays)
    return RecordDict(records)


def _from_record_dict(content):
    payload = dict(content.config_records.get(_SCALARS, {}))
    for key, array in content.array_records.get(_ARRAYS, {}).items():
        payload[key] = array.numpy()
    return payload


def _wire_bytes(content):
    """Bytes of ``content`` as Flower serializes it (all objects of its tree)."""
    try:
        from flwr.supercore.inflatable.inflatable_object import (
            get_all_nested_objects,
        )
    except ImportError:  # pragma: no cover - other Flower versions
        return sum(record.count_bytes() for record in content.values())
    return sum(len(obj.deflate()) for obj in get_all_nested_objects(content).values())


class _ContextState(MutableMapping):
    """Node-local persistent state in Flower's ``context.state`` (scalars only)."""

    def __init__(self, state):
        self._state = state

    def __getitem__(self, key):
        return dict(self._state.config_records[_STATE + key])

    def __setitem__(self, key, value):
        from flwr.app import ConfigRecord

        self._state[_STATE + key] = ConfigRecord(dict(value))

    def __delitem__(self, key):
        del self._state[_STATE + key]

    def __iter__(self):
        return (
            k[len(_STATE) :] for k in self._state.config_records if k.startswith(_STATE)
        )

    def __len__(self):
        return sum(1 for _ in self)


#: Seconds between two pulls of replies (Flower's ``send_and_receive`` waits
#: 3 s between pulls; a round of small messages is much faster than that).
POLL_INTERVAL = 0.2


#: Requests serialized and pushed at a time. A request may hold every node's
#: size (the plan), so the server holds at most this many serialized requests
#: at once instead of all of them (``max_clients`` squared sizes).
PUSH_CHUNK = 64


def _grid_exchange(grid, poll_interval=POLL_INTERVAL, push_chunk=PUSH_CHUNK):
    """The server's ``exchange`` over a Flower ``Grid`` (push, then pull)."""
    from flwr.app import Message

    def exchange(requests, timeout):
        nodes = list(requests)
        sent: dict[Any, int] = {}
        owner: dict[Any, Any] = {}
        for start in range(0, len(nodes), push_chunk):
            chunk, messages = nodes[start : start + push_chunk], []
            for node in chunk:
                content = _to_record_dict(requests[node])
                sent[node] = _wire_bytes(content)
                # A message expires when the server stops waiting for its
                # reply: a node that comes back later does not answer a
                # finished round.
                messages.append(
                    Message(
                        content,
                        dst_node_id=int(node),
                        message_type=MESSAGE_TYPE,
                        ttl=float(timeout),
                    )
                )
            ids = list(grid.push_messages(messages))
            owner.update(zip(ids, chunk, strict=True))
        pending = set(owner)
        replies, sizes = {}, {}
        deadline = time.monotonic() + timeout
        while pending:
            for reply in grid.pull_messages(list(pending)):
                message_id = reply.metadata.reply_to_message_id
                if message_id not in pending:
                    continue
                pending.discard(message_id)
                node = owner[message_id]
                if reply.has_error():
                    replies[node] = NodeFailure(
                        f"the node raised an error ({reply.error.reason})"
                    )
                    sizes[node] = (sent[node], 0)
                    continue
                try:
                    replies[node] = _from_record_dict(reply.content)
                except Exception as exc:  # malformed reply
                    replies[node] = NodeFailure(f"malformed reply ({exc})")
                sizes[node] = (sent[node], _wire_bytes(reply.content))
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(poll_interval)
        for node in nodes:
            sizes.setdefault(node, (sent[node], 0))
        return replies, sizes

    return exchange
