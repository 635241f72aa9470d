"""The Flower adapter without processes: ClientApps called in this process.

``InMemoryGrid`` delivers every message through Flower's own serialization
to the node's ``ClientApp``, so these tests exercise the message encoding,
the node and server steps, the fingerprint and the failure handling exactly
as a deployment would, minus the network (``test_flower_deployment.py``).
"""

import math
import pickle
import warnings
from functools import partial

import joblib
import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.tree import DecisionTreeRegressor
from sklearn.utils import check_random_state

from skfedcp.calibrators import CALIBRATORS, QuantileOfQuantilesCalibrator
from skfedcp.calibrators._ldp._score_groups import asked_users, draw_key
from skfedcp.exceptions import (
    InvalidMessageError,
    InvalidMessageWarning,
    NodeExcludedWarning,
)
from skfedcp.feature_selection import FedChi2Selector
from skfedcp.federated._secure_aggregation import _draw_seeds
from skfedcp.flower._protocol import (
    PROTOCOL_VERSION,
    NodeConfig,
    calibrator_from_spec,
    calibrator_to_spec,
    handle_request,
)
from skfedcp.utils._random import spawn_random_states

flwr = pytest.importorskip("flwr")

# Most tests here check something else than the node plan and give none; the
# warning that says so is checked in test_node_plan.py.
pytestmark = pytest.mark.filterwarnings(
    "ignore:the node set is not checked:UserWarning"
)

from _reference import assert_same_fit, per_node_fit  # noqa: E402
from flwr.app import Context, RecordDict  # noqa: E402

from skfedcp import flower  # noqa: E402
from skfedcp.flower import _app, _wire  # noqa: E402
from skfedcp.flower._local import InMemoryGrid  # noqa: E402
from skfedcp.flower._secagg import (  # noqa: E402
    generate_keypair,
    mask_vector,
    pairwise_seed,
)

M = 5  # nodes
PLANNED = list(range(M))  # the planned client labels
N = 240  # calibration rows per node
RS = 3  # random_state of the private strategies
BOUNDS = (0.0, 5.0)

PRIVATE = {
    "dp-qq": {"epsilon": 1.0, "score_bounds": BOUNDS},
    "dp-central": {"epsilon": 1.0, "score_bounds": BOUNDS},
    # Wide bounds and a narrow band: the bisection needs several rounds.
    "ldp-s": {"epsilon": 8.0, "score_bounds": (0.0, 40.0), "n_groups": 4, "delta": 0.1},
    "ldp-s*": {"epsilon": 8.0, "score_bounds": BOUNDS, "n_groups": 4},
}


def _node_seeds(n_nodes=M):
    # The per-client streams an in-process fit(random_state=RS) spawns.
    return flower.simulation_seeds(RS, n_nodes)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300 + M * N, 3))
    y = X @ [1.0, -2.0, 0.5] + rng.normal(size=X.shape[0])
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X[:300], y[:300])
    X, y = X[300:], y[300:]
    ids = np.repeat(np.arange(M), N)
    X_sel, y_sel = load_digits(return_X_y=True)
    sel_ids = np.arange(y_sel.shape[0]) % M
    return {
        "model": model,
        "X": X,
        "y": y,
        "ids": ids,
        "scores": np.abs(y - model.predict(X)),
        "X_sel": X_sel,
        "y_sel": y_sel,
        "sel_ids": sel_ids,
        "projection_seed": _draw_seeds(check_random_state(RS), 1)[0],
    }


def _loaders(data):
    def load_data(context):
        k = context.node_config["client-id"]
        return data["X"][data["ids"] == k], data["y"][data["ids"] == k]

    def load_selection_data(context):
        k = context.node_config["client-id"]
        mask = data["sel_ids"] == k
        return data["X_sel"][mask], data["y_sel"][mask]

    return load_data, load_selection_data


def _grid(data, *, allow_raw_scores=True, model=None, configs=None, wrap=None):
    load_data, load_selection_data = _loaders(data)
    models = model or {}
    app = flower.make_client_app(
        load_data,
        load_model=lambda c: models.get(c.node_config["client-id"], data["model"]),
        load_selection_data=load_selection_data,
        allow_raw_scores=allow_raw_scores,
    )
    seeds = _node_seeds()
    if configs is None:
        configs = [
            {
                "client-id": k,
                "seed": seeds[k],
                "projection-seed": str(data["projection_seed"]),
            }
            for k in range(M)
        ]
    return InMemoryGrid(app if wrap is None else wrap(app), configs)


# The server's fit on the messages the nodes make with their own streams.
_per_node_reference = partial(per_node_fit, seeds=_node_seeds(), random_state=RS)


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return func(*args, **kwargs)


# --------------------------------------------------------------------------
# Encoding


