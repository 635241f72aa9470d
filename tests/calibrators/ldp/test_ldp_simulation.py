"""The vectorised LDP-L / LDP-S simulations and the trusted server path.

``fit`` draws every simulated user's noise from one stream and hands the
clients' messages (stacked) to the same server path a deployment uses; these
tests check that the server path gives the same threshold on the stacked and
on the per-client messages, that the exact LDP-L search equals the search
over every distinct score, that stacked LDP-S answers are checked like
per-client ones, and (slow) that the simulated noise has the mechanism's law.
"""

import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from skfedcp.calibrators import (
    LDPLabelCalibrator,
    LDPScoreCalibrator,
    LDPScoreStarCalibrator,
)
from skfedcp.calibrators._ldp._label_search import _debiased_coverage, _first_covering
from skfedcp.exceptions import InvalidMessageError

ALPHA = 0.1


def _brute_force(matrix, noisy, beta, k, target):
    """The first distinct score of the matrix whose estimate reaches target."""
    n = matrix.shape[0]
    sorted_all = np.sort(matrix, axis=None)
    sorted_noisy = np.sort(matrix[np.arange(n), noisy])
    candidates = np.unique(sorted_all)
    coverage = _debiased_coverage(sorted_all, sorted_noisy, candidates, beta, k)
    hits = np.flatnonzero(coverage >= target)
    return float(candidates[hits[0]]) if hits.size else np.inf


def _matrix_data(sizes, k, seed):
    rng = np.random.default_rng(seed)
    n = int(np.sum(sizes))
    proba = rng.dirichlet(np.full(k, 0.5), size=n)
    labels = rng.integers(0, k, n)
    ids = np.repeat(np.arange(len(sizes)), sizes)
    perm = rng.permutation(n)  # rows arrive shuffled across clients
    return 1.0 - proba[perm], labels[perm], ids[perm]


class TestLabelSearch:
    @pytest.mark.parametrize("seed", range(40))
    def test_first_covering_equals_every_distinct_score(self, seed):
        # Few distinct values (many ties), infinities, any beta and target.
        rng = np.random.default_rng(seed)
        n, k = int(rng.integers(1, 40)), int(rng.integers(2, 6))
        levels = int(rng.integers(1, 10))
        matrix = rng.integers(0, levels + 1, size=(n, k)) / max(levels, 1)
        if seed % 4 == 0:
            matrix[rng.random((n, k)) < 0.15] = np.inf
        if seed % 4 == 1:
            matrix[rng.random((n, k)) < 0.15] = -np.inf
        noisy = rng.integers(0, k, n)
        beta = float(rng.uniform(0.01, 0.99))
        target = float(rng.choice([rng.uniform(0.0, 1.0), 1.0 - 1e-17, 0.0]))
        sorted_all = np.sort(matrix, axis=None)
        sorted_noisy = np.sort(matrix[np.arange(n), noisy])
        got = _first_covering(sorted_all, sorted_noisy, beta, k, target)
        assert got == _brute_force(matrix, noisy, beta, k, target)

    @pytest.mark.parametrize("sizes", [[40] * 6, [1, 70, 3, 0, 25, 40]])
    @pytest.mark.parametrize("search", ["exact", "bisection"])
    def test_fit_equals_the_server_on_per_client_messages(self, sizes, search):
        matrix, labels, ids = _matrix_data(sizes, 4, seed=len(sizes) + sum(sizes))
        cal = LDPLabelCalibrator(epsilon=2.0, search=search, score_bounds=(0, 1))
        fitted = clone(cal).fit(matrix, ids, labels=labels, alpha=ALPHA, random_state=7)
        present = np.unique(ids)
        messages = []
        for j, client in enumerate(fitted.clients_):
            rows = matrix[ids == client]
            # Each client's message holds its own rows, in their order.
            np.testing.assert_array_equal(fitted.messages_["scores"][j], rows)
            messages.append(
                {
                    "n": rows.shape[0],
                    "scores": rows,
                    "noisy_labels": np.asarray(fitted.messages_["noisy_labels"][j]),
                }
            )
        np.testing.assert_array_equal(fitted.clients_, present)
        server = clone(cal).fit_from_messages(
            messages,
            alpha=ALPHA,
            n_per_client=fitted.n_per_client_,
            clients=fitted.clients_,
            random_state=7,
        )
        assert server.threshold_ == fitted.threshold_
        assert server.n_steps_used_ == fitted.n_steps_used_
        assert server.correction_ == fitted.correction_

    def test_invalid_labels_are_still_refused(self):
        matrix, labels, ids = _matrix_data([30] * 3, 3, seed=0)
        with pytest.raises(ValueError, match="labels"):
            LDPLabelCalibrator().fit(matrix, ids, labels=labels + 3, alpha=ALPHA)


