"""The server serializes and pushes its requests a chunk at a time.

A calibration request carries the plan, every node's size: over ``m`` nodes
the round's requests hold ``m**2`` sizes (80 GB at the public
``max_clients=10**5`` when all are serialized before the first push). The
exchange builds and pushes at most ``PUSH_CHUNK`` of them at a time, so the
server's memory follows one chunk, and every reply still reaches its node.
"""

import tracemalloc

import numpy as np
import pytest

pytest.importorskip("flwr")

from skfedcp.flower import _wire  # noqa: E402
from skfedcp.flower._local import InMemoryGrid  # noqa: E402
from skfedcp.flower._session import NodeFailure  # noqa: E402


@pytest.fixture(autouse=True)
def _task_identity():
    """Messages are built in this process: set Flower's task identity (as
    ``InMemoryGrid`` does for a ServerApp process)."""
    InMemoryGrid(lambda message, context: None, [])


class _Remote:
    """A grid that keeps nothing it is pushed (as a remote SuperLink)."""

    def __init__(self):
        self.batches = []

    def push_messages(self, messages):
        messages = list(messages)
        self.batches.append(len(messages))
        start = sum(self.batches[:-1])
        return [f"m{start + i}" for i in range(len(messages))]

    def pull_messages(self, ids):
        return []


def _requests(m, width):
    plan = np.arange(width, dtype=np.int64)  # one array shared by every request
    return {node: {"kind": "x", "n_per_client": plan} for node in range(m)}


def test_requests_are_pushed_in_chunks():
    grid = _Remote()
    exchange = _wire._grid_exchange(grid, poll_interval=0, push_chunk=3)
    replies, sizes = exchange(_requests(8, 4), 0.0)
    assert grid.batches == [3, 3, 2]
    assert replies == {}
    assert sorted(sizes) == list(range(8))
    assert all(sent > 0 and received == 0 for sent, received in sizes.values())


def test_memory_follows_one_chunk():
    # 320 requests of an 80 kB plan: 25 MiB serialized when all are built
    # before the first push; about 64 of them at a time now.
    m, width = 320, 10_000
    requests = _requests(m, width)
    exchange = _wire._grid_exchange(_Remote(), poll_interval=0)
    tracemalloc.start()
    try:
        exchange(requests, 0.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    one_request = width * 8
    # Two chunks' worth leaves room for the serializer's copies; the old
    # peak was m requests' worth (25 MiB here).
    assert peak < 2 * _wire.PUSH_CHUNK * one_request * 1.5, peak
    assert peak < m * one_request / 2, peak


def test_every_reply_reaches_its_node_across_chunks():
    def app(message, context):
        from flwr.app import Message

        request = _wire._from_record_dict(message.content)
        node = context.node_id
        if node == 105:
            raise RuntimeError("broken node")
        reply = {"node": int(node), "echo": request["kind"]}
        return Message(_wire._to_record_dict(reply), reply_to=message)

    grid = InMemoryGrid(app, [{} for _ in range(7)])
    grid.unresponsive.add(103)
    exchange = _wire._grid_exchange(grid, poll_interval=0, push_chunk=2)
    requests = {node: {"kind": f"k{node}"} for node in grid.get_node_ids()}
    replies, sizes = exchange(requests, 0.0)
    for node in grid.get_node_ids():
        if node == 103:
            assert node not in replies  # never answered
        elif node == 105:
            assert isinstance(replies[node], NodeFailure)
            assert "broken node" in replies[node].reason
        else:
            assert replies[node] == {"node": node, "echo": f"k{node}"}
    assert set(sizes) == set(grid.get_node_ids())
