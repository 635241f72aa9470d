"""scikit-learn's common estimator checks for every public skfedcp estimator."""

import pytest
from sklearn.utils.estimator_checks import (
    check_param_validation,
    parametrize_with_checks,
)

from skfedcp import FedConformalRegressor

ESTIMATORS = [
    FedConformalRegressor(random_state=0),
    FedConformalRegressor(calibrator="central", random_state=0),
]


def _expected_failed_checks(estimator):
    # Every check passes; the hook stays so later estimators can list a reason.
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: repr(e))
def test_param_validation(estimator):
    check_param_validation(type(estimator).__name__, estimator)
