"""The default local_rank="paper" and the opt-in "auto" (issue 23, section 0)."""

import warnings

import numpy as np
import pytest

from skfedcp.calibrators import QuantileOfQuantilesCalibrator, select_qq_ranks

UNEQUAL = [5, 10, 20, 40, 15, 8, 30, 12]


def _fit(local_rank, sizes, alpha=0.1):
    ids = np.repeat(np.arange(len(sizes)), sizes)
    scores = np.random.default_rng(0).exponential(size=ids.size)
    kwargs = {} if local_rank is None else {"local_rank": local_rank}
    return QuantileOfQuantilesCalibrator(**kwargs).fit(scores, ids, alpha=alpha)


def test_default_is_a1_for_unequal_sizes():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        default = _fit(None, UNEQUAL)
    fixed = select_qq_ranks(UNEQUAL, 0.1, local_rank="fixed")
    assert default.calibration_info_["k"] == fixed.k
    assert tuple(default.calibration_info_["local_ranks"]) == fixed.local_ranks
    assert default.calibration_info_["coverage"] == fixed.coverage


@pytest.mark.parametrize("m,n,alpha", [(5, 10, 0.1), (5, 5, 0.1), (50, 20, 0.1)])
def test_default_is_eq6_for_equal_sizes(m, n, alpha):
    full = select_qq_ranks([n] * m, alpha, local_rank="auto")
    plan = QuantileOfQuantilesCalibrator().plan([n] * m, alpha)
    assert plan["k"] == full.k and tuple(plan["local_ranks"]) == full.local_ranks


def test_default_clips_when_a1_has_no_valid_k():
    # alpha = 0.01: every l_j = ceil(0.99 (n_j + 1)) > n_j below 99 rows, so
    # A.1 would send +inf from every client; the clipped ranks are valid.
    sizes = [60, 70, 80, 90]
    assert not select_qq_ranks(sizes, 0.01, local_rank="fixed").feasible
    plan = QuantileOfQuantilesCalibrator().plan(sizes, 0.01)
    clipped = select_qq_ranks(sizes, 0.01, local_rank="fixed", clip_local_rank=True)
    assert plan["feasible"] and plan["k"] == clipped.k
    assert plan["coverage"] >= 0.99 - 1e-10


def test_auto_warns_when_it_picks_an_extreme_k():
    sizes, hit = None, None
    rng = np.random.default_rng(3)
    for _ in range(200):  # a size profile where "auto" lands on k in {1, m}
        cand = rng.integers(5, 60, size=6).tolist()
        sel = select_qq_ranks(cand, 0.1, local_rank="auto")
        if sel.feasible and sel.k in (1, 6) and len(set(cand)) > 1:
            sizes, hit = cand, sel.k
            break
    assert sizes is not None
    with pytest.warns(UserWarning, match="local_rank='auto' chose k="):
        cal = _fit("auto", sizes)
    assert cal.calibration_info_["k"] == hit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fit(None, sizes)  # the default does not warn
        _fit("auto", [10] * 6)  # equal sizes: "auto" is eq. (6), no warning
