"""Simulated secure aggregation: fixed point, masks, dropout recovery."""

import math
from types import SimpleNamespace

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
from skfedcp.federated._fixed_point import fixed_point_plan
from skfedcp.federated._masked_sum import (
    _circulant_masked_sum,
    _masked_sum_simulation,
    _sum_rows,
)
from skfedcp.federated._secure_aggregation import _circulant_graph


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


def _draw_masking_case(data):
    """A random masked-sum case: clients, dropouts, graph and options.

    ``rows`` are the encoded vectors the simulation receives (the survivors'
    only, or everyone's), ``expected`` the ring sum of the survivors'.
    """
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
    return SimpleNamespace(
        n=n,
        graph=graph,
        seed=seed,
        surv=surv,
        rows=enc[surv] if survivors_only else enc,
        expected=_ring_sum(list(enc[surv])),
        options={
            "n_clients": n if survivors_only else None,
            "self_masks": self_masks,
            "max_words": words,
        },
    )


class TestBatchedSimulation:
    @settings(max_examples=60, deadline=None)
    @given(data=st.data())
    def test_bit_exact_with_any_dropout(self, data):
        case = _draw_masking_case(data)
        edges = secure_aggregation_graph(
            case.n, graph=case.graph, random_state=case.seed
        )
        z = _masked_sum_simulation(
            case.rows,
            case.surv,
            edges,
            np.random.default_rng(case.seed + 1),
            **case.options,
        )
        assert np.array_equal(z, case.expected)


# --------------------------------------------------------------------------
# The circulant simulation (what the estimators run) against the references:
# the previous edge-list construction, the incidence-matrix simulation and the
# protocol's definition of every message.


