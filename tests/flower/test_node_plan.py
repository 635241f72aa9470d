"""Who may take part: the planned node set, public bounds, duplicates, replays.

The nodes do not trust each other and may be dishonest. These tests run the
hostile cases through ``InMemoryGrid`` (every message through Flower's own
serialization and the node's ``ClientApp``, no processes):

* a Sybil party running three nodes over the same rows, an unplanned node
  and a node replaying another node's reply are each left out with a
  warning naming them, and the honest result is bit for bit the in-process
  fit on the honest nodes;
* a malformed hello field (a list as a label, a string as a size, a size
  above the public bound ``max_client_size``) leaves that node out in
  milliseconds, never the honest ones, and the run goes on.

``test_deployment.py`` runs a Sybil pair, an unplanned node and a replay on a
real loopback deployment too.
"""

import math
import time
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LinearRegression
from sklearn.utils import check_random_state

from skfedcp import config_context, get_config
from skfedcp.calibrators import CALIBRATORS, QuantileOfQuantilesCalibrator
from skfedcp.exceptions import InvalidMessageWarning, NodeExcludedWarning
from skfedcp.feature_selection import FedChi2Selector
from skfedcp.federated._secure_aggregation import _draw_seeds

flwr = pytest.importorskip("flwr")

from _reference import assert_same_fit  # noqa: E402
from flwr.app import Context, Message, RecordDict  # noqa: E402

from skfedcp import flower  # noqa: E402
from skfedcp.flower import _server_app, _wire  # noqa: E402
from skfedcp.flower._local import InMemoryGrid  # noqa: E402
from skfedcp.flower._session import (  # noqa: E402
    MAX_CLIENT_SIZE,
    MAX_CLIENTS,
    ServerSession,
    check_planned_clients,
)

HONEST = 5  # labels 0..4 hold partitions 0..4
SYBILS = (5, 6, 7)  # one party: three planned labels over partition 5
REPLAYER = 8  # planned, holds partition 7, replays node 0's replies
UNPLANNED = 9  # holds partition 6, not in the plan
PLANNED = [*range(HONEST), *SYBILS, REPLAYER]
N = 120  # calibration rows per partition
RS = 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200 + 8 * N, 3))
    y = X @ [1.0, -2.0, 0.5] + rng.normal(size=X.shape[0])
    model = LinearRegression().fit(X[:200], y[:200])
    X, y = X[200:], y[200:]
    X_sel, y_sel = load_digits(return_X_y=True)
    return {
        "model": model,
        "X": X,
        "y": y,
        "ids": np.repeat(np.arange(8), N),
        "X_sel": X_sel,
        "y_sel": y_sel,
        "sel_ids": np.arange(y_sel.shape[0]) % 8,
        "projection_seed": _draw_seeds(check_random_state(RS), 1)[0],
    }


def _client_3_announces_the_key_of_client_0():
    """A ``wrap`` of the node apps: client 3's hello carries client 0's
    public key (client 0 answers first in the in-memory grid)."""
    keys = {}

    def wrap(app):
        def call(message, context):
            reply = app(message, context)
            label = context.node_config["client-id"]
            if _wire._from_record_dict(message.content)["kind"] != "hello":
                return reply
            payload = _wire._from_record_dict(reply.content)
            if label == 0:
                keys["key"] = payload["public_key"]
            elif label == 3:
                payload["public_key"] = keys["key"]
            return Message(_wire._to_record_dict(payload), reply_to=message)

        return call

    return wrap


def _config(label, part, data):
    return {
        "client-id": label,
        "data-id": part,
        "projection-seed": str(data["projection_seed"]),
    }


def _replaying(replayer, source, kinds):
    """``replayer`` answers with ``source``'s latest reply of the same kind."""
    captured = {}

    def wrap(app):
        def call(message, context):
            reply = app(message, context)
            request = _wire._from_record_dict(message.content)
            kind = request.get("task", request["kind"])
            label = context.node_config["client-id"]
            if label == source:
                captured[kind] = reply.content
            elif label == replayer and kind in kinds and kind in captured:
                return Message(captured[kind], reply_to=message)
            return reply

        return call

    return wrap


