"""The one server path: fit_from_messages, exclusion, randomness, threads."""

import pickle
import threading
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from skfedcp.calibrators import (
    CALIBRATORS,
    AveragingCalibrator,
    CentralCalibrator,
    LDPLabelCalibrator,
    LDPScoreCalibrator,
    PrivateCentralCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
)
from skfedcp.exceptions import (
    InvalidMessageError,
    InvalidMessageWarning,
    SingleClientWarning,
)
from skfedcp.federated import ClientPartition
from skfedcp.privacy import k_ary_randomized_response
from skfedcp.utils._random import spawn_random_states

ALPHA = 0.1


def _data(seed=0, m=8, n=40):
    rng = np.random.default_rng(seed)
    return rng.exponential(size=m * n), np.repeat(np.arange(m), n)


ONE_SHOT = {
    "central": CentralCalibrator,
    "qq": QuantileOfQuantilesCalibrator,
    "avg": AveragingCalibrator,
    "dp-central": lambda: PrivateCentralCalibrator(epsilon=5.0, score_bounds=(0, 8)),
    "dp-qq": lambda: PrivateQuantileOfQuantilesCalibrator(
        epsilon=5.0, score_bounds=(0, 8), n_bins=50
    ),
}


def _client_messages(cal, scores, ids, seed):
    """What each client would send, with the streams fit gives them."""
    partition = ClientPartition(ids, scores.shape[0])
    streams = spawn_random_states(seed, partition.n_clients + 1)[1:]
    return [
        cal.client_step(
            g,
            alpha=ALPHA,
            n_per_client=partition.sizes,
            random_state=r if cal._randomized else None,
        )
        for g, r in zip(partition.split(scores), streams, strict=True)
    ], partition


