"""Ensemble statistics and the truncation filter of Two Students."""

from __future__ import annotations

from numbers import Real
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

__all__ = [
    "EnsembleStats",
    "TruncationResult",
    "credible_band",
    "ensemble_stats",
    "truncation_filter",
]

# 1.4826 * MAD estimates the standard deviation of a normal law.
_MAD_TO_STD = 1.482602218505602


class EnsembleStats(NamedTuple):
    """Per-point mean, spread and band of an ensemble (see :func:`ensemble_stats`)."""

    mean: np.ndarray
    std: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


class TruncationResult(NamedTuple):
    """Outcome of the truncation filter (see :func:`truncation_filter`)."""

    in_band_fraction: np.ndarray
    accepted: np.ndarray


def _check_predictions(predictions: ArrayLike, name: str) -> NDArray[np.float64]:
    P = np.asarray(predictions, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] == 0 or P.shape[1] == 0:
        raise ValueError(
            f"{name} must be a non-empty 2-D array of shape (n_models, n_points); "
            f"got shape {P.shape}."
        )
    if not np.isfinite(P).all():
        raise ValueError(f"{name} must be finite (no NaN or inf).")
    return P


def _check_level(value, name):
    if not isinstance(value, Real) or not 0 < float(value) < 1:
        raise ValueError(f"{name} must be a float in (0, 1); got {value!r}.")
    return float(value)


def ensemble_stats(
    predictions: ArrayLike, *, credible_level: float = 0.95
) -> EnsembleStats:
    """Mean, standard deviation and percentile band of an ensemble, point by point.

    This is the paper's ``EnsembleStats``: for member predictions
    ``P[m, j] = h(x_j; w_m)`` it returns the uniform mean, the standard
    deviation across members (``ddof=1``; zero for a single member) and the
    empirical ``(1 - credible_level) / 2`` and ``(1 + credible_level) / 2``
    quantiles (NumPy's linear interpolation, the paper's convention).

    Parameters
    ----------
    predictions : array-like of shape (n_models, n_points)
        Predictions of each ensemble member at each point.
    credible_level : float, default=0.95
        Probability mass of the percentile band, in (0, 1).

    Returns
    -------
    stats : EnsembleStats
        Named tuple ``(mean, std, lower, upper)`` of arrays of shape
        ``(n_points,)``.

    Examples
    --------
    >>> P = [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]]
    >>> stats = ensemble_stats(P, credible_level=0.5)
    >>> stats.mean, stats.std
    (array([1., 1.]), array([1., 0.]))
    >>> stats.lower, stats.upper
    (array([0.5, 1. ]), array([1.5, 1. ]))
    """
    P = _check_predictions(predictions, "predictions")
    level = _check_level(credible_level, "credible_level")
    a = (1.0 - level) / 2.0
    mean = P.mean(axis=0)
    std = P.std(axis=0, ddof=1) if P.shape[0] > 1 else np.zeros(P.shape[1])
    lower, upper = np.quantile(P, [a, 1.0 - a], axis=0)
    return EnsembleStats(mean, std, lower, upper)


def _band(P: NDArray[np.float64], method: str, level: float) -> NDArray[np.float64]:
    if method == "percentile":
        a = (1.0 - level) / 2.0
        return np.quantile(P, [a, 1.0 - a], axis=0)
    med = np.median(P, axis=0)
    mad = np.median(np.abs(P - med), axis=0)
    half = norm.ppf((1.0 + level) / 2.0) * _MAD_TO_STD * mad
    return np.stack([med - half, med + half])


