"""IntervalDisplay: prediction intervals and truths, row by row."""

from __future__ import annotations

from numbers import Integral
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator

from ..federated import ClientPartition
from ..metrics._intervals import _check_intervals
from ._base import (
    Display,
    check_matplotlib,
    display_docfiller,
    estimator_name,
    final_step,
    finish_axes,
    get_axes,
    predict_region,
)

if TYPE_CHECKING:  # matplotlib is imported only when drawing
    from matplotlib.axes import Axes


__all__ = ["IntervalDisplay"]

_SORT_KEYS = ("prediction", "width", "true", "client")
SortBy = Literal["prediction", "width", "true", "client"]
_MAX_LEGEND_CLIENTS = 10


def _sort_key(sort_by, *, y_pred, y_true, widths, codes, n):
    if isinstance(sort_by, str):
        if sort_by == "prediction":
            return y_pred, "prediction"
        if sort_by == "width":
            return widths, "interval width"
        if sort_by == "true":
            if y_true is None:
                raise ValueError("sort_by='true' needs y_true.")
            return y_true, "true value"
        if sort_by == "client":
            if codes is None:
                raise ValueError("sort_by='client' needs client_ids.")
            # lexsort: last key first, so rows sort by client, then prediction
            return np.lexsort((y_pred, codes)).argsort(), "client, then prediction"
        raise ValueError(
            f"sort_by must be one of {list(_SORT_KEYS)} or an array of shape "
            f"({n},); got {sort_by!r}."
        )
    key = np.asarray(sort_by)
    if key.shape != (n,):
        raise ValueError(
            f"sort_by as an array must have shape ({n},); got {key.shape}."
        )
    return key, "given key"


def _client_handles(clients):
    """Legend entries of the bar colours: one per client, at most 10 in all.

    Bars cycle through the 10 colours ``C0``-``C9``, so with more than 10
    clients the first 9 are listed and a last entry counts the others.
    """
    from matplotlib.lines import Line2D

    cap = _MAX_LEGEND_CLIENTS
    shown = clients if clients.size <= cap else clients[: cap - 1]
    handles = [
        Line2D([], [], color=f"C{i % 10}", lw=3, alpha=0.6, label=f"client {c}")
        for i, c in enumerate(shown)
    ]
    if shown.size < clients.size:
        handles.append(
            Line2D(
                [],
                [],
                color="none",
                label=f"+ {clients.size - shown.size} more clients (colours repeat)",
            )
        )
    return handles


_fill_doc = display_docfiller(
    "IntervalDisplay",
    "vlines",
    from_draw_params="""\
client_ids : array-like of shape (n_samples,), default=None
    Client of each row, to colour the bars.
sort_by : {"prediction", "width", "true", "client"} or array-like, \
                default="prediction"
    See :meth:`plot`.
max_rows : int or None, default=200
    See :meth:`plot`.
ax : matplotlib Axes, default=None
    Axes to draw on.""",
)


