"""Helpers shared by the displays: lazy matplotlib import, figures, estimators."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
from numpy.typing import ArrayLike
from sklearn.pipeline import Pipeline

from ..metrics._intervals import _check_intervals
from ..metrics._scorers import _final_step
from ..metrics._sets import _check_sets
from ..utils._docstrings import docfiller

if TYPE_CHECKING:  # matplotlib is imported only when drawing
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure, SubFigure

__all__ = []

INSTALL_HINT = 'pip install "skfedcp[plot]"'


def check_matplotlib(caller: str) -> ModuleType:
    """Import and return :mod:`matplotlib.pyplot`, or raise a helpful error."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            f"{caller} requires matplotlib, which is not installed. Install the "
            f"plotting extra with `{INSTALL_HINT}` (or `pip install matplotlib`)."
        ) from exc
    return plt


def new_figure(plt: ModuleType, **kwargs: Any) -> tuple[Figure, Any]:
    """``plt.subplots(**kwargs)`` with a constrained layout.

    The layout is recomputed whenever the figure is drawn or saved, so tick
    labels (rotated ones included), axis labels and titles stay inside the
    figure at its default size.
    """
    return plt.subplots(layout="constrained", **kwargs)


def get_axes(ax: Axes | None, plt: ModuleType) -> tuple[Axes, Figure | SubFigure]:
    """Return ``(ax, figure)``, creating a figure when ``ax`` is None.

    A figure created here has a constrained layout (see :func:`new_figure`);
    the layout of a figure passed in through ``ax`` is left to its owner.
    """
    if ax is None:
        _, ax = new_figure(plt)
    return ax, ax.figure


def finish_axes(
    ax: Axes,
    *,
    xlim: tuple[float, float],
    xlabel: str,
    ylabel: str,
    ylim: tuple[float, float] | None = None,
    **legend_kwargs: Any,
) -> None:
    """Last step of drawing a panel: axis limits, axis labels and the legend."""
    ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(**legend_kwargs)


_D = TypeVar("_D", bound="Display")
_T = TypeVar("_T")

#: Docstring blocks the displays share (see :func:`display_docfiller`).
DISPLAY_DOCS = {
    "plot_ax": """\
ax : matplotlib Axes, default=None
    Axes to draw on; ``None`` creates a new figure, with a constrained
    layout so that the labels stay inside it.""",
    "ax_figure_attrs": """\
ax_ : matplotlib Axes
    Axes with the plot.
figure_ : matplotlib Figure
    Figure containing the plot.""",
}


def display_docfiller(display: str, artist: str, **blocks: str) -> Callable[[_T], _T]:
    """Fill a display's docstrings (:func:`~skfedcp.utils._docstrings.docfiller`).

    Besides :data:`DISPLAY_DOCS` and the display's own ``blocks``:
    ``from_kwargs``, the ``**kwargs`` that ``from_estimator`` and
    ``from_predictions`` pass to the matplotlib method ``Axes.<artist>``, and
    ``returns``, the section returning the ``display``.
    """
    return docfiller(
        {
            **DISPLAY_DOCS,
            "from_kwargs": (
                f"**kwargs : dict\n    Passed to :meth:`matplotlib.axes.Axes.{artist}`."
            ),
            "returns": f"Returns\n-------\ndisplay : {display}",
            **blocks,
        }
    )


class Display:
    """Plumbing shared by the displays (scikit-learn's Display convention).

    A display's ``__init__`` stores its arguments (``estimator_name`` among
    them); ``plot`` draws and keeps the axes and figure as ``ax_`` and
    ``figure_``.
    """

    estimator_name: str | None

    def _label(self, name: str | None) -> str | None:
        """The label to draw: ``name`` when given, else ``estimator_name``."""
        return name if name is not None else self.estimator_name

    def _drawn(self: _D, ax: Any, figure: Figure | SubFigure) -> _D:
        """Keep the axes and the figure drawn on; return the display."""
        self.ax_ = ax
        self.figure_ = figure
        return self


def final_step(estimator: Any) -> Any:
    """The conformal wrapper: the estimator itself or a pipeline's last step."""
    while isinstance(estimator, Pipeline):
        estimator = estimator.steps[-1][1]
    return estimator


def predict_region(
    estimator: Any, X: Any
) -> tuple[Literal["interval", "set"], np.ndarray]:
    """Intervals or sets of ``estimator`` on ``X``, and which kind they are.

    Pipelines are unrolled as the scorers do (:func:`skfedcp.metrics`):
    the steps before the last transform ``X``, the last step answers.
    Returns ``(kind, region)`` with ``kind`` in ``{"interval", "set"}``.
    """
    kinds: tuple[tuple[str, Literal["interval", "set"]], ...] = (
        ("predict_interval", "interval"),
        ("predict_set", "set"),
    )
    for method, kind in kinds:
        if hasattr(final_step(estimator), method) or hasattr(estimator, method):
            wrapper, Xt = _final_step(estimator, X, method)
            return kind, getattr(wrapper, method)(Xt)
    raise TypeError(
        "estimator must be a fitted conformal regressor (with predict_interval) or "
        "classifier (with predict_set), or a Pipeline ending in one; got "
        f"{type(estimator).__name__}."
    )


def estimator_alpha(estimator: Any) -> float:
    """The target miscoverage ``alpha`` of a fitted conformal wrapper."""
    alpha = getattr(final_step(estimator), "alpha", None)
    if alpha is None:
        raise TypeError(
            "estimator has no alpha parameter; pass a skfedcp conformal wrapper "
            "or use from_predictions with alpha=..."
        )
    return float(alpha)


def estimator_guarantee(
    estimator: Any, *, n_classes: int | None = None
) -> float | None:
    """Lower coverage bound of the fitted calibrator, or None if theory gives none.

    Uses ``calibrator_.coverage_bounds(calibrator_.n_per_client_, alpha)``.
    """
    wrapper = final_step(estimator)
    cal = getattr(wrapper, "calibrator_", None)
    if cal is None or not hasattr(cal, "coverage_bounds"):
        return None
    alpha = estimator_alpha(estimator)
    try:
        bounds = cal.coverage_bounds(cal.n_per_client_, alpha)
    except TypeError:  # LDP label calibrators also need the number of classes
        if n_classes is None:
            return None
        bounds = cal.coverage_bounds(cal.n_per_client_, alpha, n_classes=n_classes)
    lower = float(bounds.lower)
    return None if np.isnan(lower) else lower


def region_kind(
    y_true: ArrayLike, y_region: ArrayLike, classes: ArrayLike | None
) -> Literal["interval", "set"]:
    """Validate intervals or sets against ``y_true``; return their kind.

    Boolean arrays (or any array when ``classes`` is given) are prediction
    sets; otherwise the array must be ``(n_samples, 2)`` intervals.
    """
    arr = np.asarray(y_region)
    if arr.dtype == bool or classes is not None:
        _check_sets(arr)
        return "set"
    _check_intervals(y_true, arr)
    return "interval"


def estimator_name(estimator: Any, given: str | None = None) -> str:
    """Legend label: ``given`` if not None, else the wrapper's class and calibrator."""
    if given is not None:
        return given
    wrapper = final_step(estimator)
    cal = getattr(wrapper, "calibrator", None)
    name = type(wrapper).__name__
    if isinstance(cal, str):
        return f"{name} ({cal})"
    if cal is not None:
        return f"{name} ({type(cal).__name__})"
    return name
