"""Exact coverage ``M(l, k)`` of FedCP-QQ and the selection of its ranks."""

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
# Selection.  The coverage is strictly increasing in l and in k, by at least
# 1/(N + 1) per step: M = E[R]/(N + 1) with R the pooled rank of the
# estimate, and R grows by at least one when l or k does.  The optimum is
# therefore one of the "staircase" pairs (l, k_min(l)), k_min(l) the smallest
# feasible k, which is non-increasing in l; and within a run of equal k_min only
# the smallest l can win.  `select_qq_ranks` finds them with few evaluations:
#
# 1. feasibility: some pair is valid iff 1 - alpha <= M(n, m) = N / (N + 1);
# 2. l_min, the smallest l with M(l, m) >= 1 - alpha, by bisection on l;
# 3. k_min(l) for every l in [l_min, n] by a divide-and-conquer over l: the
#    two ends first, then the midpoints of the computed neighbours, whose
#    k_min bracket the unknown one (k_min(b) - 1 < k_min(l) <= k_min(a) for
#    a < l < b).  Every level is one vectorised bisection over its brackets,
#    and a segment whose ends agree is filled without any evaluation;
# 4. the candidates (first l of each run of equal k_min) are compared.
#
# Every M in steps 2-4 comes first from a vectorised *screen*: the window
# [t_lo, t_hi] is cut into 12 panels at the quantiles 1e-17, 1e-11, 1e-6, 1e-3,
# 0.03, 0.2, 0.5, 0.8, ... of U_(l,k) (where the integrand is smooth on the
# panel's own scale) and each panel gets a 10-node Gauss-Legendre rule.  Its
# error against the "quad" and "exact" back-ends is below 1e-14 on every grid
# tried (m, n up to 2e4 and 1e5).  A decision is delegated to "quad" whenever
# the screen lands within 1e-11 of the feasibility threshold, and all
# candidates within 1e-11 of the screened minimum are re-evaluated with "quad"
# before the tie rule is applied; the coverage returned is the "quad" value.
# At m = n = 1000 this costs a few hundred screened pairs and a handful of
# quad calls (see benchmarks/bench_qq_selection.py), against ~n + m quad
# calls for a plain staircase walk.
#
# Unequal sizes (or fixed ranks).  Only k is searched, by bisection.  The
# Poisson-binomial integrand has no closed-form quantiles, so the screen is a
# composite 16-node Gauss-Legendre rule on the window, the panel count doubled
# until two passes agree to 1e-14, with every node pushed through the
# convolution DP at once; close decisions and the returned coverage use "quad".
#
# Proposition A.1 (l = n) in product form, M(n, k) = prod_{j=k}^{m} n j / (n j + 1),
# is accurate to 1e-16; the lgamma form of the paper loses ~1e-12 at m = 1000.

import functools
import math
from fractions import Fraction
from math import comb
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from scipy import integrate, special, stats

from ..utils._quantile import conformal_rank, float_safe_ceil
from ..utils._validation import check_alpha

__all__ = [
    "QQSelection",
    "qq_conditional_tail",
    "qq_coverage",
    "qq_coverage_fraction",
    "qq_coverage_unequal",
    "qq_coverage_unequal_fraction",
    "select_qq_ranks",
]

# Mass left outside the integration window, on each side.
_TAIL = 1e-17
# A pair is valid when M >= (1 - alpha) - _FEASIBILITY_TOL (exact ties occur:
# m = n = 3, alpha = 0.1 gives M(3, 3) = 9/10).
_FEASIBILITY_TOL = 1e-10
# Coverages within _TIE_TOL of each other are tied (largest l, then smallest k).
_TIE_TOL = 1e-13
# A screened value this close to a decision is re-evaluated with "quad".
_SCREEN_MARGIN = 1e-11
# Slack on the exact training-conditional tail, tail <= delta + _TAIL_TOL.
_TAIL_TOL = 1e-12
_GAUSS_MAX_N = 4000
_QUAD_OPTIONS = {"epsabs": 1e-14, "epsrel": 1e-13, "limit": 200}
_METHODS = ("quad", "gauss", "exact")
# Screen: quantile levels of U_(l,k) that cut the window into panels.
_SCREEN_LEVELS = np.array([1e-17, 1e-11, 1e-6, 1e-3, 0.03, 0.2, 0.5])
_SCREEN_NODES = 10


