"""LDP-L and LDP-S calibrators: reference values, exact algebra, protocol, errors.

Spec: ldp_conformal.md, sections 6.1 (unit) and 6.2 (privacy). The Monte
Carlo coverage checks live in tests/statistical/test_ldp_mc.py.
"""

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from skfedcp.calibrators import (
    CALIBRATORS,
    LDPLabelCalibrator,
    LDPLabelStarCalibrator,
    LDPScoreCalibrator,
    LDPScoreStarCalibrator,
    get_calibrator,
    ldp_correction,
    ldp_sample_size,
)
from skfedcp.calibrators._ldp._common import _bisection_update
from skfedcp.calibrators._ldp._label_search import _debiased_coverage
from skfedcp.exceptions import (
    InfiniteThresholdWarning,
    InvalidMessageError,
    VacuousGuaranteeWarning,
)
from skfedcp.privacy import (
    binary_randomized_response_probabilities,
    k_ary_randomized_response,
    k_ary_randomized_response_probabilities,
)
from skfedcp.utils._random import spawn_random_states

# Monte Carlo tolerance: 4.5 standard errors, a two-sided false-alarm rate of
# about 7e-6 per comparison under the normal approximation.
Z = 4.5
BOUNDS = (0.0, 1.0)


def _dirichlet_data(n, k, seed, concentration=0.2):
    """Calibrated synthetic model: p ~ Dirichlet(c 1_k), y ~ Cat(p)."""
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(k, concentration), size=n)
    labels = (proba.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return proba, labels


def _lac(proba):
    return 1.0 - proba


def _run_protocol(cal, scores, sizes, *, alpha, seed, shared=False):
    """Drive server_init / client_respond / server_update by hand.

    ``shared=False``: a deployment, client ``j`` draws from stream ``j + 1``
    spawned from the seed; ``shared=True``: every client draws from stream 1,
    as the vectorised simulation's users do. Returns the final state and the
    transcript.
    """
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    local = [scores[s : s + n] for s, n in zip(starts, sizes, strict=True)]
    streams = spawn_random_states(seed, len(sizes) + 1)  # stream 0: the server's
    # One RandomState per client, kept across rounds (as a node keeps its own).
    client_rngs = [streams[1]] * len(sizes) if shared else list(streams[1:])
    state = cal.server_init(sizes, alpha=alpha, random_state=streams[0])
    rounds = []
    while not state["done"]:
        messages = [
            cal.client_respond(local[j], q, random_state=client_rngs[j])
            if len(q["users"])
            else None
            for j, q in enumerate(state["queries"])
        ]
        rounds.append(messages)
        state = cal.server_update(state, messages)
    return state, rounds


class TestAnalysis:
    def test_spec_reference_values(self):
        # Spec 6.1.3 (rtol 1e-3).
        cases = [
            ((23640, 8, 4.0, 1e-3), 0.01720),
            ((10832, 4, 4.0, 1e-3), 0.02249),
            ((2452, 11, 4.0, 1e-3), 0.05801),
            ((6491, 11, 4.0, 1e-3), 0.03565),
            ((2392, 11, 4.0, 1e-3), 0.05873),
            ((5000, 10, 4.0, 0.1), 0.02637),
            ((1000, 2, 1.0, 0.05), 0.15577),
        ]
        for args, expected in cases:
            assert ldp_correction(*args).label == pytest.approx(expected, rel=1e-3)
        # t_S(20000, 4, 0.1, T=10) = 0.03775 and Delta_S = 2 t_S = 0.07551.
        corr = ldp_correction(20000, 10, 4.0, 0.1, n_groups=10, search="paper")
        assert corr.score == pytest.approx(0.07551, rel=1e-3)
        assert corr.score / 2 == pytest.approx(0.03775, rel=1e-3)

    def test_beta_and_h(self):
        # beta(4, 8) = 0.12987, h = 0.77011; beta(1, 2) = 0.53788, h = 0.30049.
        for (eps, k), (beta, h) in {
            (4.0, 8): (0.12987, 0.77011),
            (1.0, 2): (0.53788, 0.30049),
        }.items():
            cal = LDPLabelCalibrator(epsilon=eps)
            plan = cal.plan([1000], 0.1, n_classes=k)
            assert plan["beta"] == pytest.approx(beta, rel=1e-3)
            assert plan["h"] == pytest.approx(h, rel=1e-3)
            assert plan["beta"] == pytest.approx(k / (k - 1 + math.exp(eps)), 1e-12)

    @pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
    def test_h_binary(self, eps):
        # Spec 6.1.4: for k = 2, h = (e^eps - 1)/(e^eps + 3).
        plan = LDPLabelCalibrator(epsilon=eps).plan([100], 0.1, n_classes=2)
        h = (math.exp(eps) - 1) / (math.exp(eps) + 3)
        assert plan["h"] == pytest.approx(h, rel=1e-12)

    def test_sample_sizes(self):
        # Spec 6.1.5: n_L = 1391.1 and n_S(T=10) = 45608.8 for Delta = 0.05,
        # k = 10, eps = 4, delta = 0.1. Sizes are integers: the smallest n
        # reaching the target. Delta_S depends on floor(n / T), so the LDP-S
        # size is T * ceil(4560.88) = 45610 (ceil(45608.8) = 45609 gives
        # floor(45609 / 10) = 4560 users per group, just too few).
        sizes = ldp_sample_size(0.05, 10, 4.0, delta=0.1, search="paper")
        assert sizes == (1392, 45610)
        assert ldp_correction(1392, 10, 4.0, 0.1).label <= 0.05
        assert ldp_correction(1391, 10, 4.0, 0.1).label > 0.05
        assert ldp_correction(45610, 10, 4.0, 0.1, search="paper").score <= 0.05
        assert ldp_correction(45609, 10, 4.0, 0.1, search="paper").score > 0.05
        # Spec 2.6: about 782 (L*) and 21.3k (S*) users for k=10, eps=4.
        sizes = ldp_sample_size(0.1, 10, 4.0, delta=1e-3, search="paper")
        assert sizes.label == 782
        assert 21_000 < sizes.score < 21_500

    def test_sample_size_is_minimal_on_a_grid(self):
        corr = np.array([0.01, 0.03, 0.1, 0.3])
        for k, eps, T in [(2, 0.5, 5), (10, 4.0, 10), (100, 8.0, 20)]:
            n_l, n_s = ldp_sample_size(corr, k, eps, delta=0.01, n_groups=T)
            assert (ldp_correction(n_l, k, eps, 0.01, T).label <= corr).all()
            assert (ldp_correction(n_s, k, eps, 0.01, T).score <= corr).all()
            prev = np.maximum(n_l - 1, 1)
            assert (
                (ldp_correction(prev, k, eps, 0.01, T).label > corr) | (n_l == 1)
            ).all()
            assert (n_s % T == 0).all()
            assert (ldp_correction(n_s - 1, k, eps, 0.01, T).score > corr).all()

    def test_vectorised_and_scalar(self):
        corr = ldp_correction([1000, 4000], [10, 10], 4.0)
        np.testing.assert_allclose(corr.label[1], corr.label[0] / 2, rtol=1e-12)
        assert isinstance(ldp_correction(1000, 10, 4.0).label, float)
        # n < T: no user per group, infinite LDP-S correction.
        assert ldp_correction(5, 10, 4.0).score == np.inf

    def test_ratio_is_independent_of_n(self):
        # Spec A12: with n a multiple of T, Delta_S / Delta_L depends only on
        # (k, eps, T, delta), and equals 2 c h sqrt(T ln(2T/delta)/ln(4/delta)).
        n = np.array([1000, 10_000, 100_000, 1_000_000])
        for k, eps in [(10, 2.0), (100, 4.0)]:
            corr = ldp_correction(n, k, eps, 1e-3, 10, search="paper")
            ratio = corr.score / corr.label
            np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)
            beta = k / (k - 1 + math.exp(eps))
            h = (1 - beta) / (1 + beta)
            c = (math.exp(eps) + 1) / (math.exp(eps) - 1)
            theory = 2 * c * h * math.sqrt(10 * math.log(2e4) / math.log(4e3))
            assert ratio[0] == pytest.approx(theory, rel=1e-12)

    def test_crossover_documented(self):
        # ldp_correction's Notes: at T=10, delta=1e-3 LDP-S wins for k > 25
        # at eps=2 and k > 165 at eps=4.
        for eps, k_star in [(2.0, 25), (4.0, 165)]:
            at = ldp_correction(100_000, [k_star, k_star + 1], eps, search="paper")
            assert at.score[0] > at.label[0] and at.score[1] < at.label[1]

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"n": 0}, "n must be"),
            ({"n_classes": 1}, "n_classes"),
            ({"epsilon": 0.0}, "epsilon"),
            ({"epsilon": -1.0}, "epsilon"),
            ({"delta": 0.0}, "delta"),
            ({"delta": 1.0}, "delta"),
            ({"n_groups": 0}, "n_groups"),
            ({"n": 10.5}, "n must hold"),
        ],
    )
    def test_bad_input(self, kwargs, match):
        args = {"n": 1000, "n_classes": 10, "epsilon": 1.0, "delta": 0.1}
        args.update(kwargs)
        with pytest.raises(ValueError, match=match):
            ldp_correction(**args)

    def test_bad_sample_size_input(self):
        with pytest.raises(ValueError, match="correction"):
            ldp_sample_size(0.0, 10, 1.0)
        with pytest.raises(TypeError, match="n_classes"):
            ldp_sample_size(0.1, "ten", 1.0)