class TestEncoding:
    def test_record_dict_round_trip_is_exact(self):
        payload = {
            "i": 3,
            "f": 0.1 + 0.2,
            "inf": math.inf,
            "b": True,
            "s": "qq",
            "raw": b"\x00\x01",
            "keys": [b"a" * 32, b"b" * 32],
            "floats": np.array([np.nan, -0.0, 1e-300, np.inf]),
            "ints": np.arange(5, dtype=np.int64),
            "masked": np.array([2**64 - 1, 0], dtype=np.uint64),
            "labels": np.array(["a", "b"]),
        }
        content = _wire._to_record_dict(payload)
        back = _wire._from_record_dict(content)
        assert back.keys() == payload.keys()
        for key, value in payload.items():
            if isinstance(value, np.ndarray):
                assert back[key].dtype == value.dtype
                np.testing.assert_array_equal(back[key], value)
            else:
                assert type(back[key]) is type(value) and back[key] == value

    def test_unsupported_value_is_a_type_error(self):
        with pytest.raises(TypeError, match="cannot send"):
            _wire._to_record_dict({"x": object()})

    def test_wire_bytes_grow_with_the_payload(self):
        small = _wire._wire_bytes(_wire._to_record_dict({"q": 1.0}))
        large = _wire._wire_bytes(_wire._to_record_dict({"q": np.zeros(1000)}))
        assert 0 < small < 500 < 8000 < large

    @pytest.mark.parametrize("alias", sorted(CALIBRATORS))
    def test_calibrator_spec_round_trip(self, alias):
        cal = CALIBRATORS[alias]()
        if "score_bounds" in cal.get_params():
            cal.set_params(score_bounds=(0.0, 2.5))
        name, back = calibrator_from_spec(calibrator_to_spec(cal))
        assert name == alias and type(back) is type(cal)
        assert back.get_params() == cal.get_params()

    def test_unregistered_calibrator_is_refused(self):
        class Custom(QuantileOfQuantilesCalibrator):
            pass

        with pytest.raises(ValueError, match="not in the registry"):
            calibrator_to_spec(Custom())
        with pytest.raises(ValueError, match="unknown calibrator"):
            calibrator_from_spec('{"alias": "nope", "params": {}}')

    def test_fingerprint_is_stable_and_tracks_model_and_score(self, tmp_path):
        model = LinearRegression().fit([[0.0], [1.0]], [0.0, 1.0])
        path = tmp_path / "model.joblib"
        joblib.dump(model, path)
        fp = flower.model_fingerprint(model, "absolute")
        assert fp == flower.model_fingerprint(joblib.load(path), "absolute")
        assert fp != flower.model_fingerprint(model, "normalized")
        other = LinearRegression().fit([[0.0], [1.0]], [0.0, 2.0])
        assert fp != flower.model_fingerprint(other, "absolute")


# --------------------------------------------------------------------------
# Every strategy equals its in-process fit


class TestEqualsInProcessFit:
    @pytest.mark.parametrize("alias", ["qq", "avg", "central"])
    def test_deterministic_strategies_bit_for_bit(self, regression, alias):
        grid = _grid(regression)
        deployed, report = flower.run_calibration(grid, alias, alpha=0.1)
        reference = CALIBRATORS[alias]().fit(
            regression["scores"], regression["ids"], alpha=0.1
        )
        assert deployed.threshold_ == reference.threshold_
        assert_same_fit(deployed, reference)
        assert [r.name for r in report.rounds] == ["hello", f"calibrate:{alias}"]
        assert report.clients.tolist() == list(range(M)) and not report.excluded

    @pytest.mark.parametrize("alias", sorted(PRIVATE))
    def test_private_strategies_with_the_same_seeds(self, regression, alias):
        grid = _grid(regression)
        cal = CALIBRATORS[alias](**PRIVATE[alias])
        deployed, report = _quiet(
            flower.run_calibration, grid, cal, alpha=0.1, random_state=RS
        )
        fit = CALIBRATORS[alias](**PRIVATE[alias]).fit
        if alias.startswith("ldp-s"):  # fit's users share one stream: replay
            fit = partial(_per_node_reference, CALIBRATORS[alias](**PRIVATE[alias]))
        reference = _quiet(
            fit,
            regression["scores"],
            regression["ids"],
            alpha=0.1,
            **({} if alias.startswith("ldp-s") else {"random_state": RS}),
        )
        assert deployed.threshold_ == reference.threshold_
        assert_same_fit(deployed, reference)
        if alias == "ldp-s":  # an interactive search over several rounds
            assert deployed.n_steps_used_ >= 2
            rounds = [r.name for r in report.rounds]
            assert rounds[1:] == [f"ldp-s:round{i + 1}" for i in range(len(rounds) - 1)]

    @pytest.mark.parametrize("alias", ["ldp-l", "ldp-l*"])
    def test_label_ldp_on_a_classifier(self, alias):
        rng = np.random.default_rng(1)
        X = rng.normal(size=(200 + M * N, 4))
        y = (X[:, 0] + rng.normal(size=X.shape[0]) > 0).astype(int) + (X[:, 1] > 1)
        clf = LogisticRegression().fit(X[:200], y[:200])
        X, y = X[200:], y[200:]
        ids = np.repeat(np.arange(M), N)

        def load_data(context):
            k = context.node_config["client-id"]
            return X[ids == k], y[ids == k]

        app = flower.make_client_app(
            load_data,
            load_model=lambda c: clf,
            conformity_score="lac",
            allow_raw_scores=True,
        )
        seeds = _node_seeds()
        grid = InMemoryGrid(app, [{"client-id": k, "seed": seeds[k]} for k in range(M)])
        cal = CALIBRATORS[alias](epsilon=3.0)
        deployed, _ = _quiet(
            flower.run_calibration, grid, cal, alpha=0.1, random_state=RS
        )
        proba = clf.predict_proba(X)
        reference = _quiet(
            _per_node_reference,
            CALIBRATORS[alias](epsilon=3.0),
            1.0 - proba,
            ids,
            labels=np.searchsorted(clf.classes_, y),
            alpha=0.1,
        )
        assert deployed.threshold_ == reference.threshold_
        assert_same_fit(deployed, reference)

    def test_chi2_selector_bit_for_bit(self, regression):
        grid = _grid(regression)
        deployed, report = flower.run_chi2_selection(grid, FedChi2Selector(k=10))
        reference = FedChi2Selector(k=10, random_state=RS).fit(
            regression["X_sel"], regression["y_sel"], regression["sel_ids"]
        )
        assert_same_fit(deployed, reference)
        np.testing.assert_array_equal(deployed.get_support(), reference.get_support())
        names = [r.name for r in report.rounds]
        assert names == ["hello", "chi2_marginals", "chi2_sketch"]

    def test_chi2_with_real_valued_features_and_public_classes(self, regression):
        data = dict(regression, X_sel=regression["X_sel"] / 3.0)  # 32 frac bits
        grid = _grid(data)
        deployed, _ = flower.run_chi2_selection(
            grid, FedChi2Selector(k=5, n_projections=20), classes=np.arange(10)
        )
        reference = FedChi2Selector(k=5, n_projections=20, random_state=RS).fit(
            data["X_sel"], data["y_sel"], data["sel_ids"]
        )
        assert_same_fit(deployed, reference)

    def test_round_one_plan_from_the_nodes_bounds(self, regression):
        # Column totals near 1e11: a fixed 32 fractional bits would wrap the
        # ring; the public plan from the announced bounds gives fewer bits and
        # the in-process fit's result bit for bit.
        data = dict(regression, X_sel=regression["X_sel"] * (1e8 / 3.0))
        grid = _grid(data)
        deployed, _ = flower.run_chi2_selection(
            grid, FedChi2Selector(k=5, n_projections=20), classes=np.arange(10)
        )
        reference = FedChi2Selector(k=5, n_projections=20, random_state=RS).fit(
            data["X_sel"], data["y_sel"], data["sel_ids"]
        )
        assert_same_fit(deployed, reference)

    @pytest.mark.parametrize(
        "bad", [np.array([np.nan]), "big", np.full(3, -1.0)], ids=str
    )
    def test_node_with_a_bad_column_bound_is_left_out(self, regression, bad):
        width = regression["X_sel"].shape[1]
        value = (  # a NaN in every coordinate
            np.full(width, np.nan)
            if isinstance(bad, np.ndarray) and bad.size == 1
            else bad
        )

        def edit(payload):
            payload["column_bound"] = value

        grid = _grid(regression, wrap=_tampering(BAD, edit, kinds=("hello",)))
        with pytest.warns(InvalidMessageWarning, match="column_bound"):
            deployed, _ = flower.run_chi2_selection(
                grid, FedChi2Selector(k=5, n_projections=20)
            )
        keep = regression["sel_ids"] != BAD
        reference = FedChi2Selector(k=5, n_projections=20, random_state=RS).fit(
            regression["X_sel"][keep],
            regression["y_sel"][keep],
            regression["sel_ids"][keep],
        )
        assert BAD not in deployed.clients_.tolist()
        assert_same_fit(deployed, reference)

    @pytest.mark.parametrize("bad", [math.nan, "240", 2.5], ids=str)
    def test_node_with_a_bad_row_count_is_left_out(self, regression, bad):
        def edit(payload):
            payload["selection_n"] = bad

        grid = _grid(regression, wrap=_tampering(BAD, edit, kinds=("hello",)))
        with pytest.warns(InvalidMessageWarning, match="selection_n"):
            deployed, _ = flower.run_chi2_selection(
                grid, FedChi2Selector(k=5, n_projections=20)
            )
        assert BAD not in deployed.clients_.tolist()

    def test_public_classes_keep_label_sets_on_the_nodes(self, regression):
        grid = _grid(regression)
        session = _app._session(grid, 10.0, 1)
        session.hello(selection=True, classes=False)
        assert all("classes" not in info for info in session.info.values())

    def test_predictions_from_the_deployed_threshold(self, regression):
        # A node predicts locally: the model's interval with the threshold.
        from sklearn.frozen import FrozenEstimator

        from skfedcp import FedConformalRegressor
        from skfedcp.scores import AbsoluteResidualScore

        deployed, _ = flower.run_calibration(_grid(regression), "qq", alpha=0.1)
        wrapper = FedConformalRegressor(
            FrozenEstimator(regression["model"]), calibrator="qq", alpha=0.1
        ).fit(regression["X"], regression["y"], regression["ids"])
        X_new = regression["X"][:5]
        mine = AbsoluteResidualScore().interval(
            regression["model"].predict(X_new), deployed.threshold_
        )
        np.testing.assert_array_equal(mine, wrapper.predict_interval(X_new))


