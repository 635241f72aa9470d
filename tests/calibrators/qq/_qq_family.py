"""Shared brute force of the QQ-selection tests: the family of one level."""

import math
from fractions import Fraction

from skfedcp.calibrators._qq._coverage import qq_coverage_unequal_fraction


def family(sizes, clip=False):
    """Every distinct rank vector ceil(c (n_j + 1)), c in (0, 1), exactly."""
    levels = sorted({Fraction(r, n + 1) for n in sizes for r in range(1, n + 1)})
    for c in levels:
        ranks = [math.ceil(c * (n + 1)) for n in sizes]
        if clip:
            ranks = [min(r, n) for r, n in zip(ranks, sizes, strict=True)]
        yield c, tuple(ranks)


def target(alpha):
    return 1 - Fraction(alpha).limit_denominator(10**6)


def brute_force(sizes, alpha, *, coverage=None, clip=False, only_k=None):
    """argmin of M >= 1 - alpha over the family, exact arithmetic.

    ``coverage(sizes, ranks, k)``: the exact M (default: the rational DP).
    ``only_k``: the pairs (c, k) with k in this collection only. Ties: the
    largest level, then the smallest k (the rule of the search).
    """
    coverage = qq_coverage_unequal_fraction if coverage is None else coverage
    best = None
    for c, ranks in family(sizes, clip):
        finite = sum(r <= n for r, n in zip(ranks, sizes, strict=True))
        ks = range(1, finite + 1) if only_k is None else sorted(only_k)
        for k in ks:
            if k > finite:
                break
            value = coverage(sizes, ranks, k)
            if value >= target(alpha):
                if (
                    best is None
                    or value < best[0]
                    or (value == best[0] and c > best[1])
                ):
                    best = (value, c, ranks, k)
                break  # M increases with k: larger k are worse at this level
    return best
