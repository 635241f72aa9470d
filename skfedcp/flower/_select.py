"""Server side, FED-chi2: two secure sums over the checked nodes.

The shape of the round (class list, feature count) is public and fixed
before it starts; the nodes' announcements are checked by
:func:`~skfedcp.feature_selection.chi2_server_plan` and the decoded sums by
the protocol's server steps.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import clone

from .._config import _check_policy_int, get_config
from ..exceptions import (
    InvalidMessageError,
    InvalidMessageWarning,
)
from ..feature_selection import (
    chi2_frac_bits,
    chi2_server_decode,
    chi2_server_marginals,
    chi2_server_plan,
)
from ..feature_selection._chi2 import FedChi2Selector
from ..feature_selection._tables import _dof
from ..federated import fixed_point_decode
from ._session import _short

__all__ = ["select_chi2_nodes"]


def _secure_sum(session, name, nodes, extra, length, max_attempts):
    """Pairwise-masked sum over ``nodes``; repeated among survivors on failure."""
    nodes = list(nodes)
    for attempt in range(max_attempts):
        if len(nodes) < 2:
            raise RuntimeError(
                f"{name}: a secure sum needs at least two nodes; {len(nodes)} left."
            )
        keys = [session.info[n]["public_key"] for n in nodes]
        request = {
            "kind": "secure_sum",
            "task": name,
            "tag": f"{session.tag}/{name}/{attempt}",
            "public_keys": keys,
            **extra(nodes),
        }
        ok, failed, invalid = session.query(name, dict.fromkeys(nodes, request))
        for node, reply in ok.items():
            masked = reply.get("masked")
            if (
                not isinstance(masked, np.ndarray)
                or masked.dtype != np.uint64
                or masked.shape != (length,)
            ):
                invalid[node] = (
                    f"its field 'masked' is not a vector of {length} uint64 "
                    f"(got {_short(getattr(masked, 'dtype', type(masked).__name__))}"
                    f"{getattr(masked, 'shape', '')})"
                )
        if not failed and not invalid:
            total = np.zeros(length, dtype=np.uint64)
            for node in nodes:
                total += ok[node]["masked"]
            return total, nodes
        consequence = (
            " The masks no longer cancel: the secure sum is repeated among the "
            f"remaining {len(nodes) - len(failed) - len(invalid)} node(s)."
        )
        for node, reason in failed.items():
            session.exclude(node, reason, consequence)
        for node, reason in invalid.items():
            session.exclude(node, reason, consequence, invalid=True)
        nodes = [n for n in nodes if n not in failed and n not in invalid]
    raise RuntimeError(f"{name}: nodes kept failing after {max_attempts} attempts.")


def select_chi2_nodes(
    session,
    nodes,
    selector,
    *,
    classes=None,
    n_features=None,
    max_value=None,
    max_attempts=3,
):
    """Run FED-chi2 (two secure sums) over ``nodes``; return the fitted selector.

    The shape of the round is public and fixed before it starts: the class
    list ``classes`` and the feature count ``n_features`` (see
    :func:`_public_shape`); what each node announced (its rows and column
    bounds) is checked by :func:`~skfedcp.feature_selection.chi2_server_plan`
    against the round's public bounds, and the decoded sums by
    :func:`~skfedcp.feature_selection.chi2_server_marginals` and
    :func:`~skfedcp.feature_selection.chi2_server_decode`.
    """
    if not isinstance(selector, FedChi2Selector):
        raise TypeError(
            f"selector must be a FedChi2Selector; got {type(selector).__name__}."
        )
    selector = clone(selector)
    selector._validate_params()
    if selector.method != "sketch" or selector.statistic != "sklearn":
        raise ValueError(
            "the Flower deployment runs FedChi2Selector(method='sketch', "
            f"statistic='sklearn'); got method={selector.method!r}, "
            f"statistic={selector.statistic!r}."
        )
    ell = selector._resolve_n_projections()
    classes, width, nodes = _public_shape(session, nodes, classes, n_features)
    n_classes = classes.shape[0]
    plan, nodes = _round_one_plan(session, nodes, n_classes, width, selector, max_value)
    total, round1 = _secure_sum(
        session,
        "chi2_marginals",
        nodes,
        lambda _: {
            "classes": classes,
            "frac_bits": plan.frac_bits,
            "bound": plan.bound,
            "n_clients": plan.n_clients,
        },
        n_classes + width,
        max_attempts,
    )
    marginals = chi2_server_marginals(
        plan.decode(total),
        n_classes=n_classes,
        n_features=width,
        n_samples=sum(int(session.info[n]["selection_n"]) for n in round1),
        max_value=max_value,
    )
    bits = chi2_frac_bits(marginals, frac_bits=selector.frac_bits)
    sketch_request = {
        "classes": classes,
        "class_counts": marginals.class_counts,
        "row_totals": marginals.row_totals,
        "n_projections": ell,
        "expected_split": selector.expected_split,
        "n_clients": len(round1),
        "frac_bits": bits,
    }
    total, round2 = _secure_sum(
        session,
        "chi2_sketch",
        round1,
        lambda _: sketch_request,
        width * ell,
        max_attempts,
    )
    sketch = fixed_point_decode(total.reshape(width, ell), bits[:, None]).T.copy()
    selector.scores_, selector.pvalues_ = chi2_server_decode(
        sketch, marginals, estimator=selector.estimator, n_projections=ell
    )
    labels = session.labels(round1)
    selector.dof_ = _dof(marginals)
    selector.classes_ = classes
    selector.clients_ = labels
    selector.n_clients_ = len(round1)
    selector.dropped_clients_ = labels[[n not in round2 for n in round1]]
    selector.class_counts_ = marginals.class_counts
    selector.feature_totals_ = marginals.row_totals
    selector.n_projections_ = ell
    selector.sketch_ = sketch
    selector.n_features_in_ = width
    return selector, round1


def _public_shape(session, nodes, classes, n_features):
    """The round's class list and feature count, and the nodes that match.

    Both are public parameters of the server, fixed before the round and
    never voted: a node announcing another feature count is left out. Without
    ``n_features`` the nodes must agree (one node announcing another count
    stops the run, naming it, instead of a majority deciding who is right).
    Without ``classes`` the class list is the union of the nodes' announced
    lists (each checked against the policy's ``max_classes`` at hello, and
    their union too; nodes announcing labels of different kinds, int and
    string, stop the run, see :func:`_one_label_kind`): a convenience that
    lets every node add labels, so a server that knows its classes passes
    them.
    """
    policy = get_config()
    counts = {n: session.info[n]["n_features"] for n in nodes}
    if n_features is None:
        widths = sorted(set(counts.values()))
        if len(widths) > 1:
            raise ValueError(
                f"the nodes announce different feature counts "
                f"({_per_node(session, counts)}) and the "
                "round has no public n_features to tell which is right: pass "
                "n_features (fixed before the round) to leave the others out."
            )
        if not widths:
            raise RuntimeError("FED-chi2: no node is left to run the selection.")
        width = int(widths[0])
    else:
        width = _check_policy_int(n_features, "n_features", policy["max_features"])
    reasons = {
        node: f"it announces {count} features; the round's public n_features is {width}"
        for node, count in counts.items()
        if count != width
    }
    kept = session.leave_out(nodes, reasons, invalid=True)
    from_nodes = classes is None
    if from_nodes:
        _one_label_kind(session, kept)
        classes = np.unique(np.concatenate([session.info[n]["classes"] for n in kept]))
    classes = np.asarray(classes)
    if classes.ndim != 1 or classes.shape[0] < 1:
        raise ValueError(f"classes must be a non-empty 1-D array; got {classes!r}.")
    if classes.shape[0] > policy["max_classes"]:
        raise ValueError(
            f"the round's class list has {classes.shape[0]} classes > the plan "
            f"policy's max_classes={policy['max_classes']}"
            + (" (the union of the nodes' lists)." if from_nodes else ".")
        )
    return classes, width, kept


def _one_label_kind(session, nodes):
    """Check that the nodes' class lists hold labels of one kind (int or string).

    Without public ``classes`` the round's list is the union of the nodes'
    lists; one node's string labels would turn the union of int labels into
    strings (and every honest node's labels into unknown ones). Which kind
    is right is not voted (a lying majority would decide): nodes that
    disagree stop the run, naming each node's kind, and the error asks for
    ``classes``.
    """
    if not nodes:
        raise RuntimeError("FED-chi2: no node is left to run the selection.")
    kinds = {
        n: "string" if session.info[n]["classes"].dtype.kind == "U" else "int"
        for n in nodes
    }
    if len(set(kinds.values())) > 1:
        raise ValueError(
            f"the nodes' class lists mix int and string labels "
            f"({_per_node(session, kinds)}) and the round has no public class list "
            "to tell which is right: pass classes (fixed before the round)."
        )


def _per_node(session, values):
    """``"node n (client label): value, ..."`` for an error naming each node."""
    return ", ".join(
        f"node {n} (client {session.info[n]['label']!r}): {v}"
        for n, v in values.items()
    )


def _round_one_plan(session, nodes, n_classes, width, selector, max_value):
    """Round one's public plan from the nodes' announcements (chi2_server_plan).

    A node whose announced rows or column bounds are out of the round's
    public bounds is left out with an
    :class:`~skfedcp.exceptions.InvalidMessageWarning` naming it (a
    dishonest node cannot turn the plan's scale into NaN, nor make it wrap).
    Returns the plan and the kept nodes.
    """
    labels = session.labels(nodes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = chi2_server_plan(
                [session.info[n]["selection_n"] for n in nodes],
                [session.info[n].get("column_bound") for n in nodes],
                n_classes=n_classes,
                n_features=width,
                max_client_size=session.max_client_size,
                max_clients=session.max_clients,
                max_value=max_value,
                integer_x=all(bool(session.info[n]["integer_x"]) for n in nodes),
                frac_bits=selector.frac_bits,
                clients=labels,
                on_invalid="exclude",
            )
        except InvalidMessageError:
            if not nodes:
                raise RuntimeError(
                    "FED-chi2: no node is left to run the selection."
                ) from None
            raise
    texts = []
    for w in caught:
        if issubclass(w.category, InvalidMessageWarning):
            texts.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    excluded = set(result.excluded.tolist())
    for node, label in zip(nodes, labels.tolist(), strict=True):
        if label in excluded:
            marker = f"client {label!r}: "
            reason = next((t for t in texts if marker in t), marker)
            reason = reason[reason.find(marker) :].split(". The client", 1)[0]
            session.exclude(
                node,
                "its announced size or field 'column_bound' is out of the "
                f"round's public plan ({reason})",
                invalid=True,
            )
    return result.plan, [nodes[i] for i in result.kept]
