"""Conformal regressors: split conformal (any model) and CQR (quantile models)."""

from ._cqr import FedCQRRegressor
from ._split import FedConformalRegressor

__all__ = ["FedCQRRegressor", "FedConformalRegressor"]
