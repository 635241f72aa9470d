"""PrivacyTradeoffDisplay: coverage and set size or width against epsilon."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from numbers import Integral
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, clone
from sklearn.pipeline import Pipeline

from .._typing import RandomStateLike
from ..calibrators import (
    BaseCalibrator,
    PrivateCentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
)
from ..exceptions import InfiniteThresholdWarning
from ..metrics import (
    coverage_score,
    mean_width_score,
    set_coverage_score,
    set_size_score,
)
from ..utils._random import check_seed_sequence
from ..utils._validation import check_alpha
from ..utils._warnings import warn_user
from ._base import (
    Display,
    check_matplotlib,
    display_docfiller,
    estimator_alpha,
    estimator_name,
    final_step,
    finish_axes,
    new_figure,
    predict_region,
)

if TYPE_CHECKING:  # matplotlib is imported only when drawing
    from matplotlib.axes import Axes


__all__ = ["PrivacyTradeoffDisplay"]

_NON_PRIVATE = {"dp-central": "central", "dp-qq": "qq"}


def _param_key(estimator, name):
    """``name`` or the unique ``<step>__name`` among the estimator's params."""
    params = estimator.get_params()
    if name in params:
        return name
    keys = [k for k in params if k.endswith(f"__{name}")]
    if len(keys) == 1:
        return keys[0]
    raise ValueError(
        f"estimator has no unique {name!r} parameter; PrivacyTradeoffDisplay "
        "needs a private conformal wrapper (e.g. PrivateConformalClassifier or "
        "FedConformalRegressor with calibrator='dp-qq')."
    )


def _non_private_calibrator(calibrator):
    """Non-private counterpart of a private calibrator (name or instance)."""
    if isinstance(calibrator, str):
        if calibrator in _NON_PRIVATE:
            return _NON_PRIVATE[calibrator]
        return "central"
    if isinstance(calibrator, PrivateQuantileOfQuantilesCalibrator):
        return "qq"
    if isinstance(calibrator, PrivateCentralCalibrator):
        return "central"
    return "central"


def _summarize(values):
    """Mean and standard error over repeats (rows) of a (n_repeats, n_eps) array."""
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        return values, None
    mean = values.mean(axis=0)
    if values.shape[0] < 2:
        return mean, None
    with np.errstate(invalid="ignore"):
        se = values.std(axis=0, ddof=1) / np.sqrt(values.shape[0])
    se[~np.isfinite(mean)] = np.nan
    return mean, se


def _check_metric(values, name, n_eps, *, unit_interval):
    values = np.asarray(values, dtype=float)
    if values.ndim not in (1, 2) or values.shape[-1] != n_eps:
        raise ValueError(
            f"{name} must have shape ({n_eps},) or (n_repeats, {n_eps}), one column "
            f"per epsilon; got {values.shape}."
        )
    if np.any(np.isnan(values)):
        raise ValueError(f"{name} must not contain NaN.")
    if unit_interval and np.any((values < 0) | (values > 1)):
        raise ValueError(f"{name} must lie in [0, 1].")
    if not unit_interval and np.any(values < 0):
        raise ValueError(f"{name} must be non-negative (inf is allowed).")
    return values


_fill_doc = display_docfiller(
    "PrivacyTradeoffDisplay",
    "errorbar",
    from_plot_params="""\
ax : sequence of two matplotlib Axes, default=None
    Axes to draw on.
name : str, default=None
    Label of the private curves.""",
)


