"""FED-H (federated Shannon entropy) and a federated chi-square independence test."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Literal, NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from .._typing import ClientIds, SklearnRandomState
from ..federated._fixed_point import fixed_point_decode, fixed_point_encode
from ..federated._masked_sum import _masked_sum_simulation
from ..federated._partition import ClientPartition
from ..federated._secure_aggregation import _circulant_graph
from ._chi2 import FedChi2Selector
from ._sketch import (
    _check_positive_int,
    _check_seed,
    _projection_seed,
    _stable_rows,
    estimate_frequency_moment,
    required_projection_dim,
)

__all__ = [
    "Chi2TestResult",
    "entropy_client_encode",
    "entropy_server_decode",
    "fed_chi2_test",
    "fed_entropy",
]

# A3.4: FED-H sketches are quantized with 20 fractional bits after each
# client saturates |x| at 2**(62 - 20) / n (heavy tails for alpha near 1).
ENTROPY_FRAC_BITS = 20


class Chi2TestResult(NamedTuple):
    """Result of :func:`fed_chi2_test`; unpacks as ``(statistic, pvalue, dof)``."""

    statistic: float
    pvalue: float
    dof: int


def _check_step(step):
    if isinstance(step, bool) or not isinstance(step, Real):
        raise TypeError(f"step must be a float in (0, 1); got {step!r}.")
    if not 0.0 < float(step) < 1.0:
        raise ValueError(f"step must be in the open interval (0, 1); got {step!r}.")
    return float(step)


def _entropy_sketch(seed, p, n_projections, step, coupled):
    """``[P+ p, P- p]`` for the columns of ``p`` (m, n): shape (2, l, n)."""
    m = p.shape[0]
    alphas = (1.0 + step, 1.0 - step)
    out = np.empty((2, n_projections, p.shape[1]))
    if coupled:
        for start, blocks in _stable_rows(seed, (0,), n_projections, m, alphas):
            for s, block in enumerate(blocks):
                out[s, start : start + block.shape[0]] = block @ p
    else:
        for s, alpha in enumerate(alphas):
            for start, (block,) in _stable_rows(seed, (s,), n_projections, m, (alpha,)):
                out[s, start : start + block.shape[0]] = block @ p
    return out


def entropy_client_encode(
    counts: ArrayLike,
    *,
    n_total: float,
    seed: int,
    n_projections: int = 2000,
    step: float = 0.05,
    coupled: bool = False,
) -> NDArray[np.float64]:
    """FED-H client step: project the client's share of the frequency vector.

    The client holds category counts ``c_i``; with the public total ``N``
    (round one) its share is ``p_i = c_i / N`` (the shares sum to the global
    frequencies). It sends ``e+ = P+ p_i`` and ``e- = P- p_i`` where ``P+``
    and ``P-`` have iid ``Q_{1+step,0,1}`` and ``Q_{1-step,0,1}`` entries
    (keys ``(0,)`` and ``(1,)``; both from key ``(0,)`` when ``coupled``).
    Before secure aggregation, a deployment saturates ``|e|`` at
    ``2**(62 - ENTROPY_FRAC_BITS) / n_clients`` and encodes with
    ``ENTROPY_FRAC_BITS`` fractional bits.

    Parameters
    ----------
    counts : array-like of shape (n_categories,)
        The client's counts, in the agreed category order.
    n_total : float
        Global number of rows ``N`` (from round one).
    seed : int
        Shared projection seed in ``[0, 2**128)``.
    n_projections : int, default=2000
        Sketch size per moment.
    step : float, default=0.05
        Finite-difference step ``Delta`` of the entropy formula.
    coupled : bool, default=False
        Draw ``P+`` and ``P-`` from the same uniforms (not in the paper):
        both stay exactly stable, so each moment estimate is unchanged in
        law, but their difference is far less noisy.

    Returns
    -------
    sketch : ndarray of shape (2, n_projections)

    Examples
    --------
    >>> e = entropy_client_encode([3, 1, 0], n_total=8, seed=1, n_projections=4)
    >>> e.shape
    (2, 4)
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 1 or np.any(counts < 0):
        raise ValueError("counts must be a 1-D array of non-negative counts.")
    if not float(n_total) > 0:
        raise ValueError(f"n_total must be positive; got {n_total!r}.")
    seed = _check_seed(seed)
    n_projections = _check_positive_int(n_projections, "n_projections", 2)
    step = _check_step(step)
    p = (counts / float(n_total))[:, None]
    return _entropy_sketch(seed, p, n_projections, step, bool(coupled))[:, :, 0]


