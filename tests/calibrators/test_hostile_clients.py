"""What dishonest clients can do to the threshold (issue 11, threat model).

Property-based: honest clients send what their client step would send, ``c``
colluders send *anything the server accepts* (hypothesis draws the values,
including huge finite ones and ``+inf`` where the plan allows it), and the
threshold must stay within the stated bound:

* QQ: between the ``(k - c)``-th and the ``k``-th smallest honest value, i.e.
  at most ``c`` ranks of the honest values away from where the honest
  clients alone would put it;
* DP-QQ: the same rank bound on the honest releases, and always on the
  announced grid (a bin edge of the public score range) or ``+inf``;
* Avg: no bound (one client moves the mean anywhere); tested to document it.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skfedcp.calibrators import (
    AveragingCalibrator,
    PrivateQuantileOfQuantilesCalibrator,
    QuantileOfQuantilesCalibrator,
)
from skfedcp.exceptions import InvalidMessageError, InvalidMessageWarning

M, N, ALPHA = 20, 30, 0.1
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
hostile_value = st.one_of(finite, st.sampled_from([-1e308, 1e308, 0.0, -0.0, 5e-324]))


def _honest_qq_messages(rng, cal):
    scores = rng.exponential(size=(M, N))
    return [cal.client_step(s, alpha=ALPHA, n_per_client=[N] * M) for s in scores]


def _rank_window(honest, k, c):
    """``(h_(k-c), h_(k))`` of the sorted honest values (``-inf``/``+inf`` past
    the ends)."""
    h = np.sort(honest)
    low = h[k - c - 1] if k - c >= 1 else -np.inf
    high = h[k - 1] if k <= h.size else np.inf
    return low, high


class TestQQ:
    @pytest.mark.parametrize("c", [1, 2, 3])
    @SETTINGS
    @given(data=st.data(), seed=st.integers(0, 2**32 - 1))
    def test_c_colluders_move_at_most_c_ranks(self, c, data, seed):
        cal = QuantileOfQuantilesCalibrator()
        plan = cal.plan([N] * M, ALPHA)
        assert plan["local_ranks"][0] <= N  # every client sends a finite value
        rng = np.random.default_rng(seed)
        messages = _honest_qq_messages(rng, cal)
        liars = rng.choice(M, size=c, replace=False)
        for j in liars:
            messages[j] = {"n": N, "quantile": data.draw(hostile_value)}
        honest = np.array(
            [m["quantile"] for j, m in enumerate(messages) if j not in liars]
        )
        threshold = cal.server_step(messages, alpha=ALPHA, n_per_client=[N] * M)
        k = plan["k"]
        # The honest clients' values among all m sit at ranks that c extra
        # values shift by at most c.
        low, high = _rank_window(honest, k, c)
        assert low <= threshold <= high
        # ... and a rank displacement of at most c honest ranks.
        rank = np.searchsorted(np.sort(honest), threshold, side="right")
        assert abs(rank - k) <= c or not np.isin(threshold, honest)

    @SETTINGS
    @given(value=st.one_of(st.just(np.nan), st.just(-np.inf), st.none(), st.text()))
    def test_non_numbers_never_reach_the_threshold(self, value):
        cal = QuantileOfQuantilesCalibrator()
        messages = _honest_qq_messages(np.random.default_rng(0), cal)
        messages[3] = {"n": N, "quantile": value}
        with pytest.raises(InvalidMessageError) as info:
            cal.server_step(messages, alpha=ALPHA, n_per_client=[N] * M)
        assert info.value.client == 3 and info.value.field == "quantile"
        with pytest.warns(InvalidMessageWarning, match="client 3"):
            fitted = cal.fit_from_messages(
                messages, alpha=ALPHA, n_per_client=[N] * M, on_invalid="exclude"
            )
        assert np.isfinite(fitted.threshold_) or fitted.threshold_ == np.inf
        assert fitted.excluded_clients_.tolist() == [3]


class TestDPQQ:
    @pytest.mark.parametrize("c", [1, 2])
    @SETTINGS
    @given(data=st.data(), seed=st.integers(0, 2**32 - 1))
    def test_colluders_stay_on_the_grid_and_within_c_ranks(self, c, data, seed):
        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=5.0, score_bounds=(0, 1), n_bins=50
        )
        sizes = [200] * 10
        plan = cal.plan(sizes, ALPHA)
        rng = np.random.default_rng(seed)
        streams = rng.spawn(10)
        messages = [
            cal.client_step(
                rng.uniform(size=200), alpha=ALPHA, n_per_client=sizes, random_state=r
            )
            for r in streams
        ]
        edges = np.linspace(0, 1, plan["n_bins"] + 1)
        grid = np.r_[edges[1:-1], np.inf]
        liars = rng.choice(10, size=c, replace=False)
        for j in liars:
            messages[j] = {
                "n": 200,
                "quantile": float(data.draw(st.sampled_from(grid))),
            }
        honest = np.array(
            [m["quantile"] for j, m in enumerate(messages) if j not in liars]
        )
        threshold = cal.server_step(messages, alpha=ALPHA, n_per_client=sizes)
        assert threshold in grid  # bounded by the public score range (or +inf)
        low, high = _rank_window(honest, plan["k"], c)
        assert low <= threshold <= high

    @SETTINGS
    @given(value=st.one_of(finite, st.just(np.nan), st.just(-np.inf)))
    def test_values_off_the_grid_are_refused(self, value):
        cal = PrivateQuantileOfQuantilesCalibrator(
            epsilon=5.0, score_bounds=(0, 1), n_bins=50
        )
        edges = np.linspace(0, 1, 51)
        if value in edges[1:-1]:
            return
        sizes = [200] * 5
        messages = [{"n": 200, "quantile": float(edges[40])} for _ in sizes]
        messages[2] = {"n": 200, "quantile": value}
        with pytest.raises(InvalidMessageError, match="client 2"):
            cal.server_step(messages, alpha=ALPHA, n_per_client=sizes)


class TestAveraging:
    def test_one_client_moves_the_mean_anywhere(self):
        # Documented: Avg has no robustness; valid numbers still pass.
        cal = AveragingCalibrator()
        messages = [{"n": N, "quantile": 1.0} for _ in range(M)]
        messages[0] = {"n": N, "quantile": 1e308}
        threshold = cal.server_step(messages, alpha=ALPHA, n_per_client=[N] * M)
        assert threshold > 1e306 and np.isfinite(threshold)

    @pytest.mark.parametrize("value", [np.nan, -np.inf, np.inf, None, "1.0"])
    def test_non_numbers_and_unannounced_inf_are_refused(self, value):
        cal = AveragingCalibrator()
        messages = [{"n": N, "quantile": 1.0} for _ in range(M)]
        messages[4] = {"n": N, "quantile": value}
        with pytest.raises(InvalidMessageError, match="client 4.*'quantile'"):
            cal.server_step(messages, alpha=ALPHA, n_per_client=[N] * M)
