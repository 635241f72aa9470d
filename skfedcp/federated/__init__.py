"""Federation helpers: client partitions (and, later, secure-sum simulation)."""

from ._partition import ClientPartition, split_by_client

__all__ = ["ClientPartition", "split_by_client"]
