"""The independent random streams of one wrapper fit (split, calibrator, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from .._typing import SecureRandomStateLike
from ..utils._random import SECURE, check_seed_sequence

__all__ = ["calibrator_random_state", "fit_streams"]

# The independent random streams of one wrapper fit, spawned in this order
# from the SeedSequence of ``random_state`` (adding a stream at the end keeps
# the others unchanged).
_SPLIT, _CALIBRATOR, _SCORE, _MODEL = range(4)
_N_STREAMS = 4


def fit_streams(
    random_state: SecureRandomStateLike,
) -> tuple[
    np.random.SeedSequence | Literal["secure"] | None, Sequence[np.random.SeedSequence]
]:
    """Independent seeds of one fit: ``(calibrator_seed, [SeedSequence] * 4)``.

    All randomness of a wrapper fit derives from one
    :class:`~numpy.random.SeedSequence` built by
    :func:`~skfedcp.utils._random.check_seed_sequence` (``None``: fresh
    operating-system entropy; NumPy's global state is never read). Its
    spawned children seed the per-client split (``_SPLIT``), the calibrator
    (``_CALIBRATOR``), the randomized scores' calibration draws (``_SCORE``)
    and a default model (``_MODEL``). With ``"secure"`` the calibrator seed is
    ``"secure"`` (the operating system's secure generator) and the other
    streams are seeded from fresh operating-system entropy: they protect
    nothing (the split and the model's training are not private), so they
    need no cryptographic source, and they are not reproducible. With
    ``None`` the calibrator seed is ``None`` (fresh entropy, drawn by the
    calibrator if it draws noise at all) and the streams' root is drawn from
    the operating system when a stream is first read.
    """
    if random_state is None:
        # Fresh entropy, drawn only when a stream is read: a prefit model and
        # a calibrator that draws no noise read none. The calibrator gets
        # None, which means fresh operating-system entropy to it as well.
        return None, _Streams(None)
    seed = check_seed_sequence(random_state)
    if isinstance(seed, str):
        return SECURE, [np.random.SeedSequence() for _ in range(_N_STREAMS)]
    children = _Streams(seed)
    return children[_CALIBRATOR], children


class _Streams(Sequence):
    """The children ``SeedSequence(seed).spawn(4)``, each built when first read.

    Child ``i`` is ``SeedSequence(entropy, spawn_key=spawn_key + (i,),
    pool_size=pool_size)``, exactly what ``spawn`` builds from a fresh copy
    of ``seed``; ``seed`` itself is never spawned from, so a SeedSequence
    passed by the user is left as it was and two fits with the same
    random_state give the same streams. Building only the children a fit
    reads saves ~7 us each (a prefit model needs no split stream). ``seed``
    None: a fresh ``SeedSequence()`` (operating-system entropy), drawn when
    the first child is read.
    """

    def __init__(self, seed):
        self._seed = seed
        self._children: list[np.random.SeedSequence | None] = [None] * _N_STREAMS

    def __len__(self):
        return _N_STREAMS

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(_N_STREAMS))]
        child = self._children[i]
        if child is None:
            if self._seed is None:
                self._seed = np.random.SeedSequence()
            seed = self._seed
            child = self._children[i] = np.random.SeedSequence(
                seed.entropy,
                spawn_key=(*seed.spawn_key, range(_N_STREAMS)[i]),
                pool_size=seed.pool_size,
            )
        return child


def calibrator_random_state(
    seed: np.random.SeedSequence | Literal["secure"],
) -> np.random.SeedSequence | Literal["secure"]:
    """What the calibrator's ``fit`` receives for a stream seed (or "secure").

    The child ``SeedSequence`` itself: the calibrator spawns its server and
    client streams from it (never NumPy's global generator).
    """
    return seed
