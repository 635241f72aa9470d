"""Exact coverage ``M(l, k)`` of FedCP-QQ (the rank selection is in _qq_selection)."""

# How the numbers are computed
# ============================
#
# Coverage.  With uniform scores, a client's l-th smallest score has the CDF
# G_l(t) = I_t(l, n - l + 1) and the k-th smallest of the m client values has
# the CDF P(Bin(m, G_l(t)) >= k).  Hence (Theorem 3.2 of Humbert et al., 2023)
#
#     M(l, k) = E[U_(l,k)] = int_0^1 P(Bin(m, G_l(t)) <= k - 1) dt,
#
# a polynomial of degree N = m n in t.  Three interchangeable back-ends:
#
# * "exact": the combinatorial formula with Python ints and Fraction, the sum
#   grouped by I = i_1 + ... + i_m (one integer convolution per j), since
#   int_0^1 t^I (1 - t)^(N - I) dt = 1 / ((N + 1) C(N, I)).
# * "gauss": Gauss-Legendre with ceil((N + 1) / 2) nodes, exact for degree N
#   up to rounding (N <= 4000).
# * "quad": scipy.integrate.quad on the window [t_lo, t_hi] outside which the
#   integrand is 1 or 0 to 1e-17, plus t_lo.  The window ends are nested
#   inverse regularised beta functions; the upper end is computed through the
#   complements (1 - 1e-17 is 1.0 in float).
#
# Both beta functions are evaluated on the complement side,
# P(Bin(m, u) <= k - 1) = I_{1-u}(m - k + 1, k) with 1 - u = I_{1-t}(n - l + 1, l),
# so that the integrand keeps its relative precision where it is small.
#
# Proposition A.1 (l = n) in product form, M(n, k) = prod_{j=k}^{m} n j / (n j + 1),
# is accurate to 1e-16; the lgamma form of the paper loses ~1e-12 at m = 1000.

from __future__ import annotations

import functools
import math
from fractions import Fraction
from math import comb
from numbers import Integral
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import fft as sp_fft
from scipy import integrate, special

from ...utils._docstrings import docdict, docfiller
from ...utils._validation import check_alpha, check_int
from ._poisbin import _poisbin_cdf_unequal

__all__ = [
    "qq_conditional_tail",
    "qq_coverage",
    "qq_coverage_fraction",
    "qq_coverage_unequal",
    "qq_coverage_unequal_fraction",
]

# Mass left outside the integration window, on each side.
_TAIL = 1e-17
_GAUSS_MAX_N = 4000
_QUAD_OPTIONS = {"epsabs": 1e-14, "epsrel": 1e-13, "limit": 200}
_METHODS = ("quad", "gauss", "exact")
# Screen: quantile levels of U_(l,k) that cut the window into panels.
_SCREEN_LEVELS = np.array([1e-17, 1e-11, 1e-6, 1e-3, 0.03, 0.2, 0.5])
_SCREEN_NODES = 10
# Docstring blocks shared by the equal-size functions below.
_fill_doc = docfiller(
    {
        **docdict,
        "equal_args": """\
m : int
    Number of clients, ``>= 1``.
n : int
    Calibration size of every client, ``>= 1``.
local_rank : int
    Rank ``l`` in ``1..n`` each client sends.
k : int
    Rank in ``1..m`` the server takes among the client values.""",
    }
)
# A pair is valid when M >= (1 - alpha) - _FEASIBILITY_TOL (exact ties occur:
# m = n = 3, alpha = 0.1 gives M(3, 3) = 9/10).
_FEASIBILITY_TOL = 1e-10
# Coverages within _TIE_TOL of each other are tied (largest l, then smallest k).
_TIE_TOL = 1e-13


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------
def _check_int(value, name, low=1, high=None):
    return check_int(value, name, low=low, high=high)


def _check_method(method):
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}; got {method!r}.")
    return method


