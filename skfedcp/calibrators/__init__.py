"""Calibration strategies: client step, server step, in-process simulation."""

from ._base import BaseCalibrator, CoverageBounds, stack_messages

__all__ = ["BaseCalibrator", "CoverageBounds", "stack_messages"]
