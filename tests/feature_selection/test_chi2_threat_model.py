"""FED-chi2 under dishonest clients (issue 22): the audit's cases, refused or bounded.

What a client announces (its size, the bounds of its totals, the shape of
its message) and what the secure sums carry are checked against the public
plan: the class count and the feature count are fixed by the server, sizes
and bounds by public maxima, and the decoded sums by what honest clients
can produce.
"""

import warnings

import numpy as np
import pytest
from scipy import special

from skfedcp.exceptions import InvalidMessageError, InvalidMessageWarning
from skfedcp.feature_selection import (
    Chi2Marginals,
    FedChi2Selector,
    chi2_client_encode,
    chi2_client_marginals,
    chi2_frac_bits,
    chi2_server_decode,
    chi2_server_marginals,
    chi2_server_plan,
)
from skfedcp.feature_selection._chi2 import FedChi2Selector as _Selector
from skfedcp.feature_selection._ranges import _marginals_bound, _sketch_limits

RNG = np.random.default_rng(0)
N = 2000
Y = RNG.integers(0, 3, N)
# Feature 0 depends on the class, features 1-5 are noise.
X = np.column_stack([RNG.poisson(3 + 3 * Y), RNG.poisson(3, (N, 5))]).astype(float)
IDS = np.arange(N) % 5
ELL = 50


def _fit_with_round_two_shift(monkeypatch, shift, feature):
    """Fit where one node adds ``shift`` to its masked sketch of ``feature``."""
    original = _Selector._secure_total
    calls = []

    def hostile(self, enc, survivors, n_clients, edges, rng):
        total = original(self, enc, survivors, n_clients, edges, rng)
        calls.append(None)
        if len(calls) >= 2:  # round two (one block: every feature)
            total = total.copy()
            total[feature * ELL : (feature + 1) * ELL] += np.uint64(shift)
        return total

    monkeypatch.setattr(_Selector, "_secure_total", hostile)
    return FedChi2Selector(k=1, random_state=0, secure_agg="none").fit(
        X, Y, client_ids=IDS
    )


def _honest_round(classes=(0, 1, 2)):
    parts = [
        chi2_client_marginals(X[IDS == c], Y[IDS == c], classes=classes)
        for c in range(5)
    ]
    marginals = chi2_server_marginals(
        np.sum(parts, axis=0), n_classes=3, n_features=6, n_samples=N
    )
    sketch = sum(
        chi2_client_encode(X[IDS == c], Y[IDS == c], marginals, classes=classes, seed=7)
        for c in range(5)
    )
    return parts, marginals, sketch


# -- round two: the masked sketch --------------------------------------------


def test_honest_fit_selects_the_informative_feature():
    sel = FedChi2Selector(k=1, random_state=0).fit(X, Y, client_ids=IDS)
    assert sel.get_support().tolist() == [True] + [False] * 5


@pytest.mark.parametrize("shift", [2**61, 2**60])
def test_shifted_masked_sketch_is_refused_naming_the_feature(monkeypatch, shift):
    # Audit: adding 2**61 to one node's masked sketch made a noise feature the
    # top one (score 415,412). The sum is out of what honest clients produce.
    with pytest.raises(InvalidMessageError, match="feature 3") as info:
        _fit_with_round_two_shift(monkeypatch, shift, feature=3)
    assert info.value.client is None
    assert info.value.field == "sketch"
    assert "refused as a whole" in str(info.value)


def test_decode_refuses_a_coordinate_beyond_eight_sigma():
    _, marginals, sketch = _honest_round()
    coordinate, _, _ = _sketch_limits(marginals, ELL)
    chi2_server_decode(sketch, marginals)  # honest: accepted
    hostile = sketch.copy()
    hostile[7, 2] = 1.01 * coordinate[2]
    with pytest.raises(InvalidMessageError, match="coordinate 7 of feature 2"):
        chi2_server_decode(hostile, marginals)


def test_decode_refuses_a_norm_no_honest_sum_reaches():
    _, marginals, sketch = _honest_round()
    coordinate, norm, _ = _sketch_limits(marginals, ELL)
    hostile = sketch.copy()
    # Every coordinate within 8 sigma, the norm beyond the 1e-15 quantile.
    hostile[:, 4] = 0.9 * coordinate[4]
    assert np.sum(hostile[:, 4] ** 2) > norm[4]
    with pytest.raises(InvalidMessageError, match="squared norm of feature 4"):
        chi2_server_decode(hostile, marginals)


