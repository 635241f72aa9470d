"""Local stand-ins for a deployment, for tests, benchmarks and dry runs.

* :class:`InMemoryGrid`: a Flower ``Grid`` whose nodes are ``ClientApp``
  calls in this process; every message goes through Flower's own
  serialization (``deflate`` / ``inflate`` of the record tree) and the
  node's ``ClientApp`` exactly as a SuperNode would call it, but without
  processes or network.
* :class:`LoopbackDeployment`: a real SuperLink and SuperNodes as separate
  processes on 127.0.0.1, and ``flwr run``; insecure, or with TLS and
  SuperNode authentication.

Flower is imported inside the methods.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["InMemoryGrid", "LoopbackDeployment"]


def _roundtrip(content):
    """Serialize and rebuild a ``RecordDict`` as the wire would."""
    from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
    from flwr.supercore.inflatable.inflatable_utils import (
        inflate_object_from_contents,
    )

    contents = {
        oid: obj.deflate() for oid, obj in get_all_nested_objects(content).items()
    }
    return inflate_object_from_contents(content.object_id, contents)


class InMemoryGrid:
    """Run a ``ClientApp`` for several simulated nodes in this process.

    Parameters
    ----------
    client_app : flwr.clientapp.ClientApp
        The app every node runs.
    node_configs : sequence of dict
        One node config per node (``client-id``, paths, ``seed``, ...).
    run_config : dict, default=None
        The run config the nodes see.
    first_node_id : int, default=101
        Node ids are ``first_node_id, first_node_id + 1, ...``.

    Attributes
    ----------
    unresponsive : set of int
        Node ids that never reply (simulates a time-out).
    contexts : dict of int to flwr.app.Context
        Each node's context; ``state`` persists across messages.
    """

    def __init__(self, client_app, node_configs, *, run_config=None, first_node_id=101):
        from flwr.app import Context, RecordDict
        from flwr.supercore.task_identity import TaskIdentity

        # A ServerApp process has its identity set by Flower; emulate it so
        # that messages can be built in this process.
        for name, value in (("run_id", 1), ("node_id", 1), ("task_id", 0)):
            try:
                getattr(TaskIdentity, name)
            except RuntimeError:
                setattr(TaskIdentity, name, value)
        self.client_app = client_app
        self.unresponsive = set()
        self._replies = {}
        self.contexts = {
            first_node_id + i: Context(
                run_id=1,
                node_id=first_node_id + i,
                node_config=dict(cfg),
                state=RecordDict(),
                run_config=dict(run_config or {}),
            )
            for i, cfg in enumerate(node_configs)
        }

    def get_node_ids(self):
        """Return the ids of the simulated nodes."""
        return list(self.contexts)

    def push_messages(self, messages):
        """Deliver each message to its node's ``ClientApp``; return message ids."""
        from flwr.app import Error, Message

        # Rebuilding a Message around existing metadata, as Flower's own
        # transport does, is not among its typed constructors.
        rebuild: Any = Message
        ids = []
        for message in messages:
            message_id = uuid.uuid4().hex
            message.metadata.__dict__["_message_id"] = message_id
            ids.append(message_id)
            node = message.metadata.dst_node_id
            if node in self.unresponsive or node not in self.contexts:
                continue
            delivered = rebuild(
                content=_roundtrip(message.content), metadata=message.metadata
            )
            try:
                reply = self.client_app(delivered, self.contexts[node])
            except Exception as exc:  # as a SuperNode: an error reply
                reason = f"{type(exc)}:<'{exc}'>"
                reply = Message(Error(code=2, reason=reason), reply_to=delivered)
            else:
                reply = rebuild(
                    content=_roundtrip(reply.content), metadata=reply.metadata
                )
            self._replies[message_id] = reply
        return ids

    def pull_messages(self, message_ids):
        """Return (and forget) the replies to ``message_ids`` that arrived."""
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages, *, timeout=None):
        """Push the messages and return every reply (no waiting)."""
        return self.pull_messages(self.push_messages(messages))


# --------------------------------------------------------------------------
# A real deployment on loopback (tests and benchmarks)


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


def _toml_config(config):
    """``{"a": 1, "b": "x"}`` -> ``a=1 b="x"`` for --node-config / --run-config."""
    parts = []
    for key, value in config.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | float):
            text = repr(value)
        else:
            text = json.dumps(str(value))
        parts.append(f"{key}={text}")
    return " ".join(parts)


