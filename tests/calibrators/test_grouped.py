"""GroupedCalibrator: one federated round per group, exact on small cases."""

import itertools
import math

import numpy as np
import pytest
from sklearn.base import clone

from skfedcp.calibrators import (
    AveragingCalibrator,
    CentralCalibrator,
    GroupCoverageBounds,
    GroupedCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
)
from skfedcp.exceptions import InfiniteThresholdWarning, SmallCalibrationSetWarning


def _federation(seed, n=900, m=8):
    """Scores whose law depends on the group; clients with skewed group mixes."""
    rng = np.random.default_rng(seed)
    clients = rng.integers(0, m, n)
    # Label shift: client j favours group j % 3.
    mix = np.where(rng.random(n) < 0.6, clients % 3, rng.integers(0, 3, n))
    scores = rng.exponential(size=n) * (1.0 + mix)
    return scores, clients, mix


STRATEGIES = {
    "qq": QuantileOfQuantilesCalibrator(),
    "central": CentralCalibrator(),
    "avg": AveragingCalibrator(),
}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_group_threshold_is_the_strategy_on_the_group_cells_alone(name, seed):
    scores, clients, groups = _federation(seed)
    cal = GroupedCalibrator(name).fit(scores, clients, group_ids=groups, alpha=0.1)
    assert cal.groups_.tolist() == [0, 1, 2]
    for g in range(3):
        rows = groups == g
        alone = clone(STRATEGIES[name]).fit(scores[rows], clients[rows], alpha=0.1)
        assert cal.threshold_[g] == alone.threshold_  # bit for bit
        assert cal.calibrators_[g].calibration_info_.keys() == (
            alone.calibration_info_.keys()
        )
    # A test row uses its group's threshold.
    np.testing.assert_array_equal(
        cal.predict_threshold([2, 0, 1]), cal.threshold_[[2, 0, 1]]
    )


def test_dp_qq_per_group_uses_the_spawned_seeds(seed):
    scores, clients, groups = _federation(seed, n=3000, m=5)
    base = PrivateQuantileOfQuantilesCalibrator(epsilon=10.0, score_bounds=(0, 20))
    cal = GroupedCalibrator(base).fit(
        scores, clients, group_ids=groups, alpha=0.1, random_state=seed
    )
    seeds = np.random.SeedSequence(seed).spawn(3)
    for g in range(3):
        rows = groups == g
        alone = clone(base).fit(
            scores[rows], clients[rows], alpha=0.1, random_state=seeds[g]
        )
        assert cal.threshold_[g] == alone.threshold_
    # Disjoint cells: parallel composition, one epsilon per record's score.
    assert cal.epsilon_spent_ == 10.0


def test_messages_are_one_per_nonempty_cell():
    scores = np.arange(1.0, 13.0)
    clients = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2])
    groups = np.array(["a", "b", "a", "a", "a", "b", "b", "a", "a", "a", "a", "a"])
    cal = GroupedCalibrator("qq").fit(scores, clients, group_ids=groups, alpha=0.5)
    cells = sorted(
        zip(
            cal.messages_["group"].tolist(),
            cal.messages_["client"].tolist(),
            cal.messages_["n"].tolist(),
            strict=True,
        )
    )
    # Client 2 holds no "b" row: no message for that cell.
    assert cells == [("a", 0, 2), ("a", 1, 2), ("a", 2, 5), ("b", 0, 1), ("b", 1, 2)]
    assert set(cal.messages_) == {"client", "group", "n", "quantile"}
    assert cal.n_per_group_.tolist() == [9, 3]
    assert cal.clients_.tolist() == [0, 1, 2] and cal.n_clients_ == 3
    assert math.isinf(cal.epsilon_spent_)


