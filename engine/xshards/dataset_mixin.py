"""``Dataset.to_xshards()``: a Dataset's blocks as the partitions of an XShards."""

from __future__ import annotations

from typing import Any


class XShardsMixin:
    """Conversion of a Dataset to Orca's XShards. Mixed into Dataset."""

    def to_xshards(self) -> Any:
        """This Dataset as an XShards of pandas DataFrames, one per block; lazy.

        Blocks become partitions without being copied: a shard is converted to a DataFrame
        only where a function or ``collect()`` needs it.

        Returns:
            An XShards (see :class:`shardflow.xshards.XShards`).

        Examples:
            >>> import shardflow as sf
            >>> shards = sf.range(4, override_num_blocks=2).to_xshards()
            >>> [len(df) for df in shards.collect()]
            [2, 2]
        """
        from shardflow.engine.xshards.shards import XShards

        return XShards._from_dataset(self)
