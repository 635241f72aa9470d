"""scikit-learn's common estimator checks for TwoStudentsRegressor and its wrapper."""

import pytest
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.tree import DecisionTreeRegressor
from sklearn.utils.estimator_checks import (
    check_param_validation,
    parametrize_with_checks,
)

from skfedcp import FedConformalRegressor
from skfedcp.two_students import TwoStudentsRegressor

# The common checks call fit(X, y): one data holder, whose rows are dealt
# into min_teachers shards (one teacher each) and X_unlabeled falls back to X.
ESTIMATORS = [
    TwoStudentsRegressor(Ridge(), mean_student=LinearRegression(), random_state=0),
    TwoStudentsRegressor(
        DecisionTreeRegressor(max_depth=3),
        mean_student=DecisionTreeRegressor(),
        uq_target="quantiles",
        filter="percentile",
        min_teachers=3,
        random_state=0,
    ),
    FedConformalRegressor(
        TwoStudentsRegressor(Ridge(), mean_student=LinearRegression(), random_state=0),
        conformity_score="two_students",
        random_state=0,
    ),
    FedConformalRegressor(
        TwoStudentsRegressor(Ridge(), mean_student=LinearRegression(), random_state=0),
        conformity_score="two_students_offset",
        calibrator="central",
        random_state=0,
    ),
]


def _expected_failed_checks(estimator):
    # Every check passes: fit needs no argument beyond (X, y).
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    "estimator",
    [TwoStudentsRegressor(), *ESTIMATORS[2:3]],
    ids=["TwoStudentsRegressor()", "FedConformalRegressor(two_students)"],
)
def test_param_validation(estimator):
    check_param_validation(type(estimator).__name__, estimator)
