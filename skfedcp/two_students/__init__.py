"""Two Students (2S): distil client models into a mean and an uncertainty student.

The method is the paper's (Iglesias Jr et al., 2024); the robust filter band, the
leave-one-out reference, the log-std target and the conformal step are skfedcp's.
"""

from ._estimator import TwoStudentsRegressor
from ._filter import (
    EnsembleStats,
    TruncationResult,
    credible_band,
    ensemble_stats,
    truncation_filter,
)

__all__ = [
    "EnsembleStats",
    "TruncationResult",
    "TwoStudentsRegressor",
    "credible_band",
    "ensemble_stats",
    "truncation_filter",
]