def _tampering(label, edit, kinds=("hello",)):
    def wrap(app):
        def call(message, context):
            reply = app(message, context)
            request = _wire._from_record_dict(message.content)
            if (
                context.node_config["client-id"] != label
                or request["kind"] not in kinds
            ):
                return reply
            payload = _wire._from_record_dict(reply.content)
            edit(payload)
            return Message(_wire._to_record_dict(payload), reply_to=message)

        return call

    return wrap


def _grid(data, configs, wrap=None):
    def load_data(context):
        mask = data["ids"] == context.node_config["data-id"]
        return data["X"][mask], data["y"][mask]

    def load_selection_data(context):
        mask = data["sel_ids"] == context.node_config["data-id"]
        return data["X_sel"][mask], data["y_sel"][mask]

    app = flower.make_client_app(
        load_data,
        load_model=lambda context: data["model"],
        load_selection_data=load_selection_data,
    )
    return InMemoryGrid(app if wrap is None else wrap(app), configs)


def _hostile_grid(data, kinds=("calibrate", "chi2_marginals")):
    """Honest 0..4, a Sybil party (5, 6, 7), a replayer (8), an unplanned 9."""
    configs = [_config(k, k, data) for k in range(HONEST)]
    configs += [_config(label, 5, data) for label in SYBILS]
    configs += [_config(REPLAYER, 7, data), _config(UNPLANNED, 6, data)]
    return _grid(data, configs, wrap=_replaying(REPLAYER, 0, kinds))


def _honest(data, key="ids"):
    return data[key] < HONEST


def _texts(caught):
    return [str(w.message) for w in caught]


def _node_of(grid, label):
    return next(
        node
        for node, context in grid.contexts.items()
        if context.node_config["client-id"] == label
    )


# --------------------------------------------------------------------------
# Sybil, unplanned, replay: rejected, honest result bit for bit


