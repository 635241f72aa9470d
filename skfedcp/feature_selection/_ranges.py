"""FED-chi2's public ranges: fixed-point plans and what honest clients can send.

Round one's plan comes from the clients' power-of-two bounds
(:func:`_marginals_bound`, :func:`_marginals_plan`); round two's precision
and the range check of its decoded sum come from the public marginals
(:func:`_frac_bits`, :func:`_check_sketch_range`).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from ..exceptions import InvalidMessageError
from ..federated._fixed_point import fixed_point_plan
from ._sketch import _check_positive_int
from ._tables import _dof, _finalize_scores, _offsets


def _statistic_bound(marginals):
    """Public upper bound ``B_j`` on each feature's statistic (A3).

    ``F_j (N / N_min - 1)`` for sklearn's statistic, ``N (min(m_j, C) - 1)``
    for a contingency table, from the broadcast marginals.
    """
    counts = marginals.class_counts
    present = counts[counts > 0]
    n_total = counts.sum()
    if marginals.n_levels is None:
        n_min = present.min() if present.size else 1.0
        return marginals.row_totals * (n_total / n_min - 1.0)
    offsets = _offsets(marginals.n_levels.shape[0], marginals.n_levels)
    nonzero = (marginals.row_totals > 0).astype(np.intp)
    m_eff = np.add.reduceat(nonzero, offsets[:-1]) if nonzero.size else nonzero
    return n_total * (np.minimum(m_eff, present.size) - 1.0)


def _headroom_bits(marginals):
    """The most fractional bits per feature with the 8-sigma headroom (A3).

    ``62 - ceil(log2(8 sqrt(2 max(B, 1))))`` from a public upper bound ``B``
    on each statistic, so the aggregate overflows only on an 8-sigma event.
    Raises if a feature has no headroom at all.
    """
    bound = _statistic_bound(marginals)
    with np.errstate(over="ignore", invalid="ignore"):
        bits = 62 - np.ceil(np.log2(8.0 * np.sqrt(2.0 * np.maximum(bound, 1.0))))
    if not np.all(np.isfinite(bits)) or np.any(bits < 0):
        j = int(np.flatnonzero(~(bits >= 0))[0])
        raise ValueError(
            f"X: the chi-square statistic of feature {j} may reach {bound[j]:.3g} "
            "(from the public marginals), so its sketch cannot be carried by the "
            "64-bit ring of the secure sum without risk of wrapping around; "
            "rescale X (the statistic scales with it)."
        )
    return bits, bound


def _frac_bits(marginals):
    # A3: f = clip(62 - ceil(log2(8 sqrt(2 max(B, 1)))), 8, 52).
    bits, _ = _headroom_bits(marginals)
    # At least 8 fractional bits when that leaves the 8-sigma headroom; fewer
    # (never a wrap-around) for statistics too large for 8.
    return np.clip(bits, np.minimum(bits, 8), 52).astype(np.int64)


def _check_user_frac_bits(frac_bits, marginals):
    """Refuse a user's ``frac_bits`` that lets a round-two sum wrap around."""
    frac_bits = _check_positive_int(frac_bits, "frac_bits", minimum=0)
    bits, bound = _headroom_bits(marginals)
    if bits.size and frac_bits > bits.min():
        j = int(np.argmin(bits))
        raise ValueError(
            f"frac_bits={frac_bits} lets the round-two secure sum of feature {j} "
            f"wrap around the 64-bit ring (its statistic may reach {bound[j]:.3g} "
            "by the public marginals); use frac_bits <= "
            f"{int(bits.min())}, or None to choose the bits per feature."
        )
    return np.full(bits.shape[0], frac_bits, dtype=np.int64)


# Honest round-two sums: each decoded coordinate of feature j is N(0, 2 s)
# with s = ||w_j||**2 at most H_j (:func:`_honest_sketch_bound`). A coordinate
# beyond 8 standard deviations of N(0, 2 H_j) (the headroom of the fixed-point
# plan), or a squared norm beyond the chi-square quantile of the same tail
# probability, is impossible for honest clients (probability < 1.3e-15).
_SIGMAS = 8.0
_TAIL = float(special.erfc(_SIGMAS / np.sqrt(2.0)))


def _honest_sketch_bound(marginals):
    """``H_j``: the largest ``||w_j||**2`` any set of honest clients can send.

    Without dropout ``w_j`` is the statistic's residual vector, so ``H_j =
    B_j`` would do; the clients of round two may be a subset of those of
    round one, whose residuals are bounded by ``B_j + 2 T_j`` (``T_j``: the
    total of feature ``j``'s table, ``F_j``, or ``N`` for a contingency
    table), at most ``3 B_j``, within the ring's ``16 sqrt(2 B_j)``.
    """
    bound = _statistic_bound(marginals)
    if marginals.n_levels is None:
        return bound + 2.0 * marginals.row_totals
    return bound + 2.0 * marginals.class_counts.sum()


