"""skfedcp: federated and private conformal prediction for scikit-learn."""

__version__ = "0.1.0.dev0"

from .feature_selection import FedChi2Selector  # noqa: E402
from .regression import FedConformalRegressor  # noqa: E402

__all__ = ["FedChi2Selector", "FedConformalRegressor", "__version__"]