def entropy_server_decode(
    sketch: ArrayLike, *, step: float = 0.05, base: float | None = None
) -> float:
    """FED-H server step: entropy from the summed sketches.

    ``H = -(F_{1+step} - F_{1-step}) / (2 step)``, each moment estimated by
    the geometric-mean estimator with its own ``alpha``. This is a central
    finite difference of ``t -> sum_x p_x**t`` at ``t = 1``: it has a bias
    of order ``step**2`` besides the sketch noise.

    Parameters
    ----------
    sketch : array-like of shape (2, n_projections)
        Secure sum of the clients' :func:`entropy_client_encode` outputs.
    step : float, default=0.05
        The clients' ``step``.
    base : float, optional
        Logarithm base; natural logarithm (nats) by default.

    Returns
    -------
    entropy : float

    Examples
    --------
    >>> counts = np.array([50, 30, 20])
    >>> e = entropy_client_encode(counts, n_total=100, seed=0, n_projections=20000,
    ...                           coupled=True)
    >>> round(entropy_server_decode(e), 1)
    1.0
    """
    sketch = np.asarray(sketch, dtype=np.float64)
    if sketch.ndim != 2 or sketch.shape[0] != 2:
        raise ValueError(
            f"sketch must have shape (2, n_projections); got {sketch.shape}."
        )
    step = _check_step(step)
    f_plus = estimate_frequency_moment(sketch[0], alpha=1.0 + step)
    f_minus = estimate_frequency_moment(sketch[1], alpha=1.0 - step)
    h = -(f_plus - f_minus) / (2.0 * step)
    if base is not None:
        if (
            isinstance(base, bool)
            or not isinstance(base, Real)
            or base <= 0
            or base == 1
        ):
            raise ValueError(
                f"base must be a positive float other than 1; got {base!r}."
            )
        h /= np.log(base)
    return float(h)


def _resolve_projections(n_projections, alpha):
    if isinstance(n_projections, tuple):
        if len(n_projections) != 2:
            raise ValueError("n_projections must be an int or a tuple (eps, delta).")
        return required_projection_dim(*n_projections, alpha=alpha)
    if isinstance(n_projections, bool) or not isinstance(n_projections, Integral):
        raise TypeError(f"n_projections must be an int >= 2; got {n_projections!r}.")
    return _check_positive_int(n_projections, "n_projections", 2)


def fed_entropy(
    x: ArrayLike,
    client_ids: ClientIds = None,
    *,
    n_projections: int | tuple[float, float] = 2000,
    step: float = 0.05,
    coupled: bool = False,
    base: float | None = None,
    secure_agg: Literal["harary", "complete", "none"] = "harary",
    random_state: SklearnRandomState = None,
) -> float:
    """Shannon entropy of a categorical variable spread over clients (FED-H).

    Round one securely sums the clients' row counts (the server learns
    ``N``); round two securely sums each client's two stable sketches of its
    share ``c_i / N`` of the frequency vector (:func:`entropy_client_encode`);
    the server decodes ``H = -(F_{1+step} - F_{1-step}) / (2 step)``
    (:func:`entropy_server_decode`). The server sees ``N``, the summed
    sketches and nothing per client (Pang et al., 2023, Sec. 3.5). The
    secure sums are a simulation of the protocol's arithmetic, run in one
    process.

    Parameters
    ----------
    x : array-like of shape (n_samples,)
        Category of each row (any hashable labels). The category set is
        treated as public (the paper's ``m_x``).
    client_ids : array-like of shape (n_samples,), default=None
        Client holding each row; None means one client.
    n_projections : int or tuple of (float, float), default=2000
        Sketch size ``l`` per moment, or a target ``(eps, delta)`` of the
        relative accuracy of each moment (:func:`required_projection_dim`
        with ``alpha = 1 - step``).
    step : float, default=0.05
        Finite-difference step ``Delta`` (not given in the paper; 0.05 is
        the value of the authors' code for the analogous G-test).
    coupled : bool, default=False
        Draw both matrices from the same uniforms (not in the paper; much
        lower variance, same marginal laws).
    base : float, optional
        Logarithm base; nats by default.
    secure_agg : {"harary", "complete", "none"}, default="harary"
        Simulated masking graph, or a plain modular sum (same result).
    random_state : int, RandomState instance or None, default=None
        Seeds the shared projection seed and the simulated masks. None:
        fresh operating-system entropy (never NumPy's global state).

    Returns
    -------
    entropy : float
        Estimated entropy.

    Notes
    -----
    If both moments are within a factor ``1 +/- eps``, ``|H_hat - H| <=
    (m**step + 1) eps / (2 step) + (step**2 / 6) sum_x p_x**(1-step)
    |ln p_x|**3`` for ``m`` categories (the paper's App. G, with the
    finite-difference term summed over categories). With the default
    settings the sketch noise dominates: the standard error of ``H_hat`` is
    roughly ``22 / sqrt(l)`` nats with independent matrices, much less with
    ``coupled=True``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.integers(0, 8, size=4000)
    >>> h = fed_entropy(x, rng.integers(0, 5, size=4000), coupled=True,
    ...                 random_state=0)
    >>> round(h, 1), round(float(np.log(8)), 1)
    (2.1, 2.1)
    """
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D; got shape {x.shape}.")
    step = _check_step(step)
    if secure_agg not in ("harary", "complete", "none"):
        raise ValueError(
            f"secure_agg must be 'harary', 'complete' or 'none'; got {secure_agg!r}."
        )
    ell = _resolve_projections(n_projections, 1.0 - step)
    part = ClientPartition(client_ids, x.shape[0])
    seed, rng = _projection_seed(random_state)  # never NumPy's global state
    codes, uniques = pd.factorize(x, sort=True)
    if np.any(codes < 0):
        raise ValueError("x must not contain missing values.")
    n = part.n_clients
    cell = part.client_codes().astype(np.intp) * len(uniques) + codes
    counts = np.bincount(cell, minlength=n * len(uniques)).reshape(n, len(uniques))

    def secure(messages, frac_bits):
        enc = fixed_point_encode(messages, frac_bits)
        if secure_agg == "none":
            total = np.sum(enc, axis=0, dtype=np.uint64)
        else:  # every client masks, the server sums (no dropout here)
            graph = _circulant_graph(n, graph=secure_agg, random_state=rng)
            total = _masked_sum_simulation(enc, np.arange(n), graph, rng)
        return fixed_point_decode(total, frac_bits)

    # Round 1: N, exactly.
    n_total = secure(counts.sum(axis=1, keepdims=True).astype(np.float64), 0)[0]
    # Round 2: each client's two sketches, saturated then quantized.
    p = (counts / n_total).T
    e = _entropy_sketch(seed, p, ell, step, bool(coupled))  # (2, l, n)
    limit = 2.0 ** (62 - ENTROPY_FRAC_BITS) / n
    messages = np.clip(e, -limit, limit).transpose(2, 0, 1).reshape(n, -1)
    total = secure(messages, ENTROPY_FRAC_BITS).reshape(2, ell)
    return entropy_server_decode(total, step=step, base=base)


