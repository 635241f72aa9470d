"""scikit-learn's common estimator checks for FedCQRRegressor."""

import pytest
from quantile_forest import RandomForestQuantileRegressor
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import QuantileRegressor
from sklearn.utils.estimator_checks import (
    check_param_validation,
    parametrize_with_checks,
)

from skfedcp.regression import FedCQRRegressor


def _forest():
    return RandomForestQuantileRegressor(n_estimators=10, random_state=0)


def _hgb():
    return HistGradientBoostingRegressor(loss="quantile", max_iter=50, random_state=0)


ESTIMATORS = [
    FedCQRRegressor(_forest(), random_state=0),
    FedCQRRegressor(_forest(), conformity_score="normalized", random_state=0),
    FedCQRRegressor(
        estimator_lower=_hgb(),
        estimator_upper=_hgb(),
        # check_regressors_train sets alpha=0.01: the midpoint of 0.5% / 99.5%
        # boosted quantiles fitted on 100 rows is no point model (R2 ~ 0).
        quantile_levels=(0.25, 0.75),
        conformity_score="asymmetric",
        calibrator="central",
        random_state=0,
    ),
    FedCQRRegressor(
        estimator_lower=QuantileRegressor(alpha=0.0),
        estimator_upper=QuantileRegressor(alpha=0.0),
        calibrator="avg",
        random_state=0,
    ),
]


def _readonly_pickle_of_forest(estimator, check):
    """The one known failure: a forest pickled through a read-only memmap."""
    keywords = getattr(check, "keywords", {}) or {}
    name = getattr(getattr(check, "func", check), "__name__", "")
    return (
        isinstance(estimator.estimator, RandomForestQuantileRegressor)
        and name == "check_estimators_pickle"
        and keywords.get("readonly_memmap", False)
    )


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check, request):
    if _readonly_pickle_of_forest(estimator, check):
        # Strict: the day quantile-forest accepts read-only buffers, this
        # test fails and the marker goes. Plain pickling passes (the same
        # check without the memmap) and is also tested in test_cqr.py.
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason=(
                    "quantile-forest 1.4 cannot unpickle a forest from a "
                    "read-only memory map (its Cython state needs writable "
                    "buffers)"
                ),
            )
        )
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: repr(e))
def test_param_validation(estimator):
    check_param_validation(type(estimator).__name__, estimator)
