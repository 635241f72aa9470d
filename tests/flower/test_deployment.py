"""A real Flower deployment on loopback: one SuperLink, seven SuperNodes.

Every Flower component runs as a separate process bound to 127.0.0.1
(insecure local mode); the run is submitted with ``flwr run`` to the example
app in ``examples/flower/app``. The results must equal the in-process
``fit`` on the same partition: bit for bit for the deterministic strategies
and FED-chi2, and for the private ones when each node's ``seed`` is the
stream the simulation gives that client (:func:`skfedcp.flower.simulation_seeds`).
Node 5 holds another model version and must be left out of the calibration
(but not of FED-chi2). Node 6 is dishonest: its ClientApp sends NaN as its
QQ message; the server excludes it with an ``InvalidMessageWarning``, asks
the honest nodes again with their own plan, and leaves node 6 out of every
later task of the run. The server runs with a planned node set (run config
``planned-clients``) and four more hostile SuperNodes connect: a Sybil party
running planned clients 7 and 8 over the same rows, an unplanned node 9, and
a planned node 10 that answers QQ with node 0's reply (a replay). Each is
left out with a warning naming it, and the honest results stay bit for bit
the in-process fits.

Run with ``make test-flower`` (``pytest -m flower``).
"""

import pickle
import runpy
import shutil
import warnings
from pathlib import Path

import joblib
import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.utils import check_random_state

from skfedcp.calibrators import CALIBRATORS
from skfedcp.feature_selection import FedChi2Selector
from skfedcp.federated._secure_aggregation import _draw_seeds

pytestmark = pytest.mark.flower
flwr = pytest.importorskip("flwr")

from _reference import assert_same_fit, per_node_fit  # noqa: E402

from skfedcp.flower import simulation_seeds  # noqa: E402
from skfedcp.flower._local import LoopbackDeployment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "flower" / "app"
N_NODES = 7  # nodes 0-4 share the model; node 5 holds another version
WRONG = 5
HOSTILE = 6  # sends a malformed message
HONEST = 5  # nodes 0..4 calibrate
# Hostile SuperNodes beyond the first seven: (client label, data partition).
SYBILS = ((7, 7), (8, 7))  # one party, two planned labels, the same rows
UNPLANNED = (9, 8)  # not in the plan
REPLAYER = (10, 9)  # planned; answers QQ with node 0's reply
N_PARTITIONS = 10
N_SUPERNODES = N_NODES + len(SYBILS) + 2
PLANNED = [*range(N_NODES), *(label for label, _ in SYBILS), REPLAYER[0]]
ROWS_PER_NODE = 300  # enough for DP-QQ (epsilon=1, 100 bins) to be feasible
RS = 7  # random_state of the in-process references
# Each round costs every node a fresh ClientApp process (~3 CPU-s of imports):
# the deterministic "avg" and "central" are checked in test_adapter.py.
STRATEGIES = "qq,dp-qq,ldp-s"
STARTUP_TIMEOUT = 60.0
# Generous: a shared 2-core machine under load runs a ClientApp process (imports
# included) in 5-30 s, and the run has ~55 messages.
RUN_TIMEOUT = 1800.0
STOP_TIMEOUT = 15.0

# The dishonest node runs the demo's ClientApp with its QQ reply tampered.
HOSTILE_APP = """
import math
import os
import pickle
import time
from pathlib import Path

from flwr.app import Message
from flwr.clientapp import ClientApp

from skfedcp.flower._wire import _from_record_dict, _to_record_dict

from .client_app import app as honest

app = ClientApp()


@app.query("skfedcp")
def query(message, context):
    reply = honest(message, context)
    config = context.node_config
    if _from_record_dict(message.content)["kind"] != "calibrate":
        return reply
    capture = config.get("capture-to", "")
    if capture and not Path(capture).exists():  # node 0's first QQ reply leaks
        Path(capture + ".tmp").write_bytes(
            pickle.dumps(_from_record_dict(reply.content))
        )
        os.replace(capture + ".tmp", capture)
    replay = config.get("replay-from", "")
    if replay:  # answer with the leaked reply of node 0
        deadline = time.monotonic() + 100.0
        while not Path(replay).exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        payload = pickle.loads(Path(replay).read_bytes())
        return Message(_to_record_dict(payload), reply_to=message)
    if not config.get("send-invalid", False):
        return reply
    payload = _from_record_dict(reply.content)
    payload["message.quantile"] = math.nan
    return Message(_to_record_dict(payload), reply_to=message)
"""


def _app_with_a_hostile_node(tmp):
    """A copy of the demo app whose ClientApp misbehaves on one node."""
    app = tmp / "app"
    shutil.copytree(APP, app, ignore=shutil.ignore_patterns("__pycache__"))
    (app / "skfedcp_flower_demo" / "hostile_client_app.py").write_text(HOSTILE_APP)
    toml = app / "pyproject.toml"
    text = toml.read_text()
    old = 'clientapp = "skfedcp_flower_demo.client_app:app"'
    assert old in text
    toml.write_text(
        text.replace(old, 'clientapp = "skfedcp_flower_demo.hostile_client_app:app"')
    )
    return app


