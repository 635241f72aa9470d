"""max_byzantine with unequal sizes: a range of c at once, against the bisection."""

import bisect

import numpy as np
import pytest

from skfedcp.calibrators import max_byzantine, select_byzantine_ranks
from skfedcp.calibrators._qq import _byzantine as _byz
from skfedcp.calibrators._qq import _byzantine_bound as _bound
from skfedcp.calibrators._qq import _byzantine_max as _max

TOL = 1e-10  # the feasibility tolerance of the rank selection


def _bisection(sizes, alpha, ranks, k):
    """The per-c bisection over ``_lower_passes`` (the path before the range)."""
    threshold = (1.0 - alpha) - TOL

    def ok(c):
        return _byz._lower_passes(sizes, ranks, k, c, threshold)

    if not ok(0):
        return -1
    return bisect.bisect_left(range(1, k), True, key=lambda c: not ok(c))


def _cases(seed, count, m_range, n_range):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        m = int(rng.integers(*m_range))
        sizes = tuple(int(n) for n in rng.integers(*n_range, m))
        alpha = float(rng.choice([0.05, 0.1, 0.2]))
        c = int(rng.integers(1, 4))
        sel = select_byzantine_ranks(sizes, alpha, c)
        if sel.feasible:
            out.append((sizes, alpha, sel.local_ranks, sel.k))
    return out


@pytest.mark.parametrize("case", _cases(0, 12, (3, 30), (5, 200)))
def test_range_is_the_bisection(case):
    sizes, alpha, ranks, k = case
    for kk in sorted({max(k - 3, 1), k, min(k + 4, len(sizes))}):
        assert max_byzantine(sizes, alpha, ranks, kk) == _bisection(
            sizes, alpha, ranks, kk
        )


def test_range_is_the_bisection_medium():
    for sizes, alpha, ranks, k in _cases(1, 2, (120, 200), (10, 1001)):
        assert max_byzantine(sizes, alpha, ranks, k) == _bisection(
            sizes, alpha, ranks, k
        )


def test_range_rows_are_the_integrand():
    # f_c on any nodes: the count law of the m - c largest p_j(t), as the
    # per-c engine computes it (product tree or DP), to the rounding.
    sizes = tuple(int(n) for n in np.random.default_rng(3).integers(10, 500, 80))
    sel = select_byzantine_ranks(sizes, 0.1, 3)
    ranks, k = sel.local_ranks, sel.k
    rng = _max._Range(sizes, ranks, k, 1, 7)
    t = np.r_[0.0, np.linspace(0.7, 0.99, 41), 1.0]
    rows = rng.cdf(t)
    for i, c in enumerate(range(1, 8)):
        ext = _bound._Extreme(sizes, ranks, len(sizes) - c, True)
        expected = ext.cdf(t, np.array([k - c]))[0]
        np.testing.assert_allclose(rows[i], expected, rtol=0, atol=1e-13)
    # Decreasing in c at every node (the monotony the range relies on).
    assert np.all(np.diff(rows, axis=0) <= 1e-13)


def test_joint_integrals_are_extreme_coverages():
    sizes = tuple(int(n) for n in np.random.default_rng(4).integers(10, 400, 60))
    sel = select_byzantine_ranks(sizes, 0.1, 2)
    ranks, k = sel.local_ranks, sel.k
    m = len(sizes)
    rng = _max._Range(sizes, ranks, k, 1, 5)
    _, t, _ = _bound._window_probs(sizes, ranks)
    cs = np.arange(1, 6)
    got = _max._integrals(rng, t, rng.cdf(t), cs)
    for c, value in zip(cs.tolist(), got.tolist(), strict=True):
        ref = float(_bound.extreme_coverages(sizes, ranks, m - c, True, (k - c,))[0])
        assert abs(value - ref) < 1e-12


