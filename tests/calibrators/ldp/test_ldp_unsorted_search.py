"""LDP-L's exact search without sorting the float64 scores, against the sort.

``_first_covering_unsorted`` brackets the counts of all scores with their
sorted float32 roundings, counts exactly where the bracket leaves a decision
open, and sorts the float64 scores only past a few such counts; the
threshold must be ``_first_covering``'s on the sorted scores, bit for bit.
"""

import warnings

import numpy as np
import pytest

from skfedcp.calibrators import LDPLabelCalibrator
from skfedcp.calibrators._ldp import _label_search
from skfedcp.calibrators._ldp._common import _bisection_update
from skfedcp.calibrators._ldp._label_search import (
    _BracketedCounts,
    _debiased_coverage,
    _first_covering,
    _first_covering_unsorted,
)
from skfedcp.privacy import k_ary_randomized_response
from skfedcp.utils._random import spawn_random_states


def _both(values, noisy, beta, k, target):
    sorted_noisy = np.sort(noisy)
    before = values.copy()
    got = _first_covering_unsorted(values, sorted_noisy, beta, k, target)
    np.testing.assert_array_equal(values, before)  # never written
    want = _first_covering(np.sort(values), sorted_noisy, beta, k, target)
    assert np.array_equal([got], [want]) and np.signbit(got) == np.signbit(want)
    return got


def _matrix(rng, n, k, kind):
    p = rng.dirichlet(np.ones(k), size=n)
    m = 1.0 - p
    if kind == "ties":
        m = np.round(m, 1)
    elif kind == "discrete":
        m = rng.integers(0, 4, size=(n, k)) / 3.0
    elif kind == "constant":
        m = np.full((n, k), 0.25)
    elif kind == "float32_ties":
        # Distinct float64 scores that round to a few float32 values: the
        # bracket is wide everywhere and the exact counts decide.
        base = np.float32(0.5)
        m = float(base) + rng.integers(0, 3, size=(n, k)) * 2.0**-40
    elif kind == "huge":
        m = m * 1e300 - 5e299  # beyond float32: rounds to -inf / +inf
    elif kind == "tiny":
        m = m * 1e-310  # subnormal float64, zero in float32
    elif kind == "negative":
        m = m - 0.7
    return m


KINDS = [
    "plain",
    "ties",
    "discrete",
    "constant",
    "float32_ties",
    "huge",
    "tiny",
    "negative",
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("k", [2, 3, 10])
@pytest.mark.parametrize("seed", range(4))
def test_same_threshold_as_the_sort(kind, k, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    m = _matrix(rng, n, k, kind)
    noisy = m[np.arange(n), rng.integers(0, k, size=n)]
    for beta in (0.0, 0.3, 0.9):
        for target in (0.05, 0.5, 0.9, 0.999, 1.0):
            _both(m.ravel(), noisy, beta, k, target)


def test_one_row_and_a_target_past_one():
    m = np.array([[0.2, 0.7]])
    assert _both(m.ravel(), m[0, :1], 0.5, 2, 1.6) == np.inf  # 1.5 is reached
    _both(m.ravel(), m[0, 1:], 0.5, 2, 0.5)


def test_open_decisions_are_counted_then_sorted(monkeypatch):
    # Scores that tie in float32: every decision near the answer is open.
    # With no exact pass allowed the search sorts; with enough it counts.
    rng = np.random.default_rng(0)
    m = _matrix(rng, 2000, 3, "float32_ties")
    noisy = m[np.arange(2000), rng.integers(0, 3, size=2000)]
    calls = []
    original = _BracketedCounts.exact

    def spy(self, threshold):
        calls.append(threshold)
        return original(self, threshold)

    monkeypatch.setattr(_BracketedCounts, "exact", spy)
    for limit in (0, 1, 8, 10**6):
        monkeypatch.setattr(_label_search, "_MAX_EXACT_PASSES", limit)
        calls.clear()
        _both(m.ravel(), noisy, 0.9, 3, 0.5)
        assert len(calls) <= limit + 1  # the refused call included
    assert calls  # the last run decided by exact counts


def test_fit_bisection_unchanged_by_the_counting():
    # search="bisection" counts in one pass per query instead of sorting:
    # the same queries and threshold as _debiased_coverage on the sort.
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(5), size=4000)
    labels = rng.integers(0, 5, 4000)
    cal = LDPLabelCalibrator(epsilon=2.0, search="bisection", score_bounds=(0, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal.fit(1 - p, labels=labels, alpha=0.1, random_state=0)
    sorted_all = np.sort((1 - p).ravel())
    lo, hi = 0.0, 1.0
    users = spawn_random_states(0, 2)[1]  # fit's users' stream, replayed
    noisy_labels = k_ary_randomized_response(
        labels, n_classes=5, epsilon=2.0, random_state=users
    )
    sorted_noisy = np.sort((1 - p)[np.arange(4000), noisy_labels])
    target, band = cal.target_coverage_, cal.correction_ / 2.0
    for _ in range(cal.n_steps_used_):
        query = (lo + hi) / 2.0
        estimate = _debiased_coverage(
            sorted_all, sorted_noisy, np.array([query]), cal.beta_, 5
        )[0]
        lo, hi, stop = _bisection_update(lo, hi, query, estimate, target, band)
    assert query == cal.threshold_
