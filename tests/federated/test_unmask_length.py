"""``unmask_sum(length=...)``: masked vectors checked against the public length.

Every masked vector is checked against the plan's length, so a client
sending another length is the one named even when it comes first; without
it, the first vector set the length and the next, honest client was blamed.
"""

import numpy as np
import pytest

from skfedcp.exceptions import InvalidMessageError
from skfedcp.federated import make_masking_setup, mask_input, secure_sum, unmask_sum


def _masked(lengths):
    setup = make_masking_setup(len(lengths), random_state=0)
    return setup, [
        mask_input(np.zeros(n, dtype=np.uint64), i, setup)
        for i, n in enumerate(lengths)
    ]


def test_the_first_client_of_the_wrong_length_is_named():
    setup, masked = _masked([5, 3, 3])
    with pytest.raises(InvalidMessageError, match="client 0: field") as caught:
        unmask_sum(masked, [0, 1, 2], setup, length=3)
    assert caught.value.client == 0
    assert caught.value.field == "masked_inputs"
    # Without the public length the first vector decides (documented).
    with pytest.raises(InvalidMessageError, match="client 1: field"):
        unmask_sum(masked, [0, 1, 2], setup)


def test_a_later_client_is_named_and_a_valid_round_sums():
    setup, masked = _masked([3, 4, 3])
    with pytest.raises(InvalidMessageError, match="client 1: field"):
        unmask_sum(masked, [0, 1, 2], setup, length=3)
    setup, masked = _masked([3, 3, 3])
    np.testing.assert_array_equal(
        unmask_sum(masked, [0, 1, 2], setup, length=3),
        unmask_sum(masked, [0, 1, 2], setup),
    )


@pytest.mark.parametrize(
    ("length", "error"), [(True, TypeError), (2.0, TypeError), (-1, ValueError)]
)
def test_length_is_checked(length, error):
    setup, masked = _masked([2, 2])
    with pytest.raises(error, match="length must be an int"):
        unmask_sum(masked, [0, 1], setup, length=length)


def test_secure_sum_passes_its_length(monkeypatch):
    from skfedcp.federated import _secure_aggregation

    lengths = []
    unmask = _secure_aggregation.unmask_sum

    def spy(*args, **kwargs):
        lengths.append(kwargs.get("length"))
        return unmask(*args, **kwargs)

    monkeypatch.setattr(_secure_aggregation, "unmask_sum", spy)
    values = [np.arange(6.0).reshape(2, 3) * k for k in range(3)]
    total = secure_sum(values, frac_bits=8, random_state=0)
    np.testing.assert_array_equal(total, np.arange(6.0).reshape(2, 3) * 3)
    empty = secure_sum([np.zeros(0, np.int64)] * 2, random_state=0)
    assert empty.shape == (0,)
    assert lengths == [6, 0]  # the public length, flattened
