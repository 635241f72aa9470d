"""Randomized response (k-ary and binary) with exact channels and de-biasing."""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._typing import SecureRandomStateLike
from ._randomness import check_random_source
from ._validation import _check_int, check_privacy_params

__all__ = [
    "binary_randomized_response",
    "binary_randomized_response_probabilities",
    "debias_fraction",
    "debias_frequencies",
    "k_ary_randomized_response",
    "k_ary_randomized_response_probabilities",
]


def k_ary_randomized_response(
    labels: ArrayLike,
    *,
    n_classes: int,
    epsilon: float,
    random_state: SecureRandomStateLike = None,
) -> NDArray[np.int64]:
    """Privatise labels with k-ary randomized response (k-RR).

    Each label is kept with probability ``e^eps / (e^eps + k - 1)`` and
    otherwise replaced by one of the other ``k - 1`` labels, uniformly.
    Equivalently: with probability ``beta = k / (k - 1 + e^eps)`` the label is
    redrawn uniformly from all ``k`` labels.

    Parameters
    ----------
    labels : array-like of int of shape (n_samples,)
        True labels in ``{0, ..., n_classes - 1}``; one label per user.
    n_classes : int
        Number of classes ``k >= 2``.
    epsilon : float
        Local privacy parameter, ``> 0``.
    random_state : int, Generator, RandomState, "secure" or None, default=None
        Source of randomness (``"secure"``: operating-system randomness with
        exact Bernoulli and uniform draws, for deployment). A
        :class:`~numpy.random.SeedSequence` is accepted as a seed.

    Returns
    -------
    noisy_labels : ndarray of int of shape (n_samples,)

    See Also
    --------
    k_ary_randomized_response_probabilities : The channel matrix.
    debias_frequencies : Unbiased class frequencies from noisy labels.

    Notes
    -----
    Each output satisfies ``epsilon``-local DP for its label: the largest ratio
    of output probabilities over two inputs is exactly ``e^epsilon``
    (Warner 1965; Kairouz et al. 2016). Only the label is protected.
    Randomization happens on the user's side; in a simulation the draws of all
    users come from one source.

    Examples
    --------
    >>> from skfedcp.privacy import k_ary_randomized_response
    >>> k_ary_randomized_response([0, 1, 2, 2], n_classes=3, epsilon=50.0,
    ...                           random_state=0)
    array([0, 1, 2, 2])
    """
    n_classes = _check_int(n_classes, "n_classes", low=2)
    epsilon = _check_epsilon(epsilon)
    labels = _check_labels(labels, n_classes, "labels")
    source = check_random_source(random_state)
    keep_probability, _ = _channel(n_classes, epsilon)
    keep = source.bernoulli(keep_probability, labels.shape[0])
    noisy = labels.copy()
    # A uniform offset in 1..k-1 gives a uniform label among the other k - 1.
    offsets = source.integers(n_classes - 1, int(np.count_nonzero(~keep))) + 1
    noisy[~keep] = (labels[~keep] + offsets) % n_classes
    return noisy


def k_ary_randomized_response_probabilities(
    *, n_classes: int, epsilon: float
) -> NDArray[np.float64]:
    """Channel matrix of :func:`k_ary_randomized_response`.

    Parameters
    ----------
    n_classes : int
        Number of classes ``k >= 2``.
    epsilon : float
        Local privacy parameter, ``> 0``.

    Returns
    -------
    channel : ndarray of shape (n_classes, n_classes)
        ``channel[i, j] = P(noisy label = j | label = i)``: ``e^eps / (e^eps +
        k - 1)`` on the diagonal, ``1 / (e^eps + k - 1)`` elsewhere.

    Examples
    --------
    >>> from skfedcp.privacy import k_ary_randomized_response_probabilities
    >>> k_ary_randomized_response_probabilities(n_classes=3, epsilon=math.log(2))
    array([[0.5 , 0.25, 0.25],
           [0.25, 0.5 , 0.25],
           [0.25, 0.25, 0.5 ]])
    """
    n_classes = _check_int(n_classes, "n_classes", low=2)
    epsilon = _check_epsilon(epsilon)
    keep, other = _channel(n_classes, epsilon)
    channel = np.full((n_classes, n_classes), other)
    np.fill_diagonal(channel, keep)
    return channel