def _check_equal_args(m, n, local_rank, k):
    m = _check_int(m, "m")
    n = _check_int(n, "n")
    return m, n, _check_int(local_rank, "local_rank", 1, n), _check_int(k, "k", 1, m)


def _check_sizes(n_per_client, name="n_per_client"):
    if isinstance(n_per_client, str) or not hasattr(n_per_client, "__iter__"):
        raise TypeError(
            f"{name} must be a sequence of positive ints; got {n_per_client!r}."
        )
    if isinstance(n_per_client, np.ndarray) and n_per_client.dtype.kind in "iu":
        # Fast path (thousands of clients): one vectorised check.
        if n_per_client.ndim == 1 and n_per_client.size and n_per_client.min() >= 1:
            return tuple(n_per_client.tolist())
    sizes = list(n_per_client)
    if sizes and set(map(type, sizes)) == {int} and min(sizes) >= 1:
        return tuple(sizes)
    if not sizes:
        raise ValueError(f"{name} must list at least one client.")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, Integral | np.integer):
            raise TypeError(f"{name} must hold integers; got {s!r}.")
        if s < 1:
            raise ValueError(
                f"{name} must hold positive sizes; got {int(s)} (drop clients with "
                "no calibration data before selecting ranks)."
            )
    return tuple(int(s) for s in sizes)


def _check_unequal_args(n_per_client, local_ranks, k):
    sizes = _check_sizes(n_per_client)
    if isinstance(local_ranks, str) or not hasattr(local_ranks, "__iter__"):
        raise TypeError(f"local_ranks must be a sequence of ints; got {local_ranks!r}.")
    ranks = tuple(_check_int(r, "local_ranks") for r in local_ranks)
    if len(ranks) != len(sizes):
        raise ValueError(
            f"local_ranks has {len(ranks)} entries but n_per_client has {len(sizes)}; "
            "give one rank per client."
        )
    return sizes, ranks, _check_int(k, "k", 1, len(sizes))


# --------------------------------------------------------------------------
# Equal sizes: M(l, k)
# --------------------------------------------------------------------------
def _integrand(m, n, l, k, t):
    """P(Bin(m, G_l(t)) <= k - 1), evaluated on the complement side."""
    return special.betainc(m - k + 1, k, special.betainc(n - l + 1, l, 1.0 - t))


def _window(m, n, l, k):
    """Interval outside which the integrand is 1 (left) or 0 (right) to 1e-17."""
    u_lo = special.betaincinv(k, m - k + 1, _TAIL)
    t_lo = float(special.betaincinv(l, n - l + 1, u_lo))
    v_hi = special.betaincinv(m - k + 1, k, _TAIL)
    t_hi = 1.0 - float(special.betaincinv(n - l + 1, l, v_hi))
    return t_lo, t_hi


def _coverage_quad(m, n, l, k):
    t_lo, t_hi = _window(m, n, l, k)
    if not t_hi > t_lo:
        return t_lo
    value, _ = integrate.quad(
        lambda t: _integrand(m, n, l, k, t), t_lo, t_hi, **_QUAD_OPTIONS
    )
    return t_lo + value


@functools.lru_cache(maxsize=32)
def _gauss_legendre01(n_nodes):
    x, w = special.roots_legendre(n_nodes)
    return (x + 1.0) / 2.0, w / 2.0


def _check_gauss_size(N):
    if N > _GAUSS_MAX_N:
        raise ValueError(
            f'method="gauss" needs N = sum of the sizes <= {_GAUSS_MAX_N}; '
            f'got N = {N}. Use method="quad".'
        )


