"""A real Flower deployment on loopback: one SuperLink, six SuperNodes.

Every Flower component runs as a separate process bound to 127.0.0.1
(insecure local mode); the run is submitted with ``flwr run`` to the example
app in ``examples/flower/app``. The results must equal the in-process
``fit`` on the same partition: bit for bit for the deterministic strategies
and FED-chi2, and for the private ones when each node's ``seed`` is the
stream the simulation gives that client. Node 5 holds another model version
and must be left out of the calibration (but not of FED-chi2).

Run with ``make test-flower`` (``pytest -m flower``).
"""

import os
import pickle
import runpy
import signal
import socket
import subprocess
import sys
import time
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

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "flower" / "app"
BIN = Path(sys.executable).parent
N_NODES = 6  # nodes 0-4 share the model; node 5 holds another version
WRONG = 5
ROWS_PER_NODE = 300  # enough for DP-QQ (epsilon=1, 100 bins) to be feasible
RS = 7  # random_state of the in-process references
# Each round costs every node a fresh ClientApp process (~3 CPU-s of imports):
# the deterministic "avg" and "central" are checked in test_flower_adapter.py.
STRATEGIES = "qq,dp-qq,ldp-s"
STARTUP_TIMEOUT = 60.0
RUN_TIMEOUT = 300.0
STOP_TIMEOUT = 15.0


def _free_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _wait_for_port(port, timeout, procs):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs.check_alive()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s")


