"""Synthetic regression data with known structure, federated or not."""

from __future__ import annotations

from numbers import Real

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._typing import SklearnRandomState
from ..utils._random import check_random_state
from ..utils._validation import check_int

__all__ = ["make_federated_regression", "make_romano_regression"]


def _check_nonneg_real(value, name):
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a non-negative float; got {value!r}.")
    if not np.isfinite(np.asarray(value)) or value < 0:
        raise ValueError(f"{name} must be a finite float >= 0; got {value!r}.")
    return float(value)


def make_federated_regression(
    n_clients: int = 10,
    n_per_client: int | ArrayLike = 100,
    *,
    n_features: int = 5,
    noise: float = 1.0,
    heterogeneity: float = 0.0,
    random_state: SklearnRandomState = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    r"""Generate a linear regression problem split over clients with covariate shift.

    Every client shares the same regression function and noise law; only the
    distribution of X moves from client to client. Client ``k`` draws

    .. math::

        X \sim \mathcal{N}(h\, m_k, I_d), \qquad
        y = X w + \sigma \varepsilon, \quad \varepsilon \sim \mathcal{N}(0, 1),

    where ``h = heterogeneity``, ``sigma = noise``, the client offsets ``m_k``
    and the coefficients ``w`` are standard normal draws (made once per call).

    Parameters
    ----------
    n_clients : int, default=10
        Number of clients (>= 1).
    n_per_client : int or array-like of shape (n_clients,), default=100
        Rows per client: one size for all, or one size per client (each >= 1).
    n_features : int, default=5
        Number of features (>= 1).
    noise : float, default=1.0
        Standard deviation of the Gaussian noise (>= 0).
    heterogeneity : float, default=0.0
        Scale of the per-client mean shift of X (>= 0). ``0`` makes all
        clients identically distributed (i.i.d. data); at ``1`` the spread of
        client means equals the within-client spread.
    random_state : int, RandomState instance or None, default=None
        Seed for all draws; None draws fresh
        entropy from the operating system, never NumPy's global state.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        Features; ``n_samples`` is the total of the client sizes.
    y : ndarray of shape (n_samples,)
        Targets.
    client_ids : ndarray of shape (n_samples,)
        Client label ``0 ... n_clients - 1`` of each row; rows are grouped by
        client in increasing label order.

    Notes
    -----
    The conditional law of ``y`` given ``X`` is the same on every client, so
    the data are a pure covariate-shift federation. The noise is homoscedastic:
    residuals of a well-specified linear model are then identically
    distributed across clients whatever the heterogeneity, while the scores of
    a misspecified model (e.g. one fitted on other clients with a constant
    or non-linear learner) do shift.

    Examples
    --------
    >>> from skfedcp.datasets import make_federated_regression
    >>> X, y, client_ids = make_federated_regression(
    ...     n_clients=3, n_per_client=4, heterogeneity=1.0, random_state=0)
    >>> X.shape, y.shape, client_ids.tolist()
    ((12, 5), (12,), [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2])
    """
    n_clients = check_int(n_clients, "n_clients", low=1)
    n_features = check_int(n_features, "n_features", low=1)
    noise = _check_nonneg_real(noise, "noise")
    heterogeneity = _check_nonneg_real(heterogeneity, "heterogeneity")
    if np.ndim(n_per_client) == 0:
        sizes = np.full(n_clients, check_int(n_per_client, "n_per_client", low=1))
    else:
        sizes = np.asarray(n_per_client)
        if sizes.shape != (n_clients,):
            raise ValueError(
                f"n_per_client must be an int or have shape ({n_clients},); "
                f"got shape {sizes.shape}."
            )
        if sizes.dtype.kind not in "iu" or np.any(sizes < 1):
            raise ValueError(
                f"n_per_client must hold integers >= 1; got {sizes.tolist()}."
            )
    rng = check_random_state(random_state)
    coef = rng.standard_normal(n_features)
    offsets = heterogeneity * rng.standard_normal((n_clients, n_features))
    client_ids = np.repeat(np.arange(n_clients), sizes)
    n_samples = client_ids.shape[0]
    X = offsets[client_ids] + rng.standard_normal((n_samples, n_features))
    y = X @ coef + noise * rng.standard_normal(n_samples)
    return X, y, client_ids


def _romano_draw(
    n_samples: int, rng: np.random.RandomState
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Return ``X``, ``y`` and the outlier indicator of the Romano et al. model."""
    x = rng.uniform(1.0, 5.0, size=n_samples)
    poisson = rng.poisson(np.sin(x) ** 2 + 0.1)
    eps1 = rng.standard_normal(n_samples)
    eps2 = rng.standard_normal(n_samples)
    outlier = rng.uniform(size=n_samples) < 0.01
    y = poisson + 0.03 * x * eps1 + 25.0 * outlier * eps2
    return x.reshape(-1, 1), y, outlier


def make_romano_regression(
    n_samples: int, *, random_state: SklearnRandomState = None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Generate the heteroscedastic, heavy-tailed 1-D data of Romano et al. (2019).

    The synthetic benchmark of conformalized quantile regression:

    .. math::

        X \sim U[1, 5], \qquad
        Y = \mathrm{Pois}(\sin^2 X + 0.1) + 0.03\, X \varepsilon_1
            + 25\, \mathbb{1}\{U < 0.01\}\, \varepsilon_2,

    with :math:`\varepsilon_1, \varepsilon_2 \sim \mathcal{N}(0, 1)` and
    :math:`U \sim U[0, 1]` independent. About 1% of the rows carry the large
    outlier term, so the spread of Y given X varies with X and has heavy
    tails: symmetric fixed-width intervals are a poor fit.

    Parameters
    ----------
    n_samples : int
        Number of rows (>= 1).
    random_state : int, RandomState instance or None, default=None
        Seed for all draws; None draws fresh
        entropy from the operating system, never NumPy's global state.

    Returns
    -------
    X : ndarray of shape (n_samples, 1)
        Features, uniform on [1, 5].
    y : ndarray of shape (n_samples,)
        Targets.

    References
    ----------
    .. [1] Y. Romano, E. Patterson and E. Candès, "Conformalized Quantile
       Regression", NeurIPS 2019.

    Examples
    --------
    >>> from skfedcp.datasets import make_romano_regression
    >>> X, y = make_romano_regression(500, random_state=0)
    >>> X.shape, y.shape, bool(X.min() >= 1 and X.max() <= 5)
    ((500, 1), (500,), True)
    """
    n_samples = check_int(n_samples, "n_samples", low=1)
    X, y, _ = _romano_draw(n_samples, check_random_state(random_state))
    return X, y
