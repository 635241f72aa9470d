"""DP calibrators: public plans, exact privacy of the releases, limits, errors."""

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from skfedcp.calibrators import (
    CALIBRATORS,
    CentralCalibrator,
    PrivateCentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
    get_calibrator,
    qq_coverage,
)
from skfedcp.calibrators._dp import _central as _dp_central
from skfedcp.calibrators._dp import _laws as _dp_laws
from skfedcp.calibrators._dp import _plan as _dp_plan
from skfedcp.exceptions import (
    ClippedScoresWarning,
    InfiniteThresholdWarning,
    SmallCalibrationSetWarning,
)
from skfedcp.privacy import (
    private_conformal_gamma,
    private_conformal_level,
    private_conformal_n_bins,
    private_quantile_probabilities,
)
from skfedcp.utils._sklearn_compat import InvalidParameterError

UNIT = (0.0, 1.0)


def dp_central(**kwargs):
    # Angelopoulos et al.'s correction: the values this module pins are the
    # paper's (the default rule is "tight", tested in test_private_tight.py).
    return PrivateCentralCalibrator(**{"score_bounds": UNIT, "rule": "paper", **kwargs})


def dp_qq(**kwargs):
    return PrivateQuantileOfQuantilesCalibrator(**{"score_bounds": UNIT, **kwargs})


# --------------------------------------------------------------------------
# Public plans


class TestCentralPlan:
    @pytest.mark.parametrize("n, epsilon", [(1000, 1.0), (5000, 8.0), (1000, 10.0)])
    def test_matches_the_primitives(self, n, epsilon):
        plan = dp_central(epsilon=epsilon).plan([n], 0.1)
        n_bins = private_conformal_n_bins(n, 0.1, epsilon=epsilon)
        gamma = private_conformal_gamma(n, 0.1, epsilon=epsilon)
        level = private_conformal_level(
            n, 0.1, epsilon=epsilon, n_bins=n_bins, gamma=gamma
        )
        assert plan["n_bins"] == n_bins
        assert plan["gamma"] == gamma
        assert plan["level"] == level
        assert plan["feasible"]

    def test_reference_values(self):
        # Spec private_prediction_sets.md, Alg. E: deterministic m* and q~.
        for (n, epsilon), (m, level) in {
            (1000, 1.0): (120, 0.9247),
            (1000, 10.0): (449, 0.9040),
            (5000, 8.0): (790, 0.9011),
        }.items():
            plan = dp_central(epsilon=epsilon).plan([n], 0.1)
            assert plan["n_bins"] == m
            assert plan["level"] == pytest.approx(level, abs=5e-5)

    def test_sizes_only_matter_through_their_total(self):
        cal = dp_central(epsilon=2.0)
        assert cal.plan([300, 700], 0.1) == cal.plan([1000], 0.1)

    @pytest.mark.parametrize(
        "alpha, epsilon, min_n",
        # Spec table of the smallest n with q~ < 1 (m = 100, gamma*).
        [(0.1, 1.0, 213), (0.1, 10.0, 31), (0.05, 2.0, 240), (0.2, 0.5, 190)],
    )
    def test_smallest_feasible_n(self, alpha, epsilon, min_n):
        cal = dp_central(epsilon=epsilon, n_bins=100)
        assert not cal.plan([min_n - 1], alpha)["feasible"]
        assert cal.plan([min_n], alpha)["feasible"]
        assert cal.plan([min_n - 1], alpha)["min_n"] == min_n

    def test_alpha_above_half_is_rejected(self):
        with pytest.raises(ValueError, match="alpha must be in"):
            dp_central().plan([1000], 0.6)


