"""Corrected level q~, optimal gamma, number of bins, and the FedCP²-QQ l_cor."""

import math

import numpy as np
import pytest

from skfedcp.privacy import (
    dp_qq_local_correction,
    private_conformal_gamma,
    private_conformal_level,
    private_conformal_n_bins,
)


def _closed_form(n, alpha, epsilon, m, gamma):
    """Eq. (3) of Angelopoulos et al., written out independently."""
    return (n + 1) * (1 - alpha) / (n * (1 - gamma * alpha)) + 2 / (
        epsilon * n
    ) * math.log(m / (gamma * alpha))


class TestLevel:
    # Reference values of private_prediction_sets.md, section 6 (U1).
    @pytest.mark.parametrize(
        ("n", "alpha", "epsilon", "m", "gamma", "expected"),
        [
            (1000, 0.1, 1, 1000, 0.01, 0.929433),
            (1000, 0.1, 1, 1000, "auto", 0.928940),
            (5000, 0.1, 8, 2442, "auto", 0.901110),
            (30000, 0.1, 5, 10000, "auto", 0.900314),
            (1000, 0.05, 2, 500, "auto", 0.965023),
            (200, 0.1, 1, 100, "auto", 1.005709),
        ],
    )
    def test_reference_values(self, n, alpha, epsilon, m, gamma, expected):
        level = private_conformal_level(
            n, alpha, epsilon=epsilon, n_bins=m, gamma=gamma
        )
        assert level == pytest.approx(expected, rel=1e-6)

    def test_closed_form_and_lower_bound(self, seed):
        rng = np.random.default_rng(seed)
        for _ in range(100):
            n, m = int(rng.integers(1, 10**5)), int(rng.integers(2, 10**5))
            alpha, eps, gamma = (
                rng.uniform(0.01, 0.5),
                rng.uniform(0.1, 20),
                rng.uniform(1e-6, 0.99),
            )
            level = private_conformal_level(
                n, alpha, epsilon=eps, n_bins=m, gamma=gamma
            )
            assert level == pytest.approx(
                _closed_form(n, alpha, eps, m, gamma), rel=1e-12
            )
            assert level >= (n + 1) * (1 - alpha) / n >= 1 - alpha

    def test_no_data(self):
        assert private_conformal_level(0, 0.1, epsilon=1, n_bins=10) == math.inf

    def test_decreases_in_n_and_epsilon(self):
        levels_n = [
            private_conformal_level(n, 0.1, epsilon=2, n_bins=500)
            for n in (100, 500, 1000, 5000, 20000)
        ]
        levels_eps = [
            private_conformal_level(2000, 0.1, epsilon=e, n_bins=500)
            for e in (0.5, 1, 2, 5, 10)
        ]
        assert np.all(np.diff(levels_n) < 0) and np.all(np.diff(levels_eps) < 0)

    def test_bad_inputs(self):
        with pytest.raises(ValueError, match="alpha"):
            private_conformal_level(100, 0.6, epsilon=1, n_bins=10)
        with pytest.raises(ValueError, match="epsilon"):
            private_conformal_level(100, 0.1, epsilon=-1, n_bins=10)
        with pytest.raises(ValueError, match="n_bins"):
            private_conformal_level(100, 0.1, epsilon=1, n_bins=1)
        for gamma in (0, 1, -0.5, 1.5):
            with pytest.raises(ValueError, match="gamma"):
                private_conformal_level(100, 0.1, epsilon=1, n_bins=10, gamma=gamma)
        with pytest.raises(TypeError, match="gamma"):
            private_conformal_level(100, 0.1, epsilon=1, n_bins=10, gamma="best")
        with pytest.raises(ValueError, match="n "):
            private_conformal_level(-1, 0.1, epsilon=1, n_bins=10)


class TestGamma:
    # U2 of private_prediction_sets.md.
    @pytest.mark.parametrize(
        ("n", "alpha", "epsilon", "expected"),
        [
            (1000, 0.1, 1, 2.210200e-2),
            (5000, 0.1, 8, 5.553828e-4),
            (30000, 0.1, 5, 1.481388e-4),
            (1000, 0.05, 2, 2.098748e-2),
        ],
    )
    def test_reference_values(self, n, alpha, epsilon, expected):
        gamma = private_conformal_gamma(n, alpha, epsilon=epsilon)
        assert gamma == pytest.approx(expected, rel=1e-6)

    @pytest.mark.parametrize(
        ("n", "alpha", "epsilon"), [(1000, 0.1, 1), (300, 0.2, 3), (5000, 0.05, 0.5)]
    )
    def test_minimises_the_level(self, n, alpha, epsilon):
        gamma = private_conformal_gamma(n, alpha, epsilon=epsilon)

        def level(g):
            return _closed_form(n, alpha, epsilon, 100, g)

        h = 1e-6 * gamma
        derivative = (level(gamma + h) - level(gamma - h)) / (2 * h)
        assert abs(derivative) < 1e-4
        grid = np.linspace(1e-5, 0.999, 200_001)
        argmin = grid[np.argmin([level(g) for g in grid])]
        assert abs(argmin - gamma) < 1e-5

    def test_fallback_when_no_root_below_one(self):
        assert private_conformal_gamma(50, 0.1, epsilon=0.1) == 1e-12

    def test_does_not_depend_on_bins(self):
        # gamma has no n_bins argument; the level at gamma* beats nearby gammas
        # for every number of bins.
        gamma = private_conformal_gamma(1000, 0.1, epsilon=1)
        for m in (100, 10_000):
            best = private_conformal_level(1000, 0.1, epsilon=1, n_bins=m, gamma=gamma)
            for g in (gamma * 0.9, gamma * 1.1):
                worse = private_conformal_level(1000, 0.1, epsilon=1, n_bins=m, gamma=g)
                assert best < worse