@pytest.mark.parametrize("guess", ["low", "high"])
def test_a_wrong_guess_moves_the_range(monkeypatch, guess):
    sizes = tuple(int(n) for n in np.random.default_rng(5).integers(10, 300, 50))
    sel = select_byzantine_ranks(sizes, 0.1, 2)
    expected = _bisection(sizes, 0.1, sel.local_ranks, sel.k)
    monkeypatch.setattr(
        _max,
        "_normal_estimate",
        lambda t, f, threshold: 0 if guess == "low" else f.shape[0] - 1,
    )
    monkeypatch.setattr(_max, "_HALF_RANGE", 1)
    assert max_byzantine(sizes, 0.1, sel.local_ranks, sel.k) == expected


@pytest.mark.parametrize("offset", range(-4, 5))
def test_ranges_around_the_answer(monkeypatch, offset):
    # First ranges of 3 c's placed all around the answer (ending on it,
    # starting just past it, ...): the search ends, on the same answer, after
    # a few ranges (it once went back and forth between two of them).
    sizes = tuple(int(n) for n in np.random.default_rng(8).integers(10, 300, 60))
    sel = select_byzantine_ranks(sizes, 0.1, 3)
    expected = _bisection(sizes, 0.1, sel.local_ranks, sel.k)
    monkeypatch.setattr(_max, "_HALF_RANGE", 1)
    monkeypatch.setattr(
        _max, "_normal_estimate", lambda t, f, threshold: expected + offset
    )
    built = []

    class Counted(_max._Range):
        def __init__(self, *args):
            built.append(args)
            assert len(built) < 40, "the range search does not end"
            super().__init__(*args)

    monkeypatch.setattr(_max, "_Range", Counted)
    assert max_byzantine(sizes, 0.1, sel.local_ranks, sel.k) == expected


def test_every_decision_by_the_exact_path(monkeypatch):
    # No bracket decides and every integral is "too close": each c goes to
    # _lower_passes, the answer is unchanged.
    sizes = tuple(int(n) for n in np.random.default_rng(6).integers(10, 300, 40))
    sel = select_byzantine_ranks(sizes, 0.1, 2)
    expected = _bisection(sizes, 0.1, sel.local_ranks, sel.k)
    calls = []

    def exact(c):
        calls.append(c)
        return _byz._lower_passes(sizes, sel.local_ranks, sel.k, c, (1.0 - 0.1) - TOL)

    monkeypatch.setattr(_max, "_SAFE", 2.0)
    got = _max.max_byzantine_unequal(
        sizes, sel.local_ranks, sel.k, (1.0 - 0.1) - TOL, exact, 2.0
    )
    assert got == expected
    assert calls  # the exact path was asked


def test_many_clients_keep_the_bisection(monkeypatch):
    sizes = tuple(int(n) for n in np.random.default_rng(7).integers(10, 300, 30))
    sel = select_byzantine_ranks(sizes, 0.1, 1)
    expected = max_byzantine(sizes, 0.1, sel.local_ranks, sel.k)
    monkeypatch.setattr(_byz, "MAX_CLIENTS", 10)  # past it: the bisection

    def refuse(*args):
        raise AssertionError("the range path ran")

    monkeypatch.setattr(_byz, "max_byzantine_unequal", refuse)
    assert max_byzantine(sizes, 0.1, sel.local_ranks, sel.k) == expected


def test_random_pairs_are_the_bisection():
    # Any sizes and ranks (inactive clients, equal sizes with unequal ranks,
    # ranks past every size), any k: the same answer as the bisection.
    rng = np.random.default_rng(2026)
    for _ in range(150):
        m = int(rng.integers(2, 50))
        sizes = tuple(int(n) for n in rng.integers(1, 120, m))
        if rng.random() < 0.2:
            sizes = tuple(int(n) for n in rng.choice([3, 10, 40], m))
        if rng.random() < 0.5:
            ranks = tuple(int(r) for r in rng.integers(1, 130, m))
        else:
            ranks = (int(rng.integers(1, 60)),) * m
        alpha = float(rng.choice([0.02, 0.05, 0.1, 0.2, 0.4]))
        k = int(rng.integers(1, m + 1))
        assert max_byzantine(sizes, alpha, ranks, k) == _bisection(
            sizes, alpha, ranks, k
        )
