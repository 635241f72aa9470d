"""Shared machinery of the conformal wrappers: frozen models, splits, calibrators.

:class:`BaseFedConformal` holds the one fit / predict skeleton (``_wrapper.py``);
``_streams.py`` derives the fit's random streams, ``_data.py`` checks its data.
"""

from ._streams import calibrator_random_state, fit_streams
from ._wrapper import (
    REGRESSION_CALIBRATORS,
    BaseFedConformal,
    ConformalIntervalMixin,
    input_tags,
    is_prefit,
    is_private_calibrator,
)

__all__ = [
    "REGRESSION_CALIBRATORS",
    "BaseFedConformal",
    "ConformalIntervalMixin",
    "calibrator_random_state",
    "fit_streams",
    "input_tags",
    "is_prefit",
    "is_private_calibrator",
]