@_fill_doc
class IntervalDisplay(Display):
    """Prediction intervals, point predictions and truths on sorted rows.

    Each test row is one vertical bar from its lower to its upper bound,
    placed by rank along a sort key (the prediction by default), with the
    point prediction and the true value on top. True values inside their
    interval are black dots, those outside are red crosses. Bars are
    coloured by client when ``client_ids`` is given, and the legend names
    the colour of each client (the first 9 and a count of the others when
    there are more than 10). Infinite bounds are drawn to the edge of the
    plot. When there are more than ``max_rows``
    rows, rows at evenly spaced ranks are shown (deterministic).

    Create it with :meth:`from_estimator` or :meth:`from_predictions`; the
    constructor only stores its arguments.

    Parameters
    ----------
    y_intervals : ndarray of shape (n_samples, 2)
        Lower and upper bounds.
    y_pred : ndarray of shape (n_samples,), default=None
        Point predictions; ``None`` uses the midpoints of the intervals.
    y_true : ndarray of shape (n_samples,), default=None
        True targets; ``None`` draws no truths.
    client_ids : ndarray of shape (n_samples,), default=None
        Client of each row, to colour the bars.
    estimator_name : str, default=None
        Title of the axes.

    Attributes
    ----------
    rows_ : ndarray of shape (n_rows_shown,)
        Indices of the rows drawn, left to right.
    intervals_ : matplotlib LineCollection
        The bars.
    prediction_line_ : matplotlib Line2D
        The point predictions.
    covered_scatter_ : matplotlib PathCollection or None
        True values inside their interval.
    missed_scatter_ : matplotlib PathCollection or None
        True values outside their interval.
    %(ax_figure_attrs)s

    See Also
    --------
    ClientCoverageDisplay : coverage client by client.

    Examples
    --------
    >>> from skfedcp.plotting import IntervalDisplay
    >>> display = IntervalDisplay.from_predictions(
    ...     [1.0, 5.0, 2.0], [[0, 2], [0, 2], [1, 4]], max_rows=2)
    >>> display.rows_.tolist()
    [0, 2]
    """

    def __init__(
        self,
        *,
        y_intervals: ArrayLike,
        y_pred: ArrayLike | None = None,
        y_true: ArrayLike | None = None,
        client_ids: ArrayLike | None = None,
        estimator_name: str | None = None,
    ) -> None:
        self.y_intervals = y_intervals
        self.y_pred = y_pred
        self.y_true = y_true
        self.client_ids = client_ids
        self.estimator_name = estimator_name

    def plot(
        self,
        ax: Axes | None = None,
        *,
        sort_by: SortBy | ArrayLike = "prediction",
        max_rows: int | None = 200,
        name: str | None = None,
        **kwargs: Any,
    ) -> IntervalDisplay:
        """Draw the display.

        Parameters
        ----------
        %(plot_ax)s
        sort_by : {"prediction", "width", "true", "client"} or array-like of \
                shape (n_samples,), default="prediction"
            Key that orders the rows from left to right (``"client"``: by
            client, then prediction).
        max_rows : int or None, default=200
            Show at most this many rows, at evenly spaced ranks of the key;
            ``None`` shows all.
        name : str, default=None
            Title of the axes; ``None`` uses ``estimator_name``.
        **kwargs : dict
            Passed to :meth:`matplotlib.axes.Axes.vlines` for the bars.

        %(returns)s
        """
        plt = check_matplotlib(f"{type(self).__name__}.plot")
        intervals = np.asarray(self.y_intervals, dtype=float)
        n = intervals.shape[0] if intervals.ndim == 2 else -1
        y_true = None
        if self.y_true is not None:
            y_true, intervals = _check_intervals(self.y_true, intervals)
        else:
            _check_intervals(np.zeros(max(n, 0)), intervals)
        n = intervals.shape[0]
        if n == 0:
            raise ValueError("there are no rows to plot.")
        if np.any(np.isnan(intervals)) or np.any(intervals[:, 0] > intervals[:, 1]):
            raise ValueError("y_intervals must hold lower <= upper bounds, no NaN.")
        if self.y_pred is None:
            with np.errstate(invalid="ignore"):
                y_pred = intervals.mean(axis=1)
            if not np.all(np.isfinite(y_pred)):
                raise ValueError(
                    "some intervals are infinite, so they have no midpoint: pass "
                    "y_pred (the point predictions)."
                )
        else:
            y_pred = np.asarray(self.y_pred, dtype=float)
            if y_pred.shape != (n,):
                raise ValueError(f"y_pred must have shape ({n},); got {y_pred.shape}.")
        codes = clients = None
        if self.client_ids is not None:
            part = ClientPartition(self.client_ids, n)
            codes, clients = part.client_codes(), part.clients
        if max_rows is not None and (
            isinstance(max_rows, bool)
            or not isinstance(max_rows, Integral)
            or max_rows < 1
        ):
            raise ValueError(
                f"max_rows must be a positive int or None; got {max_rows!r}."
            )
        widths = intervals[:, 1] - intervals[:, 0]
        key, key_name = _sort_key(
            sort_by, y_pred=y_pred, y_true=y_true, widths=widths, codes=codes, n=n
        )
        order = np.argsort(key, kind="stable")
        if max_rows is not None and n > max_rows:
            ranks = np.unique(np.rint(np.linspace(0, n - 1, max_rows)).astype(int))
            order = order[ranks]
        m = order.size
        x = np.arange(m)

        lower, upper = intervals[order, 0], intervals[order, 1]
        shown = [lower, upper, y_pred[order]]
        if y_true is not None:
            shown.append(y_true[order])
        values = np.concatenate(shown)
        finite = values[np.isfinite(values)]
        span = np.ptp(finite) if finite.size else 1.0
        span = span if span > 0 else 1.0
        bottom, top = finite.min() - 0.08 * span, finite.max() + 0.08 * span
        lower, upper = np.maximum(lower, bottom), np.minimum(upper, top)

        ax, fig = get_axes(ax, plt)
        colors: str | list[str]
        if codes is None:
            colors = "C0"
        else:
            colors = [f"C{c % 10}" for c in codes[order]]
        vline_kwargs = {"colors": colors, "lw": 2 if m <= 100 else 1, "alpha": 0.6}
        self.intervals_ = ax.vlines(x, lower, upper, **{**vline_kwargs, **kwargs})
        by_prediction = isinstance(sort_by, str) and sort_by == "prediction"
        self.prediction_line_ = ax.plot(
            x,
            y_pred[order],
            color="k",
            lw=1,
            ls="-" if by_prediction else "none",
            marker=None if by_prediction else "_",
            label="prediction",
        )[0]
        self.covered_scatter_ = self.missed_scatter_ = None
        if y_true is not None:
            t = y_true[order]
            hit = (intervals[order, 0] <= t) & (t <= intervals[order, 1])
            self.covered_scatter_ = ax.scatter(
                x[hit], t[hit], s=8, color="k", zorder=3, label="truth inside"
            )
            self.missed_scatter_ = ax.scatter(
                x[~hit],
                t[~hit],
                s=18,
                color="C3",
                marker="x",
                zorder=3,
                label=f"truth outside ({(~hit).sum()} of {m})",
            )
        handles, _ = ax.get_legend_handles_labels()
        if clients is not None:
            handles += _client_handles(clients)
        shown_txt = f"{m} of {n} rows" if m < n else f"{n} rows"
        finish_axes(
            ax,
            xlim=(-1, m),
            ylim=(bottom, top + 0.3 * span),  # room for the legend
            xlabel=f"test rows sorted by {key_name} ({shown_txt})",
            ylabel="target",
            handles=handles,
            loc="upper left",
            fontsize="small",
            ncols=2 if len(handles) > 5 else 1,
        )
        title = self._label(name)
        if title is not None:
            ax.set_title(title)

        self.rows_ = order
        return self._drawn(ax, fig)

    @classmethod
    def from_estimator(
        cls,
        estimator: BaseEstimator,
        X: ArrayLike,
        y: ArrayLike | None = None,
        *,
        client_ids: ArrayLike | None = None,
        sort_by: SortBy | ArrayLike = "prediction",
        max_rows: int | None = 200,
        ax: Axes | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> IntervalDisplay:
        """Plot the intervals of a fitted conformal regressor on ``X``.

        Parameters
        ----------
        estimator : fitted regressor
            A conformal regressor with ``predict`` and ``predict_interval``,
            or a Pipeline ending in one.
        X : array-like of shape (n_samples, n_features)
            Features.
        y : array-like of shape (n_samples,), default=None
            True targets, drawn when given.
        %(from_draw_params)s
        name : str, default=None
            Title; ``None`` names the estimator and its calibrator.
        %(from_kwargs)s

        %(returns)s
        """
        check_matplotlib(f"{cls.__name__}.from_estimator")
        kind, intervals = predict_region(estimator, X)
        if kind != "interval":
            raise TypeError(
                "IntervalDisplay needs a regressor with predict_interval; "
                f"{type(final_step(estimator)).__name__} gives prediction sets "
                "(use ClientCoverageDisplay)."
            )
        return cls.from_predictions(
            y,
            intervals,
            y_pred=estimator.predict(X),
            client_ids=client_ids,
            sort_by=sort_by,
            max_rows=max_rows,
            ax=ax,
            name=estimator_name(estimator, name),
            **kwargs,
        )

    @classmethod
    def from_predictions(
        cls,
        y_true: ArrayLike | None,
        y_intervals: ArrayLike,
        *,
        y_pred: ArrayLike | None = None,
        client_ids: ArrayLike | None = None,
        sort_by: SortBy | ArrayLike = "prediction",
        max_rows: int | None = 200,
        ax: Axes | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> IntervalDisplay:
        """Plot given intervals (and truths).

        Parameters
        ----------
        y_true : array-like of shape (n_samples,) or None
            True targets; ``None`` draws no truths.
        y_intervals : array-like of shape (n_samples, 2)
            Lower and upper bounds.
        y_pred : array-like of shape (n_samples,), default=None
            Point predictions; ``None`` uses the interval midpoints.
        %(from_draw_params)s
        name : str, default=None
            Title of the axes.
        %(from_kwargs)s

        %(returns)s
        """
        check_matplotlib(f"{cls.__name__}.from_predictions")
        display = cls(
            y_intervals=y_intervals,
            y_pred=y_pred,
            y_true=y_true,
            client_ids=client_ids,
            estimator_name=name,
        )
        return display.plot(ax=ax, sort_by=sort_by, max_rows=max_rows, **kwargs)
