"""The smaller names of Ray Data's ``ray.data.datasource``: partition styles and path
parsing, file metadata providers, a sink that drops its rows, a source of random integers,
and the legacy ``Reader`` base class.

Examples:
    >>> from shardflow.datasource import Partitioning, PathPartitionParser
    >>> PathPartitionParser(Partitioning("hive"))("root/year=2024/month=05/part.csv")
    {'year': '2024', 'month': '05'}
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from shardflow.sdk.datasink import Datasink, TaskContext, WriteResult
from shardflow.sdk.datasource import Datasource, ReadTask
from shardflow.sdk.partitioning import Partitioning

Connection = Any
"""A DB-API 2 connection (what ``read_sql``'s ``connection_factory`` returns)."""


class PartitionStyle(str, enum.Enum):
    """How partition values are written in paths: ``key=value`` folders or bare values."""

    HIVE = "hive"
    DIRECTORY = "dir"


class PathPartitionParser:
    """Reads the partition values a path holds, as ``Partitioning`` describes them.

    Args:
        partitioning: The partitioning scheme.

    Examples:
        >>> from shardflow.datasource import Partitioning, PathPartitionParser
        >>> parse = PathPartitionParser(Partitioning("dir", field_names=["y"], base_dir="r"))
        >>> parse("r/2020/f.csv")
        {'y': '2020'}
    """

    def __init__(self, partitioning: Partitioning):
        if not isinstance(partitioning, Partitioning):
            raise TypeError(f"PathPartitionParser needs a Partitioning, got {partitioning!r}.")
        self._scheme = partitioning

    @staticmethod
    def of(
        style: PartitionStyle | str = PartitionStyle.HIVE,
        base_dir: str | None = None,
        field_names: list[str] | None = None,
        field_types: dict[str, Any] | None = None,
        filesystem: Any = None,
    ) -> PathPartitionParser:
        """A parser of a new ``Partitioning`` of these arguments."""
        scheme = Partitioning(
            PartitionStyle(style).value, base_dir, field_names, field_types or {}, filesystem
        )
        return PathPartitionParser(scheme)

    @property
    def scheme(self) -> Partitioning:
        """The partitioning scheme."""
        return self._scheme

    def __call__(self, path: str) -> dict[str, str | None]:
        """The raw (string) partition values of ``path``."""
        base = (self._scheme.base_dir or "").rstrip("/")
        relative = path
        if base and (path == base or path.startswith(base + "/")):
            relative = path[len(base) :].lstrip("/")
        elif self._scheme.style == "dir" and base:
            return {}
        return self._scheme.parse(relative)


class FileMetadataProvider:
    """Base class of what lists the files of a read and tells their sizes."""

    def expand_paths(
        self,
        paths: list[str],
        filesystem: Any,
        partitioning: Partitioning | None = None,
        ignore_missing_paths: bool = False,
    ) -> Iterator[tuple[str, int | None]]:
        """``(path, size in bytes)`` of each file under ``paths`` (folders recursively)."""
        raise NotImplementedError


class BaseFileMetadataProvider(FileMetadataProvider):
    """Abstract base of file metadata providers (Ray Data's name)."""


class DefaultFileMetadataProvider(BaseFileMetadataProvider):
    """Lists files with the filesystem (an fsspec or ``pyarrow.fs`` one), recursively."""

    def expand_paths(
        self,
        paths: list[str],
        filesystem: Any,
        partitioning: Partitioning | None = None,
        ignore_missing_paths: bool = False,
    ) -> Iterator[tuple[str, int | None]]:
        from shardflow.sdk.paths import expand_paths

        for item in expand_paths(
            filesystem, list(paths), ignore_missing_paths=ignore_missing_paths
        ):
            yield item.path, item.size


class DummyOutputDatasink(Datasink[int]):
    """A sink that drops what it receives, counting rows and writes (for tests).

    Examples:
        >>> import shardflow as sf
        >>> from shardflow.datasource import DummyOutputDatasink
        >>> sink = DummyOutputDatasink()
        >>> sf.range(10).write_datasink(sink)
        >>> sink.num_ok, sink.rows_written
        (1, 10)
    """

    def __init__(self) -> None:
        self.num_ok = 0
        self.num_failed = 0
        self.enabled = True
        self.rows_written = 0

    def write(self, blocks: Iterable[Any], ctx: TaskContext) -> int:
        if not self.enabled:
            raise ValueError("disabled")
        return sum(block.num_rows for block in blocks)

    def on_write_complete(self, write_result: WriteResult[Any]) -> None:
        self.num_ok += 1
        self.rows_written += write_result.num_rows

    def on_write_failed(self, error: Exception) -> None:
        self.num_failed += 1


class RandomIntRowDatasource(Datasource):
    """``n`` rows of ``num_columns`` random int64 columns ``c_0``, ``c_1``, ... (for tests).

    Args:
        n: Number of rows.
        num_columns: Number of columns.
    """

    def __init__(self, n: int, num_columns: int):
        for name, value in (("n", n), ("num_columns", num_columns)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}.")
        self._n, self._num_columns = n, num_columns

    def get_name(self) -> str:
        return "RandomInt"

    def estimate_inmemory_data_size(self) -> int | None:
        return self._n * self._num_columns * 8

    def get_read_tasks(
        self,
        parallelism: int,
        per_task_row_limit: int | None = None,
        data_context: Any | None = None,
        **kwargs: Any,
    ) -> list[ReadTask]:
        from shardflow.sdk.block import BlockMetadata

        parts = max(1, min(int(parallelism), self._n or 1))
        bounds = np.linspace(0, self._n, parts + 1, dtype=np.int64)
        schema = pa.schema([(f"c_{i}", pa.int64()) for i in range(self._num_columns)])
        tasks = []
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            rows = int(hi - lo)
            meta = BlockMetadata(num_rows=rows, size_bytes=rows * self._num_columns * 8)
            tasks.append(ReadTask(_RandomInts(rows, schema), meta, schema=schema))
        return tasks


class _RandomInts:
    def __init__(self, rows: int, schema: pa.Schema):
        self.rows, self.schema = rows, schema

    def __call__(self) -> Iterator[pa.Table]:
        rng = np.random.default_rng()
        high = np.iinfo(np.int64).max
        columns = [rng.integers(0, high, self.rows, dtype=np.int64) for _ in self.schema.names]
        yield pa.Table.from_arrays(columns, schema=self.schema)


class Reader:
    """Ray Data's legacy read interface (``Datasource.create_reader``); implement
    ``get_read_tasks`` and ``estimate_inmemory_data_size`` on a :class:`Datasource` instead."""

    def estimate_inmemory_data_size(self) -> int | None:
        raise NotImplementedError

    def get_read_tasks(self, parallelism: int) -> list[ReadTask]:
        raise NotImplementedError


__all__ = [
    "BaseFileMetadataProvider",
    "Connection",
    "DefaultFileMetadataProvider",
    "DummyOutputDatasink",
    "FileMetadataProvider",
    "PartitionStyle",
    "PathPartitionParser",
    "RandomIntRowDatasource",
    "Reader",
]