class TestSameAsFit:
    @pytest.mark.parametrize("name", list(ONE_SHOT))
    def test_fit_from_client_messages_equals_fit(self, name):
        scores, ids = _data()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = ONE_SHOT[name]().fit(scores, ids, alpha=ALPHA, random_state=3)
            messages, partition = _client_messages(ONE_SHOT[name](), scores, ids, 3)
            server = ONE_SHOT[name]().fit_from_messages(
                messages,
                alpha=ALPHA,
                n_per_client=partition.sizes,
                clients=partition.clients,
                random_state=3,
            )
        assert server.threshold_ == fitted.threshold_
        assert server.calibration_info_.keys() == fitted.calibration_info_.keys()
        np.testing.assert_array_equal(server.clients_, fitted.clients_)
        np.testing.assert_array_equal(server.n_per_client_, fitted.n_per_client_)
        assert server.messages_.keys() == fitted.messages_.keys()
        assert server.excluded_clients_.size == 0

    @pytest.mark.parametrize("layout", ["grouped", "shuffled", "none"])
    def test_central_pooled_fit_equals_server_path(self, layout):
        # fit reads the caller's scores whole (the trusted pooled path, no
        # concatenation); the server concatenates the clients' messages.
        # Large enough (2**17 rows) for the filtered selection.
        rng = np.random.default_rng(5)
        n = 1 << 17
        scores = rng.exponential(size=n)
        ids = np.repeat(np.arange(8), n // 8)
        if layout == "shuffled":
            ids = rng.permutation(ids)
        elif layout == "none":
            ids = None
        before = scores.copy()
        fitted = CentralCalibrator().fit(scores, ids, alpha=ALPHA)
        messages, partition = _client_messages(CentralCalibrator(), scores, ids, 0)
        server = CentralCalibrator().fit_from_messages(
            messages, alpha=ALPHA, n_per_client=partition.sizes
        )
        rank = int(np.ceil((n + 1) * (1 - ALPHA)))
        assert fitted.threshold_ == server.threshold_ == np.sort(scores)[rank - 1]
        np.testing.assert_array_equal(scores, before)  # never written

    def test_ldp_l_from_messages_equals_fit(self):
        rng = np.random.default_rng(0)
        proba = rng.dirichlet(np.ones(3), size=600)
        labels = rng.integers(0, 3, 600)
        ids = np.repeat(np.arange(4), 150)
        cal = LDPLabelCalibrator(epsilon=3.0)
        fitted = clone(cal).fit(
            1 - proba, ids, labels=labels, alpha=ALPHA, random_state=1
        )
        # fit draws all users' k-RR noise from one stream (stream 1 of the
        # seed), users in client order; the server side is the same code.
        noisy = k_ary_randomized_response(
            labels, n_classes=3, epsilon=3.0, random_state=spawn_random_states(1, 2)[1]
        )
        messages = [
            {
                "n": 150,
                "scores": 1 - proba[ids == j],
                "noisy_labels": noisy[ids == j],
            }
            for j in range(4)
        ]
        server = clone(cal).fit_from_messages(
            messages, alpha=ALPHA, n_per_client=[150] * 4, random_state=1
        )
        assert server.threshold_ == fitted.threshold_
        assert server.n_classes_ == 3 and server.epsilon_spent_ == 3.0

    def test_ldp_s_transcript_is_checked(self):
        scores = np.random.default_rng(0).uniform(size=20_000)
        cal = LDPScoreCalibrator(epsilon=4.0, delta=0.1, score_bounds=(0, 1))
        fitted = clone(cal).fit(scores, alpha=ALPHA, random_state=5)
        # Replaying the server on the same transcript gives the same result;
        # with another assignment seed the answers do not match the groups.
        assert fitted.n_steps_used_ >= 2
        with pytest.raises(InvalidMessageError, match="users"):
            rounds = _ldp_s_rounds(cal, scores, seed=5)
            clone(cal).fit_from_messages(
                rounds, alpha=ALPHA, n_per_client=[20_000], random_state=6
            )
        again = clone(cal).fit_from_messages(
            _ldp_s_rounds(cal, scores, seed=5),
            alpha=ALPHA,
            n_per_client=[20_000],
            random_state=5,
        )
        assert again.threshold_ == fitted.threshold_
        with pytest.raises(ValueError, match="on_invalid"):
            clone(cal).fit_from_messages(
                [],
                alpha=ALPHA,
                n_per_client=[20_000],
                random_state=5,
                on_invalid="exclude",
            )


def _ldp_s_rounds(cal, scores, seed):
    server, client = spawn_random_states(seed, 2)
    state = cal.server_init([scores.size], alpha=ALPHA, random_state=server)
    rounds = []
    while not state["done"]:
        messages = [
            cal.client_respond(scores, q, random_state=client) for q in state["queries"]
        ]
        rounds.append(messages)
        state = cal.server_update(state, messages)
    return rounds


class TestInvalidMessages:
    @pytest.mark.parametrize(
        "message, field",
        [
            ({"n": 7, "quantile": 1.0}, "n"),  # announced 40
            ({"n": -1, "quantile": 1.0}, "n"),
            ({"n": 40.5, "quantile": 1.0}, "n"),
            ({"n": None, "quantile": 1.0}, "n"),
            ({"n": 40, "quantile": np.nan}, "quantile"),
            ({"n": 40, "quantile": -np.inf}, "quantile"),
            ({"n": 40, "quantile": np.inf}, "quantile"),  # rank within 40 rows
            ({"n": 40, "quantile": None}, "quantile"),
            ({"n": 40, "quantile": [1.0, 2.0]}, "quantile"),
            ({"n": 40, "quantile": "1.0"}, "quantile"),
            ({"n": 40, "quantile": True}, "quantile"),
            ({"n": 40}, "quantile"),
            ({"n": 40, "quantile": 1.0, "extra": 1}, "extra"),
        ],
    )
    def test_qq_names_client_and_field(self, message, field):
        scores, ids = _data()
        cal = QuantileOfQuantilesCalibrator()
        messages, partition = _client_messages(cal, scores, ids, None)
        messages[5] = message
        with pytest.raises(InvalidMessageError) as info:
            cal.fit_from_messages(
                messages,
                alpha=ALPHA,
                n_per_client=partition.sizes,
                clients=list("abcdefgh"),
            )
        assert info.value.client == "f" and info.value.field == field
        assert "client 'f'" in str(info.value) and field in str(info.value)

    def test_exclusion_counts_the_client_as_inf_for_qq(self):
        scores, ids = _data()
        cal = QuantileOfQuantilesCalibrator()
        messages, partition = _client_messages(cal, scores, ids, None)
        honest = [m["quantile"] for m in messages]
        messages[2] = {"n": 40, "quantile": float("nan")}
        with pytest.warns(InvalidMessageWarning, match=r"client 2.*\+inf") as rec:
            fitted = clone(cal).fit_from_messages(
                messages,
                alpha=ALPHA,
                n_per_client=partition.sizes,
                on_invalid="exclude",
            )
        assert rec[0].filename == __file__  # points at the caller
        k = fitted.calibration_info_["k"]
        expected = np.sort(np.r_[np.delete(honest, 2), np.inf])[k - 1]
        assert fitted.threshold_ == expected
        assert fitted.excluded_clients_.tolist() == [2]

    def test_exclusion_recomputes_the_plan_for_central(self):
        scores, ids = _data()
        cal = CentralCalibrator()
        messages, partition = _client_messages(cal, scores, ids, None)
        messages[0] = {"n": 40, "scores": np.full(40, np.nan)}
        with pytest.warns(InvalidMessageWarning, match="recomputed"):
            fitted = clone(cal).fit_from_messages(
                messages,
                alpha=ALPHA,
                n_per_client=partition.sizes,
                on_invalid="exclude",
            )
        reference = CentralCalibrator().fit(
            scores[ids != 0], ids[ids != 0], alpha=ALPHA
        )
        assert fitted.threshold_ == reference.threshold_
        assert fitted.n_clients_ == 7

    def test_every_client_invalid(self):
        with pytest.raises(InvalidMessageError, match="every client"):
            AveragingCalibrator().fit_from_messages(
                [{"n": 3, "quantile": np.nan}] * 2,
                alpha=ALPHA,
                n_per_client=[3, 3],
                on_invalid="exclude",
            )

    def test_wrong_number_of_messages(self):
        with pytest.raises(InvalidMessageError, match="2 message"):
            QuantileOfQuantilesCalibrator().server_step(
                [{"n": 3, "quantile": 1.0}] * 2, alpha=ALPHA, n_per_client=[3, 3, 3]
            )

    @pytest.mark.parametrize("value", [0.123, 1.0 + 1e-12, 9.0])
    def test_dp_qq_values_off_the_grid(self, value):
        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=5.0, score_bounds=(0, 8), n_bins=50
        )
        messages = [{"n": 40, "quantile": 8 * 25 / 50}] * 8
        messages = [dict(m) for m in messages]
        messages[1]["quantile"] = value
        with pytest.raises(InvalidMessageError, match="client 1.*grid"):
            cal.server_step(messages, alpha=ALPHA, n_per_client=[40] * 8)

    def test_dp_central_scores_outside_the_bounds(self):
        cal = PrivateCentralCalibrator(epsilon=5.0, score_bounds=(0, 1))
        messages = [{"n": 3, "scores": np.array([0.1, 0.2, 1.5])}]
        with pytest.raises(InvalidMessageError, match="score_bounds"):
            cal.server_step(messages, alpha=ALPHA, n_per_client=[3])

    def test_on_invalid_value(self):
        with pytest.raises(ValueError, match="on_invalid"):
            QuantileOfQuantilesCalibrator().fit_from_messages(
                [{"n": 3, "quantile": 1.0}],
                alpha=ALPHA,
                n_per_client=[3],
                on_invalid="skip",
            )

    def test_error_pickles_with_client_and_field(self):
        err = InvalidMessageError("x", client="a", field="n")
        again = pickle.loads(pickle.dumps(err))
        assert (again.client, again.field, str(again)) == ("a", "n", "x")