def binary_randomized_response(
    bits: ArrayLike, *, epsilon: float, random_state: SecureRandomStateLike = None
) -> NDArray[np.int64] | NDArray[np.bool_]:
    """Privatise bits with Warner's randomized response.

    Each bit is reported truthfully with probability ``e^eps / (1 + e^eps)``
    and flipped otherwise (k-RR with ``k = 2``).

    Parameters
    ----------
    bits : array-like of shape (n_samples,)
        Bits in ``{0, 1}`` (integers or booleans).
    epsilon : float
        Local privacy parameter, ``> 0``.
    random_state : int, Generator, RandomState, "secure" or None, default=None
        Source of randomness; a :class:`~numpy.random.SeedSequence` is
        accepted as a seed.

    Returns
    -------
    noisy_bits : ndarray of shape (n_samples,)
        Same dtype as ``bits`` (bool stays bool, integers become int64).

    See Also
    --------
    binary_randomized_response_probabilities : The 2 x 2 channel.
    debias_fraction : Unbiased fraction of ones from noisy bits.

    Notes
    -----
    ``epsilon``-local DP for each bit. Users answer once; repeated questions
    about the same bit compose (``k`` answers cost ``k * epsilon``).

    Examples
    --------
    >>> from skfedcp.privacy import binary_randomized_response
    >>> binary_randomized_response([True, False, True], epsilon=50.0,
    ...                            random_state=0)
    array([ True, False,  True])
    """
    epsilon = _check_epsilon(epsilon)
    arr = np.asarray(bits)
    is_bool = arr.dtype == np.bool_
    labels = _check_labels(arr.astype(np.int64) if is_bool else arr, 2, "bits")
    source = check_random_source(random_state)
    keep_probability, _ = _channel(2, epsilon)
    flip = ~source.bernoulli(keep_probability, labels.shape[0])
    noisy = np.where(flip, 1 - labels, labels)
    return noisy.astype(bool) if is_bool else noisy


def binary_randomized_response_probabilities(*, epsilon: float) -> NDArray[np.float64]:
    """Channel matrix of :func:`binary_randomized_response`.

    Parameters
    ----------
    epsilon : float
        Local privacy parameter, ``> 0``.

    Returns
    -------
    channel : ndarray of shape (2, 2)
        ``channel[b, r] = P(report r | bit b)``.

    Examples
    --------
    >>> from skfedcp.privacy import binary_randomized_response_probabilities
    >>> binary_randomized_response_probabilities(epsilon=math.log(3))
    array([[0.75, 0.25],
           [0.25, 0.75]])
    """
    return k_ary_randomized_response_probabilities(n_classes=2, epsilon=epsilon)


def debias_frequencies(
    noisy_counts_or_freqs: ArrayLike, *, n_classes: int, epsilon: float
) -> NDArray[np.float64]:
    """Unbiased class frequencies (or counts) from k-RR outputs.

    With ``p = e^eps / (e^eps + k - 1)`` and ``r = 1 / (e^eps + k - 1)``, a
    noisy count has mean ``r n + (p - r) c_j``, so
    ``c_j_hat = (noisy_j - r * n) / (p - r)`` with ``n`` the total. This is
    ``(Fn - beta / k) / (1 - beta)`` in the notation of Penso et al.

    Parameters
    ----------
    noisy_counts_or_freqs : array-like of shape (..., n_classes)
        Counts (or frequencies) of the noisy labels along the last axis. The
        total along that axis is taken as ``n`` (1 for frequencies).
    n_classes : int
        Number of classes ``k >= 2``.
    epsilon : float
        Local privacy parameter used by the users, ``> 0``.

    Returns
    -------
    estimate : ndarray of shape (..., n_classes)
        Unbiased estimate on the input's scale (counts or frequencies). It
        sums to the same total but is not projected: entries can be negative
        or exceed the total.

    Examples
    --------
    >>> from skfedcp.privacy import debias_frequencies
    >>> debias_frequencies([0.5, 0.25, 0.25], n_classes=3, epsilon=math.log(2))
    array([1., 0., 0.])
    """
    n_classes = _check_int(n_classes, "n_classes", low=2)
    epsilon = _check_epsilon(epsilon)
    noisy = _as_floats(
        noisy_counts_or_freqs, "noisy_counts_or_freqs", "an array of numbers"
    )
    if noisy.ndim < 1 or noisy.shape[-1] != n_classes:
        raise ValueError(
            f"noisy_counts_or_freqs must have n_classes={n_classes} entries along "
            f"its last axis; got shape {noisy.shape}."
        )
    if not np.isfinite(noisy).all():
        raise ValueError("noisy_counts_or_freqs must be finite.")
    _, other = _channel(n_classes, epsilon)
    total = noisy.sum(axis=-1, keepdims=True)
    return (noisy - other * total) / _keep_minus_other(n_classes, epsilon)


