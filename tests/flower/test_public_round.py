"""One plan policy, and a round whose shape the server fixes, never a vote.

* The Flower entry points and ``chi2_server_plan`` take their bounds from
  the package's plan policy (``skfedcp.config_context``) unless a run
  passes its own: a server sets them in one place.
* FED-chi2 over Flower: the class list and the feature count are public
  parameters fixed before the round; three nodes of five announcing another
  feature count are left out (the honest result is the in-process fit on
  the honest nodes), and without ``n_features`` a disagreement is an error
  naming the nodes, never a majority.
* LDP-L over Flower: the class count is the shared model's, fixed before the
  round; a node sending 2-column scores to a 3-class round is excluded.
"""

import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.utils import check_random_state

from skfedcp import config_context
from skfedcp.calibrators import CALIBRATORS
from skfedcp.calibrators._messages import client_share_problems
from skfedcp.exceptions import InvalidMessageError, InvalidMessageWarning
from skfedcp.feature_selection import FedChi2Selector, chi2_server_plan
from skfedcp.federated._secure_aggregation import _draw_seeds

flwr = pytest.importorskip("flwr")

from _reference import assert_same_fit  # noqa: E402
from flwr.app import Context, Message, RecordDict  # noqa: E402

from skfedcp import flower  # noqa: E402
from skfedcp.flower import _wire  # noqa: E402
from skfedcp.flower._calibrate import calibrate_nodes  # noqa: E402
from skfedcp.flower._local import InMemoryGrid  # noqa: E402
from skfedcp.flower._session import ServerSession, check_planned_clients  # noqa: E402

M = 5
PLANNED = list(range(M))
RS = 3


@pytest.fixture(scope="module")
def data():
    X, y = load_digits(return_X_y=True)
    return {
        "X": X,
        "y": y,
        "ids": np.arange(y.shape[0]) % M,
        "seed": _draw_seeds(check_random_state(RS), 1)[0],
    }


def _grid(data, wrap=None):
    def load(context):
        mask = data["ids"] == context.node_config["client-id"]
        return data["X"][mask], data["y"][mask]

    app = flower.make_client_app(load, load_selection_data=load)
    configs = [{"client-id": k, "projection-seed": str(data["seed"])} for k in range(M)]
    return InMemoryGrid(app if wrap is None else wrap(app), configs)


def _hello_edit(labels, edit):
    """Nodes ``labels`` edit their hello reply (dishonest announcements)."""

    def wrap(app):
        def call(message, context):
            reply = app(message, context)
            request = _wire._from_record_dict(message.content)
            if (
                request["kind"] != "hello"
                or context.node_config["client-id"] not in labels
            ):
                return reply
            payload = _wire._from_record_dict(reply.content)
            edit(payload)
            return Message(_wire._to_record_dict(payload), reply_to=message)

        return call

    return wrap


def _reference(data, keep):
    return FedChi2Selector(k=10, random_state=RS).fit(
        data["X"][keep], data["y"][keep], data["ids"][keep]
    )


# --------------------------------------------------------------------------
# One policy


