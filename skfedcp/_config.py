"""The public plan policy: the largest announcements a server accepts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from numbers import Integral
from typing import Any

from .utils._docstrings import docfiller

__all__ = ["config_context", "get_config", "set_config"]

#: Safe defaults, public like every plan parameter. A server raises them for
#: a federation it knows to be larger (``config_context``); a client cannot.
_DEFAULTS: dict[str, int] = {
    # Rows one client may announce: a billion calibration rows per client.
    "max_client_size": 10**9,
    # Clients in one round (messages, announced sizes, Flower nodes).
    "max_clients": 10**5,
    # Rows announced by all the clients of a round together: the plans and
    # rounds of dp-central and LDP-S hold O(total) memory (about 2 GB at
    # 10^8), so a larger federation is one its server opts into.
    "max_total_size": 10**8,
    # Classes of a classification round (LDP-L, FED-chi2).
    "max_classes": 10**4,
    # Features of a FED-chi2 round.
    "max_features": 10**6,
}
# Above 2**62 an announced size could overflow int64 sums of a few clients.
_CEILING = 2**62

_local = threading.local()

#: The parameter section of :func:`set_config` and :func:`config_context`.
_fill_limits_doc = docfiller(
    {
        "limits_params": """\
Parameters
----------
**limits : int
    Any of ``max_client_size``, ``max_clients``, ``max_total_size``,
    ``max_classes``, ``max_features``: positive integers up to ``2**62``."""
    }
)


def _current() -> dict[str, int]:
    config = getattr(_local, "config", None)
    if config is None:
        config = _local.config = dict(_DEFAULTS)
    return config


def get_config() -> dict[str, int]:
    """Return the plan policy in force (a copy), for this thread.

    Returns
    -------
    config : dict
        ``max_client_size``, ``max_clients``, ``max_total_size``,
        ``max_classes`` and ``max_features``: every server path refuses an
        announcement above them (:class:`~skfedcp.exceptions.InvalidMessageError`
        naming the client and field) before any work that grows with it.

    Examples
    --------
    >>> from skfedcp import get_config
    >>> get_config()["max_clients"]
    100000
    """
    return dict(_current())


@_fill_limits_doc
def set_config(**limits: int) -> None:
    """Set the plan policy for this thread (see :func:`config_context`).

    %(limits_params)s

    Examples
    --------
    >>> from skfedcp import get_config, set_config
    >>> set_config(max_clients=500)
    >>> get_config()["max_clients"]
    500
    >>> set_config(max_clients=100_000)
    """
    checked = {name: _check_limit(name, value) for name, value in limits.items()}
    _current().update(checked)


@contextmanager
@_fill_limits_doc
def config_context(**limits: int) -> Iterator[None]:
    """Temporarily change the plan policy (the limits a server accepts).

    The defaults are safe public bounds: a client announcing more rows than
    ``max_client_size``, a round of more than ``max_clients`` clients or of
    more than ``max_total_size`` rows in all, a class
    list longer than ``max_classes`` or a FED-chi2 round wider than
    ``max_features`` is refused before the server does any work that grows
    with the announced number. A server that expects a larger federation
    raises the limits for its round.

    %(limits_params)s

    Examples
    --------
    >>> from skfedcp import config_context, get_config
    >>> with config_context(max_client_size=10**12):
    ...     get_config()["max_client_size"]
    1000000000000
    >>> get_config()["max_client_size"]
    1000000000
    """
    checked = {name: _check_limit(name, value) for name, value in limits.items()}
    old = get_config()
    _current().update(checked)
    try:
        yield
    finally:
        _local.config = old


def _check_limit(name: str, value: Any) -> int:
    if name not in _DEFAULTS:
        raise TypeError(
            f"unknown plan limit {name!r}; expected one of "
            f"{', '.join(sorted(_DEFAULTS))}."
        )
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be a positive integer; got {value!r}.")
    limit = int(value)
    if not 1 <= limit <= _CEILING:
        raise ValueError(f"{name} must be in [1, 2**62]; got {value!r}.")
    return limit


def _check_policy_int(value: Any, name: str, limit: int | None = None) -> int:
    """A positive int of a round, checked against the plan policy.

    Parameters
    ----------
    value : int or None
        The number. None, when ``name`` is one of the plan policy's limits
        (a server's bound such as ``max_clients``, which it may also pass
        explicitly), stands for the limit in force.
    name : str
        Its name, in the messages: ``n_<what>`` when ``limit`` is given,
        whose limit is the policy's ``max_<what>``.
    limit : int, optional
        The policy's limit on it (``get_config()["max_features"]`` for
        ``n_features``): a larger value is refused.

    Returns
    -------
    value : int
    """
    if value is None and name in _DEFAULTS:
        return _current()[name]
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int >= 1; got {value!r}.")
    value = int(value)
    if value < 1:
        raise ValueError(f"{name} must be >= 1; got {value}.")
    if limit is not None and value > limit:
        raise ValueError(
            f"{name}={value} is above the plan policy's max_{name[2:]}={limit} "
            "(raise it with skfedcp.config_context for a larger round)."
        )
    return value