class QQSelection(NamedTuple):
    """Ranks chosen for FedCP-QQ and their exact coverage.

    Attributes
    ----------
    local_ranks : tuple of int
        Rank ``l_j`` each client sends (one entry per client, in the order of
        ``n_per_client``); empty when infeasible.
    k : int or None
        Rank the server takes among the ``m`` client values.
    coverage : float
        Exact coverage ``M`` of the pair (1.0 when infeasible: the threshold
        is ``+inf``).
    feasible : bool
        Whether a pair with a finite threshold reaches the target.
    """

    local_ranks: tuple
    k: int | None
    coverage: float
    feasible: bool


_INFEASIBLE = QQSelection(local_ranks=(), k=None, coverage=1.0, feasible=False)


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------
def _check_int(value, name, low=1, high=None):
    if isinstance(value, bool) or not isinstance(value, Integral | np.integer):
        raise TypeError(f"{name} must be an integer; got {value!r}.")
    value = int(value)
    if value < low or (high is not None and value > high):
        upper = "" if high is None else f" and <= {high}"
        raise ValueError(f"{name} must be >= {low}{upper}; got {value}.")
    return value


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
    sizes = list(n_per_client)
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


def qq_coverage_fraction(m, n, local_rank, k):
    """Exact coverage ``M(l, k)`` of Theorem 3.2 as a rational number.

    Python-int arithmetic on the combinatorial formula, grouped by
    ``I = i_1 + ... + i_m``: for each ``j >= k`` the integer coefficient
    vectors ``a_i = C(n, i) 1[i >= l]`` (``j`` times) and
    ``b_i = C(n, i) 1[i < l]`` (``m - j`` times) are convolved, then
    ``M = 1 - sum_I coef_I / ((N + 1) C(N, I))``. Cost grows like ``m N^2``:
    meant for ``N = m n`` up to a few hundred.

    Parameters
    ----------
    m : int
        Number of clients, ``>= 1``.
    n : int
        Calibration size of every client, ``>= 1``.
    local_rank : int
        Rank ``l`` in ``1..n`` each client sends.
    k : int
        Rank in ``1..m`` the server takes among the client values.

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


def qq_coverage(m, n, local_rank, k, *, method="quad"):
    """Exact coverage ``M(l, k)`` of FedCP-QQ with equal client sizes.

    Each of ``m`` clients sends the ``l``-th smallest of its ``n`` scores and
    the server keeps the ``k``-th smallest of these values. If the ``N + 1``
    scores (``N = m n`` calibration, one test) are i.i.d., the test score is
    below that threshold with probability ``>= M(l, k)``, with equality for
    continuous scores (Theorem 3.2 of [1]_).

    Parameters
    ----------
    m : int
        Number of clients, ``>= 1``.
    n : int
        Calibration size of every client, ``>= 1``.
    local_rank : int
        Rank ``l`` in ``1..n`` each client sends.
    k : int
        Rank in ``1..m`` the server takes among the client values.
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

    References
    ----------
    .. [1] P. Humbert, B. Le Bars, A. Bellet, S. Arlot. One-Shot Federated
       Conformal Prediction. ICML 2023.

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
    groups = {}
    for n_j, l_j in zip(sizes, ranks, strict=True):
        if l_j <= n_j:
            groups[(n_j, l_j)] = groups.get((n_j, l_j), 0) + 1
    return sorted(groups.items())


