"""Flower deployment against the in-process simulation: wall time and bytes.

Two tables, every variant side by side in one run:

1. *Wall time* of QQ calibration and FedChi2Selector (k=10, l=50) over m = 5
   and 20 nodes (300 calibration rows and ~1797/m digits rows per node):
   the in-process ``fit`` (the simulation), the same protocol through the
   Flower adapter with an in-memory grid (serialization and ClientApp calls,
   no processes), and a real deployment on loopback (a SuperLink and m
   SuperNodes as processes, ``flwr run``), split into the QQ rounds (hello +
   calibrate) and the two FED-chi2 rounds. Start-up of the processes is
   timed separately. Ratios are to the in-process fit.
2. *Bytes per node* of every strategy: the serialized size of what one node
   receives from the server and sends back (Flower's record encoding, the
   same bytes as on the wire), and the numbers the node's message holds.

Every deployed result is checked against the in-process fit (bit for bit).
Prints the tables (noisy shared machines: read ratios, not seconds) and
writes ``benchmarks/results/bench_flower.json``. Run:
``python benchmarks/bench_flower.py [--quick] [--nodes 5,20]``. Needs
``pip install "skfedcp[flower]"``; skipped otherwise.
"""

import argparse
import pickle
import runpy
import sys
import tempfile
import time
import warnings
from pathlib import Path

import _common  # noqa: F401  (single-threaded BLAS)
import numpy as np
from _common import best_time, save_record
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.utils import check_random_state

from skfedcp import FedConformalRegressor
from skfedcp.calibrators import CALIBRATORS
from skfedcp.feature_selection import FedChi2Selector
from skfedcp.federated._secure_aggregation import _draw_seeds

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "examples" / "flower" / "app"
RS = 0
ROWS_PER_NODE = 300
BOUNDS = (0.0, 4.0)  # as in the example app
SIZE_STRATEGIES = {
    "central": {},
    "qq": {},
    "avg": {},
    "dp-qq": {"epsilon": 1.0, "score_bounds": BOUNDS},
    "dp-central": {"epsilon": 1.0, "score_bounds": BOUNDS},
    "ldp-s": {"epsilon": 2.0, "score_bounds": BOUNDS, "n_groups": 8},
}


def _prepare(out, m):
    prepare = runpy.run_path(str(ROOT / "examples" / "flower" / "prepare_nodes.py"))
    return prepare["prepare"](out, n_nodes=m, rows_per_node=ROWS_PER_NODE, n_train=500)


def _node_configs(data, m):
    from skfedcp.flower import simulation_seeds

    seed = _draw_seeds(check_random_state(RS), 1)[0]
    return [
        {
            "client-id": k,
            "data-path": str(data["node_paths"][k]),
            "model-path": str(data["model_path"]),
            "seed": s,
            "projection-seed": str(seed),
            "allow-raw-scores": True,
        }
        for k, s in enumerate(simulation_seeds(RS, m))
    ]


def _references(data):
    wrapper = FedConformalRegressor(
        FrozenEstimator(data["model"]), calibrator="qq", alpha=0.1
    )
    selector = FedChi2Selector(k=10, random_state=RS)

    def calibrate():
        return wrapper.fit(data["X"], data["y"], data["client_ids"])

    def select():
        return selector.fit(
            data["X_select"], data["y_select"], data["select_client_ids"]
        )

    return calibrate, select


def _in_memory(data, m):
    from skfedcp import flower
    from skfedcp.flower._local import InMemoryGrid

    app = runpy.run_path(str(APP / "skfedcp_flower_demo" / "task.py"))
    client = flower.make_client_app(
        app["load_data"],
        load_model=app["load_model"],
        load_selection_data=app["load_selection_data"],
        allow_raw_scores=True,
    )
    return InMemoryGrid(client, _node_configs(data, m))