def _prepare_module():
    return runpy.run_path(str(ROOT / "examples" / "flower" / "prepare_nodes.py"))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flower")
    data = _prepare_module()["prepare"](
        tmp / "data", n_nodes=N_PARTITIONS, rows_per_node=ROWS_PER_NODE, n_train=500
    )
    other_model = tmp / "data" / "other_model.joblib"
    joblib.dump(
        HistGradientBoostingRegressor(max_iter=5).fit(data["X"], data["y"]),
        other_model,
    )
    # The streams the in-process fits give clients 0..4 (the calibrating
    # nodes, in label order) and FedChi2Selector(random_state=RS)'s seed.
    # Nodes 5 and 6 have no seed: they draw OS entropy (never calibrate).
    seeds = simulation_seeds(RS, HONEST)
    projection_seed = _draw_seeds(check_random_state(RS), 1)[0]
    node_configs = []
    for k in range(N_NODES):
        config = {
            "client-id": k,
            "data-path": str(data["node_paths"][k]),
            "model-path": str(other_model if k == WRONG else data["model_path"]),
            "projection-seed": str(projection_seed),
            "allow-raw-scores": True,
        }
        if k < HONEST:
            config["seed"] = seeds[k]
        if k == HOSTILE:
            config["send-invalid"] = True
        node_configs.append(config)
    leaked = tmp / "node0-qq-reply.pkl"
    node_configs[0]["capture-to"] = str(leaked)
    for label, part in (*SYBILS, UNPLANNED, REPLAYER):
        config = {
            "client-id": label,
            "data-path": str(data["node_paths"][part]),
            "model-path": str(data["model_path"]),
            "projection-seed": str(projection_seed),
            "allow-raw-scores": True,
        }
        if label == REPLAYER[0]:
            config["replay-from"] = str(leaked)
        node_configs.append(config)
    output = tmp / "result.pkl"
    run_config = {
        "calibrators": STRATEGIES,
        "random-state": RS,
        "output": str(output),
        "model-path": str(data["model_path"]),
        "min-nodes": N_SUPERNODES,
        "timeout": 120.0,
        "planned-clients": ",".join(str(label) for label in PLANNED),
    }
    deployment = LoopbackDeployment(
        _app_with_a_hostile_node(tmp),
        node_configs,
        tmp,
        startup_timeout=STARTUP_TIMEOUT,
        stop_timeout=STOP_TIMEOUT,
    )
    with deployment:
        run, seconds = deployment.run(run_config, timeout=RUN_TIMEOUT)
        if not output.exists():
            pytest.fail(
                f"the run wrote no result (flwr run exit {run.returncode}):\n"
                f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}\n{deployment.logs()}"
            )
        with output.open("rb") as f:
            result = pickle.load(f)
        yield {
            "result": result,
            "data": data,
            "seconds": seconds,
            "deployment": deployment,
        }
    # Leaving the context stopped every process (an error otherwise).
    assert not deployment.alive()


def _reference_scores(data):
    ids = data["client_ids"]
    keep = ids < HONEST
    scores = np.abs(data["y"] - data["model"].predict(data["X"]))
    return scores[keep], ids[keep]


def _calibrator(alias):
    cal = CALIBRATORS[alias]
    bounds = (0.0, 4.0)  # as in examples/flower/app/skfedcp_flower_demo
    if alias == "dp-qq":
        return cal(epsilon=1.0, score_bounds=bounds)
    if alias == "ldp-s":
        return cal(epsilon=2.0, score_bounds=bounds, n_groups=8)
    return cal()


def test_qq_equals_in_process_fit_bit_for_bit(deployment):
    scores, ids = _reference_scores(deployment["data"])
    reference = _calibrator("qq").fit(scores, ids, alpha=0.1)
    deployed = deployment["result"].calibrators["qq"]
    assert deployed.threshold_ == reference.threshold_
    assert_same_fit(deployed, reference)


