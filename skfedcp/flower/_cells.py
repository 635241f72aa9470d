"""Node side of group-conditional calibration: row groups, one message per cell."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..base._groups import row_groups
from ..privacy._randomness import SECURE

__all__ = ["cell_messages", "node_groups"]


def node_groups(group_by: Any, X: Any, y: Any) -> np.ndarray:
    """The group of each of a node's calibration rows (the wrappers' rule).

    ``"class"``: the row's label; a column of X (name or index) or a
    callable ``X -> labels``: as the wrappers' ``group_by``.
    """
    if group_by is None:
        raise ValueError(
            "the server asks for group-conditional calibration, but this node has "
            "no group_by (pass group_by to make_client_app)."
        )
    if isinstance(group_by, str) and group_by == "class":
        return np.asarray(y)
    return row_groups(group_by, X)


def _cell_stream(seed, unit, position):
    """The random stream of this node's cell of group round ``unit``.

    ``seed`` (a ``SeedSequence`` from the node config, or None: the secure
    generator) is the root; the cell's stream is its child
    ``spawn_key + (unit, position + 1)``, the stream the in-process
    :class:`~skfedcp.calibrators.GroupedCalibrator` gives client ``position``
    of its ``unit``-th round (see ``simulation_seeds(grouped=True)``).
    """
    if seed is None:
        return SECURE
    child = np.random.SeedSequence(
        seed.entropy, spawn_key=(*seed.spawn_key, int(unit), int(position) + 1)
    )
    return np.random.RandomState(np.random.PCG64(child))


def cell_messages(
    calibrator: Any,
    scores: np.ndarray,
    groups: np.ndarray,
    request: dict[str, Any],
    *,
    seed: np.random.SeedSequence | None,
) -> dict[str, Any]:
    """This node's message of every group round it takes part in.

    The request carries the public plan of this node's cells only:
    ``cell_groups`` (the groups it announced at hello, within the server's
    public group list), ``cell_units`` (the round of each: a group alone, or
    the merged small groups), ``units`` and ``positions`` (the rounds it
    takes part in and its position in each round's plan) and ``plan.<u>``
    (round ``u``'s cell sizes). The message of round ``u`` is the
    strategy's ``client_step`` on the node's rows of that round, its fields
    sent as ``<u>.<field>``.
    """
    own = np.asarray(request["cell_groups"])
    code = pd.Index(own).get_indexer(groups)
    if np.any(code < 0):
        unknown = pd.unique(groups[code < 0]).tolist()[:5]
        raise ValueError(
            f"this node holds rows of group(s) {unknown} outside the cells the "
            "server planned for it (the groups it announced, within the server's "
            "public group list)."
        )
    unit = np.asarray(request["cell_units"], dtype=np.int64)[code]
    alpha = float(request["alpha"])
    message: dict[str, Any] = {}
    rounds = zip(
        np.asarray(request["units"]).tolist(),
        np.asarray(request["positions"]).tolist(),
        strict=True,
    )
    for u, position in rounds:
        rows = unit == u
        random_state = (
            _cell_stream(seed, u, position) if calibrator._randomized else None
        )
        cell = calibrator.client_step(
            scores[rows],
            alpha=alpha,
            n_per_client=np.asarray(request[f"plan.{u}"]),
            random_state=random_state,
        )
        message.update((f"{u}.{key}", value) for key, value in cell.items())
    return message
