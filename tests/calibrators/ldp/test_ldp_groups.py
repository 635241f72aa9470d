"""LDP-S's public group assignment: its law, its cost, and the checks on it.

The server draws the counts of each client's users in each group (an exact
multivariate hypergeometric table, ``O(m T)``) and each client derives which
of its users are in each group from a public key; see
``skfedcp/calibrators/_ldp/_score_groups.py``.
"""

import itertools
import math
import tracemalloc
import warnings
from collections import Counter

import numpy as np
import pytest
from sklearn.base import clone

from skfedcp import config_context
from skfedcp.calibrators import LDPScoreCalibrator
from skfedcp.calibrators._ldp import _score_groups
from skfedcp.calibrators._ldp._score_groups import (
    _ClientStreams,
    client_groups,
    draw_group_counts,
    draw_key,
    public_groups,
)
from skfedcp.exceptions import InvalidMessageError
from skfedcp.utils._random import spawn_random_states

ALPHA = 0.1


def _exact_table_law(sizes, columns):
    """P(K) of the counts table of a uniform assignment, by enumeration.

    Every distinct labelling of the users (numbered client by client) with
    ``columns[g]`` users of label ``g`` is equally likely.
    """
    labels = np.repeat(np.arange(len(columns)), columns)
    owner = np.repeat(np.arange(len(sizes)), sizes)
    tables = Counter()
    for perm in set(itertools.permutations(labels.tolist())):
        table = np.zeros((len(sizes), len(columns)), dtype=np.int64)
        np.add.at(table, (owner, np.asarray(perm)), 1)
        tables[table.tobytes()] += 1
    total = sum(tables.values())
    return {k: v / total for k, v in tables.items()}


def _check_law(rng, sizes, columns, n_draws):
    law = _exact_table_law(sizes, columns)
    seen = Counter(
        draw_group_counts(rng, np.asarray(sizes), np.asarray(columns)).tobytes()
        for _ in range(n_draws)
    )
    assert set(seen) <= set(law)  # only tables with the right margins
    for table, p in law.items():
        # Monte Carlo with a fixed seed: each table's frequency within 5
        # standard errors sqrt(p (1 - p) / n_draws) of its exact probability
        # (a false alarm has probability below 1e-6 per table under the law).
        se = math.sqrt(p * (1 - p) / n_draws)
        assert abs(seen[table] / n_draws - p) <= 5 * se, (table, p)


