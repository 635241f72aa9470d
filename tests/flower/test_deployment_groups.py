"""Group-conditional calibration on a real Flower deployment on loopback.

One SuperLink and seven SuperNodes, every component a separate process bound
to 127.0.0.1, the run submitted with ``flwr run`` to a copy of the example
app whose nodes group their rows (``make_client_app(group_by=...)``) and
whose server fixes the public group list (``make_server_app(groups=...)``).
Nodes 0-3 are honest; three planned nodes are hostile: node 4 announces a
group outside the public list, node 5 announces one group twice (a
duplicated cell), node 6 sends NaN as one cell's QQ message. Each is left
out with a warning naming the node and the field, and the honest per-group
thresholds equal the in-process ``GroupedCalibrator.fit`` on nodes 0-3 bit
for bit: QQ, and dp-qq with the nodes' simulation seeds
(``simulation_seeds(..., grouped=True)``).

Run with ``make test-flower`` (``pytest -m flower``).
"""

import pickle
import runpy
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from skfedcp.calibrators import CALIBRATORS, GroupedCalibrator

pytestmark = pytest.mark.flower
flwr = pytest.importorskip("flwr")

from _reference import assert_same_fit  # noqa: E402

from skfedcp.flower import simulation_seeds  # noqa: E402
from skfedcp.flower._local import LoopbackDeployment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "flower" / "app"
HONEST = 4
HOSTILE = {4: "unknown-group", 5: "duplicated-cell", 6: "non-finite"}
N_NODES = HONEST + len(HOSTILE)
ROWS_PER_NODE = 300
GROUPS = [0, 1, 2, 3]
RS = 5
BOUNDS = (0.0, 4.0)
RUN_TIMEOUT = 1800.0

# Nodes group their rows by two covariates; hostile ones tamper with replies.
GROUP_CLIENT_APP = """
import math

import numpy as np
from flwr.app import Message
from flwr.clientapp import ClientApp

from skfedcp.flower import make_client_app
from skfedcp.flower._wire import _from_record_dict, _to_record_dict

from .task import load_data, load_model


def group_of(X):
    return (X[:, 0] > 0.5).astype(np.int64) + 2 * (X[:, 1] > 0.7)


honest = make_client_app(load_data, load_model=load_model, group_by=group_of)
app = ClientApp()


@app.query("skfedcp")
def query(message, context):
    reply = honest(message, context)
    hostile = context.node_config.get("hostile", "")
    kind = _from_record_dict(message.content)["kind"]
    if not hostile or reply.has_error():
        return reply
    payload = _from_record_dict(reply.content)
    if kind == "hello" and hostile == "unknown-group":
        payload["group_labels"] = np.append(payload["group_labels"], 9)
        payload["group_n"] = np.append(payload["group_n"], 1)
        payload["group_n"][0] -= 1
    elif kind == "hello" and hostile == "duplicated-cell":
        half = payload["group_n"][0] // 2
        payload["group_labels"] = np.append(
            payload["group_labels"], payload["group_labels"][0]
        )
        payload["group_n"] = np.append(payload["group_n"], half)
        payload["group_n"][0] -= half
    elif kind == "calibrate" and hostile == "non-finite":
        payload["message.1.quantile"] = math.nan
    else:
        return reply
    return Message(_to_record_dict(payload), reply_to=message)
"""

GROUP_SERVER_APP = f"""
from skfedcp.calibrators import PrivateQuantileOfQuantilesCalibrator
from skfedcp.flower import make_server_app

from .task import load_server_model

app = make_server_app(
    calibrators=(
        "qq",
        PrivateQuantileOfQuantilesCalibrator(epsilon=4.0, score_bounds={BOUNDS!r}),
    ),
    load_model=load_server_model,
    groups={GROUPS!r},
)
"""


def _group_of(X):
    return (X[:, 0] > 0.5).astype(np.int64) + 2 * (X[:, 1] > 0.7)


