"""Flower's SuperNode authentication on loopback (what the deployment relies on).

A SuperLink with TLS and ``--enable-supernode-auth``; two SuperNodes hold
EC key pairs (OpenSSH format, NIST P-384). The operator registers one public
key with ``flwr supernode register``, which returns the node id the
SuperLink assigns to that key; that SuperNode connects under that id, the
unregistered one is refused and exits. The registered id is what the server
pins in ``planned_clients={node id: client label}``. No ``ClientApp`` runs
(about 15 s of process start-up); the planned node set itself is tested in
``test_node_plan.py``.

Run with ``make test-flower`` (``pytest -m flower``).
"""

import datetime
import ipaddress
import json
import time

import pytest

pytestmark = pytest.mark.flower
flwr = pytest.importorskip("flwr")

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

from skfedcp.flower._local import LoopbackDeployment  # noqa: E402

PEM = serialization.Encoding.PEM


def _certificate(subject, issuer, public_key, signing_key, *, ca):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=2))
    )
    if ca:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        )
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(signing_key, hashes.SHA256())


def _credentials(out, n_nodes):
    """A test CA, the SuperLink's certificate for 127.0.0.1, node key pairs."""
    out.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca = _certificate(
        "skfedcp test CA", "skfedcp test CA", ca_key.public_key(), ca_key, ca=True
    )
    key = ec.generate_private_key(ec.SECP384R1())
    cert = _certificate(
        "127.0.0.1", "skfedcp test CA", key.public_key(), ca_key, ca=False
    )
    paths = [out / "ca.crt", out / "server.pem", out / "server.key"]
    paths[0].write_bytes(ca.public_bytes(PEM))
    paths[1].write_bytes(cert.public_bytes(PEM))
    paths[2].write_bytes(
        key.private_bytes(
            PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    node_keys = []
    for k in range(n_nodes):
        node_key = ec.generate_private_key(ec.SECP384R1())
        private = out / f"supernode{k}"
        private.write_bytes(
            node_key.private_bytes(
                PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
            )
        )
        private.with_name(private.name + ".pub").write_bytes(
            node_key.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            )
        )
        node_keys.append(private)
    return paths, node_keys


def _listed(deployment):
    done = deployment.flwr("supernode", "list", "loopback", "--format", "json")
    return {int(n["node-id"]): n["status"] for n in json.loads(done.stdout)["nodes"]}


def test_only_registered_supernodes_connect(tmp_path):
    tls, keys = _credentials(tmp_path / "credentials", 2)
    deployment = LoopbackDeployment(
        tmp_path / "no-app",
        [{"client-id": 0}, {"client-id": 1}],
        tmp_path,
        tls=tls,
        auth_keys=keys,
        register=[True, False],
    )
    with deployment:
        registered, unregistered = deployment.node_ids
        assert isinstance(registered, int) and unregistered is None
        deadline = time.monotonic() + 90.0
        while time.monotonic() < deadline:
            online = _listed(deployment).get(registered) == "online"
            refused = deployment.procs["supernode1"].poll() is not None
            if online and refused:
                break
            time.sleep(1.0)
        # The registered SuperNode is online under the id it was registered
        # with (the id to pin in planned_clients); nobody else is listed.
        assert _listed(deployment) == {registered: "online"}, deployment.logs()
        assert f"SuperNode ID: {registered}" in deployment.tail("supernode0")
        # The unregistered SuperNode was refused and exited.
        assert deployment.procs["supernode1"].poll() is not None
        assert "Failed to activate SuperNode" in deployment.tail("supernode1")
        assert "No SuperNode found with the given public key" in deployment.tail(
            "superlink", lines=200
        )
    assert not deployment.alive()


def test_authentication_needs_tls(tmp_path):
    with pytest.raises(ValueError, match="needs tls"):
        LoopbackDeployment(tmp_path, [{}], tmp_path, auth_keys=[tmp_path / "key"])