class _Processes:
    """Processes started by this module, each in its own process group."""

    def __init__(self, log_dir, env):
        self.log_dir = log_dir
        self.env = env
        self.procs = {}

    def start(self, name, argv):
        log = (self.log_dir / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.log_dir,
            start_new_session=True,  # its own group: children die with it
        )
        self.procs[name] = (proc, log)
        return proc

    def check_alive(self):
        for name, (proc, _) in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {proc.returncode}:\n{self.tail(name)}"
                )

    def tail(self, name, lines=40):
        path = self.log_dir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def _descendants(self):
        """Pids of every live process descending from the ones started here.

        Flower starts its SuperExec and app processes in new sessions, so a
        process-group signal does not reach them: they are found through
        their parent pids (Linux /proc) and signalled by pid.
        """
        children = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        found, stack = set(), [proc.pid for proc, _ in self.procs.values()]
        while stack:
            pid = stack.pop()
            for child in children.get(pid, []):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    def _signal(self, sig, pids):
        for proc, _ in self.procs.values():
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def _alive(self, pids):
        alive = []
        for proc, _ in self.procs.values():
            proc.poll()
        for pid in {proc.pid for proc, _ in self.procs.values()} | set(pids):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            if _is_zombie(pid):
                continue
            alive.append(pid)
        return alive

    def stop_all(self):
        """SIGTERM every process started (and its descendants), then SIGKILL."""
        pids = self._descendants()
        self._signal(signal.SIGTERM, pids)
        deadline = time.monotonic() + STOP_TIMEOUT
        while self._alive(pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        if self._alive(pids):
            self._signal(signal.SIGKILL, pids)
            time.sleep(1.0)
        for proc, log in self.procs.values():
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
            log.close()
        return self._alive(pids)


def _is_zombie(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _prepare_module():
    return runpy.run_path(str(ROOT / "examples" / "flower" / "prepare_nodes.py"))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flower")
    data = _prepare_module()["prepare"](
        tmp / "data", n_nodes=N_NODES, rows_per_node=ROWS_PER_NODE, n_train=500
    )
    other_model = tmp / "data" / "other_model.joblib"
    joblib.dump(
        HistGradientBoostingRegressor(max_iter=5).fit(data["X"], data["y"]),
        other_model,
    )
    home = tmp / "flwr-home"
    home.mkdir()
    port, *node_ports = _free_ports(N_NODES + 1)
    (home / "config.toml").write_text(
        '[superlink]\ndefault = "loopback"\n\n[superlink.loopback]\n'
        f'address = "127.0.0.1:{port}"\ninsecure = true\n'
    )
    env = {
        **os.environ,
        "FLWR_HOME": str(home),
        # The SuperLink and SuperNodes start flower-superexec from PATH.
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "FLWR_TELEMETRY_ENABLED": "0",
        "FLWR_DISABLE_UPDATE_CHECK": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        # How often Flower's SuperExec looks for app processes to start
        # (default 1 s); the SuperNodes' own 3 s idle poll is fixed.
        "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.1",
    }
    # The streams the in-process fits give clients 0..4 (the calibrating
    # nodes, in label order) and FedChi2Selector(random_state=RS)'s seed.
    seeds = np.random.RandomState(RS).randint(np.iinfo(np.int32).max, size=WRONG)
    projection_seed = _draw_seeds(check_random_state(RS), 1)[0]
    procs = _Processes(tmp, env)
    try:
        procs.start(
            "superlink",
            [
                str(BIN / "flower-superlink"),
                "--insecure",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--disable-runtime-dependency-installation",
            ],
        )
        _wait_for_port(port, STARTUP_TIMEOUT, procs)
        for k, node_port in enumerate(node_ports):
            model = other_model if k == WRONG else data["model_path"]
            seed = int(seeds[k]) if k < WRONG else 0
            config = (
                f'client-id={k} data-path="{data["node_paths"][k]}" '
                f'model-path="{model}" seed={seed} '
                f'projection-seed="{projection_seed}" allow-raw-scores=true'
            )
            procs.start(
                f"supernode{k}",
                [
                    str(BIN / "flower-supernode"),
                    "--insecure",
                    "--superlink",
                    f"127.0.0.1:{port}",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(node_port),
                    "--node-config",
                    config,
                ],
            )
        output = tmp / "result.pkl"
        run_config = (
            f'calibrators="{STRATEGIES}" random-state={RS} output="{output}" '
            f'model-path="{data["model_path"]}" min-nodes={N_NODES} timeout=120.0'
        )
        start = time.perf_counter()
        run = subprocess.run(
            [
                str(BIN / "flwr"),
                "run",
                str(APP),
                "loopback",
                "--stream",
                "--run-config",
                run_config,
            ],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        seconds = time.perf_counter() - start
        (tmp / "flwr-run.log").write_text(run.stdout + run.stderr)
        if not output.exists():
            logs = "\n".join(f"--- {name}\n{procs.tail(name)}" for name in procs.procs)
            pytest.fail(
                f"the run wrote no result (flwr run exit {run.returncode}):\n"
                f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}\n{logs}"
            )
        with output.open("rb") as f:
            result = pickle.load(f)
        yield {"result": result, "data": data, "seconds": seconds, "procs": procs}
    finally:
        survivors = procs.stop_all()
        assert not survivors, f"processes still alive after SIGKILL: {survivors}"


def _reference_scores(data):
    ids = data["client_ids"]
    keep = ids != WRONG
    scores = np.abs(data["y"] - data["model"].predict(data["X"]))
    return scores[keep], ids[keep]


def _assert_same_fit(deployed, reference):
    """Every fitted attribute of ``reference`` is equal in ``deployed``."""
    for name, value in vars(reference).items():
        if not name.endswith("_") or name.startswith("_"):
            continue
        assert repr(getattr(deployed, name)) == repr(value), name


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
    _assert_same_fit(deployed, reference)


@pytest.mark.parametrize("alias", ["dp-qq", "ldp-s"])
def test_private_strategies_equal_in_process_fit_with_same_seeds(deployment, alias):
    scores, ids = _reference_scores(deployment["data"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # vacuous-guarantee notes
        reference = _calibrator(alias).fit(scores, ids, alpha=0.1, random_state=RS)
    deployed = deployment["result"].calibrators[alias]
    assert deployed.threshold_ == reference.threshold_
    _assert_same_fit(deployed, reference)


def test_chi2_selector_equals_in_process_fit(deployment):
    data = deployment["data"]
    reference = FedChi2Selector(k=10, random_state=RS).fit(
        data["X_select"], data["y_select"], data["select_client_ids"]
    )
    deployed = deployment["result"].selector
    np.testing.assert_array_equal(deployed.sketch_, reference.sketch_)
    np.testing.assert_array_equal(deployed.scores_, reference.scores_)
    np.testing.assert_array_equal(deployed.pvalues_, reference.pvalues_)
    np.testing.assert_array_equal(deployed.get_support(), reference.get_support())
    _assert_same_fit(deployed, reference)


def test_node_with_other_model_version_is_left_out(deployment):
    result = deployment["result"]
    report = result.report
    reasons = list(report.excluded.values())
    assert len(reasons) == 1 and "fingerprint" in reasons[0]
    for calibrator in result.calibrators.values():
        assert WRONG not in calibrator.clients_.tolist()
        assert calibrator.n_clients_ == WRONG
    assert WRONG in result.selector.clients_.tolist()  # FED-chi2 needs no model


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
    qq = next(r for r in rounds if r.name == "calibrate:qq")
    sketch = next(r for r in rounds if r.name == "chi2_sketch")
    # QQ sends one float; the sketch 50 x 64 fixed-point words.
    assert max(qq.bytes_received.values()) < 1000
    assert min(sketch.bytes_received.values()) > 50 * 64 * 8


def test_deployment_processes_are_separate_and_alive_until_the_end(deployment):
    procs = deployment["procs"]
    assert len(procs.procs) == N_NODES + 1
    procs.check_alive()