def _poisbin_cdf_unequal(groups, k, t):
    """P(PoisBin(p_1(t), ..., p_m(t)) <= k - 1) for an array t (inactive p = 0).

    Convolution DP over clients, O(m k) per node; identical clients form one
    binomial block.
    """
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    pmf = np.zeros((k, t.shape[0]))
    pmf[0] = 1.0
    s = np.arange(k)[:, None]
    for (n_j, l_j), count in groups:
        p = special.betainc(l_j, n_j - l_j + 1, t)
        if count == 1:
            nxt = pmf * (1.0 - p)
            nxt[1:] += pmf[:-1] * p
            pmf = nxt
            continue
        block = stats.binom.pmf(s[: min(count, k - 1) + 1], count, p[None, :])
        nxt = np.zeros_like(pmf)
        for r in range(block.shape[0]):
            nxt[r:] += pmf[: k - r] * block[r]
        pmf = nxt
    return pmf.sum(axis=0)


def _window_unequal(groups, k):
    m_active = sum(c for _, c in groups)
    u_lo = special.betaincinv(k, m_active - k + 1, _TAIL)
    v_hi = special.betaincinv(m_active - k + 1, k, _TAIL)
    t_lo = min(float(special.betaincinv(l, n - l + 1, u_lo)) for (n, l), _ in groups)
    t_hi = 1.0 - min(
        float(special.betaincinv(n - l + 1, l, v_hi)) for (n, l), _ in groups
    )
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


def _coverage_unequal_screen(groups, k):
    """Composite Gauss-Legendre on the window, panels doubled until stable.

    All nodes of one pass go through the Poisson-binomial DP at once, so this
    is much faster than ``quad`` (which calls the DP once per node).
    """
    t_lo, t_hi = _window_unequal(groups, k)
    if not t_hi > t_lo:
        return t_lo
    x, w = _panel_rule()
    previous = None
    n_panels = 8
    while True:
        edges = np.linspace(t_lo, t_hi, n_panels + 1)
        width = edges[1] - edges[0]
        t = (edges[:-1, None] + width * x).ravel()
        value = t_lo + width * float(
            np.dot(np.tile(w, n_panels), _poisbin_cdf_unequal(groups, k, t))
        )
        if previous is not None and abs(value - previous) < 1e-14:
            return value
        if n_panels >= 4096:
            return _coverage_unequal_quad(groups, k)
        previous = value
        n_panels *= 2


def qq_coverage_unequal_fraction(n_per_client, local_ranks, k):
    """Exact coverage of FedCP-QQ with unequal sizes, as a rational number.

    A DP over clients whose state is the number of clients (so far) whose
    value lies below ``t``, capped at ``k``, each state holding an integer
    polynomial in the basis ``t^I (1-t)^(N'-I)``. Small ``N`` only.

    Parameters
    ----------
    n_per_client : sequence of int
        Calibration size ``n_j >= 1`` of each client.
    local_ranks : sequence of int
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


def qq_coverage_unequal(n_per_client, local_ranks, k, *, method="quad"):
    """Exact coverage of FedCP-QQ with clients of different sizes (Appendix A.1).

    Client ``j`` sends the ``l_j``-th smallest of its ``n_j`` scores
    (``+inf`` if ``l_j > n_j``); the server keeps the ``k``-th smallest. The
    coverage is ``int_0^1 P(PoisBin(p_1(t), ..., p_m(t)) <= k-1) dt`` with
    ``p_j(t) = I_t(l_j, n_j - l_j + 1)`` (``0`` for a client sending
    ``+inf``), a lower bound on the coverage for any i.i.d. scores and equal
    to it for continuous ones.

    Parameters
    ----------
    n_per_client : sequence of int
        Calibration size ``n_j >= 1`` of each client.
    local_ranks : sequence of int
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


