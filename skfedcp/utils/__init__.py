"""Validation and order-statistic helpers shared across skfedcp."""

from ._quantile import conformal_quantile, conformal_rank, order_statistic
from ._validation import check_alpha, check_client_ids, check_scores

__all__ = [
    "check_alpha",
    "check_client_ids",
    "check_scores",
    "conformal_quantile",
    "conformal_rank",
    "order_statistic",
]
