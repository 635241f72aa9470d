"""BaseCalibrator: the client step / server step protocol and its simulation."""

import warnings
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from functools import partial
from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state

from ..exceptions import InfiniteThresholdWarning
from ..federated import ClientPartition
from ..utils._validation import check_alpha, check_scores

__all__ = ["BaseCalibrator", "CoverageBounds", "stack_messages"]


class CoverageBounds(NamedTuple):
    """Coverage implied by theory for given client sizes and ``alpha``.

    ``lower`` holds for any score law (ties included); ``upper`` holds for
    continuous scores (almost surely distinct). ``nan`` where theory gives
    nothing.
    """

    lower: float
    upper: float


def stack_messages(messages):
    """Turn client messages into one dict of arrays (one entry per client).

    Parameters
    ----------
    messages : sequence of dict or dict of array-like
        Either what the clients sent, one dict per client, or the same already
        stacked column by column.

    Returns
    -------
    stacked : dict of ndarray
        Each key maps to an array with one entry per client.

    Examples
    --------
    >>> stack_messages([{"n": 3, "quantile": 1.5}, {"n": 4, "quantile": 2.0}])
    {'n': array([3, 4]), 'quantile': array([1.5, 2. ])}
    """
    if isinstance(messages, Mapping):
        stacked = {key: np.asarray(value) for key, value in messages.items()}
    elif isinstance(messages, Sequence) and not isinstance(messages, str):
        if len(messages) == 0:
            raise ValueError("messages is empty: the server received no message.")
        if not all(isinstance(msg, Mapping) for msg in messages):
            raise TypeError("messages must be a sequence of dicts, one per client.")
        keys = messages[0].keys()
        if any(msg.keys() != keys for msg in messages):
            raise ValueError("messages do not all carry the same fields.")
        stacked = {key: _stack_field([msg[key] for msg in messages]) for key in keys}
    else:
        raise TypeError(
            "messages must be a list of dicts (one per client) or a dict of arrays; "
            f"got {type(messages).__name__}."
        )
    lengths = {value.shape[0] if value.ndim else 1 for value in stacked.values()}
    if len(lengths) != 1:
        raise ValueError("every message field must have one entry per client.")
    return stacked


def _stack_field(values):
    if all(np.ndim(v) == 0 for v in values):
        return np.asarray(values)
    out = np.empty(len(values), dtype=object)  # e.g. raw scores of varying length
    out[:] = [np.asarray(v) for v in values]
    return out


