"""Several confidence levels from one fit: checks, nesting and the per-level budget."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "check_alpha_levels",
    "forward_privacy_params",
    "monotone_thresholds",
    "nested_intervals",
    "spawn_seeds",
    "stack_level_messages",
    "summarize_level",
]


def check_alpha_levels(alpha: Any) -> NDArray[np.float64] | None:
    """``None`` for a scalar ``alpha``; the levels as a 1-D array for a sequence.

    A sequence must be non-empty, one-dimensional, and hold distinct floats in
    the open interval (0, 1); the levels keep the order given. A scalar
    (anything zero-dimensional) is left to the caller's own check.

    Examples
    --------
    >>> check_alpha_levels(0.1) is None
    True
    >>> check_alpha_levels([0.2, 0.1, 0.05])
    array([0.2 , 0.1 , 0.05])
    """
    if np.ndim(alpha) == 0:  # a float, or a wrong scalar for the caller to refuse
        return None
    try:
        levels = np.asarray(alpha, dtype=np.float64)
    except (TypeError, ValueError):
        levels = None
    if (
        levels is None
        or levels.ndim != 1
        or any(isinstance(a, bool | np.bool_ | str) for a in alpha)
    ):
        raise ValueError(
            "alpha must be a float in (0, 1) or a 1-D sequence of such floats; "
            f"got {alpha!r}."
        )
    if levels.size == 0:
        raise ValueError("alpha is an empty sequence; give at least one level.")
    bad = ~((levels > 0) & (levels < 1))
    if bad.any():
        raise ValueError(
            "every level of alpha must be in the open interval (0, 1); got "
            f"{levels[bad].tolist()} in alpha={levels.tolist()}."
        )
    if np.unique(levels).size != levels.size:
        raise ValueError(
            f"the levels of alpha must be distinct; got alpha={levels.tolist()}."
        )
    return levels


def _largest_alpha_first(alphas: NDArray[np.float64]) -> NDArray[np.intp]:
    return np.argsort(-alphas, kind="stable")


def monotone_thresholds(
    thresholds: ArrayLike, alphas: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Thresholds made non-increasing in ``alpha`` by a running maximum.

    Going from the largest ``alpha`` to the smallest, each threshold becomes
    the largest of its own and those of every larger ``alpha``. Raising a
    threshold only enlarges a prediction set, so each level keeps its
    coverage guarantee, and the sets become nested. ``thresholds`` has one
    row per level (a pair per row for the asymmetric CQR score: each side
    separately); the order of ``alphas`` is kept.

    Examples
    --------
    >>> monotone_thresholds([0.7, 0.8, 2.0], np.array([0.1, 0.2, 0.05]))
    array([0.8, 0.8, 2. ])
    """
    t = np.array(thresholds, dtype=np.float64)
    order = _largest_alpha_first(alphas)
    t[order] = np.maximum.accumulate(t[order], axis=0)
    return t