class TestRandomness:
    @pytest.mark.parametrize("name", ["dp-central", "dp-qq"])
    def test_none_never_reads_the_global_state(self, name):
        scores, ids = _data()
        state = np.random.get_state()  # noqa: NPY002
        np.random.seed(123)  # noqa: NPY002
        a = ONE_SHOT[name]().fit(scores, ids, alpha=ALPHA).messages_
        np.random.seed(123)  # noqa: NPY002
        b = ONE_SHOT[name]().fit(scores, ids, alpha=ALPHA).messages_
        after = np.random.get_state()  # noqa: NPY002
        np.random.set_state(state)  # noqa: NPY002
        if name == "dp-qq":  # 8 independent releases: equal only by chance
            assert not np.array_equal(a["quantile"], b["quantile"])
        # The global stream was not advanced by the fits.
        np.random.seed(123)  # noqa: NPY002
        assert np.array_equal(np.random.get_state()[1], after[1])  # noqa: NPY002

    def test_ldp_l_none_never_reads_the_global_state(self):
        rng = np.random.default_rng(0)
        proba = rng.dirichlet(np.ones(3), size=300)
        labels = rng.integers(0, 3, 300)
        draws = []
        for _ in range(2):
            np.random.seed(123)  # noqa: NPY002
            draws.append(
                LDPLabelCalibrator(epsilon=1.0)
                .fit(1 - proba, labels=labels, alpha=ALPHA)
                .messages_["noisy_labels"][0]
            )
        assert not np.array_equal(*draws)

    def test_streams_are_spawned_full_width(self):
        streams = spawn_random_states(0, 3)
        seeds = {s.random_sample(4).tobytes() for s in streams}
        assert len(seeds) == 3
        # PCG64 seeded from a SeedSequence child, not a 31-bit integer.
        assert all(
            s.get_state(legacy=False)["bit_generator"] == "PCG64" for s in streams
        )
        root = np.random.SeedSequence(0)
        child = root.spawn(3)[2]
        expected = np.random.RandomState(np.random.PCG64(child)).random_sample(4)
        np.testing.assert_array_equal(streams[2].random_sample(4), expected)

    @pytest.mark.parametrize("name", ["dp-central", "dp-qq"])
    def test_secure(self, name):
        scores, ids = _data()
        cal = ONE_SHOT[name]().fit(scores, ids, alpha=ALPHA, random_state="secure")
        assert np.isfinite(cal.threshold_) or cal.threshold_ == np.inf


