"""The only module of skfedcp that imports private scikit-learn names."""

from sklearn.base import _fit_context
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
)
from sklearn.utils.validation import _check_feature_names, _check_n_features

__all__ = [
    "HasMethods",
    "Interval",
    "InvalidParameterError",
    "StrOptions",
    "_check_feature_names",
    "_check_n_features",
    "_fit_context",
    "_safe_indexing",
]