def _coverage_gauss(m, n, l, k):
    N = m * n
    _check_gauss_size(N)
    t, w = _gauss_legendre01(-(-(N + 1) // 2))
    return float(np.dot(w, _integrand(m, n, l, k, t)))


def _conv(a, b):
    return np.convolve(a, b)


def _beta_integral(coefs, N):
    """int_0^1 sum_I coefs[I] t^I (1-t)^(N-I) dt, as a Fraction."""
    return sum(
        (Fraction(int(c), comb(N, i)) for i, c in enumerate(coefs) if c), Fraction(0)
    ) / (N + 1)


@_fill_doc
def qq_coverage_fraction(m: int, n: int, local_rank: int, k: int) -> Fraction:
    """Exact coverage ``M(l, k)`` of Theorem 3.2 as a rational number.

    Python-int arithmetic on the combinatorial formula, grouped by
    ``I = i_1 + ... + i_m``: for each ``j >= k`` the integer coefficient
    vectors ``a_i = C(n, i) 1[i >= l]`` (``j`` times) and
    ``b_i = C(n, i) 1[i < l]`` (``m - j`` times) are convolved, then
    ``M = 1 - sum_I coef_I / ((N + 1) C(N, I))``. Cost grows like ``m N^2``:
    meant for ``N = m n`` up to a few hundred.

    Parameters
    ----------
    %(equal_args)s

    Returns
    -------
    coverage : fractions.Fraction

    See Also
    --------
    qq_coverage : the same number as a float, with faster back-ends.

    Examples
    --------
    >>> qq_coverage_fraction(5, 10, 10, 3)
    Fraction(20000, 21607)
    >>> qq_coverage_fraction(3, 3, 3, 3)
    Fraction(9, 10)
    """
    m, n, l, k = _check_equal_args(m, n, local_rank, k)
    N = m * n
    a = np.array([comb(n, i) if i >= l else 0 for i in range(n + 1)], dtype=object)
    b = np.array([comb(n, i) if i < l else 0 for i in range(n + 1)], dtype=object)
    a_pows = [np.array([1], dtype=object)]
    for _ in range(m):
        a_pows.append(_conv(a_pows[-1], a))
    total = np.zeros(N + 1, dtype=object)
    b_cur = np.array([1], dtype=object)
    # j runs from m down to k so that b^(m-j) grows by one factor per step.
    for j in range(m, k - 1, -1):
        if j < m:
            b_cur = _conv(b_cur, b)
        total += comb(m, j) * _conv(a_pows[j], b_cur)
    return 1 - _beta_integral(total, N)


@_fill_doc
def qq_coverage(
    m: int,
    n: int,
    local_rank: int,
    k: int,
    *,
    method: Literal["quad", "gauss", "exact"] = "quad",
) -> float:
    """Exact coverage ``M(l, k)`` of FedCP-QQ with equal client sizes.

    Each of ``m`` clients sends the ``l``-th smallest of its ``n`` scores and
    the server keeps the ``k``-th smallest of these values. If the ``N + 1``
    scores (``N = m n`` calibration, one test) are i.i.d., the test score is
    below that threshold with probability ``>= M(l, k)``, with equality for
    continuous scores (Theorem 3.2 of [1]_).

    Parameters
    ----------
    %(equal_args)s
    method : {"quad", "gauss", "exact"}, default="quad"
        ``"quad"``: adaptive quadrature of
        ``int_0^1 P(Bin(m, I_t(l, n-l+1)) <= k-1) dt`` on the window where the
        integrand is neither 0 nor 1 (about 1 ms, any size, ~1e-14).
        ``"gauss"``: Gauss-Legendre with ``ceil((N+1)/2)`` nodes, exact for
        this degree-``N`` polynomial up to rounding (``N <= 4000``).
        ``"exact"``: rational arithmetic (:func:`qq_coverage_fraction`),
        for small ``N``.

    Returns
    -------
    coverage : float

    See Also
    --------
    qq_coverage_unequal : clients of different sizes.
    select_qq_ranks : the pair with the smallest coverage ``>= 1 - alpha``.

    Notes
    -----
    ``M`` is strictly increasing in ``l`` and in ``k``,
    ``M(l, k) + M(n+1-l, m+1-k) = 1``, ``M(1, 1) = 1/(N+1)``,
    ``M(n, m) = N/(N+1)``; with one client ``M(l, 1) = l/(n+1)`` (split
    conformal prediction).

    %(references_humbert)s

    Examples
    --------
    >>> round(qq_coverage(5, 10, 10, 3), 6)
    0.925626
    >>> round(qq_coverage(5, 10, 10, 3, method="gauss"), 6)
    0.925626
    >>> qq_coverage(1, 19, 18, 1, method="exact")
    0.9
    """
    m, n, l, k = _check_equal_args(m, n, local_rank, k)
    method = _check_method(method)
    if method == "exact":
        return float(qq_coverage_fraction(m, n, l, k))
    if method == "gauss":
        return _coverage_gauss(m, n, l, k)
    return float(_coverage_quad(m, n, l, k))


def _coverage_top_rank(m, n, k):
    """Proposition A.1, ``M(n, k) = prod_{j=k}^{m} n j / (n j + 1)`` (to ~1e-16)."""
    return math.exp(
        math.fsum(math.log1p(-1.0 / (n * j + 1.0)) for j in range(k, m + 1))
    )


@functools.lru_cache(maxsize=1)
def _screen_rule():
    x, w = np.polynomial.legendre.leggauss(_SCREEN_NODES)
    return (x + 1.0) / 2.0, w / 2.0


def _coverage_screen(m, n, ls, ks):
    """Vectorised M(l, k) for arrays of pairs: panel Gauss-Legendre (see header)."""
    ls = np.asarray(ls, dtype=np.float64)[:, None]
    ks = np.asarray(ks, dtype=np.float64)[:, None]
    levels = _SCREEN_LEVELS[None, :]
    lower = special.betaincinv(
        ls, n - ls + 1, special.betaincinv(ks, m - ks + 1, levels)
    )
    upper_levels = levels[:, ::-1][:, 1:]
    upper = 1.0 - special.betaincinv(
        n - ls + 1, ls, special.betaincinv(m - ks + 1, ks, upper_levels)
    )
    edges = np.maximum.accumulate(np.concatenate([lower, upper], axis=1), axis=1)
    width = np.diff(edges, axis=1)
    x, w = _screen_rule()
    t = edges[:, :-1, None] + width[:, :, None] * x
    f = special.betainc(
        m - ks[:, :, None] + 1,
        ks[:, :, None],
        special.betainc(n - ls[:, :, None] + 1, ls[:, :, None], 1.0 - t),
    )
    values = edges[:, 0] + np.einsum("pjq,q,pj->p", f, w, width)
    bad = ~np.isfinite(values)
    for i in np.flatnonzero(bad):  # never seen; keep the search safe anyway
        values[i] = _coverage_quad(m, n, int(ls[i, 0]), int(ks[i, 0]))
    return values


# --------------------------------------------------------------------------
# Unequal sizes
# --------------------------------------------------------------------------
def _active_groups(sizes, ranks):
    """Distinct (n_j, l_j) with l_j <= n_j and their counts, sorted."""
    groups: dict[tuple[int, int], int] = {}
    for n_j, l_j in zip(sizes, ranks, strict=True):
        if l_j <= n_j:
            groups[(n_j, l_j)] = groups.get((n_j, l_j), 0) + 1
    return sorted(groups.items())


def _window_unequal(groups, k_first, k_last=None):
    """The t-window outside which P(S(t) <= k - 1) is 1 or 0 (1e-17).

    The lower end of ``k_first``'s window and the upper end of ``k_last``'s
    (default ``k_first``): the window of every k between them (with
    ``1, m_active``, of every k). One vectorised call per end.
    """
    k_last = k_first if k_last is None else k_last
    m_active = sum(c for _, c in groups)
    ns = np.array([n for (n, _), _ in groups], dtype=np.float64)
    ls = np.array([l for (_, l), _ in groups], dtype=np.float64)
    u_lo = special.betaincinv(k_first, m_active - k_first + 1, _TAIL)
    v_hi = special.betaincinv(m_active - k_last + 1, k_last, _TAIL)
    t_lo = float(np.min(special.betaincinv(ls, ns - ls + 1, u_lo)))
    t_hi = 1.0 - float(np.min(special.betaincinv(ns - ls + 1, ls, v_hi)))
    return t_lo, t_hi


def _coverage_unequal_quad(groups, k):
    t_lo, t_hi = _window_unequal(groups, k)
    if not t_hi > t_lo:
        return t_lo
    value, _ = integrate.quad(
        lambda t: float(_poisbin_cdf_unequal(groups, k, t)[0]),
        t_lo,
        t_hi,
        **_QUAD_OPTIONS,
    )
    return t_lo + value


@functools.lru_cache(maxsize=1)
def _panel_rule():
    x, w = np.polynomial.legendre.leggauss(16)
    return (x + 1.0) / 2.0, w / 2.0


def _composite_gauss(groups, k, a, b, n_panels):
    x, w = _panel_rule()
    edges = np.linspace(a, b, n_panels + 1)
    width = edges[1] - edges[0]
    t = (edges[:-1, None] + width * x).ravel()
    return width * float(
        np.dot(np.tile(w, n_panels), _poisbin_cdf_unequal(groups, k, t))
    )


def _coverage_unequal_screen(groups, k):
    """Fast M for unequal sizes: trimmed window, composite Gauss-Legendre.

    The integrand f(t) = P(PoisBin <= k - 1) decreases from 1 to 0, so one
    pass over 15 interior points of the window trims it rigorously: left of
    the last point with f >= 1 - 1e-16 the integral is the length (error
    <= 1e-16 per unit), right of the first point with f <= 1e-17 it is 0.
    The trimmed window gets a composite 16-node rule with 4 and then 8, 16,
    ... panels until two passes agree to 1e-13 (all nodes of a pass go
    through the Poisson-binomial DP at once); past 512 panels, "quad".
    """
    t_lo, t_hi = _window_unequal(groups, k)
    if not t_hi > t_lo:
        return t_lo
    a, b = t_lo, t_hi
    for _ in range(6):
        grid = np.linspace(a, b, 17)
        f = _poisbin_cdf_unequal(groups, k, grid[1:-1])
        below = np.flatnonzero(f < 1.0 - 1e-16)
        i_a = (below[0] if below.size else f.size) - 1  # last index of f ~ 1
        above = np.flatnonzero(f > 1e-17)
        i_b = (above[-1] if above.size else -1) + 1  # first index of f ~ 0
        new_a = grid[i_a + 1]
        new_b = grid[i_b + 1]
        shrink = (new_b - new_a) / (b - a)
        a, b = new_a, new_b
        if shrink > 0.25 or not b > a:
            break
    if not b > a:
        return a
    previous = _composite_gauss(groups, k, a, b, 4)
    n_panels = 8
    while True:
        value = _composite_gauss(groups, k, a, b, n_panels)
        # 1e-13: the DP's own rounding reaches ~3e-14 at 1,000 clients, and
        # the screen only decides (1e-11 margins); returned values use quad.
        if abs(value - previous) < 1e-13:
            return a + value
        if n_panels >= 512:
            return _coverage_unequal_quad(groups, k)
        previous = value
        n_panels *= 2


def qq_coverage_unequal_fraction(
    n_per_client: ArrayLike, local_ranks: ArrayLike, k: int
) -> Fraction:
    """Exact coverage of FedCP-QQ with unequal sizes, as a rational number.

    A DP over clients whose state is the number of clients (so far) whose
    value lies below ``t``, capped at ``k``, each state holding an integer
    polynomial in the basis ``t^I (1-t)^(N'-I)``. Small ``N`` only.

    Parameters
    ----------
    n_per_client : array-like of int
        Calibration size ``n_j >= 1`` of each client.
    local_ranks : array-like of int
        Rank ``l_j >= 1`` each client sends; ``l_j > n_j`` means the client
        sends ``+inf``.
    k : int
        Rank in ``1..m`` the server takes among the client values.

    Returns
    -------
    coverage : fractions.Fraction

    Examples
    --------
    >>> qq_coverage_unequal_fraction([2, 3], [2, 3], 1)
    Fraction(7, 12)
    >>> qq_coverage_unequal_fraction([2, 3], [3, 3], 1)
    Fraction(3, 4)
    """
    sizes, ranks, k = _check_unequal_args(n_per_client, local_ranks, k)
    N = sum(sizes)
    # states[s] = polynomial of P(exactly s clients below t), s < k.
    states = [np.array([1], dtype=object)] + [np.array([0], dtype=object)] * (k - 1)
    for n_j, l_j in zip(sizes, ranks, strict=True):
        a = np.array(
            [comb(n_j, i) if i >= l_j else 0 for i in range(n_j + 1)], dtype=object
        )
        b = np.array(
            [comb(n_j, i) if i < l_j else 0 for i in range(n_j + 1)], dtype=object
        )
        new = []
        for s in range(k):
            poly = _conv(states[s], b)
            if s > 0:
                poly = poly + _conv(states[s - 1], a)
            new.append(poly)
        states = new
    below = sum(states[1:], states[0])  # P(S <= k - 1), degree N
    return _beta_integral(below, N)


def qq_coverage_unequal(
    n_per_client: ArrayLike,
    local_ranks: ArrayLike,
    k: int,
    *,
    method: Literal["quad", "gauss", "exact"] = "quad",
) -> float:
    """Exact coverage of FedCP-QQ with clients of different sizes (Appendix A.1).

    Client ``j`` sends the ``l_j``-th smallest of its ``n_j`` scores
    (``+inf`` if ``l_j > n_j``); the server keeps the ``k``-th smallest. The
    coverage is ``int_0^1 P(PoisBin(p_1(t), ..., p_m(t)) <= k-1) dt`` with
    ``p_j(t) = I_t(l_j, n_j - l_j + 1)`` (``0`` for a client sending
    ``+inf``), a lower bound on the coverage for any i.i.d. scores and equal
    to it for continuous ones.

    Parameters
    ----------
    n_per_client : array-like of int
        Calibration size ``n_j >= 1`` of each client.
    local_ranks : array-like of int
        Rank ``l_j >= 1`` each client sends.
    k : int
        Rank in ``1..m`` the server takes among the client values.
    method : {"quad", "gauss", "exact"}, default="quad"
        As in :func:`qq_coverage`; the Poisson-binomial CDF is computed by a
        convolution DP over clients. ``"gauss"`` needs ``sum(n_j) <= 4000``.

    Returns
    -------
    coverage : float
        ``1.0`` when fewer than ``k`` clients send a finite value.

    See Also
    --------
    qq_coverage : equal sizes (faster).

    Examples
    --------
    >>> round(qq_coverage_unequal([2, 3], [2, 3], 2), 6)
    0.833333
    >>> round(qq_coverage_unequal([10] * 5, [10] * 5, 3), 6)
    0.925626
    """
    sizes, ranks, k = _check_unequal_args(n_per_client, local_ranks, k)
    method = _check_method(method)
    if method == "exact":
        return float(qq_coverage_unequal_fraction(sizes, ranks, k))
    groups = _active_groups(sizes, ranks)
    if sum(c for _, c in groups) < k:
        return 1.0
    if method == "gauss":
        N = sum(sizes)
        _check_gauss_size(N)
        t, w = _gauss_legendre01(-(-(N + 1) // 2))
        return float(np.dot(w, _poisbin_cdf_unequal(groups, k, t)))
    return float(_coverage_unequal_quad(groups, k))


# --------------------------------------------------------------------------
# Training-conditional tail
# --------------------------------------------------------------------------
def _conditional_tails(m, n, ls, ks, alpha):
    p = special.betainc(ls, n - ls + 1, 1.0 - alpha)
    return special.bdtrc(ks - 1, m, p)


@_fill_doc
def qq_conditional_tail(m: int, n: int, local_rank: int, k: int, alpha: float) -> float:
    """Probability that FedCP-QQ's conditional miscoverage exceeds ``alpha``.

    For continuous scores, the miscoverage given the calibration data,
    ``alpha_P(D) = P(S > threshold | D)``, satisfies
    ``P(alpha_P(D) > alpha) = P(Bin(m, I_{1-alpha}(l, n-l+1)) >= k)`` exactly;
    for other scores this is an upper bound. (A skfedcp extension of
    Theorem 3.3 of [1]_, used by ``select_qq_ranks(conditional="exact")``.)

    Parameters
    ----------
    %(equal_args)s
    %(alpha)s

    Returns
    -------
    tail : float

    %(references_humbert)s

    Examples
    --------
    >>> round(qq_conditional_tail(10, 20, 19, 5, 0.1), 4)
    0.3463
    """
    m, n, l, k = _check_equal_args(m, n, local_rank, k)
    alpha = check_alpha(alpha)
    return float(_conditional_tails(m, n, float(l), float(k), alpha))


# --------------------------------------------------------------------------
# Unequal sizes: a certified value (exact-degree Clenshaw-Curtis)
# --------------------------------------------------------------------------
# The integrand f(t) = P(PoisBin(p_1(t), ..., p_m(t)) <= k - 1) is a
# polynomial of degree N = sum(n_j) in t, so the Clenshaw-Curtis rule on the
# N + 1 (or N + 2) Chebyshev points of [0, 1] integrates it exactly.  Outside
# the window of _window_unequal, f is 1 (left) or 0 (right) to 1e-17 (every
# p_j(t) is below, resp. every 1 - p_j(t) above, the level at which a
# binomial count of m clients reaches k with probability 1e-17), so only the
# points inside need the DP.  What is left is floating-point error: the
# rule's weights (positive, summing to 1, computed by one DCT) and the DP
# (sums of products of numbers in [0, 1], relative error of a few ulps per
# client) contribute ~1e-15, the product tree (from _TREE_MIN_CLIENTS
# clients) up to ~2e-14 at 1,000 clients; scipy's regularised incomplete
# beta function is taken to be accurate to 1e-13 relative.
# _CERTIFIED_ERROR = 1e-12 bounds the total with a wide margin.  Cost: the
# Chebyshev points inside the window (~N x window width), each through the
# DP (or the tree).

_CERTIFIED_ERROR = 1e-12


@functools.lru_cache(maxsize=8)
def _clenshaw_curtis01(n):
    """Nodes and weights of the (n + 1)-point Clenshaw-Curtis rule on [0, 1].

    ``n`` even; exact for polynomials of degree <= n + 1. Weights by one
    DCT-I of the Chebyshev moments (Waldvogel 2006).
    """
    j = np.arange(n + 1)
    moments = np.zeros(n + 1)
    even = j % 2 == 0
    moments[even] = 2.0 / (1.0 - j[even].astype(np.float64) ** 2)
    w = sp_fft.dct(moments, type=1) / n
    w[0] /= 2.0
    w[-1] /= 2.0
    t = (1.0 - np.cos(np.pi * j / n)) / 2.0
    return t, w / 2.0


def _coverage_unequal_certified(groups, k, N):
    """(value, bound) with |M - value| <= bound; see the comment above."""
    m_active = sum(c for _, c in groups)
    if k > m_active:
        return 1.0, 0.0
    n = N + (N % 2)
    t, w = _clenshaw_curtis01(n)
    t_lo, t_hi = _window_unequal(groups, k)
    left = t < t_lo
    inside = ~left & (t <= t_hi)
    value = float(np.sum(w[left]))
    if inside.any():
        value += float(np.dot(w[inside], _poisbin_cdf_unequal(groups, k, t[inside])))
    return value, _CERTIFIED_ERROR + 2e-17
