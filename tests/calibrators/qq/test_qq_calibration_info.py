"""QQ's calibration_info_: the plan's local_ranks beside the announced clients'."""

import warnings

import numpy as np

from skfedcp.calibrators import QuantileOfQuantilesCalibrator
from skfedcp.exceptions import SmallCalibrationSetWarning


def _fit(sizes):
    messages = [
        {"n": n, "quantile": float(j) if n else float("inf")}
        for j, n in enumerate(sizes)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallCalibrationSetWarning)
        return QuantileOfQuantilesCalibrator().fit_from_messages(
            messages, alpha=0.1, n_per_client=sizes
        )


def test_client_ranks_name_every_announced_client_local_ranks_the_plan():
    info = _fit([20, 0, 30, 25]).calibration_info_
    assert info["client_ranks"].tolist()[1] == 0  # the client without rows
    np.testing.assert_array_equal(
        info["client_ranks"][info["client_ranks"] > 0], info["local_ranks"]
    )
    assert info["local_ranks"].shape == (3,) and info["client_ranks"].shape == (4,)


def test_they_coincide_when_every_client_holds_rows():
    info = _fit([20, 30, 25]).calibration_info_
    np.testing.assert_array_equal(info["client_ranks"], info["local_ranks"])
