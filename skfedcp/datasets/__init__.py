"""Offline data sets, partitioners and synthetic generators for federated CP.

Loaders return a Bunch with a ``client_ids`` entry (the natural client column,
or None); with ``return_X_y=True`` they return ``(X, y, client_ids)``.
"""

from ._base import (
    load_bikeshare,
    load_caravan,
    load_concrete,
    load_fashion_mnist,
    load_randhie,
    load_star,
)
from ._generators import make_federated_regression, make_romano_regression
from ._partition import partition_by_column, partition_dirichlet, partition_iid

__all__ = [
    "load_bikeshare",
    "load_caravan",
    "load_concrete",
    "load_fashion_mnist",
    "load_randhie",
    "load_star",
    "make_federated_regression",
    "make_romano_regression",
    "partition_by_column",
    "partition_dirichlet",
    "partition_iid",
]
