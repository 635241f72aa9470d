"""Simulated secure aggregation: fixed point, masks, dropout recovery."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from skfedcp.exceptions import InvalidMessageError
from skfedcp.federated import (
    fixed_point_decode,
    fixed_point_encode,
    make_masking_setup,
    mask_input,
    secure_aggregation_graph,
    secure_sum,
    unmask_sum,
)
from skfedcp.federated._secure_aggregation import (
    _masked_sum_simulation,
    fixed_point_plan,
)


def _ring_sum(rows):
    return np.sum(np.stack(rows), axis=0, dtype=np.uint64)


class TestFixedPoint:
    @settings(max_examples=200, deadline=None)
    @given(
        x=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
        f=st.integers(min_value=0, max_value=40),
    )
    def test_round_trip_error_at_most_half_quantum(self, x, f):
        back = fixed_point_decode(fixed_point_encode(x, f), f)
        # The decode itself is exact here (|x| 2**f < 2**53).
        assert abs(float(back) - x) <= 2.0 ** (-f - 1)

    def test_wrapping_partial_sums_decode_exactly(self):
        f = 10
        big = 2.0**52  # x * 2**f = 2**62: two of them wrap past 2**63
        q = [fixed_point_encode(v, f) for v in (big, big, -big, -big + 3.5)]
        partial = q[0] + q[1]
        assert partial.view(np.int64) < 0  # the partial sum wrapped
        total = _ring_sum(q)
        assert fixed_point_decode(total, f) == 3.5

    def test_individual_values_beyond_int64_wrap_modulo_2_64(self):
        # 2**64 + 3 * 2**12 (a float64) is encoded as 3 * 2**12 (mod 2**64).
        q = fixed_point_encode(np.array([2.0**64 + 3 * 2.0**12, -(2.0**65)]), 0)
        assert q.tolist() == [3 * 2**12, 0]

    def test_frac_bits_broadcast(self):
        q = fixed_point_encode([[1.0, 1.0]], np.array([[4, 8]]))
        assert q.tolist() == [[16, 256]]

    def test_errors(self):
        with pytest.raises(ValueError, match="frac_bits"):
            fixed_point_encode([1.0], 63)
        with pytest.raises(ValueError, match="frac_bits"):
            fixed_point_encode([1.0], 1.5)
        with pytest.raises(ValueError, match="finite"):
            fixed_point_encode([np.nan], 3)
        with pytest.raises(TypeError, match="uint64"):
            fixed_point_decode(np.array([1]), 3)


class TestGraph:
    @pytest.mark.parametrize("n", [1, 2, 3, 10])
    def test_complete(self, n):
        edges = secure_aggregation_graph(n)
        assert edges.shape == (n * (n - 1) // 2, 2)
        assert np.all(edges[:, 0] < edges[:, 1])

    @pytest.mark.parametrize("n", [1, 2, 5, 9, 17, 50, 100])
    def test_harary_is_regular_with_log_degree(self, n):
        edges = secure_aggregation_graph(n, graph="harary", random_state=0)
        k = min(2 * int(np.ceil(np.log2(max(n, 2)))), n - 1)
        deg = np.bincount(edges.ravel(), minlength=n)
        assert np.all(deg == k)
        assert len({tuple(e) for e in edges}) == edges.shape[0]

    def test_harary_relabelling_depends_on_seed(self):
        a = secure_aggregation_graph(50, graph="harary", random_state=0)
        b = secure_aggregation_graph(50, graph="harary", random_state=1)
        assert not np.array_equal(a, b)

    def test_errors(self):
        with pytest.raises(ValueError, match="graph"):
            secure_aggregation_graph(3, graph="ring")
        with pytest.raises(ValueError, match="even"):
            secure_aggregation_graph(20, graph="harary", degree=5)
        with pytest.raises(ValueError, match="n_clients"):
            secure_aggregation_graph(0)
        with pytest.raises(TypeError, match="n_clients"):
            secure_aggregation_graph(2.5)


def _masked_round(values, dropped, graph, self_masks, seed):
    n = len(values)
    setup = make_masking_setup(n, graph=graph, self_masks=self_masks, random_state=seed)
    survivors = np.setdiff1d(np.arange(n), dropped)
    masked = [mask_input(values[i], i, setup) for i in survivors]
    return setup, masked, unmask_sum(masked, survivors, setup)


class TestMaskedSum:
    @settings(max_examples=60, deadline=None)
    @given(data=st.data())
    def test_bit_exact_with_any_dropout(self, data):
        n = data.draw(st.integers(2, 50), label="n_clients")
        length = data.draw(st.integers(1, 6), label="length")
        graph = data.draw(st.sampled_from(["complete", "harary"]), label="graph")
        self_masks = data.draw(st.booleans(), label="self_masks")
        n_drop = data.draw(st.integers(0, n - 1), label="n_dropped")
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        rng = np.random.default_rng(seed)
        values = [rng.integers(0, 2**64, length, dtype=np.uint64) for _ in range(n)]
        dropped = rng.choice(n, n_drop, replace=False)
        _, _, z = _masked_round(values, dropped, graph, self_masks, seed)
        survivors = np.setdiff1d(np.arange(n), dropped)
        assert np.array_equal(z, _ring_sum([values[i] for i in survivors]))

    @pytest.mark.parametrize("n", [2, 3, 10, 50])
    @pytest.mark.parametrize("graph", ["complete", "harary"])
    def test_spec_sizes_every_dropout_count(self, n, graph, seed):
        rng = np.random.default_rng(seed)
        values = [rng.integers(0, 2**64, 8, dtype=np.uint64) for _ in range(n)]
        for n_drop in sorted({0, 1, n // 2, n - 1}):
            dropped = rng.choice(n, n_drop, replace=False)
            _, _, z = _masked_round(values, dropped, graph, True, seed + n_drop)
            survivors = np.setdiff1d(np.arange(n), dropped)
            assert np.array_equal(z, _ring_sum([values[i] for i in survivors]))

    @pytest.mark.parametrize("graph", ["complete", "harary"])
    def test_masked_vectors_hide_inputs(self, graph, seed):
        rng = np.random.default_rng(seed)
        n = 12
        values = [rng.integers(0, 2**64, 50, dtype=np.uint64) for _ in range(n)]
        _, masked, _ = _masked_round(values, [], graph, False, seed)
        for q, y in zip(values, masked, strict=True):
            assert np.all(q != y)

    def test_masked_values_are_uniform(self, seed):
        # KS test of y / 2**64 on 10**4 coordinates of a constant input;
        # false-alarm rate 0.001.
        n = 10
        values = [np.zeros(1000, dtype=np.uint64) for _ in range(n)]
        _, masked, _ = _masked_round(values, [], "harary", False, seed)
        u = np.concatenate(masked).astype(np.float64) / 2.0**64
        assert stats.kstest(u, "uniform").pvalue > 0.001

    def test_slices_with_offset_equal_whole_vector(self, seed):
        rng = np.random.default_rng(seed)
        setup = make_masking_setup(5, graph="complete", random_state=seed)
        q = rng.integers(0, 2**64, 30, dtype=np.uint64)
        whole = mask_input(q, 2, setup)
        parts = [mask_input(q[:11], 2, setup), mask_input(q[11:], 2, setup, offset=11)]
        assert np.array_equal(whole, np.concatenate(parts))

    def test_errors(self):
        setup = make_masking_setup(3, random_state=0)
        q = np.zeros(2, dtype=np.uint64)
        with pytest.raises(TypeError, match="uint64"):
            mask_input(np.zeros(2), 0, setup)
        with pytest.raises(ValueError, match="client"):
            mask_input(q, 3, setup)
        with pytest.raises(ValueError, match="every client dropped"):
            unmask_sum([], [], setup)
        with pytest.raises(ValueError, match="masked vectors"):
            unmask_sum([q], [0, 1], setup)


class TestSecureSum:
    def test_equals_sum_of_integers(self, seed):
        rng = np.random.default_rng(seed)
        values = rng.integers(-(10**12), 10**12, size=(7, 3, 2))
        got = secure_sum(values, random_state=seed)
        assert got.dtype == np.int64
        assert np.array_equal(got, values.sum(axis=0))

    def test_floats_within_rounding(self, seed):
        rng = np.random.default_rng(seed)
        values = rng.normal(size=(20, 5))
        f = 30
        got = secure_sum(values, frac_bits=f, graph="harary", random_state=seed)
        assert np.all(np.abs(got - values.sum(axis=0)) <= 20 * 2.0 ** (-f - 1))

    def test_dropout_sums_survivors(self):
        got = secure_sum([[1], [10], [100], [1000]], dropped=[0, 2], random_state=0)
        assert got.tolist() == [1010]

    def test_result_does_not_depend_on_the_masks(self):
        values = np.arange(40).reshape(8, 5)
        a = secure_sum(values, random_state=0, graph="harary", dropped=[3])
        b = secure_sum(values, random_state=1, graph="complete", dropped=[3])
        assert np.array_equal(a, b)

    def test_errors(self):
        with pytest.raises(ValueError, match="every client"):
            secure_sum([[1], [2]], dropped=[0, 1])
        with pytest.raises(ValueError, match="dropped"):
            secure_sum([[1], [2]], dropped=[2])
        with pytest.raises(TypeError, match="integers"):
            secure_sum([[0.5], [1.0]])
        with pytest.raises(ValueError, match="same shape"):
            secure_sum([[1], [1, 2]])
        with pytest.raises(ValueError, match="empty"):
            secure_sum([])


class TestFixedPointPlan:
    @settings(max_examples=100, deadline=None)
    @given(data=st.data())
    def test_sums_within_the_bounds_never_wrap(self, data):
        n = data.draw(st.integers(1, 200), label="n_clients")
        exp = data.draw(st.integers(-10, 60 - n.bit_length()), label="log2 bound")
        cap = data.draw(st.integers(0, 52), label="max_frac_bits")
        bound = 2.0**exp
        plan = fixed_point_plan([bound], n_clients=n, max_frac_bits=cap)
        f = int(plan.frac_bits[0])
        assert n * bound * 2.0**f <= 2.0**62
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        x = np.random.default_rng(seed).uniform(-bound, bound, (n, 1))
        x[0, 0] = bound  # the extreme is allowed
        total = _ring_sum(list(plan.encode(x)))
        back = plan.decode(total)
        # Rounding: at most half a quantum per client, plus the float64 of the
        # decoded total; math.fsum is the correctly rounded reference.
        exact = math.fsum(x[:, 0])
        assert abs(back[0] - exact) <= n * 2.0 ** (-f - 1) + abs(exact) * 2.0**-52

    def test_most_bits_below_the_cap(self):
        plan = fixed_point_plan([1.0, 2.0**30, 0.0], n_clients=4, max_frac_bits=40)
        assert plan.frac_bits.tolist() == [40, 30, 40]

    def test_server_catches_a_client_beyond_its_bound(self):
        plan = fixed_point_plan([1.0, 1.0], n_clients=2)
        honest = plan.encode([1.0, -1.0])
        # A dishonest client encodes 5.0 without the client-side check.
        cheat = fixed_point_encode([5.0, 0.0], plan.frac_bits)
        with pytest.raises(InvalidMessageError, match="client 1") as info:
            plan.check_message(cheat, client=1, field="marginals")
        assert info.value.field == "marginals"
        with pytest.raises(InvalidMessageError, match="exceeds n_clients"):
            plan.decode(honest + cheat)
        assert plan.decode(honest + plan.encode([0.5, 0.5])).tolist() == [1.5, -0.5]


class TestBatchedSimulation:
    @settings(max_examples=60, deadline=None)
    @given(data=st.data())
    def test_bit_exact_with_any_dropout(self, data):
        n = data.draw(st.integers(1, 40), label="n_clients")
        length = data.draw(st.integers(1, 30), label="length")
        graph = data.draw(st.sampled_from(["complete", "harary"]), label="graph")
        self_masks = data.draw(st.booleans(), label="self_masks")
        n_drop = data.draw(st.integers(0, n - 1), label="n_dropped")
        words = data.draw(st.integers(1, 400), label="max_words")
        survivors_only = data.draw(st.booleans(), label="survivors_only")
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        rng = np.random.default_rng(seed)
        enc = rng.integers(0, 2**64, (n, length), dtype=np.uint64)
        surv = np.sort(rng.choice(n, n - n_drop, replace=False))
        edges = secure_aggregation_graph(n, graph=graph, random_state=seed)
        rows = enc[surv] if survivors_only else enc
        z = _masked_sum_simulation(
            rows,
            surv,
            edges,
            np.random.default_rng(seed + 1),
            n_clients=n if survivors_only else None,
            self_masks=self_masks,
            max_words=words,
        )
        assert np.array_equal(z, _ring_sum(list(enc[surv])))