@pytest.mark.parametrize(
    ("estimator", "factor"), [("mean_square", 1.0), ("geometric", 3.4), ("median", 2.2)]
)
def test_what_passes_the_check_is_bounded_in_public_numbers(estimator, factor):
    # A dishonest node can still move a score inside the checked range: at
    # most H_j chdtri(l, 1.2e-15) / l times the estimator's factor (1 for the
    # mean square; the others at equal coordinates, their largest for a given
    # norm), H_j = B_j + 2 F_j from the public marginals.
    _, marginals, sketch = _honest_round()
    _, norm, honest = _sketch_limits(marginals, ELL)
    worst = sketch.copy()
    worst[:, 1:] = np.sqrt(0.999 * norm[1:] / ELL)
    scores = chi2_server_decode(worst, marginals, estimator=estimator).scores
    bound = honest[1:] * special.chdtri(ELL, 1.2e-15) / ELL
    assert np.all(scores[1:] <= factor * bound)
    assert np.all(scores[1:] >= 0.5 * factor * bound)


def test_dropout_and_a_statistic_at_its_bound_are_never_refused():
    # Feature 0 lives only in the smallest class: its statistic equals the
    # public bound B_0; with dropout the survivors' residuals may exceed it
    # (up to B + 2F), still inside the check.
    y = np.repeat([0, 1, 2], [100, 300, 400])
    x = np.column_stack([np.where(y == 0, 5.0, 0.0), np.ones(800)])
    ids = np.arange(800) % 8
    for seed in range(20):
        FedChi2Selector(k=1, random_state=seed, dropout=0.5).fit(x, y, client_ids=ids)
        FedChi2Selector(k=1, random_state=seed).fit(x, y, client_ids=ids)


# -- round one: the marginals --------------------------------------------------


def test_inflated_round_one_total_is_refused_by_the_public_value_bound():
    # Audit: a round-one total x50 moved a score from 3,166 to 26,294.
    parts, _, _ = _honest_round()
    total = np.sum(parts, axis=0)
    top = float(X.max())
    chi2_server_marginals(total, n_classes=3, n_features=6, n_samples=N, max_value=top)
    total[3] *= 50
    with pytest.raises(InvalidMessageError, match="total of feature 0") as info:
        chi2_server_marginals(
            total, n_classes=3, n_features=6, n_samples=N, max_value=top
        )
    assert info.value.field == "row_totals"


def test_inflated_announced_bound_is_refused_before_the_round():
    parts, _, _ = _honest_round()
    sizes = [int(np.sum(IDS == c)) for c in range(5)]
    bounds = [_marginals_bound(p[3:]) for p in parts]
    honest = chi2_server_plan(
        sizes, bounds, n_classes=3, n_features=6, max_value=X.max(), integer_x=True
    )
    assert honest.kept.tolist() == [0, 1, 2, 3, 4]
    bounds[2] = bounds[2] * 64  # to carry a total x50
    with pytest.raises(InvalidMessageError, match="client 2: field 'bound'") as info:
        chi2_server_plan(
            sizes, bounds, n_classes=3, n_features=6, max_value=X.max(), integer_x=True
        )
    assert info.value.client == 2


def test_twenty_thousand_classes_are_refused_by_the_public_class_count():
    # Audit: a node reporting 20,000 classes was accepted and changed the
    # selection. The class count is public; a total of another shape is not
    # a vote.
    total = np.concatenate([np.ones(20_000), np.ones(6)])
    with pytest.raises(InvalidMessageError, match="3 \\+ 6 values; got 20006"):
        chi2_server_marginals(total, n_classes=3, n_features=6)


def test_class_counts_beyond_the_public_row_bound():
    with pytest.raises(InvalidMessageError, match="max_samples=10"):
        chi2_server_marginals([6.0, 6.0, 1.0], n_classes=2, max_samples=10)


