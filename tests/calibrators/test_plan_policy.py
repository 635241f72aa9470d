"""The public plan policy: announced sizes and client counts are bounded."""

import threading
import time

import numpy as np
import pytest

from skfedcp import config_context, get_config, set_config
from skfedcp.calibrators import get_calibrator
from skfedcp.exceptions import InvalidMessageError

HOSTILE_SIZES = [10**12, 2**62, 2**63 - 1]


def _calibrator(alias):
    cal = get_calibrator(alias)
    if alias.startswith("dp"):
        cal.set_params(score_bounds=(0.0, 1.0))
    return cal


@pytest.mark.parametrize("alias", ["central", "qq", "avg", "dp-central", "dp-qq"])
@pytest.mark.parametrize("hostile", HOSTILE_SIZES)
def test_a_hostile_size_is_refused_in_milliseconds_naming_the_client(alias, hostile):
    sizes = np.array([1000] * 7 + [hostile], dtype=np.int64)
    cal = _calibrator(alias)
    start = time.perf_counter()
    with pytest.raises(InvalidMessageError, match="client 7 announced") as info:
        cal.plan(sizes, 0.1)
    # No work grows with the announced n: the refusal comes from the check,
    # not from a plan that ran out of time or memory (a generous 1 s ceiling,
    # a machine-independent order of magnitude below the 0.2-20 s it took).
    assert time.perf_counter() - start < 1.0
    assert info.value.client == 7
    assert info.value.field == "n_per_client"


def test_uint64_size_of_2_63_is_refused_not_read_as_negative():
    cal = get_calibrator("qq")
    sizes = np.array([10, 2**63], dtype=np.uint64)
    with pytest.raises(InvalidMessageError, match="9223372036854775808"):
        cal.fit_from_messages(
            [{"n": 10, "quantile": 1.0}] * 2, alpha=0.1, n_per_client=sizes
        )


def test_too_many_clients_is_refused_before_any_per_client_work():
    cal = get_calibrator("central")
    with config_context(max_clients=5):
        with pytest.raises(InvalidMessageError, match="announces 6 clients"):
            cal.plan([10] * 6, 0.1)
    cal.plan([10] * 6, 0.1)  # the default allows it


def test_a_server_raises_its_limits_for_a_larger_federation():
    sizes = [10**12] * 3
    with config_context(max_client_size=10**13, max_total_size=10**13):
        plan = get_calibrator("central").plan(sizes, 0.1)
    # The split-conformal rank ceil((N + 1)(1 - alpha)) of N = 3 * 10^12 rows.
    assert plan["feasible"]
    assert plan["rank"] == 2_700_000_000_001
    assert plan["coverage"] == pytest.approx(2_700_000_000_001 / (3 * 10**12 + 1))
    with pytest.raises(InvalidMessageError):
        get_calibrator("central").plan(sizes, 0.1)


def test_honest_sizes_plan_as_before():
    sizes = np.array([40, 55, 70], dtype=np.int64)
    signed = get_calibrator("qq").plan(sizes, 0.1)
    unsigned = get_calibrator("qq").plan(sizes.astype(np.uint64), 0.1)
    assert signed.keys() == unsigned.keys()
    for key, value in signed.items():
        np.testing.assert_array_equal(value, unsigned[key])


@pytest.mark.parametrize(
    "limits, error, match",
    [
        ({"max_clients": 0}, ValueError, r"max_clients must be in \[1, 2\*\*62\]"),
        ({"max_client_size": 2**63}, ValueError, "max_client_size must be in"),
        ({"max_classes": 2.5}, TypeError, "max_classes must be a positive integer"),
        ({"max_features": True}, TypeError, "max_features must be a positive"),
        ({"max_rows": 10}, TypeError, "unknown plan limit 'max_rows'"),
    ],
)
def test_bad_limits(limits, error, match):
    with pytest.raises(error, match=match):
        set_config(**limits)
    with pytest.raises(error, match=match):
        with config_context(**limits):
            pass


def test_config_is_per_thread_and_restored():
    seen = {}

    def other():
        seen["other"] = get_config()["max_clients"]

    with config_context(max_clients=7):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert get_config()["max_clients"] == 7
    assert seen["other"] == 100_000
    assert get_config()["max_clients"] == 100_000


@pytest.mark.parametrize("alias", ["central", "qq", "dp-central", "dp-qq"])
def test_too_many_rows_in_all_is_refused(alias):
    # 200 clients of 10^6 rows, each within max_client_size: 2 * 10^8 rows in
    # all is above the default max_total_size (the O(total) plans of
    # dp-central and LDP-S ran out of memory at 5 * 10^9).
    cal = _calibrator(alias)
    sizes = np.full(200, 10**6)
    with pytest.raises(InvalidMessageError, match="200000000 rows in all"):
        cal.plan(sizes, 0.1)
    assert get_config()["max_total_size"] == 10**8


def test_the_total_is_summed_exactly_past_int64():
    # Two clients of 2**62 rows sum to 2**63: an int64 sum wraps negative and
    # let the federation past max_total_size when max_client_size is raised.
    from skfedcp.calibrators._messages import check_client_sizes

    with config_context(max_client_size=2**62, max_total_size=10**8):
        with pytest.raises(InvalidMessageError, match="rows in all"):
            check_client_sizes([2**62, 2**62])
