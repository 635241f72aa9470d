"""Warn once per location inside a model-selection search (GridSearchCV, ...)."""

from __future__ import annotations

import sys
import warnings
from types import FrameType

from ..utils._warnings import warn_user

__all__ = ["warn_user_once_in_search"]

# Package directories whose frames sit between the user's line and the fit.
_LIBRARIES = ("skfedcp", "sklearn", "joblib")

#: (category, message, filename, lineno) already shown inside a search.
_SHOWN: set[tuple[type[Warning], str, str, int]] = set()


def _search_and_caller() -> tuple[bool, FrameType | None]:
    """Whether a scikit-learn model-selection call is on the stack, and the
    first frame outside skfedcp, scikit-learn and joblib (the user's line)."""
    frame: FrameType | None = sys._getframe(2)
    in_search = False
    caller = None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("sklearn.model_selection"):
            in_search = True
        if caller is None and module.partition(".")[0] not in _LIBRARIES:
            caller = frame
        frame = frame.f_back
    return in_search, caller


def _action(message: str, category: type[Warning], module: str, lineno: int) -> str:
    """The action of the first warnings filter matching, as ``warnings`` finds it."""
    for action, msg, cat, mod, line in warnings.filters:
        if (
            (msg is None or msg.match(message))
            and issubclass(category, cat)
            and (mod is None or mod.match(module))
            and (line == 0 or line == lineno)
        ):
            return action
    return getattr(warnings, "defaultaction", "default")


def warn_user_once_in_search(message: str, category: type[Warning]) -> None:
    """:func:`warn_user`, shown once per user line while a search runs.

    A grid search fits one clone per candidate and fold (and refits one):
    the same warning, attributed to the same line (the user's
    ``search.fit``), would be shown at every fit, because scikit-learn's
    parallel helper restores the warning filters around each fit and so
    resets Python's once-per-location registry. Inside a
    ``sklearn.model_selection`` call this keeps its own registry, so the
    warning is shown once per location as Python's ``"default"`` action
    intends. Outside a search, or when the matching filter says
    ``"always"`` or ``"error"`` (``pytest.warns`` installs ``"always"``),
    every call warns.
    """
    in_search, caller = _search_and_caller()
    if in_search and caller is not None:
        filename, lineno = caller.f_code.co_filename, caller.f_lineno
        module = caller.f_globals.get("__name__", "")
        if _action(message, category, module, lineno) not in ("always", "error"):
            key = (category, message, filename, lineno)
            if key in _SHOWN:
                return
            _SHOWN.add(key)
    warn_user(message, category)