# --------------------------------------------------------------------------
# Bad input: failures, time-outs, model versions, small nodes


def _failing(node, kinds):
    """Wrap a ClientApp so that ``node`` raises on the given request kinds."""

    def wrap(app):
        def call(message, context):
            kind = _wire._from_record_dict(message.content)["kind"]
            if context.node_config["client-id"] == node and kind in kinds:
                raise RuntimeError(f"node {node} crashed")
            return app(message, context)

        return call

    return wrap


class TestBadInput:
    def test_unresponsive_node_is_left_out_and_qq_uses_the_rest(self, regression):
        grid = _grid(regression)
        grid.unresponsive.add(grid.get_node_ids()[2])
        session_timeout = 0.5
        with pytest.warns(NodeExcludedWarning, match="no reply within"):
            deployed, report = flower.run_calibration(
                grid, "qq", alpha=0.1, timeout=session_timeout
            )
        keep = regression["ids"] != 2
        reference = QuantileOfQuantilesCalibrator().fit(
            regression["scores"][keep], regression["ids"][keep], alpha=0.1
        )
        assert deployed.threshold_ == reference.threshold_
        assert deployed.n_clients_ == M - 1
        assert list(report.excluded) == [grid.get_node_ids()[2]]

    def test_failure_during_the_round_replans_qq_for_the_remaining_nodes(
        self, regression
    ):
        grid = _grid(regression, wrap=_failing(1, {"calibrate"}))
        with pytest.warns(
            NodeExcludedWarning, match="recalibrated with the remaining 4"
        ):
            deployed, report = flower.run_calibration(grid, "qq", alpha=0.1)
        keep = regression["ids"] != 1
        reference = QuantileOfQuantilesCalibrator().fit(
            regression["scores"][keep], regression["ids"][keep], alpha=0.1
        )
        assert deployed.threshold_ == reference.threshold_
        assert_same_fit(deployed, reference)
        names = [r.name for r in report.rounds]
        assert names == ["hello", "calibrate:qq", "calibrate:qq"]
        assert "crashed" in report.rounds[1].failed[grid.get_node_ids()[1]]

    def test_private_strategy_cannot_repeat_a_round(self, regression):
        grid = _grid(regression, wrap=_failing(1, {"calibrate"}))
        cal = CALIBRATORS["dp-qq"](**PRIVATE["dp-qq"])
        with pytest.raises(RuntimeError, match="cannot repeat a round"):
            _quiet(flower.run_calibration, grid, cal, alpha=0.1, random_state=RS)

    def test_interactive_failure_is_an_error(self, regression):
        grid = _grid(regression, wrap=_failing(0, {"respond"}))
        cal = CALIBRATORS["ldp-s"](**PRIVATE["ldp-s"])
        with pytest.raises(RuntimeError, match="ldp-s: 1 node"):
            _quiet(flower.run_calibration, grid, cal, alpha=0.1, random_state=RS)

    def test_node_with_another_model_version_is_rejected(self, regression):
        other = LinearRegression().fit(regression["X"], regression["y"])
        grid = _grid(regression, model={3: other})
        with pytest.warns(NodeExcludedWarning, match="another model version"):
            deployed, report = flower.run_calibration(grid, "qq", alpha=0.1)
        assert 3 not in deployed.clients_.tolist()
        assert "fingerprint" in report.excluded[grid.get_node_ids()[3]]
        # With the expected fingerprint, a majority of wrong nodes is rejected.
        fp = flower.model_fingerprint(other, "absolute")
        with pytest.warns(NodeExcludedWarning):
            deployed, _ = flower.run_calibration(
                grid, "qq", alpha=0.1, model_fingerprint=fp
            )
        assert deployed.clients_.tolist() == [3]

    def test_node_checks_the_fingerprint_itself(self, regression):
        load_data, _ = _loaders(regression)
        model = regression["model"]
        config = NodeConfig(load_data, lambda c: model, None, "absolute", False)
        request = {
            "kind": "calibrate",
            "calibrator": calibrator_to_spec(QuantileOfQuantilesCalibrator()),
            "alpha": 0.1,
            "n_per_client": np.full(M, N),
            "fingerprint": "0" * 16,
        }
        with pytest.raises(ValueError, match="fingerprint mismatch"):
            handle_request(request, **_node_args(config))

    def test_tied_model_versions_need_the_expected_fingerprint(self, regression):
        other = LinearRegression().fit(regression["X"], regression["y"])
        grid = _grid(regression, model={0: other, 1: other})
        grid.unresponsive.add(grid.get_node_ids()[4])
        with (
            pytest.warns(NodeExcludedWarning),
            pytest.raises(ValueError, match="equal numbers"),
        ):
            flower.run_calibration(grid, "qq", alpha=0.1, timeout=0.2)

    def test_node_with_too_few_rows_is_left_out(self, regression):
        grid = _grid(regression)
        with pytest.warns(NodeExcludedWarning, match="row\\(s\\) < min_rows=500"):
            with pytest.raises(RuntimeError, match="no node is left"):
                flower.run_calibration(grid, "qq", alpha=0.1, min_rows=500)

    def test_empty_node_is_left_out(self, regression):
        data = dict(
            regression, ids=np.where(regression["ids"] == 4, 99, regression["ids"])
        )
        data["scores"] = regression["scores"]
        grid = _grid(data)
        with pytest.warns(NodeExcludedWarning, match="holds 0 row"):
            deployed, _ = flower.run_calibration(grid, "avg", alpha=0.1)
        assert deployed.n_clients_ == M - 1

    def test_raw_scores_need_the_nodes_consent(self, regression):
        grid = _grid(regression, allow_raw_scores=False)
        with pytest.warns(NodeExcludedWarning, match="refuses it"):
            with pytest.raises(RuntimeError, match="no node is left"):
                flower.run_calibration(grid, "central", alpha=0.1)
        configs = [{"client-id": k, "allow-raw-scores": True} for k in range(M)]
        grid = _grid(regression, allow_raw_scores=False, configs=configs)
        deployed, _ = flower.run_calibration(grid, "central", alpha=0.1)
        assert deployed.n_clients_ == M

    def test_duplicate_client_labels_leave_every_claimant_out(self, regression):
        # Two nodes both report client label 0: the server cannot tell which
        # is genuine, so neither takes part (and nothing else is left here).
        configs = [{"client-id": 0} for _ in range(2)]
        grid = _grid(regression, configs=configs)
        with pytest.warns(InvalidMessageWarning) as caught:
            with pytest.raises(RuntimeError, match="no node is left after the hello"):
                flower.run_calibration(grid, "qq", alpha=0.1, planned_clients=[0])
        texts = [str(w.message) for w in caught]
        assert any(
            "node 101 (client 0)" in t and "[102] announce the same client label 0" in t
            for t in texts
        ), texts
        assert any("node 102 (client 0)" in t for t in texts), texts

    def test_secure_sum_failure_in_round_two_is_dropout(self, regression):
        grid = _grid(regression, wrap=_failing_task(2, "chi2_sketch"))
        with pytest.warns(NodeExcludedWarning, match="repeated among the remaining 4"):
            deployed, report = flower.run_chi2_selection(grid, FedChi2Selector(k=10))
        reference = FedChi2Selector(k=10, dropout=[2], random_state=RS).fit(
            regression["X_sel"], regression["y_sel"], regression["sel_ids"]
        )
        assert_same_fit(deployed, reference)
        names = [r.name for r in report.rounds]
        assert names == ["hello", "chi2_marginals", "chi2_sketch", "chi2_sketch"]

    def test_secure_sum_failure_in_round_one_leaves_the_node_out(self, regression):
        grid = _grid(regression, wrap=_failing_task(0, "chi2_marginals"))
        with pytest.warns(NodeExcludedWarning, match="masks no longer cancel"):
            deployed, _ = flower.run_chi2_selection(grid, FedChi2Selector(k=10))
        keep = regression["sel_ids"] != 0
        reference = FedChi2Selector(k=10, random_state=RS).fit(
            regression["X_sel"][keep],
            regression["y_sel"][keep],
            regression["sel_ids"][keep],
        )
        assert_same_fit(deployed, reference)

    def test_chi2_needs_the_shared_projection_seed(self, regression):
        configs = [{"client-id": k} for k in range(M)]
        grid = _grid(regression, configs=configs)
        with pytest.warns(NodeExcludedWarning, match="projection-seed"):
            with pytest.raises(RuntimeError, match="needs at least two nodes"):
                flower.run_chi2_selection(grid, FedChi2Selector(k=3))

    def test_only_the_sketch_protocol_is_deployed(self, regression):
        grid = _grid(regression)
        with pytest.raises(ValueError, match="method='sketch'"):
            flower.run_chi2_selection(grid, FedChi2Selector(method="plain"))
        with pytest.raises(TypeError, match="FedChi2Selector"):
            flower.run_chi2_selection(grid, "chi2")

    def test_factories_validate_their_arguments(self):
        with pytest.raises(TypeError, match="load_data must be callable"):
            flower.make_client_app(None)
        with pytest.raises(TypeError, match="load_model must be callable"):
            flower.make_client_app(lambda c: None, load_model=3)
        with pytest.raises(ValueError, match="not one of"):
            flower.make_client_app(
                lambda c: None, load_model=lambda c: None, conformity_score="nope"
            )
        with pytest.raises(TypeError, match="selector must be a FedChi2Selector"):
            flower.make_server_app(selector="chi2")
        with pytest.raises(ValueError, match="calibrator must be one of"):
            flower.make_server_app(calibrators=("nope",))
        with pytest.raises(ValueError):
            flower.make_server_app(alpha=1.5)


