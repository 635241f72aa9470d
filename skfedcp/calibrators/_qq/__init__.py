"""The quantile-of-quantiles family: order statistics, exact coverage, ranks."""
