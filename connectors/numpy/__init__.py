"""NumPy files: ``read_numpy`` and ``Dataset.write_numpy`` (.npy, tensors as
Arrow's canonical tensor type)."""

from __future__ import annotations

from shardflow.connectors.numpy.datasink import NumpyDatasink
from shardflow.connectors.numpy.datasource import NumpyDatasource

__all__ = ["NumpyDatasink", "NumpyDatasource"]
