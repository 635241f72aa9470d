"""Metrics for prediction intervals and sets, overall and per client, and scorers."""

from ._coverage_test import ClientCoverageTest, client_coverage_test
from ._intervals import (
    PerClientCoverage,
    coverage_score,
    interval_score,
    max_coverage_gap,
    mean_width_score,
    per_client_coverage,
)
from ._scorers import get_interval_scorer, get_set_scorer, make_budget_refit
from ._sets import (
    SizeStratifiedCoverage,
    per_client_set_coverage,
    set_coverage_score,
    set_size_score,
    size_stratified_coverage,
)

__all__ = [
    "ClientCoverageTest",
    "PerClientCoverage",
    "SizeStratifiedCoverage",
    "client_coverage_test",
    "coverage_score",
    "get_interval_scorer",
    "get_set_scorer",
    "interval_score",
    "make_budget_refit",
    "max_coverage_gap",
    "mean_width_score",
    "per_client_coverage",
    "per_client_set_coverage",
    "set_coverage_score",
    "set_size_score",
    "size_stratified_coverage",
]