def _grouped_app(tmp):
    app = tmp / "app"
    shutil.copytree(APP, app, ignore=shutil.ignore_patterns("__pycache__"))
    package = app / "skfedcp_flower_demo"
    (package / "group_client_app.py").write_text(GROUP_CLIENT_APP)
    (package / "group_server_app.py").write_text(GROUP_SERVER_APP)
    toml = app / "pyproject.toml"
    text = toml.read_text()
    for part in ("client", "server"):
        old = f'{part}app = "skfedcp_flower_demo.{part}_app:app"'
        assert old in text
        text = text.replace(
            old, f'{part}app = "skfedcp_flower_demo.group_{part}_app:app"'
        )
    toml.write_text(text)
    return app


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flower-groups")
    prepare = runpy.run_path(str(ROOT / "examples" / "flower" / "prepare_nodes.py"))
    data = prepare["prepare"](
        tmp / "data", n_nodes=N_NODES, rows_per_node=ROWS_PER_NODE, n_train=500
    )
    seeds = simulation_seeds(RS, HONEST, grouped=True)
    node_configs = []
    for k in range(N_NODES):
        config = {
            "client-id": k,
            "data-path": str(data["node_paths"][k]),
            "model-path": str(data["model_path"]),
        }
        if k < HONEST:
            config["seed"] = seeds[k]
        else:
            config["hostile"] = HOSTILE[k]
        node_configs.append(config)
    output = tmp / "result.pkl"
    run_config = {
        "calibrators": "qq,dp-qq",
        "random-state": RS,
        "output": str(output),
        "model-path": str(data["model_path"]),
        "min-nodes": N_NODES,
        "feature-selection": False,
        "planned-clients": ",".join(str(k) for k in range(N_NODES)),
    }
    deployment = LoopbackDeployment(
        _grouped_app(tmp), node_configs, tmp, startup_timeout=60.0
    )
    with deployment:
        run, _ = deployment.run(run_config, timeout=RUN_TIMEOUT)
        if not output.exists():
            pytest.fail(
                f"the run wrote no result (flwr run exit {run.returncode}):\n"
                f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}\n{deployment.logs()}"
            )
        with output.open("rb") as f:
            result = pickle.load(f)
        yield {"result": result, "data": data}
    assert not deployment.alive()


def _reference(data, calibrator, **kwargs):
    keep = data["client_ids"] < HONEST
    scores = np.abs(data["y"] - data["model"].predict(data["X"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return GroupedCalibrator(calibrator).fit(
            scores[keep],
            data["client_ids"][keep],
            group_ids=_group_of(data["X"][keep]),
            alpha=0.1,
            known_groups=GROUPS,
            **kwargs,
        )


def test_per_group_qq_equals_the_in_process_fit_on_the_honest_nodes(deployment):
    deployed = deployment["result"].calibrators["qq"]
    reference = _reference(deployment["data"], "qq")
    assert isinstance(deployed, GroupedCalibrator)
    np.testing.assert_array_equal(deployed.threshold_, reference.threshold_)
    assert np.isfinite(deployed.threshold_).all()
    assert_same_fit(deployed, reference)


def test_per_group_dp_qq_equals_the_in_process_fit_with_the_same_seeds(deployment):
    cal = CALIBRATORS["dp-qq"](epsilon=4.0, score_bounds=BOUNDS)
    deployed = deployment["result"].calibrators["dp-qq"]
    reference = _reference(deployment["data"], cal, random_state=RS)
    np.testing.assert_array_equal(deployed.threshold_, reference.threshold_)
    assert_same_fit(deployed, reference)


def test_each_hostile_node_is_left_out_naming_node_and_field(deployment):
    report = deployment["result"].report
    fields = {
        4: ("field 'group_labels'", "[9]", "outside the server's public group list"),
        5: ("field 'group_labels'", "a duplicated cell"),
        6: ("field 'quantile'", "nan", "recalibrated with the remaining 4"),
    }
    for label, parts in fields.items():
        texts = [
            w
            for w in report.warnings
            if w.startswith("InvalidMessageWarning")
            and f"(client {label}) is left out" in w
        ]
        assert len(texts) == 1, report.warnings
        assert all(p in texts[0] for p in parts), texts[0]
    assert report.clients.tolist() == list(range(HONEST))
    assert len(report.excluded) == len(HOSTILE)
    names = [r.name for r in report.rounds]
    assert names == [
        "hello",
        "calibrate:qq[groups]",
        "calibrate:qq[groups]",
        "calibrate:dp-qq[groups]",
    ]
    # One message per non-empty (client, group) cell, a few bytes each.
    qq = report.rounds[2]
    assert len(qq.bytes_received) == HONEST
    assert max(qq.bytes_received.values()) < 2000
