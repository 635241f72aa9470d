"""Helpers shared by the displays: lazy matplotlib import, estimator access."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from sklearn.pipeline import Pipeline

from ..metrics._intervals import _check_intervals
from ..metrics._scorers import _final_step
from ..metrics._sets import _check_sets

if TYPE_CHECKING:  # matplotlib is imported only when drawing
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure, SubFigure

__all__ = []

INSTALL_HINT = "pip install skfedcp[plot]"


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


def get_axes(ax: Axes | None, plt: ModuleType) -> tuple[Axes, Figure | SubFigure]:
    """Return ``(ax, figure)``, creating a figure when ``ax`` is None."""
    if ax is None:
        _, ax = plt.subplots()
    return ax, ax.figure


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


def estimator_name(estimator: Any) -> str:
    """Default legend label: the wrapper's class and calibrator."""
    wrapper = final_step(estimator)
    cal = getattr(wrapper, "calibrator", None)
    name = type(wrapper).__name__
    if isinstance(cal, str):
        return f"{name} ({cal})"
    if cal is not None:
        return f"{name} ({type(cal).__name__})"
    return name
