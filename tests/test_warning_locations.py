"""Every warning a user can trigger points at the user's own line (issue 13)."""

import warnings

import numpy as np
import pytest
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skfedcp import FedConformalRegressor, PrivateConformalClassifier
from skfedcp.calibrators import PrivateCentralCalibrator, QuantileOfQuantilesCalibrator
from skfedcp.exceptions import (
    ClippedScoresWarning,
    InfiniteThresholdWarning,
    PrefitEstimatorWarning,
    PrivacyLeakWarning,
    SingleClientWarning,
    SmallCalibrationSetWarning,
)
from skfedcp.utils import conformal_quantile

rng = np.random.default_rng(0)
X = rng.normal(size=(200, 3))
y = X @ [1.0, 2.0, -1.0] + rng.normal(size=200)
labels = (X[:, 0] > 0).astype(int)
ids = np.repeat(np.arange(4), 50)
fitted = LinearRegression().fit(X, y)

TRIGGERS = {
    "prefit model": (
        lambda: FedConformalRegressor(fitted, calibrator="central").fit(X, y),
        PrefitEstimatorWarning,
    ),
    "private training": (
        lambda: PrivateConformalClassifier(
            LogisticRegression(), epsilon=5.0, random_state=0
        ).fit(X, labels, client_ids=ids),
        PrivacyLeakWarning,
    ),
    "wrapper without client_ids": (
        lambda: FedConformalRegressor(FrozenEstimator(fitted)).fit(X, y),
        SingleClientWarning,
    ),
    "pipeline without client_ids": (
        lambda: make_pipeline(
            StandardScaler(), FedConformalRegressor(LinearRegression(), random_state=0)
        ).fit(X, y),
        SingleClientWarning,
    ),
    "calibrator infinite threshold": (
        lambda: QuantileOfQuantilesCalibrator().fit(
            np.arange(6.0), np.repeat([0, 1], 3), alpha=0.05
        ),
        InfiniteThresholdWarning,
    ),
    "small calibration set": (
        lambda: conformal_quantile(np.arange(5.0), 0.05),
        SmallCalibrationSetWarning,
    ),
    "clipped private scores": (
        lambda: PrivateCentralCalibrator(epsilon=5.0, score_bounds=(0, 1)).fit(
            np.r_[np.linspace(0, 1, 999), 2.0], alpha=0.1, random_state=0
        ),
        ClippedScoresWarning,
    ),
}


@pytest.mark.parametrize("name", list(TRIGGERS))
def test_warning_points_at_the_callers_line(name):
    call, category = TRIGGERS[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    hits = [w for w in caught if issubclass(w.category, category)]
    assert hits, f"{name}: no {category.__name__}"
    assert {w.filename for w in hits} == {__file__}, [
        (w.filename, w.lineno) for w in hits
    ]
