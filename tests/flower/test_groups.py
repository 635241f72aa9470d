"""Group-conditional (Mondrian) calibration over Flower: one message per cell.

Every message goes through Flower's own serialization and the node's
``ClientApp`` (``InMemoryGrid``, no processes). The deployed
:class:`~skfedcp.calibrators.GroupedCalibrator` must equal the in-process
``fit`` bit for bit; hostile nodes (a group outside the public list, a
duplicated cell, a non-finite value) are each left out with a warning
naming the node and the field, and the honest result is the in-process fit
on the honest nodes. ``test_deployment_groups.py`` runs the same on a real
loopback deployment.
"""

import json
import math
import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from skfedcp.calibrators import CALIBRATORS, GroupedCalibrator
from skfedcp.exceptions import InvalidMessageWarning, NodeExcludedWarning

flwr = pytest.importorskip("flwr")

from _reference import assert_same_fit  # noqa: E402
from flwr.app import Context, Message, RecordDict  # noqa: E402

from skfedcp import flower  # noqa: E402
from skfedcp.flower import _wire  # noqa: E402
from skfedcp.flower._local import InMemoryGrid  # noqa: E402

N_NODES = 6
HONEST = 4  # nodes 0..3; 4 and 5 are hostile in the hostile tests
N = 150  # rows per node
GROUPS = [0, 1, 2, 3, 5]  # public; group 5 has no rows
RS = 11


def _group_of(X):
    return (X[:, 0] > 0).astype(np.int64) + 2 * (X[:, 1] > 1.0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300 + N_NODES * N, 3))
    y = X @ [1.0, -2.0, 0.5] + rng.normal(size=X.shape[0]) * (1 + 2 * (X[:, 0] > 0))
    model = LinearRegression().fit(X[:300], y[:300])
    X, y = X[300:], y[300:]
    ids = np.repeat(np.arange(N_NODES), N)
    scores = np.abs(y - model.predict(X))
    return {"model": model, "X": X, "y": y, "ids": ids, "scores": scores}


def _grid(data, n_nodes=N_NODES, wrap=None, seeds=None):
    def load_data(context):
        mask = data["ids"] == context.node_config["client-id"]
        return data["X"][mask], data["y"][mask]

    app = flower.make_client_app(
        load_data,
        load_model=lambda context: data["model"],
        allow_raw_scores=True,
        group_by=_group_of,
    )
    configs = [{"client-id": k} for k in range(n_nodes)]
    for k, seed in enumerate(seeds or []):
        configs[k]["seed"] = seed
    return InMemoryGrid(app if wrap is None else wrap(app), configs)


def _reference(data, cal, keep, **kwargs):
    return GroupedCalibrator(
        cal, min_group_size=kwargs.pop("min_group_size", None)
    ).fit(
        data["scores"][keep],
        data["ids"][keep],
        group_ids=_group_of(data["X"][keep]),
        alpha=0.1,
        known_groups=GROUPS,
        **kwargs,
    )


