"""Calibration strategies: client step, server step, in-process simulation.

Each strategy has a snake_case alias usable wherever a ``calibrator`` is
accepted (``FedConformalRegressor(calibrator="qq")``).
"""

from sklearn.base import clone

from ._averaging import AveragingCalibrator
from ._base import BaseCalibrator, CoverageBounds, stack_messages
from ._central import CentralCalibrator
from ._ldp import (
    LDPCorrection,
    LDPLabelCalibrator,
    LDPLabelStarCalibrator,
    LDPSampleSize,
    ldp_correction,
    ldp_sample_size,
)
from ._ldp_score import LDPScoreCalibrator, LDPScoreStarCalibrator
from ._private import (
    PrivateCentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
    ThresholdDistribution,
)
from ._qq_coverage import qq_conditional_tail, qq_coverage, qq_coverage_unequal
from ._qq_selection import QQSelection, select_qq_ranks
from ._quantile_of_quantiles import QuantileOfQuantilesCalibrator

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


def get_calibrator(calibrator):
    """Return a fresh calibrator from a registry alias or an instance (cloned).

    Parameters
    ----------
    calibrator : str or BaseCalibrator
        An alias from ``CALIBRATORS`` or a calibrator instance.

    Returns
    -------
    calibrator : BaseCalibrator
        A new, unfitted object; the argument is never mutated.

    Examples
    --------
    >>> get_calibrator("qq")
    QuantileOfQuantilesCalibrator()
    """
    if isinstance(calibrator, str):
        try:
            return CALIBRATORS[calibrator]()
        except KeyError:
            raise ValueError(
                f"calibrator must be one of {sorted(CALIBRATORS)} or a BaseCalibrator "
                f"instance; got {calibrator!r}."
            ) from None
    if isinstance(calibrator, BaseCalibrator):
        return clone(calibrator)
    raise TypeError(
        "calibrator must be a string alias or a BaseCalibrator instance; got "
        f"{type(calibrator).__name__}."
    )


__all__ = [
    "CALIBRATORS",
    "AveragingCalibrator",
    "BaseCalibrator",
    "CentralCalibrator",
    "CoverageBounds",
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
    "get_calibrator",
    "ldp_correction",
    "ldp_sample_size",
    "qq_conditional_tail",
    "qq_coverage",
    "qq_coverage_unequal",
    "select_qq_ranks",
    "stack_messages",
]
