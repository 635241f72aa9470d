"""Conformity scores: how badly a prediction fits, and the set it implies."""

from ._regression import (
    REGRESSION_SCORES,
    AbsoluteResidualScore,
    BaseRegressionScore,
    NormalizedResidualScore,
    resolve_regression_score,
)

__all__ = [
    "REGRESSION_SCORES",
    "AbsoluteResidualScore",
    "BaseRegressionScore",
    "NormalizedResidualScore",
    "resolve_regression_score",
]
