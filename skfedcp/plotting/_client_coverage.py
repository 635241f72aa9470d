"""ClientCoverageDisplay: per-client coverage against its binomial band."""

from __future__ import annotations

from numbers import Real
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats
from sklearn.base import BaseEstimator

from ..federated import ClientPartition
from ..metrics import per_client_coverage, per_client_set_coverage
from ..metrics._coverage_test import check_test_params, coverage_test_from_counts
from ..utils._validation import check_alpha
from ._base import (
    Display,
    check_matplotlib,
    display_docfiller,
    estimator_alpha,
    estimator_guarantee,
    estimator_name,
    final_step,
    finish_axes,
    get_axes,
    predict_region,
    region_kind,
)

if TYPE_CHECKING:  # matplotlib is imported only when drawing
    from matplotlib.axes import Axes


__all__ = ["ClientCoverageDisplay"]

_BANDS = ("target", "clopper-pearson")


def _check_guarantee(guarantee):
    if guarantee is None:
        return None
    if isinstance(guarantee, bool) or not isinstance(guarantee, Real):
        raise TypeError(
            f"guarantee must be a float in [0, 1] or None; got {guarantee!r}."
        )
    guarantee = float(guarantee)
    if np.isnan(guarantee):
        return None
    if not 0.0 <= guarantee <= 1.0:
        raise ValueError(f"guarantee must lie in [0, 1]; got {guarantee!r}.")
    return guarantee


