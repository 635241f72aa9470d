"""Sizes a server reads from the messages are checked before they are used.

LDP-L's ``server_step`` needs no plan before the round: without
``n_per_client`` it takes each client's size from its message. That size is
client input like any field, so a malformed one is an
:class:`~skfedcp.exceptions.InvalidMessageError` naming the client and the
field ``n`` (as for any invalid message of ``server_step``), never a bare
``TypeError`` or ``ValueError`` about ``n_per_client`` that names nobody.
"""

import numpy as np
import pytest

from skfedcp import config_context
from skfedcp.calibrators import LDPLabelCalibrator
from skfedcp.calibrators._messages import sizes_from_messages
from skfedcp.exceptions import InvalidMessageError, VacuousGuaranteeWarning

N = 20
K = 3


def _message(n=N, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "n": n,
        "scores": rng.random((N, K)),
        "noisy_labels": rng.integers(0, K, N),
    }


def _server_step(messages):
    cal = LDPLabelCalibrator(n_classes=K, epsilon=1.0)
    return cal.server_step(messages, alpha=0.1, random_state=0)


BAD_SIZES = [
    ("abc", "must be a non-negative integer; got 'abc'"),
    (20.5, "must be a non-negative integer; got 20.5"),
    (float("nan"), "must be a non-negative integer; got nan"),
    (float("inf"), "must be a non-negative integer; got inf"),
    (-1, "must be a non-negative integer; got -1"),
    (np.int64(-3), "must be a non-negative integer; got -3"),
    (None, "must be a non-negative integer; got None"),
    (True, "must be a non-negative integer; got True"),
    (np.array([N, N]), "must be a non-negative integer; got array"),
    ([N], r"must be a non-negative integer; got \[20\]"),
    (10**12, "announces 1000000000000 rows, above the public max_client_size"),
    (2**70, "announces 1180591620717411303424 rows, above the public"),
    (10**400, "above the public max_client_size"),
]


class TestSizesFromMessages:
    @pytest.mark.parametrize(
        ("bad", "reason"),
        BAD_SIZES,
        ids=[
            *("str", "half", "nan", "inf", "negative", "np-negative", "none"),
            *("bool", "array", "list", "1e12", "2^70", "1e400"),
        ],
    )
    def test_server_step_names_the_client_and_field_n(self, bad, reason):
        messages = [_message(seed=0), {**_message(seed=1), "n": bad}]
        with pytest.raises(InvalidMessageError, match=reason) as caught:
            _server_step(messages)
        assert caught.value.client == 1
        assert caught.value.field == "n"
        assert "invalid message from client 1: field 'n'" in str(caught.value)

    @pytest.mark.parametrize("bad", ["x", None, 5, [1, 2]])
    def test_a_message_that_is_not_a_dict_is_named(self, bad):
        with pytest.raises(InvalidMessageError, match="client 1: must be a dict"):
            _server_step([_message(), bad])

    def test_a_missing_size_is_named(self):
        message = _message(seed=1)
        del message["n"]
        with pytest.raises(InvalidMessageError, match="client 1: field 'n' is missing"):
            _server_step([_message(), message])

    def test_stacked_messages_are_checked_entry_by_entry(self):
        stacked = {
            "n": np.array([N, -5]),
            "scores": np.stack([_message()["scores"]] * 2),
            "noisy_labels": np.stack([_message()["noisy_labels"]] * 2),
        }
        with pytest.raises(InvalidMessageError, match="client 1: field 'n'") as caught:
            _server_step(stacked)
        assert caught.value.client == 1
        with pytest.raises(InvalidMessageError, match="carry no field 'n'"):
            _server_step({k: v for k, v in stacked.items() if k != "n"})
        with pytest.raises(InvalidMessageError, match="one size per client"):
            _server_step({**stacked, "n": np.full((2, 2), N)})

    def test_the_public_bound_in_force_applies(self):
        with config_context(max_client_size=N - 1):
            with pytest.raises(InvalidMessageError, match="max_client_size=19"):
                _server_step([_message(), _message(seed=1)])

    def test_valid_sizes_give_the_same_threshold_as_announced_sizes(self):
        messages = [_message(seed=0), {**_message(seed=1), "n": float(N)}]
        cal = LDPLabelCalibrator(n_classes=K, epsilon=1.0)
        with pytest.warns(VacuousGuaranteeWarning):
            from_messages = cal.server_step(messages, alpha=0.1, random_state=0)
        with pytest.warns(VacuousGuaranteeWarning):
            announced = cal.server_step(
                messages, alpha=0.1, n_per_client=[N, N], random_state=0
            )
        assert from_messages == announced

    def test_sizes_from_messages(self):
        sizes = sizes_from_messages([{"n": 3}, {"n": np.uint8(5)}, {"n": 0.0}])
        assert sizes.dtype == np.int64
        assert sizes.tolist() == [3, 5, 0]
        assert sizes_from_messages({"n": [4, 2]}).tolist() == [4, 2]
        with pytest.raises(TypeError, match="list of dicts"):
            sizes_from_messages("n")
        with pytest.raises(ValueError, match="at least one client"):
            sizes_from_messages([])