class TestPrivacyChannels:
    """Spec 6.2.1: the mechanisms the calibrators call have ratio exactly e^eps."""

    @pytest.mark.parametrize("k", [2, 3, 10, 100])
    @pytest.mark.parametrize("eps", [0.1, 1.0, 4.0, 8.0])
    def test_krr_ratio_and_beta(self, k, eps):
        channel = k_ary_randomized_response_probabilities(n_classes=k, epsilon=eps)
        ratio = (channel[:, None, :] / channel[None, :, :]).max()
        assert ratio == pytest.approx(math.exp(eps), rel=1e-12)
        # The calibrator de-biases with the channel's own resampling rate.
        beta = LDPLabelCalibrator(epsilon=eps).plan([10], 0.1, n_classes=k)["beta"]
        np.testing.assert_allclose(channel[0, 1] * k, beta, rtol=1e-12)
        np.testing.assert_allclose(channel[0, 0], 1 - beta + beta / k, rtol=1e-12)

    @pytest.mark.parametrize("eps", [0.1, 1.0, 4.0, 8.0])
    def test_binary_rr_ratio_and_debiasing(self, eps):
        channel = binary_randomized_response_probabilities(epsilon=eps)
        ratio = (channel[:, None, :] / channel[None, :, :]).max()
        assert ratio == pytest.approx(math.exp(eps), rel=1e-12)
        # Z = c * mean(reports) - 1/(e^eps - 1) inverts E[report] exactly.
        c = LDPScoreCalibrator(epsilon=eps, score_bounds=BOUNDS).plan([100], 0.1)["c"]
        for f in (0.0, 0.3, 1.0):
            mean_report = f * channel[1, 1] + (1 - f) * channel[0, 1]
            assert c * mean_report - 1 / math.expm1(eps) == pytest.approx(f, abs=1e-9)

    def test_label_messages_follow_the_channel(self, seed):
        # k = 5, eps = 1: 40000 users with label 2; every noisy-label frequency
        # within 4.5 binomial SE of the channel row.
        cal = LDPLabelCalibrator(epsilon=1.0)
        n, k = 40_000, 5
        msg = cal.client_step(np.zeros((n, k)), labels=np.full(n, 2), random_state=seed)
        freq = np.bincount(msg["noisy_labels"], minlength=k) / n
        row = k_ary_randomized_response_probabilities(n_classes=k, epsilon=1.0)[2]
        np.testing.assert_allclose(row, [0.149, 0.149, 0.404, 0.149, 0.149], atol=1e-3)
        assert (np.abs(freq - row) <= Z * np.sqrt(row * (1 - row) / n)).all()