def credible_band(
    predictions: ArrayLike,
    *,
    method: Literal["percentile", "mad"] = "percentile",
    credible_level: float = 0.95,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-point band that a plausible ensemble member should stay inside.

    ``"percentile"`` is the paper's credible band: the empirical
    ``(1 - credible_level) / 2`` and ``(1 + credible_level) / 2`` quantiles of
    the members' predictions. ``"mad"`` (skfedcp) is the robust band
    ``median ± z · 1.4826 · MAD`` with ``z = Φ⁻¹((1 + credible_level) / 2)``
    and ``MAD`` the median absolute deviation from the median. Its breakdown
    point is 50 %: a coherent group of drifted members smaller than half the
    ensemble cannot move it, whereas it moves the percentile band as soon as
    it exceeds ``(1 - credible_level) / 2`` of the ensemble.

    Parameters
    ----------
    predictions : array-like of shape (n_models, n_points)
        Predictions of the reference models at the reference points.
    method : {"percentile", "mad"}, default="percentile"
        How the band is built.
    credible_level : float, default=0.95
        Target mass of the band, in (0, 1).

    Returns
    -------
    lower, upper : ndarray of shape (n_points,)
        Band edges (inclusive).

    Examples
    --------
    >>> P = [[0.0], [1.0], [2.0], [3.0], [100.0]]
    >>> [b.round(2).tolist() for b in credible_band(P, method="percentile")]
    [[0.1], [90.3]]
    >>> [b.round(2).tolist() for b in credible_band(P, method="mad")]
    [[-0.91], [4.91]]
    """
    P = _check_predictions(predictions, "predictions")
    level = _check_level(credible_level, "credible_level")
    if method not in ("percentile", "mad"):
        raise ValueError(f"method must be 'percentile' or 'mad'; got {method!r}.")
    lower, upper = _band(P, method, level)
    return lower, upper


def _in_band(
    P: NDArray[np.float64], lower: NDArray[np.float64], upper: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Fraction of each row of ``P`` inside ``[lower, upper]`` (inclusive)."""
    return np.mean((P >= lower) & (P <= upper), axis=1)


def truncation_filter(
    predictions: ArrayLike,
    *,
    method: Literal["percentile", "mad"] = "mad",
    credible_level: float = 0.95,
    gamma: float = 0.8,
    reference: ArrayLike | None = None,
) -> TruncationResult:
    """Keep the candidate models whose predictions mostly lie in the others' band.

    Candidate ``g`` is scored by its *in-band fraction*
    ``delta_g = mean_q 1{lower_q <= P[g, q] <= upper_q}`` over the reference
    points and kept iff ``delta_g >= gamma`` (the paper's truncation rule,
    bounds and the threshold inclusive). The band for ``g`` is built by
    :func:`credible_band` from every *other* candidate plus the optional
    ``reference`` models (leave-one-out, skfedcp's one-shot reference: a
    candidate never vouches for itself).

    Parameters
    ----------
    predictions : array-like of shape (n_candidates, n_points)
        Predictions of the candidate models at the reference points.
    method : {"percentile", "mad"}, default="mad"
        Band of :func:`credible_band`; ``"percentile"`` is the paper's.
    credible_level : float, default=0.95
        Mass of the band, in (0, 1).
    gamma : float, default=0.8
        Minimum in-band fraction to keep a candidate, in (0, 1).
    reference : array-like of shape (n_reference, n_points), default=None
        Predictions of trusted models that join every candidate's band.

    Returns
    -------
    result : TruncationResult
        Named tuple ``(in_band_fraction, accepted)`` of arrays of shape
        ``(n_candidates,)``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> P = rng.normal(size=(30, 100))  # 30 candidates, 100 reference points
    >>> P[29] += 3.0  # one drifted candidate
    >>> result = truncation_filter(P)
    >>> np.flatnonzero(~result.accepted)
    array([29])
    >>> result.in_band_fraction[[0, 29]]
    array([0.93, 0.16])
    """
    P = _check_predictions(predictions, "predictions")
    level = _check_level(credible_level, "credible_level")
    gamma = _check_level(gamma, "gamma")
    if method not in ("percentile", "mad"):
        raise ValueError(f"method must be 'percentile' or 'mad'; got {method!r}.")
    if reference is None:
        R = np.empty((0, P.shape[1]))
    else:
        R = _check_predictions(reference, "reference")
        if R.shape[1] != P.shape[1]:
            raise ValueError(
                f"reference has {R.shape[1]} points but predictions has {P.shape[1]}."
            )
    if P.shape[0] + R.shape[0] < 2:
        raise ValueError(
            "the leave-one-out band needs at least one other model; got one "
            "candidate and no reference."
        )
    delta = np.empty(P.shape[0])
    for g in range(P.shape[0]):
        others = np.concatenate([np.delete(P, g, axis=0), R])
        lower, upper = _band(others, method, level)
        delta[g] = _in_band(P[g : g + 1], lower, upper)[0]
    return TruncationResult(delta, delta >= gamma)
