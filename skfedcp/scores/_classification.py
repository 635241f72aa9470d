"""Classification conformity scores (LAC, APS) and the label sets they imply."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator

from .._typing import RandomStateLike
from ..utils._random import check_seed_sequence
from ..utils._sklearn_compat import ParamNamesCacheMixin
from ._base import resolve_score

__all__ = [
    "CLASSIFICATION_SCORES",
    "APSScore",
    "BaseClassificationScore",
    "LACScore",
    "resolve_classification_score",
]


def _check_proba(proba: ArrayLike) -> NDArray[np.float64]:
    checked = np.asarray(proba, dtype=np.float64)
    if checked.ndim != 2 or checked.shape[1] < 1:
        raise ValueError(
            f"proba must have shape (n_samples, n_classes); got {checked.shape}."
        )
    if not np.isfinite(checked).all():
        raise ValueError("proba must be finite (no NaN or inf).")
    return checked


def _uniform_source(random_state):
    """Generator of the uniforms of a randomized score; never NumPy's global state.

    ``None`` is fresh operating-system entropy; a NumPy ``Generator`` or
    ``RandomState`` is drawn from (and advances); an int or ``SeedSequence``
    seeds a new generator.
    """
    if isinstance(random_state, np.random.Generator | np.random.RandomState):
        return random_state
    return np.random.default_rng(check_seed_sequence(random_state, allow_secure=False))


def _label_sets(scores, threshold):
    """``scores <= threshold``; a 1-D ``threshold`` adds a last axis, one per level.

    Every level compares the same scores (one draw of a randomized score), so
    thresholds that grow as ``alpha`` shrinks give nested sets. A 2-D
    ``threshold`` broadcasts against the ``(n_samples, n_classes)`` scores
    (one per row ``(n, 1)`` or per label ``(1, n_classes)``: group-conditional
    sets); 3-D adds the level axis last.
    """
    if np.ndim(threshold) in (0, 2):
        return scores <= threshold
    return scores[..., np.newaxis] <= np.asarray(threshold, dtype=np.float64)


def _check_labels(y_encoded: ArrayLike, proba: NDArray[np.float64]) -> NDArray[Any]:
    labels = np.asarray(y_encoded)
    if labels.ndim != 1 or labels.shape[0] != proba.shape[0]:
        raise ValueError(
            f"y_encoded must have shape ({proba.shape[0]},), one class index per "
            f"row of proba; got {labels.shape}."
        )
    if labels.dtype.kind not in "iu":
        raise TypeError(
            "y_encoded must hold integer class indices (columns of proba); got "
            f"dtype {labels.dtype}."
        )
    if labels.size and (labels.min() < 0 or labels.max() >= proba.shape[1]):
        raise ValueError(
            f"y_encoded must lie in 0..{proba.shape[1] - 1} (columns of proba)."
        )
    return labels


class BaseClassificationScore(ParamNamesCacheMixin, BaseEstimator):
    """A classification conformity score and the label set it implies.

    A score maps ``(x, y)`` to a number in ``bounds`` (larger meaning a worse
    fit) using only the model's class probabilities; the prediction set for
    a threshold ``q`` is ``{y : score(x, y) <= q}``. ``bounds`` are natural,
    data-free bounds, so private calibrators can use them as public
    ``score_bounds``.
    """

    #: Natural range of the score (public: it does not depend on data).
    bounds = (0.0, 1.0)
    _parameter_constraints: dict[str, list[Any]] = {}
    #: Whether :meth:`label_scores` validates ``proba`` itself, so that
    #: :meth:`predict_set` need not check it first (LAC: checked once).
    _label_scores_check_proba = False

    def label_scores(
        self, proba: ArrayLike, *, random_state: RandomStateLike = None
    ) -> NDArray[np.float64]:
        """Return the score of every label, shape ``(n_samples, n_classes)``.

        Parameters
        ----------
        proba : array-like of shape (n_samples, n_classes)
            Predicted class probabilities (columns aligned with ``classes_``).
        random_state : None, int, SeedSequence, Generator or RandomState, \
                default=None
            Randomness of randomized scores; ignored by deterministic ones.
            ``None`` draws fresh operating-system entropy (never NumPy's
            global state).

        Returns
        -------
        scores : ndarray of shape (n_samples, n_classes)
        """
        raise NotImplementedError

    def conformity_score(
        self,
        y_encoded: ArrayLike,
        proba: ArrayLike,
        *,
        random_state: RandomStateLike = None,
    ) -> NDArray[np.float64]:
        """Return the score of the true label of each row.

        Parameters
        ----------
        y_encoded : array-like of int, shape (n_samples,)
            Column index of each row's label in ``proba``.
        proba : array-like of shape (n_samples, n_classes)
            Predicted class probabilities.
        random_state : None, int, SeedSequence, Generator or RandomState, \
                default=None
            As in :meth:`label_scores`.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
        """
        p = _check_proba(proba)
        labels = _check_labels(y_encoded, p)
        return self._true_label_scores(p, labels, random_state)

    def _true_label_scores(
        self, p: NDArray[np.float64], labels: NDArray[Any], random_state: Any
    ) -> NDArray[np.float64]:
        """The score of label ``labels[i]`` of row ``i`` (``p`` and ``labels`` checked).

        By default from :meth:`label_scores`; a score may read only the
        labels' own columns.
        """
        scores = self.label_scores(p, random_state=random_state)
        return scores[np.arange(p.shape[0]), labels]

    def predict_set(
        self,
        proba: ArrayLike,
        threshold: float | NDArray[np.float64],
        *,
        random_state: RandomStateLike = None,
    ) -> NDArray[np.bool_]:
        """Return the boolean label sets ``{y : score(x, y) <= threshold}``.

        Parameters
        ----------
        proba : array-like of shape (n_samples, n_classes)
            Predicted class probabilities.
        threshold : float or ndarray of shape (n_levels,)
            Calibrated threshold; ``+inf`` gives every label. An array gives
            one set per threshold, all from the same label scores (one draw
            of a randomized score).
        random_state : None, int, SeedSequence, Generator or RandomState, \
                default=None
            As in :meth:`label_scores`.

        Returns
        -------
        sets : ndarray of bool, shape (n_samples, n_classes) or \
                (n_samples, n_classes, n_levels)
        """
        if not self._label_scores_check_proba:
            proba = _check_proba(proba)
        return _label_sets(
            self.label_scores(proba, random_state=random_state), threshold
        )


class LACScore(BaseClassificationScore):
    """Least ambiguous set-valued classifier score, ``1 - p_y(x)``.

    The set ``{y : p_y(x) >= 1 - q}`` is the smallest on average among sets
    built from the probabilities (Sadinle et al., 2019). It can be empty.
    Used by all experiments of Angelopoulos et al. (private prediction sets).

    Examples
    --------
    >>> proba = [[0.7, 0.2, 0.1], [0.4, 0.35, 0.25]]
    >>> LACScore().conformity_score([0, 1], proba)
    array([0.3 , 0.65])
    >>> LACScore().predict_set(proba, 0.75)
    array([[ True, False, False],
           [ True,  True,  True]])
    """

    _label_scores_check_proba = True

    def label_scores(
        self, proba: ArrayLike, *, random_state: RandomStateLike = None
    ) -> NDArray[np.float64]:
        """Return ``1 - proba``, clipped to [0, 1]."""
        scores = np.subtract(1.0, _check_proba(proba))
        return np.clip(scores, 0.0, 1.0, out=scores)  # in place: one temporary

    def _true_label_scores(
        self, p: NDArray[np.float64], labels: NDArray[Any], random_state: Any
    ) -> NDArray[np.float64]:
        """``1 - p_y`` of each row's label, clipped: one probability per row."""
        scores = np.subtract(1.0, p[np.arange(p.shape[0]), labels])
        return np.clip(scores, 0.0, 1.0, out=scores)