def _quiet(run, *args, **kwargs):
    """``run`` without its notes (no plan, +inf groups), but with the
    warnings that name excluded nodes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("always", InvalidMessageWarning)
        return run(*args, **kwargs)


class TestEqualsInProcessFit:
    @pytest.mark.parametrize("alias", ["qq", "central", "avg"])
    @pytest.mark.parametrize("min_group_size", [None, 200])
    def test_deterministic_strategies_bit_for_bit(self, data, alias, min_group_size):
        grid = _grid(data)
        deployed, report = _quiet(
            flower.run_calibration,
            grid,
            alias,
            alpha=0.1,
            groups=GROUPS,
            min_group_size=min_group_size,
            planned_clients=list(range(N_NODES)),
        )
        keep = np.ones(data["ids"].shape[0], dtype=bool)
        reference = _quiet(_reference, data, alias, keep, min_group_size=min_group_size)
        assert isinstance(deployed, GroupedCalibrator)
        np.testing.assert_array_equal(deployed.threshold_, reference.threshold_)
        assert_same_fit(deployed, reference)
        assert report.clients.tolist() == list(range(N_NODES))
        assert [r.name for r in report.rounds] == [
            "hello",
            f"calibrate:{alias}[groups]",
        ]
        if min_group_size is None:
            # One message per non-empty (client, group) cell; group 5 has none.
            cells = np.unique(np.stack([data["ids"], _group_of(data["X"])]), axis=1)
            assert deployed.messages_["client"].shape[0] == cells.shape[1]
            assert np.isposinf(deployed.threshold_[-1])
        else:
            assert deployed.merged_groups_.size > 0

    def test_dp_qq_with_the_simulation_seeds(self, data):
        cal = CALIBRATORS["dp-qq"](epsilon=8.0, score_bounds=(0.0, 6.0))
        seeds = flower.simulation_seeds(RS, N_NODES, grouped=True)
        grid = _grid(data, seeds=seeds)
        deployed, _ = _quiet(
            flower.run_calibration,
            grid,
            cal,
            alpha=0.2,
            groups=GROUPS,
            random_state=RS,
            planned_clients=list(range(N_NODES)),
        )
        keep = np.ones(data["ids"].shape[0], dtype=bool)
        reference = _quiet(
            GroupedCalibrator(cal).fit,
            data["scores"][keep],
            data["ids"][keep],
            group_ids=_group_of(data["X"][keep]),
            alpha=0.2,
            known_groups=GROUPS,
            random_state=RS,
        )
        assert np.isfinite(reference.threshold_[:2]).all()
        assert_same_fit(deployed, reference)
        assert deployed.epsilon_spent_ == 8.0

    def test_grouped_seeds_are_the_root(self):
        assert flower.simulation_seeds(7, 3, grouped=True) == ["7", "7", "7"]
        child = np.random.SeedSequence(7).spawn(2)[1]
        assert flower.simulation_seeds(child, 2, grouped=True) == ["7:1", "7:1"]

    def test_server_app_runs_every_strategy_per_group(self, data, tmp_path):
        grid = _grid(data)
        results = []
        app = flower.make_server_app(
            calibrators=("qq", "avg"),
            groups=GROUPS,
            on_result=lambda result, context: results.append(result),
        )
        output = tmp_path / "result.pkl"
        context = Context(1, 1, {}, RecordDict(), {"output": str(output)})
        _quiet(app, grid, context)
        (result,) = results
        summary = json.loads(output.with_suffix(".json").read_text())
        assert len(summary["thresholds"]["qq"]) == len(GROUPS)  # one per group
        keep = np.ones(data["ids"].shape[0], dtype=bool)
        for alias in ("qq", "avg"):
            reference = _quiet(_reference, data, alias, keep)
            assert_same_fit(result.calibrators[alias], reference)

    def test_strategies_without_a_per_group_round_are_refused(self, data):
        with pytest.raises(ValueError, match="supports the strategies"):
            flower.make_server_app(calibrators=("ldp-s",), groups=GROUPS)
        with pytest.raises(ValueError, match="supports the strategies"):
            _quiet(flower.run_calibration, _grid(data), "dp-central", groups=GROUPS)

    @pytest.mark.parametrize(
        "groups, match",
        [
            ([], "non-empty"),
            ([[0, 1]], "1-D"),
            ([0.5, 1.5], "int or string"),
            ([0, 0, 1], "repeats"),
        ],
    )
    def test_bad_public_group_list(self, data, groups, match):
        with pytest.raises(ValueError, match=match):
            _quiet(flower.run_calibration, _grid(data), "qq", groups=groups)

    def test_min_group_size_needs_groups(self, data):
        with pytest.raises(ValueError, match="min_group_size is for"):
            _quiet(flower.run_calibration, _grid(data), "qq", min_group_size=5)

    def test_node_without_group_by_fails_the_grouped_hello(self, data):
        def load_data(context):
            mask = data["ids"] == context.node_config["client-id"]
            return data["X"][mask], data["y"][mask]

        app = flower.make_client_app(load_data, load_model=lambda c: data["model"])
        grid = InMemoryGrid(app, [{"client-id": k} for k in range(2)])
        with pytest.raises(RuntimeError, match="no node is left"):
            with pytest.warns(UserWarning, match="has no group_by"):
                flower.run_calibration(
                    grid, "qq", groups=GROUPS, planned_clients=[0, 1]
                )


def test_class_groups_with_string_labels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 4))
    y = np.array(["ant", "bee", "cat"])[(X[:, 0] > 0) + (X[:, 1] > 0.5).astype(int)]
    model = LogisticRegression().fit(X[:300], y[:300])
    X, y = X[300:], y[300:]
    ids = np.arange(600) % 4

    def load_data(context):
        mask = ids == context.node_config["client-id"]
        return X[mask], y[mask]

    app = flower.make_client_app(
        load_data, load_model=lambda c: model, conformity_score="lac", group_by="class"
    )
    grid = InMemoryGrid(app, [{"client-id": k} for k in range(4)])
    deployed, _ = _quiet(
        flower.run_calibration, grid, "qq", groups=model.classes_, alpha=0.1
    )
    from skfedcp.scores import LACScore

    proba = model.predict_proba(X)
    scores = LACScore().conformity_score(np.searchsorted(model.classes_, y), proba)
    reference = _quiet(
        GroupedCalibrator("qq").fit,
        scores,
        ids,
        group_ids=y,
        alpha=0.1,
        known_groups=model.classes_,
    )
    assert_same_fit(deployed, reference)


# --------------------------------------------------------------------------
# Hostile nodes: an unknown group, a duplicated cell, a non-finite value


def _tampering(edits):
    """Node ``label`` edits its reply of request kind ``kind`` with ``edit``."""

    def wrap(app):
        def call(message, context):
            reply = app(message, context)
            kind = _wire._from_record_dict(message.content)["kind"]
            edit = edits.get((context.node_config["client-id"], kind))
            if edit is None:
                return reply
            payload = _wire._from_record_dict(reply.content)
            edit(payload)
            return Message(_wire._to_record_dict(payload), reply_to=message)

        return call

    return wrap


def _unknown_group(payload):
    """One row moved to a group the server never listed."""
    payload["group_labels"] = np.append(payload["group_labels"], 9)
    payload["group_n"] = np.append(payload["group_n"], 1)
    payload["group_n"][0] -= 1


def _duplicated_cell(payload):
    labels, counts = payload["group_labels"], payload["group_n"]
    payload["group_labels"] = np.append(labels, labels[0])
    half = counts[0] // 2
    payload["group_n"] = np.append(counts, half)
    payload["group_n"][0] -= half


def _non_finite(payload):
    payload["message.1.quantile"] = math.nan


def _node_of(grid, label):
    return next(
        n for n, c in grid.contexts.items() if c.node_config["client-id"] == label
    )


class TestHostileNodes:
    def test_each_is_left_out_and_the_honest_fit_is_bit_for_bit(self, data):
        edits = {
            (4, "hello"): _unknown_group,
            (5, "hello"): _duplicated_cell,
            (6, "calibrate"): _non_finite,
        }
        n_nodes = 7
        data = dict(data)
        # A seventh node, holding node 0's rows shifted (distinct data).
        data["X"] = np.concatenate([data["X"], data["X"][data["ids"] == 0] + 0.01])
        data["y"] = np.concatenate([data["y"], data["y"][data["ids"] == 0]])
        data["ids"] = np.concatenate([data["ids"], np.full(N, 6)])
        data["scores"] = np.abs(data["y"] - data["model"].predict(data["X"]))
        grid = _grid(data, n_nodes=n_nodes, wrap=_tampering(edits))
        with pytest.warns(InvalidMessageWarning) as caught:
            deployed, report = _quiet(
                flower.run_calibration,
                grid,
                "qq",
                alpha=0.1,
                groups=GROUPS,
                planned_clients=list(range(n_nodes)),
            )
        honest = ~np.isin(data["ids"], [4, 5, 6])
        reference = _quiet(_reference, data, "qq", honest)
        np.testing.assert_array_equal(deployed.threshold_, reference.threshold_)
        assert_same_fit(deployed, reference)
        assert report.clients.tolist() == [0, 1, 2, 3]
        texts = [str(w.message) for w in caught]

        def warned(label, *parts):
            node = _node_of(grid, label)
            return any(
                f"node {node} (client {label}) is left out" in t
                and all(p in t for p in parts)
                for t in texts
            )

        assert warned(4, "field 'group_labels'", "[9]", "outside the server's public")
        assert warned(5, "field 'group_labels'", "a duplicated cell")
        assert warned(6, "field 'quantile'", "nan", "recalibrated with the remaining")
        names = [r.name for r in report.rounds]
        assert names == ["hello", "calibrate:qq[groups]", "calibrate:qq[groups]"]
        assert set(report.excluded) == {_node_of(grid, k) for k in (4, 5, 6)}

    @pytest.mark.parametrize(
        "edit, match",
        [
            (
                lambda p: p.update(group_labels=p["group_labels"].astype(str)),
                "int group",
            ),
            (lambda p: p.update(group_n=p["group_n"] + 1), "sums to"),
            (
                lambda p: p.update(group_n=p["group_n"].astype(float)),
                "'group_n' is not",
            ),
            (lambda p: p.update(group_n=p["group_n"] * 0), "outside \\[1"),
            (lambda p: p.pop("group_labels"), "'group_labels' is not"),
            (
                lambda p: p.update(
                    group_labels=np.zeros(9, dtype=int), group_n=np.ones(9, dtype=int)
                ),
                "repeats group\\(s\\) \\[0\\]",
            ),
        ],
    )
    def test_malformed_cells_are_refused_before_any_plan(self, data, edit, match):
        grid = _grid(data, n_nodes=5, wrap=_tampering({(4, "hello"): edit}))
        with pytest.warns(InvalidMessageWarning, match=match):
            deployed, report = _quiet(
                flower.run_calibration, grid, "qq", groups=GROUPS, alpha=0.1
            )
        keep = data["ids"] < 4
        assert_same_fit(deployed, _quiet(_reference, data, "qq", keep))
        assert [r.name for r in report.rounds][-1] == "calibrate:qq[groups]"
        assert len(report.rounds) == 2

    def test_a_message_for_a_round_without_rows_is_invalid(self, data):
        def extra(payload):
            payload["message.7.quantile"] = 1.0

        grid = _grid(data, n_nodes=5, wrap=_tampering({(4, "calibrate"): extra}))
        with pytest.warns(InvalidMessageWarning, match="group round\\(s\\) \\[7\\]"):
            deployed, _ = _quiet(flower.run_calibration, grid, "qq", groups=GROUPS)
        assert_same_fit(deployed, _quiet(_reference, data, "qq", data["ids"] < 4))

    @pytest.mark.parametrize("alias", ["qq", "central"])
    @pytest.mark.filterwarnings("ignore::skfedcp.exceptions.InfiniteThresholdWarning")
    def test_pinned_copy_of_a_node_counts_its_cells_once(self, data, alias):
        # A seventh planned, authenticated node holds node 0's rows exactly:
        # its cells are node 0's. Both node ids are pinned (not Sybils), but
        # the rows are one data set: the copy is left out and every group's
        # fit is the in-process one with those cells once (they counted
        # twice before).
        data = dict(data)
        copy = data["ids"] == 0
        data["X"] = np.concatenate([data["X"], data["X"][copy]])
        data["y"] = np.concatenate([data["y"], data["y"][copy]])
        data["ids"] = np.concatenate([data["ids"], np.full(N, N_NODES)])
        data["scores"] = np.abs(data["y"] - data["model"].predict(data["X"]))
        grid = _grid(data, n_nodes=N_NODES + 1)
        pinned = {n: c.node_config["client-id"] for n, c in grid.contexts.items()}
        with pytest.warns(NodeExcludedWarning, match="holds the same rows") as caught:
            deployed, report = flower.run_calibration(
                grid, alias, alpha=0.1, groups=GROUPS, planned_clients=pinned
            )
        assert any(
            f"node {_node_of(grid, N_NODES)} (client {N_NODES}) is left out" in t
            and f"node {_node_of(grid, 0)} (client 0)" in t
            for t in [str(w.message) for w in caught]
        )
        assert set(report.excluded) == {_node_of(grid, N_NODES)}
        assert report.clients.tolist() == list(range(N_NODES))
        once = data["ids"] < N_NODES
        reference = _quiet(_reference, data, alias, once)
        np.testing.assert_array_equal(deployed.threshold_, reference.threshold_)
        assert_same_fit(deployed, reference)
        np.testing.assert_array_equal(deployed.n_per_group_, reference.n_per_group_)

    def test_pinned_node_duplicating_a_cell_is_left_out(self, data):
        # A pinned (authenticated) node is still checked like any other: a
        # cell announced twice is refused before any plan, never counted.
        grid = _grid(data, n_nodes=5, wrap=_tampering({(4, "hello"): _duplicated_cell}))
        pinned = {n: c.node_config["client-id"] for n, c in grid.contexts.items()}
        with pytest.warns(InvalidMessageWarning, match="a duplicated cell"):
            deployed, report = _quiet(
                flower.run_calibration,
                grid,
                "qq",
                groups=GROUPS,
                alpha=0.1,
                planned_clients=pinned,
            )
        assert set(report.excluded) == {_node_of(grid, 4)}
        assert_same_fit(deployed, _quiet(_reference, data, "qq", data["ids"] < 4))

    def test_dp_qq_excludes_the_hostile_node_in_one_round(self, data):
        cal = CALIBRATORS["dp-qq"](epsilon=8.0, score_bounds=(0.0, 6.0))
        grid = _grid(data, n_nodes=5, wrap=_tampering({(4, "calibrate"): _non_finite}))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            deployed, report = flower.run_calibration(
                grid, cal, groups=GROUPS, alpha=0.2, random_state=RS
            )
        names = [r.name for r in report.rounds]
        assert names == ["hello", "calibrate:dp-qq[groups]"]
        node = _node_of(grid, 4)
        assert "invalid message" in report.excluded[node]
        assert report.clients.tolist() == [0, 1, 2, 3]
        # Its every cell counts as invalid, not only the non-finite one.
        for cal_g in deployed.calibrators_[:3]:
            assert cal_g.excluded_clients_.tolist() == [4]
        assert any("field 'quantile'" in str(w.message) for w in caught)


def test_cell_list_is_bounded_by_the_public_groups():
    """A node repeating one valid label a million times is refused before
    any lookup or sort (the server's work is bounded by the public list);
    labels longer than the public label limit too."""
    from skfedcp.flower._calibrate_groups import _cells_problem

    public = np.array(["a", "b", "c"])
    many = {"group_labels": np.array(["a"] * 10**6), "group_n": np.ones(10**6, int)}
    assert "repeats group(s) ['a'] (a duplicated cell)" in _cells_problem(
        many, public, 100
    )
    long = {"group_labels": np.array(["a" * 300]), "group_n": np.ones(1, int)}
    assert "longer than 256 characters" in _cells_problem(long, public, 100)
    fine = {"group_labels": np.array(["a", "c"]), "group_n": np.array([3, 4]), "n": 7}
    assert _cells_problem(fine, public, 100) is None