class TestBisection:
    def test_identity_cdf(self):
        # Spec 6.1.8: F(q) = q, target 0.9, band 0.05 returns 0.875 at step 3.
        lo, hi, steps = 0.0, 1.0, []
        for _ in range(20):
            q = (lo + hi) / 2
            steps.append(q)
            lo, hi, stop = _bisection_update(lo, hi, q, q, 0.9, 0.05)
            if stop:
                break
        assert steps == [0.5, 0.75, 0.875]

    def test_ldp_s_protocol_on_a_known_cdf(self):
        # Nearly noise-free answers (eps = 60 flips a bit with probability
        # e^-60): Z_j is the fraction of group j below q_j, within about 0.01
        # of q_j for equispaced scores. With n' = 2000 and delta = 0.1,
        # Delta_S = 2 sqrt(ln(200) / 4000) = 0.073 (band 0.036), so the search
        # is the identity-CDF bisection above: 0.5, 0.75, then 0.875 stops.
        n = 20_000
        scores = (np.arange(n) + 0.5) / n
        cal = LDPScoreCalibrator(
            epsilon=60.0,
            delta=0.1,
            score_bounds=BOUNDS,
            search="paper",
            axis="linear",
        )
        cal.fit(scores, alpha=0.1, random_state=0)
        np.testing.assert_allclose(cal.history_["threshold"], [0.5, 0.75, 0.875])
        assert cal.threshold_ == 0.875 and cal.stopped_early_
        assert cal.correction_ == pytest.approx(2 * math.sqrt(math.log(200) / 4000))

    def test_dyadic_and_at_most_T_rounds(self, seed):
        proba, labels = _dirichlet_data(5000, 10, seed)
        scores = _lac(proba)[np.arange(5000), labels]
        for T in (3, 10, 25):
            cal = LDPScoreCalibrator(
                epsilon=2.0,
                n_groups=T,
                score_bounds=BOUNDS,
                search="paper",
                axis="linear",
            )
            cal.fit(scores, alpha=0.1, random_state=seed)
            assert 1 <= cal.n_steps_used_ <= T
            assert cal.history_["threshold"].shape == (cal.n_steps_used_,)
            # Dyadic: q * 2^steps is an integer (+inf stands for the upper
            # bound 1, returned when the search never left it).
            q2 = min(cal.threshold_, BOUNDS[1]) * 2**cal.n_steps_used_
            assert q2 == round(q2)
            if cal.stopped_early_:
                z = cal.history_["estimate"][-1]
                assert abs(z - cal.target_coverage_) <= cal.correction_ / 2

    def test_final_upper_returns_hi(self):
        # All users below every query: Z ~ 1 > target + band each round, so hi
        # keeps moving down and "upper" returns the last query (= hi), while
        # "paper" returns it too; with every score above, "upper" returns +inf.
        # n' = 2000, delta = 0.1: Delta_S = 0.068, band 0.034.
        n = 10_000
        low = np.full(n, -1.0)
        high = np.full(n, 2.0)
        for final in ("paper", "upper"):
            cal = LDPScoreCalibrator(
                epsilon=60.0,
                delta=0.1,
                n_groups=5,
                final=final,
                score_bounds=BOUNDS,
                search="paper",
                axis="linear",
            )
            cal.fit(low, alpha=0.1, random_state=0)
            assert cal.threshold_ == 1 / 32 and not cal.stopped_early_
            cal.fit(high, alpha=0.1, random_state=0)
            if final == "paper":
                assert cal.threshold_ == 31 / 32
            else:
                assert cal.threshold_ == np.inf

    def test_ldp_l_bisection_mode(self, seed):
        proba, labels = _dirichlet_data(4000, 6, seed)
        cal = LDPLabelCalibrator(
            epsilon=3.0, delta=0.1, search="bisection", score_bounds=BOUNDS
        ).fit(_lac(proba), labels=labels, alpha=0.1, random_state=seed)
        q2 = cal.threshold_ * 2**cal.n_steps_used_
        assert q2 == round(q2) and 1 <= cal.n_steps_used_ <= 20
        assert cal.calibration_info_["coverage_lower"] == pytest.approx(
            0.9 - 1.5 * cal.correction_
        )


class TestLabelAlgebra:
    def test_debiased_cdf_formula(self, seed):
        # Spec 6.1.9: Fc_hat = (Fn_hat - beta * Fr_hat) / (1 - beta) pointwise.
        rng = np.random.default_rng(seed)
        n, k, beta = 300, 4, 0.3
        M = rng.random((n, k))
        noisy = rng.integers(0, k, n)
        q = np.linspace(-0.1, 1.1, 57)
        fn = (M[np.arange(n), noisy][:, None] <= q).mean(axis=0)
        fr = (M.ravel()[:, None] <= q).mean(axis=0)
        got = _debiased_coverage(
            np.sort(M, axis=None), np.sort(M[np.arange(n), noisy]), q, beta, k
        )
        np.testing.assert_allclose(got, (fn - beta * fr) / (1 - beta), atol=1e-12)

    @pytest.mark.filterwarnings("ignore::skfedcp.exceptions.VacuousGuaranteeWarning")
    def test_exact_search_is_brute_force_min_even_if_not_monotone(self):
        # Crafted so that Fc_hat crosses the target, falls back below it and
        # crosses again: the exact search must return the first crossing.
        eps = math.log(3.0)  # k = 2: beta = 2 / (1 + e^eps) = 0.5
        M = np.array([[0.1, 0.9], [0.2, 0.3], [0.4, 0.35], [0.6, 0.5], [0.7, 0.8]])
        noisy = np.array([0, 0, 0, 1, 0])
        cal = LDPLabelCalibrator(epsilon=eps, delta=0.5)
        msg = {"n": 5, "scores": M, "noisy_labels": noisy}
        beta = 0.5
        cand = np.unique(M)
        fn = np.array([(M[np.arange(5), noisy] <= c).mean() for c in cand])
        fr = np.array([(M <= c).mean() for c in cand])
        fc = (fn - beta * fr) / (1 - beta)
        assert (np.diff(fc) < 0).any()  # really non-monotone
        for alpha in (0.2, 0.5, 0.7):
            expected = cand[np.flatnonzero(fc >= 1 - alpha)[0]]
            assert cal.server_step([msg], alpha=alpha) == expected

    def test_noise_free_limit_is_the_empirical_quantile(self, seed):
        # eps = 60: beta ~ 1e-25, Fc_hat is the clean empirical CDF, and the
        # exact search returns its ceil(n (1 - alpha))-th smallest score.
        n = 1001
        proba, labels = _dirichlet_data(n, 5, seed)
        scores = _lac(proba)
        cal = LDPLabelCalibrator(epsilon=60.0).fit(
            scores, labels=labels, alpha=0.1, random_state=seed
        )
        true = np.sort(scores[np.arange(n), labels])
        assert cal.threshold_ == true[math.ceil(n * 0.9) - 1]

    def test_label_isolation(self, seed):
        # Spec 6.2.5: the server sees only (scores, noisy labels). The messages
        # carry nothing else, and replaying them without the true labels gives
        # the fitted threshold; changing the true labels while keeping the
        # noisy ones cannot change it.
        proba, labels = _dirichlet_data(500, 5, seed)
        cal = LDPLabelCalibrator(epsilon=2.0)
        fitted = clone(cal).fit(
            _lac(proba), labels=labels, alpha=0.1, random_state=seed
        )
        assert set(fitted.messages_) == {"client", "n", "scores", "noisy_labels"}
        noisy = fitted.messages_["noisy_labels"][0]
        replay = {"n": 500, "scores": _lac(proba), "noisy_labels": noisy}
        assert cal.server_step([replay], alpha=0.1) == fitted.threshold_
        msg = cal.client_step(_lac(proba), labels=labels, random_state=seed)
        assert set(msg) == {"n", "scores", "noisy_labels"}


