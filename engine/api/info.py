"""Dataset methods that describe a dataset or hand it to another library.

``input_files``, ``size_bytes``, ``num_blocks`` and ``to_daft``, mixed into Dataset. They
read what the plan already knows (listings, block metadata) before running anything.
"""

from __future__ import annotations

from typing import Any

from shardflow.engine.plan.logical import BlocksSource, LogicalPlan, ReadSource


class DatasetInfoMixin:
    """Metadata and interchange methods of Dataset."""

    _plan: LogicalPlan

    def input_files(self) -> list[str]:
        """The files this dataset reads, or an empty list when it reads none.

        As in Ray Data the list comes from the plan's read: a dataset built in memory (or
        materialized) reports no files.

        Examples:
            >>> import shardflow as sf, tempfile
            >>> folder = tempfile.mkdtemp()
            >>> sf.range(3, override_num_blocks=1).write_csv(folder)
            >>> [path.endswith(".csv") for path in sf.read_csv(folder).input_files()]
            [True]
        """
        source = self._plan.source
        if not isinstance(source, ReadSource):
            return []
        datasource = source.datasource
        units = getattr(datasource, "_file_units", None)
        if units is None:
            return []
        files: list[str] = []
        seen = set()
        for unit in units():
            shown = datasource._display(unit.path)
            if shown not in seen:
                seen.add(shown)
                files.append(shown)
        return files

    def size_bytes(self) -> int:
        """The in-memory size of the dataset in bytes.

        Taken from metadata when known (blocks in memory, or a read whose tasks estimate
        their size); otherwise the plan runs and the sizes of its blocks are added up.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(10).size_bytes()
            80
        """
        known = self._known_size_bytes()
        if known is not None:
            return known
        return sum(block.nbytes for block in self._iter_blocks())  # type: ignore[attr-defined]

    def _known_size_bytes(self) -> int | None:
        if self._plan.ops:
            return None
        source = self._plan.source
        if isinstance(source, BlocksSource):
            if source.metadata is not None:
                sizes = [m.size_bytes for m in source.metadata]
                return None if any(s is None for s in sizes) else int(sum(sizes))
            return int(sum(b.nbytes for b in source.blocks))
        if isinstance(source, ReadSource):
            estimate = source.datasource.estimate_inmemory_data_size()
            return None if estimate is None else int(estimate)
        return None

    def num_blocks(self) -> int:
        """The number of blocks of a materialized dataset (or one built from memory).

        Raises:
            NotImplementedError: for a lazy dataset, as in Ray Data: its number of blocks is
                known only once it runs; call ``materialize()`` first.

        Examples:
            >>> import shardflow as sf
            >>> sf.range(10, override_num_blocks=2).materialize().num_blocks()
            2
        """
        source = self._plan.source
        if isinstance(source, BlocksSource) and not self._plan.ops:
            return len(source.blocks)
        raise NotImplementedError(
            "Number of blocks is only available for a materialized dataset, because the "
            "number of blocks may change during execution. Call ds.materialize() first."
        )

    def to_daft(self) -> Any:
        """The dataset as a Daft DataFrame (needs ``pip install daft``).

        Runs the plan and hands the Arrow blocks to ``daft.from_arrow``.
        """
        daft = _import("daft", "to_daft")
        blocks = [b for b in self._iter_blocks() if b.num_columns]  # type: ignore[attr-defined]
        if not blocks:
            schema = self._arrow_schema()  # type: ignore[attr-defined]
            import pyarrow as pa

            blocks = [pa.table({}) if schema is None else schema.empty_table()]
        return daft.from_arrow(blocks)


def _import(module: str, feature: str) -> Any:
    from shardflow.sdk.optional import EXTRAS, require

    return require(module, EXTRAS[module], feature)
