"""Central, QQ and Avg calibrators: oracles, hand cases, protocol, errors."""

from contextlib import nullcontext

import numpy as np
import pytest

from skfedcp.calibrators import (
    AveragingCalibrator,
    CentralCalibrator,
    QuantileOfQuantilesCalibrator,
    get_calibrator,
    stack_messages,
)
from skfedcp.exceptions import InfiniteThresholdWarning
from skfedcp.utils import conformal_quantile, conformal_rank, order_statistic


class TestOrderStatistic:
    def test_hand_cases(self):
        assert order_statistic([3, 1, 2], 2) == 2
        assert order_statistic([3, 1, 2], 4) == np.inf
        assert order_statistic([1, 1, 5], 2) == 1

    def test_bad_rank(self):
        with pytest.raises(ValueError, match="rank"):
            order_statistic([1.0], 0)
        with pytest.raises(TypeError, match="rank"):
            order_statistic([1.0], 1.5)

    def test_float_safe_rank(self):
        # (19 + 1) * (1 - 0.7) is 6.000000000000001 in float: the rank is 6.
        assert conformal_quantile(np.arange(1.0, 20.0), 0.7) == 6.0


class TestCentral:
    def test_threshold_is_pooled_rank(self, seed):
        rng = np.random.default_rng(seed)
        scores = rng.normal(size=97)
        client_ids = rng.integers(0, 5, size=97)
        cal = CentralCalibrator().fit(scores, client_ids, alpha=0.1)
        assert cal.threshold_ == np.sort(scores)[int(np.ceil(98 * 0.9)) - 1]
        assert cal.calibration_info_["coverage"] == pytest.approx(89 / 98)

    def test_too_small_is_inf_with_warning(self):
        with pytest.warns(InfiniteThresholdWarning, match=r"\+inf"):
            cal = CentralCalibrator().fit([1.0, 2.0], alpha=0.1)
        assert cal.threshold_ == np.inf
        assert cal.coverage_bounds([2], 0.1) == (1.0, 1.0)


