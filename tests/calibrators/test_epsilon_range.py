"""The private calibrators' public range of epsilon: refused early, by name.

``epsilon = 5e-324`` or ``1e300`` used to pass validation and fail deep
inside a plan (OverflowError, "math domain error"). The calibrators (not the
mechanisms of ``skfedcp.privacy``, which accept any finite positive epsilon)
accept ``[1e-6, 1e6]``: a ValueError naming epsilon before any work, and the
ends of the range still fit.
"""

import warnings

import numpy as np
import pytest

from skfedcp.calibrators import CALIBRATORS
from skfedcp.privacy._validation import EPSILON_RANGE

PRIVATE = ("dp-central", "dp-qq", "ldp-l", "ldp-s")


def _make(alias, epsilon):
    params = {"epsilon": epsilon}
    if alias != "ldp-l":
        params["score_bounds"] = (0.0, 1.0)
    return CALIBRATORS[alias](**params)


def _fit(cal, alias):
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(4), 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if alias == "ldp-l":
            return cal.fit(
                rng.random((400, 3)),
                ids,
                labels=rng.integers(0, 3, 400),
                alpha=0.1,
                random_state=0,
            )
        return cal.fit(rng.random(400), ids, alpha=0.1, random_state=0)


def test_the_range_is_public_and_includes_the_tests_values():
    assert EPSILON_RANGE == (1e-6, 1e6)


@pytest.mark.parametrize("alias", PRIVATE)
@pytest.mark.parametrize("epsilon", [5e-324, 1e-7, 1.000001e6, 1e300])
def test_out_of_range_epsilon_is_refused_by_name(alias, epsilon):
    with pytest.raises(ValueError, match="'epsilon' parameter"):
        _fit(_make(alias, epsilon), alias)


@pytest.mark.parametrize("alias", PRIVATE)
@pytest.mark.parametrize("epsilon", EPSILON_RANGE)
def test_the_ends_of_the_range_fit(alias, epsilon):
    cal = _fit(_make(alias, epsilon), alias)
    assert not np.isnan(cal.threshold_)


@pytest.mark.parametrize("alias", ["dp-central", "dp-qq"])
@pytest.mark.parametrize("epsilon", [5e-324, 1e300])
def test_dp_plans_refuse_it_too(alias, epsilon):
    # dp-qq's plan failed deep inside (OverflowError in float_safe_ceil).
    with pytest.raises(ValueError, match="epsilon must be in"):
        _make(alias, epsilon).plan([100, 100], 0.1)


@pytest.mark.parametrize("alias", ["ldp-l", "ldp-s"])
def test_ldp_plans_refuse_it_too(alias):
    cal = _make(alias, 1e300)
    if alias == "ldp-l":
        cal.set_params(n_classes=3)
    with pytest.raises(ValueError, match="'epsilon' parameter"):
        cal.plan([100, 100], 0.1)