def fed_chi2_test(
    a: ArrayLike,
    b: ArrayLike,
    client_ids: ClientIds = None,
    *,
    n_projections: int | tuple[float, float] = 50,
    estimator: Literal["geometric", "mean_square"] = "geometric",
    expected_split: Literal["class", "uniform"] = "class",
    method: Literal["sketch", "plain"] = "sketch",
    secure_agg: Literal["harary", "complete", "none"] = "harary",
    dropout: float | ArrayLike | None = None,
    random_state: SklearnRandomState = None,
) -> Chi2TestResult:
    """Federated Pearson chi-square test of independence of two categoricals.

    The FED-chi2 protocol (Pang et al., 2023, Alg. 2) on the ``m_a x m_b``
    contingency table of ``a`` and ``b`` whose rows are spread over
    clients: the server learns the marginal counts of ``a`` and ``b`` and a
    stable sketch of the table's standardized residuals, never a client's
    table, and estimates the statistic from the sketch.

    Parameters
    ----------
    a, b : array-like of shape (n_samples,)
        The two categorical variables (any labels); their level sets are
        treated as public.
    client_ids : array-like of shape (n_samples,), default=None
        Client holding each row; None means one client.
    n_projections : int or tuple of (float, float), default=50
        Sketch size, or a target ``(eps, delta)``.
    estimator : {"geometric", "mean_square"}, default="geometric"
        Decoder of the sketch.
    expected_split : {"class", "uniform"}, default="class"
        Share of the expected counts per client, see :class:`FedChi2Selector`.
    method : {"sketch", "plain"}, default="sketch"
        ``"plain"`` securely sums the whole table (exact statistic).
    secure_agg : {"harary", "complete", "none"}, default="harary"
        Simulated masking graph, or a plain modular sum (same result).
    dropout : float or array-like, optional
        Clients lost in round two (fraction or labels).
    random_state : int, RandomState instance or None, default=None
        Seeds the protocol's randomness. None: fresh operating-system
        entropy (never NumPy's global state).

    Returns
    -------
    result : Chi2TestResult
        ``(statistic, pvalue, dof)`` with ``dof = (m_a - 1)(m_b - 1)`` and
        ``pvalue = chdtrc(dof, statistic)``.

    See Also
    --------
    scipy.stats.chi2_contingency : The pooled test (use ``correction=False``).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a = rng.integers(0, 3, 600)
    >>> b = (a + rng.integers(0, 2, 600)) % 4
    >>> stat, p, dof = fed_chi2_test(a, b, rng.integers(0, 6, 600), method="plain")
    >>> from scipy.stats import chi2_contingency
    >>> ref = chi2_contingency(pd.crosstab(a, b), correction=False)
    >>> bool(np.isclose(stat, ref.statistic)), dof == ref.dof
    (True, True)
    """
    a = np.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"a must be 1-D; got shape {a.shape}.")
    codes, _ = pd.factorize(a, sort=True)
    if np.any(codes < 0):
        raise ValueError("a must not contain missing values.")
    selector = FedChi2Selector(
        k="all",
        statistic="contingency",
        n_projections=n_projections,
        estimator=estimator,
        expected_split=expected_split,
        method=method,
        secure_agg=secure_agg,
        dropout=dropout,
        random_state=random_state,
    ).fit(codes.reshape(-1, 1).astype(np.float64), b, client_ids=client_ids)
    return Chi2TestResult(
        float(selector.scores_[0]), float(selector.pvalues_[0]), int(selector.dof_[0])
    )