def _is_zombie(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


class LoopbackDeployment:
    """A Flower SuperLink and SuperNodes as processes on 127.0.0.1.

    A context manager: entering starts the SuperLink and one SuperNode per
    node config, each in its own process group, with ``FLWR_HOME`` in
    ``workdir``; :meth:`run` submits the app with ``flwr run --stream``;
    leaving stops every process started (and the SuperExec and app processes
    Flower starts in new sessions, found through their parent pids) with
    SIGTERM, then SIGKILL. Nothing listens outside 127.0.0.1. Linux only.

    Without ``tls`` everything runs insecure (``--insecure``). With ``tls``
    the SuperLink serves TLS; with ``auth_keys`` too it runs
    ``--enable-supernode-auth``: before the SuperNodes start, the public key
    of each node marked in ``register`` (``<private key>.pub``, OpenSSH
    format) is registered with ``flwr supernode register``, and
    :attr:`node_ids` holds the node id the SuperLink assigned to it (the id
    to pin in ``planned_clients``); an unregistered SuperNode is refused and
    exits.

    Parameters
    ----------
    app : path-like
        The Flower app directory (with its ``pyproject.toml``).
    node_configs : sequence of dict
        One ``--node-config`` per SuperNode.
    workdir : path-like
        Logs, ``FLWR_HOME`` and the installed app go here.
    env : dict, default=None
        Extra environment variables for every process.
    startup_timeout : float, default=60.0
        Seconds to wait for the SuperLink to listen.
    stop_timeout : float, default=15.0
        Seconds to wait after SIGTERM before SIGKILL.
    tls : tuple of path-like, default=None
        ``(ca_certificate, server_certificate, server_key)`` PEM files: the
        SuperLink serves TLS for ``127.0.0.1``, the SuperNodes and the CLI
        trust ``ca_certificate``.
    auth_keys : sequence of path-like, default=None
        One SuperNode private key (OpenSSH, NIST EC curve) per node config;
        enables SuperNode authentication (needs ``tls``).
    register : sequence of bool, default=None
        Which nodes' public keys are registered (``None``: all).

    Attributes
    ----------
    node_ids : list of int or None
        With ``auth_keys``: the node id registered for each node config
        (``None`` for a node not registered).
    """

    def __init__(
        self,
        app,
        node_configs,
        workdir,
        *,
        env=None,
        startup_timeout=60.0,
        stop_timeout=15.0,
        tls=None,
        auth_keys=None,
        register=None,
    ):
        if auth_keys is not None and tls is None:
            raise ValueError("SuperNode authentication (auth_keys) needs tls.")
        self.tls = None if tls is None else tuple(Path(p) for p in tls)
        self.auth_keys = None if auth_keys is None else [Path(p) for p in auth_keys]
        self.register = (
            [True] * len(node_configs) if register is None else list(register)
        )
        self.node_ids: list[int | None] = [None] * len(node_configs)
        self.app = Path(app)
        self.node_configs = [dict(c) for c in node_configs]
        self.workdir = Path(workdir)
        self.bin = Path(sys.executable).parent
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.procs = {}
        self._logs = {}
        home = self.workdir / "flwr-home"
        # Every process imports the skfedcp this process runs (e.g. a
        # development checkout), not another installed copy.
        source = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH", "")
        self.env = {
            **os.environ,
            "PYTHONPATH": source + (os.pathsep + path if path else ""),
            "FLWR_HOME": str(home),
            # The SuperLink and SuperNodes start flower-superexec from PATH.
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "FLWR_TELEMETRY_ENABLED": "0",
            "FLWR_DISABLE_UPDATE_CHECK": "1",
            # How often SuperExec looks for app processes to start (default
            # 1 s); the SuperNodes' own 3 s idle poll is fixed in Flower.
            "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": "0.1",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            **(env or {}),
        }

    # -- processes -------------------------------------------------------------

    def _start(self, name, argv):
        log = (self.workdir / f"{name}.log").open("wb")
        self._logs[name] = log
        self.procs[name] = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.workdir,
            start_new_session=True,  # its own group: its children die with it
        )

    def check_alive(self):
        """Raise if a started process has exited."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{name} exited with {proc.returncode}:\n{self.tail(name)}"
                )

    def tail(self, name, lines=40):
        """The last lines of a process's log."""
        path = self.workdir / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def logs(self):
        """The tail of every log, for error messages."""
        return "\n".join(f"--- {name}\n{self.tail(name)}" for name in self.procs)

    def __enter__(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        home = Path(self.env["FLWR_HOME"])
        home.mkdir(parents=True, exist_ok=True)
        self.port, *node_ports = _free_ports(len(self.node_configs) + 1)
        security = (
            "insecure = true"
            if self.tls is None
            else f"root-certificates = {json.dumps(str(self.tls[0]))}"
        )
        (home / "config.toml").write_text(
            '[superlink]\ndefault = "loopback"\n\n[superlink.loopback]\n'
            f'address = "127.0.0.1:{self.port}"\n{security}\n'
        )
        if self.tls is None:
            link_security, node_security = ["--insecure"], ["--insecure"]
        else:
            ca, cert, key = (str(p) for p in self.tls)
            link_security = [
                "--ssl-ca-certfile",
                ca,
                "--ssl-certfile",
                cert,
                "--ssl-keyfile",
                key,
            ]
            node_security = ["--root-certificates", ca]
            if self.auth_keys is not None:
                link_security.append("--enable-supernode-auth")
        try:
            self._start(
                "superlink",
                [
                    str(self.bin / "flower-superlink"),
                    *link_security,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--disable-runtime-dependency-installation",
                ],
            )
            self._wait_for_port(self.port)
            if self.auth_keys is not None:
                self._register_keys()
            for k, (config, port) in enumerate(
                zip(self.node_configs, node_ports, strict=True)
            ):
                auth = (
                    []
                    if self.auth_keys is None
                    else ["--auth-supernode-private-key", str(self.auth_keys[k])]
                )
                self._start(
                    f"supernode{k}",
                    [
                        str(self.bin / "flower-supernode"),
                        *node_security,
                        *auth,
                        "--superlink",
                        f"127.0.0.1:{self.port}",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--node-config",
                        _toml_config(config),
                    ],
                )
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        survivors = self.stop()
        if survivors and exc[0] is None:
            raise RuntimeError(f"processes still alive after SIGKILL: {survivors}")
        return False

    def flwr(self, *args, timeout=120.0):
        """Run the ``flwr`` CLI against this SuperLink; return its result."""
        return subprocess.run(
            [str(self.bin / "flwr"), *args],
            env=self.env,
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def _register_keys(self):
        """``flwr supernode register`` every marked node's public key."""
        for k, (key, marked) in enumerate(
            zip(self.auth_keys or [], self.register, strict=True)
        ):
            if not marked:
                continue
            public = key.with_name(key.name + ".pub")
            done = self.flwr(
                "supernode", "register", str(public), "loopback", "--format", "json"
            )
            try:
                self.node_ids[k] = int(json.loads(done.stdout)["node-id"])
            except (ValueError, KeyError) as exc:
                raise RuntimeError(
                    f"registering node {k}'s key failed:\n{done.stdout}{done.stderr}"
                ) from exc

    def _wait_for_port(self, port):
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            self.check_alive()
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.settimeout(0.5)
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise TimeoutError(
            f"nothing listens on 127.0.0.1:{port} after {self.startup_timeout:g} s"
        )

    def run(self, run_config, *, timeout=300.0):
        """Submit the app (``flwr run --stream``); return the result and seconds."""
        start = time.perf_counter()
        completed = self.flwr(
            "run",
            str(self.app),
            "loopback",
            "--stream",
            "--run-config",
            _toml_config(run_config),
            timeout=timeout,
        )
        seconds = time.perf_counter() - start
        (self.workdir / "flwr-run.log").write_text(completed.stdout + completed.stderr)
        return completed, seconds

    # -- stopping --------------------------------------------------------------

    def _descendants(self):
        """Live pids descending from the processes started here (Linux /proc)."""
        children: dict[int, list[int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        found, stack = set(), [proc.pid for proc in self.procs.values()]
        while stack:
            for child in children.get(stack.pop(), []):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    def _signal(self, sig, pids):
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def alive(self, pids=()):
        """Pids among the started processes (and ``pids``) still running."""
        for proc in self.procs.values():
            proc.poll()
        alive = []
        for pid in {proc.pid for proc in self.procs.values()} | set(pids):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            if not _is_zombie(pid):
                alive.append(pid)
        return alive

    def stop(self):
        """SIGTERM every process started here and its descendants, then SIGKILL.

        Returns the pids still alive (none, normally).
        """
        pids = self._descendants()
        self._signal(signal.SIGTERM, pids)
        deadline = time.monotonic() + self.stop_timeout
        while self.alive(pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        if self.alive(pids):
            self._signal(signal.SIGKILL, pids)
            time.sleep(1.0)
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.stop_timeout)
        for log in self._logs.values():
            log.close()
        return self.alive(pids)