def _failing_task(node, task):
    def wrap(app):
        def call(message, context):
            request = _wire._from_record_dict(message.content)
            if context.node_config["client-id"] == node and request.get("task") == task:
                raise RuntimeError(f"node {node} crashed")
            return app(message, context)

        return call

    return wrap


# --------------------------------------------------------------------------
# Node-side guards


def _node_args(config, state=None, node_config=None):
    return {
        "config": config,
        "context": type("Ctx", (), {"node_config": node_config or {"client-id": 0}})(),
        "node_id": 1,
        "node_config": node_config or {"client-id": 0},
        "state": {} if state is None else state,
    }


class TestNodeGuards:
    def test_protocol_version_mismatch(self):
        config = NodeConfig(lambda c: None, None, None, "absolute", False)
        with pytest.raises(ValueError, match="protocol version"):
            handle_request({"kind": "hello", "protocol": 99}, **_node_args(config))
        with pytest.raises(ValueError, match="unknown request kind"):
            handle_request({"kind": "steal"}, **_node_args(config))

    def _selection_node(self, state):
        X, y = load_digits(return_X_y=True)
        config = NodeConfig(lambda c: (X[:100], y[:100]), None, None, "absolute", False)
        args = _node_args(config, state)
        hello = handle_request(
            {"kind": "hello", "selection": True, "protocol": PROTOCOL_VERSION}, **args
        )
        return args, hello["public_key"]

    def _sum_request(self, keys, tag="t/0"):
        return {
            "kind": "secure_sum",
            "task": "chi2_marginals",
            "tag": tag,
            "public_keys": keys,
            "classes": np.arange(10),
            "frac_bits": 0,  # the public plan (scalars broadcast)
            "bound": 1e12,
            "n_clients": 2,
        }

    def test_secure_sum_needs_two_participants(self):
        args, key = self._selection_node({})
        with pytest.raises(ValueError, match="at least two participants"):
            handle_request(self._sum_request([key]), **args)

    def test_each_secure_sum_is_answered_once(self):
        state = {}
        args, key = self._selection_node(state)
        _, other = generate_keypair()
        handle_request(self._sum_request([key, other]), **args)
        with pytest.raises(ValueError, match="already answered"):
            handle_request(self._sum_request([other, key]), **args)

    def test_node_must_be_a_participant(self):
        args, _ = self._selection_node({})
        keys = [generate_keypair()[1] for _ in range(2)]
        with pytest.raises(ValueError, match="not among the participants"):
            handle_request(self._sum_request(keys), **args)

    @staticmethod
    def _respond_request(regression):
        """Round 1 of an LDP-S calibration for client 0 (the public assignment)."""
        n = int((regression["ids"] == 0).sum())
        return {
            "kind": "respond",
            "calibrator": calibrator_to_spec(CALIBRATORS["ldp-s"](**PRIVATE["ldp-s"])),
            "calibration_id": "run/ldp-s",
            "round": 1,
            "threshold": 1.0,
            "client": 3,
            "group_counts": np.array([2, 3, 1, 1, n - 7]),
            "assignment_key": draw_key(np.random.default_rng(0)),
        }

    def test_interactive_user_answers_once(self, regression):
        load_data, _ = _loaders(regression)
        config = NodeConfig(
            load_data, lambda c: regression["model"], None, "absolute", False
        )
        request = self._respond_request(regression)
        state = {}
        reply = handle_request(request, **_node_args(config, state))
        assert reply["message.reports"].shape == (2,)
        # The node derives its asked users from the public assignment.
        key, row = request["assignment_key"], request["group_counts"]
        first = reply["message.users"]
        np.testing.assert_array_equal(first, asked_users(key, 3, row, 1))
        with pytest.raises(PermissionError, match="already answered"):
            handle_request(request, **_node_args(config, state))
        # Another assignment within the same calibration could ask a user again.
        other = dict(request, round=2, assignment_key=key + np.uint64(1))
        with pytest.raises(PermissionError, match="answers at most once"):
            handle_request(other, **_node_args(config, state))
        reply = handle_request(dict(request, round=2), **_node_args(config, state))
        assert reply["message.reports"].shape == (3,)
        assert not np.isin(reply["message.users"], first).any()

    @pytest.mark.parametrize(
        "change, match",
        [
            ({"group_counts": np.array([2, 3])}, "this node has"),
            ({"group_counts": np.array([[1, 2]])}, "1-D integer"),
            ({"assignment_key": np.array([1, 2])}, "two uint64"),
            ({"client": -1}, "client must be"),
            ({"round": 5}, "round must be in 1..4"),
            ({"round": 0}, "round must be in 1..4"),
            ({"round": True}, "round must be in"),
        ],
        ids=str,
    )
    def test_interactive_assignment_is_checked(self, regression, change, match):
        load_data, _ = _loaders(regression)
        config = NodeConfig(
            load_data, lambda c: regression["model"], None, "absolute", False
        )
        request = dict(self._respond_request(regression), **change)
        with pytest.raises(ValueError, match=match):
            handle_request(request, **_node_args(config))
        del request["assignment_key"]
        with pytest.raises(ValueError, match="lacks"):
            handle_request(request, **_node_args(config))