class TestLabelCalibrator:
    def test_simulation_equals_protocol_across_clients(self, seed):
        proba, labels = _dirichlet_data(900, 4, seed)
        ids = np.random.default_rng(seed).integers(0, 5, 900)
        cal = LDPLabelCalibrator(epsilon=2.0, delta=0.05)
        fitted = clone(cal).fit(
            _lac(proba), ids, labels=labels, alpha=0.1, random_state=seed
        )
        # The vectorised simulation draws every user's k-RR noise from one
        # stream (stream 1 spawned from the seed; stream 0 is the server's),
        # users in the order of the sorted clients.
        order = np.argsort(ids, kind="stable")
        noisy = k_ary_randomized_response(
            labels[order],
            n_classes=4,
            epsilon=2.0,
            random_state=spawn_random_states(seed, 2)[1],
        )
        np.testing.assert_array_equal(
            np.concatenate(list(fitted.messages_["noisy_labels"])), noisy
        )
        # The server side is the one a deployment runs: the same messages,
        # sent one per client, give the same threshold in any order.
        msgs = [
            {
                "n": int((ids == c).sum()),
                "scores": _lac(proba)[ids == c],
                "noisy_labels": fitted.messages_["noisy_labels"][c],
            }
            for c in range(5)
        ]
        assert cal.server_step(msgs[::-1], alpha=0.1) == fitted.threshold_
        server = clone(cal).fit_from_messages(
            msgs, alpha=0.1, n_per_client=np.bincount(ids), random_state=seed
        )
        assert server.threshold_ == fitted.threshold_
        np.testing.assert_array_equal(fitted.n_per_client_, np.bincount(ids))

    def test_deployment_draws_per_client_streams(self, seed):
        # In a deployment each client privatises with its own stream; with a
        # single client the simulation's one users' stream is that stream.
        proba, labels = _dirichlet_data(300, 3, seed)
        cal = LDPLabelCalibrator(epsilon=1.0)
        fitted = clone(cal).fit(
            _lac(proba), labels=labels, alpha=0.1, random_state=seed
        )
        msg = cal.client_step(
            _lac(proba), labels=labels, random_state=spawn_random_states(seed, 2)[1]
        )
        np.testing.assert_array_equal(
            msg["noisy_labels"], fitted.messages_["noisy_labels"][0]
        )

    def test_clients_only_group_users(self, seed):
        # Without noise the server pools all users: the partition is irrelevant.
        proba, labels = _dirichlet_data(600, 3, seed)
        ids = np.random.default_rng(seed).integers(0, 7, 600)
        cal = LDPLabelCalibrator(epsilon=60.0)
        a = cal.fit(_lac(proba), labels=labels, alpha=0.1, random_state=0)
        b = clone(cal).fit(_lac(proba), ids, labels=labels, alpha=0.1, random_state=1)
        assert a.threshold_ == b.threshold_ and b.n_clients_ == len(np.unique(ids))

    def test_fitted_attributes(self):
        proba, labels = _dirichlet_data(23640, 8, 0)
        cal = LDPLabelCalibrator(epsilon=4.0).fit(
            _lac(proba), labels=labels, alpha=0.1, random_state=0
        )
        assert cal.correction_ == pytest.approx(0.01720, rel=1e-3)
        assert cal.epsilon_eff_ == pytest.approx(0.02602, rel=1e-3)  # spec 6.1.6
        assert cal.beta_ == pytest.approx(0.12987, rel=1e-3)
        assert cal.n_classes_ == 8 and cal.epsilon_spent_ == 4.0
        assert cal.target_coverage_ == 0.9
        star = LDPLabelStarCalibrator(epsilon=4.0).fit(
            _lac(proba), labels=labels, alpha=0.1, random_state=0
        )
        assert star.target_coverage_ == pytest.approx(0.9 + cal.correction_)
        assert star.threshold_ >= cal.threshold_
        lower, upper = cal.coverage_bounds([23640], 0.1)
        assert lower == pytest.approx(0.999 * (0.9 - cal.correction_))
        assert upper == pytest.approx(0.999 * (0.9 + cal.correction_) + 0.001)

    def test_full_set_rule(self):
        # Spec 6.1.11: k=10, n=1000, eps=0.1, delta=0.1: L* returns +inf.
        proba, labels = _dirichlet_data(1000, 10, 0)
        with pytest.warns(InfiniteThresholdWarning, match="every label"):
            cal = LDPLabelStarCalibrator(epsilon=0.1, delta=0.1).fit(
                _lac(proba), labels=labels, alpha=0.1, random_state=0
            )
        assert cal.threshold_ == np.inf
        assert (_lac(proba) <= cal.threshold_).all()  # every label in every set
        assert cal.coverage_bounds([1000], 0.1) == (1.0, 1.0)

    def test_vacuous_guarantee_warns(self):
        proba, labels = _dirichlet_data(200, 10, 0)
        with pytest.warns(VacuousGuaranteeWarning, match="vacuous"):
            cal = LDPLabelCalibrator(epsilon=0.1).fit(
                _lac(proba), labels=labels, alpha=0.1, random_state=0
            )
        assert np.isfinite(cal.threshold_)

    def test_binary_labels(self, seed):
        proba, labels = _dirichlet_data(3000, 2, seed, concentration=1.0)
        cal = LDPLabelCalibrator(epsilon=1.0, delta=0.1).fit(
            _lac(proba), labels=labels, alpha=0.1, random_state=seed
        )
        assert 0 <= cal.threshold_ <= 1
        assert cal.beta_ == pytest.approx(2 / (1 + math.e))

    def test_secure_randomness(self):
        proba, labels = _dirichlet_data(300, 3, 0)
        cal = LDPLabelCalibrator(epsilon=2.0).fit(
            _lac(proba), labels=labels, alpha=0.1, random_state="secure"
        )
        assert np.isfinite(cal.threshold_)