def _reference_edges(n, graph, seed):
    # The edge list as secure_aggregation_graph built it before graphs became
    # circulant layers (a Harary graph from a relabelled cycle, np.unique).
    k = min(2 * int(np.ceil(np.log2(max(n, 2)))), n - 1)
    if graph == "harary" and k < n - 1:
        label = np.random.default_rng(seed).permutation(n)
        a = np.repeat(np.arange(n), k // 2)
        b = (a + np.tile(np.arange(1, k // 2 + 1), n)) % n
        pairs = np.sort(np.column_stack([label[a], label[b]]), axis=1)
        return np.unique(pairs, axis=0).astype(np.intp)
    i, j = np.triu_indices(n, k=1)
    return np.column_stack([i, j]).astype(np.intp)


class TestCirculantSimulation:
    @pytest.mark.parametrize("graph", ["complete", "harary"])
    def test_graph_matches_the_reference_edge_list(self, graph):
        for n in range(1, 45):
            for seed in (0, 7):
                got = secure_aggregation_graph(n, graph=graph, random_state=seed)
                assert np.array_equal(got, _reference_edges(n, graph, seed))
        g = _circulant_graph(1000, graph="harary", random_state=3)
        assert np.array_equal(g.edges(), _reference_edges(1000, "harary", 3))

    @settings(max_examples=40, deadline=None)
    @given(data=st.data())
    def test_bit_exact_as_the_incidence_simulation(self, data):
        case = _draw_masking_case(data)
        fast = _masked_sum_simulation(
            case.rows,
            case.surv,
            _circulant_graph(case.n, graph=case.graph, random_state=case.seed),
            np.random.default_rng(case.seed + 1),
            **case.options,
        )
        reference = _masked_sum_simulation(
            case.rows,
            case.surv,
            secure_aggregation_graph(case.n, graph=case.graph, random_state=case.seed),
            np.random.default_rng(case.seed + 1),
            **case.options,
        )
        assert np.array_equal(fast, reference)
        assert np.array_equal(fast, case.expected)

    @pytest.mark.parametrize(
        "n, graph, n_drop",
        [
            (2, "complete", 0),
            (7, "complete", 2),
            (8, "complete", 3),
            (33, "harary", 0),
            (33, "harary", 9),
            (64, "harary", 5),
        ],
    )
    def test_messages_follow_the_protocol(self, n, graph, n_drop):
        # Every survivor's message is y_i = q_i + t_i + sum_{j > i} m_ij -
        # sum_{j < i} m_ij over its neighbours in the graph, each edge has
        # exactly one mask, and the server's total removes exactly the self
        # masks of survivors and the masks of survivor-dropped edges.
        rng = np.random.default_rng(n + n_drop)
        length = 23
        enc = rng.integers(0, 2**64, (n, length), dtype=np.uint64)
        surv = np.sort(rng.choice(n, n - n_drop, replace=False))
        graph_ = _circulant_graph(n, graph=graph, random_state=n)
        trace = []
        z = _circulant_masked_sum(
            enc,
            surv,
            graph_,
            np.random.default_rng(1),
            n_clients=n,
            self_masks=True,
            max_words=5 * n,  # several column chunks
            trace=trace,
        )
        label = graph_.label
        edges = {
            tuple(e) for e in secure_aggregation_graph(n, graph=graph, random_state=n)
        }
        y = np.empty((n, length), dtype=np.uint64)
        t = np.empty((n, length), dtype=np.uint64)
        masks = {}
        for c0, y_chunk, t_chunk, drawn in trace:
            w = y_chunk.shape[1]
            y[label, c0 : c0 + w] = y_chunk
            t[label, c0 : c0 + w] = t_chunk
            for s, d in drawn:
                for i in range(d.shape[0]):
                    a, b = int(label[i]), int(label[(i + s) % n])
                    m = d[i] if a < b else np.uint64(0) - d[i]
                    masks.setdefault((min(a, b), max(a, b)), []).append((c0, m))
        assert set(masks) == edges
        m_full = {}
        for e, parts in masks.items():
            assert sorted(c0 for c0, _ in parts) == sorted({c0 for c0, _ in parts})
            m_full[e] = np.concatenate(
                [m for _, m in sorted(parts, key=lambda p: p[0])]
            )
            assert m_full[e].shape == (length,)
        alive = np.zeros(n, dtype=bool)
        alive[surv] = True
        for i in surv:
            expect = enc[i] + t[i]
            for (a, b), m in m_full.items():
                if a == i:
                    expect += m
                elif b == i:
                    expect -= m
            assert np.array_equal(y[i], expect)
            assert not np.any(y[i] == enc[i])  # masked everywhere (w.p. ~1)
        server = _ring_sum(list(y[surv])) - _ring_sum(list(t[surv]))
        for (a, b), m in m_full.items():
            if alive[a] and not alive[b]:
                server -= m
            elif alive[b] and not alive[a]:
                server += m
        assert np.array_equal(server, z)
        assert np.array_equal(z, _ring_sum(list(enc[surv])))

    def test_masks_are_fresh_uniform_words(self):
        n, length = 50, 400
        trace = []
        _circulant_masked_sum(
            np.zeros((n, length), dtype=np.uint64),
            np.arange(n),
            _circulant_graph(n, graph="harary", random_state=0),
            np.random.default_rng(0),
            n_clients=n,
            self_masks=True,
            max_words=2000,
            trace=trace,
        )
        words = np.concatenate(
            [t.ravel() for _, _, t, _ in trace]
            + [d.ravel() for _, _, _, drawn in trace for _, d in drawn]
        )
        assert words.size == n * length * (1 + 6)  # self masks + k/2 = 6 layers
        # No word repeats (a collision of 2.4e5 uniform 64-bit words has
        # probability ~1.5e-9).
        assert np.unique(words).size == words.size
        # Each of the 64 bits is set with probability 1/2: the share of ones
        # lies within 5 binomial standard errors (sd = 0.5 / sqrt(N)) of 1/2.
        bits = (words[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
        share = bits.mean(axis=0)
        assert np.all(np.abs(share - 0.5) < 5 * 0.5 / np.sqrt(words.size))

    def test_sum_rows_is_the_ring_sum(self):
        rng = np.random.default_rng(0)
        for n in (1, 2, 63, 64, 65, 129, 1000, 1001):
            for w in (1, 3, 70):
                a = rng.integers(0, 2**64, (n, w), dtype=np.uint64)
                assert np.array_equal(_sum_rows(a), np.sum(a, axis=0, dtype=np.uint64))