class TestOnePolicy:
    def test_session_bounds_default_to_the_policy(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            session = ServerSession(lambda r, t: ({}, {}), [1], timeout=1.0)
            assert (session.max_client_size, session.max_clients) == (10**9, 10**5)
            assert session.max_classes == 10**4
            with config_context(max_client_size=50, max_clients=7, max_classes=3):
                session = ServerSession(lambda r, t: ({}, {}), [1], timeout=1.0)
                assert (session.max_client_size, session.max_clients) == (50, 7)
                assert session.max_classes == 3
                with pytest.raises(ValueError, match="8 nodes are connected"):
                    ServerSession(lambda r, t: ({}, {}), range(8), timeout=1.0)
                with pytest.raises(ValueError, match="max_clients=7"):
                    check_planned_clients(range(8))
                # A run's own bound still wins over the policy.
                session = ServerSession(
                    lambda r, t: ({}, {}), [1], timeout=1.0, max_clients=9
                )
                assert session.max_clients == 9

    def test_chi2_server_plan_defaults_to_the_policy(self):
        sizes, bounds = [10, 20, 30], [np.ones(2)] * 3
        result = chi2_server_plan(sizes, bounds, n_classes=2, n_features=2)
        assert result.n_samples == 60
        with config_context(max_clients=2):
            with pytest.raises(InvalidMessageError, match="max_clients=2"):
                chi2_server_plan(sizes, bounds, n_classes=2, n_features=2)
        with config_context(max_client_size=15):
            with pytest.raises(InvalidMessageError, match="max_client_size=15"):
                chi2_server_plan(sizes, bounds, n_classes=2, n_features=2)
            # Explicit bounds override the policy.
            result = chi2_server_plan(
                sizes, bounds, n_classes=2, n_features=2, max_client_size=30
            )
            assert result.n_samples == 60
        # 10**5 clients are within the default policy (the old private
        # default was 10**4).
        many = chi2_server_plan(
            np.ones(10**4 + 1, dtype=np.int64),
            np.ones((10**4 + 1, 1)),
            n_classes=2,
            n_features=1,
            integer_x=True,
        )
        assert many.n_samples == 10**4 + 1

    def test_chi2_server_plan_shape_within_the_policy(self):
        with config_context(max_classes=3, max_features=2):
            with pytest.raises(ValueError, match="max_classes=3"):
                chi2_server_plan([1], [np.ones(2)], n_classes=4, n_features=2)
            with pytest.raises(ValueError, match="max_features=2"):
                chi2_server_plan([1], [np.ones(3)], n_classes=2, n_features=3)

    def test_node_class_lists_within_the_policy(self, data):
        def edit(payload):
            payload["classes"] = np.arange(20)

        grid = _grid(data, wrap=_hello_edit({1}, edit))
        with config_context(max_classes=10):
            with pytest.warns(InvalidMessageWarning, match="max_classes=10"):
                deployed, report = flower.run_chi2_selection(
                    grid, FedChi2Selector(k=10), planned_clients=PLANNED
                )
        assert 1 not in deployed.clients_.tolist()
        assert_same_fit(deployed, _reference(data, data["ids"] != 1))

    def test_public_classes_within_the_policy(self, data):
        grid = _grid(data)
        with config_context(max_classes=5):
            with pytest.raises(ValueError, match="max_classes=5"):
                flower.run_chi2_selection(
                    grid,
                    FedChi2Selector(k=10),
                    classes=np.arange(10),
                    planned_clients=PLANNED,
                )

    def test_server_app_runs_under_the_policy_it_was_built_with(self, data):
        grid = _grid(data)
        seen = []
        with config_context(max_client_size=100):  # nodes hold ~360 rows
            app = flower.make_server_app(
                calibrators=(),
                selector=FedChi2Selector(k=10),
                planned_clients=PLANNED,
                on_result=lambda result, context: seen.append(result),
            )
        context = Context(1, 1, {}, RecordDict(), {})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InvalidMessageWarning)
            with pytest.raises(RuntimeError, match="no node is left"):
                app(grid, context)
        # The run config raises the bound for one run.
        run_config = {"max-client-size": 10**6}
        app(_grid(data), Context(1, 1, {}, RecordDict(), run_config))
        assert seen[0].selector.n_clients_ == M


# --------------------------------------------------------------------------
# FED-chi2: the shape of the round is public


class TestChi2PublicShape:
    def test_three_of_five_announcing_another_width_are_left_out(self, data):
        width = data["X"].shape[1]

        def edit(payload):
            payload["n_features"] = width + 1
            payload["column_bound"] = np.ones(width + 1)

        liars = {0, 2, 4}
        grid = _grid(data, wrap=_hello_edit(liars, edit))
        with pytest.warns(InvalidMessageWarning) as caught:
            deployed, report = flower.run_chi2_selection(
                grid,
                FedChi2Selector(k=10),
                classes=np.arange(10),
                n_features=width,
                planned_clients=PLANNED,
            )
        assert deployed.clients_.tolist() == [1, 3]
        assert any("public n_features is 64" in str(w.message) for w in caught)
        keep = np.isin(data["ids"], [1, 3])
        assert_same_fit(deployed, _reference(data, keep))
        assert len(report.excluded) == 3

    def test_without_n_features_a_disagreement_is_an_error(self, data):
        def edit(payload):
            payload["n_features"] = 3
            payload["column_bound"] = np.ones(3)

        grid = _grid(data, wrap=_hello_edit({0, 2, 4}, edit))
        with pytest.raises(ValueError, match="no public n_features") as info:
            flower.run_chi2_selection(
                grid, FedChi2Selector(k=10), planned_clients=PLANNED
            )
        # Every node is named with its count; none is blamed by a majority.
        assert "(client 1): 64" in str(info.value)
        assert "(client 0): 3" in str(info.value)

    def test_bad_n_features_is_refused(self, data):
        with pytest.raises(ValueError, match="n_features must be >= 1"):
            flower.run_chi2_selection(
                _grid(data), FedChi2Selector(k=3), n_features=0, planned_clients=PLANNED
            )

    def test_announced_bounds_above_max_value_are_left_out(self, data):
        width = data["X"].shape[1]

        def edit(payload):  # totals of values far above the public 16
            payload["column_bound"] = np.full(width, 2.0**40)

        grid = _grid(data, wrap=_hello_edit({3}, edit))
        with pytest.warns(InvalidMessageWarning, match="column_bound"):
            deployed, _ = flower.run_chi2_selection(
                grid,
                FedChi2Selector(k=10),
                classes=np.arange(10),
                max_value=16.0,
                planned_clients=PLANNED,
            )
        assert deployed.clients_.tolist() == [0, 1, 2, 4]
        assert_same_fit(deployed, _reference(data, data["ids"] != 3))

    def test_user_frac_bits_that_could_wrap_are_refused(self, data):
        with pytest.raises(ValueError, match="frac_bits"):
            flower.run_chi2_selection(
                _grid(data),
                FedChi2Selector(k=10, frac_bits=60),
                classes=np.arange(10),
                planned_clients=PLANNED,
            )


