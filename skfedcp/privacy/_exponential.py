"""The exponential mechanism over a finite candidate set, sampled in log space."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp

from .._typing import SecureRandomStateLike
from ._randomness import check_random_source
from ._validation import _check_real, check_privacy_params

__all__ = ["exponential_mechanism", "exponential_mechanism_probabilities"]


def exponential_mechanism(
    utility: ArrayLike,
    *,
    epsilon: float,
    sensitivity: float,
    random_state: SecureRandomStateLike = None,
) -> int:
    """Pick a candidate index with the exponential mechanism.

    Candidate ``j`` is returned with probability proportional to
    ``exp(epsilon * utility[j] / (2 * sensitivity))``: **larger utility is
    better**. To minimise a loss ``w``, pass ``utility=-w``.

    Parameters
    ----------
    utility : array-like of shape (n_candidates,)
        Finite utility of each candidate, computed from the private data.
    epsilon : float
        Privacy parameter, ``> 0``.
    sensitivity : float
        Upper bound, ``> 0``, on ``|utility_D[j] - utility_D'[j]|`` over
        neighbouring data sets ``D, D'`` and all candidates ``j``.
    random_state : int, Generator, RandomState, SeedSequence, "secure" or None, \
            default=None
        Source of randomness; ``"secure"`` draws from the operating system's
        secure generator with exact sampling (see
        :mod:`skfedcp.privacy._randomness`).

    Returns
    -------
    index : int
        The chosen candidate, in ``0..n_candidates - 1``.

    See Also
    --------
    exponential_mechanism_probabilities : The exact output law.

    Notes
    -----
    The mechanism is ``epsilon``-DP (McSherry and Talwar 2007) for any
    neighbouring relation under which the utility has the stated sensitivity.
    Sampling uses Gumbel-max on the logits (NumPy sources) or exact integer
    sampling of the log-sum-exp normalised probabilities (``"secure"``), so it
    neither overflows nor underflows for large ``epsilon * utility``.

    References
    ----------
    .. [1] F. McSherry and K. Talwar, "Mechanism design via differential
       privacy", FOCS 2007.

    Examples
    --------
    >>> from skfedcp.privacy import exponential_mechanism
    >>> exponential_mechanism([0.0, 5.0, 1.0], epsilon=100.0, sensitivity=1.0,
    ...                       random_state=0)
    1
    """
    logits = _logits(utility, epsilon, sensitivity)
    source = check_random_source(random_state)
    return source.choice_from_log_weights(logits)


def exponential_mechanism_probabilities(
    utility: ArrayLike, *, epsilon: float, sensitivity: float, log: bool = False
) -> NDArray[np.float64]:
    """Exact output probabilities of :func:`exponential_mechanism`.

    Parameters
    ----------
    utility : array-like of shape (n_candidates,)
        Finite utility of each candidate (larger is better).
    epsilon : float
        Privacy parameter, ``> 0``.
    sensitivity : float
        Sensitivity bound of the utility, ``> 0``.
    log : bool, default=False
        Return natural-log probabilities (finite even where the probability
        underflows).

    Returns
    -------
    probabilities : ndarray of shape (n_candidates,)
        ``P(index = j)`` (or its log when ``log=True``).

    Examples
    --------
    >>> import numpy as np
    >>> from skfedcp.privacy import exponential_mechanism_probabilities
    >>> p = exponential_mechanism_probabilities(
    ...     [0.0, -1.0], epsilon=2.0, sensitivity=1.0)
    >>> np.round(p, 4)
    array([0.7311, 0.2689])
    """
    log_p = _log_probabilities(_logits(utility, epsilon, sensitivity))
    return log_p if log else np.exp(log_p)


def _check_epsilon(epsilon: float) -> float:
    """``epsilon`` validated by :func:`check_privacy_params` (a float > 0)."""
    checked = check_privacy_params(epsilon=epsilon).epsilon
    if checked is None:  # pragma: no cover - set whenever epsilon is given
        raise ValueError(f"epsilon must be a number > 0; got {epsilon!r}.")
    return checked


def _logits(utility, epsilon, sensitivity):
    """Validated ``epsilon * (utility - max) / (2 * sensitivity)`` (all <= 0)."""
    epsilon = _check_epsilon(epsilon)
    sensitivity = _check_real(sensitivity, "sensitivity", "a finite number > 0")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ValueError(f"sensitivity must be a finite number > 0; got {sensitivity}.")
    try:
        utility = np.asarray(utility, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"utility must be an array of numbers; got {utility!r}."
        ) from exc
    if utility.ndim != 1 or utility.shape[0] < 1:
        raise ValueError(
            f"utility must be 1-D with at least one candidate; got shape "
            f"{utility.shape}."
        )
    if not np.isfinite(utility).all():
        raise ValueError("utility must be finite (no NaN or inf).")
    return _scaled_logits(utility, epsilon, sensitivity)


def _scaled_logits(utility, epsilon, sensitivity):
    """``epsilon * u / (2 * sensitivity)`` shifted so that the maximum is 0.

    Shifting by the maximum first keeps the logits finite (or ``-inf``, i.e.
    probability 0) even when ``epsilon * utility`` would overflow.
    """
    shifted = utility - utility.max()
    with np.errstate(over="ignore", invalid="ignore"):
        # An overflow is a probability of 0; an infinite scale times 0 is NaN.
        logits = (0.5 * epsilon / sensitivity) * shifted
    logits[shifted == 0.0] = 0.0
    return logits


def _log_probabilities(logits):
    return logits - logsumexp(logits)
