"""Server side, group-conditional calibration: one round per group, per-cell messages.

The group list is public and fixed by the server before the run (never a
vote of the nodes). In the hello round each node announces its cells: the
groups it holds rows of and how many (``group_labels``, ``group_n``); a
node announcing a group outside the public list, one group twice or counts
that are not its rows is left out before any plan is made. The server then
plans every group round with that group's exact cell sizes, each node sends
one message per non-empty cell, and the strategy's own
``fit_from_messages`` checks and aggregates each round. The result is the
:class:`~skfedcp.calibrators.GroupedCalibrator` the in-process ``fit``
gives on the same rows.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from sklearn.base import clone

from .._config import get_config
from ..calibrators._grouped import (
    GroupedCalibrator,
    _unit_seeds,
    check_grouped_calibrator,
)
from ..exceptions import InfiniteThresholdWarning
from ..utils._validation import check_alpha
from ._calibrate import (
    _check_replies,
    _decode_message,
    _fit_private_round,
    _private_failure,
    calibrate_nodes,
    exclude_invalid,
    find_invalid,
    next_round_nodes,
)
from ._protocol import _alias_of, calibrator_to_spec
from ._session import _MAX_LABEL_CHARS, _short

__all__ = ["calibrate", "calibrate_groups", "check_public_groups"]


def calibrate(session, nodes, calibrator, *, groups=None, min_group_size=None, **how):
    """One calibration task: marginal (``groups`` None) or per group."""
    if groups is None:
        if min_group_size is not None:
            raise ValueError(
                "min_group_size is for group-conditional calibration: pass the "
                "public group list (groups) too."
            )
        return calibrate_nodes(session, nodes, calibrator, **how)
    how.pop("n_classes", None)
    return calibrate_groups(
        session,
        nodes,
        calibrator,
        groups=groups,
        min_group_size=min_group_size,
        **how,
    )


def check_public_groups(groups, *, max_groups=None):
    """The server's public group list: sorted, distinct ints or strings.

    At most ``max_groups`` (None: the plan policy's ``max_classes``).
    """
    max_groups = get_config()["max_classes"] if max_groups is None else max_groups
    public = np.asarray(groups)
    if public.ndim != 1 or public.shape[0] < 1 or public.dtype.kind not in "iuU":
        raise ValueError(
            "groups must be a non-empty 1-D list of int or string group labels "
            f"(the public group list); got {_short(groups)}."
        )
    if public.shape[0] > max_groups:
        raise ValueError(
            f"groups has {public.shape[0]} labels > the plan policy's "
            f"max_classes={max_groups}."
        )
    unique = np.unique(public)
    if unique.shape[0] != public.shape[0]:
        raise ValueError("groups repeats a label: list every group once.")
    return unique


def _same_kind(a, b):
    return (a.dtype.kind == "U") == (b.dtype.kind == "U")


def _cells_problem(info, public, max_size):
    """Why a node's announced cells cannot be planned, or None."""
    labels, counts = info.get("group_labels"), info.get("group_n")
    kind = "string" if public.dtype.kind == "U" else "int"
    if (
        not isinstance(labels, np.ndarray)
        or labels.ndim != 1
        or labels.dtype.kind not in "iuU"
        or not _same_kind(labels, public)
    ):
        return (
            f"its field 'group_labels' is not a vector of {kind} group labels (the "
            "public group list's kind)"
        )
    if labels.dtype.kind == "U" and labels.dtype.itemsize > 4 * _MAX_LABEL_CHARS:
        return (
            f"its field 'group_labels' holds labels longer than {_MAX_LABEL_CHARS} "
            "characters"
        )
    # Only the first (public groups + 1) cells are read: past the public list,
    # some cell is unknown or repeated (pigeonhole), so the answer is found
    # in them and the server's work is bounded by the public list, not by the
    # node's message.
    labels = labels[: public.shape[0] + 1]
    # Known labels first (a hash lookup); then, each in the public list, a
    # node can only repeat one (a duplicated cell) to announce more.
    unknown = labels[pd.Index(public).get_indexer(labels) < 0]
    if unknown.size:
        return (
            f"its field 'group_labels' holds group(s) {_short(unknown.tolist())} "
            "outside the server's public group list"
        )
    values, times = np.unique(labels, return_counts=True)
    if np.any(times > 1):
        return (
            f"its field 'group_labels' repeats group(s) "
            f"{_short(values[times > 1].tolist())} (a duplicated cell)"
        )
    if (
        not isinstance(counts, np.ndarray)
        or counts.shape != labels.shape
        or counts.dtype.kind not in "iu"
    ):
        return "its field 'group_n' is not one integer count per announced group"
    if np.any(counts < 1) or np.any(counts > max_size):
        return (
            f"its field 'group_n' holds a count outside [1, max_client_size={max_size}]"
        )
    total = int(counts.astype(np.int64).sum())
    if total != info["n"]:
        return (
            f"its field 'group_n' sums to {total}, not its announced size {info['n']}"
        )
    return None


class _GroupPlan(NamedTuple):
    """The public plan of every group round over ``nodes``.

    Sparse: one entry per announced cell, per (round, node) pair and per
    group, never a (nodes x groups) table, so the server's memory follows
    the cells the nodes announced (each node's cells are distinct public
    groups with at least one row) and the public group list.
    """

    nodes: list
    n_per_group: np.ndarray  # (n_groups,) rows of each group over the nodes
    seen: np.ndarray  # groups with rows
    small: np.ndarray  # groups merged (min_group_size)
    unit_of_group: np.ndarray  # round of each group, -1 without rows
    members: list  # per round: positions (into nodes) of its clients
    sizes: list  # per round: its clients' cell sizes
    cells: list  # per node: its cells' columns in the public list, sorted
    rounds: list  # per node: (its rounds, ascending; its position in each)


def _group_units(total, min_group_size):
    """The rounds of the public groups from their row totals.

    Returns ``(seen, small, unit_of_group, n_units)``: the groups with rows,
    those merged into one last round (fewer than ``min_group_size`` rows),
    each group's round (-1 without rows) and the number of rounds.
    """
    seen = total > 0
    small = np.zeros_like(seen)
    if min_group_size is not None:
        small = seen & (total < min_group_size)
    alone = np.flatnonzero(seen & ~small)
    unit_of_group = np.full(total.shape[0], -1, dtype=np.int64)
    unit_of_group[alone] = np.arange(alone.shape[0])
    unit_of_group[small] = alone.shape[0]
    return seen, small, unit_of_group, alone.shape[0] + int(small.any())


def _plan(session, nodes, public, min_group_size):
    columns, counts = [], []
    for node in nodes:
        info = session.info[node]
        order = np.argsort(info["group_labels"], kind="stable")
        columns.append(np.searchsorted(public, info["group_labels"][order]))
        counts.append(info["group_n"][order].astype(np.int64))
    owner = np.repeat(np.arange(len(nodes)), [c.shape[0] for c in columns])
    column, count = np.concatenate(columns), np.concatenate(counts)
    total = np.zeros(public.shape[0], dtype=np.int64)
    np.add.at(total, column, count)
    seen, small, unit_of_group, n_units = _group_units(total, min_group_size)
    # One (round, node) pair per round a node takes part in, ordered by
    # round then node; its size sums the node's cells of that round (the
    # merged small groups may hold several).
    cell_unit = unit_of_group[column]
    order = np.lexsort((owner, cell_unit))
    pair_unit, pair_owner = cell_unit[order], owner[order]
    first = np.ones(order.shape[0], dtype=bool)
    first[1:] = (pair_unit[1:] != pair_unit[:-1]) | (pair_owner[1:] != pair_owner[:-1])
    start = np.flatnonzero(first)
    pair_size = np.add.reduceat(count[order], start)
    pair_unit, pair_owner = pair_unit[start], pair_owner[start]
    bounds = np.searchsorted(pair_unit, np.arange(n_units + 1))
    members = [pair_owner[bounds[u] : bounds[u + 1]] for u in range(n_units)]
    sizes = [pair_size[bounds[u] : bounds[u + 1]] for u in range(n_units)]
    # Each node's rounds and its position in each (members are ascending).
    pair_position = np.arange(pair_unit.shape[0]) - bounds[pair_unit]
    by_node = np.lexsort((pair_unit, pair_owner))
    node_bounds = np.searchsorted(pair_owner[by_node], np.arange(len(nodes) + 1))
    rounds = [
        (pair_unit[by_node[lo:hi]], pair_position[by_node[lo:hi]])
        for lo, hi in zip(node_bounds[:-1], node_bounds[1:], strict=True)
    ]
    return _GroupPlan(
        nodes, total, seen, small, unit_of_group, members, sizes, columns, rounds
    )


def _requests(plan, public, base):
    """One request per node: only what concerns its own cells.

    Its cells' group labels and rounds (``cell_groups``, ``cell_units``),
    the rounds it takes part in with its position in each (``units``,
    ``positions``) and those rounds' plans: the request grows with the
    node's cells and its rounds' plans, not with the public group list.
    """
    requests = {}
    for node, columns, (units, positions) in zip(
        plan.nodes, plan.cells, plan.rounds, strict=True
    ):
        requests[node] = {
            **base,
            "cell_groups": public[columns],
            "cell_units": plan.unit_of_group[columns],
            "units": units,
            "positions": positions,
            **{f"plan.{u}": plan.sizes[u] for u in units.tolist()},
        }
    return requests


def _split_cells(reply, units):
    """A node's reply as one message per round, or the reason it is malformed.

    ``units`` are the rounds the node takes part in (its request's).
    """
    cells: dict[int, dict[str, Any]] = {}
    for key, value in _decode_message(reply).items():
        unit, _, field = key.partition(".")
        if not unit.isdigit() or not field:
            return None, f"its field {_short('message.' + key)} names no group round"
        cells.setdefault(int(unit), {})[field] = value
    planned = set(units.tolist())
    extra = sorted(u for u in cells if u not in planned)
    if extra:
        return None, (
            f"its fields 'message.<u>.*' hold a message for group round(s) "
            f"{_short(extra)} where it announced no rows"
        )
    return cells, None


def calibrate_groups(
    session,
    nodes,
    calibrator,
    *,
    groups,
    alpha,
    fingerprint,
    min_group_size=None,
    random_state=None,
    max_attempts=3,
):
    """Group-conditional calibration over ``nodes`` (already checked by hello).

    ``groups`` is the public group list. Each round is one strategy run per
    group (the merged small groups together, ``min_group_size``), on that
    group's cells, with its exact plan. Nodes that fail or send an invalid
    message are handled as in :func:`~skfedcp.flower._calibrate.calibrate_nodes`:
    non-private strategies re-plan every group round for the remaining nodes
    and ask them again, ``"dp-qq"`` excludes an invalid node's every cell in
    its single round.

    Returns the fitted :class:`~skfedcp.calibrators.GroupedCalibrator` and the
    nodes whose messages it used.
    """
    base = check_grouped_calibrator(calibrator, owner="the Flower deployment")
    grouped = GroupedCalibrator(base, min_group_size=min_group_size)
    grouped._validate_params()
    public = check_public_groups(groups, max_groups=session.max_classes)
    alpha = check_alpha(alpha)
    alias = _alias_of(base)
    nodes = [n for n in nodes if n not in session.invalid]
    reasons = {}
    for node in nodes:
        problem = _cells_problem(session.info[node], public, session.max_client_size)
        if problem:
            reasons[node] = problem + " (left out before any plan is made)"
    nodes = session.leave_out(nodes, reasons, invalid=True)
    request = {
        "kind": "calibrate",
        "calibrator": calibrator_to_spec(base),
        "alpha": alpha,
        "fingerprint": fingerprint or "",
    }
    for _ in range(max_attempts):
        if not nodes:
            raise RuntimeError(f"{alias}: no node is left to calibrate.")
        plan = _plan(session, nodes, public, min_group_size)
        requests = _requests(plan, public, request)
        ok, failed, invalid = session.query(f"calibrate:{alias}[groups]", requests)
        _check_replies(ok, invalid, fingerprint)
        if failed and base._randomized:
            raise _private_failure(alias, failed)
        cells = {}
        for node, reply in ok.items():
            split, problem = _split_cells(reply, requests[node]["units"])
            if problem:
                invalid[node] = problem
            else:
                cells[node] = split
        rounds = _round_fits(session, plan, cells, base, alpha, random_state)
        if base._randomized:
            exclude_invalid(session, invalid)
            return _fit_private(session, grouped, plan, public, rounds, invalid, alpha)
        find_invalid(session, rounds, ok, invalid)
        if not failed and not invalid:
            fitted = [_fit_quietly(fit, "raise") for fit, _ in rounds]
            return _assemble(session, grouped, plan, public, fitted, alpha, plan.nodes)
        nodes = next_round_nodes(
            session, nodes, failed, invalid, f"{alias} (per group)"
        )
    raise RuntimeError(f"{alias}: nodes kept failing after {max_attempts} attempts.")


def _round_fits(session, plan, cells, base, alpha, random_state):
    """Per group round: its ``fit_from_messages`` (partial) and its nodes.

    A node without a usable reply (failed, replayed, malformed) has an empty
    (invalid) message in its every round, so that the plan stays the
    announced one.
    """
    seeds = _unit_seeds(random_state, len(plan.members))
    rounds = []
    for u, (members, sizes) in enumerate(zip(plan.members, plan.sizes, strict=True)):
        nodes = [plan.nodes[i] for i in members]
        messages = [cells.get(n, {}).get(u, {}) for n in nodes]
        fit = partial(
            clone(base).fit_from_messages,  # one fitted strategy per group
            messages,
            alpha=alpha,
            n_per_client=sizes,
            clients=session.labels(nodes),
            random_state=seeds[u],
        )
        rounds.append((fit, nodes))
    return rounds


def _fit_quietly(fit, on_invalid):
    """One group round's fit; one warning for all infinite groups, later."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfiniteThresholdWarning)
        return fit(on_invalid=on_invalid)


def _fit_private(session, grouped, plan, public, rounds, invalid, alpha):
    """``dp-qq``: one round, no second ask (budget); invalid nodes excluded.

    A node invalid in one group round is dropped from all of them (its
    other cells count as invalid too): refitting from the same messages is
    post-processing and spends no budget.
    """
    bad = set(invalid)
    fitted = []
    for fit, members in rounds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InfiniteThresholdWarning)
            cal, used = _fit_private_round(
                session, fit, members, session.labels(members), bad
            )
        fitted.append(cal)
        bad.update(n for n in members if n not in used)
    if bad - set(invalid):  # drop their other cells too, and refit
        rounds = [(_without(fit, members, bad), members) for fit, members in rounds]
        fitted = [_fit_quietly(fit, "exclude") for fit, _ in rounds]
    used = [n for n in plan.nodes if n not in bad]
    return _assemble(session, grouped, plan, public, fitted, alpha, used)


def _without(fit, members, dropped):
    """``fit`` with the messages of the ``dropped`` nodes emptied (invalid)."""
    messages = [
        {} if n in dropped else m for n, m in zip(members, fit.args[0], strict=True)
    ]
    return partial(fit.func, messages, **fit.keywords)


def _assemble(session, grouped, plan, public, fitted, alpha, used):
    """The fitted attributes :meth:`GroupedCalibrator.fit` sets, from the rounds.

    The per-group calibrators are those its loop fits, from the same messages
    and plans. Returns the fitted calibrator and ``used`` in client-label
    order.
    """
    seen, small = plan.seen, plan.small
    grouped._set_fitted(
        fitted,
        groups=public,
        unit_groups=public[seen & ~small],
        merged_groups=public[small],
        n_per_group=plan.n_per_group,
        clients=session.labels(plan.nodes),
        alpha=alpha,
    )
    return grouped, session.ordered(used)