# --------------------------------------------------------------------------
# Secure aggregation over key agreement


class TestSecureAggregation:
    def test_pairwise_seeds_agree_and_masks_cancel(self):
        keys = [generate_keypair() for _ in range(4)]
        publics = [pk for _, pk in keys]
        assert pairwise_seed(keys[0][0], publics[1], "t") == pairwise_seed(
            keys[1][0], publics[0], "t"
        )
        assert pairwise_seed(keys[0][0], publics[1], "t") != pairwise_seed(
            keys[0][0], publics[1], "u"
        )
        rng = np.random.default_rng(0)
        q = [rng.integers(0, 2**63, size=7, dtype=np.uint64) for _ in keys]
        masked = [
            mask_vector(q[i], index=i, private_key=sk, public_keys=publics, tag="t")
            for i, (sk, _) in enumerate(keys)
        ]
        assert all(np.all(m != x) for m, x in zip(masked, q, strict=True))
        np.testing.assert_array_equal(
            np.sum(masked, axis=0, dtype=np.uint64), np.sum(q, axis=0, dtype=np.uint64)
        )

    def test_mask_vector_needs_uint64(self):
        sk, pk = generate_keypair()
        with pytest.raises(TypeError, match="uint64"):
            mask_vector(np.zeros(3), index=0, private_key=sk, public_keys=[pk], tag="t")


