"""Bad inputs to FedChi2Selector, its protocol steps and the secure sums.

Every case asserts the exception type and a message that names the argument
(or, for a server step, the client and the field of the message). Issue 11:
none obscure, none silent.
"""

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from skfedcp.exceptions import InvalidMessageError
from skfedcp.feature_selection import (
    Chi2Marginals,
    FedChi2Selector,
    chi2_client_encode,
    chi2_client_marginals,
    chi2_frac_bits,
    chi2_server_decode,
    chi2_server_marginals,
    fed_chi2,
)
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

RNG = np.random.default_rng(0)
N = 60
X = RNG.poisson(3.0, (N, 4)).astype(float)
Y = RNG.integers(0, 3, N)
IDS = np.arange(N) % 4
MARG = Chi2Marginals(np.array([20.0, 20.0, 20.0]), np.array([5.0, 6.0, 7.0, 8.0]))
SETUP = make_masking_setup(3, random_state=0)
PLAN = fixed_point_plan([10.0, 1000.0], n_clients=3)


def _fit(X=X, y=Y, client_ids=IDS, **params):
    params = {"k": 2, "random_state": 0, **params}
    return FedChi2Selector(**params).fit(X, y, client_ids=client_ids)


def _big_totals():
    # Non-integer values whose totals over 60 rows reach 2**63: no
    # fixed-point scale can hold them in the 64-bit ring.
    return np.column_stack([np.full(N, 2.0**58 + 0.5), X[:, 1]])


def _fine_bits():
    # Totals ~ 6e12 (fine for the default plan, too big for 40 fractional bits).
    return _fit(X=np.column_stack([np.full(N, 1e11 + 0.25), X[:, 1]]), frac_bits=40)


