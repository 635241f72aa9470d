"""Warning categories raised by skfedcp."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = [
    "ClippedScoresWarning",
    "InfiniteThresholdWarning",
    "PrefitEstimatorWarning",
    "PrivacyLeakWarning",
    "SmallCalibrationSetWarning",
]


class SmallCalibrationSetWarning(UserWarning):
    """A calibration set is too small for the requested ``alpha``.

    The affected quantile is ``+inf``: the prediction set is trivial (the
    whole real line, or every label), which is valid but uninformative.
    """


class InfiniteThresholdWarning(SmallCalibrationSetWarning):
    """The calibrated threshold is ``+inf`` (no finite threshold is valid)."""


class PrivacyLeakWarning(UserWarning):
    """A setting weakens or voids a formal privacy guarantee.

    Raised, for example, when score bounds are derived from the data instead
    of being fixed in advance by the user.
    """


class PrefitEstimatorWarning(UserWarning):
    """A fitted estimator was passed without :class:`~sklearn.frozen.FrozenEstimator`.

    It is used as is (every row calibrates), but ``clone`` and
    ``GridSearchCV`` would refit a copy of it on an internal split. Wrap it in
    ``FrozenEstimator`` to keep it fixed everywhere.
    """


class ClippedScoresWarning(UserWarning):
    """Scores outside the public bounds were clipped into the outer bins.

    Clipping below the lowest edge is conservative. Clipping above the top
    edge rounds scores *down*, so a threshold is then valid only for the
    clipped score. The count in the message is computed from private data and
    is not privatised: it is a diagnostic for the data holder only.
    """


class CrossingQuantilesWarning(UserWarning):
    """The lower quantile model predicts above the upper one on many rows.

    Conformalized quantile regression stays valid: the guarantee concerns the
    score ``max(f_lo(x) - y, y - f_hi(x))`` whatever the models predict, and an
    inverted band only makes some intervals narrow or empty. The warning
    points at poor quantile models, not at a broken guarantee.
    """


__all__ += ["CrossingQuantilesWarning"]


class TeacherFilterWarning(UserWarning):
    """The truncation filter of Two Students kept too few client models.

    The models with the largest in-band fractions were kept instead, so the
    ensemble may include drifted clients; the conformal step stays valid, but
    the intervals may widen.
    """


class DistillationWarning(UserWarning):
    """A student reproduces its ensemble target poorly on the unlabelled inputs.

    Conformal calibration remains valid for the student as fitted; the warning
    points at an under-fitting student, not at a broken guarantee.
    """


__all__ += ["DistillationWarning", "TeacherFilterWarning"]


class VacuousGuaranteeWarning(UserWarning):
    """A coverage guarantee is vacuous for the given privacy budget and data size.

    Raised when a correction term (e.g. ``Delta`` of the local-DP calibrators)
    is at least ``1 - alpha``, so that the promised coverage
    ``1 - alpha - Delta`` is at most 0. The threshold is still computed (as in
    the paper), but nothing is guaranteed about it.
    """


__all__ += ["VacuousGuaranteeWarning"]


class NodeExcludedWarning(UserWarning):
    """A node of a real deployment was left out of a round.

    It failed, timed out, holds another model version or too few rows. The
    server goes on with the other nodes when the strategy allows it (and
    recomputes its plan for them); otherwise it raises an error instead.
    """


__all__ += ["NodeExcludedWarning"]


class InvalidMessageError(ValueError):
    """A client's message does not match the public plan of the round.

    Raised by a server step (:meth:`BaseCalibrator.fit_from_messages
    <skfedcp.calibrators.BaseCalibrator.fit_from_messages>`, the LDP-S
    rounds, the FED-chi2 rounds) before the message is used: a missing or
    extra field, a value of the wrong type, size or shape, a size other than
    the one the client announced, a non-finite value where the plan allows
    none, a value off the announced grid. ``client`` and ``field`` name the
    offending client and field.

    Parameters
    ----------
    message : str
        What is wrong, naming the client and the field.
    client : hashable, default=None
        Label of the client that sent the message.
    field : str, default=None
        Name of the offending field.
    """

    def __init__(
        self, message: str, *, client: Hashable | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.client = client
        self.field = field

    def __reduce__(
        self,
    ) -> tuple[Any, ...]:  # keep client and field through pickling (joblib)
        return (_rebuild_invalid_message, (str(self), self.client, self.field))


def _rebuild_invalid_message(
    message: str, client: Hashable | None, field: str | None
) -> InvalidMessageError:
    return InvalidMessageError(message, client=client, field=field)


class InvalidMessageWarning(UserWarning):
    """A client sent an invalid message and was excluded from the round.

    Emitted instead of :class:`InvalidMessageError` when the server step runs
    with ``on_invalid="exclude"`` (as the Flower server does): the rest of the
    round goes on without that client, and the warning says which client,
    which field and how the result was computed without it.
    """


__all__ += ["InvalidMessageError", "InvalidMessageWarning"]


class SingleClientWarning(UserWarning):
    """A federated method was fitted without ``client_ids``.

    Without ``client_ids`` every row is taken to come from one client: a
    federated strategy (``"qq"``, ``"avg"``, ``"dp-qq"``) or a secure-sum
    protocol then runs as if the data were pooled, which is rarely what was
    meant. Pass ``client_ids`` (or silence this warning on purpose).
    """


__all__ += ["SingleClientWarning"]