# --------------------------------------------------------------------------
# The ServerApp end to end (in process)


class TestServerApp:
    def test_server_app_runs_every_task_and_saves(self, regression, tmp_path):
        grid = _grid(regression)
        seen = []
        app = flower.make_server_app(
            calibrators=("qq", CALIBRATORS["dp-qq"](**PRIVATE["dp-qq"])),
            selector=FedChi2Selector(k=10),
            load_model=lambda context: regression["model"],
            on_result=lambda result, context: seen.append(result),
        )
        output = tmp_path / "run" / "result.pkl"
        run_config = {
            "calibrators": "qq,avg,dp-qq",
            "alpha": 0.2,
            "output": str(output),
            "random-state": RS,
        }
        context = Context(1, 1, {}, RecordDict(), run_config)
        _quiet(app, grid, context)
        result = pickle.loads(output.read_bytes())
        assert sorted(result.calibrators) == ["avg", "dp-qq", "qq"]
        assert (
            seen[0].calibrators["qq"].threshold_ == result.calibrators["qq"].threshold_
        )
        reference = QuantileOfQuantilesCalibrator().fit(
            regression["scores"], regression["ids"], alpha=0.2
        )
        assert result.calibrators["qq"].threshold_ == reference.threshold_
        dp = _quiet(
            CALIBRATORS["dp-qq"](**PRIVATE["dp-qq"]).fit,
            regression["scores"],
            regression["ids"],
            alpha=0.2,
            random_state=RS,
        )
        assert result.calibrators["dp-qq"].threshold_ == dp.threshold_
        assert result.selector.get_support().sum() == 10
        # One hello for every task.
        names = [r.name for r in result.report.rounds]
        assert names.count("hello") == 1
        summary = output.with_suffix(".json").read_text()
        assert '"thresholds"' in summary and '"chi2_sketch"' in summary

    def test_run_config_can_skip_feature_selection(self, regression):
        grid = _grid(regression)
        seen = []
        app = flower.make_server_app(
            selector=FedChi2Selector(k=3),
            on_result=lambda result, context: seen.append(result),
        )
        context = Context(1, 1, {}, RecordDict(), {"feature-selection": False})
        app(grid, context)
        assert seen[0].selector is None and list(seen[0].calibrators) == ["qq"]

    def test_server_waits_for_min_nodes(self, regression):
        grid = _grid(regression)
        app = flower.make_server_app(min_nodes=M + 1, timeout=0.3)
        context = Context(1, 1, {}, RecordDict(), {})
        with pytest.raises(RuntimeError, match="min-nodes is 6"):
            app(grid, context)


# --------------------------------------------------------------------------
# Invalid messages: checked by fit_from_messages against the public plan


def _tampering(node, edit, kinds=("calibrate",)):
    """Wrap a ClientApp so that ``node`` edits its reply (a dishonest node)."""
    from flwr.app import Message

    def wrap(app):
        def call(message, context):
            reply = app(message, context)
            kind = _wire._from_record_dict(message.content)["kind"]
            if context.node_config["client-id"] != node or kind not in kinds:
                return reply
            payload = _wire._from_record_dict(reply.content)
            edit(payload)
            return Message(_wire._to_record_dict(payload), reply_to=message)

        return call

    return wrap


def _set(field, value):
    def edit(payload):
        if value is None:  # the wire carries no None: the field is missing
            del payload[f"message.{field}"]
        else:
            payload[f"message.{field}"] = value

    return edit


BAD = 2  # the dishonest node's client label

# Values a dishonest node may put in a one-number field (a None cannot travel
# through Flower's records: the field is then missing).
BAD_VALUES = {
    "nan": math.nan,
    "-inf": -math.inf,
    "missing": None,
    "text": "1.0",
    "array": np.array([1.0, 2.0]),
}