CASES = [
    # -- the selector ------------------------------------------------------
    ("nan_in_X", lambda: _fit(X=np.where(X > 4, np.nan, X)), ValueError, "X"),
    ("negative_X", lambda: _fit(X=-X), ValueError, r"Negative values.*\(X\)"),
    (
        "finite_X_whose_sums_overflow",
        lambda: _fit(X=np.full((N, 2), 1e308)),
        ValueError,
        "X: the column sums of X overflow",
    ),
    (
        "totals_beyond_the_ring",
        lambda: _fit(X=_big_totals()),
        ValueError,
        "X: the per-client sums of X reach",
    ),
    (
        "totals_beyond_the_ring_plain",
        lambda: _fit(X=_big_totals(), method="plain"),
        ValueError,
        "X: the per-client sums of X reach",
    ),
    ("frac_bits_too_fine", _fine_bits, ValueError, "frac_bits=40 is too fine"),
    # Integer X: round one is exact, but 58 fractional bits leave the round-two
    # sketch sums no headroom in the 64-bit ring (they wrapped silently).
    (
        "frac_bits_wrap_round_two",
        lambda: _fit(frac_bits=58),
        ValueError,
        r"frac_bits=58 lets the round-two secure sum of feature \d+ wrap",
    ),
    (
        "client_ids_wrong_length",
        lambda: _fit(client_ids=IDS[:-1]),
        ValueError,
        "client_ids",
    ),
    ("dropout_unknown_label", lambda: _fit(dropout=[9]), ValueError, "dropout"),
    (
        "dropout_every_client",
        lambda: _fit(dropout=[0, 1, 2, 3]),
        ValueError,
        "dropout",
    ),
    (
        "eps_delta_out_of_range",
        lambda: _fit(n_projections=(0.1, 2.0)),
        ValueError,
        "n_projections",
    ),
    (
        "geometric_one_projection",
        lambda: _fit(n_projections=1),
        ValueError,
        "n_projections must be >= 2",
    ),
    (
        "contingency_non_integer",
        lambda: _fit(X=X + 0.5, statistic="contingency"),
        ValueError,
        "X must hold integer-coded",
    ),
    ("negative_k", lambda: _fit(k=-1), InvalidParameterError, "'k'"),
    (
        "unknown_secure_agg",
        lambda: _fit(secure_agg="ring"),
        InvalidParameterError,
        "'secure_agg'",
    ),
    ("fed_chi2_with_k", lambda: fed_chi2(X, Y, IDS, k=3), TypeError, "k"),
    # -- round-one server step ---------------------------------------------
    (
        "marginals_nan",
        lambda: chi2_server_marginals([3.0, np.nan, 1.0], n_classes=2),
        InvalidMessageError,
        "field 'total' holds NaN",
    ),
    (
        "marginals_strings",
        lambda: chi2_server_marginals(["a", "b", "c"], n_classes=2),
        InvalidMessageError,
        "field 'total' must hold real numbers",
    ),
    (
        "marginals_2d",
        lambda: chi2_server_marginals([[3.0, 4.0, 1.0]], n_classes=2),
        InvalidMessageError,
        "field 'total' must be 1-D",
    ),
    (
        "marginals_wrong_length",
        lambda: chi2_server_marginals([3.0, 4.0, 1.0], n_classes=2, n_features=2),
        InvalidMessageError,
        "field 'total' must hold n_classes \\+ n_rows",
    ),
    (
        "marginals_negative_count",
        lambda: chi2_server_marginals([3.0, -4.0, 1.0], n_classes=2),
        InvalidMessageError,
        "class counts",
    ),
    (
        "marginals_fractional_count",
        lambda: chi2_server_marginals([3.5, 4.0, 1.0], n_classes=2),
        InvalidMessageError,
        "class counts.*non-negative integers",
    ),
    (
        "marginals_count_not_announced",
        lambda: chi2_server_marginals([3.0, 4.0, 1.0], n_classes=2, n_samples=8),
        InvalidMessageError,
        "announced 8",
    ),
    (
        "marginals_negative_total",
        lambda: chi2_server_marginals([3.0, 4.0, -1.0], n_classes=2),
        InvalidMessageError,
        "row totals",
    ),
    (
        "marginals_level_counts_inconsistent",
        lambda: chi2_server_marginals(
            [3.0, 4.0, 2.0, 2.0, 7.0], n_classes=2, n_levels=np.array([1, 2])
        ),
        InvalidMessageError,
        "level counts",
    ),
    (
        "marginals_bad_n_classes",
        lambda: chi2_server_marginals([3.0, 4.0, 1.0], n_classes=0),
        ValueError,
        "n_classes",
    ),
    # -- round-two server step ---------------------------------------------
    (
        "sketch_wrong_shape",
        lambda: chi2_server_decode(np.ones((10, 3)), MARG),
        InvalidMessageError,
        "sketch must have shape",
    ),
    (
        "sketch_not_announced_size",
        lambda: chi2_server_decode(np.ones((10, 4)), MARG, n_projections=50),
        InvalidMessageError,
        "sketch must have shape .*\\(50, 4\\)",
    ),
    (
        "sketch_infinite",
        lambda: chi2_server_decode(np.full((10, 4), np.inf), MARG),
        InvalidMessageError,
        "field 'sketch' holds NaN or infinite",
    ),
    (
        "sketch_1d",
        lambda: chi2_server_decode(np.ones(10), MARG),
        InvalidMessageError,
        "field 'sketch' must be 2-D",
    ),
    (
        "sketch_bad_estimator",
        lambda: chi2_server_decode(np.ones((10, 4)), MARG, estimator="mode"),
        ValueError,
        "estimator",
    ),
    (
        "marginals_not_a_plan",
        lambda: chi2_server_decode(np.ones((10, 4)), (np.ones(3), np.ones(4))),
        TypeError,
        "marginals",
    ),
    (
        "frac_bits_statistic_too_large",
        lambda: chi2_frac_bits(Chi2Marginals(np.array([1.0, 1e6]), np.array([1e30]))),
        ValueError,
        "X: the chi-square statistic of feature 0",
    ),
    # -- client steps ------------------------------------------------------
    (
        "client_labels_not_in_classes",
        lambda: chi2_client_marginals(X, Y, classes=[0, 1]),
        ValueError,
        "y holds labels",
    ),
    (
        "client_negative_seed",
        lambda: chi2_client_encode(X, Y, MARG, classes=[0, 1, 2], seed=-1),
        ValueError,
        "seed",
    ),
    (
        "client_float_seed",
        lambda: chi2_client_encode(X, Y, MARG, classes=[0, 1, 2], seed=1.5),
        TypeError,
        "seed",
    ),
    (
        "client_uniform_needs_n_clients",
        lambda: chi2_client_encode(
            X, Y, MARG, classes=[0, 1, 2], seed=1, expected_split="uniform"
        ),
        ValueError,
        "n_clients",
    ),
    # -- fixed point ---------------------------------------------------------
    (
        "encode_nan",
        lambda: fixed_point_encode([1.0, np.nan], 8),
        ValueError,
        "x must be finite",
    ),
    (
        "encode_strings",
        lambda: fixed_point_encode(["1.0"], 8),
        TypeError,
        "x must be an array of real numbers",
    ),
    ("encode_frac_bits_63", lambda: fixed_point_encode([1.0], 63), ValueError, "frac"),
    (
        "decode_float_q",
        lambda: fixed_point_decode(np.ones(2), 8),
        TypeError,
        "q must be an array of uint64",
    ),
    (
        "plan_negative_bound",
        lambda: fixed_point_plan([-1.0], n_clients=2),
        ValueError,
        "bound must be finite and non-negative",
    ),
    (
        "plan_bound_beyond_ring",
        lambda: fixed_point_plan([2.0**61], n_clients=2),
        ValueError,
        "bound: n_clients \\* bound reaches 2\\*\\*62",
    ),
    (
        "plan_zero_clients",
        lambda: fixed_point_plan([1.0], n_clients=0),
        ValueError,
        "n_clients",
    ),
    (
        "plan_encode_over_bound",
        lambda: PLAN.encode([11.0, 5.0]),
        ValueError,
        "x: value 11.0 exceeds the announced bound 10.0",
    ),
    (
        "plan_encode_wrong_shape",
        lambda: PLAN.encode([1.0, 2.0, 3.0]),
        ValueError,
        "x must have shape \\(2,\\)",
    ),
    (
        "plan_decode_float",
        lambda: PLAN.decode(np.zeros(2)),
        InvalidMessageError,
        "field 'total' must be an array of uint64",
    ),
    (
        "plan_decode_beyond_n_bound",
        lambda: PLAN.decode(fixed_point_encode([31.0, 0.0], PLAN.frac_bits)),
        InvalidMessageError,
        "field 'total': the secure sum exceeds n_clients \\* bound",
    ),
    (
        "plan_message_beyond_bound",
        lambda: PLAN.check_message(
            fixed_point_encode([20.0, 0.0], PLAN.frac_bits), client=3, field="q"
        ),
        InvalidMessageError,
        "client 3: field 'q' encodes values beyond the announced bound",
    ),
    # -- masked sums ---------------------------------------------------------
    (
        "unmask_float_vector",
        lambda: unmask_sum([np.zeros(2, np.uint64), np.zeros(2)], [0, 2], SETUP),
        InvalidMessageError,
        "client 2: field 'masked_inputs' must be an array of uint64",
    ),
    (
        "unmask_wrong_length",
        lambda: unmask_sum(
            [np.zeros(2, np.uint64), np.zeros(3, np.uint64)], [0, 1], SETUP
        ),
        InvalidMessageError,
        "client 1: field 'masked_inputs' must have shape",
    ),
    (
        "unmask_float_survivors",
        lambda: unmask_sum([np.zeros(2, np.uint64)], [0.5], SETUP),
        TypeError,
        "survivors",
    ),
    (
        "mask_client_out_of_range",
        lambda: mask_input(np.zeros(2, np.uint64), 3, SETUP),
        ValueError,
        "client must be in",
    ),
    (
        "secure_sum_floats_without_frac_bits",
        lambda: secure_sum([[0.5], [1.0]]),
        TypeError,
        "values must be integers",
    ),
    (
        "setup_bad_random_state",
        lambda: make_masking_setup(3, random_state="abc"),
        TypeError,
        "random_state",
    ),
    (
        "harary_odd_degree",
        lambda: secure_aggregation_graph(20, graph="harary", degree=5),
        ValueError,
        "degree",
    ),
]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    ("call", "error", "match"),
    [pytest.param(c, e, m, id=name) for name, c, e, m in CASES],
)
def test_bad_input_is_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_case_count():
    # The issue asks for about 25 or more cases here.
    assert len(CASES) >= 25