def qq_conditional_tail(m, n, local_rank, k, alpha):
    """Probability that FedCP-QQ's conditional miscoverage exceeds ``alpha``.

    For continuous scores, the miscoverage given the calibration data,
    ``alpha_P(D) = P(S > threshold | D)``, satisfies
    ``P(alpha_P(D) > alpha) = P(Bin(m, I_{1-alpha}(l, n-l+1)) >= k)`` exactly;
    for other scores this is an upper bound. (A skfedcp extension of
    Theorem 3.3 of [1]_, used by ``select_qq_ranks(conditional="exact")``.)

    Parameters
    ----------
    m : int
        Number of clients.
    n : int
        Calibration size of every client.
    local_rank : int
        Rank ``l`` in ``1..n`` each client sends.
    k : int
        Rank in ``1..m`` the server takes.
    alpha : float
        Miscoverage level in (0, 1).

    Returns
    -------
    tail : float

    References
    ----------
    .. [1] P. Humbert, B. Le Bars, A. Bellet, S. Arlot. One-Shot Federated
       Conformal Prediction. ICML 2023.

    Examples
    --------
    >>> round(qq_conditional_tail(10, 20, 19, 5, 0.1), 4)
    0.3463
    """
    m, n, l, k = _check_equal_args(m, n, local_rank, k)
    alpha = check_alpha(alpha)
    return float(_conditional_tails(m, n, float(l), float(k), alpha))


# --------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------
class _EqualSizeCoverage:
    """M(l, k) for one (m, n): screened values, "quad" near decisions."""

    def __init__(self, m, n, threshold):
        self.m, self.n, self.threshold = m, n, threshold
        self._screened = {}
        self._accurate = {}

    def screen(self, ls, ks):
        ls = np.asarray(ls, dtype=np.int64)
        ks = np.asarray(ks, dtype=np.int64)
        out = np.empty(ls.shape[0])
        todo = []
        for i, key in enumerate(zip(ls.tolist(), ks.tolist(), strict=True)):
            value = self._screened.get(key)
            if value is None:
                todo.append(i)
            else:
                out[i] = value
        if todo:
            todo = np.asarray(todo)
            values = _coverage_screen(self.m, self.n, ls[todo], ks[todo])
            out[todo] = values
            for i, v in zip(todo.tolist(), values.tolist(), strict=True):
                self._screened[(int(ls[i]), int(ks[i]))] = v
        return out

    def accurate(self, l, k):
        key = (int(l), int(k))
        if key not in self._accurate:
            self._accurate[key] = _coverage_quad(self.m, self.n, *key)
        return self._accurate[key]

    def feasible(self, ls, ks):
        values = self.screen(ls, ks)
        close = np.abs(values - self.threshold) < _SCREEN_MARGIN
        for i in np.flatnonzero(close):
            values[i] = self.accurate(ls[i], ks[i])
        return values >= self.threshold

    def best(self, ls, ks):
        """Candidate with the smallest M; ties: largest l, then smallest k."""
        ls = np.asarray(ls, dtype=np.int64)
        ks = np.asarray(ks, dtype=np.int64)
        values = self.screen(ls, ks)
        near = np.flatnonzero(values <= values.min() + _SCREEN_MARGIN)
        exact = [(self.accurate(ls[i], ks[i]), int(ls[i]), int(ks[i])) for i in near]
        lowest = min(v for v, _, _ in exact)
        tied = [(-l, k, v) for v, l, k in exact if v <= lowest + _TIE_TOL]
        neg_l, k, value = min(tied)
        return -neg_l, k, value


def _bisect_k(is_feasible, ls, lo, hi):
    """Vectorised bisection: smallest feasible k in (lo, hi] for each l.

    ``hi`` must be feasible (or a sentinel) and ``lo`` infeasible.
    """
    lo = np.array(lo, dtype=np.int64)
    hi = np.array(hi, dtype=np.int64)
    active = np.flatnonzero(hi - lo > 1)
    while active.size:
        mid = (lo[active] + hi[active]) // 2
        ok = is_feasible(ls[active], mid)
        hi[active] = np.where(ok, mid, hi[active])
        lo[active] = np.where(ok, lo[active], mid)
        active = active[hi[active] - lo[active] > 1]
    return hi


