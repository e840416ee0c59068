"""Images: ``read_images`` and ``Dataset.write_images``, decoded and encoded with
Pillow (extra ``shardflow[images]``)."""

from __future__ import annotations

from shardflow.connectors.images.datasink import ImageDatasink
from shardflow.connectors.images.datasource import ImageDatasource

__all__ = ["ImageDatasink", "ImageDatasource"]
