"""BaseFedConformal: the one fit / predict skeleton of the conformal wrappers."""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn import config_context, get_config
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import Pipeline
from sklearn.utils import InputTags, get_tags
from sklearn.utils.metadata_routing import get_routing_for_object
from sklearn.utils.validation import check_is_fitted, has_fit_parameter, validate_data

from .._typing import ClientIds, MatrixLike
from ..calibrators import (
    CALIBRATORS,
    CLASSIFICATION_ONLY,
    BaseCalibrator,
    GroupedCalibrator,
    get_calibrator,
)
from ..exceptions import PrefitEstimatorWarning, PrivacyLeakWarning, SingleClientWarning
from ..federated import ClientPartition
from ..utils._atomic import atomic_fit
from ..utils._docstrings import fill_doc
from ..utils._random import SECURE
from ..utils._sklearn_compat import (
    Interval,
    ParamNamesCacheMixin,
    StrOptions,
    _check_n_features,
    _fit_context,
    _safe_indexing,
)
from ..utils._validation import check_client_ids
from ..utils._warnings import warn_user
from ._data import (
    _assert_finite,
    _check_fit_params,
    _check_y_matches_X,
    _feature_names,
    _plain_arrays,
    _split_fit_params,
)
from ._groups import (
    calibration_groups,
    check_group_by,
    fallback_thresholds,
    group_thresholds,
    row_groups,
)
from ._levels import (
    check_alpha_levels,
    forward_privacy_params,
    monotone_thresholds,
    nested_intervals,
    spawn_seeds,
    stack_level_messages,
    summarize_level,
)
from ._search_warnings import warn_user_once_in_search
from ._streams import _SPLIT, calibrator_random_state, fit_streams

__all__ = ["BaseFedConformal", "ConformalIntervalMixin"]

#: The strategies a regressor can use: one score per row (LDP-L needs the
#: score of every label).
REGRESSION_CALIBRATORS = tuple(c for c in CALIBRATORS if c not in CLASSIFICATION_ONLY)


def is_private_calibrator(calibrator: str | BaseCalibrator) -> bool:
    """Whether ``calibrator`` (alias or instance) is a private (DP) strategy."""
    return "epsilon" in get_calibrator(calibrator).get_params(deep=False)


def input_tags(estimator: Any) -> InputTags:
    """The input tags (NaN, sparse) of ``estimator``, read through FrozenEstimator.

    ``FrozenEstimator`` deep-copies its model's tags on every call; the
    model's own tags state the same facts, so fit and predict stay cheap.
    """
    while isinstance(estimator, FrozenEstimator):
        estimator = estimator.estimator
    return get_tags(estimator).input_tags


def is_prefit(estimator: Any) -> bool:
    """Whether ``estimator`` is used as is (frozen, or fitted and not frozen)."""
    if isinstance(estimator, FrozenEstimator):
        return True
    try:
        check_is_fitted(estimator)
    except (NotFittedError, TypeError):
        return False
    warn_user(
        f"{type(estimator).__name__} is already fitted: it is used as is and every "
        "row calibrates. clone() and GridSearchCV would refit a copy on an internal "
        "split; wrap it in sklearn.frozen.FrozenEstimator to keep it fixed.",
        PrefitEstimatorWarning,
    )
    return True


def client_ids_params(model: Any, client_ids: Any) -> dict[str, Any]:
    """The fit parameters that give ``client_ids`` to ``model`` and its steps.

    ``{"client_ids": ...}`` when ``model.fit`` takes ``client_ids``; for a
    :class:`~sklearn.pipeline.Pipeline`, ``<step>__client_ids`` for every
    step (``<outer>__<inner>__client_ids`` in nested pipelines) whose ``fit``
    takes them, so that e.g. a
    :class:`~skfedcp.feature_selection.FedChi2Selector` inside the wrapped
    pipeline runs federated on the training rows. With scikit-learn's
    metadata routing enabled, ``client_ids`` is passed once, by name, when
    some step requests it (``set_fit_request(client_ids=True)``), and the
    pipeline routes it.

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import MinMaxScaler
    >>> from sklearn.linear_model import LogisticRegression
    >>> from skfedcp.feature_selection import FedChi2Selector
    >>> pipe = make_pipeline(MinMaxScaler(), FedChi2Selector(k=2),
    ...                      LogisticRegression())
    >>> list(client_ids_params(pipe, [0, 1]))
    ['fedchi2selector__client_ids']
    """
    if get_config().get("enable_metadata_routing", False):
        if isinstance(model, Pipeline):
            routing = get_routing_for_object(model)
            if routing.consumes("fit", ["client_ids"]):
                return {"client_ids": client_ids}
            return {}
    if isinstance(model, Pipeline):
        out: dict[str, Any] = {}
        for name, step in model.steps:
            if step is None or isinstance(step, str):  # None / "passthrough"
                continue
            for key, value in client_ids_params(step, client_ids).items():
                out[f"{name}__{key}"] = value
        return out
    if has_fit_parameter(model, "client_ids"):
        return {"client_ids": client_ids}
    return {}


