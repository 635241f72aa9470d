"""Stable random projections: shared matrices, moment estimators, sketch size."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

__all__ = [
    "estimate_frequency_moment",
    "required_projection_dim",
    "stable_projection",
]

_SEED_MAX = 2**128
# Median of the chi-square law with one degree of freedom.
_CHI2_1_MEDIAN = float(stats.chi2.ppf(0.5, 1))


def _check_seed(seed):
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise TypeError(f"seed must be an int in [0, 2**128); got {seed!r}.")
    if not 0 <= int(seed) < _SEED_MAX:
        raise ValueError(f"seed must be in [0, 2**128); got {seed}.")
    return int(seed)


def _projection_seed(random_state):
    """The clients' shared projection seed and a generator for the simulation.

    Returns ``(seed, rng)``: ``seed`` in ``[0, 2**128)`` (A1 of the spec) and
    an independent :class:`numpy.random.Generator` spawned from the same
    :class:`~numpy.random.SeedSequence` for the simulated masks and dropout.
    ``random_state=None`` draws both from fresh operating-system entropy and
    neither is kept anywhere: nothing that outlives the call can regenerate
    the seed. An int is a simulation convenience that gives this up (anyone
    holding the int regenerates the seed); it maps to the seed as
    ``_draw_seeds(RandomState(random_state), 1)[0]``, so that deployments
    configured with that seed match the simulation. NumPy's global state is
    never used.
    """
    from ..federated._secure_aggregation import _draw_seeds
    from ..utils._random import check_seed_sequence

    root = check_seed_sequence(random_state, allow_secure=False)
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        seed = _draw_seeds(np.random.RandomState(int(random_state)), 1)[0]
    else:
        words = root.generate_state(4, np.uint32).astype(object)
        seed = int(words[0] | (words[1] << 32) | (words[2] << 64) | (words[3] << 96))
    fresh = np.random.SeedSequence(
        root.entropy, spawn_key=root.spawn_key, pool_size=root.pool_size
    )
    (child,) = fresh.spawn(1)  # the caller's SeedSequence is left untouched
    return seed, np.random.default_rng(child)


def _raw(seed, key, size):
    # Stream-stable raw output: SeedSequence and PCG64 do not change across
    # numpy versions, unlike Generator's distribution methods.
    ss = np.random.SeedSequence(entropy=seed, spawn_key=tuple(int(k) for k in key))
    return np.random.PCG64(ss).random_raw(size)


def _to_unit(raw):
    # 53 random bits, shifted by half a step: strictly inside (0, 1).
    return ((raw >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def _box_muller(u):
    # Pairs (u[..., 0::2], u[..., 1::2]) -> standard normals, same layout.
    rho = np.sqrt(-2.0 * np.log(u[..., 0::2]))
    theta = 2.0 * np.pi * u[..., 1::2]
    z = np.empty_like(u)
    z[..., 0::2] = rho * np.cos(theta)
    z[..., 1::2] = rho * np.sin(theta)
    return z


def _cms(u, alpha):
    # Chambers-Mallows-Stuck, symmetric (beta = 0), scale F = 1.
    U = np.pi * (u[..., 0::2] - 0.5)
    if alpha == 1.0:
        return np.tan(U)
    W = -np.log(u[..., 1::2])
    return (
        np.sin(alpha * U)
        / np.cos(U) ** (1.0 / alpha)
        * (np.cos((1.0 - alpha) * U) / W) ** ((1.0 - alpha) / alpha)
    )


def _gaussian_projections(seed, features, n_projections, n_cols):
    """Stack of 2-stable matrices, one per key ``(j,)``: shape (J, l, m).

    Entry-for-entry identical to ``stable_projection(seed, (j,), l, m)``.
    """
    size = n_projections * n_cols
    n_raw = 2 * ((size + 1) // 2)
    raw = np.empty((len(features), n_raw), dtype=np.uint64)
    for row, j in enumerate(features):
        raw[row] = _raw(seed, (j,), n_raw)
    z = _box_muller(_to_unit(raw))[:, :size]
    z *= np.sqrt(2.0)
    return z.reshape(len(features), n_projections, n_cols)


def _stable_rows(seed, key, n_projections, n_cols, alphas, max_entries=2**22):
    """Yield ``(row_start, blocks)`` of symmetric alpha-stable matrices, alpha < 2.

    Rows of the row-major matrix are contiguous in the uniform stream, so the
    matrix is produced in row blocks of bounded memory. One block per value
    in ``alphas``, all from the same uniforms (coupled matrices).
    """
    ss = np.random.SeedSequence(entropy=seed, spawn_key=tuple(int(k) for k in key))
    bitgen = np.random.PCG64(ss)
    rows = max(1, max_entries // max(n_cols, 1))
    for start in range(0, n_projections, rows):
        stop = min(start + rows, n_projections)
        u = _to_unit(bitgen.random_raw(2 * (stop - start) * n_cols))
        yield start, [_cms(u, a).reshape(stop - start, n_cols) for a in alphas]


def _check_alpha_stable(alpha):
    if isinstance(alpha, bool) or not isinstance(alpha, Real):
        raise TypeError(f"alpha must be a float in (0, 2]; got {alpha!r}.")
    alpha = float(alpha)
    if not 0.0 < alpha <= 2.0:
        raise ValueError(f"alpha must be in (0, 2]; got {alpha!r}.")
    return alpha


def _check_positive_int(value, name, minimum=1):
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int >= {minimum}; got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}.")
    return int(value)


def stable_projection(
    seed: int,
    key: tuple[int, ...],
    n_projections: int,
    n_cols: int,
    *,
    alpha: float = 2.0,
) -> NDArray[np.float64]:
    """Shared random matrix with iid symmetric alpha-stable entries.

    Every client that knows the shared ``seed`` builds the same matrix,
    bit for bit, from the raw output of ``PCG64(SeedSequence(seed,
    spawn_key=key))`` (stream-stable across numpy versions). The entries
    follow ``Q_{alpha,0,1}``, with characteristic function
    ``exp(-|t|**alpha)``: for ``alpha = 2`` that is ``N(0, 2)`` (variance 2,
    not 1), for ``alpha = 1`` the standard Cauchy law.

    Parameters
    ----------
    seed : int
        Shared projection seed in ``[0, 2**128)``.
    key : tuple of int
        Which statistic the matrix encodes; use one key per statistic (a
        matrix must never encode two statistics).
    n_projections : int
        Number of rows ``l`` (the sketch size).
    n_cols : int
        Number of columns ``m`` (the length of the encoded vector).
    alpha : float, default=2.0
        Stability index in ``(0, 2]``. ``alpha = 2`` uses Box-Muller on
        pairs of uniforms; other values use Chambers-Mallows-Stuck.

    Returns
    -------
    P : ndarray of shape (n_projections, n_cols)

    Notes
    -----
    For ``alpha = 2`` the uniforms are ``u = ((raw >> 11) + 0.5) / 2**53``;
    ``z[0::2] = rho cos(2 pi u2)``, ``z[1::2] = rho sin(2 pi u2)`` with
    ``rho = sqrt(-2 log u1)``, and ``P = sqrt(2) z`` in row-major order.

    Examples
    --------
    >>> stable_projection(0, (0,), 3, 2).round(6)
    array([[-0.196264,  0.443285],
           [ 0.803481,  0.809593],
           [-1.108876, -1.48733 ]])
    """
    seed = _check_seed(seed)
    n_projections = _check_positive_int(n_projections, "n_projections")
    n_cols = _check_positive_int(n_cols, "n_cols")
    alpha = _check_alpha_stable(alpha)
    key = tuple(key)
    if alpha == 2.0:
        return _single_gaussian(seed, key, n_projections, n_cols)
    out = np.empty((n_projections, n_cols))
    for start, (block,) in _stable_rows(seed, key, n_projections, n_cols, (alpha,)):
        out[start : start + block.shape[0]] = block
    return out


def _single_gaussian(seed, key, n_projections, n_cols):
    size = n_projections * n_cols
    u = _to_unit(_raw(seed, key, 2 * ((size + 1) // 2)))
    z = _box_muller(u)[:size] * np.sqrt(2.0)
    return z.reshape(n_projections, n_cols)


def _stable_abs_moment(alpha, order):
    """``E|S|**order`` for ``S ~ Q_{alpha,0,1}``, ``-1 < order < alpha``."""
    return (
        2.0
        / np.pi
        * special.gamma(1.0 - order / alpha)
        * special.gamma(order)
        * np.sin(np.pi * order / 2.0)
    )


def _log_gm_constant(alpha, n_projections):
    # log D_l(alpha), D_l(alpha) = (2/pi) G(alpha/l) G(1 - 1/l) sin(pi alpha / (2 l))
    ell = np.asarray(n_projections, dtype=np.float64)
    return (
        np.log(2.0 / np.pi)
        + special.gammaln(alpha / ell)
        + special.gammaln(1.0 - 1.0 / ell)
        + np.log(np.sin(np.pi * alpha / (2.0 * ell)))
    )


_ESTIMATORS = ("geometric", "mean_square", "median")


def estimate_frequency_moment(
    sketch: ArrayLike,
    *,
    alpha: float = 2.0,
    estimator: Literal["geometric", "mean_square", "median"] = "geometric",
    axis: int = 0,
) -> NDArray[np.float64] | float:
    """Server decode: estimate ``F_alpha(w)`` from the sketch ``e = P w``.

    The entries of ``e`` are iid ``F_alpha(w)**(1/alpha) S`` with
    ``S ~ Q_{alpha,0,1}``, so ``F_alpha(w) = sum_k |w_k|**alpha`` is the
    scale of ``e`` to the power ``alpha``.

    Parameters
    ----------
    sketch : array-like
        Aggregated sketch; the ``l`` projections run along ``axis``.
    alpha : float, default=2.0
        Stability index of the projection (2 for chi-square statistics).
    estimator : {"geometric", "mean_square", "median"}, default="geometric"
        ``"geometric"``: Li's (2008) unbiased geometric-mean estimator, the
        paper's decoder (any ``alpha``, needs ``l >= 2``):
        ``prod_k |e_k|**(alpha/l) / D_l(alpha)**l``.
        ``"mean_square"`` (``alpha = 2``): ``sum_k e_k**2 / (2 l)``, exactly
        ``F chi2_l / l``; the maximum-likelihood estimator, about 2.47 times
        more efficient than the geometric mean.
        ``"median"`` (``alpha = 2``): ``median(e_k**2) / (2 * 0.4549)``
        (Indyk, 2006), biased for small ``l``.

    axis : int, default=0
        Axis of ``sketch`` holding the projections.

    Returns
    -------
    moment : ndarray or float
        Estimates of ``F_alpha``, with ``axis`` removed. A sketch with a zero
        entry gives 0 under ``"geometric"``.

    References
    ----------
    .. [1] P. Li, "Estimators and tail bounds for dimension reduction in
       l_alpha (0 < alpha <= 2) using stable random projections", SODA 2008.
    .. [2] P. Indyk, "Stable distributions, pseudorandom generators,
       embeddings, and data stream computation", J. ACM 53(3), 2006.

    Examples
    --------
    >>> P = stable_projection(1, (0,), 2000, 3)
    >>> w = np.array([3.0, -4.0, 0.0])
    >>> round(float(estimate_frequency_moment(P @ w, estimator="mean_square")), 0)
    25.0
    """
    alpha = _check_alpha_stable(alpha)
    if estimator not in _ESTIMATORS:
        raise ValueError(f"estimator must be one of {_ESTIMATORS}; got {estimator!r}.")
    # Projections along the last, contiguous axis: the reductions below then
    # give the same bits for a statistic whatever the layout or batch size.
    e = np.ascontiguousarray(
        np.moveaxis(np.asarray(sketch, dtype=np.float64), axis, -1)
    )
    ell = e.shape[-1]
    if estimator == "geometric":
        if ell < 2:
            raise ValueError(
                "The geometric-mean estimator needs n_projections >= 2; got "
                f"{ell}. Use estimator='mean_square' for a single projection."
            )
        abs_e = np.abs(e)
        with np.errstate(divide="ignore"):
            log_abs = np.log(abs_e)
        has_zero = np.any(abs_e == 0, axis=-1)
        log_abs = np.where(abs_e == 0, 0.0, log_abs)
        log_f = alpha / ell * log_abs.sum(axis=-1) - ell * _log_gm_constant(alpha, ell)
        out = np.where(has_zero, 0.0, np.exp(log_f))
    else:
        if alpha != 2.0:
            raise ValueError(f"estimator={estimator!r} requires alpha=2; got {alpha}.")
        if ell < 1:
            raise ValueError("sketch has no projections.")
        if estimator == "mean_square":
            out = np.sum(e * e, axis=-1) / (2.0 * ell)
        else:
            out = np.median(e * e, axis=-1) / (2.0 * _CHI2_1_MEDIAN)
    return out[()] if np.ndim(out) == 0 else out


def _eta_right(eps, alpha):
    log1e = np.log1p(eps)
    c1 = 2.0 / np.pi * np.arctan(log1e / ((2.0 + alpha**2) * np.pi / 6.0))
    return (
        c1 * log1e
        - c1 * np.euler_gamma * (alpha - 1.0)
        - np.log(_stable_abs_moment(alpha, alpha * c1))
    )


def _eta_left(eps, alpha, ell0):
    c2 = 12.0 * eps / (np.pi**2 * (2.0 + alpha**2))
    neg_moment = (
        -2.0
        / np.pi
        * special.gamma(-alpha * c2)
        * special.gamma(1.0 + c2)
        * np.sin(np.pi * alpha * c2 / 2.0)
    )
    return (
        -c2 * np.log1p(-eps)
        - np.log(neg_moment)
        - ell0 * c2 * _log_gm_constant(alpha, ell0)
    )


def required_projection_dim(
    eps: float,
    delta: float,
    *,
    alpha: float = 2.0,
    estimator: Literal["geometric", "mean_square"] = "geometric",
) -> int:
    """Smallest sketch size ``l`` with ``P[|F_hat/F - 1| > eps] <= delta``.

    For ``estimator="geometric"``: the tail bounds of Li (2008) used in the
    paper's Theorem 2, ``P[F_hat > (1+eps)F] <= exp(-l eta_R)`` and
    ``P[F_hat < (1-eps)F] <= exp(-l eta_L(l))``, give the smallest ``l >= 2``
    with ``min(eta_R, eta_L(l)) > 0`` and ``l >= log(2/delta) / min(eta_R,
    eta_L(l))`` (the constant ``l_0`` of the left bound is taken equal to
    ``l``). This is a sufficient size: empirically about 2-2.5 times fewer
    projections already reach the target.

    For ``estimator="mean_square"`` (``alpha = 2``) the law is exact
    (``F_hat / F ~ chi2_l / l``): the smallest ``l`` with
    ``P[chi2_l < l(1-eps)] + P[chi2_l > l(1+eps)] <= delta``.

    Parameters
    ----------
    eps : float
        Relative accuracy, in ``(0, 1)``.
    delta : float
        Failure probability, in ``(0, 1)``.
    alpha : float, default=2.0
        Stability index.
    estimator : {"geometric", "mean_square"}, default="geometric"
        Decoder whose accuracy is targeted.

    Returns
    -------
    n_projections : int

    Notes
    -----
    The guarantee is per statistic: with ``d`` features, expect about
    ``delta * d`` of them outside ``(1 +/- eps)``.

    Examples
    --------
    >>> required_projection_dim(0.2, 0.05)
    1054
    >>> required_projection_dim(0.2, 0.05, estimator="mean_square")
    191
    """
    for name, value in (("eps", eps), ("delta", delta)):
        if isinstance(value, bool) or not isinstance(value, Real):
            raise TypeError(f"{name} must be a float in (0, 1); got {value!r}.")
        if not 0.0 < float(value) < 1.0:
            raise ValueError(
                f"{name} must be in the open interval (0, 1); got {value!r}."
            )
    eps, delta = float(eps), float(delta)
    alpha = _check_alpha_stable(alpha)
    if estimator == "geometric":
        eta_r = _eta_right(eps, alpha)

        def ok(ell):
            with np.errstate(invalid="ignore", divide="ignore"):
                eta = np.minimum(eta_r, _eta_left(eps, alpha, ell))
                return (eta > 0) & (ell * eta >= np.log(2.0 / delta))

        first = 2
    elif estimator == "mean_square":
        if alpha != 2.0:
            raise ValueError("estimator='mean_square' requires alpha=2.")

        def ok(ell):
            tail = stats.chi2.cdf(ell * (1 - eps), ell) + stats.chi2.sf(
                ell * (1 + eps), ell
            )
            return tail <= delta

        first = 1
    else:
        raise ValueError(
            f"estimator must be 'geometric' or 'mean_square'; got {estimator!r}."
        )
    hi = 64
    while True:
        grid = np.arange(first, hi + 1, dtype=np.float64)
        hit = np.flatnonzero(ok(grid))
        if hit.size:
            return int(grid[hit[0]])
        if hi > 2**31:
            raise ValueError(f"No sketch size reaches eps={eps}, delta={delta}.")
        first, hi = hi + 1, hi * 4