class BaseCalibrator(BaseEstimator):
    """Turn per-client conformity scores into a calibrated threshold.

    A strategy is two public, state-free steps that can run on separate
    machines:

    * :meth:`client_step` sees one client's scores and returns the message that
      client sends (plain numbers);
    * :meth:`server_step` sees only the messages and returns the threshold.

    Both may first call :meth:`plan`, the public, data-free computation that
    depends only on ``alpha`` and the client sizes (e.g. which ranks to use);
    a server can broadcast it before the round.

    :meth:`fit` simulates one round in-process. The prediction set for a new
    point is ``{y : score(x, y) <= threshold_}``.

    Attributes
    ----------
    threshold_ : float
        Calibrated threshold; ``+inf`` means the trivial (always covering) set.
    messages_ : dict of ndarray
        What the server received, one entry per client (``client`` holds the
        client labels); no raw scores unless the strategy sends them.
    clients_ : ndarray of shape (n_clients,)
        Sorted client labels.
    n_clients_ : int
        Number of clients.
    n_per_client_ : ndarray of shape (n_clients,)
        Calibration size of each client.
    calibration_info_ : dict
        The public plan used (ranks, exact coverage, feasibility, ...).
    """

    _parameter_constraints: dict = {}

    # Whether client or server steps consume randomness.
    _randomized = False

    #: Whether ``fit`` takes the ``(n, n_classes)`` score matrix of every
    #: label plus ``labels=`` (LDP-L) instead of one score per row.
    requires_score_matrix = False

    #: Whether the protocol runs in rounds (``server_init`` /
    #: ``client_respond`` / ``server_update``, LDP-S) rather than one
    #: ``client_step`` / ``server_step`` exchange.
    interactive = False

    def plan(self, n_per_client, alpha):
        """Public, data-free computation shared by clients and server.

        Parameters
        ----------
        n_per_client : array-like of int
            Calibration size of each client.
        alpha : float
            Miscoverage level in (0, 1).

        Returns
        -------
        plan : dict
            Strategy-specific; always has the key ``"feasible"``.
        """
        return {"feasible": True}

    @abstractmethod
    def client_step(self, scores, *, alpha, n_per_client, random_state=None):
        """Compute the message one client sends.

        Parameters
        ----------
        scores : array-like of shape (n_j,)
            The conformity scores of this client only.
        alpha : float
            Miscoverage level in (0, 1).
        n_per_client : array-like of int
            Public calibration sizes of all clients (some strategies need them
            to choose a rank).
        random_state : int, RandomState instance or None, default=None
            Randomness of this client's step, if any.

        Returns
        -------
        message : dict
            Plain numbers or arrays.
        """

    @abstractmethod
    def server_step(self, messages, *, alpha, n_per_client, random_state=None):
        """Aggregate the clients' messages into a threshold.

        Parameters
        ----------
        messages : list of dict or dict of array-like
            One message per client, in any client order.
        alpha : float
            Miscoverage level in (0, 1).
        n_per_client : array-like of int
            Public calibration sizes, in the order of ``messages``.
        random_state : int, RandomState instance or None, default=None
            Randomness of the server step, if any.

        Returns
        -------
        threshold : float
        """

    def coverage_bounds(self, n_per_client, alpha):
        """Coverage implied by theory (see :class:`CoverageBounds`)."""
        return CoverageBounds(np.nan, np.nan)

    def _random_streams(self, random_state, n_clients):
        """Server generator and one independent stream per client.

        Per-client streams are seeded by integers drawn from the fit-time
        generator, in sorted-client order. Strategies that accept other random
        sources (e.g. the operating system's secure randomness) override this.
        """
        rng = check_random_state(random_state)
        seeds = rng.randint(np.iinfo(np.int32).max, size=n_clients)
        return rng, [np.random.RandomState(seed) for seed in seeds]

    def _simulate_clients(self, partition, scores, *, alpha, rngs):
        """Messages of every client, stacked; override to vectorize.

        Must return exactly what calling :meth:`client_step` on each client
        would, in the order of ``partition.clients``.
        """
        groups = partition.split(scores)
        step = partial(self.client_step, alpha=alpha, n_per_client=partition.sizes)
        n_jobs = getattr(self, "_n_jobs", None)
        if n_jobs is None or n_jobs == 1:
            messages = [
                step(g, random_state=r) for g, r in zip(groups, rngs, strict=True)
            ]
        else:  # expensive client steps: one joblib task per client
            messages = Parallel(n_jobs=n_jobs)(
                delayed(step)(g, random_state=r)
                for g, r in zip(groups, rngs, strict=True)
            )
        return stack_messages(messages)

    def _server_from_stacked(self, stacked, *, alpha, n_per_client, random_state):
        return self.server_step(
            stacked, alpha=alpha, n_per_client=n_per_client, random_state=random_state
        )

    def fit(self, scores, client_ids=None, *, alpha, random_state=None, n_jobs=None):
        """Simulate one calibration round in-process.

        Parameters
        ----------
        scores : array-like of shape (n_samples,)
            Conformity scores of all calibration rows.
        client_ids : array-like of shape (n_samples,) or None, default=None
            Client label of each row; ``None`` means one client.
        alpha : float
            Miscoverage level in (0, 1).
        random_state : int, RandomState instance or None, default=None
            Seeds the clients' and the server's randomness (per-client streams
            are drawn from it in sorted-client order).
        n_jobs : int, default=None
            Run the clients' steps in parallel with joblib (``-1``: all cores).
            Only strategies without a vectorised simulation use it; results do
            not depend on it.

        Returns
        -------
        self : object
            The fitted calibrator.
        """
        self._validate_params()
        alpha = check_alpha(alpha)
        scores = check_scores(scores)
        partition = ClientPartition(client_ids, scores.shape[0])
        sizes = partition.sizes
        if self._randomized:
            rng, rngs = self._random_streams(random_state, partition.n_clients)
        else:
            rng = None
            rngs = [None] * partition.n_clients
        self._n_jobs = n_jobs
        try:
            stacked = self._simulate_clients(partition, scores, alpha=alpha, rngs=rngs)
        finally:
            del self._n_jobs
        self.threshold_ = float(
            self._server_from_stacked(
                stacked, alpha=alpha, n_per_client=sizes, random_state=rng
            )
        )
        self.messages_ = {"client": partition.clients, **stacked}
        self.clients_ = partition.clients
        self.n_clients_ = partition.n_clients
        self.n_per_client_ = sizes
        self.calibration_info_ = self.plan(sizes, alpha)
        if np.isposinf(self.threshold_):
            warnings.warn(
                f"{type(self).__name__}: the calibrated threshold is +inf "
                f"(alpha={alpha}, client sizes {_describe_sizes(sizes)}); prediction "
                "sets are trivial. Use more calibration data or a larger alpha.",
                InfiniteThresholdWarning,
                stacklevel=2,
            )
        return self


def _describe_sizes(sizes):
    sizes = np.asarray(sizes)
    if sizes.size <= 6:
        return sizes.tolist()
    return f"{sizes.size} clients, {sizes.min()}..{sizes.max()} rows"