def _staircase(is_feasible, ls, k_max):
    """k_min(l) for increasing ls, k_min non-increasing; k_max + 1 if none.

    Divide and conquer over l; see the module header.
    """
    size = ls.shape[0]
    kmin = np.zeros(size, dtype=np.int64)
    ends = np.unique([0, size - 1])
    kmin[ends] = _bisect_k(
        is_feasible, ls[ends], np.zeros(ends.size), np.full(ends.size, k_max + 1)
    )
    segments = [(0, size - 1)] if size > 2 else []
    while segments:
        mids, los, his, nxt = [], [], [], []
        for a, b in segments:
            if kmin[a] == kmin[b]:
                kmin[a + 1 : b] = kmin[a]
                continue
            c = (a + b) // 2
            mids.append(c)
            los.append(kmin[b] - 1)
            his.append(kmin[a])
            nxt.extend(s for s in ((a, c), (c, b)) if s[1] - s[0] > 1)
        if mids:
            mids = np.asarray(mids)
            kmin[mids] = _bisect_k(is_feasible, ls[mids], los, his)
        segments = nxt
    return kmin


def _run_starts(ls, kmin, k_max):
    """First l of each run of equal, valid k_min: the only possible optima."""
    valid = kmin <= k_max
    first = np.ones(ls.shape[0], dtype=bool)
    first[1:] = kmin[1:] != kmin[:-1]
    keep = valid & first
    return ls[keep], kmin[keep]