class _TrainRows(NamedTuple):
    """The training rows of a fit: ``X``, ``y``, ``client_ids`` and fit params."""

    X: Any
    y: Any
    client_ids: Any
    params: dict


@fill_doc
class BaseFedConformal(ParamNamesCacheMixin, MetaEstimatorMixin, BaseEstimator):
    """Base of the conformal wrappers; not for direct use.

    :meth:`fit` is the one skeleton of every wrapper: validate the data,
    split each client's rows (only when something must be trained), fit the
    models on the training rows, score the calibration rows and fit the
    calibrator. A wrapper states only what differs, through these hooks:

    - ``_resolve_score()``: a fresh conformity score;
    - ``_models()``: ``{parameter name: model}``, each fitted on the training
      rows unless prefit (default: ``{"estimator": estimator or default}``);
    - ``_fit_models(prefit, train, score, streams)``: set the fitted models;
    - ``_calibrate(score, X, y, client_ids, seed, streams)``: score the
      calibration rows and call :meth:`_fit_calibrator`;
    - ``_model_output(X)``: what the score reads at predict time (point
      predictions, quantile bounds or class probabilities);
    - optional: ``_check_params()`` (data-free checks, run first),
      ``_check_y(y)``, ``_needs_training_rows(score)``.

    :meth:`fit` is atomic: it runs on a parameter-only copy of the wrapper
    and moves the new fitted attributes over only when it completes, so an
    exception (or a KeyboardInterrupt) leaves the previous fit intact, and a
    refit starts from scratch (no attribute survives from an earlier fit).
    """

    _parameter_constraints = {
        # A float, or a sequence of distinct floats in (0, 1): several levels
        # from one fit (checked by check_alpha_levels at the start of fit).
        "alpha": [Interval(Real, 0, 1, closed="neither"), "array-like"],
        # Names are checked by get_calibrator (sorted, only those valid for
        # this wrapper, "did you mean").
        "calibrator": [str, BaseCalibrator],
        "calibration_size": [Interval(Real, 0, 1, closed="neither")],
        "random_state": [
            None,
            Interval(Integral, 0, None, closed="left"),  # full-width seeds
            np.random.RandomState,
            StrOptions({SECURE}),
            np.random.SeedSequence,
            np.random.Generator,
        ],
        "n_jobs": [Integral, None],
        # Given to a private calibrator (see _fit_calibrator).
        "epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "score_bounds": ["array-like", None],
        # None, "class" (classifiers), a column name or index, or a callable
        # (checked by check_group_by at the start of fit).
        "group_by": [None, str, Integral, callable],
        "min_group_size": [None, Interval(Integral, 1, None, closed="left")],
    }

    #: Calibrator aliases this wrapper accepts (``None``: every alias).
    _calibrator_names: tuple[str, ...] | None = None
    #: Whether ``y`` holds numbers (regression) rather than class labels.
    _y_numeric = True
    #: What the training rows train, for the privacy warning.
    _trained = "the estimator"
    #: Whether ``group_by="class"`` (the candidate label's group) is accepted.
    _groups_by_class = False
    # -- hooks (see the class docstring) ------------------------------------

    def _default_estimator(self):
        raise NotImplementedError

    def _inner(self):
        """The model to fit or use: ``estimator``, or the default when None."""
        return self._default_estimator() if self.estimator is None else self.estimator

    def _models(self):
        return {"estimator": self._inner()}

    def _input_models(self):
        """The models whose input tags (NaN, sparse) the wrapper forwards."""
        return list(self._models().values())

    def _check_params(self):
        """Data-free cross-parameter checks, run before the data is read."""

    def _check_y(self, y):
        """Wrapper-specific checks of the validated ``y``; returns ``y``."""
        return y

    def _needs_training_rows(self, score):
        """Whether ``score`` learns from training rows (besides the models)."""
        return False

    def _resolve_score(self):
        """A fresh conformity score from ``conformity_score`` (name or instance)."""
        return self._score_resolver(self.conformity_score)

    def _fit_models(self, prefit, train, score, streams):
        """Set ``estimator_``: the model itself when prefit, else a fitted clone."""
        inner = self._inner()
        self.estimator_ = (
            inner if prefit["estimator"] else self._fit_clone(inner, train)
        )

    def _calibrate(self, score, output, X, y, client_ids, seed, streams):
        """Score the calibration rows (``output``: the model's, on ``X``); calibrate."""
        raise NotImplementedError

    def _model_output(self, X):
        """What the conformity score reads: here the model's point predictions."""
        return self.estimator_.predict(X)

    def _point_prediction(self, X):
        return self.estimator_.predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = [input_tags(m) for m in self._input_models()]
        tags.input_tags.allow_nan = all(t.allow_nan for t in inner)
        tags.input_tags.sparse = all(t.sparse for t in inner)
        return tags

    # -- the fit skeleton -----------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=False)
    @atomic_fit
    def fit(
        self,
        X: MatrixLike,
        y: ArrayLike,
        client_ids: ClientIds = None,
        **fit_params: Any,
    ) -> BaseFedConformal:
        """Fit (or freeze) the model(s) and calibrate the threshold across clients.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Calibration rows (and training rows if a model is not prefit).
        y : array-like of shape (n_samples,)
            Targets (regressors) or labels (classifiers: every calibration
            label must be among the model's classes).
        client_ids : array-like of shape (n_samples,), default=None
            Client holding each row; ``None`` means a single client.
        **fit_params : dict
            Passed to the ``fit`` of each model the wrapper fits (e.g.
            ``X_unlabeled`` of
            :class:`~skfedcp.two_students.TwoStudentsRegressor`); an error
            when every model is prefit. Per-row parameters (``sample_weight``,
            or ``<step>__sample_weight`` for a pipeline) need one entry per
            row of ``X`` and are split with the rows; other parameters are
            passed unchanged. A model whose ``fit`` takes ``client_ids`` also
            receives the labels of its training rows.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        return self._fit(X, y, client_ids, fit_params)

    def _fit(self, X, y, client_ids, fit_params):
        """The body of :meth:`fit` (on atomic_fit's copy without fitted attributes)."""
        self._alpha_levels()
        self._check_params()
        check_group_by(self)
        X_use, y, client_ids, scanned = self._validate_fit_data(X, y, client_ids)
        fit_params = _check_fit_params(fit_params, y.shape[0])
        calibrator_seed, streams = self._fit_randomness()
        score = self._resolve_score()
        prefit = {
            name: model is not None and is_prefit(model)
            for name, model in self._models().items()
        }
        fits_model = not all(prefit.values())
        if fit_params and not fits_model:
            raise ValueError(
                f"fit parameters {sorted(fit_params)} go to the estimator's fit, "
                "but the estimator is prefit and is not fitted again."
            )
        train_idx, cal_idx = self._calibration_split(
            client_ids,
            not (fits_model or self._needs_training_rows(score)),
            streams,
        )
        if fits_model:
            self._warn_training_not_private(self._trained)
        if train_idx.size:
            train = _TrainRows(
                self._rows(X_use, train_idx),
                y[train_idx],
                client_ids[train_idx],
                _split_fit_params(fit_params, train_idx),
            )
        else:  # every model prefit: nothing trains
            train = _TrainRows(None, None, None, {})
        self._fit_models(prefit, train, score, streams)
        self.conformity_score_ = score
        # A prefit model calibrates on every row: X, y and client_ids are used
        # as validated, without indexing (cal_idx is None).
        X_cal, y_cal = self._rows(X_use, cal_idx), self._rows(y, cal_idx)
        # Scratch for _fit_calibrator: atomic_fit does not install it.
        self._cal_groups = calibration_groups(self, X_cal, y_cal)
        self._calibrate(
            score,
            self._predict_checked(self._model_output, X_cal, scanned=scanned),
            X_cal,
            y_cal,
            self._rows(client_ids, cal_idx),
            calibrator_seed,
            streams,
        )
        return self

    @staticmethod
    def _fit_clone(model, train, **params):
        """``clone(model).set_params(**params).fit`` on the training rows.

        A model whose ``fit`` takes ``client_ids`` receives the labels of
        its training rows, and so does every step of a pipeline (nested
        pipelines too) whose ``fit`` takes them (see :func:`client_ids_params`).
        """
        fit_params = {**train.params, **client_ids_params(model, train.client_ids)}
        model = clone(model)
        if params:
            model.set_params(**params)
        return model.fit(train.X, train.y, **fit_params)

    # -- the predict skeleton -------------------------------------------------

    def _checked_output(self, X):
        """``_model_output(X)`` after the fitted-state and shape checks."""
        self._check_predict_X(X)
        return self._model_output(X)

    def predict(self, X: MatrixLike) -> NDArray[Any]:
        """Return point predictions (no calibration involved).

        The model's own ``predict`` (labels for a classifier); for
        :class:`~skfedcp.FedCQRRegressor`, the midpoint of the two predicted
        quantiles. It serves ``score``, pipelines and model selection.

        %(predict_params)s

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        self._check_predict_X(X)
        return self._point_prediction(X)

    def _get_calibrator(self):
        """A fresh calibrator; unknown or unsuitable names give a clear error."""
        return get_calibrator(
            self.calibrator, allowed=self._calibrator_names, owner=type(self).__name__
        )

    def _fit_randomness(self):
        """Check ``random_state`` against the calibrator; return ``fit_streams``.

        ``"secure"`` is accepted only with a private calibrator, whose
        mechanism it feeds; a non-private calibrator draws no noise.
        """
        self._get_calibrator()  # an unknown name fails first, and clearly
        if isinstance(self.random_state, str) and not is_private_calibrator(
            self.calibrator
        ):
            name = (
                self.calibrator
                if isinstance(self.calibrator, str)
                else type(self.calibrator).__name__
            )
            raise ValueError(
                f'random_state="secure" feeds the noise of a private calibrator '
                f"(e.g. 'dp-qq', 'dp-central'); calibrator={name!r} draws no noise. "
                "Pass an int or None."
            )
        return fit_streams(self.random_state)

    def _warn_training_not_private(self, what):
        """Warn that rows train a model outside the privacy guarantee."""
        if is_private_calibrator(self.calibrator):
            # Once per search, not once per candidate and fold.
            warn_user_once_in_search(
                f"{type(self).__name__} trains {what} on part of the rows given to "
                "fit, without any privacy protection: epsilon_spent_ covers the "
                "calibration rows only. Train the model on other (public or "
                "privately trained) data and pass it as FrozenEstimator.",
                PrivacyLeakWarning,
            )

    def _calibration_split(self, client_ids, prefit, streams):
        """Return ``(train_idx, cal_idx)``, a random split made within each client.

        The split draws from ``streams[_SPLIT]`` (see :func:`fit_streams`),
        read only when rows are split. With a
        prefit model every row calibrates: ``train_idx`` is empty and
        ``cal_idx`` is None, which :meth:`_rows` reads as "every row, in
        order" and answers without indexing (no copy of ``X``).
        """
        n = client_ids.shape[0]
        if prefit:
            return np.empty(0, dtype=np.intp), None
        part = ClientPartition(client_ids, n)
        codes = part.client_codes()
        n_cal = np.floor(self.calibration_size * part.sizes).astype(np.intp)
        empty = np.flatnonzero(n_cal == 0)
        if empty.size:
            j = empty[0]
            raise ValueError(
                f"client {part.clients[j]} has {part.sizes[j]} sample(s): no "
                f"calibration row is left after the split with calibration_size="
                f"{self.calibration_size}. Give every client at least "
                f"{int(np.ceil(1 / self.calibration_size))} rows, raise "
                "calibration_size, or pass a fitted model as FrozenEstimator."
            )
        order = np.lexsort((np.random.default_rng(streams[_SPLIT]).random(n), codes))
        starts = np.concatenate(([0], np.cumsum(part.sizes)[:-1]))
        sorted_codes = codes[order]
        position = np.arange(n) - starts[sorted_codes]
        is_cal = position < n_cal[sorted_codes]
        cal_idx = np.sort(order[is_cal])
        train_idx = np.sort(order[~is_cal])
        if train_idx.size == 0:
            raise ValueError(
                "no training row is left after the calibration split; lower "
                "calibration_size or pass a fitted model as FrozenEstimator."
            )
        return train_idx, cal_idx

    def _check_predict_X(self, X):
        """Fitted-state, shape and feature-name checks at predict time.

        No copy and no scan of the values: the inner model validates them
        itself and receives ``X`` exactly as the user passed it (DataFrames
        keep their columns). Costs microseconds, so ``predict_interval`` stays
        within a few percent of the model's own ``predict``.
        """
        if not hasattr(self, "threshold_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' "
                "with appropriate arguments before using this estimator."
            )
        if isinstance(X, np.ndarray) or hasattr(X, "iloc"):
            if X.ndim != 2:
                raise ValueError(
                    f"Expected 2D array, got {X.ndim}D array instead. Reshape your "
                    "data either using array.reshape(-1, 1) if your data has a single "
                    "feature or array.reshape(1, -1) if it contains a single sample."
                )
            _feature_names(self, X, reset=False)
            _check_n_features(self, X, reset=False)
        else:
            validate_data(
                self,
                X,
                reset=False,
                dtype=None,
                ensure_all_finite=False,
                accept_sparse=True,
            )

    def _validate_fit_data(self, X, y, client_ids):
        """Validate ``X``, ``y`` and ``client_ids`` at fit time (sets n_features_in_).

        Returns ``(X_use, y, client_ids, scanned)``. ``X_use`` is what the
        inner models receive: a DataFrame as the user passed it (columns
        kept), the validated array otherwise (also when a frozen pipeline
        takes mixed-type frames). Sparse and NaN input follow the inner
        model's tags. ``X`` is scanned once, here (``scanned``: its values
        were, numeric ones); ``X_use`` is never copied beyond what
        ``validate_data`` needs (none for a numeric array), and
        :meth:`_predict_checked` spares the model a second scan of the same
        values.
        """
        y_numeric = self._y_numeric
        _check_y_matches_X(X, y, y_numeric=y_numeric)
        tags = get_tags(self).input_tags
        if _plain_arrays(X, y):
            X_checked = self._validate_plain(X, y, allow_nan=tags.allow_nan)
        else:
            X_checked, y = validate_data(
                self,
                X,
                y,
                accept_sparse=("csr", "csc") if tags.sparse else False,
                ensure_all_finite="allow-nan" if tags.allow_nan else True,
                dtype=None,
                y_numeric=y_numeric,
            )
        # Numeric values were scanned above (finite, or finite-or-NaN when the
        # model takes NaN); object arrays were not (see _predict_checked).
        scanned = X_checked.dtype.kind in "biuf"
        # The inner models receive a DataFrame as passed (columns and their
        # dtypes kept: object, category, string), and a non-numeric array
        # unconverted (frozen pipelines may take mixed data).
        if hasattr(X, "iloc") or X_checked.dtype.kind == "O":
            X_use = X
        else:
            X_use = X_checked
        if client_ids is None and getattr(self._get_calibrator(), "_federated", False):
            warn_user(
                f"{type(self).__name__} was fitted without client_ids: all rows form "
                f"one client, so calibrator={self._calibrator_label()!r} runs as if "
                "the data were pooled. Pass client_ids (the client of each row).",
                SingleClientWarning,
            )
        client_ids = self._check_client_ids(client_ids, y.shape[0])
        return X_use, self._check_y(y), client_ids, scanned

    def _validate_plain(self, X, y, *, allow_nan):
        """``validate_data(self, X, y, dtype=None)`` for a 2-D float and a 1-D array.

        The same checks in the same order, with scikit-learn's own functions
        and messages, minus the dataframe and array-API detection that costs
        a fixed ~0.3 ms per fit (``_plain_arrays`` has ruled those out).
        """
        name = type(self).__name__
        _feature_names(self, X, reset=True)
        _assert_finite(X, allow_nan=allow_nan, estimator_name=name, input_name="X")
        _assert_finite(y, allow_nan=False, estimator_name=name, input_name="y")
        _check_n_features(self, X, reset=True)
        return X

    def _calibrator_label(self):
        if isinstance(self.calibrator, str):
            return self.calibrator
        return type(self.calibrator).__name__

    @staticmethod
    def _rows(X, idx):
        """Rows ``idx`` of an array-like; ``idx=None`` is every row, ``X`` itself."""
        return X if idx is None else _safe_indexing(X, idx)

    @staticmethod
    def _predict_checked(method, X, *, scanned):
        """``method(X)`` on fit's validated ``X``, without a second finiteness scan.

        When ``_validate_fit_data`` has already scanned these values (finite,
        or finite-or-NaN when the model takes NaN: ``scanned``), the model's
        own scan is skipped with scikit-learn's ``assume_finite``: each check
        is done once.
        Values a frozen pipeline computes from ``X`` are not scanned either;
        a non-finite prediction is still refused by the calibrator's check of
        the scores.
        """
        if not scanned:
            return method(X)
        with config_context(assume_finite=True):
            return method(X)

    def _check_client_ids(self, client_ids, n_samples):
        if client_ids is None:
            # One client: a read-only broadcast zero, not n fresh zeros (a
            # calloc whose pages fault in when the calibrator reads them).
            return np.broadcast_to(np.intp(0), (n_samples,))
        return check_client_ids(client_ids, n_samples)

    def _alpha_levels(self):
        """``None`` for a scalar ``alpha``, else its levels (checked, in order)."""
        return check_alpha_levels(self.alpha)

    def _fit_calibrator(
        self, scores, client_ids, rng, *, natural_bounds=None, labels=None
    ):
        """Fit one calibrator per level of ``alpha``; set the fitted attributes.

        See :meth:`_fit_level_calibrators` for the arguments and
        :meth:`_set_calibration` for the attributes.
        """
        self._set_calibration(
            self._fit_level_calibrators(
                scores,
                client_ids,
                rng,
                natural_bounds=natural_bounds,
                labels=labels,
            )
        )

    def _fit_level_calibrators(
        self,
        scores,
        client_ids,
        rng,
        *,
        natural_bounds=None,
        labels=None,
        alpha_divisor=1,
    ):
        """Fit a fresh calibrator per level of ``alpha``, on the same scores.

        The in-process simulation of one round in which each client sends one
        message per level. A private calibrator (one with ``epsilon`` /
        ``score_bounds`` parameters) receives the wrapper's ``epsilon`` and
        ``score_bounds`` when those are not None; ``natural_bounds``
        (data-free bounds of the score, e.g. ``(0, 1)`` for probability
        scores) fill in bounds that neither the wrapper nor the calibrator
        gives. With ``n_levels`` levels each level's release gets ``epsilon
        / n_levels`` (sequential composition: the fit spends ``epsilon``).
        Each level calibrates at ``alpha / alpha_divisor`` (``2``: one side
        of an asymmetric interval). ``labels`` go to calibrators with
        ``requires_score_matrix`` (then ``scores`` is the score matrix of
        every label). ``rng`` is the calibrator's SeedSequence or
        ``"secure"`` (see :func:`fit_streams`); the levels draw from its
        independent children. With ``group_by`` each level's calibrator runs
        per group (:class:`~skfedcp.calibrators.GroupedCalibrator`). Returns
        the list of fitted calibrators, one per level (one for a scalar
        ``alpha``).
        """
        levels = self._alpha_levels()
        if levels is None:
            alphas, seeds = [self.alpha], [rng]
        else:
            alphas = levels.tolist()
            seeds = spawn_seeds(rng, len(alphas))
        fitted = []
        for alpha, seed in zip(alphas, seeds, strict=True):
            calibrator = self._get_calibrator()
            forward_privacy_params(
                calibrator,
                epsilon=getattr(self, "epsilon", None),
                score_bounds=getattr(self, "score_bounds", None),
                natural_bounds=natural_bounds,
                n_levels=len(alphas),
            )
            extra = {} if labels is None else {"labels": labels}
            groups = getattr(self, "_cal_groups", None)
            if groups is not None:
                calibrator = GroupedCalibrator(
                    calibrator, min_group_size=self.min_group_size
                )
                extra = {"group_ids": groups[0], "known_groups": groups[1]}
            calibrator.fit(
                scores,
                client_ids,
                alpha=alpha / alpha_divisor,
                random_state=calibrator_random_state(seed),
                n_jobs=getattr(self, "n_jobs", None),
                **extra,
            )
            fitted.append(calibrator)
        return fitted

    def _set_calibration(self, fitted):
        """Set ``threshold_``, ``epsilon_spent_`` and friends from the calibrators.

        ``fitted`` holds one entry per level: a calibrator, or a ``(lower,
        upper)`` pair of them (the asymmetric CQR score). A scalar ``alpha``
        sets ``calibrator_`` and a scalar (or pair) ``threshold_``. A
        sequence sets ``alphas_``, ``calibrators_``, ``threshold_`` of shape
        ``(n_levels,)`` (``(n_levels, 2)`` for pairs) made non-increasing in
        ``alpha`` (:func:`monotone_thresholds`, so the sets are nested),
        ``raw_thresholds_`` (the calibrators' own), ``messages_`` with a level
        axis, and ``epsilon_spent_per_level_``, whose sum is
        ``epsilon_spent_`` (sequential composition). ``epsilon_spent_`` is
        the calibrators' privacy loss of the calibration rows, ``inf`` for a
        non-private calibrator. With ``group_by``, ``threshold_`` gains a
        group axis (after the level axis), aligned with ``groups_``, and
        ``fallback_threshold_`` is the threshold of unseen groups.
        """
        units = [summarize_level(entry) for entry in fitted]
        first = fitted[0][0] if isinstance(fitted[0], tuple) else fitted[0]
        self.clients_ = first.clients_
        self.n_clients_ = first.n_clients_
        levels = self._alpha_levels()
        if isinstance(first, GroupedCalibrator):
            self.groups_ = first.groups_
            self.fallback_threshold_ = fallback_thresholds(fitted, levels)
        if levels is None:
            self.calibrator_ = fitted[0]
            self.threshold_, self.epsilon_spent_, self.messages_ = units[0]
            return
        self.alphas_ = levels
        self.calibrators_ = list(fitted)
        self.raw_thresholds_ = np.array([u[0] for u in units], dtype=np.float64)
        self.threshold_ = monotone_thresholds(self.raw_thresholds_, levels)
        self.epsilon_spent_per_level_ = np.array([u[1] for u in units])
        self.epsilon_spent_ = float(math.fsum(self.epsilon_spent_per_level_))
        self.messages_ = stack_level_messages([u[2] for u in units])


@fill_doc
class ConformalIntervalMixin(BaseFedConformal):
    """What the conformal regressors share: one interval per row.

    A :class:`BaseFedConformal` listed before it by the regressors (whose
    bases stay ``(RegressorMixin, ConformalIntervalMixin,
    BaseFedConformal)``); the conformity score (a
    :class:`~skfedcp.scores.BaseRegressionScore` or a
    :class:`~skfedcp.scores.BaseCQRScore`) reads the model's output
    (``_model_output``) and turns the threshold into intervals.
    """

    _calibrator_names = REGRESSION_CALIBRATORS

    def _calibrate(self, score, output, X, y, client_ids, seed, streams):
        scores = score.conformity_score(y, output, X)
        self._fit_calibrator(scores, client_ids, seed)

    def predict_interval(self, X: MatrixLike) -> NDArray[np.float64]:
        """Return conformal prediction intervals.

        %(predict_params)s

        Returns
        -------
        intervals : ndarray of shape (n_samples, 2) or (n_samples, 2, n_levels)
            Lower and upper bounds, ``lower <= upper`` on every row (an empty
            conformal set is returned as the interval between its crossed
            bounds); infinite where ``threshold_`` is. When ``alpha`` is a
            sequence, ``intervals[:, :, j]`` is the interval at level
            ``alpha[j]`` (in the order given), and the intervals are nested:
            a smaller ``alpha`` never gives a narrower interval on any row
            (thresholds made monotone in ``alpha``, then each interval
            widened to the hull of those of every larger ``alpha``; widening
            only adds coverage, so each level keeps its guarantee).
        """
        output = self._checked_output(X)
        thresholds = self.threshold_
        if self.group_by is not None:  # each row's group's threshold(s)
            thresholds = group_thresholds(self, row_groups(self.group_by, X))
        if not hasattr(self, "alphas_"):
            return self.conformity_score_.interval(output, thresholds, X)
        return nested_intervals(
            [self.conformity_score_.interval(output, t, X) for t in thresholds],
            self.alphas_,
        )
