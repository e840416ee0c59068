"""Parquet: ``read_parquet`` and ``Dataset.write_parquet``.

Reads go through ``pyarrow.dataset`` one row group at a time, so columns, filters and limits
cut what is read: only the requested column chunks are fetched, row groups whose statistics
rule out the filter are skipped, and a limit stops after the row groups it needs. A large
file is split into byte ranges at planning time (no file is opened on the driver); each read
task reads the row groups that start in its range.

Files whose schemas differ are read together: each file is unified with the first file of
the dataset (missing columns become nulls, compatible types are promoted, e.g. int32 and
int64 to int64) unless ``schema=`` is given; a file with an incompatible column raises an
error naming it, the column, and both types. No footer is read on the driver, so blocks of
different files can still differ (a column only later files have, a wider type); whole
results (``to_arrow``, ``to_pandas``, batches spanning blocks) are unified when joined. Pass
``schema=`` for one exact schema in every block.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterator, List, Optional

import pyarrow as pa

from shardflow.sdk.block import Block
from shardflow.sdk.file_datasink import BlockBasedFileDatasink
from shardflow.sdk.file_datasource import PATH_COLUMN, FileBasedDatasource
from shardflow.sdk.file_reading import FileUnit
from shardflow.sdk.parquet_reading import open_parquet_fragment, read_parquet_fragment
from shardflow.sdk.pushdowns import Pushdowns
from shardflow.sdk.retry import is_transient_error


class SchemaMismatchError(ValueError):
    """A Parquet file has a column whose type cannot be unified with other files."""


class ParquetDatasource(FileBasedDatasource):
    """Reads Parquet files. See :func:`shardflow.read_parquet` for the arguments.

    Supports projection pushdown (only needed columns are read) and exact predicate pushdown
    (engine expressions become ``pyarrow.dataset`` filters, which prune row groups by their
    statistics and drop non-matching rows).
    """

    _FILE_EXTENSIONS = ["parquet"]
    _ENCODING_RATIO = 5.0
    _MIN_SPLIT_BYTES = 32 * 1024 * 1024

    def __init__(
        self,
        paths: Any,
        *,
        columns: Optional[List[str]] = None,
        filter: Any = None,
        batch_size: Optional[int] = None,
        **kwargs: Any,
    ):
        super().__init__(paths, **kwargs)
        if self._file_args:
            raise TypeError(f"Unknown arguments for read_parquet: {sorted(self._file_args)}.")
        if columns is not None:
            if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
                raise TypeError("columns must be a list of column names.")
            self._pushdowns = Pushdowns(projection=tuple((c, c) for c in columns))
        if filter is not None:
            import pyarrow.compute as pc

            if not isinstance(filter, pc.Expression):
                raise TypeError(
                    "filter must be a pyarrow.dataset expression such as "
                    f"pyarrow.dataset.field('x') > 3; got {type(filter).__name__}."
                )
        if batch_size is not None and (
            isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
        ):
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        self._filter = filter
        self._batch_size = batch_size
        self._reference_path: Optional[str] = None
        self._reference_schema: Optional[pa.Schema] = None

    def get_name(self) -> str:
        return "Parquet"

    # -- planning ---------------------------------------------------------------------------

    def _units_to_read(self, units: List[FileUnit]) -> List[FileUnit]:
        if units and self._reference_path is None:
            self._reference_path = units[0].path
        predicate = self.pushdowns.filter
        if predicate is None or self._partition_schema is None:
            return units
        referenced = predicate.referenced_columns()
        if not referenced or not referenced <= set(self._partition_schema.names):
            return units
        kept, verdicts = [], {}
        for unit in units:
            if unit.partition not in verdicts:
                table = pa.table(
                    {
                        name: pa.array([value], self._partition_schema.field(name).type)
                        for name, value in unit.partition
                    }
                )
                verdicts[unit.partition] = bool(predicate.evaluate(table).to_pylist()[0])
            if verdicts[unit.partition]:
                kept.append(unit)
        return kept

    def _split_file(self, unit: FileUnit, target_bytes: int) -> List[FileUnit]:
        chunk = max(target_bytes, self._MIN_SPLIT_BYTES)
        if unit.size is None or unit.size < 1.5 * chunk:
            return [unit]
        pieces = math.ceil(unit.size / chunk)
        bounds = [round(i * unit.size / pieces) for i in range(pieces + 1)]
        bounds[-1] = unit.size + 1
        return [
            FileUnit(unit.path, hi - lo, unit.partition, (lo, hi))
            for lo, hi in zip(bounds[:-1], bounds[1:])
        ]

    # -- reading ----------------------------------------------------------------------------

    def _read_stream(self, f: Any, path: str) -> Iterator[Block]:
        return self._read_file(f, FileUnit(path, None))

    def _reference(self, physical: pa.Schema, unit: FileUnit) -> Optional[pa.Schema]:
        if self._reference_path is None or self._reference_path == unit.path:
            return None
        if self._reference_schema is None:
            import pyarrow.parquet as pq

            try:
                with self._open_file(self._reference_path) as f:
                    self._reference_schema = pq.read_schema(f)
            except Exception as exc:
                if is_transient_error(exc):
                    raise  # retried with the file being read
                # An unreadable first file is reported by the task that reads it; the
                # others are then read with their own schemas.
                self._reference_path = None
                return None
        return self._reference_schema

    def _scan_schema(self, physical: pa.Schema, unit: FileUnit) -> pa.Schema:
        if self._schema is not None:
            schema = self._schema
        else:
            reference = self._reference(physical, unit)
            schema = physical if reference is None else _unify(reference, physical, self, unit)
        if self._partition_schema is not None:
            extra = [f for f in self._partition_schema if f.name not in schema.names]
            schema = pa.schema(list(schema) + extra)
        return schema

    def _combined_filter(self) -> Any:
        filters = [
            f
            for f in (
                self._filter,
                self.pushdowns.filter.to_pyarrow() if self.pushdowns.filter is not None else None,
            )
            if f is not None
        ]
        if not filters:
            return None
        combined = filters[0]
        for extra in filters[1:]:
            combined = combined & extra
        return combined

    def _read_file(self, f: Any, unit: FileUnit) -> Iterator[Block]:
        import pyarrow.compute as pc

        partition_expression = None
        for name, value in unit.partition:
            arrow_type = self._partition_schema.field(name).type
            term = (
                pc.field(name).is_null()
                if value is None
                else pc.field(name) == pa.scalar(value, arrow_type)
            )
            partition_expression = (
                term if partition_expression is None else partition_expression & term
            )
        fragment = open_parquet_fragment(f, partition_expression=partition_expression)
        schema = self._scan_schema(fragment.physical_schema, unit)
        columns = None
        if self.pushdowns.columns is not None:
            columns = [c for c in self.pushdowns.columns if c != PATH_COLUMN or c in schema.names]
            columns = [c for c in columns if c in schema.names]
        yield from read_parquet_fragment(
            fragment,
            columns=columns,
            filter=self._combined_filter(),
            schema=schema,
            split=unit.split,
            batch_size=self._batch_size,
        )

    # -- predicate pushdown ---------------------------------------------------------------

    def supports_predicate_pushdown(self) -> bool:
        return True

    def is_predicate_pushdown_exact(self) -> bool:
        # pyarrow.dataset filters rows, not only row groups: every row read satisfies it.
        return True


def _unify(
    reference: pa.Schema, physical: pa.Schema, ds: ParquetDatasource, unit: FileUnit
) -> pa.Schema:
    for field in physical:
        index = reference.get_field_index(field.name)
        if index < 0:
            continue
        ref_type = reference.field(index).type
        if ref_type == field.type:
            continue
        try:
            pa.unify_schemas(
                [pa.schema([reference.field(index)]), pa.schema([field])],
                promote_options="permissive",
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            raise SchemaMismatchError(
                f"Parquet file {ds._display(unit.path)} has column {field.name!r} of type "
                f"{field.type}, which cannot be unified with type {ref_type} in "
                f"{ds._display(ds._reference_path)}. "
                "Pass schema= to read every file with one schema."
            ) from None
    return pa.unify_schemas([reference, physical], promote_options="permissive")


class ParquetDatasink(BlockBasedFileDatasink):
    """Writes Parquet files. See :meth:`shardflow.Dataset.write_parquet` for the arguments."""

    def __init__(
        self,
        path: str,
        *,
        compression: Optional[str] = "snappy",
        arrow_parquet_args_fn: Optional[Any] = None,
        arrow_parquet_args: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ):
        kwargs.setdefault("file_format", "parquet")
        super().__init__(path, **kwargs)
        if arrow_parquet_args_fn is not None and not callable(arrow_parquet_args_fn):
            raise TypeError("arrow_parquet_args_fn must be a function returning a dict.")
        self.compression = compression
        self.arrow_parquet_args_fn = arrow_parquet_args_fn
        self.arrow_parquet_args = dict(arrow_parquet_args or {})

    def get_name(self) -> str:
        return "Parquet"

    def write_block_to_file(self, block: Block, f: Any) -> None:
        import pyarrow.parquet as pq

        args = dict(self.arrow_parquet_args)
        if self.arrow_parquet_args_fn is not None:
            args.update(self.arrow_parquet_args_fn())
        args.setdefault("compression", self.compression)
        pq.write_table(block, f, **args)
