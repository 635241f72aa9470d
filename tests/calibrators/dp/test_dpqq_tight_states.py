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


#: 100 clients on which the search ranked a k without a guess (TypeError
#: before session 9's H7, rule="tight", utility="rank", alpha=0.05, eps=1).
_UNGUESSED = (
    (12, 22, 26, 32, 38, 95, 102, 113, 122, 125, 126, 129, 132, 136, 142, 149)
    + (161, 165, 165, 177, 183, 186, 188, 196, 203, 217, 233, 239, 239, 256)
    + (268, 273, 275, 280, 287, 297, 298, 307, 318, 329, 330, 337, 343, 355)
    + (365, 371, 385, 419, 446, 451, 451, 475, 510, 512, 574, 585, 587, 599)
    + (601, 606, 637, 654, 657, 664, 670, 700, 704, 706, 714, 714, 733, 736)
    + (755, 758, 760, 762, 772, 782, 783, 788, 789, 800, 804, 824, 834, 839)
    + (854, 855, 879, 883, 891, 913, 917, 939, 954, 957, 966, 967, 979, 994)
)


@pytest.mark.slow
def test_a_k_without_a_guess_is_not_ranked():
    plan = dict(
        _tight_select._dpqq_tight_search.__wrapped__(_UNGUESSED, 0.05, 1.0, 10, "rank")
    )
    assert plan["feasible"]
    assert plan["coverage_lower"] >= 0.95
