"""Shared helper of the private-QQ tests: exact coverage given the ranks."""

from skfedcp.calibrators._qq._coverage import qq_coverage_unequal_fraction


def coverage_given_ranks(sizes, ranks, k):
    """Exact M with fixed ranks; rank 0 means a value of -inf (always below)."""
    if k == 0:
        return 0.0  # the threshold is -inf
    keep = [j for j, r in enumerate(ranks) if r > 0]
    k -= len(ranks) - len(keep)
    if k <= 0:
        return 0.0
    return float(
        qq_coverage_unequal_fraction(
            [sizes[j] for j in keep], [ranks[j] for j in keep], k
        )
    )
