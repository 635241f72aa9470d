"""Atomic fit: fitted attributes change only when a fit completes."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["atomic_fit", "is_fitted_attribute"]

F = TypeVar("F", bound=Callable[..., Any])


def is_fitted_attribute(name: str) -> bool:
    """scikit-learn's convention: a fitted attribute ends with one underscore."""
    return name.endswith("_") and not name.startswith("__")


def atomic_fit(fit: F) -> F:
    """Run ``fit`` on a shadow of the estimator and install its state at the end.

    The shadow is a shallow copy holding the constructor parameters and private
    state but none of the previous fit's attributes, so a refit starts from
    scratch. Only when ``fit`` returns is the shadow's ``__dict__`` installed
    on the estimator, in one assignment. An exception (a ``KeyboardInterrupt``
    too) leaves the previous fitted state whole, and two threads fitting the
    same object leave the state of one complete fit, never a mix.

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> class Est(BaseEstimator):
    ...     @atomic_fit
    ...     def fit(self, fail=False):
    ...         self.a_ = 1
    ...         if fail:
    ...             raise RuntimeError("interrupted")
    ...         self.b_ = 2
    ...         return self
    >>> est = Est().fit()
    >>> try:
    ...     est.fit(fail=True)
    ... except RuntimeError:
    ...     pass
    >>> est.a_, est.b_
    (1, 2)
    """

    @functools.wraps(fit)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        shadow = copy.copy(self)
        shadow.__dict__ = {
            key: value
            for key, value in self.__dict__.items()
            if not is_fitted_attribute(key)
        }
        result = fit(shadow, *args, **kwargs)
        self.__dict__ = shadow.__dict__
        return self if result is shadow else result

    return wrapper  # type: ignore[return-value]  # same signature as fit
