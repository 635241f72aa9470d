"""Server side, calibration: one strategy's round(s) over the checked nodes.

The server's side is the calibrator's own ``fit_from_messages``: every
message is checked against the public plan before it is used; a node that
fails or sends an invalid message is handled as the strategy allows.
"""

from __future__ import annotations

import warnings
from functools import partial
from numbers import Integral

import numpy as np

from ..calibrators import get_calibrator
from ..calibrators._messages import client_share_problems
from ..exceptions import (
    InvalidMessageError,
    InvalidMessageWarning,
)
from ..utils._random import check_seed_sequence, spawn_random_states
from ..utils._validation import check_alpha
from ._protocol import (
    _alias_of,
    calibrator_to_spec,
)
from ._session import _is_text, _short

__all__ = ["calibrate_nodes"]


def _decode_message(reply):
    return {
        key[len("message.") :]: value
        for key, value in reply.items()
        if key.startswith("message.")
    }


def _check_replies(ok, invalid, fingerprint):
    """Move the replies whose model fingerprint is not the expected one to
    ``invalid`` (the node announced the expected one in hello)."""
    for node, reply in list(ok.items()):
        if fingerprint and not _is_text(reply.get("fingerprint"), fingerprint):
            invalid[node] = (
                f"its message carries model fingerprint "
                f"{_short(reply.get('fingerprint'))}, not {fingerprint}"
            )
            del ok[node]


def _private_failure(alias, failed):
    detail = "; ".join(f"node {n}: {r}" for n, r in failed.items())
    return RuntimeError(
        f"{alias}: {len(failed)} node(s) failed during the private round "
        f"({detail}). A private strategy cannot repeat a round without spending "
        "more privacy budget, and its plan assumed every node: fix the nodes and "
        "start a new run."
    )


def _is_interactive(calibrator):
    if getattr(calibrator, "interactive", False):
        return True
    return all(
        hasattr(calibrator, name)
        for name in ("server_init", "client_respond", "server_update")
    )


def calibrate_nodes(
    session,
    nodes,
    calibrator,
    *,
    alpha,
    fingerprint,
    random_state=None,
    max_attempts=3,
    n_classes=None,
):
    """Run one calibration over ``nodes`` (already checked by hello).

    ``n_classes`` (the shared model's class count, public) fixes LDP-L's
    number of classes before the round when the calibrator leaves it None:
    a node sending score matrices of another width is then excluded, never
    voted on.

    The server's side is the calibrator's own
    :meth:`~skfedcp.calibrators.BaseCalibrator.fit_from_messages`: every
    message is checked against the public plan before it is used. Nodes that
    fail, time out or send an invalid message are handled as the strategy
    allows (see the user guide, *When nodes fail*):

    * non-private strategies (``qq``, ``avg``, ``central``) leave the node
      out and ask the remaining nodes again with the plan recomputed for
      them, so the result equals the in-process fit on the remaining rows;
    * private one-shot strategies (``dp-qq``, ``dp-central``, ``ldp-l``)
      cannot ask again (budget): a failure is an error, an invalid message
      is excluded by ``fit_from_messages(on_invalid="exclude")``;
    * LDP-S (interactive) can neither ask again nor exclude: an error.

    Returns the fitted calibrator and the nodes whose messages it used.
    """
    calibrator = get_calibrator(calibrator)
    params = calibrator.get_params(deep=False)
    if n_classes is not None and "n_classes" in params and params["n_classes"] is None:
        calibrator.set_params(n_classes=int(n_classes))
    calibrator._validate_params()
    alpha = check_alpha(alpha)
    alias = _alias_of(calibrator)
    spec = calibrator_to_spec(calibrator)
    nodes = [n for n in nodes if n not in session.invalid]
    if _is_interactive(calibrator):
        return _calibrate_interactive(
            session,
            nodes,
            calibrator,
            alias=alias,
            spec=spec,
            alpha=alpha,
            fingerprint=fingerprint,
            random_state=random_state,
        )
    for _ in range(max_attempts):
        if not nodes:
            raise RuntimeError(f"{alias}: no node is left to calibrate.")
        sizes = np.asarray([_node_size(session, n) for n in nodes], dtype=np.int64)
        request = {
            "kind": "calibrate",
            "calibrator": spec,
            "alpha": alpha,
            "n_per_client": sizes,
            "fingerprint": fingerprint or "",
        }
        ok, failed, invalid = session.query(
            f"calibrate:{alias}", dict.fromkeys(nodes, request)
        )
        _check_replies(ok, invalid, fingerprint)
        if failed and calibrator._randomized:
            raise _private_failure(alias, failed)
        # A node that failed or replayed has no message: an empty (invalid)
        # one stands in for it, so that the plan stays the announced one.
        messages = [_decode_message(ok[n]) if n in ok else {} for n in nodes]
        labels = session.labels(nodes)
        fit = partial(
            calibrator.fit_from_messages,
            messages,
            alpha=alpha,
            n_per_client=sizes,
            clients=labels,
            random_state=random_state,
        )
        if calibrator._randomized:
            exclude_invalid(session, invalid)
            return _fit_private_round(session, fit, nodes, labels, set(invalid))
        find_invalid(session, [(fit, nodes)], ok, invalid)
        if not failed and not invalid:
            return fit(on_invalid="raise"), nodes
        nodes = next_round_nodes(session, nodes, failed, invalid, alias)
    raise RuntimeError(f"{alias}: nodes kept failing after {max_attempts} attempts.")