class TestScoreProtocol:
    def test_transcript(self, seed):
        # Spec 6.2.4: each user answers at most once, groups are disjoint with
        # n' users, and no user outside groups 1..j* is contacted.
        rng = np.random.default_rng(seed)
        sizes = np.array([3000, 1000, 2500, 1503])
        ids = np.repeat(np.arange(4), sizes)
        scores = rng.beta(2, 5, size=ids.size)
        cal = LDPScoreCalibrator(epsilon=1.0, n_groups=10, score_bounds=BOUNDS)
        cal.fit(scores, ids, alpha=0.1, random_state=seed)
        t = cal.transcript_
        pairs = np.stack([t["client"], t["user"]], axis=1)
        assert np.unique(pairs, axis=0).shape[0] == pairs.shape[0]
        counts = np.bincount(t["round"])[1:]
        n_prime = ids.size // 10
        assert cal.group_size_ == n_prime
        np.testing.assert_array_equal(counts, np.full(cal.n_steps_used_, n_prime))
        assert t["round"].max() == cal.n_steps_used_
        assert cal.messages_["n_reports"].sum() == n_prime * cal.n_steps_used_
        for j, c in enumerate(cal.clients_):
            assert (t["user"][t["client"] == c] < sizes[j]).all()

    def test_simulation_equals_manual_protocol(self, seed):
        rng = np.random.default_rng(seed)
        sizes = np.array([700, 1300, 1000])
        ids = np.repeat(np.arange(3), sizes)
        scores = rng.random(ids.size)
        cal = LDPScoreCalibrator(epsilon=2.0, delta=0.2, score_bounds=BOUNDS)
        fitted = clone(cal).fit(scores, ids, alpha=0.2, random_state=seed)
        # The simulation's users all draw from one stream: the same run as
        # the protocol with every client drawing from that stream in turn.
        state, _ = _run_protocol(cal, scores, sizes, alpha=0.2, seed=seed, shared=True)
        assert state["threshold"] == fitted.threshold_
        assert state["round"] == fitted.n_steps_used_
        np.testing.assert_array_equal(
            state["history"]["estimate"], fitted.history_["estimate"]
        )
        # A deployment (one stream per client) is replayed by the same
        # server path fit ends in.
        state, rounds = _run_protocol(cal, scores, sizes, alpha=0.2, seed=seed)
        server = clone(cal).fit_from_messages(
            rounds, alpha=0.2, n_per_client=sizes, random_state=seed
        )
        assert server.threshold_ == state["threshold"]
        np.testing.assert_array_equal(
            server.history_["estimate"], state["history"]["estimate"]
        )
        assert server.transcript_["user"].size == fitted.transcript_["user"].size

    def test_score_isolation(self, seed):
        # Spec 6.2.6: the server sees only bits; the fitted object holds no
        # score, and server_update works from the messages alone.
        rng = np.random.default_rng(seed)
        scores = rng.random(2000)
        cal = LDPScoreCalibrator(epsilon=1.0, score_bounds=BOUNDS)
        state = cal.server_init([2000], alpha=0.1, random_state=seed)
        msg = cal.client_respond(scores, state["queries"][0], random_state=seed)
        assert set(msg) == {"round", "users", "reports"}
        assert set(np.unique(msg["reports"])) <= {0, 1}
        cal.server_update(state, [msg])
        fitted = clone(cal).fit(scores, alpha=0.1, random_state=seed)
        for value in vars(fitted).values():
            arrays = value.values() if isinstance(value, dict) else [value]
            for arr in arrays:
                arr = np.asarray(arr)
                if arr.dtype.kind == "f" and arr.size >= 100:
                    assert not np.isin(scores, arr).any()

    def test_state_is_not_mutated(self):
        cal = LDPScoreCalibrator(epsilon=4.0, delta=0.1, score_bounds=BOUNDS)
        scores = np.linspace(0, 1, 20_000)
        state = cal.server_init([20_000], alpha=0.1, random_state=0)
        before = {k: v for k, v in state.items() if k != "queries"}
        msg = cal.client_respond(scores, state["queries"][0], random_state=0)
        new = cal.server_update(state, [msg])
        assert state["round"] == 0 and new["round"] == 1
        assert state["lo"] == before["lo"] and state["hi"] == before["hi"]
        with pytest.raises(InvalidMessageError, match="field 'round'"):
            cal.server_update(new, [msg])

    def test_server_checks_messages(self):
        cal = LDPScoreCalibrator(epsilon=4.0, delta=0.1, score_bounds=BOUNDS)
        scores = np.linspace(0, 1, 10_000)
        state = cal.server_init([10_000, 10_000], alpha=0.1, random_state=0)
        q = state["queries"]
        with pytest.raises(InvalidMessageError, match="per client"):
            cal.server_update(state, [None])
        msgs = [cal.client_respond(scores, qj, random_state=0) for qj in q]
        bad = dict(msgs[0], reports=msgs[0]["reports"] * 2 + 2)
        with pytest.raises(ValueError, match="0/1"):
            cal.server_update(state, [bad, msgs[1]])
        with pytest.raises(ValueError, match="sent no message"):
            cal.server_update(state, [None, None])
        short = dict(msgs[0], users=msgs[0]["users"][1:], reports=bad["reports"][1:])
        with pytest.raises(InvalidMessageError, match="field 'users'"):
            cal.server_update(state, [short, msgs[1]])
        done = cal.server_update(state, msgs)
        while not done["done"]:
            done = cal.server_update(
                done,
                [
                    cal.client_respond(scores, qj, random_state=0)
                    for qj in done["queries"]
                ],
            )
        with pytest.raises(ValueError, match="finished"):
            cal.server_update(done, msgs)

    def test_client_checks_query(self):
        cal = LDPScoreCalibrator(epsilon=1.0, score_bounds=BOUNDS)
        scores = np.zeros(10)
        with pytest.raises(ValueError, match="query"):
            cal.client_respond(scores, {"users": [0]})
        with pytest.raises(ValueError, match="users"):
            cal.client_respond(scores, {"round": 1, "threshold": 0.5, "users": [10]})
        with pytest.raises(ValueError, match="twice"):
            cal.client_respond(scores, {"round": 1, "threshold": 0.5, "users": [1, 1]})

    def test_double_query_is_caught_by_the_simulation(self):
        class Broken(LDPScoreCalibrator):
            def server_update(self, state, messages):
                new = super().server_update(state, messages)
                if not new["done"]:  # ask the first group again
                    from skfedcp.calibrators._ldp._score_protocol import _pose_query

                    new = _pose_query({**new, "round": 0})
                return new

        scores = np.random.default_rng(0).random(20_000)
        with pytest.raises(RuntimeError, match="queried twice"):
            Broken(epsilon=1.0, delta=0.1, score_bounds=BOUNDS).fit(
                scores, alpha=0.1, random_state=0
            )

    def test_no_single_round_api(self):
        cal = LDPScoreCalibrator()
        assert cal.interactive
        with pytest.raises(NotImplementedError, match="rounds"):
            cal.client_step([0.1], alpha=0.1)
        with pytest.raises(NotImplementedError, match="rounds"):
            cal.server_step([], alpha=0.1)