class TestQuantileOfQuantiles:
    def test_hand_case(self):
        # Spec 6.2: local l=2 values [3, 2, 6]; k=2 gives 3.
        clients = [[1, 5, 3], [2, 2, 9], [7, 4, 6]]
        scores = np.concatenate(clients).astype(float)
        ids = np.repeat([0, 1, 2], 3)
        cal = QuantileOfQuantilesCalibrator(local_rank=2)
        msgs = [cal.client_step(c, alpha=0.5, n_per_client=[3, 3, 3]) for c in clients]
        assert [m["quantile"] for m in msgs] == [3, 2, 6]
        sel = cal.plan([3, 3, 3], 0.5)
        expected = np.sort([3, 2, 6])[sel["k"] - 1]
        assert cal.server_step(msgs, alpha=0.5, n_per_client=[3, 3, 3]) == expected
        assert cal.fit(scores, ids, alpha=0.5).threshold_ == expected

    @pytest.mark.parametrize("n", [1, 5, 19, 50, 200])
    @pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
    def test_one_client_equals_central(self, n, alpha, seed):
        rng = np.random.default_rng(seed)
        scores = rng.exponential(size=n)
        infeasible = conformal_rank(n, alpha) > n
        ctx = pytest.warns(InfiniteThresholdWarning) if infeasible else nullcontext()
        with ctx:
            qq = QuantileOfQuantilesCalibrator().fit(scores, alpha=alpha)
            central = CentralCalibrator().fit(scores, alpha=alpha)
        assert qq.threshold_ == central.threshold_
        np.testing.assert_allclose(
            qq.coverage_bounds([n], alpha),
            central.coverage_bounds([n], alpha),
            rtol=1e-12,
        )

    def test_simulation_equals_protocol(self, seed):
        # The vectorised fit must send exactly what client_step sends.
        rng = np.random.default_rng(seed)
        sizes = [20] * 7 + [13, 31]
        ids = np.repeat(np.arange(len(sizes)), sizes)
        rng.shuffle(ids)
        scores = rng.normal(size=ids.size)
        for cal in [
            QuantileOfQuantilesCalibrator(),
            AveragingCalibrator(),
            CentralCalibrator(),
        ]:
            fitted = cal.fit(scores, ids, alpha=0.2)
            msgs = [
                cal.client_step(
                    scores[ids == c], alpha=0.2, n_per_client=fitted.n_per_client_
                )
                for c in fitted.clients_
            ]
            stacked = stack_messages(msgs)
            np.testing.assert_array_equal(stacked["n"], fitted.messages_["n"])
            if "quantile" in stacked:
                np.testing.assert_array_equal(
                    stacked["quantile"], fitted.messages_["quantile"]
                )
            threshold = cal.server_step(
                msgs[::-1], alpha=0.2, n_per_client=fitted.n_per_client_[::-1]
            )
            assert threshold == fitted.threshold_

    def test_invariance_to_row_and_label_permutation(self, seed):
        rng = np.random.default_rng(seed)
        ids = np.repeat(np.arange(8), 25)
        scores = rng.normal(size=ids.size)
        ref = QuantileOfQuantilesCalibrator().fit(scores, ids, alpha=0.1).threshold_
        perm = rng.permutation(ids.size)
        renamed = np.array([f"c{7 - i}" for i in ids])
        got = QuantileOfQuantilesCalibrator().fit(
            scores[perm], renamed[perm], alpha=0.1
        )
        assert got.threshold_ == ref

    def test_equivariance_to_increasing_map(self, seed):
        rng = np.random.default_rng(seed)
        ids = np.repeat(np.arange(6), 30)
        scores = rng.normal(size=ids.size)
        for cal in [QuantileOfQuantilesCalibrator(), CentralCalibrator()]:
            a = cal.fit(scores, ids, alpha=0.1).threshold_
            b = cal.fit(np.exp(scores), ids, alpha=0.1).threshold_
            assert np.exp(a) == pytest.approx(b, rel=1e-12)

    def test_rank_bound(self, seed):
        # At least l*k pooled scores are <= the QQ threshold (spec 6.16).
        rng = np.random.default_rng(seed)
        ids = np.repeat(np.arange(10), 20)
        scores = rng.normal(size=ids.size)
        cal = QuantileOfQuantilesCalibrator().fit(scores, ids, alpha=0.1)
        info = cal.calibration_info_
        assert np.sum(scores <= cal.threshold_) >= info["local_ranks"][0] * info["k"]

    def test_infeasible_is_inf(self):
        with pytest.warns(InfiniteThresholdWarning):
            cal = QuantileOfQuantilesCalibrator().fit(
                np.arange(4.0), np.repeat([0, 1], 2), alpha=0.1
            )
        assert cal.threshold_ == np.inf
        assert not cal.calibration_info_["feasible"]

    def test_unequal_sizes_small_client_sends_inf(self):
        sizes = [5, 10, 20, 40, 15, 8, 30, 12]
        ids = np.repeat(np.arange(len(sizes)), sizes)
        scores = np.random.default_rng(0).normal(size=ids.size)
        cal = QuantileOfQuantilesCalibrator(local_rank="fixed").fit(
            scores, ids, alpha=0.1
        )
        assert cal.calibration_info_["k"] == 3
        # Clients of 5 and 8 rows need rank 6 and 9: they send +inf.
        assert np.isinf(cal.messages_["quantile"][[0, 5]]).all()
        assert np.isfinite(cal.threshold_)

    def test_server_rejects_mismatched_sizes(self):
        cal = QuantileOfQuantilesCalibrator()
        msgs = [{"n": 20, "quantile": 1.0}, {"n": 20, "quantile": 2.0}]
        with pytest.raises(ValueError, match="n_per_client"):
            cal.server_step(msgs, alpha=0.1, n_per_client=[20, 30])


