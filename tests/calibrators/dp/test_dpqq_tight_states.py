"""The tight engine's DP on the states up to a cap gives the full DP's bits,
and the search that lowers the cap gives the same plan."""

import numpy as np
import pytest

from skfedcp.calibrators._dp import _tight, _tight_select


@pytest.mark.parametrize(
    "groups",
    [((30, 1), (45, 1), (80, 2), (120, 1)), ((60, 5),), ((400, 3), (900, 4))],
)
@pytest.mark.parametrize("utility", ["quantile", "rank"])
def test_capped_states_give_the_same_bits(groups, utility):
    full = _tight._TightBounds(groups, 1.0, 10, utility)
    capped = _tight._TightBounds(groups, 1.0, 10, utility)
    m = full.m
    for q in (0.5, 0.83, 0.97):
        for index in range(1 if full.exact else 2):
            every = full._compute(q, index)
            for cap in range(1, m + 1):
                some = capped._compute(q, index, cap)
                assert np.array_equal(some[:cap], every[:cap])
                assert np.isnan(some[cap:]).all()


def test_a_pass_below_k_is_computed_again():
    bounds = _tight._TightBounds(((30, 1), (45, 1), (80, 2)), 1.0, 10, "quantile")
    reference = _tight._TightBounds(((30, 1), (45, 1), (80, 2)), 1.0, 10, "quantile")
    bounds.cap = 2
    assert bounds(0.9, 1) == reference(0.9, 1)
    assert bounds(0.9, 4) == reference(0.9, 4)  # the pass is made again
    assert bounds.known(0.9, 3) == reference.known(0.9, 3)
    assert bounds.within(0.93, 4) == reference.within(0.93, 4)
    assert bounds.estimate(0.95, 3) == reference.estimate(0.95, 3)


def _full_plan(monkeypatch, sizes, alpha, epsilon, utility):
    """The plan with every probe on all states (no cap)."""
    with monkeypatch.context() as patch:
        patch.setattr(
            _tight._TightBounds,
            "cap",
            property(lambda self: self.m, lambda self, v: None),
            raising=False,
        )
        patch.setattr(_tight_select, "_NARROW", -1.0)
        return _tight_select._dpqq_tight_search.__wrapped__(
            sizes, alpha, epsilon, 10, utility
        )


@pytest.mark.parametrize("seed", range(6))
def test_lowered_cap_keeps_the_plan(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    sizes = tuple(int(n) for n in rng.integers(20, 300, int(rng.integers(3, 16))))
    alpha = float(rng.choice([0.05, 0.1]))
    utility = str(rng.choice(["quantile", "rank"]))
    fast = _tight_select._dpqq_tight_search.__wrapped__(sizes, alpha, 1.0, 10, utility)
    assert fast == _full_plan(monkeypatch, sizes, alpha, 1.0, utility)
