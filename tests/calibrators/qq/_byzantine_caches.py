"""Shared by the Byzantine plan tests: every cache of the QQ and dp-qq plans."""

from skfedcp.calibrators._dp import _byzantine as _dp_byz
from skfedcp.calibrators._qq import _byzantine as _byz
from skfedcp.calibrators._qq import _byzantine_bound as _bound
from skfedcp.calibrators._qq import _calibrator

#: (module, name) of each cache, looked up when cleared (a test may have
#: monkeypatched one with a function that has no cache).
CACHES = (
    (_byz, "_equal_cell"),
    (_byz, "_equal_bracket"),
    (_byz, "_select_cached"),
    (_byz, "_fit_plan_cached"),
    (_byz, "fixed_certified_pair"),
    (_bound, "_window_probs"),
    (_bound, "_grid_cdf_cached"),
    (_bound, "certified_band"),
    (_bound, "extreme_coverages"),
    (_dp_byz, "_byzantine_plan"),
    (_calibrator, "_cached_selection"),
    (_calibrator, "_cached_fit_selection"),
)


def clear_byzantine_caches():
    """Clear them all: the next plan is computed cold."""
    for module, name in CACHES:
        function = getattr(module, name)
        if hasattr(function, "cache_clear"):  # not when monkeypatched
            function.cache_clear()
