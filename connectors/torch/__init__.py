"""``from_torch``: a map-style torch Dataset read in parallel (extra
``shardflow[torch]``)."""

from __future__ import annotations

from shardflow.connectors.torch.datasource import TorchDatasource

__all__ = ["TorchDatasource"]