class TestQQPlan:
    # Spec fedcp_qq.md section 7: m = 5, n = 200, B = 100, alpha = 0.1.
    @pytest.mark.parametrize(
        "epsilon, gamma, rank, k, correction, level, score",
        [
            (10.0, 0.02, 179, 4, 3, 0.91, 0.91622),
            (5.0, 0.02, 179, 4, 5, 0.92, 0.92567),
            (1.0, 0.06, 177, 5, 23, 1.0, 1000 / 1001),
        ],
    )
    def test_paper_setting(self, epsilon, gamma, rank, k, correction, level, score):
        plan = dp_qq(epsilon=epsilon).plan([200] * 5, 0.1)
        assert plan["feasible"]
        assert plan["gamma"] == gamma
        assert plan["local_ranks"].tolist() == [rank] * 5
        assert (plan["k"], plan["correction"]) == (k, correction)
        np.testing.assert_allclose(plan["levels"], level)
        assert plan["score"] == pytest.approx(score, abs=5e-6)
        assert plan["score"] == pytest.approx(qq_coverage(5, 200, rank + correction, k))

    def test_gamma_minimises_the_score_over_the_grid(self):
        plan = dp_qq(epsilon=10.0).plan([200] * 5, 0.1)
        for g in (0.01, 0.05, 0.3, 0.9):
            other = dp_qq(epsilon=10.0, gamma=g).plan([200] * 5, 0.1)
            if other["feasible"]:
                assert other["score"] >= plan["score"] - 1e-10

    def test_coverage_lower_bound_is_at_least_target(self):
        for epsilon in (1.0, 5.0, 10.0):
            plan = dp_qq(epsilon=epsilon).plan([200] * 5, 0.1)
            assert plan["coverage_lower"] >= 0.9 - 1e-10
            assert plan["coverage_lower"] <= plan["score"]

    def test_level_is_at_least_one_half(self):
        plan = dp_qq(epsilon=50.0, n_bins=3).plan([6, 6], 0.5)
        assert plan["feasible"]
        assert (plan["levels"] >= 0.5).all()

    def test_infeasible(self):
        plan = dp_qq(epsilon=1.0).plan([50, 50], 0.1)
        assert not plan["feasible"]
        assert "no gamma is feasible" in plan["reason"]

    def test_auto_bins_do_not_read_data_and_pick_from_the_grid(self):
        cal = dp_qq(epsilon=10.0, n_bins="auto")
        plan = cal.plan([200] * 5, 0.1)
        assert plan["n_bins"] in _dp_plan.DPQQ_BINS_GRID
        rng = np.random.default_rng(0)
        ids = np.repeat(np.arange(5), 200)
        a = cal.fit(rng.uniform(size=1000), ids, alpha=0.1, random_state=0)
        b = cal.fit(rng.beta(5, 1, size=1000), ids, alpha=0.1, random_state=0)
        assert a.calibration_info_["n_bins"] == b.calibration_info_["n_bins"]

    def test_auto_bins_fall_back_to_coarse_grids(self):
        # 100 bins are infeasible for clients of 20 at epsilon = 5.
        assert not dp_qq(epsilon=5.0, n_bins=100).plan([20] * 50, 0.1)["feasible"]
        plan = dp_qq(epsilon=5.0, n_bins="auto").plan([20] * 50, 0.1)
        assert plan["feasible"]
        assert plan["n_bins"] < 100

    def test_unequal_sizes(self):
        sizes = [40, 50, 60]
        plan = dp_qq(epsilon=20.0).plan(sizes, 0.1)
        assert plan["feasible"]
        ranks = plan["local_ranks"] + plan["correction"]
        np.testing.assert_allclose(plan["levels"], np.maximum(ranks / sizes, 0.5))
        assert plan["coverage_lower"] >= 0.9 - 1e-10

    def test_small_client_sends_inf_without_reading(self):
        # A client whose corrected rank exceeds its size sends +inf.
        sizes = [2, 40, 40, 40]
        plan = dp_qq(epsilon=50.0).plan(sizes, 0.1)
        assert plan["feasible"]
        assert np.isinf(plan["levels"][0])
        msg = dp_qq(epsilon=50.0).client_step(
            np.full(2, 0.3), alpha=0.1, n_per_client=sizes
        )
        assert msg == {"n": 2, "quantile": math.inf}


# --------------------------------------------------------------------------
# Exact privacy of the releases


def _all_datasets(values, n):
    return itertools.combinations_with_replacement(range(len(values)), n)


def _replace_one(data, n_values):
    for i, old in enumerate(data):
        for new in range(n_values):
            if new != old:
                yield tuple(sorted(data[:i] + (new,) + data[i + 1 :]))


def _log_law(law):
    with np.errstate(divide="ignore"):
        return np.log(law.probabilities)


def _max_ratio_central(cal, alpha, n, values):
    cache = {}

    def log_p(data):
        if data not in cache:
            scores = [values[i] for i in data]
            cache[data] = _log_law(cal.threshold_probabilities(scores, alpha=alpha))
        return cache[data]

    worst = 0.0
    for data in _all_datasets(values, n):
        for other in _replace_one(data, len(values)):
            worst = max(worst, float(np.abs(log_p(data) - log_p(other)).max()))
    return worst