class TestHostileNodes:
    def test_qq_leaves_them_out_and_equals_the_honest_fit(self, data):
        grid = _hostile_grid(data)
        with pytest.warns(InvalidMessageWarning) as caught:
            deployed, report = flower.run_calibration(
                grid, "qq", alpha=0.1, planned_clients=PLANNED
            )
        scores = np.abs(data["y"] - data["model"].predict(data["X"]))
        keep = _honest(data)
        reference = QuantileOfQuantilesCalibrator().fit(
            scores[keep], data["ids"][keep], alpha=0.1
        )
        assert deployed.threshold_ == reference.threshold_
        assert_same_fit(deployed, reference)
        assert report.clients.tolist() == list(range(HONEST))
        texts = _texts(caught)
        for label in SYBILS:
            node = _node_of(grid, label)
            assert any(
                f"node {node} (client {label})" in t and "hold the same rows" in t
                for t in texts
            ), texts
            assert "Sybil" in report.excluded[node]
        node = _node_of(grid, UNPLANNED)
        assert any(
            f"node {node} (client {UNPLANNED})" in t and "not in the planned" in t
            for t in texts
        ), texts
        node = _node_of(grid, REPLAYER)
        source = _node_of(grid, 0)
        assert f"bound to node {source}'s request" in report.excluded[node]
        assert "replayed reply" in report.excluded[node]
        assert "recalibrated with the remaining 5" in report.excluded[node] or any(
            "recalibrated with the remaining 5" in t for t in texts
        )
        # Honest nodes are never blamed.
        honest = {_node_of(grid, k) for k in range(HONEST)}
        assert not honest & set(report.excluded)
        assert len(report.excluded) == len(SYBILS) + 2

    def test_pinned_nodes_with_identical_rows_count_once(self, data):
        # Two authenticated planned nodes (node ids pinned) may hold the same
        # rows (one public data set): not Sybils, so neither is silenced. But
        # the rows are one data set: the node with the smallest label is
        # used, the copy is left out with a warning naming both, and the
        # result is the in-process fit with those rows once (they counted
        # twice before).
        configs = [_config(k, k, data) for k in range(HONEST)]
        configs.append(_config(HONEST, 0, data))  # client 5 holds client 0's rows
        grid = _grid(data, configs)
        pinned = {node: c.node_config["client-id"] for node, c in grid.contexts.items()}
        with pytest.warns(NodeExcludedWarning, match="holds the same rows") as caught:
            deployed, report = flower.run_calibration(
                grid, "qq", alpha=0.1, planned_clients=pinned
            )
        (text,) = [t for t in _texts(caught) if "holds the same rows" in t]
        assert f"node {_node_of(grid, 0)} (client 0)" in text
        assert f"node {_node_of(grid, HONEST)} (client {HONEST})" in text
        assert "the rows count once" in text
        assert set(report.excluded) == {_node_of(grid, HONEST)}
        assert report.clients.tolist() == list(range(HONEST))
        assert not any(isinstance(w.message, InvalidMessageWarning) for w in caught)
        scores = np.abs(data["y"] - data["model"].predict(data["X"]))
        keep = _honest(data)
        once = QuantileOfQuantilesCalibrator().fit(
            scores[keep], data["ids"][keep], alpha=0.1
        )
        assert_same_fit(deployed, once)

    def test_pinned_copy_kept_is_one_that_stays(self, data):
        # FED-chi2 (its hello carries the secure-aggregation keys): client 5
        # holds client 0's rows, and client 3 announces client 0's public
        # key. 0 and 3 are left out for the key, so the rows of client 0 are
        # used once, through node 5 (the copy was dropped in favour of node
        # 0, which the key check then dropped: the rows counted zero times).
        wrap = _client_3_announces_the_key_of_client_0()

        configs = [_config(k, k, data) for k in range(HONEST)]
        configs.append(_config(HONEST, 0, data))  # client 5 holds client 0's rows
        grid = _grid(data, configs, wrap=wrap)
        pinned = {node: c.node_config["client-id"] for node, c in grid.contexts.items()}
        with pytest.warns(InvalidMessageWarning, match="announce the same public key"):
            deployed, _ = flower.run_chi2_selection(
                grid, FedChi2Selector(k=10), planned_clients=pinned
            )
        assert deployed.clients_.tolist() == [1, 2, 4, HONEST]

    def test_unpinned_nodes_with_identical_rows_are_left_out(self, data):
        # Without authentication the same two nodes are Sybils: both out.
        configs = [_config(k, k, data) for k in range(HONEST)]
        configs.append(_config(HONEST, 0, data))
        grid = _grid(data, configs)
        with pytest.warns(InvalidMessageWarning, match="Sybil") as caught:
            deployed, report = flower.run_calibration(
                grid, "qq", alpha=0.1, planned_clients=list(range(HONEST + 1))
            )
        assert deployed.clients_.tolist() == [1, 2, 3, 4]
        assert set(report.excluded) == {_node_of(grid, 0), _node_of(grid, HONEST)}
        assert not any("are used" in t for t in _texts(caught))

    def test_chi2_leaves_them_out_and_equals_the_honest_fit(self, data):
        grid = _hostile_grid(data)
        with pytest.warns(InvalidMessageWarning):
            deployed, report = flower.run_chi2_selection(
                grid, FedChi2Selector(k=10), planned_clients=PLANNED
            )
        keep = _honest(data, "sel_ids")
        reference = FedChi2Selector(k=10, random_state=RS).fit(
            data["X_sel"][keep], data["y_sel"][keep], data["sel_ids"][keep]
        )
        assert_same_fit(deployed, reference)
        node = _node_of(grid, REPLAYER)
        assert "replayed reply" in report.excluded[node]
        names = [r.name for r in report.rounds]
        assert names == ["hello", "chi2_marginals", "chi2_marginals", "chi2_sketch"]

    def test_replay_from_an_earlier_round_is_refused(self, data):
        # Node 3 answers round two with its own round-one vector.
        captured = {}

        def wrap(app):
            def call(message, context):
                reply = app(message, context)
                task = _wire._from_record_dict(message.content).get("task")
                if context.node_config["client-id"] != 3:
                    return reply
                if task == "chi2_marginals":
                    captured["old"] = reply.content
                if task == "chi2_sketch":
                    return Message(captured["old"], reply_to=message)
                return reply

            return call

        configs = [_config(k, k, data) for k in range(HONEST)]
        grid = _grid(data, configs, wrap=wrap)
        with pytest.warns(
            InvalidMessageWarning, match="round 1 \\('chi2_marginals'\\)"
        ):
            deployed, report = flower.run_chi2_selection(
                grid, FedChi2Selector(k=10), planned_clients=list(range(HONEST))
            )
        keep = _honest(data, "sel_ids")
        reference = FedChi2Selector(k=10, dropout=[3], random_state=RS).fit(
            data["X_sel"][keep], data["y_sel"][keep], data["sel_ids"][keep]
        )
        assert_same_fit(deployed, reference)

    def test_a_replay_and_a_nan_in_one_round_cost_one_new_round(self, data):
        def nan(payload):
            payload["message.quantile"] = math.nan

        def wrap(app):
            return _tampering(4, nan, kinds=("calibrate",))(
                _replaying(REPLAYER, 0, ("calibrate",))(app)
            )

        configs = [_config(k, k, data) for k in range(HONEST)]
        configs.append(_config(REPLAYER, 7, data))
        grid = _grid(data, configs, wrap=wrap)
        with pytest.warns(InvalidMessageWarning):
            deployed, report = flower.run_calibration(
                grid, "qq", alpha=0.1, planned_clients=[*range(HONEST), REPLAYER]
            )
        names = [r.name for r in report.rounds]
        assert names == ["hello", "calibrate:qq", "calibrate:qq"]
        assert deployed.clients_.tolist() == [0, 1, 2, 3]
        assert "replayed reply" in report.excluded[_node_of(grid, REPLAYER)]
        assert "invalid message" in report.excluded[_node_of(grid, 4)]
        scores = np.abs(data["y"] - data["model"].predict(data["X"]))
        keep = data["ids"] < 4
        reference = QuantileOfQuantilesCalibrator().fit(
            scores[keep], data["ids"][keep], alpha=0.1
        )
        assert_same_fit(deployed, reference)

    def test_a_private_round_goes_on_without_the_replayer(self, data):
        # dp-qq cannot ask again: the replay counts as an invalid message
        # under the round's plan, and the honest nodes are used.
        grid = _hostile_grid(data)
        cal = CALIBRATORS["dp-qq"](epsilon=1.0, score_bounds=(0.0, 5.0))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            deployed, report = flower.run_calibration(
                grid, cal, alpha=0.1, planned_clients=PLANNED, random_state=RS
            )
        assert deployed.clients_.tolist() == [*range(HONEST), REPLAYER]
        assert deployed.excluded_clients_.tolist() == [REPLAYER]
        node = _node_of(grid, REPLAYER)
        assert "replayed reply" in report.excluded[node]
        assert any(
            "counts as invalid under the round's plan" in t for t in _texts(caught)
        )

    def test_without_a_plan_the_server_warns_and_still_rejects_sybils(self, data):
        grid = _hostile_grid(data)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            deployed, report = flower.run_calibration(grid, "qq", alpha=0.1)
        texts = _texts(caught)
        assert any(t.startswith("the node set is not checked") for t in texts)
        # Unplanned is now accepted (no plan), Sybils and the replay are not.
        assert deployed.clients_.tolist() == [*range(HONEST), UNPLANNED]
        for label in (*SYBILS, REPLAYER):
            assert _node_of(grid, label) in report.excluded