@pytest.mark.parametrize(
    ("call", "client", "field"),
    [
        (
            lambda: chi2_server_marginals([3.5, 4.0, 1.0], n_classes=2),
            None,
            "class_counts",
        ),
        (
            lambda: chi2_server_marginals([3.0, -4.0, 1.0], n_classes=2, client="b"),
            "b",
            "class_counts",
        ),
        (
            lambda: chi2_server_marginals([3.0, 4.0, -1.0], n_classes=2),
            None,
            "row_totals",
        ),
        (lambda: chi2_server_decode(np.ones((10, 3)), MARG), None, "sketch"),
        (
            lambda: unmask_sum([np.zeros(2, np.uint64), np.zeros(2)], [0, 2], SETUP),
            2,
            "masked_inputs",
        ),
        (
            lambda: PLAN.check_message(np.zeros(3, np.uint64), client=7, field="q"),
            7,
            "q",
        ),
    ],
)
def test_invalid_message_names_client_and_field(call, client, field):
    with pytest.raises(InvalidMessageError) as info:
        call()
    assert info.value.client == client
    assert info.value.field == field


def test_finite_values_beyond_float_scaling_encode_modulo_2_64():
    # Issue 11: 'fixed_point_encode: x must be finite' for finite input. A
    # finite x whose x * 2**f overflows float64 is reduced modulo 2**(64 - f)
    # first: 1e300 is a multiple of 2**32, so its encoding is 0.
    q = fixed_point_encode(np.array([1e300, 2.0**40 + 3.0]), 32)
    assert q.tolist() == [0, (3 << 32)]