def _local_messages(cal, data, *, tamper=None, alpha=0.1):
    """Each client's own client_step (node streams), the dishonest one edited."""
    seeds = _node_seeds()
    sizes = np.bincount(data["ids"])
    messages = []
    for k in range(M):
        rs = flower.node_random_state(seeds[k]) if cal._randomized else None
        message = cal.client_step(
            data["scores"][data["ids"] == k],
            alpha=alpha,
            n_per_client=sizes,
            random_state=rs,
        )
        if k == BAD and tamper is not None:
            payload = {f"message.{key}": value for key, value in message.items()}
            tamper(payload)
            message = {key[len("message.") :]: value for key, value in payload.items()}
        messages.append(message)
    return messages, sizes


class TestInvalidMessages:
    def test_size_other_than_announced_is_excluded_and_qq_replans(self, regression):
        # Announced 240 rows in hello, then claims 7: the old replay accepted it.
        grid = _grid(regression, wrap=_tampering(BAD, _set("n", 7)))
        with pytest.warns(InvalidMessageWarning, match="announced 240 rows") as rec:
            deployed, report = flower.run_calibration(
                grid, "qq", alpha=0.1, planned_clients=PLANNED
            )
        assert "recalibrated with the remaining 4" in str(rec[0].message)
        keep = regression["ids"] != BAD
        reference = QuantileOfQuantilesCalibrator().fit(
            regression["scores"][keep], regression["ids"][keep], alpha=0.1
        )
        assert deployed.threshold_ == reference.threshold_
        assert_same_fit(deployed, reference)
        node = grid.get_node_ids()[BAD]
        assert "invalid message" in report.excluded[node]
        names = [r.name for r in report.rounds]
        assert names == ["hello", "calibrate:qq", "calibrate:qq"]

    @pytest.mark.parametrize("alias", ["qq", "avg"])
    @pytest.mark.parametrize("bad", sorted(BAD_VALUES))
    def test_bad_value_is_excluded_and_deterministic_strategy_replans(
        self, regression, alias, bad
    ):
        grid = _grid(
            regression, wrap=_tampering(BAD, _set("quantile", BAD_VALUES[bad]))
        )
        with pytest.warns(InvalidMessageWarning, match="field 'quantile'"):
            deployed, report = flower.run_calibration(grid, alias, alpha=0.1)
        keep = regression["ids"] != BAD
        reference = CALIBRATORS[alias]().fit(
            regression["scores"][keep], regression["ids"][keep], alpha=0.1
        )
        assert np.isfinite(deployed.threshold_)
        assert deployed.threshold_ == reference.threshold_
        assert_same_fit(deployed, reference)
        assert BAD not in deployed.clients_.tolist()
        assert list(report.excluded) == [grid.get_node_ids()[BAD]]

    def test_huge_finite_value_moves_qq_by_at_most_one_rank(self, regression):
        # 1e308 is a number QQ cannot tell from a large score: it is used, and
        # QQ's threshold stays an honest client's quantile.
        tamper = _set("quantile", 1e308)
        grid = _grid(regression, wrap=_tampering(BAD, tamper))
        with warnings.catch_warnings():
            warnings.simplefilter("error", InvalidMessageWarning)
            deployed, report = flower.run_calibration(grid, "qq", alpha=0.1)
        cal = QuantileOfQuantilesCalibrator()
        messages, sizes = _local_messages(cal, regression, tamper=tamper)
        reference = cal.fit_from_messages(messages, alpha=0.1, n_per_client=sizes)
        assert deployed.threshold_ == reference.threshold_
        honest = [m["quantile"] for k, m in enumerate(messages) if k != BAD]
        assert deployed.threshold_ in honest and not report.excluded

    @pytest.mark.parametrize(
        "bad", sorted({**BAD_VALUES, "1e308": 1e308, "off-grid": 1.2345})
    )
    def test_private_one_shot_excludes_without_a_new_round(self, regression, bad):
        values = {**BAD_VALUES, "1e308": 1e308, "off-grid": 1.2345}
        tamper = _set("quantile", values[bad])
        grid = _grid(regression, wrap=_tampering(BAD, tamper))
        cal = CALIBRATORS["dp-qq"](**PRIVATE["dp-qq"])
        with pytest.warns(InvalidMessageWarning, match="client 2: field 'quantile'"):
            deployed, report = flower.run_calibration(
                grid, cal, alpha=0.1, random_state=RS
            )
        # One calibration round only (no budget for a second one), and the
        # server's side is fit_from_messages on what the nodes sent.
        assert [r.name for r in report.rounds] == ["hello", "calibrate:dp-qq"]
        messages, sizes = _local_messages(cal, regression, tamper=tamper)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            reference = cal.fit_from_messages(
                messages,
                alpha=0.1,
                n_per_client=sizes,
                random_state=RS,
                on_invalid="exclude",
            )
        assert deployed.threshold_ == reference.threshold_
        assert_same_fit(deployed, reference)
        assert deployed.excluded_clients_.tolist() == [BAD]
        # Counted as +inf under the announced plan: the threshold can only rise
        # above the all-honest one (here k = m, so it is the trivial +inf).
        honest, _ = _local_messages(cal, regression)
        all_honest = cal.fit_from_messages(
            honest, alpha=0.1, n_per_client=sizes, random_state=RS
        )
        assert deployed.threshold_ >= all_honest.threshold_
        assert "invalid message" in report.excluded[grid.get_node_ids()[BAD]]

    def test_wrong_ldp_label_is_excluded_from_ldp_l(self):
        rng = np.random.default_rng(1)
        X = rng.normal(size=(200 + M * N, 4))
        y = (X[:, 0] > 0).astype(int)
        clf = LogisticRegression().fit(X[:200], y[:200])
        X, y = X[200:], y[200:]
        ids = np.repeat(np.arange(M), N)

        def load_data(context):
            k = context.node_config["client-id"]
            return X[ids == k], y[ids == k]

        def flip(payload):  # labels outside the two classes
            payload["message.noisy_labels"] = payload["message.noisy_labels"] + 5

        app = flower.make_client_app(
            load_data,
            load_model=lambda c: clf,
            conformity_score="lac",
            allow_raw_scores=True,
        )
        seeds = _node_seeds()
        grid = InMemoryGrid(
            _tampering(BAD, flip)(app),
            [{"client-id": k, "seed": seeds[k]} for k in range(M)],
        )
        cal = CALIBRATORS["ldp-l"](epsilon=3.0)
        with pytest.warns(
            InvalidMessageWarning, match="client 2: field 'noisy_labels'"
        ):
            deployed, report = flower.run_calibration(
                grid, cal, alpha=0.1, random_state=RS
            )
        assert deployed.excluded_clients_.tolist() == [BAD]
        assert deployed.clients_.tolist() == [0, 1, 3, 4]
        assert [r.name for r in report.rounds] == ["hello", "calibrate:ldp-l"]

    def test_wrong_ldp_s_bits_stop_the_interactive_run(self, regression):
        def bits(payload):
            payload["message.reports"] = np.full_like(payload["message.reports"], 2)

        grid = _grid(regression, wrap=_tampering(BAD, bits, kinds=("respond",)))
        cal = CALIBRATORS["ldp-s"](**PRIVATE["ldp-s"])
        with (
            pytest.warns(InvalidMessageWarning, match="client 2"),
            pytest.raises(InvalidMessageError, match="can neither exclude") as exc,
        ):
            flower.run_calibration(grid, cal, alpha=0.1, random_state=RS)
        assert exc.value.client == BAD and exc.value.field == "reports"

    def test_ldp_s_users_outside_the_assignment_name_the_node(self, regression):
        """The node swaps one user of round 1 with one of a later round (each
        user still answers once, in range, the right count per round: every
        round check passes); the replay against the public assignment catches
        it, and that node is named and left out as in a round."""
        from flwr.app import Message

        from skfedcp.calibrators._ldp._score_groups import asked_users

        def swap(request, users):
            row = np.asarray(request["group_counts"])
            key, j = np.asarray(request["assignment_key"]), int(request["client"])
            later = max(r for r in range(2, row.shape[0]) if row[r - 1] > 0)
            a = asked_users(key, j, row, 1)[0]
            b = asked_users(key, j, row, later)[0]
            if int(request["round"]) == 1:
                return np.where(users == a, b, users)
            if int(request["round"]) == later:
                return np.where(users == b, a, users)
            return users

        def wrap(app):
            def call(message, context):
                reply = app(message, context)
                request = _wire._from_record_dict(message.content)
                if (
                    context.node_config["client-id"] != BAD
                    or request["kind"] != "respond"
                ):
                    return reply
                payload = _wire._from_record_dict(reply.content)
                payload["message.users"] = swap(request, payload["message.users"])
                return Message(_wire._to_record_dict(payload), reply_to=message)

            return call

        grid = _grid(regression, wrap=wrap)
        cal = CALIBRATORS["ldp-s"](**PRIVATE["ldp-s"])
        with (
            pytest.warns(InvalidMessageWarning, match="client 2"),
            pytest.raises(InvalidMessageError, match="can neither exclude") as exc,
        ):
            flower.run_calibration(grid, cal, alpha=0.1, random_state=RS)
        assert exc.value.client == BAD and exc.value.field == "users"
        assert "not in that group of the public assignment" in str(exc.value)

    def test_invalid_node_is_left_out_of_the_later_tasks(self, regression):
        grid = _grid(regression, wrap=_tampering(BAD, _set("quantile", math.nan)))
        seen = []
        app = flower.make_server_app(
            calibrators=("qq", "avg"),
            selector=FedChi2Selector(k=5),
            on_result=lambda result, context: seen.append(result),
        )
        with pytest.warns(InvalidMessageWarning) as rec:
            app(grid, Context(1, 1, {}, RecordDict(), {}))
        assert len([w for w in rec if w.category is InvalidMessageWarning]) == 1
        result = seen[0]
        for cal in result.calibrators.values():
            assert BAD not in cal.clients_.tolist()
        assert BAD not in result.selector.clients_.tolist()
        names = [r.name for r in result.report.rounds]
        assert names.count("calibrate:qq") == 2 and names.count("calibrate:avg") == 1