def binomial_band(
    n_samples: ArrayLike,
    coverage: ArrayLike,
    *,
    target: float,
    band: str = "target",
    confidence: float = 0.95,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Lower and upper ends of each client's band (see ClientCoverageDisplay)."""
    n = np.asarray(n_samples, dtype=np.int64)
    tail = (1.0 - confidence) / 2.0
    if band == "target":
        low = stats.binom.ppf(tail, n, target) / n
        high = stats.binom.ppf(1.0 - tail, n, target) / n
    else:  # exact Clopper-Pearson interval around the observed coverage
        k = np.rint(np.asarray(coverage) * n)
        with np.errstate(invalid="ignore"):
            low = np.where(k > 0, stats.beta.ppf(tail, k, n - k + 1), 0.0)
            high = np.where(k < n, stats.beta.ppf(1.0 - tail, k + 1, n - k), 1.0)
    return np.asarray(low, dtype=float), np.asarray(high, dtype=float)


_TEST_PARAMS = """\
significance : float, default=0.05
    Level of the per-client tests, after the correction, in (0, 1).
correction : {"holm", "bh", "none"}, default="holm"
    Multiplicity correction of the per-client tests, as in
    :func:`~skfedcp.metrics.client_coverage_test`: Holm (family-wise
    error), Benjamini-Hochberg (false discovery rate) or none."""

_fill_doc = display_docfiller(
    "ClientCoverageDisplay",
    "scatter",
    test_params=_TEST_PARAMS,
    from_draw_params="""\
band : {"target", "clopper-pearson"}, default="target"
    See :class:`ClientCoverageDisplay`.
confidence : float, default=0.95
    Probability content of the bands.
"""
    + _TEST_PARAMS
    + """
ax : matplotlib Axes, default=None
    Axes to draw on.""",
)


@_fill_doc
class ClientCoverageDisplay(Display):
    """Coverage of each client, with the band its test size allows.

    A conformal guarantee is marginal: averaged over clients and calibration
    draws. This display shows how each client fares on its own test rows.
    Clients are ordered by test size (smallest on the left); each point is a
    client's test coverage; the shaded bar behind it is a binomial band at
    that client's test size ``n_j``; horizontal lines mark the target
    ``1 - alpha`` and, when known, the coverage the calibrator guarantees.

    Two bands are available (``band``):

    * ``"target"`` (default): the central ``confidence`` range of
      ``Binomial(n_j, 1 - alpha) / n_j``, from the binomial quantiles. A
      client whose true coverage is exactly the target lands inside it with
      probability at least ``confidence``; a point outside is evidence that
      the client is over- or under-covered (one test per client, no
      correction for multiplicity). Small clients get wide bands.
    * ``"clopper-pearson"``: the exact (Clopper-Pearson) ``confidence``
      interval for the client's true coverage around its observed one; the
      client is flagged when the interval misses the target.

    Clients whose coverage is below ``1 - alpha`` beyond chance, by the
    one-sided exact binomial test of :func:`~skfedcp.metrics.client_coverage_test`
    corrected for testing every client (``correction`` and ``significance``
    of :meth:`plot`), are circled in black. Unlike the bands (one two-sided
    look per client, no correction), a circled client is evidence that holds
    for the whole federation: with Holm's correction the chance that any
    client covering at least ``1 - alpha`` is circled is at most
    ``significance``.

    Both count test-row noise only: with a fixed calibration set, the
    coverage of new points also varies from one calibration draw to another
    (by about ``sqrt(alpha (1 - alpha) / n_cal)``).

    Create it with :meth:`from_estimator` or :meth:`from_predictions`; the
    constructor only stores its arguments.

    Parameters
    ----------
    clients : ndarray of shape (n_clients,)
        Client labels.
    coverage : ndarray of shape (n_clients,)
        Test coverage of each client.
    n_samples : ndarray of shape (n_clients,)
        Number of test rows of each client.
    alpha : float
        Target miscoverage; the target coverage is ``1 - alpha``.
    guarantee : float or None, default=None
        Coverage guaranteed by the calibrator (e.g. the ``lower`` value of
        its ``coverage_bounds``); ``None`` draws no guarantee line.
    band : {"target", "clopper-pearson"}, default="target"
        Which binomial band to draw (see above).
    confidence : float, default=0.95
        Probability content of the bands.
    estimator_name : str, default=None
        Label of the points in the legend.

    Attributes
    ----------
    order_ : ndarray of shape (n_clients,)
        Indices of the clients from left to right (by test size, ties by
        label).
    band_low_ : ndarray of shape (n_clients,)
        Lower end of each client's band, in the order of ``clients``.
    band_high_ : ndarray of shape (n_clients,)
        Upper end of each client's band.
    flagged_ : ndarray of bool, shape (n_clients,)
        Mask of the flagged clients, in the order of ``clients``: those whose
        coverage lies outside the ``"target"`` band, or whose Clopper-Pearson
        interval misses the target (drawn red).
    flagged_clients_ : ndarray of shape (n_flagged,)
        Labels of the flagged clients, ``clients[flagged_]``.
    coverage_test_ : ClientCoverageTest
        The per-client tests (:func:`~skfedcp.metrics.client_coverage_test`
        on the same counts): p-values, adjusted p-values and ``below``.
    below_ : ndarray of bool, shape (n_clients,)
        Mask of the clients below ``1 - alpha`` beyond chance after the
        correction, in the order of ``clients`` (circled).
    below_clients_ : ndarray of shape (n_below,)
        Their labels, ``clients[below_]``.
    below_scatter_ : matplotlib PathCollection or None
        The circles, ``None`` when no client is below.
    scatter_ : matplotlib PathCollection
        The clients' coverage.
    bands_ : matplotlib BarContainer
        The bands, one bar per client.
    target_line_ : matplotlib Line2D
        The target ``1 - alpha``.
    guarantee_line_ : matplotlib Line2D or None
        The guaranteed coverage, if given.
    %(ax_figure_attrs)s

    See Also
    --------
    skfedcp.metrics.per_client_coverage : the numbers behind the points.
    skfedcp.metrics.client_coverage_test : the test behind the circles.
    IntervalDisplay : intervals and truths row by row.

    Examples
    --------
    >>> from skfedcp.plotting import ClientCoverageDisplay
    >>> display = ClientCoverageDisplay.from_predictions(
    ...     [1.0, 5.0, 1.0, 2.0], [[0, 2]] * 4, client_ids=["a", "a", "b", "b"],
    ...     alpha=0.1)
    >>> display.coverage.tolist(), display.n_samples.tolist()
    ([0.5, 1.0], [2, 2])

    A client covering 60 of its 100 rows is circled; one covering 17 of
    20 (0.85) is within chance of 0.9:

    >>> display = ClientCoverageDisplay(
    ...     clients=["a", "b", "c"], coverage=[0.6, 0.85, 0.92],
    ...     n_samples=[100, 20, 100], alpha=0.1).plot()
    >>> display.below_clients_.tolist()
    ['a']
    >>> display.coverage_test_.adjusted_pvalues.round(3).tolist()
    [0.0, 0.646, 0.794]
    """

    def __init__(
        self,
        *,
        clients: ArrayLike,
        coverage: ArrayLike,
        n_samples: ArrayLike,
        alpha: float,
        guarantee: float | None = None,
        band: Literal["target", "clopper-pearson"] = "target",
        confidence: float = 0.95,
        estimator_name: str | None = None,
    ) -> None:
        self.clients = clients
        self.coverage = coverage
        self.n_samples = n_samples
        self.alpha = alpha
        self.guarantee = guarantee
        self.band = band
        self.confidence = confidence
        self.estimator_name = estimator_name

    def plot(
        self,
        ax: Axes | None = None,
        *,
        name: str | None = None,
        significance: float = 0.05,
        correction: Literal["holm", "bh", "none"] = "holm",
        **kwargs: Any,
    ) -> ClientCoverageDisplay:
        """Draw the display.

        Parameters
        ----------
        %(plot_ax)s
        name : str, default=None
            Legend label of the points; ``None`` uses ``estimator_name``.
        %(test_params)s
        **kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.scatter` for the points.

        Returns
        -------
        display : ClientCoverageDisplay
            The object, with the artists as attributes.
        """
        plt = check_matplotlib(f"{type(self).__name__}.plot")
        alpha = check_alpha(self.alpha)
        guarantee = _check_guarantee(self.guarantee)
        # A probability in (0, 1), checked like alpha.
        confidence = check_alpha(self.confidence, name="confidence")
        if self.band not in _BANDS:
            raise ValueError(f"band must be one of {list(_BANDS)}; got {self.band!r}.")
        check_test_params(significance, correction)
        clients = np.asarray(self.clients)
        coverage = np.asarray(self.coverage, dtype=float)
        n = np.asarray(self.n_samples)
        if not (clients.ndim == coverage.ndim == n.ndim == 1) or not (
            clients.shape == coverage.shape == n.shape
        ):
            raise ValueError(
                "clients, coverage and n_samples must be 1-D of one length; got "
                f"shapes {clients.shape}, {coverage.shape} and {n.shape}."
            )
        if clients.size == 0:
            raise ValueError("there are no clients to plot.")
        if np.any(n < 1) or not np.all(np.equal(np.mod(n, 1), 0)):
            raise ValueError("n_samples must hold positive integers.")
        if np.any(~np.isfinite(coverage)) or np.any((coverage < 0) | (coverage > 1)):
            raise ValueError("coverage must hold numbers in [0, 1].")

        target = 1.0 - alpha
        low, high = binomial_band(
            n, coverage, target=target, band=self.band, confidence=confidence
        )
        if self.band == "target":
            flagged = (coverage < low) | (coverage > high)
        else:
            flagged = (target < low) | (target > high)
        test = coverage_test_from_counts(
            clients,
            n,
            coverage * n,
            target=target,
            significance=significance,
            correction=correction,
        )
        order = np.lexsort((np.arange(n.size), n))
        x = np.arange(n.size)

        ax, fig = get_axes(ax, plt)
        pct = f"{100 * confidence:g}%"
        band_label = (
            f"{pct} band, Bin(n, {target:g}) / n"
            if self.band == "target"
            else f"{pct} Clopper-Pearson"
        )
        self.bands_ = ax.bar(
            x,
            (high - low)[order],
            bottom=low[order],
            width=0.6,
            color="C0",
            alpha=0.2,
            label=band_label,
        )
        label = self._label(name)
        scatter_kwargs = {
            "c": np.where(flagged[order], "C3", "C0"),
            "zorder": 3,
            "label": label if label is not None else "client coverage",
            **kwargs,
        }
        self.scatter_ = ax.scatter(x, coverage[order], **scatter_kwargs)
        below = test.below[order]
        self.below_scatter_ = None
        if below.any():
            self.below_scatter_ = ax.scatter(
                x[below],
                coverage[order][below],
                s=160,
                facecolors="none",
                edgecolors="k",
                linewidths=1.2,
                zorder=4,
                label=(
                    f"below {target:g} beyond chance ({correction}, {significance:g})"
                ),
            )
        self.target_line_ = ax.axhline(
            target, color="k", ls="--", lw=1, label=f"target {target:g}"
        )
        self.guarantee_line_ = None
        if guarantee is not None:
            self.guarantee_line_ = ax.axhline(
                guarantee,
                color="C2",
                ls=":",
                lw=1.5,
                label=f"guaranteed {guarantee:.4f}",
            )
        # Up to 8 clients: "label\n(n)"; up to 12: "label (n)" turned upright;
        # more: the labels only.
        show_n, upright = n.size <= 12, n.size > 8
        template = "{} ({})" if upright else "{}\n({})"
        labels = [
            template.format(c, k) if show_n else str(c)
            for c, k in zip(clients[order], n[order], strict=True)
        ]
        ax.set_xticks(x, labels, rotation=90 if upright else 0)
        drawn = np.concatenate([low, high, coverage, [target]])
        if guarantee is not None:
            drawn = np.append(drawn, guarantee)
        lo, hi = drawn.min(), drawn.max()
        span = max(hi - lo, 0.01)
        finish_axes(
            ax,
            xlim=(-0.6, n.size - 0.4),
            ylim=(lo - 0.05 * span, hi + 0.4 * span),  # room for the legend
            xlabel=(
                "client (test rows), by size"
                if show_n
                else "client, by number of test rows"
            ),
            ylabel="coverage on the client's test rows",
            loc="upper center",
            fontsize="x-small",
            ncols=2,
        )

        self.order_ = order
        self.band_low_ = low
        self.band_high_ = high
        self.flagged_ = flagged
        self.flagged_clients_ = clients[flagged]
        self.coverage_test_ = test
        self.below_ = test.below
        self.below_clients_ = clients[test.below]
        return self._drawn(ax, fig)

    @classmethod
    def from_estimator(
        cls,
        estimator: BaseEstimator,
        X: ArrayLike,
        y: ArrayLike,
        *,
        client_ids: ArrayLike,
        guarantee: float | Literal["auto"] | None = "auto",
        band: Literal["target", "clopper-pearson"] = "target",
        confidence: float = 0.95,
        significance: float = 0.05,
        correction: Literal["holm", "bh", "none"] = "holm",
        ax: Axes | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> ClientCoverageDisplay:
        """Plot per-client coverage of a fitted conformal estimator.

        Parameters
        ----------
        estimator : fitted estimator
            A conformal regressor (``predict_interval``) or classifier
            (``predict_set``), or a Pipeline ending in one; its ``alpha`` sets
            the target.
        X : array-like of shape (n_samples, n_features)
            Test features.
        y : array-like of shape (n_samples,)
            Test targets or labels.
        client_ids : array-like of shape (n_samples,)
            Client of each test row.
        guarantee : float, "auto" or None, default="auto"
            ``"auto"`` uses the lower end of the fitted calibrator's
            ``coverage_bounds`` at its calibration sizes (no line when theory
            gives none, e.g. for ``"avg"``); ``None`` draws no line.
        %(from_draw_params)s
        name : str, default=None
            Legend label; ``None`` names the estimator and its calibrator.
        %(from_kwargs)s

        %(returns)s
        """
        check_matplotlib(f"{cls.__name__}.from_estimator")
        kind, region = predict_region(estimator, X)
        classes = getattr(final_step(estimator), "classes_", None)
        if isinstance(guarantee, str):
            if guarantee != "auto":
                raise ValueError(
                    f"guarantee must be a float, 'auto' or None; got {guarantee!r}."
                )
            n_classes = None if classes is None else len(classes)
            guarantee = estimator_guarantee(estimator, n_classes=n_classes)
        return cls.from_predictions(
            y,
            region,
            client_ids=client_ids,
            alpha=estimator_alpha(estimator),
            guarantee=guarantee,
            classes=classes if kind == "set" else None,
            band=band,
            confidence=confidence,
            significance=significance,
            correction=correction,
            ax=ax,
            name=estimator_name(estimator, name),
            **kwargs,
        )

    @classmethod
    def from_predictions(
        cls,
        y_true: ArrayLike,
        y_pred: ArrayLike,
        *,
        client_ids: ArrayLike,
        alpha: float,
        guarantee: float | None = None,
        classes: ArrayLike | None = None,
        band: Literal["target", "clopper-pearson"] = "target",
        confidence: float = 0.95,
        significance: float = 0.05,
        correction: Literal["holm", "bh", "none"] = "holm",
        ax: Axes | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> ClientCoverageDisplay:
        """Plot per-client coverage of given intervals or prediction sets.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True targets or labels.
        y_pred : array-like of shape (n_samples, 2) or (n_samples, n_classes)
            Intervals (lower, upper), as from ``predict_interval``, or boolean
            prediction sets, as from ``predict_set``.
        client_ids : array-like of shape (n_samples,)
            Client of each row.
        alpha : float
            Target miscoverage.
        guarantee : float or None, default=None
            Guaranteed coverage to draw as a line.
        classes : array-like of shape (n_classes,), default=None
            Labels of the set columns; ``None`` means column indices (sets
            must then be boolean).
        %(from_draw_params)s
        name : str, default=None
            Legend label of the points.
        %(from_kwargs)s

        %(returns)s
        """
        check_matplotlib(f"{cls.__name__}.from_predictions")
        alpha = check_alpha(alpha)
        if client_ids is None:
            raise ValueError(
                "client_ids is required: the display shows one point per client."
            )
        ClientPartition(client_ids, np.asarray(y_true).shape[0])  # validates
        if region_kind(y_true, y_pred, classes) == "set":
            res = per_client_set_coverage(y_true, y_pred, client_ids, classes=classes)
        else:
            res = per_client_coverage(y_true, y_pred, client_ids)
        display = cls(
            clients=res.clients,
            coverage=res.coverage,
            n_samples=res.n_samples,
            alpha=alpha,
            guarantee=guarantee,
            band=band,
            confidence=confidence,
            estimator_name=name,
        )
        return display.plot(
            ax=ax, significance=significance, correction=correction, **kwargs
        )
