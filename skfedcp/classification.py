"""PrivateConformalClassifier: prediction sets with private, federated calibration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.utils.multiclass import check_classification_targets

from ._typing import MatrixLike, RandomStateLike, SecureRandomStateLike
from .base import BaseFedConformal
from .base._groups import group_thresholds, row_groups
from .base._streams import _SCORE
from .calibrators import BaseCalibrator, get_calibrator
from .scores import (
    CLASSIFICATION_SCORES,
    BaseClassificationScore,
    resolve_classification_score,
)
from .utils._docstrings import fill_doc
from .utils._sklearn_compat import HasMethods, StrOptions

__all__ = ["PrivateConformalClassifier"]


@fill_doc
class PrivateConformalClassifier(ClassifierMixin, BaseFedConformal):
    """Conformal prediction sets for any classifier, with private calibration.

    The model gives class probabilities; each calibration row gets a
    conformity score (``1 - p_y`` for LAC); a calibration strategy turns the
    scores, possibly spread over clients, into a threshold ``q`` released
    with differential privacy; the prediction set of ``x`` is every label
    whose score is at most ``q``.

    Parameters
    ----------
    estimator : classifier with ``predict_proba``, default=None
        The model. A fitted model wrapped in
        :class:`~sklearn.frozen.FrozenEstimator` is used as is and every row
        calibrates (the setting of the papers: the model is trained elsewhere,
        possibly privately); ``clone`` and ``GridSearchCV`` keep it fixed. An
        unfitted model is cloned and fitted on a random split made within each
        client (``calibration_size``). ``None`` means
        :class:`~sklearn.linear_model.LogisticRegression`.
    alpha : float or array-like of float, default=0.1
        Target miscoverage: sets contain the true label with probability
        ``>= 1 - alpha``. The private calibrators need ``alpha <= 0.5``
        (``"dp-central"``).
        A sequence of distinct levels (e.g. ``[0.2, 0.1, 0.05]``) calibrates
        them all in one fit: one split, one model, one round in which each
        client sends one message per level. ``predict_set`` then gains a
        last axis, one entry per level in the order given, nested across
        levels (see Notes); a private calibrator splits ``epsilon`` equally
        among them.
    epsilon : float or None, default=1.0
        Privacy parameter given to a private calibrator, overriding its own
        (``None`` keeps the calibrator's). Ignored by non-private
        calibrators, so one ``GridSearchCV`` can search ``alpha``,
        ``epsilon`` and ``calibrator`` together. Set it on purpose: there is
        no universally safe default.
    calibrator : str or BaseCalibrator, default="dp-central"
        ``"dp-central"`` (``epsilon``-DP split conformal by a trusted curator,
        Angelopoulos et al.), ``"dp-qq"`` (FedCP²-QQ: each client releases an
        ``epsilon``-DP quantile), or a non-private strategy for comparison
        (``"central"``, ``"qq"``, ``"avg"``), or a calibrator instance
        (cloned, never mutated; e.g. to set ``n_bins`` or ``gamma``).
        Local DP (no trusted party, each calibration row privatised by its
        user): ``"ldp-l"`` / ``"ldp-l*"`` (k-RR labels, features sent in the
        clear) and ``"ldp-s"`` / ``"ldp-s*"`` (one randomized yes/no answer
        per user in an interactive bisection), whose coverage is ``>= 1 -
        alpha - Delta`` (``>= 1 - alpha`` starred) with probability ``1 -
        delta`` over the calibration draw; their ``delta`` is set on the
        instance, e.g. ``calibrator=LDPLabelStarCalibrator(delta=0.01)``.
    conformity_score : {"lac", "aps"} or BaseClassificationScore, \
            default="lac"
        ``"lac"``: ``1 - p_y(x)``, the score of the papers; ``"aps"``: the
        probability mass ranked up to ``y`` (adaptive sets); or an instance,
        e.g. ``APSScore(randomized=True)``. Both lie in [0, 1]. With private
        calibrators prefer LAC or randomized APS: deterministic APS piles
        scores just below 1, where the bins cannot resolve them. (Named so as
        not to shadow the ``score(X, y)`` method of classifiers.)
    score_bounds : tuple of two floats, default=None
        Public bounds of the scores for private calibrators; ``None`` uses the
        score's natural bounds, ``(0, 1)``.
    calibration_size : float, default=0.5
        Fraction of each client's rows used for calibration when the model
        must be fitted; the rest trains.
    random_state : None, int, SeedSequence, Generator, RandomState or \
            "secure", default=None
        Root of all randomness of ``fit``: one
        :class:`~numpy.random.SeedSequence` whose independent children seed
        the per-client split, the calibration draws of a randomized score and
        the privacy mechanism. ``None`` draws fresh operating-system entropy
        (NumPy's global state is never used); an int makes fits reproducible,
        which suits research and CI only: whoever knows the seed can undo the
        noise. ``"secure"`` (private calibrators only) draws the mechanism's
        noise from the operating system's secure generator, the option for a
        deployment; the split and score draws then use fresh OS entropy.
        Prediction sets of a randomized score draw at each ``predict_set``
        call (see there).
    n_jobs : int, default=None
        Run the clients' steps of strategies without a vectorised simulation
        in parallel.
    group_by : None, "class", str, int or callable, default=None
        %(wrapper_group_by_intro)s
        ``"class"``: class-conditional sets (the group of a calibration row
        is its label; label ``c`` enters a set when its score is at most
        class ``c``'s threshold, so every class covers). A column name that
        is literally ``"class"`` must be given by its index.
        %(wrapper_group_by_rows)s
    %(wrapper_min_group_size)s

    Attributes
    ----------
    estimator_ : classifier
        The fitted model (the user's object itself when prefit).
    classes_ : ndarray of shape (n_classes,)
        The model's classes; columns of ``predict_set`` and
        ``predict_proba``.
    conformity_score_ : BaseClassificationScore
        The score used.
    calibrator_ : BaseCalibrator
        The fitted calibration strategy.
    threshold_ : float or ndarray of shape (n_levels,)
        The calibrated threshold; ``+inf`` means every label. One per level
        for a sequence ``alpha``, non-increasing in ``alpha``.
    epsilon_spent_ : float
        Privacy loss of the calibration data from this fit (per client for
        ``"dp-qq"``); 0 when the trivial threshold was returned without
        reading the data; ``inf`` for non-private calibrators. It covers the
        calibration only: the rows that train an unfitted ``estimator`` are
        not protected (``fit`` then warns with
        :class:`~skfedcp.exceptions.PrivacyLeakWarning`).
    messages_ : dict of ndarray
        What the server received from each client.
    %(wrapper_clients_attrs)s
    %(wrapper_level_attrs)s
    %(wrapper_group_attrs)s

    See Also
    --------
    skfedcp.calibrators.PrivateCentralCalibrator : the default strategy.
    skfedcp.calibrators.PrivateQuantileOfQuantilesCalibrator : FedCP²-QQ.
    skfedcp.metrics.set_coverage_score : coverage of prediction sets.

    Notes
    -----
    **Coverage.** If the calibration rows and the test row are i.i.d. (or
    exchangeable) given the fitted model, ``P(y in predict_set(x)) >= 1 -
    alpha`` for every calibrator but ``"avg"``, marginally over the
    calibration data, the mechanism and the test point. Sets can be empty
    (LAC) and are all labels when ``threshold_`` is ``+inf``, which the
    private calibrators return, with a warning, when there is too little
    data for ``epsilon``.

    **Privacy.** What is protected is the calibration data; prediction sets
    are post-processing of the released threshold. ``"dp-central"``: central
    ``epsilon``-DP per record, given a trusted curator. ``"dp-qq"``:
    ``epsilon``-DP per client data set, no trusted party. The model itself
    is not privatised: train it on other data, privately if needed (the
    overall guarantee then composes), and pass it as
    :class:`~sklearn.frozen.FrozenEstimator`. An unfitted ``estimator`` is
    trained on part of the rows given to ``fit`` with no privacy at all;
    ``fit`` then warns (:class:`~skfedcp.exceptions.PrivacyLeakWarning`) and
    ``epsilon_spent_`` still counts the calibration only. Each fit spends
    ``epsilon`` again, and tuning ``alpha`` or ``epsilon`` by validation on
    private data spends budget: search on public or simulated data.

    **Several levels.** With ``alpha`` a sequence, one calibrator per level runs on the
    same calibration scores (one round, each client sending one message per level). The
    sets are nested by construction: going from the largest ``alpha`` to the smallest,
    each threshold is raised to the largest of its own and those of every larger
    ``alpha`` (a running maximum), and every level compares the same label scores (one
    draw of a randomized score) with its threshold, so a label in the set of a larger
    ``alpha`` is in the set of every smaller one. Raising a threshold or widening a set
    only adds coverage, so each level keeps its guarantee. For a private calibrator
    ``epsilon`` stays the budget of the whole fit: each of the ``n_levels`` releases
    gets ``epsilon / n_levels``, and by sequential composition ``epsilon_spent_`` (the
    sum of ``epsilon_spent_per_level_``) is what one fit at a single level would spend.
    For the LDP calibrators each level's ``delta`` holds separately (all levels at once:
    ``n_levels * delta``, by the union bound).

    **Randomized APS at serving time.** The uniforms of the test rows are
    drawn afresh at every ``predict_set`` call, independent of the batch a
    row arrives in; a fixed seed drawn at ``fit`` would give every
    single-row request the same draw, and coverage served one row at a time
    would then depend on that one draw.

    References
    ----------
    .. [1] A. N. Angelopoulos, S. Bates, T. Zrnic, M. I. Jordan. Private
       Prediction Sets. Harvard Data Science Review, 2022.
    .. [2] P. Humbert, B. Le Bars, A. Bellet, S. Arlot. One-Shot Federated
       Conformal Prediction. ICML 2023.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.frozen import FrozenEstimator
    >>> from sklearn.linear_model import LogisticRegression
    >>> X, y = load_digits(return_X_y=True)
    >>> model = LogisticRegression(max_iter=2000).fit(X[:600], y[:600])
    >>> clf = PrivateConformalClassifier(
    ...     FrozenEstimator(model), alpha=0.1, epsilon=8.0, random_state=0)
    >>> clf = clf.fit(X[600:1500], y[600:1500])
    >>> clf.predict_set(X[1500:]).shape
    (297, 10)
    >>> clf.epsilon_spent_
    8.0
    """

    _parameter_constraints = {
        **BaseFedConformal._parameter_constraints,
        "estimator": [HasMethods(["fit", "predict", "predict_proba"]), None],
        "conformity_score": [
            StrOptions(set(CLASSIFICATION_SCORES)),
            BaseClassificationScore,
        ],
    }
    _score_resolver = staticmethod(resolve_classification_score)
    _y_numeric = False
    _groups_by_class = True

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        *,
        alpha: float = 0.1,
        epsilon: float | None = 1.0,
        calibrator: str | BaseCalibrator = "dp-central",
        conformity_score: Literal["lac", "aps"] | BaseClassificationScore = "lac",
        score_bounds: tuple[float, float] | None = None,
        calibration_size: float = 0.5,
        random_state: SecureRandomStateLike = None,
        n_jobs: int | None = None,
        group_by: str | int | Callable[[Any], ArrayLike] | None = None,
        min_group_size: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.alpha = alpha
        self.epsilon = epsilon
        self.calibrator = calibrator
        self.conformity_score = conformity_score
        self.score_bounds = score_bounds
        self.calibration_size = calibration_size
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.group_by = group_by
        self.min_group_size = min_group_size

    def _default_estimator(self):
        return LogisticRegression()

    def _check_y(self, y):
        if y.dtype.kind in "fO" and pd.isna(y).any():
            raise ValueError(
                "y contains missing labels (NaN or None); every row needs a label."
            )
        _check_class_labels(y)
        return y

    def _fit_models(self, prefit, train, score, streams):
        super()._fit_models(prefit, train, score, streams)
        self.classes_ = np.asarray(self.estimator_.classes_)

    def _model_output(self, X):
        return self.estimator_.predict_proba(X)

    def _calibrate(self, score, proba, X, y, client_ids, seed, streams):
        y_encoded = self._encode(y)
        # LDP-L scores every label of every row (users send x and a noisy y).
        needs_matrix = get_calibrator(self.calibrator).requires_score_matrix
        score_rng = np.random.default_rng(streams[_SCORE])
        if needs_matrix:
            scores = score.label_scores(proba, random_state=score_rng)
        else:
            scores = score.conformity_score(y_encoded, proba, random_state=score_rng)
        self._fit_calibrator(
            scores,
            client_ids,
            seed,
            natural_bounds=score.bounds,
            labels=y_encoded if needs_matrix else None,
        )

    def _encode(self, y):
        """Column index of each label in ``classes_``; unseen labels raise."""
        index = pd.Index(self.classes_).get_indexer(y)
        if (index < 0).any():
            unseen = pd.unique(y[index < 0])
            raise ValueError(
                f"y holds labels the model has not seen: {unseen[:5].tolist()} (the "
                f"model's classes_ are {self.classes_.tolist()}). Every calibration "
                "label must be a class of the model: refit it with all classes, or "
                "drop those rows."
            )
        return index

    def predict_proba(self, X: MatrixLike) -> NDArray[np.float64]:
        """Return the model's class probabilities (columns follow ``classes_``).

        %(predict_params)s

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
        """
        return self._checked_output(X)

    def predict_set(
        self, X: MatrixLike, *, random_state: RandomStateLike = None
    ) -> NDArray[np.bool_]:
        """Return conformal prediction sets as a boolean membership matrix.

        Deterministic for deterministic scores (LAC, APS). A randomized
        score (``APSScore(randomized=True)``) draws one fresh uniform per row
        at every call, as the calibration rows had theirs drawn in ``fit``:
        a row's draw does not depend on its position in the batch, so
        serving one row at a time covers exactly as well as serving a batch,
        and calling twice on the same row may give two different sets.

        %(predict_params)s
        random_state : None, int, SeedSequence, Generator or RandomState, \
                default=None
            Source of the uniforms of a randomized score: ``None`` draws
            fresh operating-system entropy at each call (NumPy's global state
            is never used); an int or a generator makes the sets
            reproducible. Ignored by deterministic scores.

        Returns
        -------
        sets : ndarray of bool, shape (n_samples, n_classes) or \
                (n_samples, n_classes, n_levels)
            ``sets[i, j]`` is True when ``classes_[j]`` is in the set of row
            ``i``; every entry is True when ``threshold_`` is ``+inf``. For a
            sequence ``alpha``, ``sets[:, :, k]`` is the set at level
            ``alpha[k]``; the sets are nested (one draw of a randomized
            score serves every level).
        """
        proba = self._checked_output(X)
        threshold = self.threshold_
        if self.group_by is not None:
            threshold = self._group_threshold(X)
        return self.conformity_score_.predict_set(
            proba, threshold, random_state=random_state
        )

    def _group_threshold(self, X):
        """Thresholds broadcasting against the scores: per label or per row.

        ``(1, n_classes)`` for class groups (each label its class's), ``(n,
        1)`` for row groups; a sequence ``alpha`` adds the level axis last.
        """
        by_class = self.group_by == "class"
        labels = self.classes_ if by_class else row_groups(self.group_by, X)
        thresholds = group_thresholds(self, labels)  # (n_levels,) + (n_groups,)
        if by_class:
            return thresholds.T[np.newaxis]  # (1, n_classes[, n_levels])
        return thresholds.T[:, np.newaxis]  # (n, 1[, n_levels])


def _check_class_labels(y):
    """Refuse targets that are not class labels (e.g. continuous floats).

    A 1-D array of integers, booleans or strings always holds class labels:
    scikit-learn's check, which finds the distinct values twice (a hash of
    every row), is run only for the other dtypes, where it can fail.
    """
    if y.ndim == 1 and y.dtype.kind in "biuUS":
        return
    try:
        check_classification_targets(y)
    except ValueError as exc:
        raise ValueError(f"y must hold class labels: {exc}") from None