class TestScoreCalibrator:
    def test_full_set_rule(self):
        # Spec 6.1.11: S* with n=500, T=10 (eps=0.1, delta=0.1) returns +inf
        # without contacting anyone.
        scores = np.random.default_rng(0).random(500)
        with pytest.warns(InfiniteThresholdWarning, match="every label"):
            cal = LDPScoreStarCalibrator(
                epsilon=0.1, delta=0.1, score_bounds=BOUNDS
            ).fit(scores, alpha=0.1, random_state=0)
        assert cal.threshold_ == np.inf
        assert cal.n_steps_used_ == 0 and cal.transcript_["user"].size == 0
        assert cal.epsilon_spent_ == 0.0
        assert cal.coverage_bounds([500], 0.1) == (1.0, 1.0)

    def test_vacuous_guarantee_warns(self):
        scores = np.random.default_rng(0).random(500)
        with pytest.warns(VacuousGuaranteeWarning, match="vacuous"):
            LDPScoreCalibrator(epsilon=0.1, score_bounds=BOUNDS).fit(
                scores, alpha=0.1, random_state=0
            )

    def test_attributes(self, seed):
        scores = np.random.default_rng(seed).random(20000)
        cal = LDPScoreCalibrator(
            epsilon=4.0, delta=0.1, score_bounds=BOUNDS, search="paper"
        ).fit(scores, alpha=0.1, random_state=seed)
        assert cal.correction_ == pytest.approx(0.07551, rel=1e-3)
        assert cal.group_size_ == 2000
        assert cal.epsilon_eff_ == pytest.approx(4 / math.sqrt(20000))
        assert cal.epsilon_spent_ == 4.0
        assert cal.coverage_bounds([20000], 0.1).lower == pytest.approx(
            0.9 * (0.9 - cal.correction_)
        )

    def test_score_bounds_rescale(self, seed):
        # Searching [0, 10] on 10 * scores is the same search, scaled.
        scores = np.random.default_rng(seed).random(5000)
        a = LDPScoreCalibrator(epsilon=2.0, score_bounds=(0, 1)).fit(
            scores, alpha=0.1, random_state=seed
        )
        b = LDPScoreCalibrator(epsilon=2.0, score_bounds=(0, 10)).fit(
            10 * scores, alpha=0.1, random_state=seed
        )
        assert b.threshold_ == pytest.approx(10 * a.threshold_)

    def test_regression_scores(self, linear_data):
        # LDP-S works for any bounded score, e.g. absolute residuals.
        from sklearn.frozen import FrozenEstimator
        from sklearn.linear_model import LinearRegression

        from skfedcp.regression import FedConformalRegressor

        X_train, y_train, X_cal, y_cal, ids = linear_data
        model = FrozenEstimator(LinearRegression().fit(X_train, y_train))
        reg = FedConformalRegressor(
            model,
            calibrator=LDPScoreCalibrator(
                epsilon=8.0, delta=0.2, n_groups=5, score_bounds=(0, 8)
            ),
            random_state=0,
        ).fit(X_cal, y_cal, client_ids=ids)
        width = np.diff(reg.predict_interval(X_cal[:3]), axis=1)
        assert np.isfinite(width).all() and (width > 0).all()


@pytest.mark.filterwarnings("ignore::skfedcp.exceptions.VacuousGuaranteeWarning")
class TestBadInput:
    def test_label_calibrator(self):
        cal = LDPLabelCalibrator(epsilon=1.0)
        M = np.random.default_rng(0).random((50, 3))
        y = np.zeros(50, dtype=int)
        with pytest.raises(ValueError, match="n_classes >= 2"):
            cal.fit(M[:, :1], labels=y, alpha=0.1)
        with pytest.raises(ValueError, match="labels must lie in 0..2"):
            cal.fit(M, labels=np.full(50, 3), alpha=0.1)
        with pytest.raises(ValueError, match="labels must be 1-D"):
            cal.fit(M, labels=y[:10], alpha=0.1)
        with pytest.raises(ValueError, match="2-D"):
            cal.fit(M[:, 0], labels=y, alpha=0.1)
        with pytest.raises(ValueError, match="NaN"):
            cal.fit(np.where(M > 0.5, np.nan, M), labels=y, alpha=0.1)
        with pytest.raises(ValueError, match="alpha"):
            cal.fit(M, labels=y, alpha=1.0)
        with pytest.raises(ValueError, match="n_classes is required"):
            LDPLabelCalibrator().plan([10], 0.1)
        with pytest.raises(ValueError, match="score_bounds"):
            LDPLabelCalibrator(search="bisection").fit(M, labels=y, alpha=0.1)
        with pytest.raises(ValueError, match="noisy_labels"):
            cal.server_step(
                [{"n": 50, "scores": M, "noisy_labels": np.full(50, 5)}], alpha=0.1
            )

    @pytest.mark.parametrize(
        "params, match",
        [
            ({"epsilon": 0.0}, "epsilon"),
            ({"epsilon": -1.0}, "epsilon"),
            ({"delta": 0.0}, "delta"),
            ({"delta": 1.0}, "delta"),
            ({"score_bounds": (1, 0)}, "score_bounds"),
            ({"score_bounds": "ab"}, "score_bounds"),
        ],
    )
    @pytest.mark.parametrize("cls", [LDPLabelCalibrator, LDPScoreCalibrator])
    def test_params(self, cls, params, match):
        kwargs = {"score_bounds": BOUNDS, **params}
        if cls is LDPLabelCalibrator:
            kwargs["search"] = "bisection"
            M = np.random.default_rng(0).random((30, 3))
            fit = lambda c: c.fit(M, labels=np.zeros(30, int), alpha=0.1)  # noqa: E731
        else:
            fit = lambda c: c.fit(np.zeros(30), alpha=0.1)  # noqa: E731
        with pytest.raises((ValueError, TypeError), match=match):
            fit(cls(**kwargs))

    def test_score_calibrator(self):
        cal = LDPScoreCalibrator(epsilon=1.0, n_groups=10, score_bounds=BOUNDS)
        with pytest.raises(ValueError, match="at least n_groups=10 users"):
            cal.fit(np.zeros(9), alpha=0.1)
        with pytest.raises(ValueError, match="n_groups"):
            LDPScoreCalibrator(n_groups=0, score_bounds=BOUNDS).fit(
                np.zeros(9), alpha=0.1
            )
        with pytest.raises(ValueError, match="NaN"):
            cal.fit(np.full(20, np.nan), alpha=0.1)
        with pytest.raises(ValueError, match="score_bounds"):
            LDPScoreCalibrator().fit(np.zeros(20), alpha=0.1)

    def test_regressor_rejects_ldp_l(self, linear_data):
        from skfedcp.regression import FedConformalRegressor

        X_train, y_train, *_ = linear_data
        with pytest.raises(ValueError, match="'ldp-l' is a strategy for classifiers"):
            FedConformalRegressor(calibrator="ldp-l").fit(X_train, y_train)


