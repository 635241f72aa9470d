"""Correction terms and sample sizes of the local-DP calibrations (numbers only).

``Delta_L`` (LDP-L, k-ary randomized response on labels) and ``Delta_S``
(LDP-S, binary randomized response in a T-round bisection) depend only on
public numbers, so they can be compared before any privacy budget is spent.
The calibrators in :mod:`skfedcp.calibrators` use the same functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["LDPCorrection", "LDPSampleSize", "ldp_correction", "ldp_sample_size"]


#: A number or an array of them (the helpers broadcast).
_Real = float | NDArray[Any]


class LDPCorrection(NamedTuple):
    """Coverage corrections ``Delta_L`` (LDP-L) and ``Delta_S`` (LDP-S)."""

    label: float | NDArray[np.float64]
    score: float | NDArray[np.float64]


class LDPSampleSize(NamedTuple):
    """Smallest calibration sizes reaching a correction, for LDP-L and LDP-S."""

    label: int | NDArray[np.int64]
    score: int | NDArray[np.int64]


def _krr_beta(n_classes: _Real, epsilon: _Real) -> _Real:
    """``beta = k / (k - 1 + e^eps)``, the k-RR resampling probability."""
    tail = np.exp(-epsilon)
    return n_classes * tail / (1.0 + (n_classes - 1) * tail)


def _rr_constant(epsilon: _Real) -> _Real:
    """``c = (e^eps + 1) / (e^eps - 1)``, the binary-RR de-biasing gain."""
    return (1.0 + np.exp(-epsilon)) / -np.expm1(-epsilon)


def _label_correction(
    n: _Real, n_classes: _Real, epsilon: _Real, delta: _Real
) -> _Real:
    beta = _krr_beta(n_classes, epsilon)
    h = (1.0 - beta) / (1.0 + beta)
    return np.sqrt(np.log(4.0 / delta) / (2.0 * n * h**2))


#: LDP-S search rules: "tight" (zero band, upper end, one-sided Hoeffding) and
#: "paper" (band Delta_S / 2, two-sided Hoeffding, Delta_S = 2 t_S).
_SCORE_SEARCHES = ("tight", "paper")


def _score_log_term(delta: _Real, n_groups: _Real, search: str) -> _Real:
    """``K`` in ``Delta_S = c sqrt(K / n')`` for each search rule.

    ``"paper"``: ``Delta_S = 2 t_S`` with the two-sided per-round error
    ``t_S = c sqrt(ln(2T/delta) / (2 n'))``, so ``K = 2 ln(2T/delta)``.
    ``"tight"``: ``Delta_S`` is the one-sided per-round error
    ``c sqrt(ln(T/delta) / (2 n'))``, so ``K = ln(T/delta) / 2``.
    """
    if search == "paper":
        return 2.0 * np.log(2.0 * n_groups / delta)
    if search == "tight":
        return 0.5 * np.log(n_groups / delta)
    raise ValueError(f"search must be one of {_SCORE_SEARCHES}; got {search!r}.")


def _score_correction(
    group_size: _Real,
    epsilon: _Real,
    delta: _Real,
    n_groups: _Real,
    search: str = "paper",
) -> _Real:
    """``Delta_S = c sqrt(K / n')`` (:func:`_score_log_term`); ``inf`` if ``n' = 0``."""
    size = np.asarray(group_size, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return _rr_constant(epsilon) * np.sqrt(
            _score_log_term(delta, n_groups, search) / size
        )


def _check_int_array(values: ArrayLike, name: str, low: int) -> NDArray[np.int64]:
    arr = np.asarray(values)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be an integer (or an array of them) >= {low}.")
    if arr.dtype.kind == "f" and not (
        np.isfinite(arr).all() and (arr == np.round(arr)).all()
    ):
        raise ValueError(f"{name} must hold integers >= {low}.")
    if (arr < low).any():
        raise ValueError(f"{name} must be >= {low}; got {arr.min()}.")
    return arr.astype(np.int64)


def _check_analysis_params(
    n_classes: ArrayLike, epsilon: ArrayLike, delta: ArrayLike, n_groups: ArrayLike
) -> tuple[
    NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]
]:
    classes = _check_int_array(n_classes, "n_classes", 2)
    eps = np.asarray(epsilon, dtype=np.float64)
    if not (np.isfinite(eps).all() and (eps > 0).all()):
        raise ValueError(f"epsilon must be finite and > 0; got {epsilon!r}.")
    failure = np.asarray(delta, dtype=np.float64)
    if not ((failure > 0) & (failure < 1)).all():
        raise ValueError(f"delta must be in the open interval (0, 1); got {failure!r}.")
    groups = _check_int_array(n_groups, "n_groups", 1)
    return classes, eps, failure, groups


def _maybe_scalar(*arrays: _Real) -> tuple[Any, ...]:
    """The arrays broadcast together, as Python scalars if 0-d."""
    broadcast = np.broadcast_arrays(*arrays)
    if broadcast[0].ndim == 0:
        return tuple(a.item() for a in broadcast)
    return tuple(broadcast)


def ldp_correction(
    n: ArrayLike,
    n_classes: ArrayLike,
    epsilon: ArrayLike,
    delta: ArrayLike = 0.001,
    n_groups: ArrayLike = 10,
    *,
    search: Literal["tight", "paper"] = "tight",
) -> LDPCorrection:
    """Coverage corrections of LDP-L and LDP-S before spending any budget.

    ``Delta_L`` (Penso et al., Theorem 2.1) and ``Delta_S`` (an explicit
    Hoeffding constant, see ``search``) depend only on public numbers, so
    they tell which method to pick, and whether the starred variant is
    informative (``Delta < alpha``), before any user answers.

    Parameters
    ----------
    n : int or array-like of int
        Number of calibration users (rows), ``>= 1``.
    n_classes : int or array-like of int
        Number of classes ``k >= 2`` (only ``Delta_L`` depends on it).
    epsilon : float or array-like
        Local privacy parameter of each user, ``> 0``.
    delta : float or array-like, default=0.001
        Failure probability of the guarantee, in (0, 1).
    n_groups : int or array-like of int, default=10
        Number ``T`` of LDP-S groups (bisection steps).
    search : {"tight", "paper"}, default="tight"
        LDP-S search rule (the ``search`` parameter of
        :class:`LDPScoreCalibrator`; ``Delta_L`` does not depend on it):
        ``"tight"`` (no stopping band, the interval's upper end, one-sided
        error) or ``"paper"`` (band ``Delta_S / 2``, two-sided error,
        ``Delta_S = 2 t_S``).

    Returns
    -------
    correction : LDPCorrection
        Named tuple ``(label, score)``: floats, or arrays broadcast over the
        inputs. ``score`` is ``inf`` when ``n < n_groups``.

    See Also
    --------
    ldp_sample_size : The inverse: users needed for a given correction.

    Notes
    -----
    With ``beta = k / (k - 1 + e^eps)``, ``h = (1 - beta) / (1 + beta)``,
    ``c = (e^eps + 1) / (e^eps - 1)`` and ``n' = floor(n / T)``:

    * ``Delta_L = sqrt(ln(4 / delta) / (2 n h^2))``;
    * ``Delta_S = c sqrt(ln(T / delta) / (2 n'))`` (``search="tight"``, proved
      in the user guide) or ``c sqrt(2 ln(2 T / delta) / n')``
      (``search="paper"``: twice the two-sided per-round error).

    Both shrink as ``1 / sqrt(n)``, so for ``n`` a multiple of ``T`` their
    ratio does not depend on ``n``; with ``search="paper"``,
    ``Delta_S / Delta_L = 2 c h sqrt(T ln(2T/delta) / ln(4/delta))``. LDP-S
    wins only when ``h`` is small, i.e. many classes or a small
    ``epsilon``.

    Examples
    --------
    >>> from skfedcp.calibrators import ldp_correction
    >>> corr = ldp_correction(23640, 8, 4.0, 0.001)
    >>> round(corr.label, 5), round(corr.score, 4)
    (0.0172, 0.0458)
    >>> round(ldp_correction(23640, 8, 4.0, 0.001, search="paper").score, 4)
    0.095
    >>> ldp_correction([1000, 100000], 10, 4.0).label.round(4)
    array([0.0884, 0.0088])
    """
    users = _check_int_array(n, "n", 1)
    classes, eps, failure, groups = _check_analysis_params(
        n_classes, epsilon, delta, n_groups
    )
    _score_log_term(0.5, 1, search)  # validates search
    label = _label_correction(users, classes, eps, failure)
    score = _score_correction(users // groups, eps, failure, groups, search)
    return LDPCorrection(*_maybe_scalar(label, score))


def ldp_sample_size(
    correction: ArrayLike,
    n_classes: ArrayLike,
    epsilon: ArrayLike,
    delta: ArrayLike = 0.001,
    n_groups: ArrayLike = 10,
    *,
    search: Literal["tight", "paper"] = "tight",
) -> LDPSampleSize:
    """Smallest numbers of users for which ``Delta_L`` and ``Delta_S`` reach a target.

    Parameters
    ----------
    correction : float or array-like
        Target correction ``Delta`` in (0, 1].
    n_classes : int or array-like of int
        Number of classes ``k >= 2``.
    epsilon : float or array-like
        Local privacy parameter, ``> 0``.
    delta : float or array-like, default=0.001
        Failure probability, in (0, 1).
    n_groups : int or array-like of int, default=10
        Number ``T`` of LDP-S groups.
    search : {"tight", "paper"}, default="tight"
        LDP-S search rule (see :func:`ldp_correction`).

    Returns
    -------
    sizes : LDPSampleSize
        Named tuple ``(label, score)`` of the smallest ``n`` with
        ``ldp_correction(n, ...) <= correction``. The LDP-S size is a multiple
        of ``n_groups``: ``Delta_S`` depends on ``n`` through
        ``floor(n / T)``.

    See Also
    --------
    ldp_correction : The corrections for a given ``n``.

    Notes
    -----
    ``n_L = ceil(ln(4/delta) / (2 Delta^2 h^2))``;
    ``n_S = T ceil(c^2 ln(T/delta) / (2 Delta^2))`` (``search="tight"``) or
    ``T ceil(2 c^2 ln(2T/delta) / Delta^2)`` (``search="paper"``).

    Examples
    --------
    >>> from skfedcp.calibrators import ldp_sample_size
    >>> ldp_sample_size(0.05, 10, 4.0, delta=0.1)
    LDPSampleSize(label=1392, score=9920)
    >>> ldp_sample_size(0.05, 10, 4.0, delta=0.1, search="paper")
    LDPSampleSize(label=1392, score=45610)
    """
    corr = np.asarray(correction, dtype=np.float64)
    if not ((corr > 0) & (corr <= 1)).all():
        raise ValueError(f"correction must be in (0, 1]; got {correction!r}.")
    classes, eps, failure, groups = _check_analysis_params(
        n_classes, epsilon, delta, n_groups
    )
    beta = _krr_beta(classes, eps)
    h = (1.0 - beta) / (1.0 + beta)
    n_label = _smallest(
        np.ceil(np.log(4.0 / failure) / (2.0 * corr**2 * h**2)),
        lambda m: _label_correction(m, classes, eps, failure),
        corr,
    )
    group = _smallest(
        np.ceil(
            _rr_constant(eps) ** 2 * _score_log_term(failure, groups, search) / corr**2
        ),
        lambda m: _score_correction(m, eps, failure, groups, search),
        corr,
    )
    label, score = _maybe_scalar(
        n_label.astype(np.int64), (group * groups).astype(np.int64)
    )
    return LDPSampleSize(label, score)


def _smallest(
    guess: NDArray[np.float64],
    correction_of: Callable[[NDArray[np.float64]], Any],
    target: NDArray[np.float64],
) -> NDArray[np.float64]:
    """The smallest size ``m >= 1`` with ``correction_of(m) <= target``.

    ``guess`` is the float ceiling of the closed-form size, off by at most
    one either way: step down if ``guess - 1`` already reaches the target,
    up if ``guess`` does not.
    """
    size = np.maximum(guess, 1)
    below = np.maximum(size - 1, 1)
    size = np.where(correction_of(below) <= target, below, size)
    return np.where(correction_of(size) > target, size + 1, size)
