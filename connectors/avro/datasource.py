"""AvroDatasource: Avro object container files read with fastavro, typed by their schema."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

import pyarrow as pa

from shardflow.connectors.avro.arrow_types import ITEM, RecordLayout, layout_of
from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource
from shardflow.sdk.object_column import objects_to_arrow
from shardflow.sdk.optional import require

_FIRST_BLOCK_ROWS = 4096
_BLOCK_BYTES = 8 * 1024 * 1024  # later blocks are sized to about this many bytes in Arrow


def _fastavro() -> Any:
    return require("fastavro", "avro", "Reading Avro files")


class AvroDatasource(FileBasedDatasource):
    """Reads Avro object container files. See :func:`shardflow.read_avro` for the arguments.

    Each file is read as a forward-only stream with ``fastavro.reader``; its header's schema
    gives the Arrow schema of its blocks (see :mod:`shardflow.connectors.avro.arrow_types`).
    Blocks compressed with ``deflate``, ``bzip2``, ``xz`` and ``snappy`` (cramjam, in the
    ``avro`` extra) are read as fastavro reads them; ``zstandard`` needs the package fastavro
    names in its error (``backports.zstd`` before Python 3.14).
    """

    _FILE_EXTENSIONS = None  # every file, as Ray Data's read_avro (pass ["avro"] to filter)
    _ENCODING_RATIO = 2.0  # Avro's varints and zig-zag integers are smaller than Arrow's

    def __init__(self, paths: Any, **kwargs: Any):
        _fastavro()  # a missing fastavro is reported when read_avro is called, not when run
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_avro: {sorted(self._file_args)}.")

    def get_name(self) -> str:
        return "Avro"

    def reads_hold_the_gil(self) -> bool:
        return True  # records are decoded one by one in Python: worker processes, locally

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        fastavro = _fastavro()
        reader = fastavro.reader(f)
        layout = layout_of(fastavro.parse_schema(reader.writer_schema))
        rows_per_block = _FIRST_BLOCK_ROWS
        produced = False
        while True:
            records = list(islice(reader, rows_per_block))
            if not records and produced:
                return
            table = records_to_table(records, layout)
            produced = True
            yield table
            if len(records) < rows_per_block:
                return
            per_row = max(1, table.nbytes // max(1, table.num_rows))
            rows_per_block = max(256, min(65536, _BLOCK_BYTES // per_row))


def records_to_table(records: list[Any], layout: RecordLayout) -> pa.Table:
    """The records fastavro read, as a table of ``layout.schema``."""
    if layout.wrapped:
        records = [{ITEM: value} for value in records]
    table = pa.Table.from_pylist(records, schema=layout.plain)
    if not layout.objects:
        return table
    columns = []
    for field in layout.schema:
        if field.name in layout.objects:
            columns.append(objects_to_arrow([record.get(field.name) for record in records]))
        else:
            columns.append(table.column(field.name))
    return pa.Table.from_arrays(columns, schema=layout.schema)