def _max_ratio_qq(cal, alpha, n, values, others):
    """Client 0 ranges over all data sets and neighbours; client 1 is fixed."""
    ids = np.repeat([0, 1], n)
    worst = 0.0
    for fixed in others:
        cache = {}

        def log_p(data, fixed=fixed, cache=cache):
            if data not in cache:
                scores = [values[i] for i in data + fixed]
                law = cal.threshold_probabilities(scores, ids, alpha=alpha)
                cache[data] = _log_law(law)
            return cache[data]

        for data in _all_datasets(values, n):
            for other in _replace_one(data, len(values)):
                worst = max(worst, float(np.abs(log_p(data) - log_p(other)).max()))
    return worst


# One value per bin of (0, 1) with 3 bins, plus one below and one above.
VALUES = (-0.5, 1 / 6, 0.5, 5 / 6, 1.5)
# Data sets (as indices into VALUES) of the fixed second client.
OTHERS = [(1,) * 6, (1, 1, 2, 2, 3, 3), (0, 3, 3, 4, 4, 4)]


def _mutant(scale):
    """The mechanism with ``epsilon`` replaced by ``epsilon * scale(level)``."""

    def probabilities(scores, level, *, epsilon, **kwargs):
        return private_quantile_probabilities(
            scores, level, epsilon=epsilon * scale(level), **kwargs
        )

    return probabilities


def _no_half(level):  # exp(-eps w / Delta_q): the 1/2 dropped
    return 2.0


def _no_min_factor(level):  # exp(-eps w / 2): min(q, 1 - q) dropped
    return 1.0 / min(level, 1.0 - level) if level < 1 else 1.0


def _uncorrected_factor(alpha):  # public-code bug: min(alpha, 1 - alpha)
    return lambda level: min(alpha, 1 - alpha) / min(level, 1 - level)


@pytest.fixture
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippedScoresWarning)
        yield


@pytest.mark.usefixtures("quiet")
class TestExactPrivacy:
    """max |log P_D(t) - log P_D'(t)| <= epsilon over all replace-one pairs."""

    @pytest.mark.parametrize(
        "n, alpha, epsilon", [(4, 0.5, 10.0), (5, 0.4, 10.0), (3, 0.5, 20.0)]
    )
    def test_dp_central(self, n, alpha, epsilon):
        cal = dp_central(epsilon=epsilon, n_bins=3)
        assert cal.plan([n], alpha)["feasible"]
        worst = _max_ratio_central(cal, alpha, n, VALUES)
        assert worst <= epsilon + 1e-9
        assert worst > 0.4 * epsilon  # the check is not vacuous

    @pytest.mark.parametrize(
        "n, alpha, epsilon", [(6, 0.5, 10.0), (4, 0.5, 20.0), (5, 0.5, 10.0)]
    )
    def test_dp_qq(self, n, alpha, epsilon):
        # Levels 2/3, 3/4 and 1 (the q = 1 limit).
        cal = dp_qq(epsilon=epsilon, n_bins=3)
        assert cal.plan([n, n], alpha)["feasible"]
        others = [o[:n] for o in OTHERS]
        worst = _max_ratio_qq(cal, alpha, n, VALUES, others)
        assert worst <= epsilon + 1e-9
        assert worst > 0.1 * epsilon

    def test_one_client_dp_qq_is_the_mechanism(self):
        cal = dp_qq(epsilon=10.0, n_bins=3)
        scores = [1 / 6, 0.5, 0.5, 5 / 6, 5 / 6, 1.5]
        plan = cal.plan([6], 0.5)
        law = cal.threshold_probabilities(scores, alpha=0.5)
        expected = private_quantile_probabilities(
            np.clip(scores, 0, 1),
            plan["levels"][0],
            epsilon=10.0,
            bounds=UNIT,
            n_bins=3,
        )
        np.testing.assert_allclose(law.probabilities, expected, rtol=1e-12)

    @pytest.mark.parametrize("scale", [_no_half, _no_min_factor])
    def test_mutants_fail_dp_central(self, monkeypatch, scale):
        monkeypatch.setattr(
            _dp_central, "private_quantile_probabilities", _mutant(scale)
        )
        cal = dp_central(epsilon=10.0, n_bins=3)
        # Correct: about 0.58 epsilon at this level; the mutant doubles it.
        assert _max_ratio_central(cal, 0.5, 4, VALUES) > 1.1 * 10.0

    def test_uncorrected_level_factor_fails_dp_central(self, monkeypatch):
        # The sensitivity factor of 1 - alpha instead of the corrected q~.
        mutant = _mutant(_uncorrected_factor(0.5))
        monkeypatch.setattr(_dp_central, "private_quantile_probabilities", mutant)
        cal = dp_central(epsilon=10.0, n_bins=3)
        assert cal.plan([4], 0.5)["level"] > 0.85
        assert _max_ratio_central(cal, 0.5, 4, VALUES) > 1.2 * 10.0

    @pytest.mark.parametrize("scale", [_no_half, _no_min_factor])
    def test_mutants_fail_dp_qq(self, monkeypatch, scale):
        monkeypatch.setattr(_dp_laws, "private_quantile_probabilities", _mutant(scale))
        cal = dp_qq(epsilon=10.0, n_bins=3)
        others = [OTHERS[0]]
        assert _max_ratio_qq(cal, 0.5, 6, VALUES, others) > 1.2 * 10.0


