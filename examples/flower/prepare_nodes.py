"""Prepare a loopback demo: one data file per node, the shared model, commands.

Each node gets an ``.npz`` file with its calibration rows (``X``, ``y``) and
its feature-selection rows (``X_select``, ``y_select``); the model is fitted
once on separate training rows and saved with joblib, as the server would
ship it. Data, split at random over the nodes: scikit-learn's diabetes table
(regression, 442 rows; targets standardized) or, with ``--rows-per-node``,
Friedman's synthetic regression #1 (as many rows as asked), and digits
(64 pixel counts, 10 classes) for feature selection, all available offline.

Usage::

    python prepare_nodes.py --nodes 5 --out /tmp/skfedcp-flower
"""

import argparse
import shlex
import sys
from pathlib import Path

import joblib
import numpy as np
from sklearn.datasets import load_diabetes, load_digits, make_friedman1
from sklearn.ensemble import HistGradientBoostingRegressor

from skfedcp.datasets import partition_iid

HERE = Path(__file__).resolve().parent


def prepare(out, *, n_nodes=5, rows_per_node=None, n_train=142, random_state=0):
    """Write ``node<k>.npz`` files and ``model.joblib`` under ``out``.

    ``rows_per_node=None`` splits the diabetes table; an int draws that many
    calibration rows per node (plus ``n_train`` training rows) from
    Friedman's synthetic regression. Returns a dict with the paths and the
    arrays (for checking the results).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.RandomState(random_state)
    if rows_per_node is None:
        X, y = load_diabetes(return_X_y=True)
    else:
        n = n_train + n_nodes * rows_per_node
        X, y = make_friedman1(n_samples=n, noise=1.0, random_state=rng)
    order = rng.permutation(y.shape[0])
    train, cal = order[:n_train], order[n_train:]
    mean, std = y[train].mean(), y[train].std()
    y = (y - mean) / std
    model = HistGradientBoostingRegressor(max_iter=50, random_state=0)
    model.fit(X[train], y[train])
    model_path = out / "model.joblib"
    joblib.dump(model, model_path)

    X_sel, y_sel = load_digits(return_X_y=True)
    cal_clients = partition_iid(cal.shape[0], n_nodes, random_state=rng)
    sel_clients = partition_iid(y_sel.shape[0], n_nodes, random_state=rng)
    nodes = []
    for k in range(n_nodes):
        rows = cal[cal_clients == k]
        path = out / f"node{k}.npz"
        np.savez(
            path,
            X=X[rows],
            y=y[rows],
            X_select=X_sel[sel_clients == k],
            y_select=y_sel[sel_clients == k],
        )
        nodes.append(path)
    return {
        "model_path": model_path,
        "node_paths": nodes,
        "model": model,
        "X": X[cal],
        "y": y[cal],
        "client_ids": cal_clients,
        "X_select": X_sel,
        "y_select": y_sel,
        "select_client_ids": sel_clients,
    }


def commands(out, n_nodes, *, port=9100, projection_seed="<a secret shared by nodes>"):
    """The shell commands that run the demo on loopback, one per terminal."""
    out = Path(out)
    lines = [
        "# the flwr CLI finds the SuperLink in $FLWR_HOME/config.toml (~/.flwr):",
        '#   [superlink]\n#   default = "loopback"\n#   [superlink.loopback]',
        f'#   address = "127.0.0.1:{port}"\n#   insecure = true',
        "# terminal 1: the server side (SuperLink), insecure loopback only",
        f"flower-superlink --insecure --host 127.0.0.1 --port {port} "
        "--disable-runtime-dependency-installation",
    ]
    for k in range(n_nodes):
        config = (
            f'client-id={k} data-path="{out / f"node{k}.npz"}" '
            f'model-path="{out / "model.joblib"}" '
            f'projection-seed="{projection_seed}"'
        )
        lines += [
            f"# terminal {k + 2}: node {k} (SuperNode)",
            f"flower-supernode --insecure --superlink 127.0.0.1:{port} "
            f"--host 127.0.0.1 --port {port + 10 + k} "
            f"--node-config {shlex.quote(config)}",
        ]
    run_config = (
        f'calibrators="qq,avg" model-path="{out / "model.joblib"}" '
        f'output="{out / "result.pkl"}" min-nodes={n_nodes} '
        # The planned clients: a node announcing another label is left out.
        f'planned-clients="{",".join(str(k) for k in range(n_nodes))}"'
    )
    lines += [
        "# last terminal: submit the run to the 'loopback' SuperLink",
        f"flwr run {HERE / 'app'} loopback --stream --run-config "
        f"{shlex.quote(run_config)}",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--out", default="skfedcp-flower-demo")
    parser.add_argument("--port", type=int, default=9100)
    parser.add_argument("--rows-per-node", type=int, default=None)
    args = parser.parse_args(argv)
    prepare(args.out, n_nodes=args.nodes, rows_per_node=args.rows_per_node)
    seed = int.from_bytes(np.random.default_rng().bytes(16), "little")
    print(f"wrote {args.nodes} node files and model.joblib to {args.out}\n")
    print(
        commands(
            Path(args.out).resolve(), args.nodes, port=args.port, projection_seed=seed
        )
    )


if __name__ == "__main__":
    sys.exit(main())