def _time_table(m, work):
    from skfedcp import flower
    from skfedcp.flower._local import LoopbackDeployment

    data = _prepare(work / f"data{m}", m)
    calibrate, select = _references(data)
    reference = calibrate().threshold_
    ref_scores = select().scores_
    row = {
        "nodes": m,
        "in_process_qq": best_time(calibrate, repeat=5),
        "in_process_chi2": best_time(select, repeat=5),
    }
    grid = _in_memory(data, m)

    def memory_qq():
        return flower.run_calibration(grid, "qq", alpha=0.1)[0]

    def memory_chi2():
        return flower.run_chi2_selection(grid, FedChi2Selector(k=10))[0]

    assert memory_qq().threshold_ == reference
    np.testing.assert_array_equal(memory_chi2().scores_, ref_scores)
    row["in_memory_qq"] = best_time(memory_qq, repeat=3, min_time=0.05)
    row["in_memory_chi2"] = best_time(memory_chi2, repeat=3, min_time=0.05)

    output = work / f"result{m}.pkl"
    run_config = {
        "calibrators": "qq",
        "output": str(output),
        "model-path": str(data["model_path"]),
        "min-nodes": m,
        "timeout": 600.0,
    }
    start = time.perf_counter()
    with LoopbackDeployment(APP, _node_configs(data, m), work / f"flower{m}") as dep:
        row["startup"] = time.perf_counter() - start
        run, row["flwr_run"] = dep.run(run_config, timeout=1800.0)
        if not output.exists():
            sys.exit(f"the deployment failed:\n{run.stdout[-2000:]}\n{dep.logs()}")
    result = pickle.loads(output.read_bytes())
    assert result.calibrators["qq"].threshold_ == reference  # bit for bit
    np.testing.assert_array_equal(result.selector.scores_, ref_scores)
    seconds = {r.name: r.seconds for r in result.report.rounds}
    row["deployed_qq"] = seconds["hello"] + seconds["calibrate:qq"]
    row["deployed_chi2"] = seconds["chi2_marginals"] + seconds["chi2_sketch"]
    row["deployed_rounds"] = seconds
    row["deployed_bytes"] = {
        r.name: (
            float(np.median(list(r.bytes_sent.values()))),
            float(np.median(list(r.bytes_received.values()))),
        )
        for r in result.report.rounds
    }
    return row


# One ClientApp message as Flower 1.40 runs it: a fresh process that imports
# everything, then skfedcp's own work (load, fingerprint, score, encode).
_NODE_MESSAGE = r"""
import json, runpy, sys, time
t, last = {}, time.perf_counter()
def lap(name):
    global last
    now = time.perf_counter()
    t[name] = now - last
    last = now
import numpy, scipy.stats, sklearn.base  # noqa: E401
lap("import numpy, scipy, sklearn")
import flwr.app, flwr.clientapp  # noqa: E401
lap("import flwr")
import skfedcp.flower
from skfedcp.calibrators import QuantileOfQuantilesCalibrator
from skfedcp.flower._wire import _to_record_dict, _wire_bytes
from skfedcp.flower._protocol import _reply, model_fingerprint, resolve_node_score
lap("import skfedcp")
task = runpy.run_path(sys.argv[1])
context = type("Context", (), {"node_config": json.loads(sys.argv[2])})()
X, y = task["load_data"](context)
lap("load data")
model = task["load_model"](context)
lap("load model (joblib)")
fingerprint = model_fingerprint(model, "absolute")
lap("fingerprint")
scores = resolve_node_score("absolute").conformity_score(y, model.predict(X), X)
lap("score")
message = QuantileOfQuantilesCalibrator().client_step(
    scores, alpha=0.1, n_per_client=[len(y)] * 5
)
lap("client step")
_wire_bytes(_to_record_dict(_reply(fingerprint, message)))
lap("encode")
print(json.dumps(t))
"""


def _node_message_breakdown(data, repeat=3):
    """Seconds of one ClientApp message, by phase (best of ``repeat`` processes)."""
    import json
    import subprocess

    config = json.dumps(
        {"data-path": str(data["node_paths"][0]), "model-path": str(data["model_path"])}
    )
    task = str(APP / "skfedcp_flower_demo" / "task.py")
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}
    best = {}
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
        interpreter = time.perf_counter() - start
        out = subprocess.run(
            [sys.executable, "-c", _NODE_MESSAGE, task, config],
            check=True,
            capture_output=True,
            text=True,
            env=env,
        )
        phases = {"interpreter start": interpreter, **json.loads(out.stdout)}
        for name, seconds in phases.items():
            best[name] = min(best.get(name, np.inf), seconds)
    return best


