"""ParamNamesCacheMixin: scikit-learn's parameter names, computed once per class."""

import pytest
from sklearn.base import BaseEstimator, clone

from skfedcp import FedConformalRegressor
from skfedcp.calibrators import (
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
)
from skfedcp.scores import AbsoluteResidualScore
from skfedcp.utils._sklearn_compat import ParamNamesCacheMixin


class _Parent(ParamNamesCacheMixin, BaseEstimator):
    def __init__(self, a=1, b=2):
        self.a = a
        self.b = b


class _Child(_Parent):
    def __init__(self, a=1, b=2, c=3):
        super().__init__(a=a, b=b)
        self.c = c


@pytest.mark.parametrize(
    "cls",
    [
        QuantileOfQuantilesCalibrator,
        PrivateQuantileOfQuantilesCalibrator,
        FedConformalRegressor,
        AbsoluteResidualScore,
        _Parent,
        _Child,
    ],
)
def test_same_names_as_scikit_learn(cls):
    expected = BaseEstimator._get_param_names.__func__(cls)
    assert cls._get_param_names() == expected
    assert cls._get_param_names() == expected  # second call: from the cache


def test_each_class_keeps_its_own_names():
    # The parent's cached names must not leak into a subclass with another
    # signature, in either order of first use.
    assert _Parent._get_param_names() == ["a", "b"]
    assert _Child._get_param_names() == ["a", "b", "c"]
    assert _Parent._get_param_names() == ["a", "b"]
    assert clone(_Child(c=7)).get_params() == {"a": 1, "b": 2, "c": 7}


def test_callers_cannot_corrupt_the_cache():
    names = _Parent._get_param_names()
    names.append("oops")
    assert _Parent._get_param_names() == ["a", "b"]
    assert "_param_names_cache" not in vars(_Parent())  # nothing on instances