def debias_fraction(
    noisy_fraction: ArrayLike, *, epsilon: float
) -> float | NDArray[np.float64]:
    """Unbiased fraction of ones from binary randomized-response reports.

    ``f_hat = c * noisy_fraction - 1 / (e^eps - 1)`` with
    ``c = (e^eps + 1) / (e^eps - 1)``: the inverse of
    ``E[noisy] = r + (p - r) f`` for ``p = e^eps / (1 + e^eps)``,
    ``r = 1 - p``.

    Parameters
    ----------
    noisy_fraction : float or array-like
        Mean of the reported bits (of one group of users), in [0, 1].
    epsilon : float
        Local privacy parameter used by the users, ``> 0``.

    Returns
    -------
    fraction : float or ndarray
        Unbiased, not clipped to [0, 1].

    Examples
    --------
    >>> from skfedcp.privacy import debias_fraction
    >>> round(debias_fraction(0.75, epsilon=math.log(3)), 12)
    1.0
    """
    epsilon = _check_epsilon(epsilon)
    noisy = _as_floats(noisy_fraction, "noisy_fraction", "a number or an array")
    if not np.isfinite(noisy).all():
        raise ValueError("noisy_fraction must be finite.")
    if ((noisy < 0) | (noisy > 1)).any():
        raise ValueError(
            "noisy_fraction must lie in [0, 1] (a mean of 0/1 reports); got "
            f"{noisy_fraction!r}."
        )
    _, other = _channel(2, epsilon)
    estimate = (noisy - other) / _keep_minus_other(2, epsilon)
    return float(estimate) if estimate.ndim == 0 else estimate


def _check_epsilon(epsilon: float) -> float:
    """``epsilon`` checked: a finite number > 0 (``None`` is refused too)."""
    checked = check_privacy_params(epsilon=epsilon).epsilon
    if checked is None:  # check_privacy_params skips a None
        raise TypeError("epsilon must be a finite number > 0; got None.")
    return checked


def _as_floats(values: ArrayLike, name: str, expected: str) -> NDArray[np.float64]:
    """``values`` as a float64 array; ``TypeError`` naming ``name`` if not numbers."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be {expected}; got {values!r}.") from exc


def _channel(n_classes: int, epsilon: float) -> tuple[float, float]:
    """``(P(keep), P(each other label))`` without overflowing ``e^eps``."""
    tail = math.exp(-epsilon)
    denominator = 1.0 + (n_classes - 1) * tail
    return 1.0 / denominator, tail / denominator


def _keep_minus_other(n_classes: int, epsilon: float) -> float:
    """``(e^eps - 1) / (e^eps + k - 1)``, accurate for small ``eps``."""
    return -math.expm1(-epsilon) / (1.0 + (n_classes - 1) * math.exp(-epsilon))


def _check_labels(labels: ArrayLike, n_classes: int, name: str) -> NDArray[np.int64]:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}.")
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or not (arr == np.round(arr)).all():
            raise ValueError(f"{name} must hold integers in 0..{n_classes - 1}.")
    elif arr.dtype.kind not in "iub" and arr.shape[0] > 0:
        if not all(isinstance(v, Integral) for v in arr.tolist()):
            raise TypeError(f"{name} must hold integers; got dtype {arr.dtype}.")
    arr = arr.astype(np.int64)
    if arr.shape[0] and (arr.min() < 0 or arr.max() >= n_classes):
        raise ValueError(
            f"{name} must lie in 0..{n_classes - 1}; got values in "
            f"[{arr.min()}, {arr.max()}]."
        )
    return arr
