"""scikit-learn's common estimator checks for FedChi2Selector."""

import pytest
from sklearn.utils.estimator_checks import (
    check_param_validation,
    parametrize_with_checks,
)

from skfedcp.feature_selection import FedChi2Selector

# statistic="contingency" is left out: it needs integer-coded categorical X,
# and the common checks feed continuous data (every fit would raise by
# design). Its sklearn behaviour (clone, pickle, sparse input, pandas output)
# is tested in test_fed_chi2.py.
ESTIMATORS = [
    FedChi2Selector(random_state=0),
    FedChi2Selector(method="plain"),
    FedChi2Selector(estimator="mean_square", secure_agg="complete", random_state=0),
    FedChi2Selector(expected_split="uniform", secure_agg="none", random_state=0),
]


def _expected_failed_checks(estimator):
    # Every check passes.
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible_selector(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_param_validation(estimator):
    check_param_validation(type(estimator).__name__, estimator)
