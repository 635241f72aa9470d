"""Deprecated alias of :mod:`skfedcp.flower` (the Flower adapter moved).

``skfedcp.federated`` holds what the calibrators build on (client
partitions, secure sums); the Flower adapter, which sits above the
calibrators, now lives in its own sub-package. Every name of
:mod:`skfedcp.flower` is still reachable here, with a
:class:`DeprecationWarning`; this alias will be removed in a future release.
"""

import warnings

__all__ = []  # nothing new: use skfedcp.flower


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    from .. import flower

    if not hasattr(flower, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"skfedcp.federated.flower is deprecated; import {name} from "
        "skfedcp.flower instead.",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(flower, name)
