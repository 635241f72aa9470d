"""Offline data sets, partitioners and synthetic generators for federated CP.

Loaders return a Bunch with a ``client_ids`` entry (the natural client column,
or None); with ``return_X_y=True`` they return ``(X, y, client_ids)``.
"""

from ._bikeshare import load_bikeshare
from ._caravan import load_caravan
from ._concrete import load_concrete
from ._fashion_mnist import load_fashion_mnist
from ._generators import make_federated_regression, make_romano_regression
from ._partition import partition_by_column, partition_dirichlet, partition_iid
from ._randhie import load_randhie
from ._star import load_star

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