# --------------------------------------------------------------------------
# Sampling, reproducibility, messages


class TestSampling:
    def _draws(self, cal, scores, ids, alpha, reps, seed):
        rng = np.random.RandomState(seed)
        return np.array(
            [
                cal.fit(scores, ids, alpha=alpha, random_state=rng).threshold_
                for _ in range(reps)
            ]
        )

    @pytest.mark.parametrize("which", ["central", "qq"])
    def test_draws_follow_the_exact_law(self, which, seed):
        rng = np.random.default_rng(seed)
        if which == "central":
            cal, ids = dp_central(epsilon=2.0, n_bins=8), None
            scores = rng.uniform(size=400)
        else:
            cal, ids = dp_qq(epsilon=5.0, n_bins=8), np.repeat([0, 1, 2], 100)
            scores = rng.uniform(size=300)
        law = cal.threshold_probabilities(scores, ids, alpha=0.2)
        draws = self._draws(cal, scores, ids, 0.2, 400, seed)
        observed = np.array([np.sum(draws == v) for v in law.values])
        assert observed.sum() == draws.shape[0]  # every draw is a candidate
        keep = law.probabilities * draws.shape[0] >= 5
        expected = law.probabilities[keep] * draws.shape[0]
        rest = draws.shape[0] - expected.sum()
        obs = np.r_[observed[keep], draws.shape[0] - observed[keep].sum()]
        exp = np.r_[expected, rest]
        mask = exp > 0
        # p-value threshold 7e-6: the false-alarm rate of a 4.5 SE z-test.
        assert stats.chisquare(obs[mask], exp[mask]).pvalue > 7e-6

    def test_reproducible_and_order_invariant(self, seed):
        rng = np.random.default_rng(seed)
        scores = rng.uniform(size=1000)
        ids = np.repeat(["a", "b", "c", "d", "e"], 200)
        perm = rng.permutation(1000)
        for cal in (dp_central(epsilon=10.0), dp_qq(epsilon=10.0)):
            a = cal.fit(scores, ids, alpha=0.1, random_state=seed).threshold_
            b = cal.fit(scores[perm], ids[perm], alpha=0.1, random_state=seed)
            assert a == b.threshold_

    def test_secure_randomness(self):
        rng = np.random.default_rng(0)
        scores, ids = rng.uniform(size=1000), np.repeat(np.arange(5), 200)
        for cal in (dp_central(epsilon=10.0, n_bins=100), dp_qq(epsilon=10.0)):
            fitted = cal.fit(scores, ids, alpha=0.1, random_state="secure")
            edges = np.linspace(0, 1, 101)
            assert fitted.threshold_ in np.r_[edges[1:-1], np.inf]
        msg = dp_qq(epsilon=10.0).client_step(
            scores[:200], alpha=0.1, n_per_client=[200] * 5, random_state="secure"
        )
        assert msg["n"] == 200 and msg["quantile"] in np.r_[edges[1:-1], np.inf]

    def test_server_step_matches_fit(self):
        rng = np.random.default_rng(1)
        scores, ids = rng.uniform(size=1000), np.repeat(np.arange(5), 200)
        cal = dp_qq(epsilon=10.0).fit(scores, ids, alpha=0.1, random_state=0)
        msgs = [
            {"n": int(n), "quantile": float(q)}
            for n, q in zip(cal.messages_["n"], cal.messages_["quantile"], strict=True)
        ]
        sizes = cal.n_per_client_
        assert cal.server_step(msgs, alpha=0.1, n_per_client=sizes) == cal.threshold_


