"""Binary files: ``read_binary_files``, one row per file with its bytes in column ``bytes``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from shardflow.sdk.block import Block
from shardflow.sdk.file_datasource import FileBasedDatasource

_MAX_BINARY = 2**31 - 1


class BinaryDatasource(FileBasedDatasource):
    """Reads whole files as bytes. See :func:`shardflow.read_binary_files` for the arguments."""

    _ROWS_PER_FILE = 1
    _INFER_COMPRESSION = True  # x.gz reads as its decompressed content, as in Ray Data

    def __init__(self, paths: Any, **kwargs: Any):
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_binary_files: {sorted(self._file_args)}.")

    def get_name(self) -> str:
        return "Binary"

    def _static_schema(self) -> pa.Schema | None:
        return pa.schema([("bytes", pa.binary())])

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        data = f.read()
        arrow_type = pa.large_binary() if len(data) > _MAX_BINARY else pa.binary()
        yield pa.table({"bytes": pa.array([data], arrow_type)})
