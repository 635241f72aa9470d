"""Calibration strategies: client step, server step, in-process simulation.

Each strategy has a snake_case alias usable wherever a ``calibrator`` is
accepted (``FedConformalRegressor(calibrator="qq")``).
"""

from __future__ import annotations

from collections.abc import Collection
from difflib import get_close_matches

from sklearn.base import clone

from ._averaging import AveragingCalibrator
from ._base import BaseCalibrator, CoverageBounds, stack_messages
from ._central import CentralCalibrator
from ._dp._central import PrivateCentralCalibrator
from ._dp._common import ThresholdDistribution
from ._dp._qq import PrivateQuantileOfQuantilesCalibrator
from ._grouped import GroupCoverageBounds, GroupedCalibrator
from ._ldp._label import (
    LDPCorrection,
    LDPLabelCalibrator,
    LDPLabelStarCalibrator,
    LDPSampleSize,
    ldp_correction,
    ldp_sample_size,
)
from ._ldp._score import LDPScoreCalibrator, LDPScoreStarCalibrator
from ._qq._byzantine import (
    ByzantineSelection,
    byzantine_coverage_bounds,
    max_byzantine,
    select_byzantine_ranks,
)
from ._qq._calibrator import QuantileOfQuantilesCalibrator
from ._qq._coverage import qq_conditional_tail, qq_coverage, qq_coverage_unequal
from ._qq._selection import QQSelection, select_qq_ranks

#: Registry alias -> calibrator class.
CALIBRATORS = {
    "central": CentralCalibrator,
    "qq": QuantileOfQuantilesCalibrator,
    "avg": AveragingCalibrator,
    "dp-central": PrivateCentralCalibrator,
    "dp-qq": PrivateQuantileOfQuantilesCalibrator,
    "ldp-l": LDPLabelCalibrator,
    "ldp-l*": LDPLabelStarCalibrator,
    "ldp-s": LDPScoreCalibrator,
    "ldp-s*": LDPScoreStarCalibrator,
}


#: Strategies for classifiers only: LDP-L randomizes labels and needs the
#: score of every label (LDP-S works on any bounded score, residuals too).
CLASSIFICATION_ONLY = ("ldp-l", "ldp-l*")


def get_calibrator(
    calibrator: str | BaseCalibrator,
    *,
    allowed: Collection[str] | None = None,
    owner: str | None = None,
) -> BaseCalibrator:
    """Return a fresh calibrator from a registry alias or an instance (cloned).

    Parameters
    ----------
    calibrator : str or BaseCalibrator
        An alias from ``CALIBRATORS`` or a calibrator instance.
    allowed : collection of str, default=None
        The aliases valid where the calibrator is used (e.g. a regressor
        cannot use the label-LDP strategies); ``None``: every alias.
    owner : str, default=None
        Name of the estimator asking, used in error messages.

    Returns
    -------
    calibrator : BaseCalibrator
        A new, unfitted object; the argument is never mutated.

    Examples
    --------
    >>> get_calibrator("qq")
    QuantileOfQuantilesCalibrator()
    >>> get_calibrator("QQ")
    Traceback (most recent call last):
    ...
    ValueError: calibrator must be one of 'avg', ... got 'QQ'. Did you mean 'qq'?
    """
    names = sorted(CALIBRATORS if allowed is None else allowed)
    where = f" for {owner}" if owner else ""
    if isinstance(calibrator, str):
        if calibrator in names:
            return CALIBRATORS[calibrator]()
        listed = ", ".join(repr(n) for n in names[:-1]) + f", {names[-1]!r}"
        hint = _did_you_mean(calibrator, names)
        if calibrator in CALIBRATORS:
            hint = (
                f" {calibrator!r} is a strategy for classifiers (it randomizes "
                "labels and needs the score of every label)."
            )
        raise ValueError(
            f"calibrator must be one of {listed}{where} or an instance of "
            f"skfedcp.calibrators.BaseCalibrator; got {calibrator!r}.{hint}"
        )
    if isinstance(calibrator, BaseCalibrator):
        if allowed is not None:
            alias = _alias(calibrator)
            if alias is not None and alias not in allowed:
                raise ValueError(
                    f"calibrator {type(calibrator).__name__} ({alias!r}) cannot be "
                    f"used{where}: it is a strategy for classifiers."
                )
        return clone(calibrator)
    raise TypeError(
        "calibrator must be a string alias or an instance of "
        f"skfedcp.calibrators.BaseCalibrator; got {type(calibrator).__name__}."
    )


def _alias(calibrator: BaseCalibrator) -> str | None:
    for name, cls in CALIBRATORS.items():
        if type(calibrator) is cls:
            return name
    return None


def _did_you_mean(name: str, names: Collection[str]) -> str:
    lowered = {n.lower(): n for n in names}
    if name.lower() in lowered:
        return f" Did you mean {lowered[name.lower()]!r}?"
    close = get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return f" Did you mean {lowered[close[0]]!r}?" if close else ""


__all__ = [
    "CALIBRATORS",
    "CLASSIFICATION_ONLY",
    "AveragingCalibrator",
    "BaseCalibrator",
    "ByzantineSelection",
    "CentralCalibrator",
    "CoverageBounds",
    "GroupCoverageBounds",
    "GroupedCalibrator",
    "LDPCorrection",
    "LDPLabelCalibrator",
    "LDPLabelStarCalibrator",
    "LDPSampleSize",
    "LDPScoreCalibrator",
    "LDPScoreStarCalibrator",
    "PrivateCentralCalibrator",
    "PrivateQuantileOfQuantilesCalibrator",
    "QQSelection",
    "QuantileOfQuantilesCalibrator",
    "ThresholdDistribution",
    "byzantine_coverage_bounds",
    "get_calibrator",
    "ldp_correction",
    "ldp_sample_size",
    "max_byzantine",
    "qq_conditional_tail",
    "qq_coverage",
    "qq_coverage_unequal",
    "select_byzantine_ranks",
    "select_qq_ranks",
    "stack_messages",
]
