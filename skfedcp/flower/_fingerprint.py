"""What a node scores with: its conformity score, and the fingerprint of its model."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import numpy as np

from .._typing import ConformityScoreLike
from ..scores import CLASSIFICATION_SCORES, CQR_SCORES, REGRESSION_SCORES

__all__ = ["data_fingerprint", "model_fingerprint", "resolve_node_score"]


def model_fingerprint(
    model: Any, conformity_score: ConformityScoreLike | None = None
) -> str:
    """Short SHA-256 fingerprint of a fitted model and its conformity score.

    Nodes put it in every message; the server rejects messages whose
    fingerprint differs from the one it expects, so that all nodes score with
    the same model version. The hash covers the model's whole state (the
    pickle decomposition of every object, arrays by value), not its pickle
    bytes, which vary between a model and its reloaded copy.

    Parameters
    ----------
    model : object
        The shared fitted model (anything picklable).
    conformity_score : str, score object or callable, default=None
        The score the nodes compute; part of the fingerprint when given.

    Returns
    -------
    fingerprint : str
        16 hexadecimal characters.

    Examples
    --------
    >>> from sklearn.linear_model import LinearRegression
    >>> model = LinearRegression().fit([[0.0], [1.0]], [0.0, 1.0])
    >>> fp = model_fingerprint(model, "absolute")
    >>> len(fp), fp == model_fingerprint(model, "absolute")
    (16, True)
    >>> fp == model_fingerprint(LinearRegression().fit([[0.0], [1.0]], [0.0, 2.0]))
    False
    """
    digest = hashlib.sha256()
    _feed(digest, model, ())
    if conformity_score is not None:
        score = resolve_node_score(conformity_score)
        _feed(digest, conformity_score if score is None else score, ())
    return digest.hexdigest()[:16]


def data_fingerprint(*parts: Any, salt: str = "") -> str:
    """Salted SHA-256 fingerprint of a node's rows, for spotting Sybil nodes.

    A node announces it in the hello round; the server compares the
    fingerprints of the nodes and leaves out every node whose rows are
    byte-for-byte those of another node (one party running several nodes
    over the same data). ``salt`` is a fresh value per run chosen by the
    server, so that fingerprints cannot be linked across runs. The server
    learns only whether two nodes hold the same rows (and could confirm a
    guess of a node's *whole* data set); a party that perturbs one row gets
    another fingerprint, so this check catches copies, not a determined
    adversary (the planned node set and SuperNode authentication do that).

    Parameters
    ----------
    *parts : array-like or None
        What the node holds (e.g. ``X, y``); ``None`` parts are skipped.
    salt : str, default=""
        The run's salt.

    Returns
    -------
    fingerprint : str
        32 hexadecimal characters; ``""`` when every part is ``None``.

    Examples
    --------
    >>> import numpy as np
    >>> X, y = np.arange(6.0).reshape(3, 2), np.array([0, 1, 0])
    >>> fp = data_fingerprint(X, y, salt="run-1")
    >>> fp == data_fingerprint(X.copy(), y.copy(), salt="run-1")
    True
    >>> fp == data_fingerprint(X, y, salt="run-2"), data_fingerprint(None)
    (False, '')
    """
    if all(part is None for part in parts):
        return ""
    digest = hashlib.sha256(f"skfedcp-data/{salt};".encode())
    for part in parts:
        if part is not None:
            _feed(digest, np.asarray(part), ())
    return digest.hexdigest()[:32]


_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def _feed(digest, obj, path):
    """Feed a canonical description of ``obj`` to ``digest``."""
    if len(path) > 200 or id(obj) in path:
        raise ValueError("model_fingerprint: the model is too deeply nested.")
    if isinstance(obj, _SCALARS):
        digest.update(f"{type(obj).__name__}:{obj!r};".encode())
        return
    if isinstance(obj, np.generic):
        obj = np.asarray(obj)
    if isinstance(obj, np.ndarray):
        digest.update(f"ndarray:{obj.dtype.descr!r}:{obj.shape};".encode())
        if obj.dtype.names:  # field by field: padding bytes are not data
            for name in obj.dtype.names:
                _feed(digest, obj[name], path)
        elif obj.dtype.hasobject:
            for item in obj.ravel():
                _feed(digest, item, (*path, id(obj)))
        else:
            digest.update(np.ascontiguousarray(obj).tobytes())
        return
    if isinstance(obj, np.dtype):
        digest.update(f"dtype:{obj.descr!r};".encode())
        return
    if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__"):
        name = f"{getattr(obj, '__module__', '')}.{obj.__qualname__}"
        digest.update(f"ref:{name};".encode())
        return
    inner = (*path, id(obj))
    if isinstance(obj, list | tuple):
        digest.update(f"{type(obj).__name__}[{len(obj)}];".encode())
        for item in obj:
            _feed(digest, item, inner)
        return
    if isinstance(obj, dict):
        digest.update(f"dict[{len(obj)}];".encode())
        for key in sorted(obj, key=repr):
            _feed(digest, key, inner)
            _feed(digest, obj[key], inner)
        return
    reduced = obj.__reduce_ex__(4)
    cls = type(obj)
    digest.update(f"object:{cls.__module__}.{cls.__qualname__};".encode())
    if isinstance(reduced, str):
        return
    for part in reduced[1:3]:
        _feed(digest, part, inner)
    for part in reduced[3:5]:
        if part is not None:
            _feed(digest, list(part), inner)


def resolve_node_score(conformity_score: ConformityScoreLike) -> Any:
    """Score object a node uses: a fresh registry score or a copy of the object.

    Returns ``None`` for a plain callable ``score(model, X, y)``. Objects are
    deep-copied, not cloned, so that a fitted score keeps its fitted state.
    """
    if isinstance(conformity_score, str):
        for registry in (REGRESSION_SCORES, CQR_SCORES, CLASSIFICATION_SCORES):
            if conformity_score in registry:
                return registry[conformity_score]()
        raise ValueError(
            f"conformity_score {conformity_score!r} is not one of "
            f"{sorted(REGRESSION_SCORES) + sorted(CQR_SCORES)}"
            f" or {sorted(CLASSIFICATION_SCORES)}."
        )
    if hasattr(conformity_score, "conformity_score"):
        return copy.deepcopy(conformity_score)
    if callable(conformity_score):
        return None
    raise TypeError(
        "conformity_score must be a score name, a score object or a callable "
        f"score(model, X, y); got {type(conformity_score).__name__}."
    )