class APSScore(BaseClassificationScore):
    """Adaptive prediction sets score: probability mass ranked above the label.

    Sort the probabilities of a row in decreasing order (ties by class
    index); the score of label ``y`` is the total probability of the labels
    ranked before it plus ``U * p_y(x)``. ``U = 1`` by default
    (deterministic, the set is never empty once the threshold exceeds the
    largest probability); with ``randomized=True``, ``U ~ Unif(0, 1)``, one
    draw per row shared by all its labels (Romano et al., 2020), which makes
    the coverage exact for continuous probabilities.

    Parameters
    ----------
    randomized : bool, default=False
        Draw ``U`` uniformly (from the ``random_state`` of each call) instead
        of ``U = 1``. The calibration ``U`` are drawn in ``fit``; every call
        of ``predict_set`` draws fresh ``U`` for its rows (fresh
        operating-system entropy unless a ``random_state`` is passed), so a
        row's draw does not depend on its position in the batch and serving
        one row at a time covers as well as serving a batch (as in MAPIE).

    Notes
    -----
    With ``U = 1`` a confident correct prediction scores ``p_y(x)``, close
    to 1, so a good model piles many scores just below 1 and the threshold
    sits there too (e.g. 0.9995 on Fashion-MNIST). Private calibrators round
    scores up to bins of width ``1 / n_bins`` and then often release the top
    bin: every label. With private calibration prefer LAC, or
    ``randomized=True``, which spreads those scores over (0, 1).

    Examples
    --------
    >>> proba = [[0.7, 0.2, 0.1], [0.4, 0.35, 0.25]]
    >>> APSScore().label_scores(proba)
    array([[0.7 , 0.9 , 1.  ],
           [0.4 , 0.75, 1.  ]])
    >>> APSScore().predict_set(proba, 0.8)
    array([[ True, False, False],
           [ True,  True, False]])
    """

    _parameter_constraints = {"randomized": ["boolean"]}
    _label_scores_check_proba = True

    def __init__(self, *, randomized: bool = False) -> None:
        self.randomized = randomized

    def label_scores(
        self, proba: ArrayLike, *, random_state: RandomStateLike = None
    ) -> NDArray[np.float64]:
        """Return the mass ranked before each label plus ``U`` times its own."""
        p = _check_proba(proba)
        n = p.shape[0]
        order = np.argsort(-p, axis=1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=1)
        before = np.cumsum(sorted_p, axis=1) - sorted_p
        if self.randomized:
            u = _uniform_source(random_state).uniform(size=(n, 1))
        else:
            u = 1.0
        sorted_scores = before + u * sorted_p
        scores = np.empty_like(p)
        np.put_along_axis(scores, order, sorted_scores, axis=1)
        return np.clip(scores, 0.0, 1.0)


CLASSIFICATION_SCORES = {"lac": LACScore, "aps": APSScore}


def resolve_classification_score(
    score: Literal["lac", "aps"] | BaseClassificationScore,
) -> BaseClassificationScore:
    """Return a fresh score object from a registry name or a score instance.

    Examples
    --------
    >>> resolve_classification_score("aps")
    APSScore()
    """
    return resolve_score(score, CLASSIFICATION_SCORES, BaseClassificationScore)