def _numbers(reply):
    total = 0
    for key, value in reply.items():
        if key.startswith("message.") or key == "masked":
            total += np.size(value)
    return int(total)


def _size_table(m, work):
    """Median bytes per node (server -> node, node -> server) of each strategy."""
    from skfedcp import flower
    from skfedcp.flower._calibrate import calibrate_nodes
    from skfedcp.flower._select import select_chi2_nodes
    from skfedcp.flower._session import ServerSession
    from skfedcp.flower._wire import _grid_exchange

    data = _prepare(work / f"sizes{m}", m)
    grid = _in_memory(data, m)
    rows = {}
    numbers = {}
    exchange = _grid_exchange(grid)

    def counting(requests, timeout):
        replies, sizes = exchange(requests, timeout)
        request = next(iter(requests.values()))
        name = {
            "calibrate": f"calibrate:{current[0]}",
            "respond": "ldp-s (per round)",
            "secure_sum": request.get("task"),
        }.get(request["kind"])
        for reply in replies.values():
            if name and isinstance(reply, dict):
                numbers.setdefault(name, []).append(_numbers(reply))
        return replies, sizes

    current = [None]
    session = ServerSession(counting, grid.get_node_ids(), timeout=60.0)
    nodes = session.hello(calibration=True, selection=True, classes=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for alias, params in SIZE_STRATEGIES.items():
            current[0] = alias
            calibrate_nodes(
                session,
                nodes,
                CALIBRATORS[alias](**params),
                alpha=0.1,
                fingerprint=flower.model_fingerprint(data["model"], "absolute"),
                random_state=RS,
            )
        select_chi2_nodes(session, nodes, FedChi2Selector(k=10))
    for r in session.rounds:
        name = r.name
        sent = list(r.bytes_sent.values())
        received = list(r.bytes_received.values())
        key = "ldp-s (per round)" if name.startswith("ldp-s:") else name
        entry = rows.setdefault(key, {"sent": [], "received": [], "rounds": 0})
        entry["sent"] += sent
        entry["received"] += received
        entry["rounds"] += 1
    # LDP-L needs a classifier: its own small federation.
    rows["calibrate:ldp-l"] = _ldp_l_sizes(m)
    out = {}
    for name, entry in rows.items():
        out[name] = {
            "server_to_node": float(np.median(entry["sent"])),
            "node_to_server": float(np.median(entry["received"])),
            "rounds": entry["rounds"],
        }
    for name, counts in numbers.items():
        out[name]["numbers"] = float(np.median(counts))
    out["calibrate:ldp-l"]["numbers"] = rows["calibrate:ldp-l"]["numbers"]
    return out


def _ldp_l_sizes(m):
    from skfedcp import flower
    from skfedcp.flower._local import InMemoryGrid

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200 + m * ROWS_PER_NODE, 4))
    y = (X[:, 0] + rng.normal(size=X.shape[0]) > 0).astype(int) + (X[:, 1] > 1)
    clf = LogisticRegression().fit(X[:200], y[:200])
    X, y = X[200:], y[200:]
    ids = np.repeat(np.arange(m), ROWS_PER_NODE)

    def load_data(context):
        k = context.node_config["client-id"]
        return X[ids == k], y[ids == k]

    app = flower.make_client_app(
        load_data,
        load_model=lambda c: clf,
        conformity_score="lac",
        allow_raw_scores=True,
    )
    seeds = flower.simulation_seeds(RS, m)
    grid = InMemoryGrid(app, [{"client-id": k, "seed": seeds[k]} for k in range(m)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        _, report = flower.run_calibration(
            grid, CALIBRATORS["ldp-l"](epsilon=2.0), alpha=0.1
        )
    r = report.rounds[-1]
    return {
        "sent": list(r.bytes_sent.values()),
        "received": list(r.bytes_received.values()),
        "rounds": 1,
        # n_j and, per row, the score of each of the 3 classes and a label
        "numbers": 1 + ROWS_PER_NODE * (3 + 1),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 nodes only")
    parser.add_argument("--nodes", default=None, help="comma-separated, e.g. 5,20")
    args = parser.parse_args(argv)
    try:
        import flwr  # noqa: F401
    except ImportError:
        print('skipped: Flower is not installed (pip install "skfedcp[flower]")')
        return 0
    sizes = [5] if args.quick else [5, 20]
    if args.nodes:
        sizes = [int(s) for s in args.nodes.split(",")]

    with tempfile.TemporaryDirectory(prefix="bench_flower_") as tmp:
        work = Path(tmp)
        timing = [_time_table(m, work) for m in sizes]
        bytes_by_m = {m: _size_table(m, work) for m in sizes}
        breakdown = _node_message_breakdown(_prepare(work / "breakdown", 5))

    print("\nWall time (s) and ratio to the in-process fit (QQ: hello + calibrate;")
    print("FED-chi2: two secure sums; the deployment excludes process start-up)")
    head = f"{'nodes':>5} {'task':>5} {'in-process':>11} {'in-memory':>10} "
    head += f"{'(x)':>7} {'deployed':>9} {'(x)':>8} {'startup':>8} {'flwr run':>9}"
    print(head)
    for row in timing:
        for task in ("qq", "chi2"):
            base = row[f"in_process_{task}"]
            mem, dep = row[f"in_memory_{task}"], row[f"deployed_{task}"]
            print(
                f"{row['nodes']:>5} {task:>5} {base:>11.4f} {mem:>10.4f} "
                f"{mem / base:>7.1f} {dep:>9.2f} {dep / base:>8.0f} "
                f"{row['startup']:>8.1f} {row['flwr_run']:>9.1f}"
            )

    print("\nOne ClientApp message (Flower 1.40 starts a process per message),")
    print("best of 3 fresh processes, seconds; then one deployed QQ round (m=5)")
    total = sum(breakdown.values())
    own = sum(
        v
        for k, v in breakdown.items()
        if k == "import skfedcp" or not k.startswith(("import", "interpreter"))
    )
    for name, seconds in breakdown.items():
        print(f"{name:>30} {seconds:>7.3f}")
    print(f"{'process total':>30} {total:>7.3f}")
    print(f"{'skfedcp (import + work)':>30} {own:>7.3f} ({own / total:.0%})")
    row = timing[0]
    for name in ("hello", "calibrate:qq"):
        seconds = row["deployed_rounds"][name]
        print(
            f"{'round ' + name:>30} {seconds:>7.2f}  of which Flower (polling, "
            f"FAB install, launch, HTTP) ~{max(seconds - total, 0.0):.2f}"
        )

    print("\nBytes per node (median), server -> node / node -> server, per round;")
    print("numbers = values in the node's message (8 bytes each)")
    names = list(bytes_by_m[sizes[0]])
    print(
        f"{'round':>22} "
        + " ".join(f"{f'm={m}':>17}" for m in sizes)
        + f" {'numbers':>9} {'rounds':>7}"
    )
    for name in names:
        cells = []
        for m in sizes:
            e = bytes_by_m[m][name]
            cells.append(f"{e['server_to_node']:>8.0f}/{e['node_to_server']:<8.0f}")
        e = bytes_by_m[sizes[0]][name]
        numbers = e.get("numbers", 0)
        print(f"{name:>22} " + " ".join(cells) + f" {numbers:>9.0f} {e['rounds']:>7}")
    print("\nThe same rounds measured in the deployment (server -> node / back):")
    for row in timing:
        for name, (sent, received) in row["deployed_bytes"].items():
            print(f"{row['nodes']:>5} {name:>22} {sent:>8.0f}/{received:<8.0f}")

    path = save_record(
        "bench_flower",
        {
            "config": {
                "nodes": sizes,
                "rows_per_node": ROWS_PER_NODE,
                "selector": "FedChi2Selector(k=10, n_projections=50)",
                "random_state": RS,
            },
            "timing": timing,
            "node_message_breakdown": breakdown,
            "bytes": {str(m): v for m, v in bytes_by_m.items()},
        },
    )
    print(f"\nrecord: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
