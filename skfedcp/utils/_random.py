"""Seeds for every random stream of skfedcp, never NumPy's global state.

All randomness of a fit is derived from one :class:`numpy.random.SeedSequence`
built from ``random_state``:

* ``None``: fresh entropy from the operating system (``SeedSequence()``);
* an ``int``: that seed (reproducible simulations);
* a :class:`~numpy.random.SeedSequence`: used as it is;
* a :class:`~numpy.random.Generator` or :class:`~numpy.random.RandomState`:
  128 bits of entropy drawn from it (the generator advances, as scikit-learn
  does with a ``RandomState`` argument);
* ``"secure"``: no seed at all; every consumer draws from the operating
  system's secure generator (:mod:`skfedcp.privacy`).

Independent streams are *spawned* (full-width child seeds, not integers drawn
from a parent stream): stream 0 is the server's, stream ``j + 1`` is client
``j``'s in sorted-client order, so a server that only sees messages derives
the same server stream as the in-process simulation.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Final, Literal, overload

import numpy as np

from .._typing import SecureRandomStateLike

__all__ = [
    "SECURE",
    "SpawnedStreams",
    "check_random_state",
    "check_seed_sequence",
    "spawn_generators",
    "spawn_random_states",
]

SECURE: Final = "secure"


@overload
def check_seed_sequence(
    random_state: SecureRandomStateLike,
    *,
    name: str = ...,
    allow_secure: Literal[False],
) -> np.random.SeedSequence: ...


@overload
def check_seed_sequence(
    random_state: SecureRandomStateLike,
    *,
    name: str = ...,
    allow_secure: bool = ...,
) -> np.random.SeedSequence | Literal["secure"]: ...


def check_seed_sequence(
    random_state: SecureRandomStateLike,
    *,
    name: str = "random_state",
    allow_secure: bool = True,
) -> np.random.SeedSequence | Literal["secure"]:
    """Return the :class:`~numpy.random.SeedSequence` behind ``random_state``.

    Parameters
    ----------
    random_state : None, int, SeedSequence, Generator, RandomState or "secure"
        See the module docstring.
    name : str, default="random_state"
        Argument name used in error messages.
    allow_secure : bool, default=True
        Whether ``"secure"`` is accepted (it is returned unchanged).

    Returns
    -------
    seed : SeedSequence or "secure"

    Examples
    --------
    >>> check_seed_sequence(0).entropy
    0
    >>> check_seed_sequence("secure")
    'secure'
    """
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, str):
        if allow_secure and random_state == SECURE:
            return SECURE
    elif isinstance(random_state, Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"{name} must be a non-negative int; got {random_state}.")
        return np.random.SeedSequence(int(random_state))
    elif isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(
            random_state.integers(0, 2**32, size=4, dtype=np.uint64)
        )
    elif isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(
            random_state.randint(0, 2**32, size=4, dtype=np.uint64)
        )
    secure = ', "secure"' if allow_secure else ""
    raise TypeError(
        f"{name} must be None, an int, a numpy SeedSequence, Generator or "
        f"RandomState{secure}; got {random_state!r}."
    )


def check_random_state(
    random_state: int | np.random.RandomState | None,
) -> np.random.RandomState:
    """scikit-learn's ``check_random_state``, except that None is fresh entropy.

    ``None`` gives a ``RandomState`` seeded from the operating system
    (``SeedSequence()``) instead of NumPy's global state, which a library
    must neither read nor advance; an int or a ``RandomState`` give what
    scikit-learn gives (the same draws for the same seed).

    Examples
    --------
    >>> check_random_state(0).randint(10) == check_random_state(0).randint(10)
    True
    """
    if random_state is None:
        return np.random.RandomState(np.random.MT19937(np.random.SeedSequence()))
    if random_state is np.random.mtrand._rand or random_state is np.random:  # type: ignore[comparison-overlap]
        raise ValueError(
            "random_state must not be NumPy's global state; pass None (fresh "
            "entropy), an int or a RandomState."
        )
    from sklearn.utils import check_random_state as _sklearn_check

    return _sklearn_check(random_state)


def spawn_generators(
    random_state: SecureRandomStateLike, n_streams: int, *, name: str = "random_state"
) -> list[np.random.Generator] | list[Literal["secure"]]:
    """Independent generators (or ``"secure"``) for ``n_streams`` consumers.

    Parameters
    ----------
    random_state : None, int, SeedSequence, Generator, RandomState or "secure"
        Root of the streams (see the module docstring).
    n_streams : int
        Number of streams; stream ``i`` is the ``i``-th spawned child, so the
        first streams do not depend on ``n_streams``.
    name : str, default="random_state"
        Argument name used in error messages.

    Returns
    -------
    streams : list of Generator or "secure"

    Examples
    --------
    >>> a = spawn_generators(0, 3)
    >>> b = spawn_generators(0, 1)
    >>> bool(a[0].random() == b[0].random())
    True
    """
    children = _spawn(random_state, n_streams, name)
    if isinstance(children, str):
        secure: list[Literal["secure"]] = [SECURE] * n_streams
        return secure
    return [np.random.default_rng(child) for child in children]


def spawn_random_states(
    random_state: SecureRandomStateLike, n_streams: int, *, name: str = "random_state"
) -> SpawnedStreams | list[Literal["secure"]]:
    """Like :func:`spawn_generators`, as ``RandomState`` objects, made lazily.

    Stream ``i`` is a :class:`~numpy.random.RandomState` over a ``PCG64``
    bit generator seeded by the ``i``-th spawned child (full-width and
    independent, not a 31-bit integer), so code written with scikit-learn's
    ``check_random_state`` (e.g. a user's own calibration strategy) accepts
    it. Streams are built on first access: a strategy that draws nothing
    for its clients pays nothing for 10,000 of them.

    Returns
    -------
    streams : sequence of RandomState, or list of "secure"

    Examples
    --------
    >>> streams = spawn_random_states(0, 3)
    >>> len(streams), type(streams[1]).__name__
    (3, 'RandomState')
    >>> a, b = streams[1:][0], spawn_random_states(0, 3)[1]
    >>> bool(a.random_sample() == b.random_sample())
    True
    """
    seed = check_seed_sequence(random_state, name=name)
    if isinstance(seed, str):
        return [SECURE] * n_streams
    return SpawnedStreams(seed, range(n_streams))


class SpawnedStreams(Sequence[np.random.RandomState]):
    """Children ``indices`` of a ``SeedSequence``, each a ``RandomState``.

    Child ``i`` is ``SeedSequence(entropy, spawn_key=spawn_key + (i,))``,
    exactly what ``seed.spawn`` would give, built only when accessed. Each
    access builds a *new* generator at the start of that stream: take a
    client's stream once and keep it (indexing twice replays the same draws).
    """

    def __init__(self, seed: np.random.SeedSequence, indices: range) -> None:
        self._seed = seed
        self._indices = indices

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, item: int) -> np.random.RandomState: ...

    @overload
    def __getitem__(self, item: slice) -> SpawnedStreams: ...

    def __getitem__(self, item: int | slice) -> np.random.RandomState | SpawnedStreams:
        if isinstance(item, slice):
            return SpawnedStreams(self._seed, self._indices[item])
        i = self._indices[item]
        child = np.random.SeedSequence(
            self._seed.entropy,
            spawn_key=(*self._seed.spawn_key, i),
            pool_size=self._seed.pool_size,
        )
        return np.random.RandomState(np.random.PCG64(child))


def _spawn(
    random_state: SecureRandomStateLike, n_streams: int, name: str
) -> list[np.random.SeedSequence] | Literal["secure"]:
    seed = check_seed_sequence(random_state, name=name)
    if isinstance(seed, str):
        return seed
    # Children of a SeedSequence are numbered from its own counter: derive
    # them from a fresh copy so that calling twice gives the same streams.
    root = np.random.SeedSequence(
        seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size
    )
    return root.spawn(n_streams)
