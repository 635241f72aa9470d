"""Warnings that point at the user's line, not at the library's."""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType

__all__ = ["warn_user"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# Frames of these libraries sit between a user's call and skfedcp (a Pipeline,
# a grid search, joblib): the warning skips them too.
_SKIPPED = (_PACKAGE_DIR,)


def _is_library_frame(filename: str) -> bool:
    return filename.startswith(_SKIPPED)


def warn_user(
    message: str,
    category: type[Warning],
    *,
    skip_modules: tuple[str, ...] = ("sklearn", "joblib"),
) -> None:
    """Emit ``message`` with the location of the first caller outside skfedcp.

    ``warnings.warn(..., stacklevel=2)`` points at the line that called the
    warning function, which inside a library is another library line. This
    walks up the stack past every skfedcp frame (and past scikit-learn and
    joblib frames, which sit between a user's ``Pipeline`` or
    ``GridSearchCV`` and skfedcp), so the reported file and line are the
    user's own call.

    Parameters
    ----------
    message : str
        The warning text.
    category : type of Warning
        The warning class.
    skip_modules : tuple of str, default=("sklearn", "joblib")
        Top-level packages whose frames are skipped as well.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_user("careful", UserWarning)
    >>> caught[0].filename.endswith("_warnings.py")
    False
    """
    skipped = tuple(
        os.path.dirname(path) + os.sep
        for name in skip_modules
        if (path := getattr(sys.modules.get(name), "__file__", None))
    )
    frame: FrameType | None = sys._getframe(1)
    level = 2  # stacklevel 2 is the frame of sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (_is_library_frame(filename) or filename.startswith(skipped)):
            break
        frame = frame.f_back
        level += 1
    if frame is None:  # only library frames (e.g. run from inside skfedcp)
        level = 2
    warnings.warn(message, category, stacklevel=level)
