"""Federated feature selection and statistics by stable projection (FED-chi2, FED-H).

:class:`FedChi2Selector` is a drop-in for ``SelectKBest(chi2)`` whose server
only sees securely aggregated marginals and sketches. The protocol steps are
public functions over plain arrays, so a deployment can run the client and
server sides on different machines.
"""

from ._chi2 import FedChi2Selector, fed_chi2
from ._entropy import (
    ENTROPY_FRAC_BITS,
    Chi2TestResult,
    entropy_client_encode,
    entropy_server_decode,
    fed_chi2_test,
    fed_entropy,
)
from ._plan import Chi2RoundOnePlan, chi2_server_plan
from ._protocol import (
    Chi2Marginals,
    Chi2Scores,
    chi2_client_encode,
    chi2_client_marginals,
    chi2_frac_bits,
    chi2_server_decode,
    chi2_server_marginals,
)
from ._sketch import (
    estimate_frequency_moment,
    required_projection_dim,
    stable_projection,
)

__all__ = [
    "ENTROPY_FRAC_BITS",
    "Chi2Marginals",
    "Chi2RoundOnePlan",
    "Chi2Scores",
    "Chi2TestResult",
    "FedChi2Selector",
    "chi2_client_encode",
    "chi2_client_marginals",
    "chi2_frac_bits",
    "chi2_server_decode",
    "chi2_server_marginals",
    "chi2_server_plan",
    "entropy_client_encode",
    "entropy_server_decode",
    "estimate_frequency_moment",
    "fed_chi2",
    "fed_chi2_test",
    "fed_entropy",
    "required_projection_dim",
    "stable_projection",
]