# --------------------------------------------------------------------------
# Malformed hello fields and public bounds


class TestMalformedAnnouncements:
    @pytest.mark.parametrize(
        "field, value, match",
        [
            ("label", [1, 2], "client label is list"),
            ("label", 1.0, "client label is float"),
            ("label", True, "client label is bool"),
            ("label", "x" * 300, "more than 256 characters"),
            ("n", "120", "field 'n' is '120', not an integer"),
            ("n", 2.5, "field 'n' is 2.5"),
            ("n", -4, "field 'n' is negative"),
            ("n", 10**12, "max_client_size=1000000000"),
            ("n", 2**62, "max_client_size=1000000000"),
            ("fingerprint", 7, "field 'fingerprint' is not a string"),
        ],
        ids=str,
    )
    def test_one_node_is_left_out_and_the_run_goes_on(self, data, field, value, match):
        def edit(payload):
            payload[field] = value

        configs = [_config(k, k, data) for k in range(HONEST)]
        grid = _grid(data, configs, wrap=_tampering(2, edit))
        start = time.perf_counter()
        with pytest.warns(InvalidMessageWarning, match=match):
            deployed, report = flower.run_calibration(
                grid, "qq", alpha=0.1, planned_clients=list(range(HONEST))
            )
        assert time.perf_counter() - start < 30.0  # no allocation of n rows
        scores = np.abs(data["y"] - data["model"].predict(data["X"]))
        keep = _honest(data) & (data["ids"] != 2)
        reference = QuantileOfQuantilesCalibrator().fit(
            scores[keep], data["ids"][keep], alpha=0.1
        )
        assert deployed.threshold_ == reference.threshold_
        assert list(report.excluded) == [_node_of(grid, 2)]

    @pytest.mark.parametrize("alias", ["dp-qq", "ldp-s"])
    def test_huge_size_never_reaches_the_honest_nodes(self, data, alias):
        # Over Flower, n = 10**12 from one node made every honest node fail
        # with MemoryError and the server blamed them.
        def edit(payload):
            payload["n"] = 10**12

        configs = [_config(k, k, data) for k in range(HONEST)]
        grid = _grid(data, configs, wrap=_tampering(4, edit))
        params = {"epsilon": 2.0, "score_bounds": (0.0, 5.0)}
        if alias == "ldp-s":
            params["n_groups"] = 2
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            deployed, report = flower.run_calibration(
                grid,
                CALIBRATORS[alias](**params),
                alpha=0.1,
                planned_clients=list(range(HONEST)),
                random_state=RS,
            )
        assert deployed.clients_.tolist() == [0, 1, 2, 3]
        assert list(report.excluded) == [_node_of(grid, 4)]
        assert any("max_client_size" in t for t in _texts(caught))

    def test_selection_fields_are_checked(self, data):
        def edit(payload):
            payload["public_key"] = b"short"

        configs = [_config(k, k, data) for k in range(HONEST)]
        grid = _grid(data, configs, wrap=_tampering(1, edit))
        with pytest.warns(InvalidMessageWarning, match="'public_key' is not 32 bytes"):
            deployed, _ = flower.run_chi2_selection(
                grid, FedChi2Selector(k=10), planned_clients=list(range(HONEST))
            )
        keep = _honest(data, "sel_ids") & (data["sel_ids"] != 1)
        reference = FedChi2Selector(k=10, random_state=RS).fit(
            data["X_sel"][keep], data["y_sel"][keep], data["sel_ids"][keep]
        )
        assert_same_fit(deployed, reference)

    @pytest.mark.parametrize(
        "field, value, match",
        [
            ("n_features", "64", "'n_features' is '64'"),
            ("integer_x", 1, "'integer_x' is not a boolean"),
            ("classes", np.arange(20_000), "'classes' is not a vector of at most"),
            ("classes", np.zeros((2, 2)), "'classes' is not a vector"),
            ("data_fingerprint", 3, "'data_fingerprint' is not a string"),
        ],
        ids=str,
    )
    def test_malformed_selection_field(self, data, field, value, match):
        def edit(payload):
            payload[field] = value

        configs = [_config(k, k, data) for k in range(HONEST)]
        grid = _grid(data, configs, wrap=_tampering(1, edit))
        with pytest.warns(InvalidMessageWarning, match=match):
            deployed, _ = flower.run_chi2_selection(
                grid, FedChi2Selector(k=10), planned_clients=list(range(HONEST))
            )
        assert 1 not in deployed.clients_.tolist()

    @pytest.mark.parametrize("liars", [(1,), (1, 2, 3)], ids=["one", "majority"])
    def test_string_class_list_cannot_poison_the_derived_union(self, data, liars):
        # classes=None: the union of the nodes' lists. String labels from one
        # node (or from a majority: not a vote) would turn it into strings;
        # the run stops naming every node's kind and asks for classes.
        def edit(payload):
            if "classes" in payload:
                payload["classes"] = payload["classes"].astype(str)

        def wrap(app):
            for label in liars:
                app = _tampering(label, edit)(app)
            return app

        configs = [_config(k, k, data) for k in range(HONEST)]
        with pytest.raises(ValueError, match="pass classes") as info:
            flower.run_chi2_selection(
                _grid(data, configs, wrap=wrap),
                FedChi2Selector(k=10),
                planned_clients=list(range(HONEST)),
            )
        grid = _grid(data, configs, wrap=wrap)
        text = str(info.value)
        assert "mix int and string labels" in text
        for label in range(HONEST):
            kind = "string" if label in liars else "int"
            assert f"(client {label}): {kind}" in text
        # With the public classes the nodes' lists are not used: every node
        # is in, as the in-process fit on all their rows.
        deployed, _ = flower.run_chi2_selection(
            grid,
            FedChi2Selector(k=10),
            classes=np.arange(10),
            planned_clients=list(range(HONEST)),
        )
        assert deployed.classes_.dtype.kind == "i"
        assert deployed.clients_.tolist() == [0, 1, 2, 3, 4]
        keep = _honest(data, "sel_ids")
        reference = FedChi2Selector(k=10, random_state=RS).fit(
            data["X_sel"][keep], data["y_sel"][keep], data["sel_ids"][keep]
        )
        assert_same_fit(deployed, reference)

    def test_class_kinds_in_equal_numbers_need_public_classes(self, data):
        def edit(payload):
            if "classes" in payload:
                payload["classes"] = payload["classes"].astype(str)

        configs = [_config(k, k, data) for k in range(2)]
        grid = _grid(data, configs, wrap=_tampering(1, edit))
        with pytest.raises(ValueError, match="mix int and string labels"):
            flower.run_chi2_selection(
                grid, FedChi2Selector(k=10), planned_clients=[0, 1]
            )
        # With the public classes, node 1's list is never asked for.
        grid = _grid(data, configs, wrap=_tampering(1, edit))
        deployed, _ = flower.run_chi2_selection(
            grid, FedChi2Selector(k=10), classes=np.arange(10), planned_clients=[0, 1]
        )
        assert deployed.clients_.tolist() == [0, 1]

    def test_overlong_string_classes_are_refused(self, data):
        def edit(payload):
            payload["classes"] = np.array(["x" * 300])

        configs = [_config(k, k, data) for k in range(HONEST)]
        grid = _grid(data, configs, wrap=_tampering(1, edit))
        with pytest.warns(InvalidMessageWarning, match="at most 256 characters"):
            deployed, _ = flower.run_chi2_selection(
                grid, FedChi2Selector(k=10), planned_clients=list(range(HONEST))
            )
        assert 1 not in deployed.clients_.tolist()

    def test_duplicate_public_keys_leave_both_out(self, data):
        wrap = _client_3_announces_the_key_of_client_0()

        configs = [_config(k, k, data) for k in range(HONEST)]
        grid = _grid(data, configs, wrap=wrap)
        with pytest.warns(InvalidMessageWarning, match="announce the same public key"):
            deployed, _ = flower.run_chi2_selection(
                grid, FedChi2Selector(k=10), planned_clients=list(range(HONEST))
            )
        assert deployed.clients_.tolist() == [1, 2, 4]

    def test_minority_label_type_is_left_out_without_a_plan(self, data):
        configs = [_config(k, k, data) for k in range(HONEST)]
        configs[1]["client-id"] = "one"
        grid = _grid(data, configs)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            deployed, _ = flower.run_calibration(grid, "qq", alpha=0.1)
        assert deployed.clients_.tolist() == [0, 2, 3, 4]
        assert any("is not an int as the other nodes'" in t for t in _texts(caught))
        configs = [_config(k, k, data) for k in range(2)]
        configs[1]["client-id"] = "one"
        with pytest.raises(ValueError, match="mix types in equal numbers"):
            _quiet_run(_grid(data, configs))

    def test_run_calibration_bounds_are_the_calibrators_policy(self, data):
        # The policy in force says 100 rows; the run's own max_client_size
        # (1000) must reach the calibrator's plan too, not only hello, or the
        # honest nodes (120 rows each) are blamed for the policy's bound.
        configs = [_config(k, k, data) for k in range(HONEST)]
        scores = np.abs(data["y"] - data["model"].predict(data["X"]))
        keep = _honest(data)
        reference = QuantileOfQuantilesCalibrator().fit(
            scores[keep], data["ids"][keep], alpha=0.1
        )
        with config_context(max_client_size=100):
            deployed, report = flower.run_calibration(
                _grid(data, configs),
                "qq",
                alpha=0.1,
                planned_clients=list(range(HONEST)),
                max_client_size=1000,
            )
            assert get_config()["max_client_size"] == 100  # restored after the run
        assert not report.excluded
        assert_same_fit(deployed, reference)
        # The run's bound below the rows: every node refused at hello.
        with pytest.warns(InvalidMessageWarning, match="max_client_size=50"):
            with pytest.raises(RuntimeError, match="no node is left"):
                flower.run_calibration(
                    _grid(data, configs),
                    "qq",
                    planned_clients=list(range(HONEST)),
                    max_client_size=50,
                )

    def test_hello_is_refused_in_milliseconds(self):
        # A session's checks of hostile announcements never allocate n rows.
        def exchange(requests, timeout):
            replies = {
                node: {
                    "label": node,
                    "n": 2**62 if node % 2 else 10**12,
                    "fingerprint": "f",
                    "nonce": request["nonce"],
                }
                for node, request in requests.items()
            }
            return replies, {}

        session = ServerSession(
            exchange, range(1000), timeout=1.0, planned_clients=range(1000)
        )
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InvalidMessageWarning)
            with pytest.raises(RuntimeError, match="no node is left"):
                session.hello(calibration=True)
        assert time.perf_counter() - start < 5.0
        assert len(session.invalid) == 1000


