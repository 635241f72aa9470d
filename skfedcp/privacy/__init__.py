"""Privacy primitives: exponential mechanism, private quantile, randomized response.

Numbers in, numbers out: no estimators. Every sampling function takes
``random_state`` (an int or NumPy generator for reproducible research, or
``"secure"`` for the operating system's secure randomness with exact sampling;
see :mod:`skfedcp.privacy._randomness` for the floating-point caveats), and
every mechanism has a ``*_probabilities`` twin giving its exact output law, so
tests can check the ``epsilon`` bound.
"""

from ._exponential import exponential_mechanism, exponential_mechanism_probabilities
from ._n_bins import private_conformal_n_bins
from ._quantile import (
    dp_qq_local_correction,
    private_conformal_gamma,
    private_conformal_level,
    private_quantile,
    private_quantile_probabilities,
)
from ._randomized_response import (
    binary_randomized_response,
    binary_randomized_response_probabilities,
    debias_fraction,
    debias_frequencies,
    k_ary_randomized_response,
    k_ary_randomized_response_probabilities,
)
from ._tight import private_conformal_tight_coverage, private_quantile_rank_tail
from ._validation import PrivacyParams, check_privacy_params

__all__ = [
    "PrivacyParams",
    "binary_randomized_response",
    "binary_randomized_response_probabilities",
    "check_privacy_params",
    "debias_fraction",
    "debias_frequencies",
    "dp_qq_local_correction",
    "exponential_mechanism",
    "exponential_mechanism_probabilities",
    "k_ary_randomized_response",
    "k_ary_randomized_response_probabilities",
    "private_conformal_gamma",
    "private_conformal_level",
    "private_conformal_n_bins",
    "private_conformal_tight_coverage",
    "private_quantile",
    "private_quantile_probabilities",
    "private_quantile_rank_tail",
]