def test_a_majority_with_another_feature_count_cannot_exclude_the_honest():
    # Audit: 3 of 5 nodes reporting another feature count got the honest ones
    # excluded, then a crash (max() arg is an empty sequence).
    sizes = [400] * 5
    bounds = [np.full(6, 4096.0)] * 2 + [np.full(9, 4096.0)] * 3
    with pytest.warns(InvalidMessageWarning, match="field 'bound' must hold"):
        plan = chi2_server_plan(
            sizes, bounds, n_classes=3, n_features=6, on_invalid="exclude"
        )
    assert plan.kept.tolist() == [0, 1]
    assert plan.excluded.tolist() == [2, 3, 4]
    assert plan.n_samples == 800
    with pytest.raises(InvalidMessageError, match="client 2: field 'bound'"):
        chi2_server_plan(sizes, bounds, n_classes=3, n_features=6)


def test_every_announcement_invalid_is_a_clear_error_not_a_crash():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidMessageWarning)
        with pytest.raises(InvalidMessageError, match="no client is left"):
            chi2_server_plan(
                [10] * 3,
                [np.ones(9)] * 3,
                n_classes=2,
                n_features=6,
                on_invalid="exclude",
            )
    with pytest.raises(InvalidMessageError, match="none announced itself"):
        chi2_server_plan([], [], n_classes=2, n_features=6)


@pytest.mark.parametrize(
    ("sizes", "bounds", "options", "match"),
    [
        ([10, 10**12], [np.ones(2)] * 2, {}, "client 1: field 'n' is 1000000000000"),
        ([10, 2**62], [np.ones(2)] * 2, {}, "client 1: field 'n'"),
        ([10, True], [np.ones(2)] * 2, {}, "client 1: field 'n' must be an integer"),
        ([10, 2.5], [np.ones(2)] * 2, {}, "client 1: field 'n' must be an integer"),
        ([10, -1], [np.ones(2)] * 2, {}, "client 1: field 'n' is -1"),
        ([10, 10], [np.ones(2), [1.0, np.nan]], {}, "finite non-negative"),
        ([10, 10], [np.ones(2), [1.0, -2.0]], {}, "finite non-negative"),
        ([10, 10], [np.ones(2), ["a", "b"]], {}, "must hold real numbers"),
        ([10, 10], [np.ones(2), [1.0, 2.0**61]], {}, "wrap around the 64-bit ring"),
        ([10, 10], [np.ones(2), [1.0, 64.0]], {"max_value": 3.0}, "feature 1"),
        ([10] * 3, [np.ones(2)] * 3, {"max_clients": 2}, "max_clients=2"),
        ([10, 20], [np.ones(2)] * 2, {"max_client_size": 15}, "max_client_size=15"),
    ],
)
def test_bad_announcements_are_named(sizes, bounds, options, match):
    with pytest.raises(InvalidMessageError, match=match):
        chi2_server_plan(sizes, bounds, n_classes=2, n_features=2, **options)


def test_plan_parameters_are_checked():
    with pytest.raises(ValueError, match="max_value"):
        chi2_server_plan([1], [np.ones(2)], n_classes=2, n_features=2, max_value=-1)
    with pytest.raises(ValueError, match="on_invalid"):
        chi2_server_plan([1], [np.ones(2)], n_classes=2, n_features=2, on_invalid="x")
    with pytest.raises(ValueError, match="one entry per client"):
        chi2_server_plan([1, 2], [np.ones(2)], n_classes=2, n_features=2)
    with pytest.raises(TypeError, match="n_features"):
        chi2_server_plan([1], [np.ones(2)], n_classes=2, n_features=None)


