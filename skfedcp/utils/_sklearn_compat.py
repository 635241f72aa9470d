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
    "ParamNamesCacheMixin",
    "HasMethods",
    "Interval",
    "InvalidParameterError",
    "StrOptions",
    "_check_feature_names",
    "_check_n_features",
    "_fit_context",
    "_safe_indexing",
]


class ParamNamesCacheMixin:
    """Compute scikit-learn's ``_get_param_names`` once per class.

    ``BaseEstimator`` reads the constructor's signature with
    :func:`inspect.signature` on every ``get_params`` (about 15 us), and a
    wrapper's ``fit`` calls it several times (parameter validation of the
    wrapper, its score and its calibrator, and the forwarding of privacy
    parameters). The names are a property of the class, so they are kept in
    the class's own ``__dict__`` (a subclass computes its own). Put it before
    ``BaseEstimator`` in the bases.
    """

    _param_names_cache: tuple[str, ...]

    @classmethod
    def _get_param_names(cls):
        names = cls.__dict__.get("_param_names_cache")
        if names is None:
            # A mixin: BaseEstimator, after it in the bases, defines the method.
            names = tuple(super()._get_param_names())  # type: ignore[misc]
            cls._param_names_cache = names
        return list(names)