@pytest.mark.parametrize("alias", ["dp-qq", "ldp-s"])
def test_private_strategies_equal_in_process_fit_with_same_seeds(deployment, alias):
    scores, ids = _reference_scores(deployment["data"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # vacuous-guarantee notes
        if alias == "ldp-s":  # fit's simulated users share one stream
            reference = per_node_fit(
                _calibrator(alias),
                scores,
                ids,
                alpha=0.1,
                seeds=simulation_seeds(RS, HONEST),
                random_state=RS,
            )
        else:
            reference = _calibrator(alias).fit(scores, ids, alpha=0.1, random_state=RS)
    deployed = deployment["result"].calibrators[alias]
    assert deployed.threshold_ == reference.threshold_
    assert_same_fit(deployed, reference)


def test_chi2_selector_equals_in_process_fit(deployment):
    data = deployment["data"]
    # Node 6 sits out after its NaN; the Sybils, the unplanned node and the
    # replayer (partitions 7-9) take part in nothing.
    keep = data["select_client_ids"] < HOSTILE
    reference = FedChi2Selector(k=10, random_state=RS).fit(
        data["X_select"][keep],
        data["y_select"][keep],
        data["select_client_ids"][keep],
    )
    deployed = deployment["result"].selector
    np.testing.assert_array_equal(deployed.sketch_, reference.sketch_)
    np.testing.assert_array_equal(deployed.scores_, reference.scores_)
    np.testing.assert_array_equal(deployed.pvalues_, reference.pvalues_)
    np.testing.assert_array_equal(deployed.get_support(), reference.get_support())
    assert_same_fit(deployed, reference)


def test_node_with_other_model_version_is_left_out(deployment):
    result = deployment["result"]
    report = result.report
    reasons = [r for r in report.excluded.values() if "fingerprint" in r]
    assert len(reasons) == 1
    for calibrator in result.calibrators.values():
        assert WRONG not in calibrator.clients_.tolist()
        assert calibrator.n_clients_ == HONEST
    assert WRONG in result.selector.clients_.tolist()  # FED-chi2 needs no model


def test_malformed_node_is_excluded_with_a_warning(deployment):
    # Node 6 sent NaN as its QQ message: an InvalidMessageWarning, a new QQ
    # round with the honest nodes' plan, and no later task asks node 6.
    result = deployment["result"]
    report = result.report
    invalid = [
        w
        for w in report.warnings
        if w.startswith("InvalidMessageWarning") and "(client 6)" in w
    ]
    assert len(invalid) == 1, report.warnings
    assert "(client 6) is left out: it sent an invalid message" in invalid[0]
    assert "field 'quantile' must be a number, not" in invalid[0]
    assert "nan" in invalid[0]
    assert "qq is recalibrated with the remaining 5 node(s)" in invalid[0]
    reasons = [r for r in report.excluded.values() if "invalid message" in r]
    assert len(reasons) == 1
    names = [r.name for r in report.rounds]
    assert names.count("calibrate:qq") == 2 and names.count("calibrate:dp-qq") == 1
    for calibrator in result.calibrators.values():
        assert HOSTILE not in calibrator.clients_.tolist()
    assert HOSTILE not in result.selector.clients_.tolist()
    assert HOSTILE not in report.clients.tolist()


def test_report_records_every_round_and_message_size(deployment):
    rounds = deployment["result"].report.rounds
    names = [r.name for r in rounds]
    assert names[0] == "hello"
    assert names[-2:] == ["chi2_marginals", "chi2_sketch"]
    for alias in ("qq", "dp-qq"):
        assert f"calibrate:{alias}" in names
    assert any(name.startswith("ldp-s:round") for name in names)
    for r in rounds:
        assert not r.failed
        assert all(b > 0 for b in r.bytes_received.values())
    assert len(rounds[0].bytes_received) == N_SUPERNODES
    qq = next(r for r in rounds if r.name == "calibrate:qq")
    sketch = next(r for r in rounds if r.name == "chi2_sketch")
    # QQ sends one float; the sketch 50 x 64 fixed-point words.
    assert max(qq.bytes_received.values()) < 1000
    assert min(sketch.bytes_received.values()) > 50 * 64 * 8


def test_every_component_is_a_separate_process_on_loopback(deployment):
    running = deployment["deployment"]
    assert len(running.procs) == N_SUPERNODES + 1  # a SuperLink, 11 SuperNodes
    running.check_alive()
    assert len(set(running.alive())) == N_SUPERNODES + 1


def test_sybil_unplanned_and_replaying_nodes_are_left_out(deployment):
    result = deployment["result"]
    report = result.report
    by_label = {}
    for text in report.warnings:
        for label in (*(s for s, _ in SYBILS), UNPLANNED[0], REPLAYER[0]):
            if f"(client {label}) is left out" in text:
                by_label.setdefault(label, []).append(text)
    for label, _ in SYBILS:
        (text,) = by_label[label]
        assert text.startswith("InvalidMessageWarning") and "Sybil" in text
    (text,) = by_label[UNPLANNED[0]]
    assert "not in the planned node set" in text
    (text,) = by_label[REPLAYER[0]]
    assert "replayed reply" in text and "('calibrate:qq')" in text
    assert not any("node set is not checked" in w for w in report.warnings)
    assert len(report.excluded) == 2 + len(SYBILS) + 2  # + WRONG and HOSTILE
    outsiders = {label for label, _ in (*SYBILS, UNPLANNED, REPLAYER)}
    for calibrator in result.calibrators.values():
        assert not outsiders & set(calibrator.clients_.tolist())
    assert not outsiders & set(result.selector.clients_.tolist())
