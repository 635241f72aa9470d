"""Pairwise-masked secure sums over a real network: X25519 key agreement.

The deployment counterpart of :mod:`skfedcp.federated._secure_aggregation`
(which simulates the arithmetic in one process). Each node holds an X25519
key pair for the run and publishes its public key through the server. For an
aggregation with tag ``t`` over participants ``0..p-1`` (ordered by client
label), nodes ``i`` and ``j`` derive the same 128-bit seed
``HKDF-SHA256(X25519(sk_i, pk_j), info=t)``, expand it into the mask
``m_ij`` (AES-128-CTR, as the simulation's ``_prg``) and node ``i`` sends
``y_i = q_i + sum_{j > i} m_ij - sum_{j < i} m_ij (mod 2**64)``. The server
adds the ``y_i``: the masks cancel and it obtains ``sum_i q_i`` bit for bit.

Threat model: an honest-but-curious server that relays public keys
faithfully (no authentication of the keys, no Shamir recovery of dropped
nodes). A node that does not answer makes the sum unrecoverable; the server
then repeats the aggregation among the nodes that answered, under a new tag.
A node answers each tag at most once and never with fewer than two
participants, so the server cannot ask for an unmasked vector.

``cryptography`` (a dependency of skfedcp) is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ..federated._secure_aggregation import _prg

__all__ = ["generate_keypair", "mask_vector", "pairwise_seed"]

_SEED_BYTES = 16  # 128-bit mask seeds, as in the simulation


def _crypto():
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric.x25519 import (
            X25519PrivateKey,
            X25519PublicKey,
        )
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError as exc:  # pragma: no cover - flwr depends on it
        raise ImportError(
            "secure aggregation over Flower needs the 'cryptography' package; "
            'install it with pip install "skfedcp[flower]".'
        ) from exc
    return hashes, serialization, X25519PrivateKey, X25519PublicKey, HKDF


def generate_keypair() -> tuple[bytes, bytes]:
    """Return a fresh X25519 key pair as ``(private_bytes, public_bytes)``.

    Returns
    -------
    private_key : bytes
        32 raw bytes; stays on the node.
    public_key : bytes
        32 raw bytes; sent to the server, which relays it to the other nodes.
    """
    _, serialization, X25519PrivateKey, _, _ = _crypto()
    key = X25519PrivateKey.generate()
    raw = serialization.Encoding.Raw
    private = key.private_bytes(
        raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(raw, serialization.PublicFormat.Raw)
    return private, public


def pairwise_seed(private_key: bytes, peer_public_key: bytes, tag: str) -> int:
    """Seed of the mask shared with one peer for the aggregation ``tag``.

    Parameters
    ----------
    private_key : bytes
        This node's raw X25519 private key.
    peer_public_key : bytes
        The peer's raw X25519 public key.
    tag : str
        Names the aggregation; each tag gives independent masks.

    Returns
    -------
    seed : int
        A 128-bit integer; both ends obtain the same value.
    """
    hashes, _, X25519PrivateKey, X25519PublicKey, HKDF = _crypto()
    shared = X25519PrivateKey.from_private_bytes(private_key).exchange(
        X25519PublicKey.from_public_bytes(peer_public_key)
    )
    okm = HKDF(
        algorithm=hashes.SHA256(),
        length=_SEED_BYTES,
        salt=None,
        info=f"skfedcp-secagg/{tag}".encode(),
    ).derive(shared)
    return int.from_bytes(okm, "little")


def mask_vector(
    q: NDArray[np.uint64],
    *,
    index: int,
    private_key: bytes,
    public_keys: Sequence[bytes],
    tag: str,
) -> NDArray[np.uint64]:
    """Mask this node's fixed-point vector for a pairwise-masked sum.

    Parameters
    ----------
    q : ndarray of uint64
        The node's encoded vector (see ``fixed_point_encode``).
    index : int
        Position of this node among the participants.
    private_key : bytes
        This node's raw X25519 private key.
    public_keys : sequence of bytes
        The participants' public keys, in participant order (this node's own
        key at ``index``).
    tag : str
        Names the aggregation.

    Returns
    -------
    y : ndarray of uint64
        ``q + sum_{j > index} m_j - sum_{j < index} m_j (mod 2**64)``.
    """
    q = np.asarray(q)
    if q.dtype != np.uint64:
        raise TypeError(f"q must be an array of uint64; got dtype {q.dtype}.")
    y = q.ravel().copy()
    for j, peer in enumerate(public_keys):
        if j == index:
            continue
        mask = _prg(pairwise_seed(private_key, peer, tag), y.shape[0])
        if j > index:
            y += mask
        else:
            y -= mask
    return y
