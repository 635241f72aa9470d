"""The server's group plan follows the announced cells, not nodes x groups.

Each node announces its cells at hello (distinct groups of the public list,
at least one row each). The plan of every group round is built from those
cells alone: no (nodes x groups) table, and each node's request holds only
its own cells, the rounds it takes part in and their plans. At the public
limits (``max_clients=10**5`` nodes, ``max_classes=10**4`` groups) the old
dense tables took about 8 GB each.
"""

import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("flwr")

from skfedcp.flower._calibrate_groups import (  # noqa: E402
    _group_units,
    _plan,
    _requests,
)


def _session(n_nodes, n_groups, cells, rng, *, strings=False):
    info = {}
    for node in range(n_nodes):
        k = int(rng.integers(1, cells + 1))
        labels = rng.choice(n_groups, k, replace=False)  # any order
        if strings:
            labels = np.array([f"g{v:05d}" for v in labels])
        counts = rng.integers(1, 40, k)
        info[10 + node] = {"group_labels": labels, "group_n": counts}
    return SimpleNamespace(info=info)


def _dense_reference(session, nodes, public, min_group_size):
    """The former dense plan: a (nodes x groups) table of cell sizes."""
    counts = np.zeros((len(nodes), public.shape[0]), dtype=np.int64)
    for i, node in enumerate(nodes):
        info = session.info[node]
        counts[i, np.searchsorted(public, info["group_labels"])] = info["group_n"]
    total = counts.sum(axis=0)
    # The rounds from the totals are the plan's (_group_units); the cells
    # are counted here from the dense table.
    seen, small, unit_of_group, n_units = _group_units(total, min_group_size)
    members, sizes = [], []
    for u in range(n_units):
        cells = counts[:, unit_of_group == u].sum(axis=1)
        members.append(np.flatnonzero(cells > 0))
        sizes.append(cells[cells > 0])
    return total, seen, small, unit_of_group, members, sizes


@pytest.mark.parametrize("strings", [False, True])
@pytest.mark.parametrize("min_group_size", [None, 1, 60, 400, 10**6])
@pytest.mark.parametrize("seed", range(3))
def test_sparse_plan_equals_the_dense_plan(seed, min_group_size, strings):
    rng = np.random.default_rng(seed)
    session = _session(40, 25, 6, rng, strings=strings)
    nodes = list(session.info)[::-1][: 35 - seed]  # any node order, a subset
    labels = np.arange(25)
    public = np.array([f"g{v:05d}" for v in labels]) if strings else labels
    plan = _plan(session, nodes, public, min_group_size)
    total, seen, small, unit_of_group, members, sizes = _dense_reference(
        session, nodes, public, min_group_size
    )
    np.testing.assert_array_equal(plan.n_per_group, total)
    assert plan.n_per_group.dtype == total.dtype
    np.testing.assert_array_equal(plan.seen, seen)
    np.testing.assert_array_equal(plan.small, small)
    np.testing.assert_array_equal(plan.unit_of_group, unit_of_group)
    assert len(plan.members) == len(members)
    for got, want in zip(plan.members, members, strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    for got, want in zip(plan.sizes, sizes, strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
    requests = _requests(plan, public, {"kind": "calibrate"})
    for i, node in enumerate(nodes):
        request = requests[node]
        info = session.info[node]
        np.testing.assert_array_equal(
            request["cell_groups"], np.sort(info["group_labels"])
        )
        np.testing.assert_array_equal(
            request["cell_units"],
            unit_of_group[np.searchsorted(public, request["cell_groups"])],
        )
        # Its rounds, ascending, and its position in each round's plan.
        rounds = [u for u, m in enumerate(members) if i in m]
        assert request["units"].tolist() == rounds
        assert request["positions"].tolist() == [
            int(np.flatnonzero(members[u] == i)[0]) for u in rounds
        ]
        assert sorted(k for k in request if k.startswith("plan.")) == sorted(
            f"plan.{u}" for u in rounds
        )
        for u in rounds:
            assert request[f"plan.{u}"] is plan.sizes[u]


def test_memory_follows_the_announced_cells():
    # 2,000 nodes of at most 3 cells among the public limit of 10**4 groups:
    # the dense tables alone were 2 x 2,000 x 10**4 x 8 bytes = 305 MiB, and
    # every request carried two copies of the 10**4-long public list.
    rng = np.random.default_rng(0)
    n_groups = 10**4
    session = _session(2_000, n_groups, 3, rng)
    nodes = list(session.info)
    public = np.arange(n_groups)
    tracemalloc.start()
    try:
        plan = _plan(session, nodes, public, None)
        requests = _requests(plan, public, {"kind": "calibrate"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # About 2 MiB measured (the plan's per-group arrays of the public list
    # and a few arrays per node); 16 MiB leaves room and is 1/19 of the
    # dense tables.
    assert peak < 16 * 2**20, peak
    for node in nodes:
        k = session.info[node]["group_labels"].shape[0]
        request = requests[node]
        assert request["cell_groups"].shape == (k,)
        assert request["cell_units"].shape == (k,)
        assert request["units"].shape[0] <= k
        arrays = [v for v in request.values() if isinstance(v, np.ndarray)]
        # Its cells, its rounds and their plans; never the public list.
        assert max(a.shape[0] for a in arrays) < n_groups