class TestPublicClassCount:
    """Issue 22: the number of classes is public, never a vote of the messages."""

    @staticmethod
    def _messages(n_hostile):
        proba, labels = _dirichlet_data(400, 3, seed=3)
        honest = [
            {
                "n": 200,
                "scores": _lac(proba[j::2]),
                "noisy_labels": k_ary_randomized_response(
                    labels[j::2], n_classes=3, epsilon=4.0, random_state=j
                ),
            }
            for j in range(2)
        ]
        hostile = [
            {"n": 200, "scores": np.zeros((200, 2)), "noisy_labels": np.zeros(200, int)}
        ] * n_hostile
        return honest + hostile

    def test_hostile_majority_cannot_exclude_the_honest_clients(self):
        # Three hostile 2-column clients against two honest 3-column ones: the
        # vote excluded the honest clients; the public n_classes=3 excludes
        # the hostile ones and gives the honest clients' threshold.
        messages = self._messages(3)
        cal = LDPLabelCalibrator(epsilon=4.0, n_classes=3)
        with pytest.warns(UserWarning, match="3 client\\(s\\) sent an invalid"):
            fitted = clone(cal).fit_from_messages(
                messages,
                alpha=0.1,
                n_per_client=[200] * 5,
                clients=list("abcde"),
                on_invalid="exclude",
            )
        assert fitted.excluded_clients_.tolist() == ["c", "d", "e"]
        assert fitted.n_classes_ == 3
        honest = clone(cal).fit_from_messages(
            messages[:2], alpha=0.1, n_per_client=[200] * 2
        )
        assert fitted.threshold_ == honest.threshold_

    def test_without_public_count_disagreement_excludes_nobody(self):
        messages = self._messages(3)
        with pytest.raises(InvalidMessageError, match="set n_classes") as info:
            LDPLabelCalibrator(epsilon=4.0).fit_from_messages(
                messages, alpha=0.1, n_per_client=[200] * 5, on_invalid="exclude"
            )
        assert info.value.client is None and info.value.field == "scores"

    def test_hostile_clients_all_agreeing_are_refused_by_the_plan(self):
        # Every client sends 2 columns: without the public count the server
        # could not notice; with it, nothing is left to calibrate on.
        messages = self._messages(3)[2:]
        with pytest.raises(InvalidMessageError, match="every client sent an invalid"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                LDPLabelCalibrator(n_classes=3).fit_from_messages(
                    messages, alpha=0.1, n_per_client=[200] * 3, on_invalid="exclude"
                )

    @pytest.mark.parametrize("cls", [LDPLabelCalibrator, LDPLabelStarCalibrator])
    def test_public_count_changes_nothing_for_honest_data(self, cls):
        proba, labels = _dirichlet_data(600, 4, seed=5)
        ids = np.repeat(np.arange(3), 200)
        free = cls(epsilon=3.0).fit(
            _lac(proba), ids, labels=labels, alpha=0.1, random_state=0
        )
        fixed = cls(epsilon=3.0, n_classes=4).fit(
            _lac(proba), ids, labels=labels, alpha=0.1, random_state=0
        )
        assert fixed.threshold_ == free.threshold_
        assert fixed.calibration_info_ == free.calibration_info_
        message = fixed.client_step(_lac(proba[:5]), labels=labels[:5], random_state=0)
        assert message["scores"].shape == (5, 4)
        assert cls(epsilon=3.0, n_classes=4).plan([600], 0.1) == free.plan([600], 0.1)

    @pytest.mark.parametrize(
        "labels",
        [
            np.array([0, 1, 2, 2**64 - 1], dtype=np.uint64),
            np.array([0, 1, 2, 2**63], dtype=np.uint64),
            np.array([0.0, 1.0, 2.0, 2.0**64]),
            np.array([0, 1, 2, -1]),
            np.array([0, 1, 2, 2**70], dtype=object),
        ],
    )
    def test_labels_are_checked_before_any_cast(self, labels):
        # uint64 2**64 - 1 was cast to -1, the last class.
        scores = np.full((4, 3), 0.5)
        cal = LDPLabelCalibrator(epsilon=1.0)
        with pytest.raises(ValueError, match="labels must lie in 0..2"):
            cal.fit(scores, labels=labels, alpha=0.1)
        with pytest.raises(ValueError, match="labels must lie in 0..2"):
            cal.client_step(scores, labels=labels, random_state=0)

    def test_wrapped_noisy_label_is_refused_by_the_server(self):
        noisy = np.array([0, 1, 2, 2**64 - 1], dtype=np.uint64)
        messages = [{"n": 4, "scores": np.full((4, 3), 0.5), "noisy_labels": noisy}]
        # Compared in its own dtype before the int64 cast (issue 22).
        with pytest.raises(
            InvalidMessageError,
            match="'noisy_labels' holds a label of 18446744073709551615, beyond any",
        ):
            LDPLabelCalibrator(n_classes=3).server_step(messages, alpha=0.1)


class TestRegistry:
    def test_aliases(self):
        for alias, cls, star in [
            ("ldp-l", LDPLabelCalibrator, False),
            ("ldp-l*", LDPLabelStarCalibrator, True),
            ("ldp-s", LDPScoreCalibrator, False),
            ("ldp-s*", LDPScoreStarCalibrator, True),
        ]:
            assert CALIBRATORS[alias] is cls
            cal = get_calibrator(alias)
            assert type(cal) is cls and cal._star is star
            assert type(clone(cal.set_params(epsilon=3.0))) is cls
            assert clone(cal).epsilon == 3.0

    def test_hooks(self):
        assert LDPLabelCalibrator.requires_score_matrix
        assert LDPScoreStarCalibrator.interactive


# --------------------------------------------------------------------------
# Through PrivateConformalClassifier


@pytest.fixture(scope="module")
def digits_split():
    from sklearn.datasets import load_digits
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression

    X, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=300, C=0.01).fit(X[:600], y[:600])
    return FrozenEstimator(model), X[600:], y[600:]