class TestReleasedState:
    def test_dp_central_keeps_no_scores(self):
        rng = np.random.default_rng(0)
        scores = rng.uniform(size=1000)
        cal = dp_central(epsilon=10.0).fit(scores, alpha=0.1, random_state=0)
        assert sorted(cal.messages_) == ["client", "n"]
        assert cal.epsilon_spent_ == 10.0
        _assert_no_scores(cal, scores)

    def test_dp_qq_keeps_only_messages(self):
        rng = np.random.default_rng(0)
        scores, ids = rng.uniform(size=1000), np.repeat(np.arange(5), 200)
        cal = dp_qq(epsilon=10.0).fit(scores, ids, alpha=0.1, random_state=0)
        assert sorted(cal.messages_) == ["client", "n", "quantile"]
        edges = np.linspace(0, 1, 101)
        assert np.isin(cal.messages_["quantile"], np.r_[edges[1:-1], np.inf]).all()
        assert cal.epsilon_spent_ == 10.0
        _assert_no_scores(cal, scores)

    def test_trivial_spends_nothing_and_warns(self):
        rng = np.random.default_rng(0)
        with pytest.warns(SmallCalibrationSetWarning, match="N >= 213"):
            cal = dp_central(epsilon=1.0, n_bins=100).fit(
                rng.uniform(size=150), alpha=0.1, random_state=0
            )
        assert cal.threshold_ == math.inf
        assert cal.epsilon_spent_ == 0.0
        with pytest.warns(InfiniteThresholdWarning, match="no gamma is feasible"):
            cal = dp_qq(epsilon=1.0).fit(
                rng.uniform(size=100), np.repeat([0, 1], 50), alpha=0.1
            )
        assert cal.threshold_ == math.inf
        assert cal.epsilon_spent_ == 0.0
        assert cal.messages_["quantile"].tolist() == [math.inf, math.inf]

    def test_trivial_output_does_not_depend_on_scores(self):
        for values in (np.zeros(150), np.ones(150), np.linspace(0, 1, 150)):
            with pytest.warns(InfiniteThresholdWarning):
                cal = dp_central(epsilon=1.0).fit(values, alpha=0.1, random_state=0)
            assert cal.threshold_ == math.inf

    def test_coverage_bounds(self):
        assert dp_central(epsilon=1.0).coverage_bounds([100], 0.1) == (1.0, 1.0)
        lower, upper = dp_central(epsilon=1.0).coverage_bounds([1000], 0.1)
        assert lower == pytest.approx(0.9) and np.isnan(upper)
        lower, _ = dp_qq(epsilon=10.0).coverage_bounds([200] * 5, 0.1)
        assert lower == pytest.approx((1 - 0.02 * 0.1) * qq_coverage(5, 200, 179, 4))


def _assert_no_scores(cal, scores):
    """No fitted attribute holds an array with the raw scores."""
    for value in list(vars(cal).values()) + list(cal.messages_.values()):
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert not np.isin(scores, value).any()


# --------------------------------------------------------------------------
# Clipping and the top bin