# --------------------------------------------------------------------------
# LDP-L: the class count is the model's


def test_ldp_l_class_count_is_the_models():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300 + M * 200, 4))
    y = np.digitize(X[:, 0], [-0.5, 0.5])  # three classes
    clf = LogisticRegression().fit(X[:300], y[:300])
    X, y = X[300:], y[300:]
    ids = np.repeat(np.arange(M), 200)

    def load_data(context):
        k = context.node_config["client-id"]
        return X[ids == k], y[ids == k]

    def two_columns(payload):  # hostile: 2-column scores, labels in range
        payload["message.scores"] = payload["message.scores"][:, :2].copy()
        payload["message.noisy_labels"] = payload["message.noisy_labels"] % 2

    app = flower.make_client_app(
        load_data,
        load_model=lambda c: clf,
        conformity_score="lac",
        allow_raw_scores=True,
    )
    seeds = flower.simulation_seeds(RS, M)

    def wrap(app):
        def call(message, context):
            reply = app(message, context)
            request = _wire._from_record_dict(message.content)
            if request["kind"] != "calibrate" or context.node_config[
                "client-id"
            ] not in (0, 1):
                return reply
            payload = _wire._from_record_dict(reply.content)
            two_columns(payload)
            return Message(_wire._to_record_dict(payload), reply_to=message)

        return call

    grid = InMemoryGrid(
        wrap(app), [{"client-id": k, "seed": seeds[k]} for k in range(M)]
    )
    seen = []
    server = flower.make_server_app(
        calibrators=(CALIBRATORS["ldp-l"](epsilon=3.0),),
        load_model=lambda c: clf,
        conformity_score="lac",
        planned_clients=PLANNED,
        random_state=RS,
        on_result=lambda result, context: seen.append(result),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        server(grid, Context(1, 1, {}, RecordDict(), {}))
    fitted = seen[0].calibrators["ldp-l"]
    # The honest three-column nodes are kept; the two hostile ones excluded.
    assert fitted.n_classes_ == 3
    assert fitted.excluded_clients_.tolist() == [0, 1]
    assert fitted.clients_.tolist() == [2, 3, 4]
    assert any("has 2 columns; the plan has 3" in str(w.message) for w in caught)


# --------------------------------------------------------------------------
# LDP-S: a node above the public share cap is left out before any query


def test_ldp_s_node_above_the_share_cap_is_left_out_before_any_query():
    grid, deployed, report, texts = _share_cap_run({4: 10**5})
    assert any("max_client_share=0.5" in t for t in texts)
    assert deployed.clients_.tolist() == [0, 1, 2, 3]
    node = grid.get_node_ids()[4]
    assert "announces 100000 users" in report.excluded[node]
    # No query reached it.
    assert all(node not in r.bytes_sent for r in report.rounds[1:])


def _share_cap_run(claims):
    """LDP-S with max_client_share=0.5 where node k announces ``claims[k]`` users."""
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(2)
    X = rng.normal(size=(200 + M * 300, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=X.shape[0])
    model = LinearRegression().fit(X[:200], y[:200])
    X, y = X[200:], y[200:]
    ids = np.repeat(np.arange(M), 300)

    def load_data(context):
        k = context.node_config["client-id"]
        return X[ids == k], y[ids == k]

    app = flower.make_client_app(load_data, load_model=lambda c: model)
    for label, n in claims.items():

        def claim(payload, n=n):
            payload["n"] = n

        app = _hello_edit({label}, claim)(app)
    grid = InMemoryGrid(app, [{"client-id": k} for k in range(M)])
    cal = CALIBRATORS["ldp-s"](
        epsilon=8.0, score_bounds=(0.0, 5.0), n_groups=4, max_client_share=0.5
    )
    with pytest.warns(InvalidMessageWarning) as caught:
        deployed, report = flower.run_calibration(
            grid, cal, alpha=0.1, planned_clients=PLANNED, random_state=RS
        )
    return grid, deployed, report, [str(w.message) for w in caught]


def test_ldp_s_share_cap_leaves_out_every_node_above_it_once_others_are_out():
    # Node 4 announces 10^5 users (0.97 of all). Without it, node 3's 2,000
    # are 0.69 of the 2,900 left: above the cap too. Both are left out before
    # any query, each named; the run goes on with nodes 0-2 (with the cap
    # checked once on all announced sizes, server_init's check of the reduced
    # total stopped the run, naming an index into the reduced list).
    grid, deployed, report, texts = _share_cap_run({3: 2000, 4: 10**5})
    assert deployed.clients_.tolist() == [0, 1, 2]
    for label, n, share in ((3, 2000, "0.69"), (4, 10**5, "0.972")):
        node = grid.get_node_ids()[label]
        assert f"announces {n} users, {share}" in report.excluded[node]
        assert any(f"node {node} (client {label})" in t for t in texts)
        assert all(node not in r.bytes_sent for r in report.rounds[1:])
    # What is left respects the cap, so the server's own check agrees.
    assert client_share_problems(deployed.n_per_client_, 0.5, unit="users") == []


class _Stop(Exception):
    pass


class _FirstRound:
    """A server session stub: nodes announcing ``sizes``; ``query`` keeps the
    first round's requests and the server's memory peak, then stops the run."""

    tag = "run"

    def __init__(self, sizes):
        self.invalid = set()
        self.info = {k: {"n": n, "label": k} for k, n in enumerate(sizes)}

    def labels(self, nodes):
        return np.asarray([self.info[n]["label"] for n in nodes])

    def exclude(self, *args, **kwargs):
        raise AssertionError("no node is left out here")

    def query(self, name, requests):
        self.requests = requests
        self.peak = tracemalloc.get_traced_memory()[1]
        raise _Stop


def test_ldp_s_request_does_not_grow_with_the_announced_users():
    # The server sends a node its index, its row of T + 1 group counts and
    # the 128-bit key; the node derives its asked users. Listing them cost
    # the server O(n_j) per node and round (2 GB per round at 9 x 10^7).
    cal = CALIBRATORS["ldp-s"](epsilon=8.0, score_bounds=(0.0, 5.0), n_groups=4)
    runs = {}
    for n in (10**3, 10**7):
        session = _FirstRound([n, 1000, 1000, 1000, 1000])
        tracemalloc.start()
        try:
            with warnings.catch_warnings(), pytest.raises(_Stop):
                warnings.simplefilter("ignore")
                calibrate_nodes(
                    session,
                    list(range(5)),
                    cal,
                    alpha=0.1,
                    fingerprint="",
                    random_state=RS,
                )
        finally:
            tracemalloc.stop()
        runs[n] = session
    small, big = runs[10**3].requests[0], runs[10**7].requests[0]
    assert big.keys() == small.keys()
    assert "users" not in big
    arrays = {k: v.nbytes for k, v in big.items() if isinstance(v, np.ndarray)}
    assert arrays == {"group_counts": (4 + 1) * 8, "assignment_key": 16}
    assert arrays == {
        k: v.nbytes for k, v in small.items() if isinstance(v, np.ndarray)
    }
    assert all(isinstance(v, int | float | str | np.ndarray) for v in big.values())
    # The node's group of 2.5 x 10^6 users would take 20 MB as a list; the
    # server's peak while posing the round is that of a node of 10^3 users.
    assert runs[10**7].peak <= runs[10**3].peak + 64 * 1024
