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

from ._cqr import (  # noqa: E402
    CQR_SCORES,
    AsymmetricCQRScore,
    BaseCQRScore,
    CQRScore,
    NormalizedCQRScore,
    resolve_cqr_score,
)

__all__ += [
    "CQR_SCORES",
    "AsymmetricCQRScore",
    "BaseCQRScore",
    "CQRScore",
    "NormalizedCQRScore",
    "resolve_cqr_score",
]

from ._two_students import TwoStudentsOffsetScore, TwoStudentsScore  # noqa: E402

__all__ += ["TwoStudentsOffsetScore", "TwoStudentsScore"]

from ._classification import (  # noqa: E402
    CLASSIFICATION_SCORES,
    APSScore,
    BaseClassificationScore,
    LACScore,
    resolve_classification_score,
)

__all__ += [
    "CLASSIFICATION_SCORES",
    "APSScore",
    "BaseClassificationScore",
    "LACScore",
    "resolve_classification_score",
]
