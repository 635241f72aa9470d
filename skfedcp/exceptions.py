"""Warning categories raised by skfedcp."""

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
