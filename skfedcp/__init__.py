"""skfedcp: federated and private conformal prediction for scikit-learn."""

__version__ = "0.1.0.dev0"

from .regression import FedConformalRegressor  # noqa: E402

__all__ = ["FedConformalRegressor", "__version__"]