def _sketch_limits(marginals, n_projections):
    """Per feature: the largest honest coordinate and squared norm.

    Features whose score is set by convention (zero total, one class, one
    level) get ``inf``: nothing an attacker sends changes them.
    """
    honest = np.maximum(_honest_sketch_bound(marginals), 1.0)
    coordinate = _SIGMAS * np.sqrt(2.0 * honest)
    norm = 2.0 * honest * special.chdtri(n_projections, _TAIL)
    fixed = np.isnan(_finalize_scores(np.ones(honest.shape[0]), marginals).scores)
    if marginals.n_levels is not None:
        fixed |= _dof(marginals) == 0
    coordinate[fixed] = np.inf
    norm[fixed] = np.inf
    return coordinate, norm, honest


def _check_sketch_range(sketch, marginals):
    """Refuse a summed sketch no set of honest clients can produce.

    Secure aggregation hides who sent what: the sum as a whole is refused,
    naming the feature.
    """
    coordinate, norm, honest = _sketch_limits(marginals, sketch.shape[0])
    beyond = np.abs(sketch) > coordinate[None, :]
    squares = np.einsum("ij,ij->j", sketch, sketch)
    if np.any(beyond):
        i, j = (int(v[0]) for v in np.nonzero(beyond))
        what = (
            f"coordinate {i} of feature {j} is {sketch[i, j]:.4g}, beyond "
            f"{_SIGMAS:g} standard deviations ({coordinate[j]:.4g})"
        )
    elif np.any(squares > norm):
        j = int(np.flatnonzero(squares > norm)[0])
        what = (
            f"the squared norm of feature {j}'s sketch is {squares[j]:.4g}, "
            f"beyond {norm[j]:.4g} (probability < {_TAIL:.1g})"
        )
    else:
        return
    raise InvalidMessageError(
        f"the secure sum: field 'sketch': {what} of what honest clients can "
        f"send (the feature's statistic is at most {honest[j]:.4g} by the "
        "public marginals). Secure aggregation hides which client sent it, so "
        "the summed sketch is refused as a whole.",
        field="sketch",
    )


# Fixed-point precision of round-1 sums of non-integer X (A5): at most this
# many fractional bits, fewer when the public bound on the totals needs them.
_ROUND1_FRAC_BITS = 32


def _marginals_bound(message):
    """Round 1, client step: the power-of-two bound a client announces.

    ``message`` is one client's :func:`chi2_client_marginals` vector, or a
    stack of them (the bound then covers every row). Each coordinate gets
    the smallest power of two at least its magnitude (0 for a zero
    coordinate). The server takes the maximum over the clients and builds
    the public plan with :func:`_marginals_plan`.
    """
    top = np.max(np.abs(np.atleast_2d(message)), axis=0)
    if not np.all(np.isfinite(top)):
        raise ValueError(
            "X: the column sums of X overflow float64 (the values are finite, "
            "their sums are not); rescale X."
        )
    return _pow2_ceil(top)


def _pow2_ceil(x):
    """Elementwise: the smallest power of two at least ``x >= 0`` (0 for 0)."""
    with np.errstate(divide="ignore"):
        bound = np.exp2(np.ceil(np.log2(np.where(x > 0, x, 1.0))))
    return np.where(x > 0, np.maximum(bound, x), 0.0)


def _marginals_plan(bound, n_clients, *, integer_x, frac_bits=None):
    """Round 1, server step: the public fixed-point plan of the marginals.

    Each coordinate gets the most fractional bits, up to 32 (or
    ``frac_bits``; 0 for integer X, summed exactly), with which the total of
    ``n_clients`` values within ``bound`` cannot wrap around the ring. The
    clients encode with ``plan.encode`` (which refuses a value over its
    bound) and the server decodes with ``plan.decode``.

    Raises a ValueError naming X when no scale can hold the totals, or when
    an explicit ``frac_bits`` is too fine for them.
    """
    if integer_x:
        cap = 0
    elif frac_bits is None:
        cap = _ROUND1_FRAC_BITS
    else:
        cap = frac_bits
    try:
        plan = fixed_point_plan(bound, n_clients, max_frac_bits=cap, name="X")
    except ValueError as exc:
        raise ValueError(
            f"X: the per-client sums of X reach {np.max(bound):.4g}; with "
            f"{n_clients} clients their total cannot be summed in the 64-bit ring "
            "of the secure sum without wrapping around. Rescale X."
        ) from exc
    short = plan.frac_bits < cap
    if frac_bits is not None and not integer_x and np.any(short):
        raise ValueError(
            f"frac_bits={frac_bits} is too fine for the round-one sums of X "
            f"(per-client sums up to {np.max(bound):.4g}, {n_clients} clients): "
            "the total would wrap around the 64-bit ring. Use frac_bits <= "
            f"{int(plan.frac_bits.min())}, or None to choose it from the data's "
            "range."
        )
    return plan
