"""WebDataset: ``read_webdataset`` and ``Dataset.write_webdataset`` over tar shards of samples.
Tar files through the standard library; images need Pillow (``shardflow[webdataset]``)."""

from __future__ import annotations

from typing import Any

from shardflow.connectors.webdataset.datasink import WebDatasetDatasink
from shardflow.connectors.webdataset.datasource import WebDatasetDatasource

__all__ = ["WebDatasetDatasink", "WebDatasetDatasource"]


def __getattr__(name: str) -> Any:
    # ``shardflow check-connector webdataset`` finds the conformance suite here without the
    # connector importing the test kit.
    if name == "conformance":
        from shardflow.connectors.webdataset.conformance_suite import WebDatasetSuite

        return WebDatasetSuite
    raise AttributeError(name)