class TestStackedAnswers:
    def _state(self, sizes=(300, 0, 500, 200)):
        cal = LDPScoreCalibrator(epsilon=2.0, delta=0.2, score_bounds=(0, 1))
        state = cal.server_init(list(sizes), alpha=ALPHA, random_state=1)
        scores = np.random.default_rng(0).random(sum(sizes))
        starts = np.cumsum(sizes) - np.asarray(sizes)
        local = [scores[s : s + n] for s, n in zip(starts, sizes, strict=True)]
        return cal, state, local

    def _answers(self, cal, state, local):
        rng = np.random.RandomState(0)
        listed = [
            cal.client_respond(local[j], q, random_state=rng)
            if len(q["users"])
            else None
            for j, q in enumerate(state["queries"])
        ]
        queries = state["queries"]
        stacked = {
            "round": queries.round,
            "counts": queries.counts(),
            "users": queries.users,
            "reports": np.concatenate([m["reports"] for m in listed if m is not None]),
        }
        return listed, stacked

    def test_stacked_and_listed_answers_give_the_same_state(self):
        cal, state, local = self._state()
        listed, stacked = self._answers(cal, state, local)
        a, b = cal.server_update(state, listed), cal.server_update(state, stacked)
        assert a["history"] == b["history"] and (a["lo"], a["hi"]) == (b["lo"], b["hi"])

    @pytest.mark.parametrize(
        "change, field, client",
        [
            (lambda m, q: dict(m, round=m["round"] + 1), "round", None),
            (lambda m, q: {k: v for k, v in m.items() if k != "users"}, "users", None),
            (lambda m, q: dict(m, extra=1), "extra", None),
            (lambda m, q: dict(m, counts=m["counts"][:-1]), "counts", None),
            (lambda m, q: dict(m, counts=m["counts"] * 1.0), "counts", None),
            (lambda m, q: dict(m, users=m["users"][:-1]), "users", None),
            (lambda m, q: dict(m, reports=m["reports"][:-1]), "reports", None),
            (lambda m, q: dict(m, reports=m["reports"] * 0.5), "reports", None),
        ],
    )
    def test_malformed_stacked_answers(self, change, field, client):
        cal, state, local = self._state()
        _, stacked = self._answers(cal, state, local)
        with pytest.raises(InvalidMessageError) as info:
            cal.server_update(state, change(stacked, state["queries"]))
        assert info.value.field == field and info.value.client == client

    def test_errors_name_the_first_offending_client(self):
        cal, state, local = self._state()
        _, stacked = self._answers(cal, state, local)
        offsets = state["queries"].offsets
        last = len(offsets) - 2  # client 3 has asked users
        assert offsets[last + 1] > offsets[last]
        users = stacked["users"].copy()
        users[offsets[last]] = 200  # client 3 has users 0..199 only
        with pytest.raises(InvalidMessageError, match="client 3") as info:
            cal.server_update(state, dict(stacked, users=users))
        assert (info.value.client, info.value.field) == (3, "users")
        reports = stacked["reports"].copy()
        reports[offsets[2]] = 2
        with pytest.raises(InvalidMessageError, match="client 2") as info:
            cal.server_update(state, dict(stacked, reports=reports))
        assert (info.value.client, info.value.field) == (2, "reports")
        counts = stacked["counts"].copy()
        counts[[0, 2]] += [1, -1]
        with pytest.raises(InvalidMessageError, match="client 0") as info:
            cal.server_update(state, dict(stacked, counts=counts))
        assert (info.value.client, info.value.field) == (0, "users")

    @pytest.mark.parametrize("sizes", [[100] * 50, [1, 0, 250, 37, 900, 12]])
    def test_fit_ends_in_fit_from_messages(self, sizes):
        scores = np.random.default_rng(3).random(sum(sizes))
        ids = np.repeat(np.arange(len(sizes)), sizes)
        cal = LDPScoreCalibrator(epsilon=1.0, delta=0.2, score_bounds=(0, 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = clone(cal).fit(scores, ids, alpha=ALPHA, random_state=4)
        counts = fitted.messages_["n_reports"]
        assert counts.sum() == fitted.transcript_["user"].size
        assert [len(r) for r in fitted.messages_["reports"]] == counts.tolist()
        np.testing.assert_array_equal(
            np.bincount(
                np.searchsorted(fitted.clients_, fitted.transcript_["client"]),
                minlength=fitted.n_clients_,
            ),
            counts,
        )
        # Each asked user answers once; the transcript names real users.
        pairs = fitted.transcript_["client"] * 10**6 + fitted.transcript_["user"]
        assert np.unique(pairs).size == pairs.size
        code = np.searchsorted(fitted.clients_, fitted.transcript_["client"])
        assert (fitted.transcript_["user"] < fitted.n_per_client_[code]).all()


def _fitted_attributes(cal):
    return {k: v for k, v in vars(cal).items() if k.endswith("_")}


def _assert_same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, np.ndarray) and a.dtype == object:
        assert a.shape == b.shape
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert type(a) is type(b) and (a == b or (a != a and b != b))


@pytest.mark.parametrize("star", [False, True])
@pytest.mark.parametrize(
    "sizes", [[300] * 10, [1, 0, 2500, 37, 900, 12], [3000], "strings"]
)
@pytest.mark.parametrize("seed", [0, 5])
def test_fit_sets_what_the_replay_of_its_rounds_sets(star, sizes, seed):
    # fit sets the attributes from its live rounds (no replay); a server
    # replaying the same rounds with fit_from_messages must set the same.
    rng = np.random.default_rng(seed)
    if sizes == "strings":
        ids = np.array([f"c{i % 13}" for i in range(3000)])
        rng.shuffle(ids)
    else:
        ids = np.repeat(np.arange(len(sizes)), sizes)
    scores = rng.random(ids.shape[0])
    cls = LDPScoreStarCalibrator if star else LDPScoreCalibrator

    class Recording(cls):
        def server_update(self, state, messages):
            self.rounds.append(messages)
            return super().server_update(state, messages)

    cal = Recording(epsilon=4.0, delta=0.2, score_bounds=(0, 1))
    cal.rounds = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal.fit(scores, ids, alpha=ALPHA, random_state=seed)
        fitted = _fitted_attributes(cal)
        assert len(cal.rounds) == cal.n_steps_used_
        partition_sizes = cal.n_per_client_
        server = cls(epsilon=4.0, delta=0.2, score_bounds=(0, 1)).fit_from_messages(
            cal.rounds,
            alpha=ALPHA,
            n_per_client=partition_sizes,
            clients=cal.clients_,
            random_state=seed,
        )
    _assert_same(fitted, _fitted_attributes(server))


@pytest.mark.slow
class TestNoiseLaw:
    # 10,000 clients of 5 users; tolerances: 4.5 binomial standard errors
    # (two-sided false-alarm probability about 7e-6 per check).
    N_CLIENTS, ROWS = 10_000, 5

    def _within(self, hits, trials, p):
        se = math.sqrt(p * (1 - p) / trials)
        assert abs(hits / trials - p) <= 4.5 * se, (hits / trials, p, se)

    def test_krr_keep_rate_and_independence_across_clients(self):
        k, eps = 4, 1.0
        n = self.N_CLIENTS * self.ROWS
        rng = np.random.default_rng(0)
        labels = rng.integers(0, k, n)
        matrix = rng.random((n, k))
        ids = np.repeat(np.arange(self.N_CLIENTS), self.ROWS)
        fitted = LDPLabelCalibrator(epsilon=eps).fit(
            matrix, ids, labels=labels, alpha=ALPHA, random_state=5
        )
        noisy = np.asarray(fitted.messages_["noisy_labels"]).reshape(-1)
        kept = noisy == labels
        p = math.exp(eps) / (math.exp(eps) + k - 1)
        self._within(kept.sum(), n, p)
        # Last user of client j and first of client j + 1 (disjoint pairs):
        # both kept with probability p^2 if the clients' noise is independent.
        last, first = kept[self.ROWS - 1 :: self.ROWS][:-1], kept[:: self.ROWS][1:]
        pairs = slice(0, None, 2)
        both = (last[pairs] & first[pairs]).sum()
        self._within(both, last[pairs].size, p * p)

    def test_binary_rr_flip_rate(self):
        eps = 1.0
        n = self.N_CLIENTS * self.ROWS
        scores = np.zeros(n)  # every query is above 0: every true bit is 1
        ids = np.repeat(np.arange(self.N_CLIENTS), self.ROWS)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = LDPScoreCalibrator(epsilon=eps, score_bounds=(0, 1)).fit(
                scores, ids, alpha=ALPHA, random_state=6
            )
        reports = np.concatenate(list(fitted.messages_["reports"]))
        self._within((reports == 0).sum(), reports.size, 1 / (1 + math.exp(eps)))