@_fill_doc
class PrivacyTradeoffDisplay(Display):
    """Coverage and mean set size (or width) against the privacy level epsilon.

    Two panels share a logarithmic epsilon axis. The left one shows the
    test coverage at each epsilon with the target ``1 - alpha`` and the
    coverage of the non-private counterpart (dotted); the right one shows
    the mean set size (classification) or mean interval width (regression),
    with the non-private level. Small epsilons buy more privacy with larger
    sets; the curves show how quickly the private calibration approaches the
    non-private one. With several repeats per epsilon the points are means
    with error bars of one standard error across repeats. Infinite widths
    (trivial intervals, returned when there is too little data for epsilon)
    are drawn as triangles at the top of the right panel.

    Create it with :meth:`from_estimator` or :meth:`from_predictions`; the
    constructor only stores its arguments.

    Parameters
    ----------
    epsilons : ndarray of shape (n_epsilons,)
        Privacy levels, positive.
    coverage : ndarray of shape (n_epsilons,) or (n_repeats, n_epsilons)
        Test coverage at each epsilon (one row per repeat).
    size : ndarray of shape (n_epsilons,) or (n_repeats, n_epsilons)
        Mean set size or interval width at each epsilon.
    non_private : tuple of two floats or None, default=None
        ``(coverage, size)`` of the non-private counterpart.
    alpha : float or None, default=None
        Target miscoverage; draws the target ``1 - alpha``.
    size_label : str, default="mean set size"
        Label of the right panel's y-axis (e.g. ``"mean interval width"``).
    estimator_name : str, default=None
        Label of the private curves.

    Attributes
    ----------
    coverage_line_ : matplotlib ErrorbarContainer
        Coverage against epsilon.
    size_line_ : matplotlib ErrorbarContainer
        Mean size or width against epsilon (finite values).
    infinite_size_scatter_ : matplotlib PathCollection or None
        Markers of the epsilons whose mean width is infinite.
    target_line_ : matplotlib Line2D or None
        The target ``1 - alpha``.
    non_private_coverage_line_ : matplotlib Line2D or None
        Coverage of the non-private counterpart.
    non_private_size_line_ : matplotlib Line2D or None
        Size or width of the non-private counterpart.
    ax_ : ndarray of two matplotlib Axes
        The coverage and the size panels.
    figure_ : matplotlib Figure
        Figure containing the panels.

    See Also
    --------
    ClientCoverageDisplay : coverage client by client at one epsilon.

    Examples
    --------
    >>> from skfedcp.plotting import PrivacyTradeoffDisplay
    >>> display = PrivacyTradeoffDisplay.from_predictions(
    ...     [0.5, 1.0, 4.0], [0.97, 0.93, 0.91], [3.1, 2.2, 1.9],
    ...     non_private=(0.90, 1.8), alpha=0.1)
    >>> display.ax_[0].get_xscale()
    'log'
    """

    def __init__(
        self,
        *,
        epsilons: ArrayLike,
        coverage: ArrayLike,
        size: ArrayLike,
        non_private: tuple[float, float] | None = None,
        alpha: float | None = None,
        size_label: str = "mean set size",
        estimator_name: str | None = None,
    ) -> None:
        self.epsilons = epsilons
        self.coverage = coverage
        self.size = size
        self.non_private = non_private
        self.alpha = alpha
        self.size_label = size_label
        self.estimator_name = estimator_name

    def plot(
        self,
        ax: Sequence[Axes] | None = None,
        *,
        name: str | None = None,
        **kwargs: Any,
    ) -> PrivacyTradeoffDisplay:
        """Draw the display.

        Parameters
        ----------
        ax : sequence of two matplotlib Axes, default=None
            Axes for the coverage and the size panels; ``None`` creates a
            figure with two panels side by side.
        name : str, default=None
            Label of the private curves; ``None`` uses ``estimator_name``.
        **kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.errorbar` for both curves.

        %(returns)s
        """
        plt = check_matplotlib(f"{type(self).__name__}.plot")
        eps = np.asarray(self.epsilons, dtype=float)
        if eps.ndim != 1 or eps.size == 0:
            raise ValueError(
                f"epsilons must be a non-empty 1-D array; got {eps.shape}."
            )
        if not np.all(np.isfinite(eps)) or np.any(eps <= 0):
            raise ValueError("epsilons must be positive and finite (log x-axis).")
        cov = _check_metric(self.coverage, "coverage", eps.size, unit_interval=True)
        size = _check_metric(self.size, "size", eps.size, unit_interval=False)
        cov_mean, cov_se = _summarize(cov)
        size_mean, size_se = _summarize(size)
        non_private = None
        if self.non_private is not None:
            non_private = np.asarray(self.non_private, dtype=float)
            if non_private.shape != (2,) or np.any(np.isnan(non_private)):
                raise ValueError(
                    "non_private must be (coverage, size), two numbers; got "
                    f"{self.non_private!r}."
                )
        alpha = None if self.alpha is None else check_alpha(self.alpha)

        if ax is None:
            fig, axes = new_figure(plt, ncols=2, figsize=(9, 3.6))
        else:
            axes = np.asarray(ax, dtype=object).ravel()
            if axes.size != 2:
                raise ValueError(
                    "ax must be None or two matplotlib Axes (coverage, size); got "
                    f"{axes.size}."
                )
            fig = axes[0].figure
        ax_cov, ax_size = axes
        label = self._label(name)
        label = label if label is not None else "private"
        style = {"marker": "o", "capsize": 3, "color": "C0", "label": label, **kwargs}

        self.coverage_line_ = ax_cov.errorbar(eps, cov_mean, yerr=cov_se, **style)
        self.target_line_ = None
        if alpha is not None:
            self.target_line_ = ax_cov.axhline(
                1 - alpha, color="k", ls="--", lw=1, label=f"target {1 - alpha:g}"
            )
        finite = np.isfinite(size_mean)
        self.size_line_ = ax_size.errorbar(
            eps[finite],
            size_mean[finite],
            yerr=None if size_se is None else size_se[finite],
            **style,
        )
        self.non_private_coverage_line_ = self.non_private_size_line_ = None
        if non_private is not None:
            np_style = {"color": "C1", "ls": ":", "lw": 1.5, "label": "non-private"}
            self.non_private_coverage_line_ = ax_cov.axhline(non_private[0], **np_style)
            if np.isfinite(non_private[1]):
                self.non_private_size_line_ = ax_size.axhline(
                    non_private[1], **np_style
                )
        self.infinite_size_scatter_ = None
        if not finite.all():
            self.infinite_size_scatter_ = ax_size.scatter(
                eps[~finite],
                np.full((~finite).sum(), 0.97),
                marker="^",
                color="C3",
                transform=ax_size.get_xaxis_transform(),
                clip_on=False,
                label="infinite (trivial intervals)",
            )
        # Same x-range on both panels, so that markers of infinite widths
        # (drawn in axes coordinates) stay inside theirs.
        xlim = (eps.min() / 1.5, eps.max() * 1.5)
        for a, ylabel in ((ax_cov, "coverage"), (ax_size, self.size_label)):
            a.set_xscale("log")
            finish_axes(
                a,
                xlim=xlim,
                xlabel="epsilon (privacy budget; larger = less private)",
                ylabel=ylabel,
                fontsize="small",
            )
        return self._drawn(axes, fig)

    @classmethod
    def from_estimator(
        cls,
        estimator: BaseEstimator,
        X_cal: ArrayLike,
        y_cal: ArrayLike,
        X_test: ArrayLike,
        y_test: ArrayLike,
        *,
        client_ids: ArrayLike | None = None,
        epsilons: ArrayLike = (0.1, 0.3, 1.0, 3.0, 10.0),
        n_repeats: int = 1,
        non_private: Literal["auto"] | str | BaseCalibrator | None = "auto",
        random_state: RandomStateLike = None,
        ax: Sequence[Axes] | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> PrivacyTradeoffDisplay:
        """Refit clones of a private estimator across epsilons and plot.

        For each epsilon (and each repeat) a clone of ``estimator`` with that
        ``epsilon`` and a fresh seed is fitted on the calibration data and
        scored on the test data. The non-private counterpart is fitted once
        on the same data.

        Parameters
        ----------
        estimator : estimator
            A private conformal wrapper (not necessarily fitted) with an
            ``epsilon`` parameter, e.g. :class:`~skfedcp.PrivateConformalClassifier`
            or :class:`~skfedcp.FedConformalRegressor` with a private
            calibrator; or a Pipeline ending in one.
        X_cal : array-like of shape (n_cal, n_features)
            Rows passed to ``fit`` (calibration, and training if the model is
            not frozen).
        y_cal : array-like of shape (n_cal,)
            Their targets.
        X_test : array-like of shape (n_test, n_features)
            Test features.
        y_test : array-like of shape (n_test,)
            Test targets.
        client_ids : array-like of shape (n_cal,), default=None
            Client of each calibration row.
        epsilons : array-like of float, default=(0.1, 0.3, 1.0, 3.0, 10.0)
            Privacy levels to try.
        n_repeats : int, default=1
            Fits per epsilon with independent seeds; more repeats average out
            the mechanism's noise and add error bars.
        non_private : "auto", str, calibrator or None, default="auto"
            Calibrator of the non-private reference: ``"auto"`` takes the
            counterpart of the estimator's (``"dp-qq"`` -> ``"qq"``, other
            private strategies -> ``"central"``); ``None`` draws none.
        random_state : int, RandomState, Generator, SeedSequence or None, \
                default=None
            Root of the seeds of all fits (spawned, one per fit).
        %(from_plot_params)s
        %(from_kwargs)s

        %(returns)s
        """
        check_matplotlib(f"{cls.__name__}.from_estimator")
        eps = np.asarray(epsilons, dtype=float)
        if eps.ndim != 1 or eps.size == 0:
            raise ValueError("epsilons must be a non-empty 1-D list of floats.")
        if not np.all(np.isfinite(eps)) or np.any(eps <= 0):
            raise ValueError(f"epsilons must be positive and finite; got {eps}.")
        if isinstance(n_repeats, bool) or not isinstance(n_repeats, Integral):
            raise TypeError(f"n_repeats must be a positive int; got {n_repeats!r}.")
        if n_repeats < 1:
            raise ValueError(f"n_repeats must be a positive int; got {n_repeats}.")
        eps_key = _param_key(estimator, "epsilon")
        seed_key = _param_key(estimator, "random_state")
        cal_key = _param_key(estimator, "calibrator")
        fit_params = {}
        if client_ids is not None:  # a Pipeline routes fit params by step name
            prefix = (
                f"{estimator.steps[-1][0]}__" if isinstance(estimator, Pipeline) else ""
            )
            fit_params = {f"{prefix}client_ids": client_ids}
        seeds = check_seed_sequence(random_state, allow_secure=False).spawn(
            n_repeats * eps.size + 1
        )
        int_seeds = [int(s.generate_state(1)[0]) for s in seeds]

        def _fit_score(params):
            est = clone(estimator).set_params(**params)
            est.fit(X_cal, y_cal, **fit_params)
            kind, region = predict_region(est, X_test)
            if kind == "interval":
                return kind, coverage_score(y_test, region), mean_width_score(region)
            classes = final_step(est).classes_
            cov = set_coverage_score(y_test, region, classes=classes)
            return kind, cov, set_size_score(region)

        coverage = np.empty((n_repeats, eps.size))
        size = np.empty((n_repeats, eps.size))
        infinite = []
        kind = "set"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", InfiniteThresholdWarning)
            for r in range(n_repeats):
                for j, e in enumerate(eps):
                    before = len(caught)
                    kind, coverage[r, j], size[r, j] = _fit_score(
                        {eps_key: float(e), seed_key: int_seeds[r * eps.size + j]}
                    )
                    if any(
                        issubclass(w.category, InfiniteThresholdWarning)
                        for w in caught[before:]
                    ):
                        infinite.append(float(e))
        for w in caught:  # pass on everything but the per-fit infinite warnings
            if not issubclass(w.category, InfiniteThresholdWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if infinite:
            eps_txt = ", ".join(f"{e:g}" for e in sorted(set(infinite)))
            warn_user(
                f"{len(infinite)} of {coverage.size} fits returned an infinite "
                "threshold (trivial intervals or sets) at epsilon in "
                f"{{{eps_txt}}}: too little calibration data for that privacy level.",
                InfiniteThresholdWarning,
            )

        reference = None
        if non_private is not None:
            if isinstance(non_private, str) and non_private == "auto":
                non_private = _non_private_calibrator(estimator.get_params()[cal_key])
            _, np_cov, np_size = _fit_score(
                {cal_key: non_private, seed_key: int_seeds[-1]}
            )
            reference = (np_cov, np_size)
        display = cls(
            epsilons=eps,
            coverage=coverage,
            size=size,
            non_private=reference,
            alpha=estimator_alpha(estimator),
            size_label="mean interval width" if kind == "interval" else "mean set size",
            estimator_name=estimator_name(estimator, name),
        )
        return display.plot(ax=ax, **kwargs)

    @classmethod
    def from_predictions(
        cls,
        epsilons: ArrayLike,
        coverages: ArrayLike,
        sizes: ArrayLike,
        *,
        non_private: tuple[float, float] | None = None,
        alpha: float | None = None,
        size_label: str = "mean set size",
        ax: Sequence[Axes] | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> PrivacyTradeoffDisplay:
        """Plot coverage and size measured elsewhere.

        Parameters
        ----------
        epsilons : array-like of shape (n_epsilons,)
            Privacy levels, positive.
        coverages : array-like of shape (n_epsilons,) or (n_repeats, n_epsilons)
            Coverage at each epsilon; with several rows, means and standard
            errors across rows are drawn.
        sizes : array-like of shape (n_epsilons,) or (n_repeats, n_epsilons)
            Mean set size or interval width at each epsilon (``inf`` allowed).
        non_private : tuple of two floats or None, default=None
            ``(coverage, size)`` of the non-private counterpart.
        alpha : float or None, default=None
            Target miscoverage, drawn as ``1 - alpha``.
        size_label : str, default="mean set size"
            Y-axis label of the size panel.
        %(from_plot_params)s
        %(from_kwargs)s

        %(returns)s
        """
        check_matplotlib(f"{cls.__name__}.from_predictions")
        display = cls(
            epsilons=epsilons,
            coverage=coverages,
            size=sizes,
            non_private=non_private,
            alpha=alpha,
            size_label=size_label,
            estimator_name=name,
        )
        return display.plot(ax=ax, **kwargs)