class TestAveraging:
    def test_hand_case(self):
        # Spec 6.9: [[1..10], [11..20]], alpha = 0.1 -> rank 10 -> (10 + 20)/2.
        scores = np.arange(1.0, 21.0)
        ids = np.repeat([0, 1], 10)
        assert AveragingCalibrator().fit(scores, ids, alpha=0.1).threshold_ == 15.0
        assert (
            AveragingCalibrator(weights="size").fit(scores, ids, alpha=0.1).threshold_
            == 15.0
        )

    def test_n_equals_one(self):
        scores = np.arange(5.0)
        ids = np.arange(5)
        with pytest.warns(InfiniteThresholdWarning):
            assert (
                AveragingCalibrator().fit(scores, ids, alpha=0.1).threshold_ == np.inf
            )
        clip = AveragingCalibrator(local_quantile="clip").fit(scores, ids, alpha=0.1)
        assert clip.threshold_ == np.mean(scores)

    def test_no_guarantee_documented(self):
        assert np.isnan(AveragingCalibrator().coverage_bounds([10, 10], 0.1).lower)


class TestBadInput:
    @pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5])
    def test_alpha(self, alpha):
        with pytest.raises(ValueError, match="alpha"):
            CentralCalibrator().fit([1.0, 2.0], alpha=alpha)

    def test_nan_scores(self):
        with pytest.raises(ValueError, match="scores"):
            QuantileOfQuantilesCalibrator().fit([1.0, np.nan], alpha=0.1)

    def test_client_ids(self):
        with pytest.raises(ValueError, match="client_ids"):
            CentralCalibrator().fit([1.0, 2.0], [0], alpha=0.1)
        with pytest.raises(ValueError, match="client_ids"):
            CentralCalibrator().fit([1.0, 2.0], [0.0, np.nan], alpha=0.1)
        with pytest.raises(ValueError, match="client_ids"):
            CentralCalibrator().fit([1.0, 2.0], [[0], [1]], alpha=0.1)

    def test_registry(self):
        assert isinstance(get_calibrator("avg"), AveragingCalibrator)
        with pytest.raises(ValueError, match="calibrator"):
            get_calibrator("nope")
        with pytest.raises(TypeError, match="calibrator"):
            get_calibrator(3)
        user = QuantileOfQuantilesCalibrator(local_rank="fixed")
        got = get_calibrator(user)
        assert got is not user and got.local_rank == "fixed"

    def test_param_validation(self):
        with pytest.raises(ValueError, match="local_rank"):
            QuantileOfQuantilesCalibrator(local_rank=0).fit([1.0] * 30, alpha=0.1)

    def test_messages(self):
        with pytest.raises(ValueError, match="empty"):
            stack_messages([])
        with pytest.raises(TypeError, match="messages"):
            stack_messages(3)


def test_n_jobs_gives_the_same_messages():
    class LoopedQQ(QuantileOfQuantilesCalibrator):
        # Force the generic per-client loop (the parallel path).
        _simulate_clients = QuantileOfQuantilesCalibrator.__mro__[1]._simulate_clients

    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(6), 15)
    scores = rng.normal(size=ids.size)
    ref = QuantileOfQuantilesCalibrator().fit(scores, ids, alpha=0.2)
    par = LoopedQQ().fit(scores, ids, alpha=0.2, n_jobs=2)
    np.testing.assert_array_equal(ref.messages_["quantile"], par.messages_["quantile"])
    assert ref.threshold_ == par.threshold_


def test_qq_server_drops_empty_clients_with_warning():
    from skfedcp.exceptions import SmallCalibrationSetWarning

    rng = np.random.default_rng(0)
    groups = [rng.normal(size=20) for _ in range(5)] + [np.empty(0)]
    sizes = [g.size for g in groups]
    cal = QuantileOfQuantilesCalibrator()
    msgs = [cal.client_step(g, alpha=0.1, n_per_client=sizes) for g in groups]
    assert msgs[-1] == {"n": 0, "quantile": np.inf}
    with pytest.warns(SmallCalibrationSetWarning, match="not counted"):
        q = cal.server_step(msgs, alpha=0.1, n_per_client=sizes)
    ref = cal.fit(np.concatenate(groups), np.repeat(np.arange(5), 20), alpha=0.1)
    assert q == ref.threshold_
    with pytest.raises(ValueError, match="no client"):
        cal.plan([0, 0], 0.1)