class TestSingleClientWarning:
    @pytest.mark.parametrize("name", ["qq", "avg", "dp-qq"])
    def test_federated_strategies_warn_at_the_callers_line(self, name):
        scores, _ = _data()
        with pytest.warns(SingleClientWarning, match="client_ids") as rec:
            ONE_SHOT[name]().fit(scores, alpha=ALPHA, random_state=0)
        assert rec[0].filename == __file__

    @pytest.mark.parametrize("name", ["central", "dp-central"])
    def test_central_strategies_do_not(self, name):
        scores, _ = _data()
        with warnings.catch_warnings():
            warnings.simplefilter("error", SingleClientWarning)
            ONE_SHOT[name]().fit(scores, alpha=ALPHA, random_state=0)


class TestThreads:
    @pytest.mark.parametrize("name", ["qq", "dp-qq", "central"])
    def test_several_threads_fit_one_instance(self, name):
        # No per-call state on the instance: concurrent fits never fail and
        # each result is one of the single-thread results.
        cal = ONE_SHOT[name]()
        data = [_data(seed) for seed in range(4)]
        expected = {
            clone(cal).fit(s, i, alpha=ALPHA, random_state=0, n_jobs=2).threshold_
            for s, i in data
        }
        errors = []

        def work(s, i):
            try:
                for _ in range(10):
                    cal.fit(s, i, alpha=ALPHA, random_state=0, n_jobs=2)
            except Exception as exc:  # noqa: BLE001 - collected for the assert
                errors.append(exc)

        threads = [threading.Thread(target=work, args=d) for d in data]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert errors == []
        assert cal.threshold_ in expected


def test_every_registered_strategy_declares_its_message():
    for name, cls in CALIBRATORS.items():
        if cls.interactive:
            continue
        assert cls._message_fields is not None, name
        assert "n" in cls._message_fields, name
