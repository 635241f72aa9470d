"""The shared privacy-parameter check: canonical values and named errors."""

import math

import numpy as np
import pytest

from skfedcp.privacy import PrivacyParams, check_privacy_params


class TestCheckPrivacyParams:
    def test_canonical_values(self):
        params = check_privacy_params(
            epsilon=np.float32(2), delta=0, bounds=(0, np.int64(3)), edges=[0, 1, 2]
        )
        assert isinstance(params, PrivacyParams)
        assert params.epsilon == 2.0 and isinstance(params.epsilon, float)
        assert params.delta == 0.0
        assert params.bounds == (0.0, 3.0)
        assert params.edges.dtype == np.float64
        assert check_privacy_params() == PrivacyParams(None, None, None, None)
        epsilon, delta, bounds, edges = check_privacy_params(epsilon=1)
        assert (epsilon, delta, bounds, edges) == (1.0, None, None, None)

    @pytest.mark.parametrize("epsilon", [0, -1.0, math.inf, -math.inf, math.nan])
    def test_bad_epsilon(self, epsilon):
        with pytest.raises(ValueError, match="epsilon"):
            check_privacy_params(epsilon=epsilon)

    @pytest.mark.parametrize("epsilon", ["1", True, [1.0], 1j])
    def test_epsilon_type(self, epsilon):
        with pytest.raises(TypeError, match="epsilon"):
            check_privacy_params(epsilon=epsilon)

    @pytest.mark.parametrize("delta", [-0.1, 1.0, 2.0, math.nan])
    def test_bad_delta(self, delta):
        with pytest.raises(ValueError, match="delta"):
            check_privacy_params(delta=delta)

    @pytest.mark.parametrize(
        "bounds", [(1, 0), (0, 0), (0, math.inf), (math.nan, 1), (-math.inf, 0)]
    )
    def test_bad_bounds(self, bounds):
        with pytest.raises(ValueError, match="bounds"):
            check_privacy_params(bounds=bounds)

    @pytest.mark.parametrize("bounds", [(0,), (0, 1, 2), 5, ("a", "b")])
    def test_bounds_type(self, bounds):
        with pytest.raises(TypeError, match="bounds"):
            check_privacy_params(bounds=bounds)

    @pytest.mark.parametrize(
        "edges", [[0], [0, 0], [1, 0, 2], [0, math.nan, 1], [0, 1, math.inf], [[0, 1]]]
    )
    def test_bad_edges(self, edges):
        with pytest.raises(ValueError, match="edges"):
            check_privacy_params(edges=edges)

    def test_edges_type(self):
        with pytest.raises(TypeError, match="edges"):
            check_privacy_params(edges=["a", "b"])

    def test_custom_names(self):
        with pytest.raises(ValueError, match="score_bounds"):
            check_privacy_params(bounds=(1, 0), names={"bounds": "score_bounds"})
        with pytest.raises(ValueError, match="eps_local"):
            check_privacy_params(epsilon=0, names={"epsilon": "eps_local"})
