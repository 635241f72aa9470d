"""The local-DP family: randomized-response labels (LDP-L) and scores (LDP-S)."""

from ...privacy._ldp_analysis import (
    LDPCorrection,
    LDPSampleSize,
    ldp_correction,
    ldp_sample_size,
)
from ._label import LDPLabelCalibrator, LDPLabelStarCalibrator
from ._score import LDPScoreCalibrator, LDPScoreStarCalibrator

__all__ = [
    "LDPCorrection",
    "LDPLabelCalibrator",
    "LDPLabelStarCalibrator",
    "LDPSampleSize",
    "LDPScoreCalibrator",
    "LDPScoreStarCalibrator",
    "ldp_correction",
    "ldp_sample_size",
]