class TestNumberOfBins:
    # Observed values of private_prediction_sets.md, Alg. E (deterministic).
    @pytest.mark.parametrize(
        ("n", "epsilon", "m", "level"),
        [(1000, 1, 120, 0.9247), (1000, 10, 449, 0.9040), (5000, 8, 790, 0.9011)],
    )
    def test_reference_values(self, n, epsilon, m, level):
        m_star = private_conformal_n_bins(n, 0.1, epsilon=epsilon)
        assert m_star == m
        got = private_conformal_level(n, 0.1, epsilon=epsilon, n_bins=m_star)
        assert got == pytest.approx(level, abs=5e-5)

    def test_trivial_everywhere_takes_smallest(self):
        # n = 20, eps = 0.1: q~ >= 1 for every m, all ties -> smallest m.
        assert private_conformal_n_bins(20, 0.1, epsilon=0.1, grid=[300, 200]) == 200

    def test_custom_grid_and_paper_strategy(self):
        m = private_conformal_n_bins(1000, 0.1, epsilon=5, grid=[100, 1000, 10_000])
        assert m in (100, 1000, 10_000)
        kwargs = {"epsilon": 1, "strategy": "paper", "grid": [100, 200, 400, 800]}
        a = private_conformal_n_bins(1000, 0.1, random_state=3, **kwargs)
        b = private_conformal_n_bins(1000, 0.1, random_state=3, **kwargs)
        assert a == b and a in (100, 200, 400, 800)
        c = private_conformal_n_bins(
            1000, 0.1, random_state=np.random.default_rng(3), **kwargs
        )
        assert c in (100, 200, 400, 800)

    def test_bad_inputs(self):
        with pytest.raises(ValueError, match="strategy"):
            private_conformal_n_bins(100, 0.1, epsilon=1, strategy="best")
        with pytest.raises(ValueError, match="grid"):
            private_conformal_n_bins(100, 0.1, epsilon=1, grid=[1, 100])
        with pytest.raises(ValueError, match="grid"):
            private_conformal_n_bins(100, 0.1, epsilon=1, grid=[])


class TestLocalCorrection:
    # fedcp_qq.md section 6, test 11, and the DP table of section 7.
    @pytest.mark.parametrize(
        ("args", "expected"),
        [
            ((10, 100, 0.02, 0.1, 5), 3),
            ((5, 100, 0.02, 0.1, 5), 5),
            ((1, 100, 0.06, 0.1, 5), 23),
        ],
    )
    def test_reference_values(self, args, expected):
        assert dp_qq_local_correction(*args) == expected

    def test_closed_form(self, seed):
        rng = np.random.default_rng(seed)
        for _ in range(200):
            eps, b = rng.uniform(0.1, 20), int(rng.integers(2, 10_000))
            gamma, alpha, m = (
                rng.uniform(0.01, 0.99),
                rng.uniform(0.01, 0.5),
                int(rng.integers(1, 200)),
            )
            delta = 1 - (1 - gamma * alpha) ** (1 / m)
            raw = 2 / eps * math.log(b / delta)
            got = dp_qq_local_correction(
                epsilon=eps, n_bins=b, gamma=gamma, alpha=alpha, n_clients=m
            )
            assert got == math.ceil(raw) or abs(raw - round(raw)) < 1e-8

    def test_one_client(self):
        # m = 1: delta_gamma = gamma alpha.
        raw = 2 / 2.0 * math.log(100 / (0.05 * 0.1))
        assert dp_qq_local_correction(2.0, 100, 0.05, 0.1, 1) == math.ceil(raw)

    def test_bad_inputs(self):
        with pytest.raises(ValueError, match="epsilon"):
            dp_qq_local_correction(0, 100, 0.02, 0.1, 5)
        with pytest.raises(ValueError, match="n_bins"):
            dp_qq_local_correction(1, 1, 0.02, 0.1, 5)
        with pytest.raises(ValueError, match="gamma"):
            dp_qq_local_correction(1, 100, 1.0, 0.1, 5)
        with pytest.raises(ValueError, match="alpha"):
            dp_qq_local_correction(1, 100, 0.02, 1.0, 5)
        with pytest.raises(ValueError, match="n_clients"):
            dp_qq_local_correction(1, 100, 0.02, 0.1, 0)
