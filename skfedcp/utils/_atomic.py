"""Atomic fit: fitted attributes change only when a fit completes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Container
from typing import Any, TypeVar

__all__ = ["atomic_fit", "is_fitted_attribute"]

F = TypeVar("F", bound=Callable[..., Any])


def is_fitted_attribute(name: str, private: Container[str] = ()) -> bool:
    """Whether attribute ``name`` belongs to a fit.

    scikit-learn's convention (one trailing underscore), or one of the
    class's ``private`` names (its ``_private_fit_state``).
    """
    return (name.endswith("_") and not name.startswith("__")) or name in private


def atomic_fit(fit: F) -> F:
    """Run ``fit`` on a shadow of the estimator and install its state at the end.

    The shadow is a new instance of the same class holding the constructor
    parameters and private state but none of the previous fit's attributes,
    so a refit starts from scratch. Only when ``fit`` returns are the
    shadow's fitted attributes installed on the estimator, in one assignment
    of its ``__dict__``: an exception (a ``KeyboardInterrupt`` too) leaves the
    previous fitted state whole, and two threads fitting the same object
    leave the state of one complete fit, never a mix. Private scratch
    attributes the fit sets on the shadow are not installed (nor pickled);
    a private attribute that is part of the fit is named in the class's
    ``_private_fit_state`` (a frozenset of names).

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
        private = getattr(type(self), "_private_fit_state", ())
        shadow = object.__new__(type(self))
        shadow.__dict__.update(
            (k, v)
            for k, v in self.__dict__.items()
            if not is_fitted_attribute(k, private)
        )
        result = fit(shadow, *args, **kwargs)
        # Commit: one assignment, so the old or the new fit is visible, whole.
        state = {
            k: v
            for k, v in self.__dict__.items()
            if not is_fitted_attribute(k, private)
        }
        state.update(
            (k, v)
            for k, v in shadow.__dict__.items()
            if is_fitted_attribute(k, private)
        )
        self.__dict__ = state
        return self if result is shadow else result

    return wrapper  # type: ignore[return-value]  # same signature as fit