def _quiet_run(grid):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return flower.run_calibration(grid, "qq", alpha=0.1)


# --------------------------------------------------------------------------
# The plan itself


class TestPlan:
    def test_defaults_are_public(self):
        assert MAX_CLIENT_SIZE == 10**9 and MAX_CLIENTS == 10**5

    def test_pinned_node_ids(self, data):
        configs = [_config(k, k, data) for k in range(HONEST + 1)]
        configs[4]["client-id"] = 0  # node 105 impersonates client 0
        grid = _grid(data, configs)
        ids = grid.get_node_ids()
        pinned = {ids[k]: k for k in range(HONEST)}  # the sixth node is unplanned
        with pytest.warns(InvalidMessageWarning) as caught:
            deployed, report = flower.run_calibration(
                grid, "qq", alpha=0.1, planned_clients=pinned
            )
        texts = _texts(caught)
        assert any(
            "left out without being asked" in t and str(ids[5]) in t for t in texts
        )
        assert any(f"plan pins node {ids[4]} to client 4" in t for t in texts), texts
        assert deployed.clients_.tolist() == [0, 1, 2, 3]
        hello = report.rounds[0]
        assert ids[5] not in hello.bytes_sent  # never asked
        assert set(report.excluded) == {ids[4], ids[5]}

    def test_no_planned_node_connected(self, data):
        grid = _grid(data, [_config(0, 0, data)])
        with pytest.raises(RuntimeError, match="none of the planned nodes"):
            _quiet(flower.run_calibration, grid, "qq", planned_clients={7: 0})

    @pytest.mark.parametrize(
        "plan, error, match",
        [
            ([0, 0], ValueError, "repeats client label"),
            ([0, "a"], ValueError, "mixes int and string"),
            ([[0]], ValueError, "a client label is list"),
            ([], ValueError, "is empty"),
            ("abc", TypeError, "sequence of client labels"),
            ({"x": 0}, TypeError, "node ids"),
            (range(11), ValueError, "11 clients > max_clients=10"),
        ],
        ids=str,
    )
    def test_invalid_plans_are_refused(self, plan, error, match):
        with pytest.raises(error, match=match):
            check_planned_clients(plan, max_clients=10)

    def test_bounds_are_validated(self):
        for name in ("max_client_size", "max_clients"):
            with pytest.raises(ValueError, match=f"{name} must be >= 1"):
                ServerSession(lambda r, t: ({}, {}), [1], timeout=1.0, **{name: 0})
            with pytest.raises(TypeError, match=f"{name} must be an int"):
                ServerSession(lambda r, t: ({}, {}), [1], timeout=1.0, **{name: 1.5})

    def test_too_many_connected_nodes_without_a_pinned_plan(self):
        start = time.perf_counter()
        with pytest.raises(ValueError, match="100001 nodes are connected"):
            _quiet(
                ServerSession,
                lambda r, t: ({}, {}),
                range(MAX_CLIENTS + 1),
                timeout=1.0,
                planned_clients=[0],
            )
        assert time.perf_counter() - start < 5.0

    def test_run_config_planned_clients(self):
        parse = _server_app._parse_planned_clients
        assert parse("0, 1,2") == [0, 1, 2]
        assert parse("a,b") == ["a", "b"]
        assert parse("101=0,102=1") == {101: 0, 102: 1}
        assert parse("101=a") == {101: "a"}
        assert parse("") is None and parse(None) is None
        with pytest.raises(ValueError, match="node ids must be ints"):
            parse("x=0")

    def test_server_app_takes_the_plan_from_the_run_config(self, data):
        grid = _hostile_grid(data)
        seen = []
        app = flower.make_server_app(on_result=lambda result, c: seen.append(result))
        run_config = {"planned-clients": ",".join(str(k) for k in PLANNED)}
        context = Context(1, 1, {}, RecordDict(), run_config)
        _quiet(app, grid, context)
        report = seen[0].report
        assert report.clients.tolist() == list(range(HONEST))
        assert not any("not checked" in w for w in report.warnings)
        assert sum("InvalidMessageWarning" in w for w in report.warnings) == 5

    def test_factory_refuses_a_bad_plan_early(self):
        with pytest.raises(ValueError, match="repeats client label"):
            flower.make_server_app(planned_clients=[1, 1])

    def test_data_fingerprint_is_salted(self):
        X = np.arange(6.0).reshape(3, 2)
        fp = flower._fingerprint.data_fingerprint
        assert fp(X, salt="a") == fp(X.copy(), salt="a") != fp(X, salt="b")
        assert fp(X, salt="a") != fp(X + 1e-12, salt="a")
        assert len(fp(X)) == 32 and fp(None, None) == ""


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return func(*args, **kwargs)