def _select_equal(m, n, alpha, ranks, conditional, delta):
    """Equal sizes; ``ranks`` is None (full search) or the one allowed l."""
    threshold = (1.0 - alpha) - _FEASIBILITY_TOL
    coverage = _EqualSizeCoverage(m, n, threshold)
    N = m * n
    if conditional is True:
        alpha_delta = alpha - math.sqrt(math.log(1.0 / delta) / (2.0 * N))
        if alpha_delta <= 0:
            return None
        need = float_safe_ceil((1.0 - alpha_delta) * N)
        ls = np.arange(1, n + 1) if ranks is None else np.array([ranks])
        kmin = -(-need // ls)
    elif conditional == "exact":
        ls = np.arange(1, n + 1) if ranks is None else np.array([ranks])

        def tail_ok(l_arr, k_arr):
            tails = _conditional_tails(
                m, n, l_arr.astype(float), k_arr.astype(float), alpha
            )
            return tails <= delta + _TAIL_TOL

        kmin = _bisect_k(tail_ok, ls, np.zeros(ls.size), np.full(ls.size, m + 1))
    else:
        if threshold > N / (N + 1):
            return None
        if ranks is None:
            # Smallest l with a valid k, i.e. with M(l, m) >= 1 - alpha.
            l_min = _bisect_k(
                lambda _, l_arr: coverage.feasible(l_arr, np.full(l_arr.size, m)),
                np.zeros(1, dtype=np.int64),
                [0],
                [n],
            )[0]
            ls = np.arange(l_min, n + 1)
        else:
            ls = np.array([ranks])
        kmin = _staircase(coverage.feasible, ls, m)
    ls, kmin = _run_starts(ls, kmin, m)
    if ls.size == 0:
        return None
    l_best, k_best, value = coverage.best(ls, kmin)
    return l_best, k_best, value


def _select_unequal(sizes, ranks, alpha):
    """Fixed per-client ranks: smallest k with M >= 1 - alpha (bisection on k)."""
    groups = _active_groups(sizes, ranks)
    m_active = sum(c for _, c in groups)
    if m_active == 0:
        return None
    threshold = (1.0 - alpha) - _FEASIBILITY_TOL
    screened, accurate = {}, {}

    def value(k):
        if k not in accurate:
            accurate[k] = _coverage_unequal_quad(groups, k)
        return accurate[k]

    def feasible(k):
        if k not in screened:
            screened[k] = _coverage_unequal_screen(groups, k)
        if abs(screened[k] - threshold) < _SCREEN_MARGIN:
            return value(k) >= threshold
        return screened[k] >= threshold

    # Only k <= m_active gives a finite threshold; beyond, M = 1 trivially.
    if not feasible(m_active):
        return None
    lo, hi = 0, m_active
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    return hi, value(hi)


@functools.lru_cache(maxsize=256)
def _select_cached(sizes, alpha, local_rank, clip_local_rank, conditional, delta):
    m = len(sizes)
    equal = len(set(sizes)) == 1
    if local_rank == "auto" and equal:
        ranks = None
    elif local_rank in ("auto", "fixed"):
        ranks = tuple(conformal_rank(n_j, alpha) for n_j in sizes)
    else:
        ranks = (local_rank,) * m
    if ranks is not None and clip_local_rank:
        ranks = tuple(min(l_j, n_j) for l_j, n_j in zip(ranks, sizes, strict=True))
    if equal:
        n = sizes[0]
        if ranks is not None and ranks[0] > n:  # every client would send +inf
            return _INFEASIBLE
        result = _select_equal(
            m, n, alpha, None if ranks is None else ranks[0], conditional, delta
        )
        if result is None:
            return _INFEASIBLE
        l_best, k_best, value = result
        return QQSelection((int(l_best),) * m, int(k_best), float(value), True)
    result = _select_unequal(sizes, ranks, alpha)
    if result is None:
        return _INFEASIBLE
    k_best, value = result
    return QQSelection(tuple(int(r) for r in ranks), int(k_best), float(value), True)


def select_qq_ranks(
    n_per_client,
    alpha,
    *,
    local_rank="auto",
    clip_local_rank=False,
    conditional=False,
    delta=0.1,
):
    """Choose the ranks ``(l_j, k)`` of FedCP-QQ from public metadata.

    With equal client sizes and ``local_rank="auto"`` this is eq. (6) of
    [1]_: the pair with the smallest exact coverage ``M(l, k) >= 1 - alpha``
    over the full grid ``[1..n] x [1..m]``. Otherwise the local ranks are
    fixed and the smallest valid ``k`` is returned. The result depends only
    on the sizes and ``alpha`` (never on scores) and is cached.

    Parameters
    ----------
    n_per_client : sequence of int
        Calibration size ``n_j >= 1`` of each client (``m`` entries).
    alpha : float
        Target miscoverage in (0, 1).
    local_rank : "auto", "fixed" or int, default="auto"
        ``"auto"``: full search when all sizes are equal, the ``"fixed"`` rule
        otherwise (Appendix A.1 of [1]_). ``"fixed"``:
        ``l_j = ceil((1 - alpha)(n_j + 1))`` (float-safe); a client with
        ``l_j > n_j`` sends ``+inf``. An int: the same ``l`` for every client.
    clip_local_rank : bool, default=False
        With fixed or integer ranks, use ``min(l_j, n_j)`` so every client
        sends a finite value; the coverage is recomputed, so it stays exact.
    conditional : bool or "exact", default=False
        ``True``: training-conditional pairs of Theorem 3.3 of [1]_,
        ``l k >= ceil((1 - alpha_delta) N)`` with
        ``alpha_delta = alpha - sqrt(log(1/delta) / (2N))``, so that
        ``P(miscoverage given the data <= alpha) >= 1 - delta``.
        ``"exact"`` (skfedcp extension): pairs whose exact tail
        :func:`qq_conditional_tail` is ``<= delta``. In both cases the pair
        with the smallest ``M`` is returned. Equal sizes only.
    delta : float, default=0.1
        Failure probability of the conditional guarantee: in (0, 0.5] for
        ``conditional=True``, in (0, 1) for ``"exact"``; ignored otherwise.

    Returns
    -------
    selection : QQSelection
        ``(local_ranks, k, coverage, feasible)``. ``local_ranks`` has one
        entry per client; ``coverage`` is ``M`` of the chosen pair. When no
        pair is valid (``alpha < 1/(N+1)``, no valid ``k`` for fixed ranks,
        or ``alpha_delta <= 0``): ``QQSelection((), None, 1.0, False)``, and
        the threshold is ``+inf``.

    See Also
    --------
    qq_coverage, qq_coverage_unequal : the coverage ``M``.

    Notes
    -----
    A pair is valid when ``M >= (1 - alpha) - 1e-10`` (exact ties such as
    ``M(3, 3) = 0.9`` for ``m = n = 3`` must stay valid). Pairs whose
    coverages lie within ``1e-13`` are tied; the largest ``l``, then the
    smallest ``k``, wins. With one client this is split conformal
    prediction, ``l* = ceil((n + 1)(1 - alpha))``; with ``n = 1``,
    ``k* = ceil((m + 1)(1 - alpha))``.

    The full search walks the staircase of smallest valid ``k`` per ``l``
    (non-increasing in ``l``) by divide and conquer over ``l`` with
    vectorised bisections on ``k``, screening ``M`` with a panel
    Gauss-Legendre rule (error < 1e-14) and re-evaluating every value close
    to a decision with adaptive quadrature (see the module source). It takes
    a few hundredths of a second at ``m = n = 1000``. Clear the cache with
    ``select_qq_ranks.cache_clear()``.

    The conditional rules target ``P(miscoverage given the data <= alpha)``
    only. With ``conditional="exact"`` and a large ``delta`` (around 0.5 or
    more) the returned ``M`` can fall below ``1 - alpha``; with
    ``conditional=True``, ``l k >= (1 - alpha_delta) N`` keeps it above.

    References
    ----------
    .. [1] P. Humbert, B. Le Bars, A. Bellet, S. Arlot. One-Shot Federated
       Conformal Prediction. ICML 2023.

    Examples
    --------
    >>> sel = select_qq_ranks([10] * 5, 0.1)
    >>> sel.local_ranks, sel.k, round(sel.coverage, 6)
    ((10, 10, 10, 10, 10), 3, 0.925626)
    >>> select_qq_ranks([5, 10, 20, 40, 15, 8, 30, 12], 0.1).k
    3
    >>> select_qq_ranks([2, 2], 0.1).feasible
    False
    """
    sizes = _check_sizes(n_per_client)
    alpha = check_alpha(alpha)
    if isinstance(local_rank, str):
        if local_rank not in ("auto", "fixed"):
            raise ValueError(
                'local_rank must be "auto", "fixed" or an int >= 1; '
                f"got {local_rank!r}."
            )
    else:
        local_rank = _check_int(local_rank, "local_rank")
    if not isinstance(clip_local_rank, bool | np.bool_):
        raise TypeError(f"clip_local_rank must be a bool; got {clip_local_rank!r}.")
    if isinstance(conditional, bool | np.bool_):
        conditional = bool(conditional)
    elif conditional != "exact":
        raise ValueError(
            f'conditional must be True, False or "exact"; got {conditional!r}.'
        )
    if isinstance(delta, bool) or not isinstance(delta, Real):
        raise TypeError(f"delta must be a float in (0, 1); got {delta!r}.")
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in the open interval (0, 1); got {delta!r}.")
    if conditional is True and delta > 0.5:
        raise ValueError(
            f"delta must be <= 0.5 with conditional=True (Theorem 3.3); got {delta!r}."
        )
    if conditional is not False and len(set(sizes)) > 1:
        raise ValueError(
            f"conditional={conditional!r} needs equal client sizes; got sizes "
            f"{sorted(set(sizes))}."
        )
    return _select_cached(
        sizes,
        alpha,
        local_rank,
        bool(clip_local_rank),
        conditional,
        delta if conditional is not False else None,
    )


select_qq_ranks.cache_clear = _select_cached.cache_clear
select_qq_ranks.cache_info = _select_cached.cache_info