def _qq_coverage_by_enumeration(sizes, ranks, k):
    """P(test <= k-th smallest of the clients' l_j-th smallest), by enumeration.

    With N + 1 exchangeable, almost surely distinct scores, every ordering of
    the N + 1 ranks is equally likely: enumerate them all.
    """
    n_total = sum(sizes)
    hits = total = 0
    for perm in itertools.permutations(range(n_total + 1)):
        test, rest = perm[0], perm[1:]
        start, values = 0, []
        for size, rank in zip(sizes, ranks, strict=True):
            cell = sorted(rest[start : start + size])
            values.append(cell[rank - 1] if rank <= size else math.inf)
            start += size
        hits += test <= sorted(values)[k - 1]
        total += 1
    return hits / total


def test_group_coverage_M_g_matches_enumeration():
    # Group "x": cells of 2 and 3 rows; group "y": cells of 1, 1 and 3 rows.
    clients = np.array([0, 0, 1, 1, 1, 0, 1, 2, 2, 2])
    groups = np.array(["x"] * 5 + ["y"] * 5)
    scores = np.random.default_rng(0).uniform(size=10)
    cal = GroupedCalibrator("qq").fit(scores, clients, group_ids=groups, alpha=0.4)
    assert isinstance(cal.coverage_bounds_, GroupCoverageBounds)
    for g, sizes in enumerate([(2, 3), (1, 1, 3)]):
        info = cal.calibrators_[g].calibration_info_
        assert info["feasible"]
        exact = _qq_coverage_by_enumeration(
            sizes, [int(r) for r in info["local_ranks"]], info["k"]
        )
        assert cal.coverage_bounds_.lower[g] == pytest.approx(exact, abs=1e-9)
        assert exact >= 1 - 0.4


def test_central_M_g_is_the_group_rank():
    scores, clients, groups = _federation(0, n=300)
    cal = GroupedCalibrator("central").fit(scores, clients, group_ids=groups, alpha=0.1)
    for g in range(3):
        n_g = int(np.sum(groups == g))
        rank = math.ceil(0.9 * (n_g + 1))
        assert cal.coverage_bounds_.lower[g] == pytest.approx(rank / (n_g + 1))


def test_too_small_group_is_inf_and_warned_by_name():
    scores = np.arange(1.0, 31.0)
    groups = np.array(["big"] * 27 + ["tiny"] * 3)
    clients = np.arange(30) % 3
    with pytest.warns(InfiniteThresholdWarning, match=r"'tiny' \(3 rows\)") as rec:
        cal = GroupedCalibrator("central").fit(
            scores, clients, group_ids=groups, alpha=0.1
        )
    assert len(rec) == 1  # one warning naming the groups, not one per group
    assert np.isfinite(cal.threshold_[0]) and np.isposinf(cal.threshold_[1])
    assert cal.infinite_groups_.tolist() == ["tiny"]
    assert cal.coverage_bounds_.lower[1] == 1.0


def test_known_group_without_rows_gets_inf():
    scores, clients, groups = _federation(1)
    with pytest.warns(InfiniteThresholdWarning, match="7"):
        cal = GroupedCalibrator("qq").fit(
            scores, clients, group_ids=groups, alpha=0.1, known_groups=[0, 1, 2, 7]
        )
    assert cal.groups_.tolist() == [0, 1, 2, 7]
    assert np.isposinf(cal.threshold_[3]) and cal.n_per_group_[3] == 0
    assert cal.calibrators_[3] is None
    assert tuple(cal.coverage_bounds()[i][3] for i in range(2)) == (1.0, 1.0)


