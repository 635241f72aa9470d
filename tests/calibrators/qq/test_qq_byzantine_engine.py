"""The worst-honest-set integral's engine against its references.

The Gauss-Kronrod panels, the crossings found from the near types only, the
trims read from another grid and the crowded band passes, each checked
against a direct computation of what it stands for.
"""

import numpy as np
import pytest

from skfedcp.calibrators import qq_coverage_unequal
from skfedcp.calibrators._qq import _byzantine as _byz
from skfedcp.calibrators._qq import _byzantine_bound as _bound
from skfedcp.utils._quantile import conformal_rank

TOL = 1e-10  # the feasibility tolerance of the rank selection


def _profile(m, seed, alpha, low=10, high=1000):
    sizes = tuple(int(n) for n in np.random.default_rng(seed).integers(low, high, m))
    return sizes, tuple(conformal_rank(n, alpha) for n in sizes)


@pytest.mark.parametrize(
    ("m", "seed", "alpha"), [(12, 0, 0.1), (40, 1, 0.05), (60, 2, 0.1), (80, 3, 0.05)]
)
def test_all_honest_integral_is_the_exact_coverage(m, seed, alpha):
    # With every client kept the integrand is the plain QQ one: the panels
    # must give qq_coverage_unequal's adaptive quadrature (the reference),
    # including at alpha = 0.05, where a wide flat panel once hid the start
    # of the drop at its end (8.5e-8 off before the end check).
    sizes, ranks = _profile(m, seed, alpha)
    for k in (m // 3, m // 2, m - 2):
        got = _bound._extreme_coverages(sizes, ranks, m, True, (k,))[0]
        assert got == pytest.approx(qq_coverage_unequal(sizes, ranks, k), abs=1e-12)


@pytest.mark.parametrize(("m", "c", "seed"), [(30, 2, 4), (60, 3, 5)])
def test_panels_agree_with_a_finer_quadrature(m, c, seed, monkeypatch):
    sizes, ranks = _profile(m, seed, 0.1)
    k = m // 2
    cases = [(m - c, True, (k - c,)), (m - c, False, (k,))]
    default = [_bound._extreme_coverages(sizes, ranks, *case)[0] for case in cases]
    monkeypatch.setattr(_bound, "_AGREE", 1e-14)
    monkeypatch.setattr(_bound, "_PRESPLIT", 48)
    fine = [_bound._extreme_coverages(sizes, ranks, *case)[0] for case in cases]
    np.testing.assert_allclose(default, fine, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("m", "c", "seed"), [(25, 2, 6), (90, 4, 7)])
def test_pieces_are_where_the_worst_set_changes(m, c, seed):
    # H(t) read at dense points: constant inside each piece, different on
    # the two sides of each cut (the near-types test keeps no idle cut and
    # misses no move).
    sizes, ranks = _profile(m, seed, 0.1)
    for largest in (True, False):
        ext = _bound._Extreme(sizes, ranks, m - c, largest)
        lo, hi = 0.3, 0.97
        lows, highs = _bound._pieces(ext, lo, hi)
        assert lows[0] == lo and highs[-1] == hi
        np.testing.assert_array_equal(lows[1:], highs[:-1])
        for a, b in zip(lows, highs, strict=True):
            t = a + (b - a) * np.linspace(0.02, 0.98, 25)
            take = ext.take(ext.probs(t))
            assert (take == take[0]).all()
        for cut in lows[1:]:
            eps = 1e-9
            take = ext.take(ext.probs(np.array([cut - eps, cut + eps])))
            assert (take[0] != take[1]).any()


@pytest.mark.parametrize(("m", "c", "seed"), [(20, 1, 8), (70, 5, 9)])
def test_guided_trims_match_the_own_grid(m, c, seed):
    # The upper bound and the all-honest coverage trimmed from the certified
    # bound's grid: the sandwich holds at its nodes, and the value is the one
    # of a trim from their own grid (the panels differ: ~1e-15).
    sizes, ranks = _profile(m, seed, 0.1)
    k = m // 2
    _, t, f = _bound._grid_cdf(sizes, ranks, m - c, True)
    for n_keep, largest in ((m - c, False), (m, True)):
        below, above = _bound._sandwich(m, n_keep, largest, m - c)
        own = _bound._Extreme(sizes, ranks, n_keep, largest).cdf(t, np.array([k]))[0]
        lower, upper = _bound._guide_rows(f, (k - below, k + above))
        assert (lower <= own + 1e-14).all() and (own <= upper + 1e-14).all()
        guided = _bound._extreme_coverages(sizes, ranks, n_keep, largest, (k,), m - c)
        alone = _bound._extreme_coverages(sizes, ranks, n_keep, largest, (k,))
        assert guided[0] == pytest.approx(alone[0], abs=1e-13)


@pytest.mark.parametrize(("m", "c", "seed"), [(40, 2, 10), (100, 5, 11)])
def test_crowded_band_brackets_the_first_passing_rank(m, c, seed):
    sizes, ranks = _profile(m, seed, 0.1)
    threshold = 0.9 - TOL
    band = _bound.certified_band(sizes, ranks, m - c, threshold, m - 2 * c)
    assert band is not None and band[1] - band[0] <= 2
    values = _bound.extreme_coverages(
        sizes, ranks, m - c, True, tuple(range(max(band[0] - 1, 1), band[1] + 1))
    )
    if band[0] > 1:
        assert values[0] < threshold  # the rank below the band fails
    assert values[-1] >= threshold  # the band's top passes


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("c", [1, 3])
def test_k_floor_is_below_the_certified_pair(seed, c):
    m = 12 + 7 * seed
    sizes, _ = _profile(m, seed, 0.1, high=300)
    for alpha in (0.02, 0.05, 0.1):
        floor = _byz.fixed_k_floor(sizes, alpha, c)
        pair = _byz.fixed_certified_pair(sizes, alpha, c)
        if floor is None:
            assert pair is None
        elif pair is not None:
            assert floor <= pair[1]
