"""Federation helpers: client partitions and the secure-sum simulation.

The Flower adapter lives in :mod:`skfedcp.flower`.
"""

from ._fixed_point import (
    FixedPointPlan,
    fixed_point_decode,
    fixed_point_encode,
    fixed_point_plan,
)
from ._partition import ClientPartition, split_by_client
from ._secure_aggregation import (
    MaskingSetup,
    make_masking_setup,
    mask_input,
    secure_aggregation_graph,
    secure_sum,
    unmask_sum,
)

__all__ = [
    "ClientPartition",
    "FixedPointPlan",
    "MaskingSetup",
    "fixed_point_decode",
    "fixed_point_encode",
    "fixed_point_plan",
    "make_masking_setup",
    "mask_input",
    "secure_aggregation_graph",
    "secure_sum",
    "split_by_client",
    "unmask_sum",
]