def test_min_group_size_merges_the_small_groups():
    rng = np.random.default_rng(3)
    groups = np.repeat(["a", "b", "c", "d"], [200, 6, 5, 40])
    clients = rng.integers(0, 4, groups.size)
    scores = rng.exponential(size=groups.size)
    cal = GroupedCalibrator("central", min_group_size=50).fit(
        scores, clients, group_ids=groups, alpha=0.1
    )
    assert cal.merged_groups_.tolist() == ["b", "c", "d"]
    rows = groups != "a"
    merged = CentralCalibrator().fit(scores[rows], clients[rows], alpha=0.1)
    assert cal.threshold_.tolist()[1:] == [merged.threshold_] * 3
    assert cal.fallback_threshold_ == merged.threshold_
    assert cal.calibrators_[1] is cal.calibrators_[2] is cal.calibrators_[3]
    # Merged cells: one message per client for all its small-group rows.
    is_merged = cal.messages_["group"] == "<merged>"
    assert cal.messages_["n"][is_merged].sum() == rows.sum()
    with pytest.warns(SmallCalibrationSetWarning, match="'zz'"):
        out = cal.predict_threshold(["a", "zz"])
    assert out.tolist() == [cal.threshold_[0], merged.threshold_]


def test_unseen_group_gets_inf_without_min_group_size():
    scores, clients, groups = _federation(2)
    cal = GroupedCalibrator("qq").fit(scores, clients, group_ids=groups, alpha=0.1)
    assert np.isposinf(cal.fallback_threshold_)
    with pytest.warns(SmallCalibrationSetWarning, match=r"\+inf"):
        assert np.isposinf(cal.predict_threshold([5])[0])
    with pytest.warns(SmallCalibrationSetWarning):
        assert cal.group_index([0, 5]).tolist() == [0, -1]


@pytest.mark.parametrize("name", ["dp-central", "ldp-s", "QQ"])
def test_unsupported_strategies_are_refused_by_name(name):
    with pytest.raises(ValueError, match=f"got '{name}'"):
        GroupedCalibrator(name).fit([1.0, 2.0], group_ids=[0, 1], alpha=0.1)


def test_group_ids_are_checked():
    cal = GroupedCalibrator("central")
    with pytest.raises(ValueError, match="missing"):
        cal.fit([1.0, 2.0], group_ids=[0.0, np.nan], alpha=0.1)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        cal.fit([1.0, 2.0], group_ids=[0, 1, 2], alpha=0.1)
    with pytest.raises(ValueError, match="min_group_size"):
        GroupedCalibrator(min_group_size=0).fit([1.0], group_ids=[0], alpha=0.1)


def test_avg_has_no_coverage_bound():
    scores, clients, groups = _federation(4, n=3000)
    cal = GroupedCalibrator("avg").fit(scores, clients, group_ids=groups, alpha=0.1)
    assert np.isnan(cal.coverage_bounds_.lower).all()


@pytest.mark.parametrize("n_byzantine", [0, 1])
def test_coverage_bounds_are_read_lazily_with_the_same_bits(n_byzantine):
    # A fit stores a marker; the first read computes every group's bounds,
    # which equal coverage_bounds() (eager) bit for bit, before and after a
    # pickle round trip; an unfitted calibrator has no such attribute.
    import pickle

    rng = np.random.default_rng(3)
    sizes = rng.integers(20, 120, 12)
    clients = np.repeat(np.arange(12), sizes)
    scores = rng.exponential(size=clients.size)
    groups = rng.integers(0, 2, clients.size)
    strategy = QuantileOfQuantilesCalibrator(n_byzantine=n_byzantine)
    cal = GroupedCalibrator(strategy).fit(scores, clients, group_ids=groups, alpha=0.2)
    assert not isinstance(cal.__dict__["coverage_bounds_"], GroupCoverageBounds)
    eager = cal.coverage_bounds()
    thawed = pickle.loads(pickle.dumps(cal))
    for fitted in (cal, thawed):
        bounds = fitted.coverage_bounds_
        assert isinstance(bounds, GroupCoverageBounds)
        np.testing.assert_array_equal(bounds.lower, eager.lower)
        np.testing.assert_array_equal(bounds.upper, eager.upper)
        assert fitted.__dict__["coverage_bounds_"] is bounds  # read once
    if n_byzantine:
        assert np.all(eager.lower <= eager.upper) and np.all(eager.lower < 1.0)
    assert not hasattr(GroupedCalibrator(strategy), "coverage_bounds_")
