"""Random sources of the privacy mechanisms: seeded for research, OS-secure for use.

Every mechanism in :mod:`skfedcp.privacy` takes ``random_state``:

* an ``int``, a :class:`numpy.random.Generator` or a
  :class:`numpy.random.RandomState`: draws come from NumPy, so research runs and
  CI are reproducible. NumPy's generators are not cryptographic: someone who
  learns the seed or the generator state can undo the noise. Use them for
  simulation only.
* ``None``: a fresh :func:`numpy.random.default_rng` seeded from the operating
  system (not reproducible, still not cryptographic). The global NumPy state is
  never used.
* ``"secure"``: every random bit comes from the operating system's
  cryptographically secure generator (:class:`random.SystemRandom`, i.e.
  ``os.urandom``), and the sampling is exact given the floating-point
  probabilities (integer arithmetic, see below). This is the option for
  deployment; it cannot be seeded, so its output is not reproducible.

Floating-point caveat (Mironov 2012). The privacy proofs assume exact real
arithmetic. Implementations sample from probabilities rounded to float64, and
Mironov showed that a textbook floating-point Laplace sampler leaks the input
through the set of reachable outputs. The mechanisms here release a value from
a *finite* candidate set, which removes the worst of that attack, but the
following caveats remain:

* the log-probabilities are computed in float64 (relative error about
  ``1e-16 * epsilon * n``), so the privacy ratio holds up to that error;
* the NumPy sources draw uniforms on a grid of ``2**-53``: the Gumbel-max
  sampler never returns a candidate whose probability is below about
  ``1e-17``, and Bernoulli draws resolve probabilities only to ``2**-53``;
* the ``"secure"`` source samples exactly from the float64 probabilities; a
  candidate whose probability underflows (below about ``1e-308``) is never
  returned, so the guarantee is ``(epsilon, 1e-300)``-DP rather than pure
  ``epsilon``-DP;
* timing side channels are out of scope.

For hardened deployments use a library with exact samplers (e.g. OpenDP).

References
----------
.. [1] I. Mironov, "On significance of the least significant bits for
   differential privacy", ACM CCS 2012.
"""

from __future__ import annotations

import bisect
import random
from numbers import Integral

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

from .._typing import SecureRandomStateLike
from ..utils._random import SECURE

__all__ = ["SECURE", "check_random_source"]


def check_random_source(
    random_state: SecureRandomStateLike,
) -> _NumpySource | _SecureSource:
    """Turn ``random_state`` into a random source for the mechanisms.

    Parameters
    ----------
    random_state : int, Generator, RandomState, SeedSequence, "secure" or None
        See the module docstring: NumPy-backed and reproducible for an int or
        a NumPy generator, a fresh OS-seeded NumPy generator for ``None``, the
        operating system's secure generator with exact sampling for
        ``"secure"``.

    Returns
    -------
    source : object
        A source with ``secure`` (bool), ``choice_from_log_weights``,
        ``bernoulli``, ``integers`` and ``random`` methods.

    Examples
    --------
    >>> from skfedcp.privacy._randomness import check_random_source
    >>> check_random_source(0).secure, check_random_source("secure").secure
    (False, True)
    """
    if isinstance(random_state, str):
        if random_state == SECURE:
            return _SecureSource()
        raise ValueError(
            f'random_state must be an int, a NumPy generator, None or "secure"; '
            f"got {random_state!r}."
        )
    if random_state is None:
        return _NumpySource(np.random.default_rng())
    if isinstance(random_state, np.random.Generator | np.random.RandomState):
        return _NumpySource(random_state)
    if isinstance(random_state, np.random.SeedSequence):
        return _NumpySource(np.random.default_rng(random_state))
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be >= 0; got {random_state}.")
        return _NumpySource(np.random.default_rng(int(random_state)))
    raise TypeError(
        f'random_state must be an int, a NumPy generator, None or "secure"; '
        f"got {random_state!r}."
    )


class _NumpySource:
    """Draws from a NumPy ``Generator`` or ``RandomState`` (reproducible)."""

    secure = False

    def __init__(self, rng: np.random.Generator | np.random.RandomState) -> None:
        self._rng = rng

    def choice_from_log_weights(self, log_weights: NDArray[np.float64]) -> int:
        """Index ``j`` with probability ``exp(log_weights[j])`` (normalised)."""
        # Gumbel-max: argmax(l_j + G_j) with G_j i.i.d. standard Gumbel has
        # exactly the softmax law, and never exponentiates a logit.
        gumbel = self._rng.gumbel(size=log_weights.shape[0])
        return int(np.argmax(log_weights + gumbel))

    def bernoulli(self, p: float, size: int) -> NDArray[np.bool_]:
        """Boolean array of ``size`` independent Bernoulli(``p``) draws."""
        return self._rng.random(size) < p

    def integers(self, high: int, size: int) -> NDArray[np.int64]:
        """Integer array of ``size`` uniform draws from ``{0, ..., high - 1}``."""
        if isinstance(self._rng, np.random.Generator):
            return self._rng.integers(0, high, size=size)
        return self._rng.randint(0, high, size=size)

    def random(self, size: int) -> NDArray[np.float64]:
        """Float array of ``size`` uniform draws from [0, 1)."""
        return self._rng.random(size)


class _SecureSource:
    """Draws from the OS's secure generator; exact integer-arithmetic sampling."""

    secure = True

    def __init__(self) -> None:
        self._rng = random.SystemRandom()

    def choice_from_log_weights(self, log_weights: NDArray[np.float64]) -> int:
        """Index ``j`` with probability ``exp(log_weights[j])`` (normalised).

        The float64 probabilities ``p_j`` are written exactly as integers on a
        common power-of-two scale, and ``j`` is drawn with probability exactly
        ``p_j / sum(p)``: no uniform float, no rounded cumulative sum.
        """
        p = np.exp(log_weights - logsumexp(log_weights))
        mantissa, exponent = np.frexp(p)
        mantissa = np.ldexp(mantissa, 53).astype(np.int64)  # exact: 53-bit ints
        exponent = exponent.astype(np.int64) - 53
        nonzero = mantissa > 0
        shift = exponent - exponent[nonzero].min()
        cumulative = []
        total = 0
        for m, s in zip(mantissa.tolist(), shift.tolist(), strict=True):
            if m:
                total += m << s
            cumulative.append(total)
        # The first index whose cumulative weight exceeds a uniform integer.
        return bisect.bisect_right(cumulative, self._rng.randrange(total))

    def bernoulli(self, p: float, size: int) -> NDArray[np.bool_]:
        """Exact Bernoulli(``p``) draws for the float ``p``."""
        numerator, denominator = float(p).as_integer_ratio()  # a power of two
        n_bits = denominator.bit_length() - 1
        bits = self._rng.getrandbits
        return np.fromiter(
            (bits(n_bits) < numerator for _ in range(size)), dtype=bool, count=size
        )

    def integers(self, high: int, size: int) -> NDArray[np.int64]:
        """Exact uniform draws from ``{0, ..., high - 1}``."""
        draw = self._rng.randrange
        draws = (draw(high) for _ in range(size))
        return np.fromiter(draws, dtype=np.int64, count=size)

    def random(self, size: int) -> NDArray[np.float64]:
        """Uniform floats on [0, 1) (53 random bits each)."""
        draw = self._rng.random
        return np.fromiter((draw() for _ in range(size)), dtype=np.float64, count=size)
