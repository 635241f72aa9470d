"""TwoStudentsRegressor: client models distilled into two students."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from numbers import Integral, Real
from typing import Any, Literal

import numpy as np
from joblib import Parallel, delayed
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor
from sklearn.multioutput import MultiOutputRegressor
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted, validate_data

from .._typing import ClientIds, MatrixLike, RandomStateLike
from ..base._levels import nested_intervals
from ..base._search_warnings import warn_user_once_in_search
from ..exceptions import DistillationWarning, PrivacyLeakWarning, TeacherFilterWarning
from ..utils._atomic import atomic_fit
from ..utils._docstrings import fill_doc
from ..utils._sklearn_compat import HasMethods, Interval, StrOptions, _fit_context
from ..utils._validation import check_client_ids
from ..utils._warnings import warn_user
from ._checks import (
    check_alpha_levels_or_float,
    check_client_models,
    check_rng,
    check_round_setup,
    check_trusted_models,
)
from ._filter import _in_band, ensemble_stats, truncation_filter

__all__ = ["TwoStudentsRegressor"]


def _seeded(estimator, rng):
    """Give every ``random_state`` of ``estimator`` (nested too) a fresh seed."""
    keys = sorted(
        key
        for key in estimator.get_params(deep=True)
        if key == "random_state" or key.endswith("__random_state")
    )
    seeds = rng.randint(np.iinfo(np.int32).max, size=len(keys))
    if keys:
        estimator.set_params(**{k: int(s) for k, s in zip(keys, seeds, strict=True)})
    return estimator


def _fit(estimator, X, y):
    return estimator.fit(X, y)


def _supports_multi_output(estimator):
    try:
        return get_tags(estimator).target_tags.multi_output
    except (AttributeError, TypeError):  # pragma: no cover - foreign estimators
        return False


@fill_doc
class TwoStudentsRegressor(RegressorMixin, BaseEstimator):
    """Two Students: client models distilled into a mean and an uncertainty student.

    Each client trains a *teacher* on its own rows (or supplies one already
    fitted). A truncation filter drops teachers whose predictions leave the
    band of the other teachers too often. On unlabelled server inputs
    ``X_unlabeled`` the surviving teachers form a uniform ensemble, which two
    students, any scikit-learn regressors, learn to reproduce: the *mean
    student* regresses the ensemble mean (``predict``) and the *uncertainty
    student* regresses the ensemble's spread (``predict_std``). The students
    never see a label or a client row.

    **The paper's method** (Iglesias Jr et al., 2024): teachers are samples of
    an implicit posterior, the filter is the ``"percentile"`` credible band
    with ``gamma``, the uncertainty student learns the band's two quantiles
    (``uq_target="quantiles"``), and several federated rounds warm-start the
    clients from the mean student (``n_rounds > 1``). **skfedcp's
    extensions**: one-shot use with any regressor (the default), a robust
    ``"mad"`` band and a leave-one-out reference (the paper's band fails in
    one shot when drifted clients extrapolate coherently), a log-standard
    deviation target, and, through
    :class:`~skfedcp.FedConformalRegressor` with
    ``conformity_score="two_students"``, a federated conformal step that gives
    the intervals a coverage guarantee. The raw intervals of
    :meth:`predict_raw_interval` have none.

    Parameters
    ----------
    estimator : regressor, default=None
        Teacher template, cloned and fitted on each client's rows. ``None``
        means ``GradientBoostingRegressor(max_depth=2)``. Ignored for clients
        whose model is supplied with ``client_models``. With ``n_rounds > 1``
        it is the clients' training recipe: from the second client round on,
        each client copies the mean student's weights, takes this estimator's
        parameters (e.g. a shorter ``max_iter``) and fits with
        ``warm_start=True``; it must then be of the mean student's class and
        architecture (``None``: the mean student's own parameters).
    mean_student : regressor, default=None
        Learns the ensemble mean on ``X_unlabeled``. ``None`` means
        ``HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05,
        min_samples_leaf=5)``. With ``n_rounds > 1`` it is also the model the
        clients warm-start from, so it must have a ``warm_start`` parameter.
    uq_student : regressor, default=None
        Learns the ensemble spread. ``None`` means a clone of the mean
        student. Wrapped in :class:`~sklearn.multioutput.MultiOutputRegressor`
        when the quantile target needs two outputs and it has only one.
    uq_target : {"log_std", "quantiles"}, default="log_std"
        What the uncertainty student learns: the log of the teachers' standard
        deviation (skfedcp; one positive output, any regressor) or the lower
        and upper percentiles of the band at ``credible_level`` (the paper).
    filter : {"mad", "percentile", "none"}, default="mad"
        Band of the truncation filter (see :func:`credible_band`):
        ``"percentile"`` is the paper's, ``"mad"`` the robust one, ``"none"``
        keeps every teacher.
    filter_reference : {"loo", "previous"}, default="loo"
        Models the band is built from. ``"loo"``: all other candidates, the
        ensemble members of earlier rounds and the ``trusted_models``.
        ``"previous"`` (the paper's multi-round code): the previous round's
        uncertainty student, read as a band at ``credible_level``; needs
        ``n_rounds > 1`` (a round without a previous student is not filtered).
    credible_level : float, default=0.95
        Mass of the filter band and of the quantile target, in (0, 1).
    gamma : float, default=0.8
        A teacher is kept iff its in-band fraction on the reference inputs is
        at least ``gamma``, in (0, 1).
    filter_start_round : int, default=2
        First client round that is filtered when ``n_rounds > 1`` (the
        paper's 2: earlier bands come from too small an ensemble). One-shot
        fits are always filtered.
    min_teachers : int, default=2
        If fewer teachers pass the filter, the ``min_teachers`` with the
        largest in-band fractions are kept and a
        :class:`~skfedcp.exceptions.TeacherFilterWarning` is issued. Also the
        number of random shards, one teacher each, when all rows belong to
        one client (shards of one client are not filtered).
    sigma_floor : float, default=1e-3
        Floor of the predicted standard deviation, relative to the median
        teacher standard deviation on ``X_unlabeled``; keeps the normalized
        conformity score finite.
    n_rounds : int, default=1
        Number of client rounds. ``1`` is one-shot. Larger values run the
        paper's protocol: in each round every client warm-starts a copy of
        the mean student on its rows (in the first round, without
        ``trusted_models``, it fits ``estimator`` from scratch), the filter
        runs from ``filter_start_round`` on, accepted models join the
        cumulative ensemble, and both students are distilled again from a
        fresh initialisation. Every round reuses the clients' rows given to
        ``fit`` (the paper's code draws fresh rows each round).
    random_state : None, int, SeedSequence, Generator or RandomState, \
            default=None
        Seeds the teachers, the students and the shards. An int or a
        ``RandomState`` seeds as in scikit-learn; ``None`` draws fresh
        operating-system entropy (NumPy's global state is never used); a
        ``SeedSequence`` or ``Generator`` seeds through a SeedSequence.
        ``"secure"`` is refused: nothing here is a privacy mechanism. All
        randomness is consumed in ``fit``.
    n_jobs : int, default=None
        Number of jobs fitting the teachers in parallel (joblib).

    Attributes
    ----------
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels (shard numbers ``0, 1, ...`` for a single
        client).
    in_band_fraction_ : ndarray of shape (n_clients,)
        Each client's in-band fraction in the last round (``nan`` when that
        round was not filtered).
    accepted_ : ndarray of shape (n_clients,) of bool
        Whether each client's model joined the ensemble in the last round.
    accepted_clients_, rejected_clients_ : ndarray
        Client labels kept and dropped in the last round.
    teachers_ : list of estimators
        The ensemble the students were distilled from: trusted models first,
        then the accepted client models of every round.
    n_teachers_ : int
        ``len(teachers_)``.
    mean_student_, uq_student_ : regressor
        The fitted students.
    sigma_floor_ : float
        Absolute floor of :meth:`predict_std`.
    sigma_offset_ : float
        Median of :meth:`predict_std` over ``X_unlabeled``; the offset of the
        ``"two_students_offset"`` conformity score.
    ensemble_band_width_ : float
        Mean width of the teachers' percentile band at ``credible_level`` on
        ``X_unlabeled``.
    distill_rmse_ : float
        Root mean squared difference between the mean student and the
        ensemble mean on ``X_unlabeled`` (training error of the distillation).
    uq_distill_rmse_ : float
        The same for the uncertainty student, in the units of its target.
    history_ : list of dict
        One entry per round (round 0 is the trusted ensemble, when given):
        ``round``, ``filtered``, ``in_band_fraction``, ``accepted``,
        ``n_teachers``, ``band_width``, ``distill_rmse``, and the round's
        ``mean_student``, ``uq_student`` and ``sigma_floor`` (used by the
        ``staged_*`` methods).
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of features seen in ``fit``, when ``X`` has string column names.

    See Also
    --------
    skfedcp.scores.TwoStudentsScore : the normalized score that conformalizes
        the students' intervals.
    truncation_filter : the filter, as a function.

    Notes
    -----
    The spread the uncertainty student learns is the disagreement between
    models (mostly epistemic), not the noise of ``y``: the raw interval
    ``mu(x) ± z · sigma(x)`` has **no coverage guarantee** and often
    under-covers. Conformalizing it (the library's extension) gives
    ``P(Y ∈ C(X)) >= 1 - alpha`` when calibration and test scores are
    i.i.d. given the fitted students, provided calibration rows trained
    neither a teacher nor a student. The teacher stage sends whole client
    models to the server and is not private.

    References
    ----------
    .. [1] Iglesias Jr, de Outeiro, de Farias, Bolic. "Two Students: Enabling
       Uncertainty Quantification in Federated Learning Clients". NeurIPS 2024
       Workshop on Bayesian Decision-making and Uncertainty.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.neighbors import KNeighborsRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(600, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=600)
    >>> client_ids = np.repeat(np.arange(12), 50)
    >>> y[client_ids == 11] += 2.0  # one drifted client
    >>> X_unlabeled = np.linspace(-3, 3, 200).reshape(-1, 1)
    >>> model = TwoStudentsRegressor(
    ...     mean_student=KNeighborsRegressor(5), random_state=0
    ... )
    >>> model = model.fit(X, y, client_ids, X_unlabeled=X_unlabeled)
    >>> model.rejected_clients_
    array([11])
    >>> model.predict([[0.0]]).round(1), model.predict_std([[0.0]]).shape
    (array([0.]), (1,))
    """

    #: Private attributes that belong to a fit (see ``atomic_fit``).
    _private_fit_state = frozenset({"_z_level"})

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "mean_student": [HasMethods(["fit", "predict"]), None],
        "uq_student": [HasMethods(["fit", "predict"]), None],
        "uq_target": [StrOptions({"log_std", "quantiles"})],
        "filter": [StrOptions({"mad", "percentile", "none"})],
        "filter_reference": [StrOptions({"loo", "previous"})],
        "credible_level": [Interval(Real, 0, 1, closed="neither")],
        "gamma": [Interval(Real, 0, 1, closed="neither")],
        "filter_start_round": [Interval(Integral, 1, None, closed="left")],
        "min_teachers": [Interval(Integral, 2, None, closed="left")],
        "sigma_floor": [Interval(Real, 0, None, closed="neither")],
        "n_rounds": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state", np.random.SeedSequence, np.random.Generator],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        *,
        mean_student: BaseEstimator | None = None,
        uq_student: BaseEstimator | None = None,
        uq_target: Literal["log_std", "quantiles"] = "log_std",
        filter: Literal["mad", "percentile", "none"] = "mad",
        filter_reference: Literal["loo", "previous"] = "loo",
        credible_level: float = 0.95,
        gamma: float = 0.8,
        filter_start_round: int = 2,
        min_teachers: int = 2,
        sigma_floor: float = 1e-3,
        n_rounds: int = 1,
        random_state: RandomStateLike = None,
        n_jobs: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.mean_student = mean_student
        self.uq_student = uq_student
        self.uq_target = uq_target
        self.filter = filter
        self.filter_reference = filter_reference
        self.credible_level = credible_level
        self.gamma = gamma
        self.filter_start_round = filter_start_round
        self.min_teachers = min_teachers
        self.sigma_floor = sigma_floor
        self.n_rounds = n_rounds
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ fit

    def _templates(self):
        mean = (
            HistGradientBoostingRegressor(
                max_iter=300, learning_rate=0.05, min_samples_leaf=5
            )
            if self.mean_student is None
            else self.mean_student
        )
        if self.estimator is not None:
            teacher = self.estimator
        elif self.n_rounds > 1:  # clients train the mean student's recipe
            teacher = mean
        else:
            teacher = GradientBoostingRegressor(max_depth=2)
        uq = mean if self.uq_student is None else self.uq_student
        return teacher, mean, uq

    def _check_inputs(self, name: str, value: MatrixLike) -> NDArray[Any]:
        """Validate an extra input array against the fitted feature layout."""
        try:
            return validate_data(self, value, reset=False)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from exc

    @_fit_context(prefer_skip_nested_validation=False)
    @atomic_fit
    def fit(
        self,
        X: MatrixLike,
        y: ArrayLike,
        client_ids: ClientIds = None,
        *,
        X_unlabeled: MatrixLike | None = None,
        X_ref: MatrixLike | None = None,
        client_models: Mapping[object, BaseEstimator] | None = None,
        trusted_models: Sequence[BaseEstimator] | None = None,
    ) -> TwoStudentsRegressor:
        """Build the teachers, filter them and distil the two students.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The clients' training rows. With ``client_models`` these are the
            rows the supplied models were trained on (used only for the
            feature checks and as the ``X_unlabeled`` fallback).
        y : array-like of shape (n_samples,)
            Targets (single output).
        client_ids : array-like of shape (n_samples,), default=None
            Client holding each row. ``None`` means a single client. The rows
            of a single client (without ``client_models``) are dealt at
            random into ``min_teachers`` shards, one teacher each.
        X_unlabeled : array-like of shape (n_unlabeled, n_features), default=None
            Unlabelled server inputs the students are distilled on (and the
            filter's reference inputs unless ``X_ref`` is given). ``None``
            falls back to ``X``: convenient (and what scikit-learn's common
            checks exercise), but then the server sees the clients' inputs,
            which the paper's protocol avoids.
        X_ref : array-like of shape (n_ref, n_features), default=None
            Reference inputs of the filter; ``None`` uses ``X_unlabeled``.
            The paper uses the inputs of its labelled server set.
        client_models : dict, default=None
            ``{client label: fitted regressor}``, one per client in
            ``client_ids``, used as the teachers instead of fitting clones of
            ``estimator``. Their training rows must not be used to calibrate.
        trusted_models : list of fitted regressors, default=None
            Models the server trained on its own data (the paper's initial
            ensemble). They are ensemble members that are never filtered and
            join every ``"loo"`` band; with ``n_rounds > 1`` they form round
            0 and the clients warm-start from their students in round 1.

        Returns
        -------
        self : TwoStudentsRegressor
            The fitted estimator.
        """
        X_checked, y_checked = validate_data(self, X, y, y_numeric=True)
        return self._fit_checked(
            X_checked,
            y_checked,
            check_client_ids(client_ids, X_checked.shape[0]),
            X_unlabeled=X_unlabeled,
            X_ref=X_ref,
            client_models=client_models,
            trusted_models=trusted_models,
        )

    def _fit_checked(
        self,
        X: NDArray[Any],
        y: NDArray[Any],
        client_ids: NDArray[Any],
        *,
        X_unlabeled: MatrixLike | None,
        X_ref: MatrixLike | None,
        client_models: Mapping[object, BaseEstimator] | None,
        trusted_models: Sequence[BaseEstimator] | None,
    ) -> TwoStudentsRegressor:
        """The body of :meth:`fit`, on the validated ``X``, ``y`` and ``client_ids``."""
        # One data holder: its rows are dealt into shards, one teacher each.
        single_holder = client_models is None and np.unique(client_ids).shape[0] == 1
        if X_unlabeled is None and not single_holder:
            warn_user_once_in_search(
                "X_unlabeled was not given: the students are distilled on the "
                "clients' own inputs X, which the server then sees (the paper "
                "distils on server-side unlabeled inputs). Pass X_unlabeled.",
                PrivacyLeakWarning,
            )
        U = X if X_unlabeled is None else self._check_inputs("X_unlabeled", X_unlabeled)
        if U.shape[0] == 0:
            raise ValueError("X_unlabeled has 0 rows; the students need inputs.")
        R = U if X_ref is None else self._check_inputs("X_ref", X_ref)
        trusted = check_trusted_models(trusted_models)
        teacher, mean_template, uq_template = self._templates()
        multi_round = self.n_rounds > 1
        check_round_setup(
            self.filter_reference, multi_round, teacher, mean_template, client_models
        )
        rng = check_rng(self.random_state)

        if single_holder:
            n = X.shape[0]
            if n < self.min_teachers:
                raise ValueError(
                    f"TwoStudentsRegressor needs at least min_teachers="
                    f"{self.min_teachers} rows to train one teacher per shard; got "
                    f"n_samples = {n}."
                )
            groups = np.empty(n, dtype=np.intp)
            groups[rng.permutation(n)] = np.arange(n) % self.min_teachers
        else:
            groups = client_ids
        clients, codes = np.unique(groups, return_inverse=True)
        rows = [np.flatnonzero(codes == j) for j in range(clients.shape[0])]
        supplied = check_client_models(client_models, clients)
        if clients.shape[0] + len(trusted) < 2:
            raise ValueError(
                "TwoStudentsRegressor needs at least two teachers; got one client "
                "and no trusted_models. Pass client_ids with two or more clients."
            )

        self.clients_ = clients
        self._z_level = norm.ppf((1.0 + self.credible_level) / 2.0)
        members = list(trusted)
        P_U = [m.predict(U) for m in members]
        P_R = [m.predict(R) for m in members]
        students: dict[str, Any] | None = None
        history: list[dict[str, Any]] = []
        if trusted and multi_round:
            students = self._distil(U, np.asarray(P_U), mean_template, uq_template, rng)
            history.append(self._record(0, None, None, len(members), students))

        for r in range(1, self.n_rounds + 1):
            if supplied is not None:
                candidates = supplied
            else:
                candidates = self._fit_teachers(
                    teacher,
                    X,
                    y,
                    rows,
                    rng,
                    start=None if students is None else students["mean_student"],
                )
            filtered = (
                self.filter != "none"
                and not single_holder
                and (not multi_round or r >= self.filter_start_round)
            )
            delta = np.full(clients.shape[0], np.nan)
            accepted = np.ones(clients.shape[0], dtype=bool)
            C_R = None
            if filtered:
                C_R = np.asarray([m.predict(R) for m in candidates])
                band = self._reference_band(C_R, P_R, students, R)
                if band is None:
                    filtered = False
                else:
                    delta, accepted = band
                    accepted = self._ensure_min_teachers(delta, accepted, len(members))
            kept = [m for m, a in zip(candidates, accepted, strict=True) if a]
            members.extend(kept)
            P_U.extend(m.predict(U) for m in kept)
            if multi_round and self.filter_reference == "loo":
                if C_R is None:
                    C_R = np.asarray([m.predict(R) for m in kept])
                    P_R.extend(C_R)
                else:
                    P_R.extend(C_R[accepted])
            students = self._distil(U, np.asarray(P_U), mean_template, uq_template, rng)
            history.append(
                self._record(
                    r, delta if filtered else None, accepted, len(members), students
                )
            )

        if students is None:  # n_rounds >= 1: at least one round has run
            raise RuntimeError("no round was run")
        self.teachers_ = members
        self.n_teachers_ = len(members)
        self.history_ = history
        last = history[-1]
        self.in_band_fraction_ = last["in_band_fraction"]
        self.accepted_ = last["accepted"]
        self.accepted_clients_ = clients[self.accepted_]
        self.rejected_clients_ = clients[~self.accepted_]
        self.mean_student_ = students["mean_student"]
        self.uq_student_ = students["uq_student"]
        self.sigma_floor_ = students["sigma_floor"]
        self.ensemble_band_width_ = students["band_width"]
        self.distill_rmse_ = students["distill_rmse"]
        self.uq_distill_rmse_ = students["uq_distill_rmse"]
        self.sigma_offset_ = float(np.median(self._sigma(students, U)))
        return self

    def _fit_teachers(self, template, X, y, rows, rng, *, start=None):
        """Fit one clone of ``template`` per client, or warm-start from ``start``."""
        models = []
        for _ in rows:
            if start is None:
                model = clone(template)
            else:  # the client's recipe, from the mean student's weights
                model = copy.deepcopy(start)
                model.set_params(
                    **{**template.get_params(deep=False), "warm_start": True}
                )
            models.append(_seeded(model, rng))
        return Parallel(n_jobs=self.n_jobs)(
            delayed(_fit)(model, X[idx], y[idx])
            for model, idx in zip(models, rows, strict=True)
        )

    def _reference_band(self, C_R, P_R, students, R):
        """In-band fractions and acceptance of the candidates, or None."""
        if self.filter_reference == "previous":
            if students is None:
                return None
            lower, upper = self._student_band(students, R)
            delta = _in_band(C_R, lower, upper)
            return delta, delta >= self.gamma
        if self.filter == "none":  # not called: an unfiltered round has no band
            return None
        reference = np.asarray(P_R) if len(P_R) else None
        result = truncation_filter(
            C_R,
            method=self.filter,
            credible_level=self.credible_level,
            gamma=self.gamma,
            reference=reference,
        )
        return result.in_band_fraction, result.accepted

    def _ensure_min_teachers(self, delta, accepted, n_members):
        need = min(self.min_teachers, delta.shape[0])
        if accepted.sum() + n_members >= self.min_teachers or accepted.sum() >= need:
            return accepted
        order = np.argsort(-delta, kind="stable")[:need]
        kept = np.zeros_like(accepted)
        kept[order] = True
        warn_user(
            f"the truncation filter kept {int(accepted.sum())} of {delta.shape[0]} "
            f"client models (gamma={self.gamma}); keeping the {need} with the "
            "largest in-band fractions instead.",
            TeacherFilterWarning,
        )
        return kept

    def _distil(self, U, P_U, mean_template, uq_template, rng):
        stats = ensemble_stats(P_U, credible_level=self.credible_level)
        s = stats.std
        median_s = float(np.median(s))
        scale = median_s if median_s > 0 else float(np.std(stats.mean)) + 1e-12
        floor = self.sigma_floor * scale
        mean_student = _seeded(clone(mean_template), rng).fit(U, stats.mean)
        uq_student = _seeded(clone(uq_template), rng)
        if self.uq_target == "log_std":
            target = np.log(np.maximum(s, floor))
        else:
            target = np.column_stack([stats.lower, stats.upper])
            if not _supports_multi_output(uq_student):
                uq_student = MultiOutputRegressor(uq_student)
        uq_student.fit(U, target)
        mean_rmse = float(np.sqrt(np.mean((mean_student.predict(U) - stats.mean) ** 2)))
        uq_rmse = float(np.sqrt(np.mean((uq_student.predict(U) - target) ** 2)))
        mean_s = float(np.mean(s))
        if mean_s > 0 and mean_rmse > 0.25 * mean_s:
            warn_user(
                f"the mean student reproduces the ensemble mean on X_unlabeled with "
                f"RMSE {mean_rmse:.3g}, more than a quarter of the mean teacher "
                f"standard deviation ({mean_s:.3g}); consider a more flexible "
                "mean_student.",
                DistillationWarning,
            )
        return {
            "mean_student": mean_student,
            "uq_student": uq_student,
            "sigma_floor": floor,
            "band_width": float(np.mean(stats.upper - stats.lower)),
            "distill_rmse": mean_rmse,
            "uq_distill_rmse": uq_rmse,
        }

    def _record(self, r, delta, accepted, n_teachers, students):
        n = self.clients_.shape[0]
        return {
            "round": r,
            "filtered": delta is not None,
            "in_band_fraction": np.full(n, np.nan) if delta is None else delta,
            "accepted": np.zeros(n, bool) if accepted is None else accepted,
            "n_teachers": n_teachers,
            "band_width": students["band_width"],
            "distill_rmse": students["distill_rmse"],
            "mean_student": students["mean_student"],
            "uq_student": students["uq_student"],
            "sigma_floor": students["sigma_floor"],
        }

    # ------------------------------------------------------------- predict

    def _sigma(self, students, X):
        out = np.asarray(students["uq_student"].predict(X), dtype=np.float64)
        if self.uq_target == "log_std":
            sigma = np.exp(np.minimum(out, 700.0))
        else:
            out = np.sort(out, axis=1)
            sigma = (out[:, 1] - out[:, 0]) / (2.0 * self._z_level)
        return np.maximum(sigma, students["sigma_floor"])

    def _student_band(self, students, X):
        """The uncertainty student read as a band at ``credible_level``."""
        if self.uq_target == "quantiles":
            out = np.sort(np.asarray(students["uq_student"].predict(X)), axis=1)
            return out[:, 0], out[:, 1]
        mu = students["mean_student"].predict(X)
        half = self._z_level * self._sigma(students, X)
        return mu - half, mu + half

    def _raw_interval(self, students, X, alpha):
        if self.uq_target == "quantiles" and np.isclose(
            1.0 - alpha, self.credible_level, rtol=0, atol=1e-12
        ):
            lower, upper = self._student_band(students, X)
            return np.column_stack([lower, upper])
        mu = students["mean_student"].predict(X)
        half = norm.ppf(1.0 - alpha / 2.0) * self._sigma(students, X)
        return np.column_stack([mu - half, mu + half])

    def _raw_levels(self, students, X, alpha):
        """The raw interval at ``alpha``: a float, or the array of several levels.

        A sequence gives ``(n_samples, 2, n_levels)`` bounds, nested: each
        interval is widened to the hull of those of every larger ``alpha``.
        """
        if isinstance(alpha, float):
            return self._raw_interval(students, X, alpha)
        return nested_intervals(
            [self._raw_interval(students, X, a) for a in alpha.tolist()], alpha
        )

    def _check_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False)

    def predict(self, X: MatrixLike) -> NDArray[np.float64]:
        """Return the mean student's predictions (the distilled ensemble mean).

        %(predict_params)s

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        X = self._check_X(X)
        return self.mean_student_.predict(X)

    def predict_std(self, X: MatrixLike) -> NDArray[np.float64]:
        """Return the uncertainty student's standard deviation, floored.

        With ``uq_target="log_std"`` this is ``exp`` of its output; with
        ``"quantiles"`` it is the predicted band width divided by
        ``2 · Φ⁻¹((1 + credible_level) / 2)``. Either way it is at least
        ``sigma_floor_``.

        %(predict_params)s

        Returns
        -------
        sigma : ndarray of shape (n_samples,)
            The models' disagreement at ``X`` (not the noise of ``y``).
        """
        X = self._check_X(X)
        return self._sigma(self._students(), X)

    def predict_raw_interval(
        self, X: MatrixLike, *, alpha: float | Sequence[float] = 0.1
    ) -> NDArray[np.float64]:
        """Return the students' **uncalibrated** interval ``mu ± z · sigma``.

        ``z = Φ⁻¹(1 - alpha / 2)``. With ``uq_target="quantiles"`` and
        ``1 - alpha == credible_level`` the uncertainty student's two outputs
        are returned directly, as in the paper. These intervals describe how
        much the teachers disagree, not where ``y`` falls: they carry **no
        coverage guarantee**. Wrap the model in
        :class:`~skfedcp.FedConformalRegressor` with
        ``conformity_score="two_students"`` for calibrated intervals.

        %(predict_params)s
        alpha : float or array-like of float, default=0.1
            Nominal miscoverage of the Gaussian reading, in (0, 1), or a
            sequence of distinct such levels: one interval per level, from
            the same students.

        Returns
        -------
        intervals : ndarray of shape (n_samples, 2) or (n_samples, 2, n_levels)
            Lower and upper bounds; for a sequence ``alpha``,
            ``intervals[:, :, j]`` is the interval at ``alpha[j]``, nested
            across levels (each widened to the hull of those of every larger
            ``alpha``, which matters only where the quantile target's
            student band replaces the Gaussian reading).
        """
        checked = check_alpha_levels_or_float(alpha)
        X = self._check_X(X)
        return self._raw_levels(self._students(), X, checked)

    def predict_teachers(self, X: MatrixLike) -> NDArray[np.float64]:
        """Return every ensemble member's predictions.

        %(predict_params)s

        Returns
        -------
        predictions : ndarray of shape (n_teachers, n_samples)
            Row ``m`` holds ``teachers_[m].predict(X)``; summarize it with
            :func:`ensemble_stats`.
        """
        X = self._check_X(X)
        return np.asarray([m.predict(X) for m in self.teachers_], dtype=np.float64)

    def staged_predict(self, X: MatrixLike) -> Iterator[NDArray[np.float64]]:
        """Yield the mean student's predictions after each round.

        %(predict_params)s

        Yields
        ------
        y_pred : ndarray of shape (n_samples,)
            One array per entry of ``history_``.
        """
        X = self._check_X(X)
        for entry in self.history_:
            yield entry["mean_student"].predict(X)

    def staged_predict_raw_interval(
        self, X: MatrixLike, *, alpha: float | Sequence[float] = 0.1
    ) -> Iterator[NDArray[np.float64]]:
        """Yield the uncalibrated interval of :meth:`predict_raw_interval` per round.

        %(predict_params)s
        alpha : float or array-like of float, default=0.1
            Nominal miscoverage, in (0, 1), or a sequence of distinct levels
            (as in :meth:`predict_raw_interval`).

        Yields
        ------
        intervals : ndarray of shape (n_samples, 2) or (n_samples, 2, n_levels)
            One array per entry of ``history_``.
        """
        checked = check_alpha_levels_or_float(alpha)
        X = self._check_X(X)
        for entry in self.history_:
            yield self._raw_levels(entry, X, checked)

    def _students(self):
        return {
            "mean_student": self.mean_student_,
            "uq_student": self.uq_student_,
            "sigma_floor": self.sigma_floor_,
        }