# --------------------------------------------------------------------------
# Seeds and the import path


class TestSeedsAndLayout:
    def test_node_streams_are_the_in_process_client_streams(self):

        streams = spawn_random_states(RS, M + 1)
        for k, seed in enumerate(_node_seeds()):
            mine = flower.node_random_state(seed).random_sample(4)
            np.testing.assert_array_equal(mine, streams[k + 1].random_sample(4))

    def test_node_without_seed_draws_os_entropy(self):
        assert flower.node_random_state(None) == "secure"
        assert flower.node_random_state("") == "secure"

    @pytest.mark.parametrize("seed", ["x", "-1", "3:a", "3:-1", True, 1.5])
    def test_bad_node_seed_is_a_clear_error(self, seed):
        with pytest.raises((TypeError, ValueError), match="node config seed"):
            flower.node_random_state(seed)

    def test_simulation_seeds_need_a_seed(self):
        with pytest.raises(TypeError, match="random_state"):
            flower.simulation_seeds("secure", 3)
        with pytest.raises(ValueError, match="n_clients"):
            flower.simulation_seeds(0, 0)

    def test_old_import_path_warns(self):
        import skfedcp.federated.flower as old
        import skfedcp.flower as new

        with pytest.warns(DeprecationWarning, match="import run_calibration from"):
            assert old.run_calibration is new.run_calibration
        with pytest.raises(AttributeError):
            old.nope  # noqa: B018

    def test_federated_does_not_import_the_adapter(self):
        import ast
        from pathlib import Path

        import skfedcp.federated

        for path in Path(skfedcp.federated.__file__).parent.glob("*.py"):
            if path.name == "flower.py":  # the deprecated alias
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    assert "flower" not in (node.module or ""), path