def nested_intervals(
    intervals: Sequence[NDArray[np.float64]], alphas: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Stack per-level ``(n, 2)`` intervals into ``(n, 2, n_levels)``, nested.

    Going from the largest ``alpha`` to the smallest, each interval becomes
    the hull of its own and those of every larger ``alpha``: a superset, so
    each level keeps its guarantee, and a smaller ``alpha`` never gives a
    narrower interval on any row (crossed CQR bounds, returned as the span
    between them, can otherwise shrink when the threshold grows).

    Examples
    --------
    >>> out = nested_intervals(
    ...     [np.array([[0.0, 1.0]]), np.array([[0.2, 0.8]])], np.array([0.1, 0.2])
    ... )
    >>> out[0].T.tolist()
    [[0.0, 1.0], [0.2, 0.8]]
    """
    out = np.stack(intervals, axis=-1)
    order = _largest_alpha_first(alphas)
    out[:, 0, order] = np.minimum.accumulate(out[:, 0, order], axis=-1)
    out[:, 1, order] = np.maximum.accumulate(out[:, 1, order], axis=-1)
    return out


def stack_level_messages(
    per_level: Sequence[Mapping[str, Any]],
) -> dict[str, NDArray[Any]]:
    """One ``messages_`` dict for all levels: each field gets a level axis.

    Field ``f`` of level ``j`` (an array with one entry per client) becomes
    ``messages[f][:, j]``: shape ``(n_clients, n_levels, ...)``, so a QQ
    client's row holds its one message per level. Fields whose shapes differ
    across levels (e.g. LDP-S reports when a level stops early) become an
    object array of shape ``(n_clients, n_levels)``. ``client`` is kept once.

    Examples
    --------
    >>> m = stack_level_messages([
    ...     {"client": np.array([0, 1]), "quantile": np.array([1.0, 2.0])},
    ...     {"client": np.array([0, 1]), "quantile": np.array([3.0, 4.0])},
    ... ])
    >>> m["quantile"].tolist()
    [[1.0, 3.0], [2.0, 4.0]]
    """
    first = per_level[0]
    out: dict[str, NDArray[Any]] = {"client": np.asarray(first["client"])}
    for key in first:
        if key == "client":
            continue
        values = [np.asarray(m[key]) for m in per_level]
        if len({v.shape for v in values}) == 1:
            out[key] = np.stack(values, axis=1)
        else:
            ragged = np.empty((values[0].shape[0], len(values)), dtype=object)
            for j, v in enumerate(values):
                for i in range(v.shape[0]):
                    ragged[i, j] = v[i]
            out[key] = ragged
    return out


def summarize_level(entry: Any) -> tuple[Any, float, dict[str, Any]]:
    """``(threshold, epsilon_spent, messages)`` of one level's calibrator(s).

    A ``(lower, upper)`` pair releases twice per client: its loss is the sum
    (sequential composition) and each message field is prefixed with its side.
    """
    if not isinstance(entry, tuple):
        return (
            entry.threshold_,
            float(getattr(entry, "epsilon_spent_", math.inf)),
            entry.messages_,
        )
    lower, upper = entry
    messages = {"client": lower.messages_["client"]}
    for side, calibrator in zip(("lower", "upper"), entry, strict=True):
        for key, value in calibrator.messages_.items():
            if key != "client":
                messages[f"{side}_{key}"] = value
    spent = float(
        getattr(lower, "epsilon_spent_", np.inf)
        + getattr(upper, "epsilon_spent_", np.inf)
    )
    # (2,), or (n_groups, 2) for group-conditional calibrators.
    thresholds = np.stack([lower.threshold_, upper.threshold_], axis=-1)
    return thresholds, spent, messages


def spawn_seeds(seed: Any, n: int) -> list[Any]:
    """``n`` independent calibrator seeds from ``seed``.

    ``None`` (fresh entropy each) and ``"secure"`` are repeated; a
    SeedSequence gives its next ``n`` spawned children.
    """
    if seed is None or isinstance(seed, str):
        return [seed] * n
    return seed.spawn(n)


def forward_privacy_params(
    calibrator, *, epsilon, score_bounds, natural_bounds, n_levels=1
):
    """Set a wrapper's privacy parameters on a (freshly cloned) calibrator.

    With ``n_levels`` releases the budget (the wrapper's ``epsilon``, or the
    calibrator's own when that is None) is split equally among them.
    """
    params = calibrator.get_params(deep=False)
    updates = {}
    if "epsilon" in params:
        total = params["epsilon"] if epsilon is None else epsilon
        if n_levels > 1 and total is not None:
            updates["epsilon"] = total / n_levels
        elif epsilon is not None:
            updates["epsilon"] = epsilon
    if "score_bounds" in params:
        if score_bounds is not None:
            updates["score_bounds"] = score_bounds
        elif params["score_bounds"] is None and natural_bounds is not None:
            updates["score_bounds"] = natural_bounds
    if updates:
        calibrator.set_params(**updates)