def exclude_invalid(session, invalid):
    """Private one-shot round: the ``invalid`` nodes are out, no new round.

    Their messages count as invalid under the round's plan (no second ask:
    it would spend more budget).
    """
    for node, reason in invalid.items():
        session.exclude(
            node,
            reason,
            " Its message counts as invalid under the round's plan.",
            invalid=True,
        )


def find_invalid(session, rounds, ok, invalid):
    """Add to ``invalid`` the nodes whose message a fit finds invalid.

    ``rounds`` holds ``(fit, nodes)`` pairs (one per group round with
    ``groups``); only the replies in ``ok`` are checked, and a node already
    in ``invalid`` keeps its first reason.
    """
    for fit, nodes in rounds:
        found = _invalid_nodes(fit, nodes, session.labels(nodes))
        invalid.update((n, r) for n, r in found.items() if n in ok and n not in invalid)


def next_round_nodes(session, nodes, failed, invalid, alias):
    """Leave the failed and invalid nodes out; return those asked again.

    A non-private strategy is recalibrated with the remaining nodes, in a new
    round with their plan, so the result equals the in-process fit on their
    rows.
    """
    left = len(nodes) - len(failed) - len(invalid)
    again = f" {alias} is recalibrated with the remaining {left} node(s)"
    for node, reason in failed.items():
        session.exclude(node, reason, again + ".")
    for node, reason in invalid.items():
        session.exclude(
            node, reason, again + " (a new round with their plan).", invalid=True
        )
    return [n for n in nodes if n not in failed and n not in invalid]


def _fit_private_round(session, fit, nodes, labels, replayed):
    """Fit a private one-shot round once, excluding the invalid messages.

    No second round (budget): the calibrator's own
    :class:`~skfedcp.exceptions.InvalidMessageWarning` says how an offender
    was counted. Returns the fitted calibrator and the nodes it used.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted = fit(on_invalid="exclude")
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    text = " ".join(
        str(w.message) for w in caught if issubclass(w.category, InvalidMessageWarning)
    )
    excluded = set(fitted.excluded_clients_.tolist())
    for node, label in zip(nodes, labels.tolist(), strict=True):
        if label in excluded and node not in replayed:
            session.exclude(
                node,
                f"it sent an invalid message ({_reason_of(label, text)})",
                invalid=True,
                warn=False,
            )
    return fitted, [n for n in nodes if session.info[n]["label"] not in excluded]


def _invalid_nodes(fit, nodes, labels):
    """Nodes whose message ``fit`` finds invalid, with the reason for each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fitted = fit(on_invalid="exclude")
        except InvalidMessageError as exc:  # every message is invalid
            return dict.fromkeys(nodes, f"it sent an invalid message ({exc})")
    excluded = set(fitted.excluded_clients_.tolist())
    if not excluded:
        return {}
    text = " ".join(
        str(w.message) for w in caught if issubclass(w.category, InvalidMessageWarning)
    )
    return {
        node: f"it sent an invalid message ({_reason_of(label, text)})"
        for node, label in zip(nodes, labels.tolist(), strict=True)
        if label in excluded
    }


def _reason_of(label, text):
    """The part of an ``InvalidMessageWarning`` text that concerns ``label``."""
    marker = f"client {label!r}: "
    start = text.find(marker)
    if start < 0:
        return text
    stops = [i for i in (text.find("; client ", start), text.rfind(").")) if i > start]
    return text[start : min(stops)] if stops else text[start:]