def test_nan_is_not_a_size():
    # float('nan') is not an Integral: refused like any non-integer size.
    session = ServerSession(
        lambda requests, timeout: (
            {
                node: {
                    "label": node,
                    "n": math.nan,
                    "fingerprint": "f",
                    "nonce": r["nonce"],
                }
                for node, r in requests.items()
            },
            {},
        ),
        [1, 2],
        timeout=1.0,
        planned_clients=[1, 2],
    )
    with pytest.warns(InvalidMessageWarning, match="field 'n' is nan"):
        with pytest.raises(RuntimeError):
            session.hello(calibration=True)


def _hello_exchange(sent, override):
    """An exchange whose node 1 answers hello with ``override`` merged in."""

    def exchange(requests, timeout):
        sent.append(requests)
        return {
            node: {
                "label": node,
                "n": 5,
                "fingerprint": "f",
                "nonce": r["nonce"],
                **(override if node == 1 else {}),
            }
            for node, r in requests.items()
        }, {}

    return exchange


def test_an_array_nonce_is_a_replay_not_a_crash():
    # An array compared with a string is element-wise: it must be refused by
    # type, leaving the node out, not stop the run with "truth value ambiguous".
    session = ServerSession(
        _hello_exchange([], {"nonce": np.array(["a", "b"])}),
        [1, 2],
        timeout=1.0,
        planned_clients=[1, 2],
    )
    with pytest.warns(InvalidMessageWarning, match="carries no nonce"):
        assert session.hello(calibration=True) == [2]
    assert session.invalid == {1}


def test_an_array_model_fingerprint_is_invalid_not_a_crash():
    from skfedcp.flower._calibrate import _check_replies

    ok = {1: {"fingerprint": np.array(["f", "f"])}, 2: {"fingerprint": "f"}}
    invalid = {}
    _check_replies(ok, invalid, "f")
    assert list(ok) == [2] and list(invalid) == [1]
    assert "not f" in invalid[1]


def test_the_data_fingerprint_salt_is_fresh_per_run():
    # The salt is the session's tag from the secrets module: fresh per run,
    # not from NumPy's global state (reseeding it changes nothing).
    salts, state = [], np.random.get_state()  # noqa: NPY002
    try:
        for _ in range(2):
            np.random.seed(0)  # noqa: NPY002
            sent = []
            session = ServerSession(
                _hello_exchange(sent, {}), [1, 2], timeout=1.0, planned_clients=[1, 2]
            )
            session.hello(calibration=True)
            (salt,) = {r["salt"] for r in sent[0].values()}
            assert salt == session.tag and len(salt) == 16
            salts.append(salt)
    finally:
        np.random.set_state(state)  # noqa: NPY002
    assert salts[0] != salts[1]