class TestBounds:
    def test_clipping_warns_with_the_count(self):
        scores = np.r_[np.linspace(0, 1, 995), [-1.0, 2.0, 3.0, 4.0, 5.0]]
        with pytest.warns(ClippedScoresWarning, match=r"5 of 1000 .*1 below, 4 above"):
            dp_central(epsilon=10.0).fit(scores, alpha=0.1, random_state=0)

    def test_scores_above_the_bound_keep_coverage(self):
        # Half the scores exceed the bound: the q~ quantile sits in the top
        # bin, whose release is +inf (not the bound, which would not cover).
        scores = np.r_[np.full(500, 0.5), np.full(500, 7.0)]
        for cal in (dp_central(epsilon=10.0), dp_qq(epsilon=10.0)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cal.fit(scores, np.repeat(np.arange(5), 200), alpha=0.1, random_state=0)
            assert cal.threshold_ == math.inf

    def test_shifted_bounds(self):
        rng = np.random.default_rng(0)
        scores = rng.uniform(-3, 3, size=2000)
        cal = PrivateCentralCalibrator(
            epsilon=10.0, score_bounds=(-3, 3), n_bins=60, rule="paper"
        )
        cal.fit(scores, alpha=0.1, random_state=0)
        assert cal.threshold_ in np.linspace(-3, 3, 61)[1:-1]


# --------------------------------------------------------------------------
# Large epsilon approaches the non-private answers


class TestLargeEpsilon:
    def test_dp_central_approaches_split_conformal(self, seed):
        rng = np.random.default_rng(seed)
        scores = rng.uniform(size=2000)
        cal = dp_central(epsilon=1e6, n_bins=100_000)
        private = cal.fit(scores, alpha=0.1, random_state=seed).threshold_
        central = CentralCalibrator().fit(scores, alpha=0.1).threshold_
        assert abs(private - central) < 3e-3  # two ranks and a bin

    def test_dp_qq_approaches_qq(self, seed):
        rng = np.random.default_rng(seed)
        ids = np.repeat(np.arange(5), 400)
        scores = rng.uniform(size=2000)
        cal = dp_qq(epsilon=1e6, n_bins=100_000)
        cal.fit(scores, ids, alpha=0.1, random_state=seed)
        plan = cal.calibration_info_
        assert plan["correction"] == 1  # ceil of a vanishing correction
        qq = QuantileOfQuantilesCalibrator(local_rank=int(plan["local_ranks"][0]))
        ref = qq.fit(scores, ids, alpha=0.1).threshold_
        assert abs(cal.threshold_ - ref) < 0.02


# --------------------------------------------------------------------------
# Registry and bad input


class TestRegistryAndErrors:
    def test_registry(self):
        assert CALIBRATORS["dp-central"] is PrivateCentralCalibrator
        assert CALIBRATORS["dp-qq"] is PrivateQuantileOfQuantilesCalibrator
        assert isinstance(get_calibrator("dp-qq"), PrivateQuantileOfQuantilesCalibrator)

    @pytest.mark.parametrize(
        "cls", [PrivateCentralCalibrator, PrivateQuantileOfQuantilesCalibrator]
    )
    @pytest.mark.parametrize(
        "params, match",
        [
            ({"epsilon": 0.0}, "epsilon"),
            ({"epsilon": -1.0}, "epsilon"),
            ({"epsilon": np.inf}, "epsilon"),
            ({"epsilon": np.nan}, "epsilon"),
            ({"n_bins": 1}, "n_bins"),
            ({"gamma": 0.0}, "gamma"),
            ({"gamma": 1.0}, "gamma"),
        ],
    )
    def test_bad_parameters(self, cls, params, match):
        cal = cls(score_bounds=UNIT, **params)
        with pytest.raises(InvalidParameterError, match=match):
            cal.fit(np.linspace(0, 1, 500), alpha=0.1)

    @pytest.mark.parametrize(
        "cls", [PrivateCentralCalibrator, PrivateQuantileOfQuantilesCalibrator]
    )
    @pytest.mark.parametrize(
        "bounds, error, match",
        [
            (None, ValueError, "needs score_bounds"),
            ((1.0, 0.0), ValueError, "score_bounds must be increasing"),
            ((0.0, np.inf), ValueError, "score_bounds must be finite"),
            ((0.0, np.nan), ValueError, "score_bounds must be finite"),
            ((0.0,), TypeError, "score_bounds must be a pair"),
        ],
    )
    def test_bad_bounds(self, cls, bounds, error, match):
        with pytest.raises(error, match=match):
            cls(score_bounds=bounds).fit(np.linspace(0, 1, 500), alpha=0.1)

    def test_client_of_unknown_size(self):
        with pytest.raises(ValueError, match="no client of that size"):
            dp_qq(epsilon=10.0).client_step(
                np.zeros(7), alpha=0.1, n_per_client=[200] * 5
            )

    def test_server_sizes_mismatch(self):
        with pytest.raises(ValueError, match="announced 200 rows"):
            dp_qq(epsilon=10.0).server_step(
                [{"n": 3, "quantile": 0.5}], alpha=0.1, n_per_client=[200]
            )
