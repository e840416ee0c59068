"""ORCDatasource: ORC files read with ``pyarrow.orc``, one block per stripe."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource


def _orc() -> Any:
    import pyarrow.orc

    return pyarrow.orc


class ORCDatasource(FileBasedDatasource):
    """Reads ORC files. See :func:`shardflow.read_orc` for the arguments.

    Each file is opened seekable (ORC keeps its metadata in a footer) and read one stripe at
    a time, so a task holds one stripe of a large file, not the whole file; empty stripes
    yield nothing. A projection (``select_columns`` after the read) reads only those
    columns' streams. The first file's footer gives the read's schema at planning time.
    """

    _FILE_EXTENSIONS = ["orc"]
    _RANDOM_ACCESS = True  # the footer is at the end of the file
    _ENCODING_RATIO = 3.0  # ORC's run-length and dictionary encodings, then compression

    def __init__(self, paths: Any, **kwargs: Any):
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_orc: {sorted(self._file_args)}.")

    def get_name(self) -> str:
        return "ORC"

    def _file_columns(self, schema: pa.Schema) -> list[str] | None:
        """The file's columns a projection needs (None: every column)."""
        columns = self.pushdowns.columns
        if columns is None:
            return None
        return [name for name in schema.names if name in set(columns)]

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        orc_file = _orc().ORCFile(f)  # the file layer names the file in any error
        columns = self._file_columns(orc_file.schema)
        # A stripe read with no columns has no rows either: read one column for the count
        # when only partition or path columns are asked for.
        counted = columns if columns != [] else orc_file.schema.names[:1]
        for stripe in range(orc_file.nstripes):
            table = pa.Table.from_batches([orc_file.read_stripe(stripe, columns=counted)])
            if table.num_rows:
                yield table if columns != [] else table.select([])

    def _schema_of_file(self, path: str) -> pa.Schema | None:
        with self._open_file(path) as f:
            return _orc().ORCFile(f).schema