class TestCountsLaw:
    @pytest.mark.parametrize(
        "sizes, columns",
        [([2, 1, 2], [2, 2, 1]), ([3, 0, 1, 2], [2, 2, 2]), ([4], [1, 1, 2])],
    )
    def test_the_table_has_the_law_of_a_uniform_assignment(self, sizes, columns):
        _check_law(np.random.default_rng(0), sizes, columns, 8_000)

    def test_the_law_holds_with_a_legacy_random_state(self):
        # RandomState's sampler needs nsample >= 1: degenerate entries are
        # set without a draw.
        _check_law(np.random.RandomState(0), [2, 1, 2], [2, 2, 1], 8_000)

    def test_the_law_holds_through_the_large_population_sampler(self, monkeypatch):
        # Populations above Generator's limit (10**9) go to the legacy
        # sampler; force that path on the small exact case.
        monkeypatch.setattr(_score_groups, "_HG_LIMIT", 1)
        _check_law(np.random.default_rng(1), [2, 1, 2], [2, 2, 1], 3_000)

    def test_large_populations_are_drawn(self):
        rng = np.random.default_rng(0)
        good, bad = np.array([1_500_000_000]), np.array([2_000_000_000])
        draws = np.concatenate(
            [
                _score_groups._hypergeometric(rng, good, bad, np.array([1000]))
                for _ in range(400)
            ]
        )
        p = 1.5 / 3.5
        # Mean of 400 draws within 5 SE of n p (variance below n p (1 - p)).
        assert abs(draws.mean() - 1000 * p) <= 5 * math.sqrt(1000 * p * (1 - p) / 400)

    def test_margins_for_many_clients(self):
        rng = np.random.default_rng(3)
        sizes = rng.integers(0, 50, size=10_000)
        sizes[::7] = 0
        n, t = int(sizes.sum()), 10
        columns = np.full(t + 1, n // t)
        columns[-1] = n - t * (n // t)
        counts = draw_group_counts(rng, sizes, columns)
        np.testing.assert_array_equal(counts.sum(axis=1), sizes)
        np.testing.assert_array_equal(counts.sum(axis=0), columns)
        assert counts.min() >= 0


class TestClientArrangement:
    def test_each_arrangement_is_equally_likely(self):
        # Given the counts [2, 1, 1], the 4!/(2! 1! 1!) = 12 arrangements of a
        # client's users are equally likely over the public key (5 SE).
        rng = np.random.default_rng(0)
        n_draws = 12_000
        seen = Counter(
            tuple(client_groups(draw_key(rng), 3, np.array([2, 1, 1])))
            for _ in range(n_draws)
        )
        assert len(seen) == 12
        p = 1 / 12
        se = math.sqrt(p * (1 - p) / n_draws)
        assert all(abs(v / n_draws - p) <= 5 * se for v in seen.values())

    def test_reused_stream_equals_a_fresh_philox(self):
        key = draw_key(np.random.default_rng(1))
        streams = _ClientStreams(key)
        for j in (0, 1, 7, 99_999):
            fresh = np.random.Generator(np.random.Philox(counter=[0, 0, 0, j], key=key))
            np.testing.assert_array_equal(
                streams.permutation(j, 50), fresh.permutation(50)
            )

    def test_public_groups_are_the_clients_own(self):
        rng = np.random.default_rng(2)
        sizes = np.array([5, 0, 12, 3])
        counts = draw_group_counts(rng, sizes, np.array([6, 6, 8]))
        key = draw_key(rng)
        every = public_groups(key, counts)
        starts = np.cumsum(sizes) - sizes
        for j, (s, n) in enumerate(zip(starts, sizes, strict=True)):
            np.testing.assert_array_equal(
                every[s : s + n], client_groups(key, j, counts[j])
            )
            for g in range(3):
                assert (every[s : s + n] == g).sum() == counts[j, g]

    @pytest.mark.parametrize("chunk", [7, 2**16])
    def test_public_groups_in_chunks_are_the_clients_own(self, monkeypatch, chunk):
        # Chunks cut anywhere (7 users) or hold many clients; one-group and
        # empty clients skip their shuffle, which changes no other draw.
        monkeypatch.setattr(_score_groups, "_CHUNK", chunk)
        rng = np.random.default_rng(4)
        sizes = rng.integers(0, 30, size=300)
        sizes[::5] = 1
        sizes[::11] = 0
        columns = np.array([800, 800, 800, int(sizes.sum()) - 2400])
        counts = draw_group_counts(rng, sizes, columns)
        assert (np.count_nonzero(counts, axis=1) == 1).sum() > 50
        key = draw_key(rng)
        every = public_groups(key, counts)
        own = [client_groups(key, j, row) for j, row in enumerate(counts)]
        np.testing.assert_array_equal(every, np.concatenate(own))
        assert public_groups(key, counts[:0]).shape == (0,)

    def test_queries_name_the_public_groups(self):
        cal = LDPScoreCalibrator(epsilon=2.0, delta=0.2, score_bounds=(0, 1))
        sizes = [300, 0, 500, 200]
        state = cal.server_init(sizes, alpha=ALPHA, random_state=1)
        every = public_groups(state["assignment_key"], state["group_counts"])
        starts = np.cumsum(sizes) - np.asarray(sizes)
        for j, q in enumerate(state["queries"]):
            users = q["users"]
            assert q["count"] == users.size == state["group_counts"][j, 0]
            assert (every[starts[j] + users] == 0).all()
            assert (np.diff(users) > 0).all()


class TestServerCost:
    @staticmethod
    def _peak(sizes):
        cal = LDPScoreCalibrator(epsilon=4.0, score_bounds=(0, 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tracemalloc.start()
            try:
                state = cal.server_init(sizes, alpha=ALPHA, random_state=0)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        held = sum(v.nbytes for v in state.values() if isinstance(v, np.ndarray))
        return peak, held

    def test_state_does_not_grow_with_the_announced_users(self):
        honest = [1000] * 9
        small_peak, small_held = self._peak([*honest, 1000])
        big_peak, big_held = self._peak([*honest, 9 * 10**7])
        assert big_held == small_held  # O(m T): the same arrays
        # The peak of server_init is the same up to a small constant (it was
        # 1.6 GB at 9 x 10^7 users when the assignment listed every user).
        assert big_peak <= 2 * small_peak + 64 * 1024

    def test_many_clients_cost_m_times_t(self):
        sizes = np.random.default_rng(0).integers(10, 1001, size=10**4)
        peak, held = self._peak(sizes)
        table = sizes.shape[0] * (10 + 1) * 8  # one (m, T + 1) int64 table
        assert held <= 2 * table
        # Every client 1,000 times larger (5 x 10^9 users: one byte per user
        # would be 5 GB): the same arrays and the same peak, up to a small
        # constant. Nothing the server builds grows with the users.
        with config_context(max_total_size=10**10):
            big_peak, big_held = self._peak(sizes * 1000)
        assert big_held == held
        assert big_peak <= peak + 64 * 1024
        # O(m T): the halving holds the counts, the level's node table and
        # its split (left, right, their concatenation) and the marginal
        # method's suffix sums and output: at most 6 tables at once.
        assert peak <= 6 * table


class TestAnswerChecks:
    def _run(self, rename=None):
        """Two clients' rounds; ``rename(round, msgs)`` may change the answers."""
        cal = LDPScoreCalibrator(epsilon=4.0, delta=0.2, score_bounds=(0, 1))
        scores = np.random.default_rng(0).uniform(size=2000)
        local = [scores[:1200], scores[1200:]]
        # fit_from_messages(random_state=3) replays server_init on stream 0.
        server = spawn_random_states(3, 1)[0]
        state = cal.server_init([1200, 800], alpha=ALPHA, random_state=server)
        rng = np.random.default_rng(1)
        rounds = []
        while not state["done"]:
            msgs = [
                cal.client_respond(local[j], q, random_state=rng)
                if q["count"]
                else None
                for j, q in enumerate(state["queries"])
            ]
            if rename is not None:
                msgs = rename(state["round"] + 1, msgs)
            state = cal.server_update(state, msgs)
            rounds.append(msgs)
        return cal, rounds

    def test_named_users_are_checked_against_the_public_groups_on_replay(self):
        def other_users(round_, msgs):
            if round_ == 2:  # client 1 names users outside its asked group
                m = msgs[1]
                others = np.setdiff1d(np.arange(800), m["users"])[: m["users"].size]
                msgs = [msgs[0], dict(m, users=others)]
            return msgs

        cal, honest = self._run()
        clone(cal).fit_from_messages(
            honest, alpha=ALPHA, n_per_client=[1200, 800], random_state=3
        )
        # The live rounds check counts, ranges and repeats only (work in
        # proportion to the answers); the replay checks the named users.
        cal, rounds = self._run(other_users)
        with pytest.raises(InvalidMessageError, match="round 2") as info:
            clone(cal).fit_from_messages(
                rounds, alpha=ALPHA, n_per_client=[1200, 800], random_state=3
            )
        assert (info.value.client, info.value.field) == (1, "users")

    @pytest.mark.parametrize(
        "change",
        [
            lambda u: np.where(np.arange(u.size) == 0, 800, u),  # not a user
            lambda u: np.where(np.arange(u.size) == 0, u[-1], u),  # named twice
            lambda u: u[:-1],  # one missing
        ],
    )
    def test_live_rounds_refuse_impossible_users(self, change):
        def bad(round_, msgs):
            m = msgs[1]
            users = change(m["users"])
            return [msgs[0], dict(m, users=users, reports=m["reports"][: users.size])]

        with pytest.raises(InvalidMessageError, match="client 1") as info:
            self._run(bad)
        assert info.value.field == "users"

    def test_a_refused_announcement_names_the_client_label(self):
        # server_init refuses client 2 (above the share cap) by its index; fit
        # and fit_from_messages, which know the labels, name it by its label.
        cal = LDPScoreCalibrator(epsilon=4.0, score_bounds=(0, 1), max_client_share=0.5)
        sizes, labels = [100, 100, 1000, 500], np.array(["a", "b", "c", "d"])
        with pytest.raises(InvalidMessageError, match="from client 2: field 'n'"):
            clone(cal).server_init(sizes, alpha=ALPHA, random_state=0)
        with pytest.raises(
            InvalidMessageError, match="from client 'c': field 'n'"
        ) as info:
            clone(cal).fit_from_messages(
                [], alpha=ALPHA, n_per_client=sizes, clients=labels, random_state=0
            )
        assert (info.value.client, info.value.field) == ("c", "n")
        scores = np.random.default_rng(0).uniform(size=sum(sizes))
        with pytest.raises(
            InvalidMessageError, match="from client 'c': field 'n'"
        ) as info:
            clone(cal).fit(
                scores, np.repeat(labels, sizes), alpha=ALPHA, random_state=0
            )
        assert (info.value.client, info.value.field) == ("c", "n")
