"""scikit-learn's common estimator checks for PrivateConformalClassifier."""

import pytest
from sklearn.utils.estimator_checks import (
    check_param_validation,
    parametrize_with_checks,
)

from skfedcp.classification import PrivateConformalClassifier

ESTIMATORS = [
    # The default: DP split conformal (the check data sets are small, so this
    # mostly exercises the trivial-set branch).
    PrivateConformalClassifier(random_state=0),
    # Large epsilon and FedCP²-QQ, so the mechanism itself runs.
    PrivateConformalClassifier(calibrator="dp-qq", epsilon=50.0, random_state=0),
    PrivateConformalClassifier(calibrator="qq", conformity_score="aps", random_state=0),
]


def _expected_failed_checks(estimator):
    # Every check passes; the hook stays so that a reason can be listed.
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: repr(e))
def test_param_validation(estimator):
    check_param_validation(type(estimator).__name__, estimator)
