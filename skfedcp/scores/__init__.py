"""Conformity scores: how badly a prediction fits, and the set it implies.

Regression scores return ``(n_samples, 2)`` intervals, CQR scores work on a
pair of predicted quantiles, classification scores return boolean
``(n_samples, n_classes)`` sets.
"""

from ._classification import (
    CLASSIFICATION_SCORES,
    APSScore,
    BaseClassificationScore,
    LACScore,
    resolve_classification_score,
)
from ._cqr import (
    CQR_SCORES,
    AsymmetricCQRScore,
    BaseCQRScore,
    CQRScore,
    NormalizedCQRScore,
    resolve_cqr_score,
)
from ._regression import (
    REGRESSION_SCORES,
    AbsoluteResidualScore,
    BaseRegressionScore,
    NormalizedResidualScore,
    resolve_regression_score,
)
from ._two_students import TwoStudentsOffsetScore, TwoStudentsScore

__all__ = [
    "CLASSIFICATION_SCORES",
    "CQR_SCORES",
    "REGRESSION_SCORES",
    "APSScore",
    "AbsoluteResidualScore",
    "AsymmetricCQRScore",
    "BaseCQRScore",
    "BaseClassificationScore",
    "BaseRegressionScore",
    "CQRScore",
    "LACScore",
    "NormalizedCQRScore",
    "NormalizedResidualScore",
    "TwoStudentsOffsetScore",
    "TwoStudentsScore",
    "resolve_classification_score",
    "resolve_cqr_score",
    "resolve_regression_score",
]
