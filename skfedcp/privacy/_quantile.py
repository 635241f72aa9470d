"""Binned private quantile (exponential mechanism) and its conformal corrections.

Private quantile: Algorithm 2 of Angelopoulos et al. (2022) and Algorithm 2 of
Humbert et al. (2023), which are the same mechanism (see
:func:`private_quantile`). Corrected level, optimal ``gamma`` and number of
bins: Angelopoulos et al., eq. (3), eqs. (9)-(10) and Algorithm 5. Local rank
correction of FedCP²-QQ: Humbert et al., eq. (10).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp

from .._typing import SecureRandomStateLike
from ..exceptions import ClippedScoresWarning
from ..utils._quantile import float_safe_ceil
from ..utils._validation import check_alpha, check_scores
from ..utils._warnings import warn_user
from ._exponential import (
    _check_epsilon,
    exponential_mechanism,
    exponential_mechanism_probabilities,
)
from ._randomness import check_random_source
from ._validation import _check_int, _check_open_unit, _check_real, check_privacy_params

__all__ = [
    "dp_qq_local_correction",
    "private_conformal_gamma",
    "private_conformal_level",
    "private_quantile",
    "private_quantile_probabilities",
]

_MAX_BINS = 10_000_000
_DEFAULT_N_BINS = 100
# Fallback of Angelopoulos et al., eq. (10), when no root lies in (0, 1).
_GAMMA_FALLBACK = 1e-12


def private_quantile(
    scores: ArrayLike,
    level: float,
    *,
    epsilon: float,
    bounds: tuple[float, float] | None = None,
    edges: ArrayLike | None = None,
    n_bins: int | None = None,
    top_bin: Literal["edge", "inf"] = "edge",
    utility: Literal["quantile", "rank"] = "quantile",
    random_state: SecureRandomStateLike = None,
) -> float:
    """Differentially private quantile of scores, released as a bin edge.

    The scores are rounded *up* to public bin edges ``e_1 < ... < e_B``
    (bins ``(e_{b-1}, e_b]``), and the exponential mechanism picks an edge
    ``e_b`` with probability proportional to ``exp(-epsilon * w_b / (2 *
    Delta_q))``, where, with strict counts ``L_b = #{i : [s_i] < e_b}`` and
    ``G_b = #{i : [s_i] > e_b}``,

    * ``w_b = max(L_b / q, G_b / (1 - q))`` and
      ``Delta_q = max(1 / q, 1 / (1 - q))`` for ``q < 1``;
    * ``w_b = G_b`` and ``Delta_q = 1`` for ``q = 1`` (the continuous limit).

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        The private values. NaN is rejected; ``+-inf`` goes to the outer bins.
    level : float
        Quantile level ``q`` in (0, 1]. Pass the *corrected* level (e.g.
        :func:`private_conformal_level`): the sensitivity factor
        ``min(q, 1 - q)`` is the one of the level the mechanism runs at.
    epsilon : float
        Privacy parameter, ``> 0``.
    bounds : tuple of two floats, default=None
        Public range ``(low, high)``, split into ``n_bins`` equal bins.
        Exactly one of ``bounds`` and ``edges`` must be given, chosen without
        looking at the data.
    edges : array-like of shape (n_bins + 1,), default=None
        Public, strictly increasing bin edges ``e_0 < ... < e_B``.
    n_bins : int, default=None
        Number of bins with ``bounds`` (``None`` means 100); not allowed with
        ``edges``. At least 2.
    top_bin : {"edge", "inf"}, default="edge"
        ``"edge"``: scores above ``e_B`` are clipped to ``e_B`` (with a
        :class:`~skfedcp.exceptions.ClippedScoresWarning`), the paper's choice.
        ``"inf"``: the top bin is ``(e_{B-1}, +inf)`` and choosing it returns
        ``+inf``, which keeps conformal thresholds valid for unbounded scores.
        Privacy is the same: the mechanism only sees bin counts.
    utility : {"quantile", "rank"}, default="quantile"
        ``"quantile"``: the papers' loss ``w_b`` above. ``"rank"`` (skfedcp
        extension): the symmetric rank loss ``w_b = max(L_b - t + 1, G_b - n
        + t)`` with target rank ``t = q n`` (a real number) and ``Delta_q =
        1``. Releases above the target cost as much as releases below it, so
        the output does not drift upwards as it does for ``q > 1/2`` with the
        papers' loss; :func:`private_quantile_rank_tail` bounds its lower tail.
    random_state : int, Generator, RandomState, SeedSequence, "secure" or None, \
            default=None
        Source of randomness (``"secure"``: operating-system randomness with
        exact sampling, for deployment).

    Returns
    -------
    quantile : float
        One of ``e_1, ..., e_B`` (``+inf`` instead of ``e_B`` when
        ``top_bin="inf"``).

    See Also
    --------
    private_quantile_probabilities : The exact output law.
    private_conformal_level : The corrected level of private conformal
        calibration.

    Notes
    -----
    **Privacy.** Central ``epsilon``-DP for replace-one neighbours with ``n``
    public (and, for ``utility="quantile"``, for add/remove-one neighbours at
    a fixed level): changing one score moves every ``L_b`` and ``G_b`` by at
    most one, hence every ``w_b`` by at most ``Delta_q`` (for
    ``utility="rank"``, ``t`` and ``n`` are fixed, so by at most 1), and the
    exponential
    mechanism with factor ``epsilon / 2`` is ``epsilon``-DP. The bound is
    attained at ``q = 1/2``; at other levels one replacement moves all ``L_b``
    one way and all ``G_b`` the other, so the loss is at most
    ``epsilon (1 + min(q, 1-q) / max(q, 1-q)) / 2`` (not exploited by the
    corrections, which follow the papers). In a federated
    protocol each client runs it on its own scores (``epsilon``-DP per client
    data set). ``bounds``/``edges`` must be public; deriving them from the data
    voids the guarantee.

    **Formulations.** Angelopoulos et al. write the weight as
    ``exp(-epsilon * min(q, 1 - q) * w_b / 2)`` on bins of [0, 1], Humbert et
    al. as ``exp(-epsilon * w_b / (2 * Delta_q))`` on ``[e_0, e_B]``. Since
    ``min(q, 1 - q) = 1 / Delta_q`` these are the same mechanism; Humbert et
    al. add the ``q = 1`` limit, which is ``epsilon``-DP (sensitivity 1) and
    keeps their utility lemma.

    **Out-of-range scores.** Scores below ``e_0`` round up to ``e_1``
    (conservative). Scores above ``e_B`` round *down* with
    ``top_bin="edge"``: a threshold is then valid only for the clipped score.
    The warning that counts clipped scores is a local diagnostic for the data
    holder; its count is not privatised and must not be released.

    References
    ----------
    .. [1] A. N. Angelopoulos, S. Bates, T. Zrnic and M. I. Jordan, "Private
       prediction sets", Harvard Data Science Review, 2022.
    .. [2] P. Humbert, B. Le Bars, A. Bellet and S. Arlot, "One-shot federated
       conformal prediction", ICML 2023.

    Examples
    --------
    >>> from skfedcp.privacy import private_quantile
    >>> scores = [0.05, 0.15, 0.25, 0.35]
    >>> private_quantile(scores, 0.5, epsilon=1e9, edges=[0, 0.1, 0.2, 0.3, 0.4],
    ...                  random_state=0)
    0.2
    >>> private_quantile(scores, 0.9, epsilon=1.0, bounds=(0, 1), n_bins=10,
    ...                  random_state=0)
    0.4
    """
    edges, loss, sensitivity, epsilon, top_bin = _prepare(
        scores, level, epsilon, bounds, edges, n_bins, top_bin, utility
    )
    index = exponential_mechanism(
        -loss, epsilon=epsilon, sensitivity=sensitivity, random_state=random_state
    )
    if top_bin == "inf" and index == loss.shape[0] - 1:
        return math.inf
    return float(edges[index + 1])


def private_quantile_probabilities(
    scores: ArrayLike,
    level: float,
    *,
    epsilon: float,
    bounds: tuple[float, float] | None = None,
    edges: ArrayLike | None = None,
    n_bins: int | None = None,
    top_bin: Literal["edge", "inf"] = "edge",
    utility: Literal["quantile", "rank"] = "quantile",
    log: bool = False,
) -> NDArray[np.float64]:
    """Exact output law of :func:`private_quantile`.

    Parameters
    ----------
    scores, level, epsilon, bounds, edges, n_bins, top_bin, utility
        As in :func:`private_quantile`.
    log : bool, default=False
        Return natural-log probabilities.

    Returns
    -------
    probabilities : ndarray of shape (n_bins,)
        ``P(quantile = e_b)`` for ``b = 1..B``, i.e. aligned with
        ``edges[1:]`` (the last entry is ``P(+inf)`` when ``top_bin="inf"``).

    Examples
    --------
    >>> import numpy as np
    >>> from skfedcp.privacy import private_quantile_probabilities
    >>> p = private_quantile_probabilities(
    ...     [0.05, 0.15, 0.25, 0.35], 0.5, epsilon=2.0,
    ...     edges=[0, 0.1, 0.2, 0.3, 0.4])
    >>> np.round(p, 4)  # proportional to e^-3, e^-2, e^-2, e^-3
    array([0.1345, 0.3655, 0.3655, 0.1345])
    """
    _, loss, sensitivity, epsilon, _ = _prepare(
        scores, level, epsilon, bounds, edges, n_bins, top_bin, utility
    )
    return exponential_mechanism_probabilities(
        -loss, epsilon=epsilon, sensitivity=sensitivity, log=log
    )


def _prepare(
    scores, level, epsilon, bounds, edges, n_bins, top_bin, utility
) -> tuple[
    NDArray[np.float64], NDArray[np.float64], float, float, Literal["edge", "inf"]
]:
    """Validate, bin and return ``(edges, loss w_b, Delta_q, epsilon, top_bin)``."""
    epsilon = _check_epsilon(epsilon)
    level = _check_level(level)
    if top_bin not in ("edge", "inf"):
        raise ValueError(f'top_bin must be "edge" or "inf"; got {top_bin!r}.')
    utility = _check_utility(utility)
    edges = _resolve_edges(bounds, edges, n_bins)
    scores = check_scores(scores, allow_inf=True)
    lower, greater, n_below, n_above = _rank_counts(scores, edges)
    if top_bin == "inf":
        n_above = 0  # the top bin is (e_{B-1}, +inf): nothing is clipped
    if n_below or n_above:
        warn_user(
            f"{n_below} score(s) below e_0={edges[0]:g} and {n_above} above "
            f"e_B={edges[-1]:g} were clipped into the outer bins. The count is "
            "not private: do not release this message.",
            ClippedScoresWarning,
        )
    loss, sensitivity = _quantile_loss(lower, greater, level, utility, scores.shape[0])
    return edges, loss, sensitivity, epsilon, top_bin


def _release_logits(scores, level, epsilon, edges, utility="quantile"):
    """Logits of :func:`private_quantile` for each row of an ``(m, n)`` matrix.

    The same elementwise operations as the one-row path (binning, strict
    counts, loss, shifted and scaled logits), on already validated and
    clipped scores, so each row equals what :func:`private_quantile` builds.
    """
    lower, greater = _release_counts(scores, edges)
    return _logits_from_counts(lower, greater, scores.shape[1], level, epsilon, utility)


def _release_counts(scores, edges):
    """Strict counts ``L_b``, ``G_b`` of each row of an ``(m, n)`` matrix.

    They do not depend on the level: a search over levels on the same
    public data sets computes them once (see ``_dp/_tight.py``).
    """
    m, n = scores.shape
    n_bins = edges.shape[0] - 1
    index = np.clip(np.searchsorted(edges, scores, side="left"), 1, n_bins)
    offsets = (np.arange(m) * (n_bins + 1))[:, None]
    counts = np.bincount((index + offsets).ravel(), minlength=m * (n_bins + 1))
    counts = counts.reshape(m, n_bins + 1)[:, 1:]
    lower = np.cumsum(counts, axis=1) - counts
    greater = n - lower - counts
    return lower, greater


def _logits_from_counts(lower, greater, n, level, epsilon, utility="quantile"):
    """The logits of :func:`_release_logits` from the counts of each row."""
    loss, sensitivity = _quantile_loss(lower, greater, level, utility, n)
    utility = -loss
    shifted = utility - utility.max(axis=1, keepdims=True)
    with np.errstate(over="ignore", invalid="ignore"):
        logits = (0.5 * epsilon / sensitivity) * shifted
    logits[shifted == 0.0] = 0.0
    return logits


def _release_log_probabilities(scores, level, epsilon, edges, utility="quantile"):
    """Log output laws of :func:`private_quantile`, one row per data set."""
    logits = _release_logits(scores, level, epsilon, edges, utility)
    return logits - logsumexp(logits, axis=1, keepdims=True)


def _release_many(scores, level, epsilon, edges, sources, utility="quantile"):
    """:func:`private_quantile` with ``top_bin="inf"`` for many parties at once.

    ``scores`` is an ``(m, n)`` matrix of already validated and clipped
    scores (one row per party, all at ``level``), ``sources`` one random
    source per row. Binning, losses and logits are computed for all rows in
    one vectorised pass (:func:`_release_logits`), then each row draws from
    its own source (the same single draw), so every release is bit-identical
    to a call of :func:`private_quantile` on that row with that source.
    Returns an ``(m,)`` float array of bin edges (``+inf`` for the top bin).
    """
    n_bins = edges.shape[0] - 1
    logits = _release_logits(scores, level, epsilon, edges, utility)
    out = np.empty(scores.shape[0])
    for row, source in enumerate(sources):
        chosen = check_random_source(source).choice_from_log_weights(logits[row])
        out[row] = math.inf if chosen == n_bins - 1 else edges[chosen + 1]
    return out


def _check_level(level):
    level = _check_real(level, "level", "a number in (0, 1]")
    if not 0.0 < level <= 1.0:
        raise ValueError(f"level must be in (0, 1]; got {level!r}.")
    return level


def _resolve_edges(bounds, edges, n_bins):
    if (bounds is None) == (edges is None):
        raise ValueError(
            "Give exactly one of bounds (with n_bins) or edges: the bins must be "
            "public and fixed before seeing the data."
        )
    if edges is not None:
        if n_bins is not None:
            raise ValueError("n_bins must be None when edges are given.")
        edges = check_privacy_params(edges=edges).edges
        if edges.shape[0] - 1 < 2:
            raise ValueError(
                f"edges must define at least 2 bins (3 edges); got {edges.shape[0]}."
            )
        if edges.shape[0] - 1 > _MAX_BINS:
            raise ValueError(f"edges must define at most {_MAX_BINS} bins.")
        return edges
    checked = check_privacy_params(bounds=bounds).bounds
    if checked is None:  # pragma: no cover - set whenever bounds are given
        raise ValueError(f"bounds must be (low, high); got {bounds!r}.")
    low, high = checked
    n_bins = _DEFAULT_N_BINS if n_bins is None else n_bins
    n_bins = _check_int(n_bins, "n_bins", low=2, high=_MAX_BINS)
    edges = np.linspace(low, high, n_bins + 1)
    if not (np.diff(edges) > 0).all():
        raise ValueError(f"bounds {bounds!r} are too narrow for n_bins={n_bins}.")
    return edges


def _rank_counts(scores, edges):
    """Strict counts ``L_b``, ``G_b`` (b = 1..B) of the rounded-up scores.

    Bin index ``J(s) = min{b : e_b >= s}`` clipped to ``1..B``: bins are
    right-closed, scores ``<= e_0`` go to bin 1 and scores ``> e_B`` to bin B.
    ``searchsorted`` (not ``ceil(s * B)``) keeps scores on an edge in the
    right bin.
    """
    n_bins = edges.shape[0] - 1
    index = np.searchsorted(edges, scores, side="left")
    n_below = int(np.count_nonzero(scores < edges[0]))
    n_above = int(np.count_nonzero(index > n_bins))
    index = np.clip(index, 1, n_bins)
    counts = np.bincount(index, minlength=n_bins + 1)[1:]
    lower = np.cumsum(counts) - counts  # #{[s_i] < e_b}
    greater = scores.shape[0] - lower - counts  # #{[s_i] > e_b}
    return lower, greater, n_below, n_above


def _check_utility(utility):
    if utility not in ("quantile", "rank"):
        raise ValueError(f'utility must be "quantile" or "rank"; got {utility!r}.')
    return utility


def _quantile_loss(lower, greater, level, utility="quantile", n=None):
    """Loss ``w_b`` to minimise and its sensitivity ``Delta_q``.

    ``q < 1``: ``w_b = max(L_b / q, G_b / (1 - q))`` and
    ``Delta_q = max(1 / q, 1 / (1 - q)) = 1 / min(q, 1 - q)``.
    ``q = 1``: ``w_b = G_b`` and ``Delta_q = 1``, the limit of ``w_b /
    Delta_q = max(L_b (1 - q) / q, G_b)`` (Humbert et al., A6).
    ``utility="rank"``: ``w_b = max(L_b - t + 1, G_b - n + t)`` with the
    target rank ``t = q n`` (``n`` scores, public) and ``Delta = 1``.
    """
    if utility == "rank":
        t = level * n
        return np.maximum(lower - (t - 1.0), greater - (n - t)), 1.0
    if level == 1.0:
        return greater.astype(np.float64), 1.0
    loss = np.maximum(lower / level, greater / (1.0 - level))
    return loss, max(1.0 / level, 1.0 / (1.0 - level))


# --------------------------------------------------------------------------
# Corrections of private conformal calibration (Angelopoulos et al.)


def private_conformal_level(
    n: int,
    alpha: float,
    *,
    epsilon: float,
    n_bins: int,
    gamma: float | Literal["auto"] = "auto",
) -> float:
    """Corrected level ``q~`` of private split-conformal calibration.

    ``q~ = (n + 1)(1 - alpha) / (n (1 - gamma alpha))
    + 2 / (epsilon n) * ln(n_bins / (gamma alpha))``, eq. (3) of Angelopoulos
    et al. Running :func:`private_quantile` at level ``q~`` on ``n`` scores in
    ``[e_0, e_B]`` gives coverage ``>= 1 - alpha``.

    Parameters
    ----------
    n : int
        Number of calibration scores (public).
    alpha : float
        Miscoverage level in (0, 0.5] (the proof needs ``q~ >= 1/2``).
    epsilon : float
        Privacy parameter, ``> 0``.
    n_bins : int
        Number of bins ``m`` (candidate outputs, not edges), ``>= 2``.
    gamma : float or "auto", default="auto"
        Share of ``alpha`` spent on the mechanism's failure event, in (0, 1);
        ``"auto"`` uses :func:`private_conformal_gamma`.

    Returns
    -------
    level : float
        ``q~``; ``+inf`` for ``n = 0``. It can be ``>= 1``: the caller must
        then return the trivial threshold ``e_B`` *without reading the
        scores* (running the mechanism at level 1 is private but does not
        cover).

    Examples
    --------
    >>> from skfedcp.privacy import private_conformal_level
    >>> round(private_conformal_level(1000, 0.1, epsilon=1, n_bins=1000,
    ...                               gamma=0.01), 6)
    0.929433
    """
    n, alpha, epsilon = _check_conformal_args(n, alpha, epsilon)
    n_bins = _check_int(n_bins, "n_bins", low=2, high=_MAX_BINS)
    if isinstance(gamma, str) and gamma == "auto":
        gamma = private_conformal_gamma(n, alpha, epsilon=epsilon)
    else:
        gamma = _check_open_unit(gamma, "gamma")
    return _level(n, alpha, epsilon, n_bins, gamma)


def _level(n, alpha, epsilon, n_bins, gamma):
    if n == 0:
        return math.inf
    inflation = (n + 1) * (1.0 - alpha) / (n * (1.0 - gamma * alpha))
    return inflation + 2.0 / (epsilon * n) * (
        math.log(n_bins) - math.log(gamma) - math.log(alpha)
    )


def private_conformal_gamma(n: int, alpha: float, *, epsilon: float) -> float:
    """Optimal ``gamma`` of private conformal calibration (it minimises ``q~``).

    ``dq~/dgamma = 0`` is ``alpha^2 gamma^2 - b gamma + 1 = 0`` with
    ``b = alpha (1 - alpha) epsilon (n + 1) / 2 + 2 alpha`` (Angelopoulos et
    al., eq. 9). ``q~`` is convex in ``gamma`` on ``(0, 1/alpha)`` and the
    larger root exceeds ``1/alpha``, so the answer is the smaller root
    ``2 / (b + sqrt(b^2 - 4 alpha^2))`` when it is below 1 and ``1e-12``
    otherwise (eq. 10; ``q~ > 1`` then anyway). It does not depend on the
    number of bins.

    Parameters
    ----------
    n : int
        Number of calibration scores.
    alpha : float
        Miscoverage level in (0, 0.5].
    epsilon : float
        Privacy parameter, ``> 0``.

    Returns
    -------
    gamma : float

    Examples
    --------
    >>> from skfedcp.privacy import private_conformal_gamma
    >>> float(f"{private_conformal_gamma(1000, 0.1, epsilon=1):.6e}")
    0.022102
    """
    n, alpha, epsilon = _check_conformal_args(n, alpha, epsilon)
    return _gamma(n, alpha, epsilon)


def _gamma(n, alpha, epsilon):
    b = alpha * (1.0 - alpha) * epsilon * (n + 1) / 2.0 + 2.0 * alpha
    root = 2.0 / (b + math.sqrt(b * b - 4.0 * alpha * alpha))  # cancellation-free
    return root if root < 1.0 else _GAMMA_FALLBACK


def _check_conformal_args(n, alpha, epsilon):
    """Check the public ``n >= 0``, ``alpha`` in (0, 0.5] and ``epsilon > 0``."""
    return _check_int(n, "n", low=0), _check_alpha_half(alpha), _check_epsilon(epsilon)


def _check_alpha_half(alpha):
    alpha = check_alpha(alpha)
    if alpha > 0.5:
        raise ValueError(
            f"alpha must be in (0, 0.5] for private conformal calibration (the "
            f"coverage proof needs a level >= 1/2); got {alpha!r}."
        )
    return alpha


# --------------------------------------------------------------------------
# FedCP²-QQ (Humbert et al.)


def dp_qq_local_correction(
    epsilon: float, n_bins: int, gamma: float, alpha: float, n_clients: int
) -> int:
    """Rank correction ``l_cor`` of each client's private quantile in FedCP²-QQ.

    ``l_cor = ceil((2 / epsilon) * ln(n_bins / delta_gamma))`` with
    ``delta_gamma = 1 - (1 - gamma alpha)^(1 / n_clients)`` (Humbert et al.,
    eq. 10 and the proof of Theorem 4.1). With probability
    ``>= 1 - delta_gamma`` a client's private quantile at level
    ``(l + l_cor) / n`` (at least 1/2) lies above its ``l``-th smallest score,
    so all clients do with probability ``>= 1 - gamma alpha``.

    Parameters
    ----------
    epsilon : float
        Per-client privacy parameter, ``> 0``.
    n_bins : int
        Number of bins ``B``, ``>= 2``.
    gamma : float
        Share of ``alpha`` spent on the mechanisms' failure, in (0, 1).
    alpha : float
        Miscoverage level in (0, 1).
    n_clients : int
        Number of clients ``m``, ``>= 1``.

    Returns
    -------
    l_cor : int

    Examples
    --------
    >>> from skfedcp.privacy import dp_qq_local_correction
    >>> dp_qq_local_correction(10, 100, 0.02, 0.1, 5)
    3
    >>> dp_qq_local_correction(1, 100, 0.06, 0.1, 5)
    23
    """
    epsilon = _check_epsilon(epsilon)
    n_bins = _check_int(n_bins, "n_bins", low=2, high=_MAX_BINS)
    gamma = _check_open_unit(gamma, "gamma")
    alpha = check_alpha(alpha)
    n_clients = _check_int(n_clients, "n_clients", low=1)
    # 1 - (1 - gamma alpha)^(1/m), without cancellation for small gamma alpha.
    delta_gamma = -math.expm1(math.log1p(-gamma * alpha) / n_clients)
    return float_safe_ceil(2.0 / epsilon * math.log(n_bins / delta_gamma))