def test_round_parameters_share_the_plan_policy_check():
    # One check of a round's ints against the plan policy (skfedcp._config),
    # for FED-chi2's public shape and for a server's own bounds.
    from skfedcp import _config, config_context
    from skfedcp.feature_selection import _plan

    check = _config._check_policy_int
    assert _plan._check_policy_int is check
    with config_context(max_clients=7, max_features=3):
        assert check(None, "max_clients") == 7  # None: the policy's own limit
        assert check(9, "max_clients") == 9  # a server's explicit bound
        assert check(3, "n_features", 3) == 3
        with pytest.raises(ValueError, match="above the plan policy's max_features=3"):
            check(4, "n_features", 3)
        with pytest.raises(ValueError, match="max_features=3"):
            chi2_server_plan([1], [np.ones(4)], n_classes=2, n_features=4)
        result = chi2_server_plan([1] * 7, [np.ones(2)] * 7, n_classes=2, n_features=2)
        assert result.kept.size == 7
        with pytest.raises(InvalidMessageError, match="max_clients=7"):
            chi2_server_plan([1] * 8, [np.ones(2)] * 8, n_classes=2, n_features=2)
    for value, error, match in [
        (None, TypeError, "n_features must be an int >= 1; got None"),
        (True, TypeError, "n_features must be an int >= 1"),
        (2.0, TypeError, "n_features must be an int >= 1"),
        (0, ValueError, "n_features must be >= 1; got 0"),
    ]:
        with pytest.raises(error, match=match):
            check(value, "n_features", 10)
    with pytest.raises(ValueError, match="max_client_size must be >= 1"):
        chi2_server_plan(
            [1], [np.ones(2)], n_classes=2, n_features=2, max_client_size=0
        )


def test_plan_matches_the_simulation_for_honest_clients():
    # The plan's feature bounds are the simulation's; the round-one totals
    # decode to the same marginals.
    parts, marginals, _ = _honest_round()
    sizes = [int(np.sum(IDS == c)) for c in range(5)]
    result = chi2_server_plan(
        sizes,
        [_marginals_bound(p[3:]) for p in parts],
        n_classes=3,
        n_features=6,
        integer_x=True,
        clients=list("abcde"),
    )
    total = np.sum([result.plan.encode(p) for p in parts], axis=0, dtype=np.uint64)
    decoded = chi2_server_marginals(
        result.plan.decode(total), n_classes=3, n_features=6, n_samples=result.n_samples
    )
    np.testing.assert_array_equal(decoded.row_totals, marginals.row_totals)
    np.testing.assert_array_equal(decoded.class_counts, marginals.class_counts)
    assert result.clients.tolist() == list("abcde")


# -- frac_bits -----------------------------------------------------------------


def test_protocol_refuses_a_wrapping_frac_bits():
    # Audit: a user-set frac_bits of 54-62 wrapped silently in round two (the
    # true feature's score fell from 17,185 to 0.9). fit refused it already;
    # the protocol step does too.
    _, marginals, _ = _honest_round()
    safe = int(chi2_frac_bits(marginals).min())
    assert chi2_frac_bits(marginals, frac_bits=safe).tolist() == [safe] * 6
    for bits in (54, 58, 62):
        with pytest.raises(ValueError, match=f"frac_bits={bits} lets the round-two"):
            chi2_frac_bits(marginals, frac_bits=bits)
    with pytest.raises(ValueError, match="frac_bits"):
        chi2_frac_bits(marginals, frac_bits=-1)
    with pytest.raises(TypeError, match="frac_bits"):
        chi2_frac_bits(marginals, frac_bits=40.5)


def test_fixed_features_are_not_range_checked():
    # A zero-total feature scores NaN whatever the sketch carries.
    m = Chi2Marginals(np.array([3.0, 4.0]), np.array([10.0, 0.0]))
    e = np.zeros((ELL, 2))
    e[:, 1] = 1e9
    assert np.isnan(chi2_server_decode(e, m).scores[1])


@pytest.mark.parametrize("max_value", [None, 40.0])
def test_vectorised_plan_equals_the_per_client_checks(monkeypatch, max_value):
    # The bounds taken whole (one array: what keeps 10**5 clients cheap) give
    # the plan of the same bounds taken client by client (a ragged one among
    # them sends the others there too), bit for bit.
    from skfedcp.feature_selection import _plan

    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 50, size=200)
    bounds = _marginals_bound(rng.uniform(0, 30, size=(200, 6)) * 1.0)[None, :] * (
        rng.uniform(0.1, 1.0, size=(200, 1))
    )
    bounds = np.vstack([_marginals_bound(row) for row in bounds])
    kwargs = {"n_classes": 3, "n_features": 6, "max_value": max_value}
    calls = []
    real_array = _plan._real_array
    monkeypatch.setattr(
        _plan, "_real_array", lambda value: calls.append(1) or real_array(value)
    )
    fast = chi2_server_plan(sizes, bounds, **kwargs)
    assert len(calls) == 1  # the first plan took the bounds whole
    ragged = [*bounds, [1.0, [2.0]]]
    with pytest.warns(InvalidMessageWarning, match="client 200: field 'bound'"):
        slow = chi2_server_plan([*sizes, 10], ragged, on_invalid="exclude", **kwargs)
    assert len(calls) == 1 + 1 + 201  # then whole (refused), then one by one
    np.testing.assert_array_equal(fast.plan.bound, slow.plan.bound)
    np.testing.assert_array_equal(fast.plan.frac_bits, slow.plan.frac_bits)
    np.testing.assert_array_equal(fast.kept, slow.kept)
    assert fast.n_samples == slow.n_samples and fast.plan.n_clients == 200