def _calibrate_interactive(
    session, nodes, calibrator, *, alias, spec, alpha, fingerprint, random_state
):
    """Drive ``server_init`` / ``client_respond`` / ``server_update`` (LDP-S).

    The transcript (one list of messages per round) is then handed to the
    calibrator's ``fit_from_messages``, which replays the server's side on
    it and sets the fitted attributes, as the in-process ``fit`` does.
    """
    if not nodes:
        raise RuntimeError(f"{alias}: no node is left to calibrate.")
    sizes = np.asarray([_node_size(session, n) for n in nodes], dtype=np.int64)
    # The nodes above the public cap on one client's share of the users are
    # left out before the first query (no budget is spent on them). The rule
    # is applied until it holds for the nodes kept, so server_init's check
    # (and the replay's) on them passes: the run's one share check.
    share = getattr(calibrator, "max_client_share", None)
    over = client_share_problems(sizes, share, unit="users")
    for problem in over:
        session.exclude(nodes[problem.index], problem.reason, invalid=True)
    if over:
        keep = np.ones(len(nodes), dtype=bool)
        keep[[p.index for p in over]] = False
        nodes = [n for n, k in zip(nodes, keep, strict=True) if k]
        sizes = sizes[keep]
    labels = session.labels(nodes)
    # The group assignment is public: with no seed (or "secure"), a fresh
    # one that the live run and the replay share, as in the in-process fit.
    seed = check_seed_sequence(random_state)
    public = np.random.SeedSequence() if isinstance(seed, str) else seed
    state = calibrator.server_init(
        sizes, alpha=alpha, random_state=spawn_random_states(public, 1)[0]
    )
    calibration_id = f"{session.tag}/{alias}"
    rounds = []
    while not state["done"]:
        # Each asked node gets the public assignment, not its users: its
        # index, its row of group counts and the key, from which it derives
        # which of its users are asked (O(T) per message, O(n_j) on the node).
        requests = {}
        for j, (node, query) in enumerate(zip(nodes, state["queries"], strict=True)):
            if query["count"]:
                requests[node] = {
                    "kind": "respond",
                    "calibrator": spec,
                    "calibration_id": calibration_id,
                    "round": int(query["round"]),
                    "threshold": float(query["threshold"]),
                    "client": j,
                    "group_counts": state["group_counts"][j],
                    "assignment_key": state["assignment_key"],
                    "fingerprint": fingerprint or "",
                }
        ok, failed, invalid = session.query(
            f"{alias}:round{state['round'] + 1}", requests
        )
        _check_replies(ok, invalid, fingerprint)
        if failed:
            raise _private_failure(alias, failed)
        for node, reason in invalid.items():
            raise _interactive_invalid(session, alias, node, reason, None)
        messages = [
            _decode_message(ok[node]) if node in requests else None for node in nodes
        ]
        try:
            new_state = calibrator.server_update(state, messages)
        except InvalidMessageError as exc:
            if not isinstance(exc.client, Integral):
                raise
            node = nodes[int(exc.client)]
            raise _interactive_invalid(
                session, alias, node, f"it sent an invalid message ({exc})", exc.field
            ) from None
        rounds.append(messages)
        state = new_state
    try:
        fitted = calibrator.fit_from_messages(
            rounds,
            alpha=alpha,
            n_per_client=sizes,
            clients=labels,
            random_state=public,
        )
    except InvalidMessageError as exc:
        # The replay checks what server_update does not (each answer's users
        # against the public assignment): name and leave out that node too.
        position = [i for i, label in enumerate(labels) if label == exc.client]
        if len(position) != 1:
            raise
        raise _interactive_invalid(
            session,
            alias,
            nodes[position[0]],
            f"it sent an invalid message ({exc})",
            exc.field,
        ) from None
    return fitted, nodes


def _interactive_invalid(session, alias, node, reason, field):
    """Leave ``node`` out and return the error that stops an interactive run."""
    session.exclude(node, reason, invalid=True)
    label = session.info[node]["label"]
    return InvalidMessageError(
        f"{alias}: node {node} (client {label!r}) sent an invalid answer "
        f"({reason}). An interactive private strategy can neither exclude it (the "
        "correction assumed every group's full size) nor ask again (privacy "
        "budget): start a new run without that node.",
        client=label,
        field=field,
    )


def _node_size(session, node):
    return int(session.info[node]["n"])
