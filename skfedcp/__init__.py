"""skfedcp: federated and private conformal prediction for scikit-learn."""

__version__ = "0.1.0.dev0"

from ._config import config_context, get_config, set_config  # noqa: E402
from .classification import PrivateConformalClassifier  # noqa: E402
from .feature_selection import FedChi2Selector  # noqa: E402
from .regression import FedConformalRegressor, FedCQRRegressor  # noqa: E402
from .two_students import TwoStudentsRegressor  # noqa: E402

__all__ = [
    "FedCQRRegressor",
    "FedChi2Selector",
    "FedConformalRegressor",
    "PrivateConformalClassifier",
    "TwoStudentsRegressor",
    "__version__",
    "config_context",
    "get_config",
    "set_config",
]
