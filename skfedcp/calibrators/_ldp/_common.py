"""What LDP-L and LDP-S share: parameters, targets, warnings, the banded bisection."""

from __future__ import annotations

from numbers import Real

import numpy as np

from ...exceptions import InfiniteThresholdWarning, VacuousGuaranteeWarning
from ...privacy._validation import EPSILON_RANGE
from ...utils._random import spawn_random_states
from ...utils._sklearn_compat import Interval
from ...utils._warnings import warn_user
from .._dp._common import _check_bounds as _check_score_bounds


def _bisection_update(lo, hi, query, estimate, target, band):
    """One step of the banded bisection: ``(lo, hi, stop)``.

    Over-covering (``estimate > target + band``) moves the upper end down,
    under-covering moves the lower end up, and an estimate inside the band
    stops the search at ``query``.
    """
    if estimate > target + band:
        return lo, query, False
    if estimate < target - band:
        return query, hi, False
    return lo, hi, True


_BOUNDS_HINT = (
    "the public range to search (e.g. (0, 1) for LAC and APS scores), fixed "
    "without looking at the calibration data. Pass it to the calibrator or to "
    "the wrapper."
)


def _check_bounds(score_bounds, owner):
    """The public range searched, ``(low, high)``."""
    return _check_score_bounds(score_bounds, owner, _BOUNDS_HINT)


class _LDPMixin:
    """Parameters and fitted-attribute helpers shared by LDP-L and LDP-S."""

    # Whether this is the starred variant (target 1 - alpha + Delta).
    _star = False

    def _target(self, alpha, correction):
        return 1.0 - alpha + (correction if self._star else 0.0)

    def _simulation_streams(self, random_state):
        """The server's stream (0) and the one stream (1) of all simulated users.

        Both spawned from ``random_state``'s ``SeedSequence`` like every other
        strategy's streams; ``"secure"`` is passed on as is.
        """
        server, users = spawn_random_states(random_state, 2)
        return server, users

    def _warn_guarantee(self, alpha, correction, name):
        if not self._star and correction >= 1.0 - alpha:
            warn_user(
                f"{type(self).__name__}: the correction {name}={correction:.4g} is "
                f">= 1 - alpha = {1 - alpha:.4g}, so the guarantee "
                f"1 - alpha - {name} is vacuous; the threshold is still computed. "
                "Use more users, a larger epsilon or a larger delta.",
                VacuousGuaranteeWarning,
            )

    def _warn_infinite(self, alpha, correction, name):
        warn_user(
            f"{type(self).__name__}: the target 1 - alpha + {name} = "
            f"{1 - alpha + correction:.4g} is >= 1 ({name}={correction:.4g} >= "
            f"alpha={alpha:g}); the threshold is +inf and prediction sets hold "
            "every label. Use more users, a larger epsilon or a larger delta.",
            InfiniteThresholdWarning,
        )


_LDP_CONSTRAINTS = {
    "epsilon": [Interval(Real, EPSILON_RANGE[0], EPSILON_RANGE[1], closed="both")],
    "delta": [Interval(Real, 0, 1, closed="neither")],
    "score_bounds": ["array-like", None],
}


def _per_client_rows(values, sizes):
    """``values`` split into one entry per client (``sizes[j]`` rows each).

    Equal sizes: one ``(n_clients, size, ...)`` view (entry ``j`` is client
    ``j``'s rows, made without a Python loop); else an object array of views.
    """
    m = sizes.shape[0]
    if (sizes == sizes[0]).all():
        return values.reshape(m, sizes[0], *values.shape[1:])
    out = np.empty(m, dtype=object)
    bounds = np.concatenate(([0], np.cumsum(sizes))).tolist()
    for j in range(m):
        out[j] = values[bounds[j] : bounds[j + 1]]
    return out