class TestClassifier:
    @pytest.mark.parametrize("alias", ["ldp-l", "ldp-l*", "ldp-s", "ldp-s*"])
    @pytest.mark.parametrize("score", ["lac", "aps"])
    def test_all_four_plug_in(self, digits_split, alias, score):
        from skfedcp.classification import PrivateConformalClassifier

        model, X, y = digits_split
        ids = np.arange(y.size) % 4
        clf = PrivateConformalClassifier(
            model,
            calibrator=alias,
            conformity_score=score,
            epsilon=8.0,
            random_state=0,
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf.fit(X, y, client_ids=ids)
        infinite = [w for w in caught if w.category is InfiniteThresholdWarning]
        assert bool(infinite) == (alias == "ldp-s*")
        assert type(clf.calibrator_) is CALIBRATORS[alias]
        assert clf.calibrator_.epsilon == 8.0
        assert clf.calibrator_.n_clients_ == 4
        sets = clf.predict_set(X)
        assert sets.shape == (y.size, 10) and sets.dtype == bool
        np.testing.assert_array_equal(sets, clf.predict_set(X))  # deterministic
        if alias == "ldp-s*":  # 1197 users: Delta_S > alpha, the full set
            assert clf.threshold_ == np.inf and sets.all()
            assert clf.epsilon_spent_ == 0.0
        else:
            assert clf.epsilon_spent_ == 8.0
            assert 0.0 < clf.threshold_ <= 1.0

    def test_delta_on_the_instance(self, digits_split):
        from skfedcp.classification import PrivateConformalClassifier

        model, X, y = digits_split
        thresholds = []
        for delta in (0.001, 0.2):
            clf = PrivateConformalClassifier(
                model,
                calibrator=LDPLabelStarCalibrator(delta=delta),
                epsilon=8.0,
                random_state=0,
            ).fit(X, y)
            assert clf.calibrator_.delta == delta
            assert clf.calibrator_.correction_ == pytest.approx(
                ldp_correction(y.size, 10, 8.0, delta).label
            )
            thresholds.append(clf.threshold_)
        assert thresholds[1] <= thresholds[0]  # a looser delta, a smaller set
        clf.set_params(calibrator__delta=0.05)
        assert clf.get_params()["calibrator__delta"] == 0.05

    def test_wrapper_equals_calibrator(self, digits_split):
        # The wrapper hands the calibrator the score matrix of every label and
        # the encoded labels; the calibrator's k-RR streams come from its rng.
        from skfedcp.classification import PrivateConformalClassifier
        from skfedcp.scores import LACScore

        model, X, y = digits_split
        ids = np.arange(y.size) % 3
        clf = PrivateConformalClassifier(
            model, calibrator="ldp-l", epsilon=2.0, random_state=7
        ).fit(X, y, client_ids=ids)
        M = LACScore().label_scores(model.predict_proba(X))
        from skfedcp.base import calibrator_random_state, fit_streams

        seed, _ = fit_streams(7)  # the wrapper's calibrator stream
        cal = LDPLabelCalibrator(epsilon=2.0).fit(
            M, ids, labels=y, alpha=0.1, random_state=calibrator_random_state(seed)
        )
        assert clf.threshold_ == cal.threshold_

    def test_labels_outside_classes(self, digits_split):
        from skfedcp.classification import PrivateConformalClassifier

        model, X, y = digits_split
        y_bad = y.copy()
        y_bad[0] = 11
        with pytest.raises(ValueError, match="labels the model has not seen"):
            PrivateConformalClassifier(model, calibrator="ldp-l").fit(X, y_bad)


def _common_estimators():
    from skfedcp.classification import PrivateConformalClassifier

    # LDP-S needs n >= n_groups users: the check data sets have a handful of
    # calibration rows, hence n_groups=2.
    return [
        PrivateConformalClassifier(calibrator="ldp-l", epsilon=4.0, random_state=0),
        PrivateConformalClassifier(
            calibrator="ldp-l*", conformity_score="aps", epsilon=4.0, random_state=0
        ),
        PrivateConformalClassifier(
            calibrator=LDPScoreCalibrator(n_groups=2), epsilon=4.0, random_state=0
        ),
        PrivateConformalClassifier(
            calibrator=LDPScoreStarCalibrator(n_groups=2), random_state=0
        ),
    ]


@pytest.mark.filterwarnings("ignore::UserWarning")
@parametrize_with_checks(_common_estimators())
def test_sklearn_compatible_with_ldp(estimator, check):
    check(estimator)


@pytest.mark.parametrize("star", [False, True], ids=["ldp-s", "ldp-s*"])
def test_ldp_s_coverage_bounds_of_a_fitted_calibrator(star):
    # LDP-S sets its fitted state outside fit_from_messages' common path: it
    # records the alpha of its fit too, so coverage_bounds() needs no
    # arguments (it raised TypeError).
    from skfedcp.calibrators import LDPScoreCalibrator, LDPScoreStarCalibrator

    rng = np.random.default_rng(0)
    cls = LDPScoreStarCalibrator if star else LDPScoreCalibrator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = cls(epsilon=4.0, score_bounds=(0, 1)).fit(
            rng.random(4000), np.repeat(np.arange(4), 1000), alpha=0.1, random_state=0
        )
    expected = cal.coverage_bounds(cal.n_per_client_, 0.1)
    got = cal.coverage_bounds()
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    assert cal.coverage_bounds(alpha=0.2) == cal.coverage_bounds(cal.n_per_client_, 0.2)