#: Odd announcements ``(size, bound)`` and whether each is valid alone.
ODD_ANNOUNCEMENTS = [
    (5, np.array([1.0, 2.0]), True),
    (np.int32(7), (1, 2), True),
    (np.uint64(3), [True, False], True),
    (4, np.float32([3.0, 4.0]), True),
    (np.array(5), [1.0, 2.0], False),  # a 0-d array is not a row count
    (np.array([5]), [1.0, 2.0], False),
    (True, [1.0, 2.0], False),
    (5.0, [1.0, 2.0], False),
    (2**70, [1.0, 2.0], False),
    (5, ["1", "2"], False),  # strings are not real numbers
    (5, [10**400, 1], False),  # an int beyond any float: was an OverflowError
    (5, np.array([1 + 0j, 2]), False),
    (5, [None, 1.0], False),
    (5, [1.0, [2.0]], False),
    (5, 3.0, False),
    (5, [1.0, np.inf], False),
]


def _alone(size, bound):
    """``None`` when chi2_server_plan takes this one client, else (field, reason)."""
    try:
        chi2_server_plan([size], [bound], n_classes=2, n_features=2)
    except InvalidMessageError as exc:
        return exc.field, str(exc).removeprefix("client 0: ")
    return None


def test_one_definition_of_a_valid_announcement():
    # Audit: the one-pass check took a list of 0-d arrays as sizes (the
    # per-client checks refuse one), so whether a client was kept depended
    # on the others; an int beyond any float crashed both checks.
    alone = [_alone(size, bound) for size, bound, _ in ODD_ANNOUNCEMENTS]
    assert [reason is None for reason in alone] == [
        valid for _, _, valid in ODD_ANNOUNCEMENTS
    ]
    sizes = [size for size, _, _ in ODD_ANNOUNCEMENTS]
    bounds = [bound for _, bound, _ in ODD_ANNOUNCEMENTS]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = chi2_server_plan(
            sizes, bounds, n_classes=2, n_features=2, on_invalid="exclude"
        )
    assert result.kept.tolist() == [j for j, r in enumerate(alone) if r is None]
    reasons = [str(w.message) for w in caught]
    bad = [(j, r) for j, r in enumerate(alone) if r is not None]
    assert len(reasons) == len(bad)
    for text, (j, (field, reason)) in zip(reasons, bad, strict=True):
        assert text.startswith(f"chi2_server_plan: client {j}: field {field!r}")
        assert f"client {j}: {reason}" in text
    # The valid ones without the others (taken whole): the same plan.
    valid = [j for j, r in enumerate(alone) if r is None]
    again = chi2_server_plan(
        [sizes[j] for j in valid], [bounds[j] for j in valid], n_classes=2, n_features=2
    )
    np.testing.assert_array_equal(again.plan.bound, result.plan.bound)
    assert again.n_samples == result.n_samples == 5 + 7 + 3 + 4


def test_zero_d_array_sizes_are_refused_in_any_company():
    # Audit: the one-pass check took these (a client alone, or all of them),
    # the per-client checks refused them (a client beside an invalid one).
    with pytest.raises(InvalidMessageError, match="client 0: field 'n' must be an"):
        chi2_server_plan([np.array(5)], [[1.0, 2.0]], n_classes=2, n_features=2)
    with pytest.raises(InvalidMessageError, match="client 0: field 'n' must be an"):
        chi2_server_plan(
            [np.array(5), np.array(6)], [[1.0, 2.0]] * 2, n_classes=2, n_features=2
        )
